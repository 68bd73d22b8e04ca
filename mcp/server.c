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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../cli/cli.h"
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
	uint64_t next_progress_us, start_us;
	struct call *next;
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
		uint64_t now = cli_now_us();
		for (struct call *c = srv->calls; c; c = c->next)
			if (c->progress_token && !c->cancelled && now >= c->next_progress_us)
				send_progress(c, now);
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
	if (!(srv->sessions = mcp_sessions_new(sb, opts))) {
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
	json_t *list =
		json_pack("{s:[{s:s, s:s, s:s, s:{s:s, s:{s:{s:s, s:s}}, s:[s], s:b}}]}", "tools",
			  "name", "execute_code", "title", "Execute Python code", "description",
			  srv->description, "inputSchema", "type", "object", "properties", "code",
			  "type", "string", "description", "Python source code to run", "required",
			  "code", "additionalProperties", 0);
	mcp_sessions_list_tools(srv->sessions, list);
	return list;
}

static json_t *initialize_result(struct mcp_server *srv, const json_t *params)
{
	const char *asked = json_string_value(json_object_get(params, "protocolVersion"));
	const char *version = mcp_version_negotiate(asked);
	return json_pack("{s:s, s:{s:{}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version,
			 "capabilities", "tools", "serverInfo", "name", "snapcell", "title",
			 "snapcell", "version", snapcell_version(), "instructions",
			 srv->instructions);
}

/* A stateless-era result: resultType, and the server's identity in _meta (the revision has
 * no handshake to give it once). Legacy results keep their 2025-11-25 shape. */
static json_t *complete(json_t *result, bool modern)
{
	if (!modern || !result)
		return result;
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
	return cacheable(json_pack("{s:o, s:{s:{}}, s:s}", "supportedVersions", mcp_versions_json(),
				   "capabilities", "tools", "instructions", srv->instructions));
}

static void call_free(struct call *c)
{
	json_decref(c->id);
	json_decref(c->progress_token);
	json_decref(c->session_params);
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

/* Takes what a run's result costs until sent from the result budget: 0 and *cost, or an
 * error result saying why not (the run's files are then dropped, never an OOM kill). */
static json_t *charge_result(struct mcp_server *srv, const struct snapcell_result *res,
			     size_t *cost)
{
	*cost = mcp_result_cost(res);
	pthread_mutex_lock(&srv->lock);
	size_t budget = srv->opts.result_memory, held = srv->result_bytes;
	bool fits = *cost <= budget - held;
	if (fits)
		srv->result_bytes += *cost;
	pthread_mutex_unlock(&srv->lock);
	if (fits)
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

/* A call the sessions answer; a run's result is charged like any other (its answer, built
 * first, is replaced by the refusal when it does not fit). */
static json_t *session_call(struct mcp_server *srv, struct call *c, struct snapcell_result **res,
			    size_t *cost)
{
	json_t *result = mcp_sessions_call(srv->sessions, c->session_params, c->cancel,
					   srv->opts.structured_content, res);
	json_t *refused = *res ? charge_result(srv, *res, cost) : NULL;
	if (!refused)
		return result;
	json_decref(result);
	return refused;
}

static void run_call(struct call *c)
{
	struct mcp_server *srv = c->srv;
	struct snapcell_run_options opts = {.size = sizeof(opts), .cancel = c->cancel};
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	json_t *result;
	size_t cost = 0;
	if (!wait_turn(c))
		result = mcp_error_result("cancelled", "the call was cancelled while it waited "
						       "for a run to end; nothing was run");
	else if (c->session_params)
		result = session_call(srv, c, &res, &cost);
	else if (snapcell_sandbox_run(srv->sb, c->code, c->code_len, &opts, &res, &err) < 0)
		result = mcp_error_result("setup-failure", err.message);
	else if (!(result = charge_result(srv, res, &cost)))
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
	json_t *token = json_object_get(json_object_get(msg->params, "_meta"), "progressToken");
	if (json_is_string(token) || json_is_integer(token))
		c->progress_token = json_deep_copy(token);
	c->code = malloc(len + 1);
	if (c->code) {
		memcpy(c->code, code, len);
		c->code[len] = 0;
	}
	c->code_len = len;
	c->start_us = cli_now_us();
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
	       (!strcmp(method, "tools/list") || !strcmp(method, "tools/call"));
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
	else
		reply(sink, mcp_error(msg->id, MCP_METHOD_NOT_FOUND, "Method not found"));
}

void mcp_server_handle(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink,
		       bool sync)
{
	if (msg->kind == MCP_RESPONSE)
		return; /* we send no requests, so there is nothing to match it with */
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
		reply(sink, mcp_response(msg->id, initialize_result(srv, msg->params)));
	} else if (!strcmp(m, "ping")) {
		reply(sink, mcp_response(msg->id, json_object()));
	} else if (!strcmp(m, "tools/list")) {
		tools_list(srv, msg, sink);
	} else if (!strcmp(m, "tools/call")) {
		tools_call(srv, msg, sink, sync);
	} else {
		reply(sink, mcp_error(msg->id, MCP_METHOD_NOT_FOUND, "Method not found"));
	}
}
