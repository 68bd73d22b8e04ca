/* The MCP server behind `snapcell mcp`: JSON-RPC envelopes, the methods of both protocol eras
 * (the 2025-11-25 handshake and the stateless 2026-07-28 revision, chosen per request), the
 * execute_code tool, and the stdio and Streamable HTTP transports (with the handshake era's
 * Mcp-Session-Id sessions). Uses the public header and the front-end library (frontend/),
 * never cli/; snapcell_mcp.h is what the snapcell command sees of it. It is not a general
 * MCP library (the client side in downstream.h is only what offering downstream servers'
 * tools to the code needs). Stateful interpreter sessions (the session tools, sessions.c)
 * are the server's own, named by server-minted handles. */
#ifndef SNAPCELL_MCP_H
#define SNAPCELL_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapcell.h"
#include "snapcell_mcp.h"

/* Longest message accepted on any transport; longer lines are skipped, never buffered. */
#define MCP_MESSAGE_MAX (16u << 20)
/* The most an SSE event may hold, its field lines counted ("event: message", "data: ..."): the
 * official SDKs' readers refuse a larger one and end the session. */
#define MCP_EVENT_MAX (1u << 20)
/* What a message may hold, counted before it is parsed (snapcell_json_measure): jansson
 * spends ~150 bytes on an empty object, so 16 MiB of "{}," took the server to 1.26 GiB. No
 * method this server answers needs more than a few dozen values; 2^16 bound a message's tree
 * to ~10 MiB. The depth cap keeps jansson's recursion shallow. */
#define MCP_VALUES_MAX	    65536u
#define MCP_DEPTH_MAX	    64u
#define MCP_BYTES_PER_VALUE 160u
/* What a downstream MCP server's message may hold: its tools/list pages and results are
 * larger than a client's requests, but 16 MiB of "{}," from it cost as much (~40 MiB here). */
#define MCP_DOWNSTREAM_VALUES_MAX 262144u

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

/* envelope.c: parses one JSON-RPC 2.0 message (no batches: MCP dropped them in 2025-06-18),
 * refusing one past MCP_VALUES_MAX or MCP_DEPTH_MAX before building it. 0 and *msg filled, or
 * -1 and *error set to the error response to send (owned). */
int mcp_envelope_parse(const char *buf, size_t len, struct mcp_message *msg, json_t **error);
/* The memory parsing buf would take (its tree and strings, over-estimated): what a transport
 * charges to its budget of messages in flight. 0 for a text the parse refuses unbuilt. */
size_t mcp_envelope_cost(const char *buf, size_t len);
/* A downstream server's message (len bytes at buf) parsed, or NULL: not JSON, or past
 * MCP_DOWNSTREAM_VALUES_MAX values or jansson's depth, refused before any tree is built. */
json_t *mcp_downstream_parse(const char *buf, size_t len);
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
	/* Whose messages these are: notifications/cancelled reaches only the runs started with
	 * the same scope (an HTTP session's; 0 for stdio's one client and stateless requests). */
	uint64_t scope;
	/* Optional: called on the handling thread once a tools/call is admitted; true when the
	 * transport has freed that thread to run the call (it keeps reading on another), so no
	 * worker needs waking. NULL: the call goes to a worker. */
	bool (*run_here)(struct mcp_sink *sink);
	/* The handling thread may block while a tools/call waits for room in a full queue (an
	 * HTTP connection's thread, which waits for its answer anyway); stdio's reader may not. */
	bool may_wait;
	/* The transport keeps an answer's text after send returned (an HTTP response not yet
	 * written): the server then sets result_bytes before sending a result, and the
	 * transport gives them back with mcp_server_release() once the text is freed. */
	bool keeps_answer;
	size_t result_bytes;
	/* Optional: whether the client is gone (its connection closed) while its call runs; the
	 * server asks about every call in flight a few times a second and cancels the calls of a
	 * sink that says so. An HTTP response that is not a stream has no write to fail. */
	bool (*gone)(struct mcp_sink *sink);
	/* The longest message the transport delivers to its client as one piece, 0 for no limit:
	 * an SSE event's (MCP_EVENT_MAX). A larger result goes out with its big items as
	 * resource links (links.c). */
	size_t event_max;
	/* The handshake-era client declared form elicitation (initialize's capabilities), so a
	 * call that needs approval may be asked about with elicitation/create through send. */
	bool elicits;
};

