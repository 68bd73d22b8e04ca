/* The Streamable HTTP transport (libmicrohttpd): one endpoint, /mcp, one POST per message,
 * 202 for notifications, JSON responses for requests and an SSE stream (http_sse.c) for a
 * tools/call that asked for progress (closing either cancels the run). Host and Origin are
 * checked against DNS rebinding (403), a bearer token is optional; stateless
 * requests have their MCP-Protocol-Version, Mcp-Method and Mcp-Name headers checked against
 * the body, and their errors carry the revision's HTTP statuses. The handshake era has
 * sessions: initialize mints an Mcp-Session-Id, every later message must carry a live one
 * (400 without, 404 for an unknown one), DELETE ends it (http_session.c keeps the table). A
 * thread per connection runs its request to the end, so a tools/call answers in its own
 * response. No GET stream, no resumption. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/frontend.h"
#include "http.h"
#include "http_limits.h"
#include "mcp.h"

/* Seconds a connection may stay silent (no byte read or written) before it is closed, so idle
 * or stalled connections cannot hold every slot. A run in progress does not count: its thread
 * is in our handler, not waiting on the socket. */
#define IDLE_TIMEOUT 15
#define HEALTH_PATH  "/healthz"

struct http {
	struct mcp_server *srv;
	const char *token;
	struct mcp_http_sessions *sessions;
	char host[256]; /* the host --http named, also accepted in Host and Origin */
	const char *const *allow_hosts; /* --allow-host: names a balancer's clients use */
	size_t n_allow_hosts;
	struct mcp_http_limits *limits;
};

/* The body of one POST, capped: past MCP_MESSAGE_MAX the rest is counted, not kept. Its
 * buffer, and then the tree parsed from it, are charged to the request budget until the
 * request ends; past the budget the rest is dropped too (over_budget). body's cap is the
 * room the budget has paid for (its NUL's byte aside; 0 before the first bytes), so the
 * buffer never takes memory that was not charged. */
struct upload {
	struct sc_buf body;
	bool too_big, over_budget;
	size_t charged;
};

/* Collects the one answer a request gets, as text (written where the run's result is bound,
 * mcp_message_text); progress notifications have no stream to go to. */
struct http_sink {
	struct mcp_sink sink;
	char *text;
	size_t len;
	json_int_t code;   /* the error's code, 0 for none */
	bool answered, ok; /* ok: a result, not an error */
	int fd;		   /* the connection's socket, for http_gone; -1 when unknown */
};

static int http_send(struct mcp_sink *sink, json_t *msg)
{
	struct http_sink *s = (struct http_sink *)sink;
	if (!json_object_get(msg, "method") && !s->answered) {
		s->answered = true;
		s->code = mcp_http_error_code(msg);
		s->ok = json_object_get(msg, "result") != NULL;
		s->text = mcp_message_text(msg, NULL, NULL, &s->len);
	}
	json_decref(msg);
	return 0;
}

/* The client closed its connection (or it broke) while its request runs: the thread-per-
 * connection model leaves the socket unread until the answer, so a hang-up shows as RDHUP. */
static bool http_gone(struct mcp_sink *sink)
{
	struct http_sink *s = (struct http_sink *)sink;
	struct pollfd p = {s->fd, POLLRDHUP, 0};
	return s->fd >= 0 && poll(&p, 1, 0) == 1 && p.revents & (POLLRDHUP | POLLHUP | POLLERR);
}

