/* JSON-RPC 2.0 envelopes for MCP: what a message must look like before any method sees it,
 * which protocol era a request is in (and, for the stateless one, its _meta fields and HTTP
 * headers), and the shape of the answers. It dispatches no MCP method; server.c does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp.h"

#define META_VERSION	  "io.modelcontextprotocol/protocolVersion"
#define META_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"

static const char *const legacy_versions[] = {MCP_LEGACY_VERSION, "2025-06-18", "2025-03-26"};
#define N_LEGACY (sizeof(legacy_versions) / sizeof(legacy_versions[0]))

bool mcp_version_supported(const char *version)
{
	for (size_t i = 0; i < N_LEGACY; i++)
		if (!strcmp(version, legacy_versions[i]))
			return true;
	return false;
}

const char *mcp_version_negotiate(const char *asked)
{
	for (size_t i = 0; asked && i < N_LEGACY; i++)
		if (!strcmp(asked, legacy_versions[i]))
			return legacy_versions[i];
	return MCP_LEGACY_VERSION;
}

json_t *mcp_versions_json(void)
{
	json_t *all = json_pack("[s]", MCP_MODERN_VERSION);
	for (size_t i = 0; i < N_LEGACY; i++)
		json_array_append_new(all, json_string(legacy_versions[i]));
	return all;
}

json_t *mcp_error_data(const json_t *id, int code, const char *message, json_t *data)
{
	json_t *e = mcp_error(id, code, message);
	json_object_set_new(json_object_get(e, "error"), "data", data);
	return e;
}

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

size_t mcp_envelope_cost(const char *buf, size_t len)
{
	unsigned depth;
	size_t values;
	snapcell_json_measure(buf, len, &depth, &values);
	if (depth > MCP_DEPTH_MAX || values > MCP_VALUES_MAX)
		return 0; /* refused before any tree is built */
	return values * MCP_BYTES_PER_VALUE + len;
}

json_t *mcp_downstream_parse(const char *buf, size_t len)
{
	unsigned depth;
	size_t values;
	snapcell_json_measure(buf, len, &depth, &values);
	if (values > MCP_DOWNSTREAM_VALUES_MAX)
		return NULL;
	return json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
}

