/* The MCP methods for a server with one tool, execute_code, in both eras, chosen per request:
 * the handshake era (2025-11-25, also answering 2025-06-18 and 2025-03-26 clients: initialize,
 * ping, tools/list, tools/call) and the stateless 2026-07-28 revision (server/discover,
 * tools/list, tools/call; every result with resultType and serverInfo, lists with cache
 * hints), and the server's life: its limits, the result budget, and a ticker thread that
 * sends progress for runs past a second. A tools/call itself is calls.c's (where runs happen
 * off the thread that keeps reading, on a transport's own thread or a pooled worker), the
 * decisions its run waits on decide.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../frontend/frontend.h"
#include "mcp.h"
#include "server.h"

#define TICK_NS 200000000L
/* How long a stateless client may cache tools/list and server/discover. Both are fixed for
 * the server's life (the config is read once); an hour bounds what a restart with another
 * config leaves stale. The same for every caller (no per-user data), so "public". */
#define CACHE_TTL_MS 3600000
#define CACHE_SCOPE  "public"

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
json_t *mcp_server_complete(json_t *result, bool modern)
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
	return mcp_server_complete(result, true);
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

void mcp_server_release(struct mcp_server *srv, size_t bytes)
{
	if (!bytes)
		return;
	pthread_mutex_lock(&srv->lock);
	srv->result_bytes -= bytes;
	pthread_mutex_unlock(&srv->lock);
}

/* Takes bytes from the result budget for an answer; false when they do not fit now. */
bool mcp_server_charge(struct mcp_server *srv, size_t bytes)
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

void mcp_server_listening(struct mcp_server *srv, const char *url)
{
	mcp_sessions_set_transport(srv->sessions, url);
}

static void notification(struct mcp_server *srv, const struct mcp_message *msg,
			 const struct mcp_sink *sink)
{
	if (!strcmp(msg->method, "notifications/cancelled"))
		mcp_server_cancel_request(srv, msg->params, sink ? sink->scope : 0);
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
	if (!entry || !mcp_server_charge(srv, cost)) {
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
	reply(sink,
	      mcp_response(msg->id, mcp_server_complete(json_pack("{s:[o]}", "contents", entry),
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
		mcp_server_tools_call(srv, msg, sink, sync);
	else if (!resources(srv, msg, sink))
		reply(sink, mcp_error(msg->id, MCP_METHOD_NOT_FOUND, "Method not found"));
}

void mcp_server_handle(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink,
		       bool sync)
{
	if (msg->kind == MCP_RESPONSE) {
		mcp_server_answered(srv, msg,
				    sink); /* to elicitation/create, or nothing we asked */
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
		mcp_server_tools_call(srv, msg, sink, sync);
	} else if (!resources(srv, msg, sink)) {
		reply(sink, mcp_error(msg->id, MCP_METHOD_NOT_FOUND, "Method not found"));
	}
}
