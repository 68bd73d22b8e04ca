/* The last expression's value as the cell reports it (its VALUE frame): checked here before a
 * result carries it, so every front end can parse it as it is. Not where the value is made:
 * that is the guest's prelude (split, evaluate, encode). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

/* Nesting the host accepts in a value, as for a tool call's arguments: a deeper text is
 * refused before jansson builds the tree (its parser recurses). */
#define VALUE_MAX_DEPTH 64

/* Whether text is one JSON value jansson takes as it is: valid UTF-8, no duplicate keys, and
 * numbers read as doubles (an integer past int64 is still JSON). */
static bool is_json(const char *text, size_t len)
{
	unsigned depth;
	size_t values;
	snapcell_json_measure(text, len, &depth, &values);
	if (depth > VALUE_MAX_DEPTH || memchr(text, 0, len))
		return false;
	json_t *v = json_loadb(text, len,
			       JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL |
				       JSON_DECODE_INT_AS_REAL,
			       NULL);
	json_decref(v);
	return v != NULL;
}

int sc__value_read(const uint8_t *payload, size_t len, char **json,
		   enum snapcell_value_state *state)
{
	*json = NULL;
	if (len < 1 || payload[0] < SNAPCELL_VALUE_PRESENT || payload[0] > SNAPCELL_VALUE_TOO_LARGE)
		return -EPROTO;
	*state = (enum snapcell_value_state)payload[0];
	if (*state != SNAPCELL_VALUE_PRESENT)
		return len == 1 ? 0 : -EPROTO;
	const char *text = (const char *)payload + 1;
	size_t n = len - 1;
	if (n > SNAPCELL_VALUE_MAX_BYTES) {
		*state = SNAPCELL_VALUE_TOO_LARGE;
		return 0;
	}
	if (!is_json(text, n)) {
		*state = SNAPCELL_VALUE_NOT_JSON;
		return 0;
	}
	if (!(*json = malloc(n + 1)))
		return -ENOMEM;
	memcpy(*json, text, n);
	(*json)[n] = 0;
	return 0;
}