static int connection_fd(struct MHD_Connection *con)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(con, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

/* A JSON body: len bytes at text + off, text (malloc'd) stolen; the result memory charged
 * for it (mcp_server_release) is given back once libmicrohttpd has sent and freed it. */
struct owned_body {
	char *text;
	struct mcp_server *srv;
	size_t charged;
};

static void owned_body_free(void *cls)
{
	struct owned_body *b = cls;
	free(b->text);
	if (b->srv)
		mcp_server_release(b->srv, b->charged);
	free(b);
}

enum MHD_Result mcp_http_respond_owned(struct MHD_Connection *con, unsigned status, char *text,
				       size_t off, size_t len, const char *session,
				       struct mcp_server *srv, size_t charged)
{
	struct owned_body *b = calloc(1, sizeof(*b));
	struct MHD_Response *r = NULL;
	if (b) {
		*b = (struct owned_body){text, srv, charged};
		r = MHD_create_response_from_buffer_with_free_callback_cls(len, text + off,
									   owned_body_free, b);
	}
	if (!r) {
		free(b);
		free(text);
		if (srv)
			mcp_server_release(srv, charged);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/json");
	if (session)
		MHD_add_response_header(r, "Mcp-Session-Id", session);
	enum MHD_Result rc = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return rc;
}

/* The HTTP status of an answer with this error code (0: none): the stateless revision gives
 * errors their own (400 for a malformed or mismatched request or an unsupported version, 404
 * for an unknown method); the handshake era answers every request with 200. */
unsigned mcp_http_answer_status(json_int_t code, enum mcp_era era)
{
	if (era != MCP_ERA_MODERN || !code)
		return MHD_HTTP_OK;
	switch (code) {
	case MCP_METHOD_NOT_FOUND:
		return MHD_HTTP_NOT_FOUND;
	case MCP_PARSE_ERROR:
	case MCP_INVALID_REQUEST:
	case MCP_INVALID_PARAMS:
	case MCP_HEADER_MISMATCH:
	case MCP_UNSUPPORTED_VERSION:
		return MHD_HTTP_BAD_REQUEST;
	default:
		return MHD_HTTP_OK;
	}
}

/* body (stolen) as JSON, or no body; session, when set, is the Mcp-Session-Id initialize
 * minted. */
static enum MHD_Result respond_session(struct MHD_Connection *con, unsigned status, json_t *body,
				       const char *session)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
	json_decref(body);
	struct MHD_Response *r = MHD_create_response_from_buffer(
		text ? strlen(text) : 0, text ? text : "",
		text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	if (text)
		MHD_add_response_header(r, "Content-Type", "application/json");
	if (session)
		MHD_add_response_header(r, "Mcp-Session-Id", session);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "POST, DELETE");
	if (status == MHD_HTTP_UNAUTHORIZED)
		MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
	enum MHD_Result rc = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result respond(struct MHD_Connection *con, unsigned status, json_t *body)
{
	return respond_session(con, status, body, NULL);
}

enum MHD_Result mcp_http_refuse(struct MHD_Connection *con, unsigned status, int code,
				const char *why)
{
	return respond(con, status, mcp_error(NULL, code, why));
}

/* Whose name a Host or Origin gives: none we answer to, loopback or the bound host (an
 * Origin must then name the bound port), or a name --allow-host vouches for (any port: it is
 * the name clients of a balancer or a Kubernetes Service use, on the balancer's port). */
enum host_kind { HOST_FOREIGN, HOST_LOCAL, HOST_NAMED };

static bool same_name(const char *host, size_t n, const char *name)
{
	return strlen(name) == n && !strncasecmp(host, name, n);
}

/* host is "name", "name:port" or "[v6]:port". */
static enum host_kind host_allowed(const struct http *h, const char *host, size_t len)
{
	const char *colon = host[0] == '[' ? memchr(host, ']', len) : memchr(host, ':', len);
	size_t n = colon ? (size_t)(colon - host) + (host[0] == '[') : len;
	static const char *const loopback[] = {"localhost", "127.0.0.1", "[::1]"};
	for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
		if (same_name(host, n, loopback[i]))
			return HOST_LOCAL;
	if (same_name(host, n, h->host))
		return HOST_LOCAL;
	for (size_t i = 0; i < h->n_allow_hosts; i++)
		if (same_name(host, n, h->allow_hosts[i]))
			return HOST_NAMED;
	return HOST_FOREIGN;
}

static unsigned bound_port(struct MHD_Daemon *d);

/* Origin's "name[:port]" (no path) names this server: an allowed host and the bound port. The
 * server sends no CORS headers, so no page of another origin, another port on loopback
 * included, is a legitimate client; without this check such a page could still send a
 * "simple" text/plain POST, which needs no preflight. */
static bool origin_allowed(const struct http *h, struct MHD_Connection *con, const char *rest)
{
	size_t len = strlen(rest);
	enum host_kind kind = len && !strchr(rest, '/') ? host_allowed(h, rest, len) : HOST_FOREIGN;
	if (kind != HOST_LOCAL)
		return kind == HOST_NAMED && !strchr(rest, '@');
	const char *end = rest[0] == '[' ? strchr(rest, ']') : rest;
	const char *colon = end ? strchr(end, ':') : NULL;
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(con, MHD_CONNECTION_INFO_DAEMON);
	unsigned port = ci ? bound_port(ci->daemon) : 0;
	if (!colon)
		return port == 80;
	char *stop;
	unsigned long want = strtoul(colon + 1, &stop, 10);
	return colon[1] >= '0' && colon[1] <= '9' && !*stop && want == port;
}

/* A browser page on another site must not reach a server on loopback (DNS rebinding). */
static bool request_allowed(const struct http *h, struct MHD_Connection *con)
{
	const char *host = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Host");
	const char *origin = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Origin");
	if (!host || !host_allowed(h, host, strlen(host)))
		return false;
	if (!origin)
		return true;
	const char *rest = !strncmp(origin, "http://", 7)    ? origin + 7
			   : !strncmp(origin, "https://", 8) ? origin + 8
							     : NULL;
	return rest && origin_allowed(h, con, rest);
}

static bool token_ok(const struct http *h, struct MHD_Connection *con)
{
	if (!h->token)
		return true;
	const char *auth = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Authorization");
	if (!auth || strncasecmp(auth, "Bearer ", 7))
		return false;
	/* Compared in constant time: the length is not secret, the bytes are. */
	size_t n = strlen(h->token);
	if (strlen(auth + 7) != n)
		return false;
	return mcp_secret_equal(auth + 7, h->token, n);
}

/* Takes n more bytes of the request budget for u. */
static bool charge(struct http *h, struct upload *u, size_t n)
{
	if (!mcp_http_limits_charge(h->limits, n))
		return false;
	u->charged += n;
	return true;
}

static void keep(struct http *h, struct upload *u, const char *data, size_t n)
{
	struct sc_buf *b = &u->body;
	if (u->too_big || u->over_budget || b->len + n > MCP_MESSAGE_MAX) {
		u->too_big |= !u->over_budget;
		return;
	}
	size_t need = b->len + n + 1, paid = b->cap ? b->cap + 1 : 0;
	if (need > paid) {
		/* A declared length was charged whole: room of exactly that size. */
		size_t room = u->charged >= need ? u->charged : paid ? paid : 65536;
		while (room < need)
			room *= 2;
		if (room > u->charged && !charge(h, u, room - u->charged)) {
			u->over_budget = true;
			sc__buf_free(b);
			return;
		}
		b->cap = room - 1;
	}
	if (sc__buf_add(b, data, n) < 0)
		u->too_big = true;
}

/* Counts the routing headers: a repeated one could be read differently by a proxy that
 * routes on its first copy and a server that reads its last. The session id routes too (a
 * balancer keeps a session on one replica by it). */
static const char *const routing[] = {"MCP-Protocol-Version", "Mcp-Method", "Mcp-Name",
				      "Mcp-Session-Id"};
#define N_ROUTING (sizeof(routing) / sizeof(routing[0]))

static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
				    const char *value)
{
	unsigned *seen = cls;
	for (size_t i = 0; i < N_ROUTING; i++)
		if (!strcasecmp(key, routing[i]))
			seen[i]++;
	return MHD_YES;
}

static unsigned header_count(struct MHD_Connection *con, const char *name)
{
	unsigned seen[N_ROUTING] = {0};
	MHD_get_connection_values(con, MHD_HEADER_KIND, count_header, seen);
	for (size_t i = 0; i < N_ROUTING; i++)
		if (!strcasecmp(name, routing[i]))
			return seen[i];
	return 0;
}

static struct mcp_headers routing_headers(struct MHD_Connection *con)
{
	unsigned seen[N_ROUTING] = {0};
	MHD_get_connection_values(con, MHD_HEADER_KIND, count_header, seen);
	return (struct mcp_headers){
		MHD_lookup_connection_value(con, MHD_HEADER_KIND, "MCP-Protocol-Version"),
		MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Mcp-Method"),
		MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Mcp-Name"),
		seen[0] > 1 || seen[1] > 1 || seen[2] > 1};
}

/* The live session a handshake-era message names: its scope, or 0 after queueing the
 * refusal in *rc (400 without the header or with two, 404 for one unknown, ended or
 * expired, which tells the client to initialize again, as 2025-11-25 says). */
static uint64_t session_scope(struct http *h, struct MHD_Connection *con, const json_t *id,
			      enum MHD_Result *rc, bool *elicits)
{
	const char *sid = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Mcp-Session-Id");
	if (!sid || header_count(con, "Mcp-Session-Id") > 1) {
		*rc = respond(con, MHD_HTTP_BAD_REQUEST,
			      mcp_error(id, MCP_INVALID_REQUEST,
					sid ? "Bad Request: Mcp-Session-Id is repeated"
					    : "Bad Request: Mcp-Session-Id is required; send "
					      "initialize first and use the id it returned"));
		return 0;
	}
	uint64_t scope = mcp_http_session_find(h->sessions, sid, elicits);
	if (!scope)
		*rc = respond(con, MHD_HTTP_NOT_FOUND,
			      mcp_error(id, MCP_INVALID_REQUEST,
					"Not Found: no such session (it ended or expired); send "
					"initialize again"));
	return scope;
}

/* A notification is accepted (202) unless its version header names no revision we speak or,
 * in the handshake era, it names no live session. 2026-07-28 defines no client notifications
 * over HTTP, so a stateless one is accepted and dropped: its requests share scope 0 and carry
 * ids any client can guess, so a notifications/cancelled from one would stop another's run
 * (closing the request's connection or stream is how that revision cancels). */
static enum MHD_Result notify(struct http *h, struct MHD_Connection *con, struct mcp_message *msg,
			      const struct mcp_headers *hdr)
{
	const char *v = hdr->protocol_version;
	enum MHD_Result rc = MHD_NO;
	uint64_t scope = 0;
	if (v && !mcp_version_supported(v) && strcmp(v, MCP_MODERN_VERSION)) {
		json_t *data =
			json_pack("{s:o, s:s}", "supported", mcp_versions_json(), "requested", v);
		rc = respond(con, MHD_HTTP_BAD_REQUEST,
			     mcp_error_data(NULL, MCP_UNSUPPORTED_VERSION,
					    "Unsupported protocol version", data));
	} else if (v && !strcmp(v, MCP_MODERN_VERSION)) {
		rc = respond(con, MHD_HTTP_ACCEPTED, NULL);
	} else if ((scope = session_scope(h, con, NULL, &rc, NULL))) {
		struct mcp_sink scoped = {NULL,	 false, scope, NULL, false,
					  false, 0,	NULL,  0,    false};
		mcp_server_handle(h->srv, msg, &scoped, true);
		rc = respond(con, MHD_HTTP_ACCEPTED, NULL);
	}
	mcp_message_clear(msg);
	return rc;
}

/* The answer a request's sink collected, with its status (and the result memory it was
 * charged, given back once it is sent); session: initialize's new Mcp-Session-Id. */
static enum MHD_Result answer(struct http *h, struct MHD_Connection *con, struct http_sink *sink,
			      enum mcp_era era, const char *session)
{
	if (!sink->text) {
		mcp_server_release(h->srv, sink->sink.result_bytes);
		return mcp_http_refuse(con, MHD_HTTP_INTERNAL_SERVER_ERROR, MCP_INTERNAL_ERROR,
				       sink->answered
					       ? "Internal error: out of memory for the answer"
					       : "Internal error: no answer");
	}
	return mcp_http_respond_owned(con, mcp_http_answer_status(sink->code, era), sink->text, 0,
				      sink->len, session, h->srv, sink->sink.result_bytes);
}

/* initialize in the handshake era: answered with a new session's id. */
static enum MHD_Result initialize(struct http *h, struct MHD_Connection *con,
				  struct mcp_message *msg)
{
	struct http_sink sink = {
		{http_send, true, 0, NULL, false, true, 0, NULL, 0, false}, NULL, 0, 0, 0, 0, -1};
	mcp_server_handle(h->srv, msg, &sink.sink, true);
	char id[MCP_SESSION_ID_LEN + 1];
	uint64_t scope;
	if (!sink.ok)
		return answer(h, con, &sink, MCP_ERA_LEGACY, NULL);
	if (mcp_http_session_open(h->sessions, id, &scope, sink.sink.elicits) < 0) {
		free(sink.text);
		return respond(con, MHD_HTTP_INTERNAL_SERVER_ERROR,
			       mcp_error(msg->id, MCP_INTERNAL_ERROR,
					 "Internal error: no random bytes for a session id"));
	}
	return answer(h, con, &sink, MCP_ERA_LEGACY, id);
}

/* 503 with Retry-After: the request budget is taken by other messages in flight. */
static enum MHD_Result over_budget(struct http *h, struct MHD_Connection *con)
{
	char why[200];
	snprintf(why, sizeof(why),
		 "Service Unavailable: messages in flight hold the server's request memory "
		 "(%zu MiB, --http-request-memory); try again",
		 mcp_http_limits_budget(h->limits) >> 20);
	json_t *body = mcp_error(NULL, MCP_INTERNAL_ERROR, why);
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	struct MHD_Response *r = MHD_create_response_from_buffer(
		text ? strlen(text) : 0, text ? text : "",
		text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(r, "Content-Type", "application/json");
	MHD_add_response_header(r, "Retry-After", "1");
	enum MHD_Result rc = MHD_queue_response(con, MHD_HTTP_SERVICE_UNAVAILABLE, r);
	MHD_destroy_response(r);
	return rc;
}

static enum MHD_Result dispatch(struct http *h, struct MHD_Connection *con, struct upload *u)
{
	if (u->too_big)
		return mcp_http_refuse(con, MHD_HTTP_CONTENT_TOO_LARGE, MCP_INVALID_REQUEST,
				       "Invalid Request: message too large");
	/* The tree is charged before it is built, and stays charged while this thread serves
	 * the message (a tools/call's run included). */
	if (u->over_budget ||
	    !charge(h, u, mcp_envelope_cost(u->body.data ? u->body.data : "", u->body.len)))
		return over_budget(h, con);
	struct mcp_headers hdr = routing_headers(con);
	struct mcp_message msg;
	json_t *error;
	if (mcp_envelope_parse(u->body.data ? u->body.data : "", u->body.len, &msg, &error) < 0)
		return error ? respond(con, MHD_HTTP_BAD_REQUEST, error)
			     : respond(con, MHD_HTTP_ACCEPTED, NULL);
	if (msg.kind != MCP_REQUEST)
		return notify(h, con, &msg, &hdr);
	if (mcp_envelope_era(&msg, &hdr, &error) < 0) {
		mcp_message_clear(&msg);
		return respond(con, MHD_HTTP_BAD_REQUEST, error);
	}
	enum MHD_Result rc = MHD_NO;
	uint64_t scope = 0;
	bool elicits = false;
	if (msg.era == MCP_ERA_LEGACY && !strcmp(msg.method, "initialize")) {
		rc = initialize(h, con, &msg);
		mcp_message_clear(&msg);
		return rc;
	}
	if (msg.era == MCP_ERA_LEGACY && !(scope = session_scope(h, con, msg.id, &rc, &elicits))) {
		mcp_message_clear(&msg);
		return rc;
	}
	if (mcp_http_wants_stream(con, &msg, elicits && mcp_server_asks(h->srv)))
		return mcp_http_stream(h->srv, con, &msg, scope, elicits);
	enum mcp_era era = msg.era;
	/* A JSON answer cannot carry a question (a client that does not accept a stream): its
	 * calls needing approval are refused, never left waiting for an answer it never saw. */
	struct http_sink sink = {{http_send, true, scope, NULL, true, true, 0, http_gone, 0, false},
				 NULL,
				 0,
				 0,
				 0,
				 0,
				 connection_fd(con)};
	mcp_server_handle(h->srv, &msg, &sink.sink, true);
	mcp_message_clear(&msg);
	return answer(h, con, &sink, era, NULL);
}

/* DELETE with an Mcp-Session-Id: the client is done with the session; its runs are
 * cancelled and its id answers 404 from now on. */
static enum MHD_Result end_session(struct http *h, struct MHD_Connection *con)
{
	enum MHD_Result rc = MHD_NO;
	uint64_t scope = session_scope(h, con, NULL, &rc, NULL);
	if (!scope)
		return rc;
	const char *sid = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Mcp-Session-Id");
	if (mcp_http_session_close(h->sessions, sid) == scope)
		mcp_server_cancel_scope(h->srv, scope);
	return respond(con, MHD_HTTP_NO_CONTENT, NULL);
}

/* GET /healthz, for probes: no token, no Host check (a probe names the pod's address), and
 * nothing about the server but whether it can take a request: 200 while a connection slot is
 * left besides the probe's own, else 503. */
static enum MHD_Result health(struct http *h, struct MHD_Connection *con, const char *method)
{
	bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD");
	bool ok = get && mcp_http_limits_slot_free(h->limits);
	const char *text = !get ? "" : ok ? "ok\n" : "no free connection slot\n";
	unsigned status = !get ? MHD_HTTP_METHOD_NOT_ALLOWED
			  : ok ? MHD_HTTP_OK
			       : MHD_HTTP_SERVICE_UNAVAILABLE;
	struct MHD_Response *r =
		MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
	MHD_add_response_header(r, "Content-Type", "text/plain");
	MHD_add_response_header(r, "Cache-Control", "no-store");
	if (!get)
		MHD_add_response_header(r, "Allow", "GET, HEAD");
	enum MHD_Result rc = MHD_queue_response(con, status, r);
	MHD_destroy_response(r);
	return rc;
}

/* A POST's state. A declared Content-Length is charged to the request budget at once, so a
 * body that cannot fit is refused before it is read (503). */
static enum MHD_Result start_upload(struct http *h, struct MHD_Connection *con, void **state)
{
	struct upload *u = calloc(1, sizeof(*u));
	if (!u)
		return MHD_NO;
	const char *length = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Content-Length");
	char *end;
	unsigned long long n = length ? strtoull(length, &end, 10) : 0;
	if (n && n <= MCP_MESSAGE_MAX && !charge(h, u, (size_t)n + 1)) {
		free(u);
		return over_budget(h, con);
	}
	*state = u;
	return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *con, const char *url,
				  const char *method, const char *version, const char *data,
				  size_t *data_size, void **state)
{
	struct http *h = cls;
	/* The headers are checked on the first call, before any of the body is kept: a client
	 * without the token or from another origin costs no buffer. */
	if (!*state) {
		mcp_http_limits_head_done(h->limits, con);
		if (!strcmp(url, HEALTH_PATH))
			return health(h, con, method);
		if (strcmp(url, "/mcp"))
			return mcp_http_refuse(con, MHD_HTTP_NOT_FOUND, MCP_INVALID_REQUEST,
					       "Not Found: use /mcp");
		if (!request_allowed(h, con))
			return mcp_http_refuse(con, MHD_HTTP_FORBIDDEN, MCP_INVALID_REQUEST,
					       "Forbidden: Host or Origin is not this server's");
		if (!token_ok(h, con))
			return mcp_http_refuse(con, MHD_HTTP_UNAUTHORIZED, MCP_INVALID_REQUEST,
					       "Unauthorized: a bearer token is required");
		if (!strcmp(method, "DELETE"))
			return end_session(h, con);
		if (strcmp(method, "POST"))
			return respond(con, MHD_HTTP_METHOD_NOT_ALLOWED, NULL);
		return start_upload(h, con, state);
	}
	struct upload *u = *state;
	if (*data_size) {
		keep(h, u, data, *data_size);
		*data_size = 0;
		return MHD_YES;
	}
	return dispatch(h, con, u);
}

static void on_done(void *cls, struct MHD_Connection *con, void **state,
		    enum MHD_RequestTerminationCode why)
{
	struct http *h = cls;
	struct upload *u = *state;
	if (u) {
		sc__buf_free(&u->body);
		mcp_http_limits_uncharge(h->limits, u->charged);
	}
	free(u);
	*state = NULL;
	mcp_http_limits_request_done(h->limits, con);
}

/* "HOST:PORT", "[V6]:PORT", ":PORT" or "PORT" (host 127.0.0.1) to an address to bind. */
static int resolve(const char *listen, struct http *h, struct addrinfo **out)
{
	const char *colon = strrchr(listen, ':');
	const char *port = colon ? colon + 1 : listen;
	size_t n = colon ? (size_t)(colon - listen) : 0;
	if (n >= sizeof(h->host) || !*port)
		return -1;
	memcpy(h->host, listen, n);
	h->host[n] = 0;
	if (!n)
		strcpy(h->host, "127.0.0.1");
	char name[256];
	snprintf(name, sizeof(name), "%s", h->host);
	if (name[0] == '[') {
		memmove(name, name + 1, strlen(name));
		name[strcspn(name, "]")] = 0;
	}
	struct addrinfo hints = {.ai_flags = AI_PASSIVE, .ai_socktype = SOCK_STREAM};
	return getaddrinfo(name, port, &hints, out) ? -1 : 0;
}

static unsigned bound_port(struct MHD_Daemon *d)
{
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	return info ? info->port : 0;
}

/* Serves until SIGINT or SIGTERM; main.c blocked both before any thread started. */
static int wait_for_signal(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	int sig = 0;
	sigwait(&set, &sig);
	return sig;
}

int mcp_serve_http(struct mcp_server *srv, const struct mcp_http_options *opts)
{
	const char *listen = opts->listen;
	struct http h = {srv, opts->token, NULL, "", opts->allow_hosts, opts->n_allow_hosts, NULL};
	struct addrinfo *ai = NULL;
	if (resolve(listen, &h, &ai) < 0) {
		fprintf(stderr, "snapcell mcp: --http %s: want HOST:PORT\n", listen);
		return 2;
	}
	h.sessions = mcp_http_sessions_new(opts->max_sessions, opts->session_idle_s);
	if (!h.sessions) {
		freeaddrinfo(ai);
		fprintf(stderr, "snapcell mcp: out of memory for %u sessions\n",
			opts->max_sessions);
		return 3;
	}
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
			 MHD_USE_ERROR_LOG | (ai->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0);
	h.limits = mcp_http_limits_new(opts->head_timeout_s, opts->max_connections,
				       opts->request_memory);
	struct MHD_Daemon *d =
		!h.limits ? NULL
			  : MHD_start_daemon(flags, 0, NULL, NULL, on_request, &h,
					     MHD_OPTION_SOCK_ADDR, ai->ai_addr,
					     MHD_OPTION_CONNECTION_LIMIT, opts->max_connections,
					     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT,
					     MHD_OPTION_NOTIFY_COMPLETED, on_done, &h,
					     MHD_OPTION_NOTIFY_CONNECTION, mcp_http_limits_track,
					     h.limits, MHD_OPTION_END);
	freeaddrinfo(ai);
	if (!d) {
		if (h.limits)
			fprintf(stderr, "snapcell mcp: cannot listen on %s\n", listen);
		mcp_http_limits_free(h.limits);
		mcp_http_sessions_free(h.sessions);
		return 3;
	}
	char url[300];
	snprintf(url, sizeof(url), "http://%s:%u/mcp", h.host, bound_port(d));
	fprintf(stderr, "snapcell mcp: listening on %s\n", url);
	mcp_server_listening(srv, url);
	wait_for_signal();
	/* Kill the runs first, so the connection threads return and stopping does not wait. */
	mcp_server_drain(srv);
	MHD_stop_daemon(d);
	mcp_http_limits_free(h.limits);
	mcp_http_sessions_free(h.sessions);
	return 0;
}
