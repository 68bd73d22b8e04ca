/* libFuzzer target for the MCP server's message envelope (mcp/envelope.c): arbitrary bytes
 * as one JSON-RPC message. It aborts if a message is accepted in a shape the server would
 * misread, or refused without an answer that is itself a well-formed JSON-RPC error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "../mcp/mcp.h"

static void check_accepted(const struct mcp_message *m)
{
	if (!json_is_object(m->root))
		abort();
	if (m->params && !json_is_object(m->params))
		abort();
	switch (m->kind) {
	case MCP_REQUEST:
		if (!m->method || !*m->method || !(json_is_string(m->id) || json_is_integer(m->id)))
			abort();
		break;
	case MCP_NOTIFICATION:
		if (!m->method || m->id)
			abort();
		break;
	case MCP_RESPONSE:
		if (m->method || !m->id)
			abort();
		break;
	}
}

static void check_error(json_t *e)
{
	json_t *error = json_object_get(e, "error");
	json_t *code = json_object_get(error, "code");
	json_t *id = json_object_get(e, "id");
	if (!json_is_integer(code) || !json_is_string(json_object_get(error, "message")))
		abort();
	json_int_t c = json_integer_value(code);
	if (c != MCP_PARSE_ERROR && c != MCP_INVALID_REQUEST && c != MCP_INVALID_PARAMS)
		abort();
	if (!(json_is_null(id) || json_is_string(id) || json_is_integer(id)))
		abort();
	/* The answer must survive the writer: one line of compact JSON. */
	char *text = json_dumps(e, JSON_COMPACT);
	if (!text || strchr(text, '\n'))
		abort();
	free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp_message m;
	json_t *error = NULL;
	if (mcp_envelope_parse((const char *)data, size, &m, &error) == 0) {
		check_accepted(&m);
		json_t *reply = mcp_response(m.id ? m.id : json_null(), json_object());
		if (!reply)
			abort();
		json_decref(reply);
		mcp_message_clear(&m);
	} else if (error) {
		check_error(error);
		json_decref(error);
	}
	return 0;
}
