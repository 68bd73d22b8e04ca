/* libFuzzer target for the setup message's codec (src/rpc/setup.c): decodes arbitrary bytes;
 * what decodes must encode, and decode again to the same encoding (no value lost or invented
 * on the way). Builds without libFuzzer too, for fuzz/replay.c. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/setup.h"

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "setup_fuzz: %s:%d: check failed: %s\n", __FILE__,         \
				__LINE__, #cond);                                                  \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sc_setup s, again;
	struct snapcell_error err = {0};
	if (sc__setup_decode((const char *)data, size, &s, &err) < 0) {
		CHECK(err.code != 0 && err.message[0]);
		sc__setup_clear(&s);
		return 0;
	}
	size_t len = 0, len2 = 0;
	char *text = sc__setup_encode(&s, &len);
	CHECK(text);
	CHECK(sc__setup_decode(text, len, &again, &err) == 0);
	char *text2 = sc__setup_encode(&again, &len2);
	CHECK(text2 && len == len2 && memcmp(text, text2, len) == 0);
	free(text);
	free(text2);
	sc__setup_clear(&s);
	sc__setup_clear(&again);
	return 0;
}