/* Stateful sessions (sessions.c); zero members mean the defaults. */
struct mcp_session_options {
	bool enabled;		 /* off unless the config turns them on */
	unsigned max;		 /* live sessions; default 16 */
	unsigned idle_timeout_s; /* a session untouched this long is freed; default 600 */
	unsigned max_snapshots;	 /* per session; default 8 */
};

/* Most calls that may wait for a run to end (--max-queued, max_queued_calls). */
#define MCP_QUEUED_MAX 16384

/* Longest replica name (the part of a handle before '~'). */
#define MCP_REPLICA_MAX 63

#define MCP_RESULT_MEMORY_DEFAULT (768ull << 20)
#define MCP_RESULT_MEMORY_MIN	  (16ull << 20)
#define MCP_RESULT_MEMORY_MAX	  (1ull << 40)

/* Longest wait for room in a full queue (--queue-wait, queue_wait_s). */
#define MCP_QUEUE_WAIT_S_DEFAULT 10u
#define MCP_QUEUE_WAIT_S_MAX	 600u

struct mcp_options {
	unsigned max_runs;   /* concurrent tools/call runs; 0 = twice the cores */
	unsigned max_queued; /* calls waiting past max_runs; unless set, 4 * max_runs */
	bool max_queued_set;
	/* Calls one client identity (an HTTP session) may have running or queued at once;
	 * 0 = half of max_runs + max_queued, at least 1. */
	unsigned max_per_client;
	/* Seconds a call that finds the queue full may wait for room before it is busy, where
	 * the transport lets it wait (HTTP); unless set, MCP_QUEUE_WAIT_S_DEFAULT. */
	unsigned queue_wait_s;
	bool queue_wait_set;
	/* Memory all results may hold at once until sent (--result-memory,
	 * result_memory_bytes); 0 = MCP_RESULT_MEMORY_DEFAULT. */
	uint64_t result_memory;
	/* Seconds a result's resource links stay readable (--link-ttl, result_link_ttl_s);
	 * 0 = MCP_LINK_TTL_S_DEFAULT. */
	unsigned link_ttl_s;
	bool structured_content; /* also give the run as structuredContent */
	/* a run that failed through its code (error, timeout, memory, output limit, killed)
	 * answers isError: false; setup failures and cancellations stay errors */
	bool code_errors_as_results;
	bool require_initialize; /* stdio: refuse requests before initialize */
	/* The config file's command tools: every sandbox made from the config may call them,
	 * so they live until mcp_options_clear(), after the sandbox is freed. */
	struct fe_tool_command **tool_commands;
	size_t n_tool_commands;
	struct mcp_session_options sessions;
	char replica[MCP_REPLICA_MAX + 1]; /* "" = the host name */
	const char *listen;		   /* --http address; NULL for stdio (shown by doctor) */
	/* The config file's downstream MCP servers (downstream.h), connected while it loads and
	 * closed by mcp_options_clear(). */
	struct mcp_downstreams *downstreams;
};

void mcp_options_clear(struct mcp_options *opts);

/* server.c (calls.c and decide.c its parts, server.h their shared state) */
struct mcp_server;
/* The sandbox stays the caller's and must outlive the server. NULL after a message. */
struct mcp_server *mcp_server_new(struct snapcell_sandbox *sb, const struct snapcell_config *cfg,
				  const struct mcp_options *opts);
/* Handles one message, answering through sink (nothing for notifications and responses).
 * tools/call runs on a worker thread unless sync is set or sink->run_here() says the calling
 * thread may run it, in which case this returns after the answer was sent. sink must stay
 * valid until mcp_server_drain() returned. */
void mcp_server_handle(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink,
		       bool sync);
/* Cancels every run (the cells are killed) and waits for their workers. */
void mcp_server_drain(struct mcp_server *srv);
/* Waits up to ms milliseconds for every call in flight to be answered: true when none is
 * left. Nothing is cancelled (stdio's end of input answers the calls still running). */
bool mcp_server_wait_calls(struct mcp_server *srv, unsigned ms);
/* Records the address the HTTP transport bound (the port chosen for :0), for doctor. */
void mcp_server_listening(struct mcp_server *srv, const char *url);
/* Cancels the runs answering through sink (its client went away). */
void mcp_server_cancel_sink(struct mcp_server *srv, const struct mcp_sink *sink);
/* Gives back the result memory a transport held for an answer (sink->result_bytes). */
void mcp_server_release(struct mcp_server *srv, size_t bytes);
/* Cancels the runs started with this scope (their HTTP session ended) and ends its links. */
void mcp_server_cancel_scope(struct mcp_server *srv, uint64_t scope);
/* Whether some tool needs a decision on each call (the config's "approve"): a handshake-era
 * call from a client that elicits may then send a request while it runs. */
