/* libFuzzer target for the ClientHello reader (src/net/sni.c): every prefix of the input must
 * be a clean answer (a name, none, more needed, or malformed), a name must fit and be
 * printable lower-case ASCII, and a whole hello that gave a name must give the same name when
 * read again with room to spare. Builds without libFuzzer too, for fuzz/replay.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/gate.h"

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "sni_fuzz: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                            \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *name, size_t cap)
{
	size_t n = strnlen(name, cap);
	CHECK(n > 0 && n < cap);
	for (size_t i = 0; i < n; i++)
		CHECK(name[i] > 0x20 && name[i] < 0x7f && !(name[i] >= 'A' && name[i] <= 'Z'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[256], again[512];
	/* A private copy, so a read past the end is a sanitizer error, not luck. */
	uint8_t *buf = malloc(size ? size : 1);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	int whole = sc__tls_sni(buf, size, name, sizeof(name));
	CHECK(whole == 1 || whole == 0 || whole == -EAGAIN || whole == -EPROTO);
	if (whole == 1) {
		check_name(name, sizeof(name));
		CHECK(sc__tls_sni(buf, size, again, sizeof(again)) == 1 && !strcmp(name, again));
	}
	for (size_t cut = 0; cut < size && cut < 4096; cut++) {
		int rc = sc__tls_sni(buf, cut, name, sizeof(name));
		CHECK(rc == 1 || rc == 0 || rc == -EAGAIN || rc == -EPROTO);
		if (rc == 1)
			check_name(name, sizeof(name));
	}
	free(buf);
	return 0;
}
