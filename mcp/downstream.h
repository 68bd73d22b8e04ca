/* Downstream MCP servers ("code mode"): snapcell mcp connects to each configured server as a
 * client, lists its tools and registers each as the host tool "server.tool", so sandboxed
 * code calls it with call_tool("server.tool", ...) or tools.server.tool(...). A minimal
 * client of the handshake era (2025-11-25): stdio (a child process speaking newline-delimited
 * JSON-RPC) or Streamable HTTP (one POST per message, JSON or SSE answers, Mcp-Session-Id). */
#ifndef SNAPCELL_MCP_DOWNSTREAM_H
#define SNAPCELL_MCP_DOWNSTREAM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapcell.h"

/* Nested calls a run may make to downstream servers unless the config says otherwise. */
#define MCP_DOWNSTREAM_CALLS_DEFAULT 256
/* Longest name a server may have in the config ("server" of "server.tool"). */
#define MCP_DOWNSTREAM_NAME_MAX 64

/* What the config file says about one server. Exactly one of argv and url is set. */
struct mcp_downstream_spec {
	const char *name;
	char **argv;	     /* stdio: the command, NULL-terminated */
	char **env;	     /* stdio: NAME=VALUE entries, NULL-terminated */
	char **inherit;	     /* stdio: names of our variables it also gets, NULL-terminated */
	const char *cwd;     /* stdio: working directory (NULL: ours) */
	const char *url;     /* HTTP: the endpoint */
	char **headers;	     /* HTTP: "Name: value" lines sent with every request */
	uint64_t timeout_ms; /* startup and any call made outside a run's deadline */
};

/* One connection (downstream.c). Safe to use from several threads at once: a stdio
 * connection serialises requests, an HTTP one sends each on its own. */
struct mcp_downstream;

/* Starts the server (stdio) or checks the URL (HTTP) and performs initialize and
 * notifications/initialized. spec's strings are copied. 0 and *out, or -1 and why filled. */
int mcp_downstream_open(const struct mcp_downstream_spec *spec, struct mcp_downstream **out,
			char *why, size_t why_size);
/* Sends one request and waits for its answer until deadline_us (CLOCK_MONOTONIC; 0: the
 * spec's timeout) or until cancel_fd (a run's snapcell_tool_cancel_fd, -1 for none) becomes
 * readable; a request given up either way is followed by notifications/cancelled naming it.
 * params is stolen. 0 and *result (the JSON-RPC result or error member's owner: the whole
 * response, owned), or -1 and why filled. A stdio server that died or sent garbage is closed
 * and started again, once, by the next request. */
int mcp_downstream_request(struct mcp_downstream *ds, const char *method, json_t *params,
			   uint64_t deadline_us, int cancel_fd, json_t **response, char *why,
			   size_t why_size);
const char *mcp_downstream_name(const struct mcp_downstream *ds);
/* Stops the server (stdio: closes its input, then SIGTERM and SIGKILL to its process group). */
void mcp_downstream_close(struct mcp_downstream *ds);

/* downstream_http.c: one JSON-RPC message POSTed to url (the transport of downstream.c).
 * session is the Mcp-Session-Id to send (NULL: none); *new_session gets the one the answer
 * carried (malloc'd, NULL when none). want_id NULL: a notification (202 expected, *response
 * NULL). *status is the HTTP status (0 when no answer came). */
struct mcp_http_post {
	const char *url;
	char *const *headers;
	const char *session;
	const char *protocol_version;
	uint64_t deadline_us;
	int cancel_fd; /* the transfer stops when it becomes readable (-1: none) */
};
int mcp_downstream_http_post(const struct mcp_http_post *post, const json_t *msg,
			     const json_t *want_id, json_t **response, char **new_session,
			     long *status, char *why, size_t why_size);
int mcp_downstream_http_init(void);
/* DELETE of the session (post->session), as a client that is done with it should; a second at
 * most, its answer ignored. */
void mcp_downstream_http_end(const struct mcp_http_post *post);

/* downstream_tools.c: every connected server, owned by the config's mcp_options. */
struct mcp_downstreams;
/* Connects to the server, lists its tools and registers each on cfg as "server.tool" with its
 * input schema. -1 and why filled (naming the server, and the tool when one was refused). */
int mcp_downstreams_add(struct mcp_downstreams **all, struct snapcell_config *cfg,
			const struct mcp_downstream_spec *spec, char *why, size_t why_size);
/* The cap on nested calls per run (downstream_calls_per_run). */
void mcp_downstreams_set_cap(struct mcp_downstreams **all, unsigned cap);
void mcp_downstreams_free(struct mcp_downstreams *all);

/* Writes the reason into why and returns -1, for `return mcp_say(why, why_size, ...)`. */
int mcp_say(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* config_programs.c: whether cfg already has a tool of that name (a second one would replace
 * it). */
bool mcp_config_has_tool(const struct snapcell_config *cfg, const char *name);

#endif
