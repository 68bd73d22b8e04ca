/* libFuzzer target for the host's check of a cell's VALUE frame (src/core/value.c): whatever
 * the payload, the answer is -EPROTO, or a state, and a value only when it is JSON jansson
 * reads, within SNAPCELL_VALUE_MAX_BYTES, byte for byte the payload's text. Builds without
 * libFuzzer too, for fuzz/replay.c. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "value_fuzz: %s:%d: check failed: %s\n", __FILE__,         \
				__LINE__, #cond);                                                  \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *json = (char *)"unset";
	enum snapcell_value_state state = SNAPCELL_VALUE_NOT_EVALUATED;
	int rc = sc__value_read(data, size, &json, &state);
	if (rc < 0) {
		CHECK(rc == -EPROTO || rc == -ENOMEM);
		CHECK(json == NULL);
		return 0;
	}
	CHECK(rc == 0 && size >= 1);
	CHECK(state >= SNAPCELL_VALUE_PRESENT && state <= SNAPCELL_VALUE_TOO_LARGE);
	CHECK((json != NULL) == (state == SNAPCELL_VALUE_PRESENT));
	if (!json)
		return 0;
	size_t n = strlen(json);
	CHECK(n == size - 1 && n <= SNAPCELL_VALUE_MAX_BYTES && !memcmp(json, data + 1, n));
	json_t *v =
		json_loads(json, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, NULL);
	CHECK(v != NULL);
	json_decref(v);
	free(json);
	return 0;
}
