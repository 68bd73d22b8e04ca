/* libFuzzer target for the MCP server's message envelope (mcp/envelope.c): arbitrary bytes
 * as one JSON-RPC message, then, for a request, the era check without headers (stdio) and
 * with HTTP routing headers taken from the body (the Mcp-Name decoder sees params.name). It
 * aborts if a message is accepted in a shape the server would misread, or refused without an
 * answer that is itself a well-formed JSON-RPC error. */
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
	if (c != MCP_PARSE_ERROR && c != MCP_INVALID_REQUEST && c != MCP_INVALID_PARAMS &&
	    c != MCP_HEADER_MISMATCH && c != MCP_UNSUPPORTED_VERSION)
		abort();
	if (!(json_is_null(id) || json_is_string(id) || json_is_integer(id)))
		abort();
	/* The answer must survive the writer: one line of compact JSON. */
	char *text = json_dumps(e, JSON_COMPACT);
	if (!text || strchr(text, '\n'))
		abort();
	free(text);
}

/* A stateless request must carry its version as a string and match its headers. */
static void check_era(struct mcp_message *m, const struct mcp_headers *h)
{
	json_t *error = NULL;
	if (mcp_envelope_era(m, h, &error) == 0) {
		json_t *meta = json_object_get(m->params, "_meta");
		const char *v = json_string_value(
			json_object_get(meta, "io.modelcontextprotocol/protocolVersion"));
		if (error || (m->era == MCP_ERA_MODERN && (!v || strcmp(v, MCP_MODERN_VERSION))))
			abort();
	} else {
		if (!error)
			abort();
		check_error(error);
		json_decref(error);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mcp_message m;
	json_t *error = NULL;
	if (mcp_envelope_parse((const char *)data, size, &m, &error) == 0) {
		check_accepted(&m);
		if (m.kind == MCP_REQUEST) {
			check_era(&m, NULL);
			struct mcp_headers h = {
				json_string_value(
					json_object_get(json_object_get(m.params, "_meta"),
							"io.modelcontextprotocol/protocolVersion")),
				m.method, json_string_value(json_object_get(m.params, "name")),
				size % 7 == 0};
			check_era(&m, &h);
		}
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
