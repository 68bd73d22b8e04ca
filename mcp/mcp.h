/* The MCP server behind `snapcell mcp`: JSON-RPC envelopes, the methods of both protocol eras
 * (the 2025-11-25 handshake and the stateless 2026-07-28 revision, chosen per request), the
 * execute_code tool, and the stdio and Streamable HTTP transports. Uses only the public
 * header; it is not a general MCP library (no client side, no sessions yet). */
#ifndef SNAPCELL_MCP_H
#define SNAPCELL_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "snapcell.h"

/* Longest message accepted on any transport; longer lines are skipped, never buffered. */
#define MCP_MESSAGE_MAX (16u << 20)

#define MCP_PARSE_ERROR	     -32700
#define MCP_INVALID_REQUEST  -32600
#define MCP_METHOD_NOT_FOUND -32601
#define MCP_INVALID_PARAMS   -32602
#define MCP_INTERNAL_ERROR   -32603
/* As in LSP: the answer to a request the client cancelled, where one must be given. */
#define MCP_REQUEST_CANCELLED -32800
/* 2026-07-28: the HTTP headers disagree with the body, or one is missing or repeated. */
#define MCP_HEADER_MISMATCH -32020
/* 2026-07-28: a request names a protocol version this server does not speak. */
#define MCP_UNSUPPORTED_VERSION -32022

#define MCP_LEGACY_VERSION "2025-11-25" /* the newest handshake-era revision */
#define MCP_MODERN_VERSION "2026-07-28" /* the stateless revision */

/* Which revision a request is served under: the handshake era, or the stateless one (a
 * request carrying its version in _meta, or over HTTP an MCP-Protocol-Version header that is
 * not a handshake-era version). */
enum mcp_era { MCP_ERA_LEGACY, MCP_ERA_MODERN };

enum mcp_kind { MCP_REQUEST, MCP_NOTIFICATION, MCP_RESPONSE };

/* One parsed message. root is owned; id, method and params point into it. */
struct mcp_message {
	json_t *root;
	enum mcp_kind kind;
	json_t *id;	    /* requests and responses; NULL for notifications */
	const char *method; /* requests and notifications */
	json_t *params;	    /* an object, or NULL when absent */
	enum mcp_era era;   /* set by mcp_envelope_era(); legacy until then */
};

/* What an HTTP POST's routing headers say (2026-07-28 mirrors body fields into them). NULL
 * members were not sent; repeated is set when one of them came more than once. */
struct mcp_headers {
	const char *protocol_version, *method, *name;
	bool repeated;
};

/* envelope.c: parses one JSON-RPC 2.0 message (no batches: MCP dropped them in 2025-06-18).
 * 0 and *msg filled, or -1 and *error set to the error response to send (owned). */
int mcp_envelope_parse(const char *buf, size_t len, struct mcp_message *msg, json_t **error);
void mcp_message_clear(struct mcp_message *msg);
/* An error response; id is copied (NULL gives a null id). */
json_t *mcp_error(const json_t *id, int code, const char *message);
/* An error response with a data member (stolen). */
json_t *mcp_error_data(const json_t *id, int code, const char *message, json_t *data);
/* Decides a request's era and, for a stateless one, checks its envelope: the _meta fields
 * the revision requires, the headers against the body (headers NULL: stdio, no headers), and
 * the version. 0 and msg->era set, or -1 and *error set to the answer (owned). */
int mcp_envelope_era(struct mcp_message *msg, const struct mcp_headers *headers, json_t **error);
/* Whether version is a handshake-era revision this server answers initialize with. */
bool mcp_version_supported(const char *version);
/* The handshake-era version to answer an initialize asking for asked (NULL: the newest). */
const char *mcp_version_negotiate(const char *asked);
/* Every version this server speaks, the stateless one first: a new JSON array. */
json_t *mcp_versions_json(void);
/* A success response; id is copied, result is stolen. */
json_t *mcp_response(const json_t *id, json_t *result);

/* Where a transport delivers messages. send steals msg and may be called from any thread;
 * it returns -1 once the peer is gone. */
struct mcp_sink {
	int (*send)(struct mcp_sink *sink, json_t *msg);
	/* Every request needs an answer, a cancelled one included (an HTTP response must say
	 * something); over stdio a cancelled request gets none, as the spec says. */
	bool must_answer;
};

struct mcp_options {
	unsigned max_runs;	 /* concurrent tools/call runs; 0 = twice the cores */
	bool structured_content; /* also give the run as structuredContent */
	bool require_initialize; /* stdio: refuse requests before initialize */
	/* The argv of each config file command tool: every sandbox made from the config may
	 * call them, so they live until mcp_options_clear(), after the sandbox is freed. */
	char ***tool_argv;
	size_t n_tool_argv;
};

void mcp_options_clear(struct mcp_options *opts);

/* server.c */
struct mcp_server;
/* The sandbox stays the caller's and must outlive the server. NULL after a message. */
struct mcp_server *mcp_server_new(struct snapcell_sandbox *sb, const struct snapcell_config *cfg,
				  const struct mcp_options *opts);
/* Handles one message, answering through sink (nothing for notifications and responses).
 * tools/call runs on a worker thread unless sync is set, in which case this returns after
 * the answer was sent. sink must stay valid until mcp_server_drain() returned. */
void mcp_server_handle(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink,
		       bool sync);
/* Cancels every run (the cells are killed) and waits for their workers. */
void mcp_server_drain(struct mcp_server *srv);
/* Cancels the runs answering through sink (its client went away). */
void mcp_server_cancel_sink(struct mcp_server *srv, const struct mcp_sink *sink);
void mcp_server_free(struct mcp_server *srv);

/* result.c: a CallToolResult for a finished run. */
json_t *mcp_call_result(const struct snapcell_result *res, bool structured);
/* A CallToolResult with isError and one text. */
json_t *mcp_error_result(const char *status, const char *text);

/* config.c: reads a --config file into cfg and opts; -1 after a message on stderr naming the
 * offending key's path. */
int mcp_config_load(const char *path, struct snapcell_config *cfg, struct mcp_options *opts);
/* The same for a parsed file (root, borrowed); file only names it in messages. */
int mcp_config_apply(const char *file, json_t *root, struct snapcell_config *cfg,
		     struct mcp_options *opts);

/* stdio.c, http.c: serve until the client goes (stdio: end of input) or a signal. */
int mcp_serve_stdio(struct mcp_server *srv);
int mcp_serve_http(struct mcp_server *srv, const char *listen, const char *token);

#endif