bool mcp_server_asks(const struct mcp_server *srv);
void mcp_server_free(struct mcp_server *srv);

/* result.c: a CallToolResult for a finished run. Its binary files are markers, expanded only
 * by mcp_message_text() on a thread bound to res (mcp_result_bind), so res must outlive the
 * message's sending. */
json_t *mcp_call_result(const struct snapcell_result *res, bool structured);
/* The memory a result of res costs the server until its message is sent, at most: the files,
 * their base64 or text, stdout and stderr. */
size_t mcp_result_cost(const struct snapcell_result *res);
/* The result whose files this thread's mcp_message_text() writes in place of their markers
 * (NULL: none). */
void mcp_result_bind(const struct snapcell_result *res);
/* A message as one line of compact JSON between prefix and suffix (either may be NULL), a
 * bound result's files written as base64 straight into it: malloc'd, NUL-terminated, *len
 * bytes; NULL when out of memory. */
char *mcp_message_text(const json_t *msg, const char *prefix, const char *suffix, size_t *len);
/* Sets, once before any call is served, whether mcp_call_result answers failures of the
 * code as results (isError: false) rather than errors (the default). */
void mcp_result_set_code_errors_as_results(bool on);
/* A CallToolResult with isError and one text. */
json_t *mcp_error_result(const char *status, const char *text);

/* The same result with the items that make its message longer than max bytes of text
 * (bound result expanded) replaced, largest first, by resource links named base + "stdout",
 * "stderr" or "output/<path>" (links.c); with res bound (mcp_result_bind). In place; false
 * when even with every item linked the message is longer. */
bool mcp_result_link(json_t *result, const struct snapcell_result *res, const char *base,
		     size_t max);
/* The length of msg's text as mcp_message_text() writes it (a bound result expanded). */
size_t mcp_message_size(const json_t *msg);
/* What res holds (its output and files): what its links keep charged while they live. */
size_t mcp_result_held(const struct snapcell_result *res);
/* The one entry of a ReadResourceResult's contents for the item a link names (the part of its
 * URI after the base: "stdout", "stderr", "output/<path>"), uri its URI; NULL when res has no
 * such item. A binary file is a marker, written by mcp_message_text() with res bound. *cost:
 * what the message costs the server until sent, at most. */
json_t *mcp_result_item(const struct snapcell_result *res, const char *item, const char *uri,
			size_t *cost);
/* approval.c: per-call approval (docs/approval.md, "MCP"). What the audit records as the
 * decider, and the _meta key of the question naming the tool and its arguments. */
#define MCP_DECIDED_BY	  "mcp-client"
#define MCP_APPROVAL_META "snapcell/approval"
/* The inputRequests key of the stateless era's question. */
#define MCP_APPROVAL_KEY "approval"
/* Whether capabilities (a client's) declare form elicitation. */
bool mcp_client_elicits(const json_t *capabilities);
/* elicitation/create's params asking about p: a form with one boolean, approve. NULL when
 * out of memory. */
json_t *mcp_approval_question(const struct snapcell_pending_call *p);
/* The verdict an ElicitResult gives: approved only for action accept with approve true;
 * decline, cancel and anything else reject, with *reason saying which. -1 when answer is not
 * an ElicitResult. */
int mcp_approval_verdict(const json_t *answer, enum snapcell_verdict *verdict, char *reason,
			 size_t reason_len);
/* The verdict a client's response message to elicitation/create gives: as above for a
 * result; an error response, or a result that is no ElicitResult, rejects (*reason says so). */
enum snapcell_verdict mcp_approval_answer(const json_t *response, char *reason, size_t len);
/* The stateless era's answer for a run that waits: the question as an elicitation/create
 * input request, the requestState a retry brings back, and res's record in _meta (res may be
 * NULL). NULL when out of memory. */
json_t *mcp_approval_input_required(const json_t *question, const char *state,
				    const struct snapcell_result *res);
/* The stateless era's runs waiting for a retry. Thread-safe; one per server. */
struct mcp_approvals;
struct mcp_approvals *mcp_approvals_new(const char *replica, uint64_t pause_ms);
void mcp_approvals_free(struct mcp_approvals *a);
/* Keeps the paused run whose pending call is pending_id for a retry of the call with this
 * code: its requestState ("REPLICA~approval-HEX", malloc'd), or NULL (no memory, or too
 * many waiting). */
char *mcp_approvals_park(struct mcp_approvals *a, uint64_t pending_id, const char *code,
			 size_t code_len, const json_t *question);
