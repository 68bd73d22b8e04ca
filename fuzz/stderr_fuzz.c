/* libFuzzer target for what the host keeps of a dying helper's stderr (src/core/helper_stderr.c):
 * the first byte is the room (1 to 256 bytes, as in an error message), the rest goes through
 * a real pipe in the pieces the helper might write. The words must fit, be well-formed UTF-8
 * with no control byte but inner newlines, and, for plain text, be its end (whole lines, or
 * "..." and the end of the last). Builds without libFuzzer too, for fuzz/replay.c. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "util/util.h"

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "stderr_fuzz: %s:%d: check failed: %s\n", __FILE__,        \
				__LINE__, #cond);                                                  \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Whether text is printable ASCII and newlines only: then the words are its end. */
static bool plain_text(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (s[i] != '\n' && (s[i] < 0x20 || s[i] >= 0x7f))
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (1u << 20))
		return 0;
	size_t out_len = (size_t)data[0] + 1;
	const uint8_t *said = data + 1;
	size_t said_len = size - 1;
	struct sc_helper_stderr *h = NULL;
	int w = -1;
	CHECK(sc__helper_stderr_new(&h, &w) == 0);
	/* Pieces of a size the input picks, each drained before the pipe could fill. */
	size_t piece = 1 + (said_len ? said[0] % 7919 : 0);
	for (size_t at = 0; at < said_len; at += piece) {
		size_t n = said_len - at < piece ? said_len - at : piece;
		CHECK(sc__write_all(w, said + at, n) == 0);
		sc__helper_stderr_drain(h);
	}
	close(w);
	sc__helper_stderr_drain(h);
	CHECK(h->fd == -1 && h->len <= SC_HELPER_STDERR_MAX);
	CHECK(h->len == (said_len < SC_HELPER_STDERR_MAX ? said_len : SC_HELPER_STDERR_MAX));
	CHECK(memcmp(h->tail, said + said_len - h->len, h->len) == 0);

	char out[257];
	memset(out, 'X', sizeof(out));
	size_t n = sc__helper_stderr_words(h, out, out_len);
	CHECK(n < out_len && out[n] == 0 && strlen(out) == n);
	CHECK(sc__utf8_valid(out, n));
	for (size_t i = 0; i < n; i++)
		CHECK(out[i] == '\n' || ((unsigned char)out[i] >= 0x20 && out[i] != 0x7f));
	CHECK(n == 0 || (out[0] != '\n' && out[n - 1] != '\n'));
	if (plain_text(said, said_len) && !h->cut && n > 0) {
		const char *shown = strncmp(out, "...", 3) == 0 ? out + 3 : out;
		size_t len = strlen(shown);
		const uint8_t *end = said + said_len;
		while (end > said && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
			end--;
		CHECK((size_t)(end - said) >= len && memcmp(end - len, shown, len) == 0);
	}
	sc__helper_stderr_free(h);
	return 0;
}
