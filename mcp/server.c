/* The MCP methods for a server with one tool, execute_code, in both eras, chosen per request:
 * the handshake era (2025-11-25, also answering 2025-06-18 and 2025-03-26 clients: initialize,
 * ping, tools/list, tools/call) and the stateless 2026-07-28 revision (server/discover,
 * tools/list, tools/call; every result with resultType and serverInfo, lists with cache
 * hints). Runs happen off the thread that keeps reading (cancellation arrives while a run is
 * in progress): on the transport's own thread when it can free it (stdio hands reading to
 * another thread, an HTTP connection's thread waits for its answer anyway), else on a pool
 * of long-lived workers, so a call is handed to a waiting thread instead of paying for a new
 * one. A ticker thread sends progress for runs past a second. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../frontend/frontend.h"
#include "mcp.h"

#define PROGRESS_FIRST_US 1000000u
#define PROGRESS_EVERY_US 1000000u
#define TICK_NS		  200000000L
/* How long a stateless client may cache tools/list and server/discover. Both are fixed for
 * the server's life (the config is read once); an hour bounds what a restart with another
 * config leaves stale. The same for every caller (no per-user data), so "public". */
#define CACHE_TTL_MS 3600000
#define CACHE_SCOPE  "public"
/* A worker with nothing to do for this long ends, so a burst does not keep its threads. */
#define WORKER_IDLE_S 30

/* A tools/call in progress; it is on the server's list from its start until its answer. */
struct call {
	struct mcp_server *srv;
	struct mcp_sink *sink;
	json_t *id, *progress_token;
	char *code;
	size_t code_len;
	json_t *session_params; /* the call's params when the sessions answer it (sessions.c) */
	struct snapcell_cancel *cancel;
	bool cancelled;
	bool queued; /* admitted past the cap: waits for a run to end before it runs */
	bool modern; /* answer with the stateless revision's result fields */
	/* The client can be asked to approve a call (handshake era: it declared elicitation in
	 * initialize; stateless: in this request's clientCapabilities). */
	bool elicits;
	/* A stateless retry answering the question of a parked run: its requestState, the run's
	 * pending id and the answer's verdict. */
	char *state;
	uint64_t resume_id;
	enum snapcell_verdict verdict;
	char reason[256];
	json_t *asked; /* the input_required result, once the run was parked */
	uint64_t next_progress_us, start_us;
	struct call *next;
};

/* An elicitation/create sent to a handshake-era client, on the server's list until its answer
 * came (only from the same scope: another HTTP session cannot answer it). */
struct ask {
	json_t *id;
	uint64_t scope;
	json_t *answer; /* the client's response message, once it came */
	struct ask *next;
};

/* A pool thread. While idle it waits on wake, on the server's idle list, until a call is
 * handed to it (call set by the dispatcher, under the server's lock). */
struct worker {
	struct mcp_server *srv;
	pthread_cond_t wake;
	struct call *call;
	struct worker *next;
};

struct mcp_server {
	struct snapcell_sandbox *sb;
	char *description, *instructions;
	struct mcp_options opts;
	bool initialized;
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a call or a worker ended, or stopping was set */
	struct call *calls;
	unsigned n_calls;    /* on the list or still answering: drain waits for 0 */
	unsigned n_running;  /* admitted and not yet finished running: the cap */
	unsigned n_queued;   /* admitted past the cap, waiting for a run to end */
	struct worker *idle; /* waiting workers, the most recent first */
	unsigned n_workers;
	bool stopping;
	bool draining;	     /* no call is admitted any more, and none waits for room */
	size_t result_bytes; /* what results hold until sent (mcp_result_cost), at most
			      * opts.result_memory */
	pthread_t ticker;
	struct mcp_sessions *sessions;
	struct mcp_links *links; /* results kept for resources/read (links.c) */
	bool asks_approval;	 /* some tool needs a decision per call (the config's "approve") */
	uint64_t pause_us; /* how long a run waits for its decision (SNAPCELL_LIMIT_PAUSE_MS) */
	struct ask *asks;
	uint64_t n_asks;
	struct mcp_approvals *approvals;
};

/* Called with srv->lock held, so a run's progress never follows its answer. */
static void send_progress(struct call *c, uint64_t now)
{
	double seconds = (double)(now - c->start_us) / 1e6;
	char message[64];
	snprintf(message, sizeof(message), "running for %.0f s", seconds);
	json_t *n = json_pack("{s:s, s:s, s:{s:O, s:f, s:s}}", "jsonrpc", "2.0", "method",
			      "notifications/progress", "params", "progressToken",
			      c->progress_token, "progress", seconds, "message", message);
	if (n)
		c->sink->send(c->sink, n);
	c->next_progress_us = now + PROGRESS_EVERY_US;
}

/* With srv->lock held: cancels the calls whose client went away (mcp_sink.gone). */
static void cancel_gone(struct mcp_server *srv)
{
	bool any = false;
	for (struct call *c = srv->calls; c; c = c->next)
		if (!c->cancelled && c->sink->gone && c->sink->gone(c->sink)) {
			c->cancelled = any = true;
			snapcell_cancel_fire(c->cancel);
		}
	if (any)
		pthread_cond_broadcast(&srv->changed); /* a queued call waits on it */
}

