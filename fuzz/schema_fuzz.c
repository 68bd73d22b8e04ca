/* libFuzzer target for tool parameter schemas: arbitrary bytes as a schema (JSON text), a NUL,
 * and a value (JSON text); registration must refuse or compile the schema, checking must end
 * within its budgets, and the text a callback would get must parse to the value checked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/core.h"

/* What registration stores (compact, sorted keys) must register again: sandboxes copy their
 * config's tools that way. */
static void expect_recompiles(const json_t *schema)
{
	char why[256];
	char *text = json_dumps(schema, JSON_COMPACT | JSON_SORT_KEYS);
	json_t *again = text ? json_loads(text, JSON_REJECT_DUPLICATES, NULL) : NULL;
	if (text && (!again || sc__schema_validate(again, why, sizeof(why)) < 0))
		abort();
	json_decref(again);
	free(text);
}

static void expect_exact_numbers(const char *text, size_t len, const json_t *value)
{
	char *exact = sc__json_exact_numbers(text, len);
	if (!exact)
		return;
	json_t *back = json_loads(exact, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	if (!back || !json_equal(back, (json_t *)value))
		abort();
	json_decref(back);
	free(exact);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	if (!nul)
		return 0;
	size_t schema_len = (size_t)(nul - data), value_len = size - schema_len - 1;
	const char *value_text = (const char *)nul + 1;
	json_t *root = json_loadb((const char *)data, schema_len, JSON_REJECT_DUPLICATES, NULL);
	json_t *value = json_loadb(value_text, value_len,
				   JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
	char why[256];
	struct sc_schema *schema = NULL;
	if (root && sc__schema_compile(root, &schema, why, sizeof(why)) == 0) {
		if (sc__schema_validate(root, why, sizeof(why)) < 0)
			abort();
		expect_recompiles(root);
		if (value && sc__schema_check(schema, value, why, sizeof(why)) < 0 && !why[0])
			abort(); /* a refusal always says why */
	}
	if (value && !memchr(value_text, 0, value_len))
		expect_exact_numbers(value_text, value_len, value);
	sc__schema_free(schema);
	json_decref(root);
	json_decref(value);
	return 0;
}
