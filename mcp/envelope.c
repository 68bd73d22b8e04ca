/* JSON-RPC 2.0 envelopes for MCP: what a message must look like before any method sees it,
 * and the shape of the answers. It knows no MCP method; server.c does. */
#include <string.h>

#include "mcp.h"

json_t *mcp_error(const json_t *id, int code, const char *message)
{
	json_t *copy = id ? json_deep_copy(id) : json_null();
	return json_pack("{s:s, s:o, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", copy, "error", "code",
			 code, "message", message);
}

json_t *mcp_response(const json_t *id, json_t *result)
{
	return json_pack("{s:s, s:o, s:o}", "jsonrpc", "2.0", "id", json_deep_copy(id), "result",
			 result ? result : json_object());
}

void mcp_message_clear(struct mcp_message *msg)
{
	json_decref(msg->root);
	memset(msg, 0, sizeof(*msg));
}

/* An id is a string or an integer (JSON-RPC also allows null and fractions; MCP does not). */
static bool valid_id(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

/* The id to answer an invalid message with: its own when it is a usable one. */
static const json_t *reply_id(const json_t *root)
{
	const json_t *id = json_object_get(root, "id");
	return valid_id(id) ? id : NULL;
}

static int classify(struct mcp_message *msg, const char **why)
{
	json_t *root = msg->root;
	json_t *method = json_object_get(root, "method");
	json_t *id = json_object_get(root, "id");
	json_t *params = json_object_get(root, "params");
	if (!json_is_string(json_object_get(root, "jsonrpc")) ||
	    strcmp(json_string_value(json_object_get(root, "jsonrpc")), "2.0"))
		return *why = "Invalid Request: jsonrpc must be \"2.0\"", -1;
	if (id && !valid_id(id))
		return *why = "Invalid Request: id must be a string or an integer", -1;
	if (!method) {
		bool has_result = json_object_get(root, "result") != NULL;
		bool has_error = json_is_object(json_object_get(root, "error"));
		if (!id || has_result == has_error)
			return *why = "Invalid Request: no method, and not a response", -1;
		msg->kind = MCP_RESPONSE;
		msg->id = id;
		return 0;
	}
	if (!json_is_string(method) || !json_string_length(method))
		return *why = "Invalid Request: method must be a non-empty string", -1;
	if (params && !json_is_object(params))
		return *why = "Invalid params: params must be an object", -2;
	msg->kind = id ? MCP_REQUEST : MCP_NOTIFICATION;
	msg->id = id;
	msg->method = json_string_value(method);
	msg->params = params;
	return 0;
}

int mcp_envelope_parse(const char *buf, size_t len, struct mcp_message *msg, json_t **error)
{
	memset(msg, 0, sizeof(*msg));
	*error = NULL;
	if (len > MCP_MESSAGE_MAX) {
		*error = mcp_error(NULL, MCP_INVALID_REQUEST, "Invalid Request: message too large");
		return -1;
	}
	json_error_t jerr;
	/* No JSON_ALLOW_NUL: a NUL inside a string would cut method names and code short. */
	msg->root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!msg->root) {
		*error = mcp_error(NULL, MCP_PARSE_ERROR, "Parse error");
		return -1;
	}
	const char *why = NULL;
	int rc = json_is_object(msg->root)
			 ? classify(msg, &why)
			 : (why = json_is_array(msg->root)
					  ? "Invalid Request: batches are not supported"
					  : "Invalid Request: not an object",
			    -1);
	if (rc == 0)
		return 0;
	bool notification = rc == -2 && !json_object_get(msg->root, "id");
	if (!notification)
		*error = mcp_error(reply_id(msg->root),
				   rc == -2 ? MCP_INVALID_PARAMS : MCP_INVALID_REQUEST, why);
	mcp_message_clear(msg);
	return -1;
}