/* What a stateless retry (params with requestState and inputResponses) asks for. */
struct mcp_retry {
	uint64_t pending_id; /* to resume, with verdict and reason */
	enum snapcell_verdict verdict;
	char reason[256];
	json_t *again; /* no answer in it: the same input_required result again (owned) */
	char why[512]; /* else a refusal: the -32602 message */
};
/* Checks a retry of the call with this code against the parked runs: 1 to resume
 * (out->pending_id, verdict, reason; the run stays parked until mcp_approvals_take), 0 when
 * out->again or out->why is the answer. */
int mcp_approvals_retry(struct mcp_approvals *a, const json_t *params, const char *code,
			size_t code_len, struct mcp_retry *out);
/* Parks the paused run res for a retry of the call with this code: its input_required result
 * (the question, the requestState, res's record), or NULL (it could not be kept). */
json_t *mcp_approvals_ask(struct mcp_approvals *a, const struct snapcell_result *res,
			  const char *code, size_t code_len);
/* Why a call of p was refused when the client could not be asked here: it declared no
 * elicitation (in initialize, or in the stateless request's capabilities), or, stateless,
 * the run is a session's or could not be kept. */
void mcp_approval_refusal(const struct snapcell_pending_call *p, bool modern, bool elicits,
			  bool in_session, char *reason, size_t len);
/* Takes the run off the table for its resume: true for exactly one caller. */
bool mcp_approvals_take(struct mcp_approvals *a, const char *state, uint64_t pending_id);

/* sessions.c: the session tools (session_new, session_snapshot, session_restore,
 * session_close) and execute_code's session argument. Thread-safe; one per server. */
struct mcp_sessions;
/* The sandbox must outlive it. NULL after a message. */
struct mcp_sessions *mcp_sessions_new(struct snapcell_sandbox *sb, const struct mcp_options *opts);
/* Ends every session (their runs must be over: drain the server first). */
void mcp_sessions_free(struct mcp_sessions *reg);
/* Whether a tools/call with these params is the sessions' to answer: a session tool (when
 * sessions are enabled), or execute_code with a session argument. */
bool mcp_sessions_claims(const struct mcp_sessions *reg, const json_t *params);
/* Decides each call a paused run waits on until it ends: takes res, gives the run's last
 * result (NULL when a resume failed). */
typedef struct snapcell_result *(*mcp_settle_fn)(void *ctx, struct snapcell_result *res);
/* Answers such a call (blocking for a run; settle decides the calls a paused run waits on,
 * with ctx); cancel kills a run in progress. A new
 * CallToolResult; *res is the run's result when there was one (the caller's, to free after
 * the answer is sent: see mcp_call_result), else NULL. */
json_t *mcp_sessions_call(struct mcp_sessions *reg, const json_t *params,
			  struct snapcell_cancel *cancel, bool structured,
			  struct snapcell_result **res, mcp_settle_fn settle, void *ctx);
/* The server's replica name (the config's or --replica, else the host name). */
const char *mcp_sessions_replica(const struct mcp_sessions *reg);
/* Adds the session argument and tools to a tools/list result, when sessions are enabled. */
void mcp_sessions_list_tools(const struct mcp_sessions *reg, json_t *list);
/* The transport doctor shows, once the HTTP transport knows its URL. */
void mcp_sessions_set_transport(struct mcp_sessions *reg, const char *transport);
/* Whether name may name a replica: 1 to MCP_REPLICA_MAX of [A-Za-z0-9._-]. */
bool mcp_replica_valid(const char *name);

/* state.c: the server's state file, which `snapcell doctor` lists (mcp_servers_json). The
 * path of this process's file (owned), its directory made; NULL after a message. */
char *mcp_state_path(void);
/* Replaces the file with doc, atomically (a failure is logged once, never fatal). */
void mcp_state_write(const char *path, const json_t *doc);

/* config.c: reads a --config file into cfg and opts; -1 after a message on stderr naming the
 * offending key's path. */
int mcp_config_load(const char *path, struct snapcell_config *cfg, struct mcp_options *opts);
/* The same for a parsed file (root, borrowed); file only names it in messages. */
int mcp_config_apply(const char *file, json_t *root, struct snapcell_config *cfg,
		     struct mcp_options *opts);

/* secret.c: MCP_SECRET_HEX lowercase hex digits of random bytes (128 bits no client can
 * guess) into out, NUL-terminated; 0 or -errno. */