static void *ticker_main(void *arg)
{
	struct mcp_server *srv = arg;
	pthread_mutex_lock(&srv->lock);
	while (!srv->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += TICK_NS;
		if (ts.tv_nsec >= 1000000000L)
			ts.tv_sec++, ts.tv_nsec -= 1000000000L;
		pthread_cond_timedwait(&srv->changed, &srv->lock, &ts);
		uint64_t now = fe_now_us();
		for (struct call *c = srv->calls; c; c = c->next)
			if (c->progress_token && !c->cancelled && now >= c->next_progress_us)
				send_progress(c, now);
		cancel_gone(srv);
	}
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

struct mcp_server *mcp_server_new(struct snapcell_sandbox *sb, const struct snapcell_config *cfg,
				  const struct mcp_options *opts)
{
	struct mcp_server *srv = calloc(1, sizeof(*srv));
	struct snapcell_error err = {0};
	if (!srv)
		return NULL;
	srv->sb = sb;
	srv->opts = *opts;
	if (!srv->opts.max_runs) {
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		srv->opts.max_runs = cores > 0 ? (unsigned)cores * 2 : 2;
	}
	if (!srv->opts.max_queued_set)
		srv->opts.max_queued = srv->opts.max_runs * 4;
	if (!srv->opts.max_per_client) {
		unsigned half = (srv->opts.max_runs + srv->opts.max_queued) / 2;
		srv->opts.max_per_client = half ? half : 1;
	}
	if (!srv->opts.queue_wait_set)
		srv->opts.queue_wait_s = MCP_QUEUE_WAIT_S_DEFAULT;
	if (!srv->opts.result_memory)
		srv->opts.result_memory = MCP_RESULT_MEMORY_DEFAULT;
	if (snapcell_config_describe(cfg, SNAPCELL_DESCRIBE_COMPACT, &srv->description, &err) < 0 ||
	    snapcell_config_instructions(cfg, &srv->instructions, &err) < 0) {
		fprintf(stderr, "snapcell mcp: describe: %s\n", err.message);
		mcp_server_free(srv);
		return NULL;
	}
	if (!(srv->sessions = mcp_sessions_new(sb, opts)) ||
	    !(srv->links = mcp_links_new(opts->link_ttl_s))) {
		mcp_server_free(srv);
		return NULL;
	}
	struct snapcell_tool_info info;
	for (size_t i = 0; i < snapcell_config_tool_count(cfg); i++)
		if (snapcell_config_tool_info(cfg, i, &info, NULL) == 0 &&
		    snapcell_config_tool_needs_decision(cfg, info.name))
			srv->asks_approval = true;
	uint64_t pause_ms = snapcell_config_get_limit(cfg, SNAPCELL_LIMIT_PAUSE_MS);
	srv->pause_us = pause_ms * 1000;
	srv->approvals = mcp_approvals_new(mcp_sessions_replica(srv->sessions), pause_ms);
	if (!srv->approvals) {
		mcp_server_free(srv);
		return NULL;
	}
	pthread_mutex_init(&srv->lock, NULL);
	pthread_cond_init(&srv->changed, NULL);
	if (pthread_create(&srv->ticker, NULL, ticker_main, srv) != 0) {
		fprintf(stderr, "snapcell mcp: cannot start the progress thread\n");
		srv->ticker = 0;
		mcp_server_free(srv);
		return NULL;
	}
	return srv;
}

void mcp_server_drain(struct mcp_server *srv)
{
	pthread_mutex_lock(&srv->lock);
	srv->draining = true;
	pthread_cond_broadcast(&srv->changed); /* a call waiting for room gives up */
	for (struct call *c = srv->calls; c; c = c->next) {
		c->cancelled = true;
		snapcell_cancel_fire(c->cancel);
	}
	while (srv->n_calls)
		pthread_cond_wait(&srv->changed, &srv->lock);
	pthread_mutex_unlock(&srv->lock);
}

bool mcp_server_wait_calls(struct mcp_server *srv, unsigned ms)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	until.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (until.tv_nsec >= 1000000000L)
		until.tv_sec++, until.tv_nsec -= 1000000000L;
	pthread_mutex_lock(&srv->lock);
	while (srv->n_calls &&
	       pthread_cond_timedwait(&srv->changed, &srv->lock, &until) != ETIMEDOUT)
		;
	bool idle = srv->n_calls == 0;
	pthread_mutex_unlock(&srv->lock);
	return idle;
}

void mcp_server_free(struct mcp_server *srv)
{
	if (!srv)
		return;
	if (srv->ticker) {
		mcp_server_drain(srv);
		pthread_mutex_lock(&srv->lock);
		srv->stopping = true;
		pthread_cond_broadcast(&srv->changed);
		for (struct worker *w = srv->idle; w; w = w->next)
			pthread_cond_signal(&w->wake);
		while (srv->n_workers)
			pthread_cond_wait(&srv->changed, &srv->lock);
		pthread_mutex_unlock(&srv->lock);
		pthread_join(srv->ticker, NULL);
		pthread_mutex_destroy(&srv->lock);
		pthread_cond_destroy(&srv->changed);
	}
	mcp_sessions_free(srv->sessions); /* after the drain: no run uses a session now */
	mcp_links_free(srv->links);
	mcp_approvals_free(srv->approvals);
	free(srv->description);
	free(srv->instructions);
	free(srv);
}

static void reply(struct mcp_sink *sink, json_t *msg)
{
	if (msg)
		sink->send(sink, msg);
}

static json_t *tool_list(const struct mcp_server *srv)
{
	json_t *schema = json_loads(snapcell_execute_code_schema(0), 0, NULL);
	json_t *list = json_pack("{s:[{s:s, s:s, s:s, s:o}]}", "tools", "name", "execute_code",
				 "title", "Execute Python code", "description", srv->description,
				 "inputSchema", schema ? schema : json_object());
	mcp_sessions_list_tools(srv->sessions, list);
	return list;
}

