/* libFuzzer target for the host's side of a tool call: arbitrary bytes as a CALL payload
 * (tool name, NUL, arguments JSON) through lookup, the depth cap, jansson and the schema
 * check, to a callback. The callback must only ever see arguments that passed the schema. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core/core.h"
#include "rpc/frame.h"

static const char schema[] =
	"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\", \"minimum\": 0},"
	" \"tags\": {\"type\": \"array\", \"items\": {\"type\": \"string\", \"maxLength\": 8},"
	" \"maxItems\": 4}, \"mode\": {\"enum\": [\"x\", \"y\"]}}, \"required\": [\"a\"],"
	" \"additionalProperties\": false}";

static int strict(void *user, const char *args, char **result)
{
	json_t *v = json_loads(args, JSON_ALLOW_NUL, NULL);
	json_t *a = json_object_get(v, "a");
	/* The schema said: an object with a non-negative integer "a" and nothing unknown. */
	if (!json_is_object(v) || !json_is_number(a) || json_number_value(a) < 0)
		abort();
	json_decref(v);
	*result = strdup("{\"ok\": true}");
	return 0;
}

static int echo(void *user, const char *args, char **result)
{
	*result = strdup(args);
	return 0;
}

static struct snapcell_config *config(void)
{
	static struct snapcell_config *cfg;
	if (!cfg) {
		cfg = snapcell_config_new();
		snapcell_config_add_tool(cfg, "strict", "", schema, SNAPCELL_APPROVAL_NEVER, strict,
					 NULL, NULL);
		snapcell_config_add_tool(cfg, "echo", "", NULL, SNAPCELL_APPROVAL_NEVER, echo, NULL,
					 NULL);
	}
	return cfg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* The frame reader always NUL-terminates what it hands over; do the same. */
	uint8_t *payload = malloc(size + 1);
	if (!payload)
		return 0;
	memcpy(payload, data, size);
	payload[size] = 0;
	struct sc_call_outcome out;
	if (sc__tool_serve(config(), NULL, payload, size, 1 << 20, 0, -1, false, &out) == 0) {
		if (!out.text)
			abort();
		free(out.text);
	}
	free(payload);
	return 0;
}