#define MCP_SECRET_BYTES 16
#define MCP_SECRET_HEX	 (2 * MCP_SECRET_BYTES)
int mcp_secret_new(char out[MCP_SECRET_HEX + 1]);
/* Whether the first n bytes of a and b agree, compared in full whatever differs first: a
 * caller probing ids, handles or tokens learns nothing from how long a refusal took. */
bool mcp_secret_equal(const char *a, const char *b, size_t n);

/* links.c: results kept for resources/read behind capability URIs. Thread-safe. */
#define MCP_LINK_TTL_S_DEFAULT 600u
#define MCP_LINK_TTL_S_MAX     86400u
/* "snapcell://result/" + MCP_SECRET_HEX + "/" and its NUL. */
#define MCP_LINK_BASE_MAX (sizeof("snapcell://result/") + MCP_SECRET_HEX + 1)
struct mcp_links;
struct mcp_kept;
/* Kept results live ttl_s seconds (0: MCP_LINK_TTL_S_DEFAULT). NULL when out of memory. */
struct mcp_links *mcp_links_new(unsigned ttl_s);
void mcp_links_free(struct mcp_links *l);
unsigned mcp_links_ttl(const struct mcp_links *l);
/* A new capability, "snapcell://result/<secret>/", into base; 0 or -1 (no random bytes). */
int mcp_links_base(char base[MCP_LINK_BASE_MAX]);
/* Keeps res (stolen) under base for scope, charged bytes of the result memory: a reference
 * for the caller (mcp_links_drop), or NULL (res is still the caller's). */
struct mcp_kept *mcp_links_keep(struct mcp_links *l, struct snapcell_result *res, uint64_t scope,
				size_t charged, const char *base);
/* Ends the expired: the bytes they had charged, for the caller to give back. */
size_t mcp_links_sweep(struct mcp_links *l);
/* Ends those of scope (not 0: its HTTP session ended), the same way. */
size_t mcp_links_forget(struct mcp_links *l, uint64_t scope);
/* The live result uri names that scope may read, referenced, with *item pointing to the rest
 * of uri; NULL for none (never issued, expired, or another session's). */
struct mcp_kept *mcp_links_find(struct mcp_links *l, const char *uri, uint64_t scope,
				const char **item);
const struct snapcell_result *mcp_kept_result(const struct mcp_kept *k);
/* Drops a reference from mcp_links_keep or mcp_links_find (NULL: none). */
void mcp_links_drop(struct mcp_links *l, struct mcp_kept *k);

/* http_session.c: the handshake era's HTTP sessions (Mcp-Session-Id), a bounded table. */
#define MCP_SESSION_ID_LEN    36    /* visible ASCII: 4 hex digits of slot, 32 of secret */
#define MCP_HTTP_SESSIONS_MAX 65536 /* what 4 hex digits number */
struct mcp_http_sessions;
/* At most max live sessions; one unused for idle_s seconds is gone. */
struct mcp_http_sessions *mcp_http_sessions_new(unsigned max, unsigned idle_s);
void mcp_http_sessions_free(struct mcp_http_sessions *s);
/* Mints a session: its id (NUL-terminated) and its scope (never 0); elicits: its client
 * declared elicitation. When the table is full the least recently used session ends
 * (logged). -1 when no random bytes could be had. */
int mcp_http_session_open(struct mcp_http_sessions *s, char id[MCP_SESSION_ID_LEN + 1],
			  uint64_t *scope, bool elicits);
/* The scope of the live session id names, its idle time restarted, and (elicits, when not
 * NULL) whether its client elicits; 0 when there is none (unknown, ended or expired). */
uint64_t mcp_http_session_find(struct mcp_http_sessions *s, const char *id, bool *elicits);
/* Ends the session id names: its scope, or 0 when there was none live. */
uint64_t mcp_http_session_close(struct mcp_http_sessions *s, const char *id);

struct mcp_http_options {
	const char *listen; /* HOST:PORT */
	const char *token;  /* required bearer token, or NULL */
	unsigned max_sessions, session_idle_s;
	/* More names Host and Origin may give besides loopback and the bound host. */
	const char *const *allow_hosts;
	size_t n_allow_hosts;
	unsigned head_timeout_s;  /* a request head must be complete this long after accept */
	unsigned max_connections; /* open connections, /healthz's slots */
	size_t request_memory;	  /* bytes of request bodies and their trees in flight */
};

/* stdio.c, http.c: serve until the client goes (stdio: end of input) or a signal. */
int mcp_serve_stdio(struct mcp_server *srv);
int mcp_serve_http(struct mcp_server *srv, const struct mcp_http_options *opts);

#endif