static json_t *initialize_result(struct mcp_server *srv, const json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	const char *version = mcp_version_negotiate(asked);
	return json_pack("{s:s, s:{s:{}, s:{}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion",
			 version, "capabilities", "tools", "resources", "serverInfo", "name",
			 "snapcell", "title", "snapcell", "version", snapcell_version(),
			 "instructions", srv->instructions);
}

/* A stateless-era result: resultType, and the server's identity in _meta (the revision has
 * no handshake to give it once). Legacy results keep their 2025-11-25 shape. */
static json_t *complete(json_t *result, bool modern)
{
	if (!modern || !result)
		return result;
	if (!json_object_get(result, "resultType")) /* an input_required result keeps its own */
		json_object_set_new(result, "resultType", json_string("complete"));
	json_t *meta = json_object_get(result, "_meta");
	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(result, "_meta", meta);
	}
	json_object_set_new(
		meta, "io.modelcontextprotocol/serverInfo",
		json_pack("{s:s, s:s}", "name", "snapcell", "version", snapcell_version()));
	return result;
}

static json_t *cacheable(json_t *result)
{
	json_object_set_new(result, "ttlMs", json_integer(CACHE_TTL_MS));
	json_object_set_new(result, "cacheScope", json_string(CACHE_SCOPE));
	return complete(result, true);
}

/* server/discover: no listChanged (the list never changes, and there is no
 * subscriptions/listen to send it on). supportedVersions names the handshake-era versions
 * too (reached through initialize), as the -32022 error's list does: a dual-era client
 * whose stateless versions are not ours still learns it can fall back. */
static json_t *discover_result(const struct mcp_server *srv)
{
	return cacheable(json_pack("{s:o, s:{s:{}, s:{}}, s:s}", "supportedVersions",
				   mcp_versions_json(), "capabilities", "tools", "resources",
				   "instructions", srv->instructions));
}

static void call_free(struct call *c)
{
	json_decref(c->id);
	json_decref(c->progress_token);
	json_decref(c->session_params);
	json_decref(c->asked);
	free(c->state);
	free(c->code);
	snapcell_cancel_free(c->cancel);
	free(c);
}

/* A queued call waits here, on the thread that will run it (never the transport's reader),
 * until a run ends and leaves room; false when it was cancelled meanwhile. Either way it
 * then counts as running, so run_call's end gives the room back. */
static bool wait_turn(struct call *c)
{
	struct mcp_server *srv = c->srv;
	pthread_mutex_lock(&srv->lock);
	if (c->queued) {
		while (srv->n_running >= srv->opts.max_runs && !c->cancelled)
			pthread_cond_wait(&srv->changed, &srv->lock);
		srv->n_queued--;
		srv->n_running++;
		c->queued = false;
		pthread_cond_broadcast(&srv->changed); /* the queue has room: a waiter may enter */
	}
	bool run = !c->cancelled;
	pthread_mutex_unlock(&srv->lock);
	return run;
}

void mcp_server_release(struct mcp_server *srv, size_t bytes)
{
	if (!bytes)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->result_bytes -= bytes;
	pthread_mutex_unlock(&srv->lock);
}

/* Takes bytes from the result budget for an answer; false when they do not fit now. */
static bool charge(struct mcp_server *srv, size_t bytes)
{
	size_t expired = mcp_links_sweep(srv->links);
	pthread_mutex_lock(&srv->lock);
	srv->result_bytes -= expired;
	bool fits = bytes <= srv->opts.result_memory - srv->result_bytes;
	if (fits)
		srv->result_bytes += bytes;
	pthread_mutex_unlock(&srv->lock);
	return fits;
}

/* Takes what a run's result costs until sent from the result budget: 0 and *cost, or an
 * error result saying why not (the run's files are then dropped, never an OOM kill). */
static json_t *charge_result(struct mcp_server *srv, const struct snapcell_result *res,
			     size_t *cost)
{
	*cost = mcp_result_cost(res);
	size_t budget = srv->opts.result_memory;
	if (charge(srv, *cost))
		return NULL;
	char text[400];
	bool never = *cost > budget;
	snprintf(text, sizeof(text),
		 "the run finished (status %s) but its result is too large for this server to "
		 "send %s: with its %zu files it needs %zu MiB of the %zu MiB the server keeps "
		 "for results (--result-memory, result_memory_bytes)%s; leave less in /output",
		 snapcell_status_name(res->status), never ? "at all" : "now", res->n_artifacts,
		 *cost >> 20, budget >> 20,
		 never ? "" : ", and answers in flight hold the rest: try again");
	*cost = 0;
	return mcp_error_result(never ? "result-too-large" : "busy", text);
}

bool mcp_server_asks(const struct mcp_server *srv)
{
	return srv->asks_approval;
}

/* Waits, srv->lock held, for a's answer, the call's cancellation or the end of the pause (the
 * library then expires the run whatever we say). */
static void await_answer(struct call *c, struct ask *a)
{
	struct mcp_server *srv = c->srv;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(srv->pause_us / 1000000) + 1;
	while (!a->answer && !c->cancelled)
		if (pthread_cond_timedwait(&srv->changed, &srv->lock, &until) == ETIMEDOUT)
			break;
}

/* Asks the handshake-era client about p (elicitation/create on the call's sink: stdout, or
 * the call's SSE stream) and waits for its answer. */