int mcp_envelope_parse(const char *buf, size_t len, struct mcp_message *msg, json_t **error)
{
	memset(msg, 0, sizeof(*msg));
	*error = NULL;
	if (len > MCP_MESSAGE_MAX) {
		*error = mcp_error(NULL, MCP_INVALID_REQUEST, "Invalid Request: message too large");
		return -1;
	}
	unsigned depth;
	size_t values;
	snapcell_json_measure(buf, len, &depth, &values);
	if (depth > MCP_DEPTH_MAX || values > MCP_VALUES_MAX) {
		char why[96];
		snprintf(why, sizeof(why),
			 depth > MCP_DEPTH_MAX ? "Invalid Request: nested deeper than %u levels"
					       : "Invalid Request: more than %u JSON values",
			 depth > MCP_DEPTH_MAX ? MCP_DEPTH_MAX : MCP_VALUES_MAX);
		*error = mcp_error(NULL, MCP_INVALID_REQUEST, why);
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

/* Strict base64 (RFC 4648, padded, canonical): an encoded Mcp-Name that decodes two ways
 * could match a body it does not name. NULL when malformed; the caller frees. */
static char *base64_decode(const char *in, size_t len)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	if (len % 4)
		return NULL;
	char *out = malloc(len / 4 * 3 + 1);
	size_t n = 0;
	for (size_t i = 0; out && i < len; i += 4) {
		unsigned v = 0, pad = 0;
		for (size_t j = 0; j < 4; j++) {
			const char *at = in[i + j] ? strchr(alphabet, in[i + j]) : NULL;
			if (in[i + j] == '=' && i + 4 == len &&
			    (j == 3 || (j == 2 && in[i + 3] == '=')))
				pad++;
			else if (!at || pad)
				return free(out), NULL;
			v = v << 6 | (at ? (unsigned)(at - alphabet) : 0);
		}
		if ((pad == 1 && (v & 0xff)) || (pad == 2 && (v & 0xffff)))
			return free(out), NULL; /* non-zero bits after the last byte */
		out[n++] = (char)(v >> 16);
		if (pad < 2)
			out[n++] = (char)(v >> 8);
		if (pad < 1)
			out[n++] = (char)v;
	}
	if (out)
		out[n] = 0;
	if (out && memchr(out, 0, n))
		return free(out), NULL;
	return out;
}

/* A header value without the optional whitespace around it (RFC 9110 5.5: a proxy may keep
 * it, the value excludes it); *len is the length left. */
static const char *trim(const char *v, size_t *len)
{
	while (*v == ' ' || *v == '\t')
		v++;
	size_t n = strlen(v);
	while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
		n--;
	*len = n;
	return v;
}

static bool header_is(const char *header, const char *value, size_t value_len)
{
	size_t len;
	header = header ? trim(header, &len) : NULL;
	return header && len == value_len && !memcmp(header, value, len);
}

/* Whether a Mcp-Name header value names body: verbatim, or as =?base64?...?= of its UTF-8. */
static bool name_matches(const char *header, const json_t *body)
{
	if (!header || !json_is_string(body))
		return false;
	size_t len;
	header = trim(header, &len);
	if (len < 11 || strncmp(header, "=?base64?", 9) || strncmp(header + len - 2, "?=", 2))
		return header_is(header, json_string_value(body), json_string_length(body));
	char *decoded = base64_decode(header + 9, len - 11);
	bool same = decoded && strlen(decoded) == json_string_length(body) &&
		    !strcmp(decoded, json_string_value(body));
	free(decoded);
	return same;
}

/* The body field each method mirrors into Mcp-Name (streamable-http, "Standard Request
 * Headers"): transport knowledge, the same for every server. */
static const char *name_field(const char *method)
{
	if (!strcmp(method, "tools/call") || !strcmp(method, "prompts/get"))
		return "name";
	return !strcmp(method, "resources/read") ? "uri" : NULL;
}

static json_t *unsupported(const struct mcp_message *msg, const char *requested)
{
	json_t *data =
		json_pack("{s:o, s:s}", "supported", mcp_versions_json(), "requested", requested);
	return mcp_error_data(msg->id, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version",
			      data);
}

/* The headers against the body; NULL when they agree, else why not. */
static const char *header_mismatch(const struct mcp_message *msg, const struct mcp_headers *h,
				   const json_t *version)
{
	if (h->repeated)
		return "Header mismatch: a routing header appears more than once";
	if (!json_is_string(version) || !header_is(h->protocol_version, json_string_value(version),
						   json_string_length(version)))
		return "Header mismatch: MCP-Protocol-Version does not match "
		       "_meta[\"" META_VERSION "\"]";
	if (!header_is(h->method, msg->method, strlen(msg->method)))
		return "Header mismatch: Mcp-Method does not match the method";
	const char *field = name_field(msg->method);
	json_t *body = field ? json_object_get(msg->params, field) : NULL;
	if (body && !json_is_null(body) && !name_matches(h->name, body))
		return "Header mismatch: Mcp-Name does not match the params";
	return NULL;
}

int mcp_envelope_era(struct mcp_message *msg, const struct mcp_headers *headers, json_t **error)
{
	*error = NULL;
	json_t *meta = json_object_get(msg->params, "_meta");
	json_t *version = json_object_get(meta, META_VERSION);
	size_t n = 0;
	const char *raw = headers ? headers->protocol_version : NULL;
	char header[64] = "";
	if (raw && (raw = trim(raw, &n)) && n < sizeof(header))
		memcpy(header, raw, n), header[n] = 0;
	else if (raw)
		strcpy(header, "(too long)");
	bool header_unknown = raw && !mcp_version_supported(header);
	msg->era = version || header_unknown ? MCP_ERA_MODERN : MCP_ERA_LEGACY;
	if (msg->era == MCP_ERA_LEGACY)
		return 0;
	bool unknown = header_unknown && strcmp(header, MCP_MODERN_VERSION);
	if (!version || !json_is_object(json_object_get(meta, META_CAPABILITIES))) {
		/* An unknown version in the header says more than the missing fields do. */
		*error = unknown ? unsupported(msg, header)
				 : mcp_error(msg->id, MCP_INVALID_PARAMS,
					     "Invalid params: _meta needs \"" META_VERSION
					     "\" (a string) and \"" META_CAPABILITIES
					     "\" (an object)");
		return -1;
	}
	const char *why = headers ? header_mismatch(msg, headers, version) : NULL;
	if (why)
		*error = mcp_error(msg->id, MCP_HEADER_MISMATCH, why);
	else if (!json_is_string(version))
		*error = mcp_error(msg->id, MCP_INVALID_PARAMS,
				   "Invalid params: _meta[\"" META_VERSION "\"] must be a string");
	else if (strcmp(json_string_value(version), MCP_MODERN_VERSION))
		*error = unsupported(msg, json_string_value(version));
	return *error ? -1 : 0;
}
