/* A tools/call of execute_code or a session tool, from its arrival to its answer: the
 * checks of its arguments, admission (the run cap, the queue and each client's share), the
 * run on the transport's thread or a pooled worker, the result charged to the server's
 * budget and fitted to its sink, and cancellation. The decisions a run waits on are
 * decide.c's; the methods and the server's life are server.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../frontend/frontend.h"
#include "mcp.h"
#include "server.h"

/* A worker with nothing to do for this long ends, so a burst does not keep its threads. */
#define WORKER_IDLE_S 30

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

/* Takes what a run's result costs until sent from the result budget: 0 and *cost, or an
 * error result saying why not (the run's files are then dropped, never an OOM kill). */
static json_t *charge_result(struct mcp_server *srv, const struct snapcell_result *res,
			     size_t *cost)
{
	*cost = mcp_result_cost(res);
	size_t budget = srv->opts.result_memory;
	if (mcp_server_charge(srv, *cost))
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
					   srv->opts.structured_content, res, mcp_call_settle, c);
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
		result = mcp_error_result(snapcell_status_name(SNAPCELL_STATUS_CANCELLED),
					  "the call was cancelled while it waited for a run to "
					  "end; nothing was run");
	else if (c->session_params)
		result = session_call(srv, c, &res, &cost);
	else if (c->state)
		res = mcp_call_resume_parked(c, &result);
	else if (snapcell_sandbox_run(srv->sb, c->code, c->code_len, &opts, &res, &err) < 0)
		result = mcp_error_result(snapcell_status_name(SNAPCELL_STATUS_SETUP_FAILURE),
					  err.message);
	if (!c->session_params && res)
		res = mcp_call_settle(c, res);
	if (!result && c->asked)
		result = json_incref(c->asked);
	else if (!result && !res)
		result = mcp_error_result(snapcell_status_name(SNAPCELL_STATUS_SETUP_FAILURE),
					  "a decision on a call the run waited on could not be "
					  "given (see the server's log); the run ended");
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
		reply(c->sink, mcp_response(c->id, mcp_server_complete(result, c->modern)));
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
		reply(sink, mcp_response(msg->id, mcp_server_complete(r.again, true)));
	else
		reply(sink, mcp_error(msg->id, rc == 1 ? MCP_INTERNAL_ERROR : MCP_INVALID_PARAMS,
				      rc == 1 ? "Internal error: out of memory" : r.why));
	return false;
}

void mcp_server_tools_call(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink,
			   bool sync)
{
	size_t len = 0;
	const char *why = NULL;
	bool input = false;
	bool in_session = mcp_sessions_claims(srv->sessions, msg->params);
	const char *code = in_session ? "" : call_code(msg->params, &len, &why, &input);
	if (!code) {
		reply(sink, input ? mcp_response(msg->id,
						 mcp_server_complete(
							 mcp_error_result("invalid-arguments", why),
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
		      mcp_response(msg->id,
				   mcp_server_complete(mcp_error_result("busy", text), c->modern)));
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
void mcp_server_cancel_request(struct mcp_server *srv, const json_t *params, uint64_t scope)
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