static enum snapcell_verdict ask_client(struct call *c, const struct snapcell_pending_call *p,
					char *reason, size_t len)
{
	struct mcp_server *srv = c->srv;
	char id[48];
	struct ask a = {.scope = c->sink->scope};
	json_t *question = mcp_approval_question(p);
	pthread_mutex_lock(&srv->lock);
	snprintf(id, sizeof(id), "snapcell-approval-%" PRIu64, ++srv->n_asks);
	a.id = json_string(id);
	a.next = srv->asks;
	srv->asks = &a; /* before sending: the answer may come before send returns */
	/* A run waiting for a person holds no run slot (the library bounds paused runs apart): a
	 * client that never answers cannot make the server busy. Given back before the question
	 * leaves, so the client's next call finds it; taken again (or waited for) to go on. */
	srv->n_running--;
	pthread_cond_broadcast(&srv->changed);
	pthread_mutex_unlock(&srv->lock);
	json_t *request = question && a.id
				  ? json_pack("{s:s, s:O, s:s, s:O}", "jsonrpc", "2.0", "id", a.id,
					      "method", "elicitation/create", "params", question)
				  : NULL;
	json_decref(question);
	bool sent = request && c->sink->send(c->sink, request) == 0;
	pthread_mutex_lock(&srv->lock);
	if (sent)
		await_answer(c, &a);
	while (srv->n_running >= srv->opts.max_runs && !c->cancelled && !srv->draining)
		pthread_cond_wait(&srv->changed, &srv->lock);
	srv->n_running++;
	struct ask **pp = &srv->asks;
	while (*pp != &a)
		pp = &(*pp)->next;
	*pp = a.next;
	bool cancelled = c->cancelled;
	pthread_mutex_unlock(&srv->lock);
	enum snapcell_verdict v = SNAPCELL_VERDICT_REJECTED;
	if (!sent)
		snprintf(reason, len,
			 "approval was not possible: the question could not be sent "
			 "to the MCP client");
	else if (cancelled)
		snprintf(reason, len, "the call was cancelled while the MCP client was asked");
	else if (!a.answer)
		snprintf(reason, len, "no answer came from the MCP client in time");
	else
		v = mcp_approval_answer(a.answer, reason, len);
	json_decref(a.answer);
	json_decref(a.id);
	return v;
}

/* A handshake-era client's response: the answer to the ask with its id and scope. */
static void answered(struct mcp_server *srv, const struct mcp_message *msg,
		     const struct mcp_sink *sink)
{
	uint64_t scope = sink ? sink->scope : 0;
	pthread_mutex_lock(&srv->lock);
	for (struct ask *a = srv->asks; a; a = a->next)
		if (!a->answer && a->scope == scope && json_equal(a->id, msg->id)) {
			a->answer = json_incref(msg->root);
			pthread_cond_broadcast(&srv->changed);
			break;
		}
	pthread_mutex_unlock(&srv->lock);
}

/* The verdict on p when the client cannot be asked here. */
static enum snapcell_verdict decide(struct call *c, const struct snapcell_pending_call *p,
				    char *reason, size_t len)
{
	if (c->elicits && !c->modern)
		return ask_client(c, p, reason, len);
	mcp_approval_refusal(p, c->modern, c->elicits, c->session_params != NULL, reason, len);
	return SNAPCELL_VERDICT_REJECTED;
}

/* Gives the decision on the paused run with this pending id: its next result, or NULL (the
 * reason logged). res, the previous one, is freed. */
static struct snapcell_result *resume(struct call *c, struct snapcell_result *res, uint64_t id,
				      enum snapcell_verdict v, const char *reason)
{
	struct snapcell_run_options o = {.size = sizeof(o), .cancel = c->cancel};
	struct snapcell_result *next = NULL;
	struct snapcell_error err = {0};
	if (snapcell_sandbox_resume(c->srv->sb, id, v,
				    v == SNAPCELL_VERDICT_REJECTED ? reason : NULL, MCP_DECIDED_BY,
				    &o, &next, &err) < 0) {
		fprintf(stderr, "snapcell mcp: resume: %s\n", err.message);
		next = NULL;
	}
	snapcell_result_free(res);
	return next;
}

/* mcp_settle_fn: decides each call the run waits on until it ends, or, in the stateless era
 * (not in a session), parks it and leaves c->asked set. */
static struct snapcell_result *settle(void *ctx, struct snapcell_result *res)
{
	struct call *c = ctx;
	while (res && res->status == SNAPCELL_STATUS_PAUSED) {
		if (c->modern && c->elicits && !c->session_params &&
		    (c->asked = mcp_approvals_ask(c->srv->approvals, res, c->code, c->code_len)))
			return res;
		char reason[512];
		enum snapcell_verdict v = decide(c, res->pending, reason, sizeof(reason));
		res = resume(c, res, res->pending->id, v, reason);
	}
	return res;
}

/* A stateless retry: resumes the parked run with the client's answer. */
static struct snapcell_result *resume_parked(struct call *c, json_t **refused)
{
	if (!mcp_approvals_take(c->srv->approvals, c->state, c->resume_id)) {
		*refused = mcp_error_result("invalid-arguments",
					    "another retry answered this question already; "
					    "nothing was run");
		return NULL;
	}
	struct snapcell_result *res = resume(c, NULL, c->resume_id, c->verdict, c->reason);
	if (!res)
		*refused = mcp_error_result("expired",
					    "the paused run is gone (it expired, and its result "
					    "is no longer kept); nothing was run");
	return res;
}

/* A call the sessions answer; a run's result is charged like any other (its answer, built
 * first, is replaced by the refusal when it does not fit). */
static json_t *session_call(struct mcp_server *srv, struct call *c, struct snapcell_result **res,
			    size_t *cost)
{
	json_t *result = mcp_sessions_call(srv->sessions, c->session_params, c->cancel,
					   srv->opts.structured_content, res, settle, c);
	json_t *refused = *res ? charge_result(srv, *res, cost) : NULL;
	if (!refused)
		return result;
	json_decref(result);
	return refused;
}

/* An answer that goes out as one SSE event (sink->event_max) must fit in one: its largest
 * items become resource links to the result, which is kept for resources/read (links.c) with
 * what it holds still charged. *res then belongs to the links and *held is a reference to it,
 * for the caller to drop once the answer is sent. */
static json_t *fit_event(struct mcp_server *srv, const struct call *c, json_t *result,
			 struct snapcell_result *res, size_t *cost, struct mcp_kept **held)
{
	/* Room for the framing, the envelope and the stateless revision's fields. */
	size_t max = c->sink->event_max - 4096;
	char base[MCP_LINK_BASE_MAX];
	mcp_result_bind(res);
	bool fits = mcp_message_size(result) <= max;
	bool linked = !fits && mcp_links_base(base) == 0 && mcp_result_link(result, res, base, max);
	mcp_result_bind(NULL);
	if (fits)
		return result;
	size_t keep = mcp_result_held(res);
	if (linked && keep <= *cost &&
	    (*held = mcp_links_keep(srv->links, res, c->sink->scope, keep, base))) {
		*cost -= keep;
		return result;
	}
	json_decref(result);
	char text[300];
	snprintf(text, sizeof(text),
		 "the run finished (status %s) but its result does not fit in one server-sent "
		 "event (%u KiB) even with its output and files as resource links; call without "
		 "a progressToken to have it as one JSON response",
		 snapcell_status_name(res->status), MCP_EVENT_MAX >> 10);
	return mcp_error_result("result-too-large", text);
}

static void run_call(struct call *c)
{
	struct mcp_server *srv = c->srv;
	struct snapcell_run_options opts = {.size = sizeof(opts), .cancel = c->cancel};
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	json_t *result = NULL;
	size_t cost = 0;
	if (!wait_turn(c))
		result = mcp_error_result("cancelled", "the call was cancelled while it waited "
						       "for a run to end; nothing was run");
	else if (c->session_params)
		result = session_call(srv, c, &res, &cost);
	else if (c->state)
		res = resume_parked(c, &result);
	else if (snapcell_sandbox_run(srv->sb, c->code, c->code_len, &opts, &res, &err) < 0)
		result = mcp_error_result("setup-failure", err.message);
	if (!c->session_params && res)
		res = settle(c, res);
	if (!result && c->asked)
		result = json_incref(c->asked);
	else if (!result && !res)
		result = mcp_error_result("setup-failure", "a decision on a call the run waited "
							   "on could not be given (see the "
							   "server's log); the run ended");
	else if (!result && !(result = charge_result(srv, res, &cost)))
		result = mcp_call_result(res, srv->opts.structured_content);
	pthread_mutex_lock(&srv->lock);
	struct call **p = &srv->calls;
	while (*p != c)
		p = &(*p)->next;
	*p = c->next;
	bool cancelled = c->cancelled;
	/* The run is over: a call sent as soon as this answer arrives, or one waiting in the
	 * queue, must find room. */
	srv->n_running--;
	pthread_cond_broadcast(&srv->changed);
	pthread_mutex_unlock(&srv->lock);
	struct mcp_kept *held = NULL;
	if (!cancelled && res && c->sink->event_max)
		result = fit_event(srv, c, result, res, &cost, &held);
	/* The client gave up on a cancelled request: the spec says not to answer it, except
	 * that an HTTP response must say something. The result's files are written into the
	 * message's text by this thread, from res (mcp_result_bind). */
	bool kept = !cancelled && c->sink->keeps_answer; /* the sink may be gone after reply */
	if (c->sink->keeps_answer) /* its own: stdio's one sink is shared by every call */
		c->sink->result_bytes = kept ? cost : 0;
	mcp_result_bind(res);
	if (!cancelled)
		reply(c->sink, mcp_response(c->id, complete(result, c->modern)));
	else if (c->sink->must_answer)
		reply(c->sink, mcp_error(c->id, MCP_REQUEST_CANCELLED, "Request cancelled"));
	mcp_result_bind(NULL);
	if (cancelled)
		json_decref(result);
	if (held)
		mcp_links_drop(srv->links, held); /* the links keep res */
	else
		snapcell_result_free(res);
	/* Held by the transport until its text is freed, or given back now. */
	if (!kept)
		mcp_server_release(srv, cost);
	call_free(c);
}

/* With srv->lock held, after run_call(): only now may mcp_server_drain() return and the
 * transport free the sink. */
static void call_done(struct mcp_server *srv)
{
	srv->n_calls--;
	pthread_cond_broadcast(&srv->changed);
}

/* With srv->lock held: waits on the idle list until a call is handed over (true) or the
 * server stops or the worker has idled WORKER_IDLE_S (false, off the list). */
static bool worker_wait(struct worker *w)
{
	struct mcp_server *srv = w->srv;
	w->next = srv->idle;
	srv->idle = w;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WORKER_IDLE_S;
	while (!w->call && !srv->stopping)
		if (pthread_cond_timedwait(&w->wake, &srv->lock, &until) == ETIMEDOUT)
			break;
	if (w->call)
		return true; /* the dispatcher took it off the list */
	struct worker **p = &srv->idle;
	while (*p != w)
		p = &(*p)->next;
	*p = w->next;
	return false;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct mcp_server *srv = w->srv;
	pthread_mutex_lock(&srv->lock);
	do {
		struct call *c = w->call;
		pthread_mutex_unlock(&srv->lock);
		run_call(c);
		pthread_mutex_lock(&srv->lock);
		w->call = NULL;
		call_done(srv);
	} while (worker_wait(w));
	srv->n_workers--;
	pthread_cond_broadcast(&srv->changed);
	pthread_mutex_unlock(&srv->lock);
	pthread_cond_destroy(&w->wake);
	free(w);
	return NULL;
}

/* Hands an admitted call to an idle worker, or to a new one; false when neither is possible
 * (no memory or no thread), and the caller runs it itself. */
static bool dispatch(struct mcp_server *srv, struct call *c)
{
	pthread_mutex_lock(&srv->lock);
	struct worker *w = srv->idle;
	if (w) {
		srv->idle = w->next;
		w->call = c;
		pthread_cond_signal(&w->wake);
		pthread_mutex_unlock(&srv->lock);
		return true;
	}
	srv->n_workers++;
	pthread_mutex_unlock(&srv->lock);
	w = calloc(1, sizeof(*w));
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	bool started = false;
	if (w) {
		*w = (struct worker){srv, PTHREAD_COND_INITIALIZER, c, NULL};
		started = pthread_create(&t, &attr, worker_main, w) == 0;
	}
	pthread_attr_destroy(&attr);
	if (started)
		return true;
	free(w);
	pthread_mutex_lock(&srv->lock);
	srv->n_workers--;
	pthread_cond_broadcast(&srv->changed);
	pthread_mutex_unlock(&srv->lock);
	return false;
}

/* The code argument, or NULL with *why saying what is wrong with the call: a protocol error
 * (an unknown tool, arguments that are not an object: the CallToolRequest schema) or, with
 * *input set, a bad argument, which the spec answers as a tool execution error the model can
 * correct. */
static const char *call_code(const json_t *params, size_t *len, const char **why, bool *input)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	*input = false;
	if (!name || strcmp(name, "execute_code"))
		return *why = "Invalid params: unknown tool (the one tool is execute_code)", NULL;
	if (args && !json_is_null(args) && !json_is_object(args))
		return *why = "Invalid params: arguments must be an object", NULL;
	json_t *code = json_object_get(args, "code");
	if (!json_is_string(code)) {
		*input = true;
		return *why = "execute_code needs the argument code, a string of Python source; "
			      "nothing was run",
		       NULL;
	}
	*len = json_string_length(code);
	return json_string_value(code);
}

static struct call *call_new(struct mcp_server *srv, const struct mcp_message *msg,
			     struct mcp_sink *sink, const char *code, size_t len)
{
	struct call *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->srv = srv;
	c->sink = sink;
	c->id = json_deep_copy(msg->id);
	c->modern = msg->era == MCP_ERA_MODERN;
	json_t *meta = json_object_get(msg->params, "_meta");
	c->elicits = c->modern ? mcp_client_elicits(json_object_get(
					 meta, "io.modelcontextprotocol/clientCapabilities"))
			       : sink->elicits;
	json_t *token = json_object_get(meta, "progressToken");
	if (json_is_string(token) || json_is_integer(token))
		c->progress_token = json_deep_copy(token);
	c->code = malloc(len + 1);
	if (c->code) {
		memcpy(c->code, code, len);
		c->code[len] = 0;
	}
	c->code_len = len;
	c->start_us = fe_now_us();
	c->next_progress_us = c->start_us + PROGRESS_FIRST_US;
	if (!c->id || !c->code || snapcell_cancel_new(&c->cancel, NULL) < 0) {
		call_free(c);
		return NULL;
	}
	return c;
}

/* Why a call was not admitted. */
enum refusal { ADMITTED, FULL, OVER_SHARE };

/* With srv->lock held: the calls of the client identity scope names (an HTTP session's;
 * 0, stdio's one client and stateless requests, has no share to keep). */
static unsigned calls_of(const struct mcp_server *srv, uint64_t scope)
{
	unsigned n = 0;
	for (const struct call *k = srv->calls; k; k = k->next)
		n += k->sink->scope == scope;
	return n;
}

/* Puts c on the list to run now, or queued (it runs when a run ends) while the queue has
 * room. A client identity gets at most its share of both, so one client holding every slot
 * cannot make every other call busy at once. A call that finds both full waits for room up
 * to queue_wait_s where its transport lets it (stateless requests have no identity to share
 * by: waiting is what keeps them fair), else it is refused. */
static enum refusal admit(struct mcp_server *srv, struct call *c)
{
	pthread_mutex_lock(&srv->lock);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += c->sink->may_wait ? srv->opts.queue_wait_s : 0;
	bool room, queued;
	for (;;) {
		/* Checked again after every wait: the client's other calls may have got in
		 * meanwhile (calls waiting here are not on the list). */
		if (c->sink->scope && calls_of(srv, c->sink->scope) >= srv->opts.max_per_client) {
			pthread_mutex_unlock(&srv->lock);
			return OVER_SHARE;
		}
		/* Not past calls already queued: they were first. */
		room = srv->n_running < srv->opts.max_runs && !srv->n_queued && !srv->draining;
		queued = !room && srv->n_queued < srv->opts.max_queued && !srv->draining;
		if (room || queued || srv->draining || !c->sink->may_wait ||
		    pthread_cond_timedwait(&srv->changed, &srv->lock, &until) == ETIMEDOUT)
			break;
	}
	c->queued = queued;
	if (room || queued) {
		c->next = srv->calls;
		srv->calls = c;
		srv->n_calls++;
		if (queued)
			srv->n_queued++;
		else
			srv->n_running++;
	}
	pthread_mutex_unlock(&srv->lock);
	return room || queued ? ADMITTED : FULL;
}

/* A stateless retry (params.requestState): false after answering it here (refused, or the
 * same question again), true with c set to resume the parked run. */
static bool take_retry(struct mcp_server *srv, const struct mcp_message *msg, struct mcp_sink *sink,
		       struct call *c)
{
	struct mcp_retry r = {0};
	int rc = mcp_approvals_retry(srv->approvals, msg->params, c->code, c->code_len, &r);
	const char *state = json_string_value(json_object_get(msg->params, "requestState"));
	if (rc == 1 && (c->state = strdup(state))) {
		c->resume_id = r.pending_id;
		c->verdict = r.verdict;
		snprintf(c->reason, sizeof(c->reason), "%s", r.reason);
		return true;
	}
	if (r.again)
		reply(sink, mcp_response(msg->id, complete(r.again, true)));
	else
		reply(sink, mcp_error(msg->id, rc == 1 ? MCP_INTERNAL_ERROR : MCP_INVALID_PARAMS,
				      rc == 1 ? "Internal error: out of memory" : r.why));
	return false;
}

static void tools_call(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink,
		       bool sync)
{
	size_t len = 0;
	const char *why = NULL;
	bool input = false;
	bool in_session = mcp_sessions_claims(srv->sessions, msg->params);
	const char *code = in_session ? "" : call_code(msg->params, &len, &why, &input);
	if (!code) {
		reply(sink,
		      input ? mcp_response(msg->id,
					   complete(mcp_error_result("invalid-arguments", why),
						    msg->era == MCP_ERA_MODERN))
			    : mcp_error(msg->id, MCP_INVALID_PARAMS, why));
		return;
	}
	struct call *c = call_new(srv, msg, sink, code, len);
	if (c && in_session && !(c->session_params = json_deep_copy(msg->params))) {
		call_free(c);
		c = NULL;
	}
	if (!c) {
		reply(sink,
		      mcp_error(msg->id, MCP_INTERNAL_ERROR, "Internal error: out of memory"));
		return;
	}
	if (c->modern && !in_session && json_object_get(msg->params, "requestState") &&
	    !take_retry(srv, msg, sink, c)) {
		call_free(c);
		return;
	}
	enum refusal refused = admit(srv, c);
	if (refused != ADMITTED) {
		char text[240];
		if (refused == OVER_SHARE)
			snprintf(text, sizeof(text),
				 "snapcell is busy for this client: its session has %u calls "
				 "running or waiting, its share of this server; try again when "
				 "one has finished",
				 srv->opts.max_per_client);
		else
			snprintf(text, sizeof(text),
				 "snapcell is busy: %u runs are in progress and %u calls wait, the "
				 "most this server allows; try again when one has finished",
				 srv->opts.max_runs, srv->opts.max_queued);
		reply(sink,
		      mcp_response(msg->id, complete(mcp_error_result("busy", text), c->modern)));
		call_free(c);
		return;
	}
	if (sync || (sink->run_here && sink->run_here(sink)) || !dispatch(srv, c)) {
		run_call(c);
		pthread_mutex_lock(&srv->lock);
		call_done(srv);
		pthread_mutex_unlock(&srv->lock);
	}
}

/* Request ids are the client's, so only its own runs (same scope) can match. */
static void cancel_request(struct mcp_server *srv, const json_t *params, uint64_t scope)
{
	json_t *id = json_object_get(params, "requestId");
	if (!id)
		return;
	pthread_mutex_lock(&srv->lock);
	for (struct call *c = srv->calls; c; c = c->next)
		if (c->sink->scope == scope && json_equal(c->id, id)) {
			c->cancelled = true;
			snapcell_cancel_fire(c->cancel);
		}
	pthread_cond_broadcast(&srv->changed); /* a queued call waits on it */
	pthread_mutex_unlock(&srv->lock);
}

void mcp_server_listening(struct mcp_server *srv, const char *url)
{
	mcp_sessions_set_transport(srv->sessions, url);
}

void mcp_server_cancel_sink(struct mcp_server *srv, const struct mcp_sink *sink)
{
	pthread_mutex_lock(&srv->lock);
	for (struct call *c = srv->calls; c; c = c->next)
		if (c->sink == sink) {
			c->cancelled = true;
			snapcell_cancel_fire(c->cancel);
		}
	pthread_cond_broadcast(&srv->changed); /* a queued call waits on it */
	pthread_mutex_unlock(&srv->lock);
}

void mcp_server_cancel_scope(struct mcp_server *srv, uint64_t scope)
{
	pthread_mutex_lock(&srv->lock);
	for (struct call *c = srv->calls; c; c = c->next)
		if (c->sink->scope == scope) {
			c->cancelled = true;
			snapcell_cancel_fire(c->cancel);
		}
	pthread_cond_broadcast(&srv->changed); /* a queued call waits on it */
	pthread_mutex_unlock(&srv->lock);
	/* Its links die with it: nobody else may read them, and they hold result memory. */
	mcp_server_release(srv, mcp_links_forget(srv->links, scope));
}

static void notification(struct mcp_server *srv, const struct mcp_message *msg,
			 const struct mcp_sink *sink)
{
	if (!strcmp(msg->method, "notifications/cancelled"))
		cancel_request(srv, msg->params, sink ? sink->scope : 0);
	/* notifications/initialized and anything unknown need no action: notifications get no
	 * answer, not even an error. */
}

static bool needs_session(const struct mcp_server *srv, const char *method)
{
	return srv->opts.require_initialize && !srv->initialized &&
	       (!strcmp(method, "tools/list") || !strcmp(method, "tools/call") ||
		!strncmp(method, "resources/", 10));
}

static void tools_list(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink)
{
	json_t *cursor = json_object_get(msg->params, "cursor");
	if (cursor && !json_is_null(cursor)) {
		reply(sink,
		      mcp_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: unknown cursor"));
		return;
	}
	json_t *list = tool_list(srv);
	reply(sink, mcp_response(msg->id, msg->era == MCP_ERA_MODERN ? cacheable(list) : list));
}

/* resources/list and resources/templates/list (key: the list's member) name nothing: the
 * only resources are results' links, each its own session's, reached from the result that
 * gave it (the spec does not ask for links to be listed). */
static void resources_list(struct mcp_message *msg, struct mcp_sink *sink, const char *key)
{
	json_t *list = json_pack("{s:[]}", key);
	reply(sink, mcp_response(msg->id, msg->era == MCP_ERA_MODERN ? cacheable(list) : list));
}

/* resources/read of a result's link: always one message, never split (an HTTP answer to it
 * is one JSON body, never an SSE event), charged to the result budget until sent. A URI that
 * was never issued, expired, or is another session's gets the same -32602. */
static void resources_read(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink)
{
	const char *uri = json_string_value(json_object_get(msg->params, "uri"));
	const char *item = NULL;
	struct mcp_kept *k = uri ? mcp_links_find(srv->links, uri, sink->scope, &item) : NULL;
	size_t cost = 0;
	json_t *entry = k ? mcp_result_item(mcp_kept_result(k), item, uri, &cost) : NULL;
	char why[300];
	if (!uri) {
		reply(sink, mcp_error(msg->id, MCP_INVALID_PARAMS,
				      "Invalid params: resources/read needs uri, a string"));
		return;
	}
	if (!entry || !charge(srv, cost)) {
		if (entry)
			snprintf(why, sizeof(why),
				 "snapcell is busy: answers in flight hold the result memory this "
				 "read needs (%zu MiB of %zu MiB, --result-memory); try again",
				 cost >> 20, (size_t)srv->opts.result_memory >> 20);
		else
			snprintf(why, sizeof(why),
				 "Resource not found: no result this client may read has that URI "
				 "(a result's links are readable for %u s after its call, from the "
				 "session that made the call)",
				 mcp_links_ttl(srv->links));
		reply(sink, mcp_error_data(msg->id, entry ? MCP_INTERNAL_ERROR : MCP_INVALID_PARAMS,
					   why, json_pack("{s:s}", "uri", uri)));
		json_decref(entry);
		mcp_links_drop(srv->links, k);
		return;
	}
	bool keeps = sink->keeps_answer; /* a sink of its own: it holds the text until sent */
	if (keeps)
		sink->result_bytes = cost;
	mcp_result_bind(mcp_kept_result(k));
	reply(sink, mcp_response(msg->id, complete(json_pack("{s:[o]}", "contents", entry),
						   msg->era == MCP_ERA_MODERN)));
	mcp_result_bind(NULL);
	mcp_links_drop(srv->links, k);
	if (!keeps)
		mcp_server_release(srv, cost);
}

/* The resources methods, in both eras; false for another method. */
static bool resources(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink)
{
	if (!strcmp(msg->method, "resources/read"))
		resources_read(srv, msg, sink);
	else if (!strcmp(msg->method, "resources/list"))
		resources_list(msg, sink, "resources");
	else if (!strcmp(msg->method, "resources/templates/list"))
		resources_list(msg, sink, "resourceTemplates");
	else
		return false;
	return true;
}

/* The stateless revision: no initialize or ping (removed), no session to wait for. */
static void handle_modern(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink,
			  bool sync)
{
	const char *m = msg->method;
	if (!strcmp(m, "server/discover"))
		reply(sink, mcp_response(msg->id, discover_result(srv)));
	else if (!strcmp(m, "tools/list"))
		tools_list(srv, msg, sink);
	else if (!strcmp(m, "tools/call"))
		tools_call(srv, msg, sink, sync);
	else if (!resources(srv, msg, sink))
		reply(sink, mcp_error(msg->id, MCP_METHOD_NOT_FOUND, "Method not found"));
}

void mcp_server_handle(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink,
		       bool sync)
{
	if (msg->kind == MCP_RESPONSE) {
		answered(srv, msg, sink); /* to elicitation/create, or nothing we asked */
		return;
	}
	if (msg->kind == MCP_NOTIFICATION) {
		notification(srv, msg, sink);
		return;
	}
	if (msg->era == MCP_ERA_MODERN) {
		handle_modern(srv, msg, sink, sync);
		return;
	}
	const char *m = msg->method;
	if (needs_session(srv, m)) {
		reply(sink, mcp_error(msg->id, MCP_INVALID_REQUEST,
				      "Invalid Request: send initialize first"));
	} else if (!strcmp(m, "initialize")) {
		/* Only stdio has one session to mark; HTTP threads never read the flag. */
		if (srv->opts.require_initialize)
			srv->initialized = true;
		/* stdio's one sink keeps it; HTTP keeps it with the session it mints */
		sink->elicits = mcp_client_elicits(json_object_get(msg->params, "capabilities"));
		reply(sink, mcp_response(msg->id, initialize_result(srv, msg->params)));
	} else if (!strcmp(m, "ping")) {
		reply(sink, mcp_response(msg->id, json_object()));
	} else if (!strcmp(m, "tools/list")) {
		tools_list(srv, msg, sink);
	} else if (!strcmp(m, "tools/call")) {
		tools_call(srv, msg, sink, sync);
	} else if (!resources(srv, msg, sink)) {
		reply(sink, mcp_error(msg->id, MCP_METHOD_NOT_FOUND, "Method not found"));
	}
}
