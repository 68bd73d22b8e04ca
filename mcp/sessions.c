/* Stateful sessions for `snapcell mcp`: the tools session_new, session_snapshot,
 * session_restore and session_close, and execute_code's session argument, over the library's
 * sessions and snapshots. A session is named by a handle the server mints (the stateless MCP
 * revision's advice for state that spans calls): "<replica>~session-<128 random bits>", the
 * replica first so a load balancer can route it. A session untouched for the idle time is
 * freed with its snapshots by a sweeper thread that sleeps until the next deadline. Not a
 * transport or protocol concern: the handles work the same in both eras and transports. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../frontend/frontend.h"
#include "mcp.h"

/* How much of a handle the state file (and so snapcell doctor) shows: enough to tell
 * sessions apart, far too little to guess the rest (104 bits stay secret). */
#define PREFIX_HEX	  6
#define DEFAULT_MAX	  16
#define DEFAULT_IDLE_S	  600
#define DEFAULT_SNAPSHOTS 8
#define SESSION_TAG	  "session-"
#define SNAPSHOT_TAG	  "snapshot-"
#define HANDLE_SHOWN_MAX  160 /* a forged handle is echoed at most this long */
#define SESSION_META	  "snapcell/session"
#define STATUS_UNKNOWN	  "unknown-handle"
#define STATUS_BUSY	  "session-busy"
#define STATUS_ENDED	  "session-ended"
#define STATUS_LIMIT	  "session-limit"
#define STATUS_DISABLED	  "sessions-disabled"
#define STATUS_INVALID	  "invalid-arguments"
#define STATUS_SETUP	  "setup-failure"

struct snap {
	char secret[MCP_SECRET_HEX + 1];
	struct snapcell_snapshot *snap;
	struct snap *next;
};

/* One session. Invariant: while busy exactly one call uses s and snaps (the library's one
 * thread at a time); an entry off the list (gone: closed or expired) is freed by whoever
 * holds it last: the closer or sweeper when it is idle, else the call that releases it. */
struct entry {
	char secret[MCP_SECRET_HEX + 1];
	struct snapcell_session *s;
	struct snap *snaps;
	unsigned n_snaps;
	time_t created_unix, used_unix;
	uint64_t used_us; /* monotonic, for expiry */
	bool busy, gone, alive;
	struct snapcell_cancel *running; /* the busy call's, so session_close can stop it */
	struct entry *next;
};

struct mcp_sessions {
	struct snapcell_sandbox *sb;
	struct mcp_session_options opts;
	char replica[MCP_REPLICA_MAX + 1];
	char *state_path;
	json_t *state_base; /* the state file's fixed members */
	pthread_mutex_t lock;
	pthread_cond_t changed; /* an entry was released or added, or stopping */
	struct entry *entries;
	unsigned n_entries;
	bool stopping;
	pthread_t sweeper;
};

bool mcp_replica_valid(const char *name)
{
	size_t n = strlen(name);
	if (!n || n > MCP_REPLICA_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

static char *handle(const struct mcp_sessions *reg, const char *tag, const char *secret)
{
	char *h = NULL;
	return asprintf(&h, "%s~%s%s", reg->replica, tag, secret) < 0 ? NULL : h;
}

/* ---- results ---- */

static json_t *tool_error(const char *status, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static json_t *tool_error(const char *status, const char *fmt, ...)
{
	char text[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	return mcp_error_result(status, text);
}

/* A handle as the model sent it, cut short and made printable for an error message. */
static void shown(const char *h, char out[HANDLE_SHOWN_MAX + 4])
{
	size_t i = 0;
	for (; h[i] && i < HANDLE_SHOWN_MAX; i++)
		out[i] = h[i] >= 0x20 && h[i] < 0x7f ? h[i] : '?';
	strcpy(out + i, h[i] ? "..." : "");
}

/* A successful session tool result: one text, and the handles under _meta (and as
 * structuredContent when the server gives it). */
static json_t *ok_result(json_t *data, const char *text, bool structured)
{
	json_t *r = json_pack("{s:[{s:s, s:s}], s:b, s:{s:O}}", "content", "type", "text", "text",
			      text, "isError", 0, "_meta", SESSION_META, data);
	if (structured)
		json_object_set(r, "structuredContent", data);
	json_decref(data);
	return r;
}

/* ---- the state file ---- */

/* Called with reg->lock held, so files follow the registry's order of changes. */
static void write_state(struct mcp_sessions *reg)
{
	if (!reg->state_path)
		return;
	json_t *doc = json_deep_copy(reg->state_base), *list = json_array();
	for (struct entry *e = reg->entries; e; e = e->next) {
		char prefix[MCP_REPLICA_MAX + sizeof(SESSION_TAG) + PREFIX_HEX + 2];
		snprintf(prefix, sizeof(prefix), "%s~%s%.*s", reg->replica, SESSION_TAG, PREFIX_HEX,
			 e->secret);
		json_array_append_new(
			list, json_pack("{s:s, s:I, s:I, s:b, s:b, s:i}", "handle_prefix", prefix,
					"created_unix", (json_int_t)e->created_unix,
					"last_used_unix", (json_int_t)e->used_unix, "busy", e->busy,
					"alive", e->alive, "snapshots", (int)e->n_snaps));
	}
	json_object_set_new(doc, "sessions", list);
	mcp_state_write(reg->state_path, doc);
	json_decref(doc);
}

/* ---- the registry ---- */

static void entry_free(struct entry *e)
{
	if (!e)
		return;
	for (struct snap *p = e->snaps, *next; p; p = next) {
		next = p->next;
		snapcell_snapshot_free(p->snap);
		free(p);
	}
	snapcell_session_free(e->s);
	free(e);
}

/* Takes e off the list (closed or expired); true when the caller must free it (not busy). */
static bool unlink_entry(struct mcp_sessions *reg, struct entry *e)
{
	struct entry **p = &reg->entries;
	while (*p && *p != e)
		p = &(*p)->next;
	if (*p) {
		*p = e->next;
		reg->n_entries--;
	}
	e->gone = true;
	return !e->busy;
}

/* The sweeper: frees sessions idle past the timeout, sleeping until the next one is due (or
 * until a release or a new session changes the earliest deadline). */
static void *sweeper_main(void *arg)
{
	struct mcp_sessions *reg = arg;
	uint64_t idle_us = (uint64_t)reg->opts.idle_timeout_s * 1000000u;
	pthread_mutex_lock(&reg->lock);
	while (!reg->stopping) {
		uint64_t now = fe_now_us(), next = UINT64_MAX;
		struct entry *expired = NULL;
		for (struct entry *e = reg->entries, *after; e; e = after) {
			after = e->next;
			if (e->busy)
				continue;
			if (e->used_us + idle_us <= now) {
				unlink_entry(reg, e);
				e->next = expired;
				expired = e;
			} else if (e->used_us + idle_us < next) {
				next = e->used_us + idle_us;
			}
		}
		if (expired) {
			write_state(reg);
			pthread_mutex_unlock(&reg->lock);
			for (struct entry *e = expired, *after; e; e = after) {
				after = e->next;
				entry_free(e);
			}
			pthread_mutex_lock(&reg->lock);
			continue;
		}
		if (next == UINT64_MAX) {
			pthread_cond_wait(&reg->changed, &reg->lock);
		} else {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			uint64_t wait_us = next - now + 1000;
			ts.tv_sec += (time_t)(wait_us / 1000000u);
			ts.tv_nsec += (long)(wait_us % 1000000u) * 1000;
			if (ts.tv_nsec >= 1000000000L)
				ts.tv_sec++, ts.tv_nsec -= 1000000000L;
			pthread_cond_timedwait(&reg->changed, &reg->lock, &ts);
		}
	}
	pthread_mutex_unlock(&reg->lock);
	return NULL;
}

static json_t *state_base(const struct mcp_sessions *reg, const struct mcp_options *opts)
{
	return json_pack("{s:s, s:s, s:I, s:b, s:i, s:i, s:i}", "replica", reg->replica,
			 "transport", opts->listen ? opts->listen : "stdio", "started_unix",
			 (json_int_t)time(NULL), "sessions_enabled", reg->opts.enabled,
			 "max_sessions", (int)reg->opts.max, "idle_timeout_s",
			 (int)reg->opts.idle_timeout_s, "max_snapshots",
			 (int)reg->opts.max_snapshots);
}

static void default_replica(char *out)
{
	char host[256] = "";
	if (gethostname(host, sizeof(host) - 1) < 0 || !mcp_replica_valid(host))
		snprintf(host, sizeof(host), "snapcell");
	snprintf(out, MCP_REPLICA_MAX + 1, "%s", host);
}

struct mcp_sessions *mcp_sessions_new(struct snapcell_sandbox *sb, const struct mcp_options *opts)
{
	struct mcp_sessions *reg = calloc(1, sizeof(*reg));
	if (!reg)
		return NULL;
	reg->sb = sb;
	reg->opts = opts->sessions;
	if (!reg->opts.max)
		reg->opts.max = DEFAULT_MAX;
	if (!reg->opts.idle_timeout_s)
		reg->opts.idle_timeout_s = DEFAULT_IDLE_S;
	if (!reg->opts.max_snapshots)
		reg->opts.max_snapshots = DEFAULT_SNAPSHOTS;
	if (opts->replica[0])
		snprintf(reg->replica, sizeof(reg->replica), "%s", opts->replica);
	else
		default_replica(reg->replica);
	pthread_condattr_t attr;
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&reg->changed, &attr);
	pthread_condattr_destroy(&attr);
	pthread_mutex_init(&reg->lock, NULL);
	reg->state_base = state_base(reg, opts);
	reg->state_path = mcp_state_path();
	pthread_mutex_lock(&reg->lock);
	write_state(reg);
	pthread_mutex_unlock(&reg->lock);
	if (pthread_create(&reg->sweeper, NULL, sweeper_main, reg) != 0) {
		fprintf(stderr, "snapcell mcp: cannot start the session sweeper thread\n");
		reg->sweeper = 0;
		mcp_sessions_free(reg);
		return NULL;
	}
	return reg;
}

void mcp_sessions_free(struct mcp_sessions *reg)
{
	if (!reg)
		return;
	pthread_mutex_lock(&reg->lock);
	reg->stopping = true;
	pthread_cond_broadcast(&reg->changed);
	pthread_mutex_unlock(&reg->lock);
	if (reg->sweeper)
		pthread_join(reg->sweeper, NULL);
	for (struct entry *e = reg->entries, *next; e; e = next) {
		next = e->next;
		entry_free(e);
	}
	if (reg->state_path)
		unlink(reg->state_path);
	free(reg->state_path);
	json_decref(reg->state_base);
	pthread_mutex_destroy(&reg->lock);
	pthread_cond_destroy(&reg->changed);
	free(reg);
}

void mcp_sessions_set_transport(struct mcp_sessions *reg, const char *transport)
{
	pthread_mutex_lock(&reg->lock);
	json_object_set_new(reg->state_base, "transport", json_string(transport));
	write_state(reg);
	pthread_mutex_unlock(&reg->lock);
}

/* ---- handles ---- */

static json_t *unknown(const struct mcp_sessions *reg, const char *show, const char *tag)
{
	bool snap = !strcmp(tag, SNAPSHOT_TAG);
	return tool_error(STATUS_UNKNOWN,
			  "unknown %s '%s': this server never issued it, or it was closed, or it "
			  "expired after %u s without use%s",
			  snap ? "snapshot" : "session", show, reg->opts.idle_timeout_s,
			  snap ? " (a snapshot ends with its session)" : "");
}

/* The secret part of h, a handle of this replica with the given tag; NULL and *error set
 * when it is not one (another replica's is named as such, so it can be routed). */
static const char *parse_handle(const struct mcp_sessions *reg, const char *h, const char *tag,
				json_t **error)
{
	char show[HANDLE_SHOWN_MAX + 4];
	bool snap = !strcmp(tag, SNAPSHOT_TAG);
	shown(h, show);
	const char *tilde = strchr(h, '~');
	size_t rlen = tilde ? (size_t)(tilde - h) : 0;
	char replica[MCP_REPLICA_MAX + 1] = "";
	if (rlen <= MCP_REPLICA_MAX)
		memcpy(replica, h, rlen), replica[rlen] = 0;
	if (!tilde || !mcp_replica_valid(replica)) {
		*error = unknown(reg, show, tag);
		return NULL;
	}
	if (strcmp(replica, reg->replica)) {
		*error = tool_error(
			STATUS_UNKNOWN,
			"%s '%s' belongs to replica '%s', and this is replica '%s': send "
			"the call to that replica (a load balancer routes on the part "
			"before '~')",
			snap ? "snapshot" : "session", show, replica, reg->replica);
		return NULL;
	}
	const char *rest = tilde ? tilde + 1 : "";
	const char *other = snap ? SESSION_TAG : SNAPSHOT_TAG;
	if (!strncmp(rest, other, strlen(other))) {
		*error = tool_error(STATUS_INVALID, "'%s' is a %s handle, not a %s handle", show,
				    snap ? "session" : "snapshot", snap ? "snapshot" : "session");
		return NULL;
	}
	const char *secret = rest + strlen(tag);
	if (strncmp(rest, tag, strlen(tag)) || strlen(secret) != MCP_SECRET_HEX) {
		*error = unknown(reg, show, tag);
		return NULL;
	}
	return secret;
}

/* The entry whose session (snap NULL) or one of whose snapshots (*snap set) has this
 * secret; reg->lock held. */
static struct entry *find(struct mcp_sessions *reg, const char *secret, struct snap **snap)
{
	for (struct entry *e = reg->entries; e; e = e->next) {
		if (!snap && mcp_secret_equal(e->secret, secret, MCP_SECRET_HEX))
			return e;
		for (struct snap *p = snap ? e->snaps : NULL; p; p = p->next)
			if (mcp_secret_equal(p->secret, secret, MCP_SECRET_HEX))
				return *snap = p, e;
	}
	return NULL;
}

/* Finds the session a handle names (a snapshot handle: its session, and *snap the snapshot)
 * and marks it busy for the caller; NULL and *error set when it cannot. A call on a busy
 * session is refused rather than queued: the model learns at once that it overlapped. */
static struct entry *acquire(struct mcp_sessions *reg, const char *h, const char *tag,
			     struct snapcell_cancel *cancel, struct snap **snap, json_t **error)
{
	char show[HANDLE_SHOWN_MAX + 4];
	const char *secret = parse_handle(reg, h, tag, error);
	if (!secret)
		return NULL;
	shown(h, show);
	pthread_mutex_lock(&reg->lock);
	struct entry *found = find(reg, secret, snap);
	bool busy = found && found->busy;
	if (found && !busy) {
		found->busy = true;
		found->running = cancel;
		write_state(reg); /* doctor shows it running */
	}
	pthread_mutex_unlock(&reg->lock);
	if (!found)
		*error = unknown(reg, show, tag);
	else if (busy)
		*error = tool_error(STATUS_BUSY,
				    "session '%s' is busy with another call; wait for that call's "
				    "answer and try again (calls on one session never run at once)",
				    show);
	return found && !busy ? found : NULL;
}

static void release(struct mcp_sessions *reg, struct entry *e)
{
	pthread_mutex_lock(&reg->lock);
	e->busy = false;
	e->running = NULL;
	e->alive = snapcell_session_alive(e->s);
	e->used_us = fe_now_us();
	e->used_unix = time(NULL);
	bool free_it = e->gone;
	write_state(reg);
	pthread_cond_broadcast(&reg->changed);
	pthread_mutex_unlock(&reg->lock);
	if (free_it)
		entry_free(e);
}

/* ---- the tools ---- */

static json_t *session_new(struct mcp_sessions *reg, bool structured)
{
	struct entry *e = calloc(1, sizeof(*e));
	if (!e || mcp_secret_new(e->secret) < 0) {
		free(e);
		return tool_error(STATUS_SETUP, "cannot make a session handle: %s",
				  strerror(errno));
	}
	pthread_mutex_lock(&reg->lock);
	bool room = reg->n_entries < reg->opts.max;
	if (room)
		reg->n_entries++; /* the slot is held while the session starts */
	pthread_mutex_unlock(&reg->lock);
	if (!room) {
		free(e);
		return tool_error(STATUS_LIMIT,
				  "no session made: %u sessions are open, the most this server "
				  "allows; session_close one you no longer need (idle ones close "
				  "themselves after %u s)",
				  reg->opts.max, reg->opts.idle_timeout_s);
	}
	struct snapcell_error err = {0};
	if (snapcell_session_new(reg->sb, &e->s, &err) < 0) {
		pthread_mutex_lock(&reg->lock);
		reg->n_entries--;
		pthread_mutex_unlock(&reg->lock);
		free(e);
		return tool_error(STATUS_SETUP, "no session made: %s", err.message);
	}
	e->alive = true;
	e->created_unix = e->used_unix = time(NULL);
	e->used_us = fe_now_us();
	char *h = handle(reg, SESSION_TAG, e->secret);
	pthread_mutex_lock(&reg->lock);
	e->next = reg->entries;
	reg->entries = e;
	write_state(reg);
	pthread_cond_broadcast(&reg->changed);
	pthread_mutex_unlock(&reg->lock);
	char text[512];
	snprintf(text, sizeof(text),
		 "session: %s\nPass it as the session argument of execute_code: variables, "
		 "imports and functions then persist from call to call. It closes after %u s "
		 "without use.",
		 h ? h : "", reg->opts.idle_timeout_s);
	json_t *r = ok_result(json_pack("{s:s?}", "session", h), text, structured);
	free(h);
	return r;
}

/* The note added to a run that ended its session's process (killed: timeout, output limit,
 * cancellation), so the model does not assume its variables are still there. */
static void note_ended(json_t *result, const char *h)
{
	char text[512];
	snprintf(text, sizeof(text),
		 "This run ended session %s: its process was killed and its state is gone. "
		 "session_restore one of its snapshots to continue from there, or session_close "
		 "it.",
		 h);
	json_array_append_new(json_object_get(result, "content"),
			      json_pack("{s:s, s:s}", "type", "text", "text", text));
}

static json_t *session_run(struct mcp_sessions *reg, const char *h, const json_t *args,
			   struct snapcell_cancel *cancel, bool structured,
			   struct snapcell_result **kept, mcp_settle_fn settle, void *ctx)
{
	json_t *code = json_object_get(args, "code"), *error = NULL;
	if (!json_is_string(code))
		return mcp_error_result(STATUS_INVALID,
					"execute_code needs the argument code, a string of Python "
					"source; nothing was run");
	struct entry *e = acquire(reg, h, SESSION_TAG, cancel, NULL, &error);
	if (!e)
		return error;
	json_t *result;
	if (!snapcell_session_alive(e->s)) {
		result = tool_error(
			STATUS_ENDED,
			"session %s has ended: an earlier run was killed (timeout, "
			"output limit or cancellation); nothing was run. session_restore "
			"one of its snapshots, or session_close it and start a new one",
			h);
	} else {
		struct snapcell_run_options o = {.size = sizeof(o), .cancel = cancel};
		struct snapcell_result *res = NULL;
		struct snapcell_error err = {0};
		bool ran = snapcell_session_run(e->s, json_string_value(code),
						json_string_length(code), &o, &res, &err) == 0;
		if (ran && res->status == SNAPCELL_STATUS_PAUSED && !(res = settle(ctx, res))) {
			ran = false;
			snprintf(err.message, sizeof(err.message),
				 "the run waited for a decision that could not be given");
		}
		result = ran ? mcp_call_result(res, structured)
			     : tool_error(STATUS_SETUP, "session %s: %s", h, err.message);
		*kept = res; /* its files are written into the answer's text from it */
		if (ran && !snapcell_session_alive(e->s))
			note_ended(result, h);
	}
	json_t *meta = json_object_get(result, "_meta");
	json_object_set_new(
		meta, SESSION_META,
		json_pack("{s:s, s:b}", "session", h, "alive", snapcell_session_alive(e->s)));
	release(reg, e);
	return result;
}

static json_t *session_snapshot(struct mcp_sessions *reg, const char *h, bool structured)
{
	json_t *error = NULL;
	struct entry *e = acquire(reg, h, SESSION_TAG, NULL, NULL, &error);
	if (!e)
		return error;
	struct snap *p = calloc(1, sizeof(*p));
	struct snapcell_error err = {0};
	json_t *result = NULL;
	if (e->n_snaps >= reg->opts.max_snapshots)
		result = tool_error(STATUS_LIMIT,
				    "no snapshot taken: session %s has %u snapshots, the most this "
				    "server allows; session_close one you no longer need",
				    h, reg->opts.max_snapshots);
	else if (!p || mcp_secret_new(p->secret) < 0)
		result = tool_error(STATUS_SETUP, "cannot make a snapshot handle");
	else if (snapcell_session_snapshot(e->s, &p->snap, &err) < 0)
		result = tool_error(STATUS_ENDED, "no snapshot taken of session %s: %s", h,
				    err.message);
	if (result) {
		free(p);
		release(reg, e);
		return result;
	}
	pthread_mutex_lock(&reg->lock);
	p->next = e->snaps;
	e->snaps = p;
	e->n_snaps++;
	pthread_mutex_unlock(&reg->lock);
	char *sh = handle(reg, SNAPSHOT_TAG, p->secret), text[512];
	snprintf(text, sizeof(text),
		 "snapshot: %s\nThe state of session %s as of now. session_restore it to bring "
		 "that session back to this state (it lives as long as the session).",
		 sh ? sh : "", h);
	result =
		ok_result(json_pack("{s:s?, s:s}", "snapshot", sh, "session", h), text, structured);
	free(sh);
	release(reg, e);
	return result;
}

static json_t *session_restore(struct mcp_sessions *reg, const char *sh, bool structured)
{
	json_t *error = NULL;
	struct snap *p = NULL;
	struct entry *e = acquire(reg, sh, SNAPSHOT_TAG, NULL, &p, &error);
	if (!e)
		return error;
	struct snapcell_error err = {0};
	char *h = handle(reg, SESSION_TAG, e->secret);
	json_t *result;
	if (snapcell_session_restore(e->s, p->snap, &err) < 0) {
		result = tool_error(STATUS_SETUP, "snapshot %s not restored: %s", sh, err.message);
	} else {
		char text[512];
		snprintf(text, sizeof(text),
			 "session: %s\nRestored to snapshot %s: its variables are as they were "
			 "when the snapshot was taken.",
			 h ? h : "", sh);
		result = ok_result(json_pack("{s:s?, s:s}", "session", h, "snapshot", sh), text,
				   structured);
	}
	free(h);
	release(reg, e);
	return result;
}

/* session_close takes either kind of handle: a session (with its snapshots; a run in
 * progress on it is cancelled) or one snapshot. */
static json_t *session_close(struct mcp_sessions *reg, const char *h, bool structured)
{
	json_t *error = NULL;
	const char *tilde = strchr(h, '~');
	if (tilde && !strncmp(tilde + 1, SNAPSHOT_TAG, strlen(SNAPSHOT_TAG))) {
		struct snap *p = NULL;
		struct entry *e = acquire(reg, h, SNAPSHOT_TAG, NULL, &p, &error);
		if (!e)
			return error;
		pthread_mutex_lock(&reg->lock);
		struct snap **at = &e->snaps;
		while (*at != p)
			at = &(*at)->next;
		*at = p->next;
		e->n_snaps--;
		pthread_mutex_unlock(&reg->lock);
		snapcell_snapshot_free(p->snap);
		free(p);
		release(reg, e);
		return ok_result(json_pack("{s:s}", "closed", h), "snapshot closed", structured);
	}
	const char *secret = parse_handle(reg, h, SESSION_TAG, &error);
	if (!secret)
		return error;
	bool free_now = false;
	pthread_mutex_lock(&reg->lock);
	struct entry *found = find(reg, secret, NULL);
	if (found) {
		free_now = unlink_entry(reg, found);
		if (found->running)
			snapcell_cancel_fire(found->running);
		write_state(reg);
	}
	pthread_mutex_unlock(&reg->lock);
	if (!found) {
		char show[HANDLE_SHOWN_MAX + 4];
		shown(h, show);
		return unknown(reg, show, SESSION_TAG);
	}
	if (free_now)
		entry_free(found);
	return ok_result(json_pack("{s:s}", "closed", h),
			 free_now ? "session closed"
				  : "session closed; the run in progress on it was cancelled",
			 structured);
}

static const char *const session_tools[] = {"session_new", "session_snapshot", "session_restore",
					    "session_close", NULL};

static bool is_session_tool(const char *name)
{
	for (size_t i = 0; name && session_tools[i]; i++)
		if (!strcmp(name, session_tools[i]))
			return true;
	return false;
}

bool mcp_sessions_claims(const struct mcp_sessions *reg, const json_t *params)
{
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	if (reg->opts.enabled && is_session_tool(name))
		return true;
	return name && !strcmp(name, "execute_code") && json_is_object(args) &&
	       json_object_get(args, "session") && !json_is_null(json_object_get(args, "session"));
}

const char *mcp_sessions_replica(const struct mcp_sessions *reg)
{
	return reg->replica;
}

json_t *mcp_sessions_call(struct mcp_sessions *reg, const json_t *params,
			  struct snapcell_cancel *cancel, bool structured,
			  struct snapcell_result **res, mcp_settle_fn settle, void *ctx)
{
	*res = NULL;
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	if (!reg->opts.enabled)
		return mcp_error_result(STATUS_DISABLED,
					"this server has no sessions (its config does not enable "
					"them): call execute_code without session; each call runs "
					"in a fresh cell");
	if (!strcmp(name, "session_new"))
		return session_new(reg, structured);
	const char *key = !strcmp(name, "session_restore") ? "snapshot"
			  : !strcmp(name, "session_close") ? "handle"
							   : "session";
	const char *h = json_string_value(json_object_get(args, key));
	if (!h)
		return tool_error(STATUS_INVALID, "%s needs the argument %s, a handle string", name,
				  key);
	if (!strcmp(name, "execute_code"))
		return session_run(reg, h, args, cancel, structured, res, settle, ctx);
	if (!strcmp(name, "session_snapshot"))
		return session_snapshot(reg, h, structured);
	if (!strcmp(name, "session_restore"))
		return session_restore(reg, h, structured);
	return session_close(reg, h, structured);
}

static json_t *handle_schema(const char *key, const char *what)
{
	return json_pack("{s:s, s:{s:{s:s, s:s}}, s:[s], s:b}", "type", "object", "properties", key,
			 "type", "string", "description", what, "required", key,
			 "additionalProperties", 0);
}

static json_t *tool(const char *name, const char *title, const char *description, json_t *schema)
{
	return json_pack("{s:s, s:s, s:s, s:o}", "name", name, "title", title, "description",
			 description, "inputSchema", schema);
}

void mcp_sessions_list_tools(const struct mcp_sessions *reg, json_t *list)
{
	json_t *tools = json_object_get(list, "tools");
	if (!reg->opts.enabled || !json_is_array(tools))
		return;
	json_t *exec_schema =
		json_loads(snapcell_execute_code_schema(SNAPCELL_SCHEMA_SESSION), 0, NULL);
	if (exec_schema)
		json_object_set_new(json_array_get(tools, 0), "inputSchema", exec_schema);
	char text[3][640];
	snprintf(text[0], sizeof(text[0]),
		 "Start a Python session that keeps its state (variables, imports, functions) "
		 "between execute_code calls. Returns a session handle: pass it as execute_code's "
		 "session argument. Sessions do not see each other's state. A session closes "
		 "after %u s without use; at most %u are open at once.",
		 reg->opts.idle_timeout_s, reg->opts.max);
	snprintf(text[1], sizeof(text[1]),
		 "Save a session's current state and return a snapshot handle; session_restore "
		 "brings the session back to it later (say, before trying something risky). At "
		 "most %u snapshots per session; they end with their session.",
		 reg->opts.max_snapshots);
	snprintf(text[2], sizeof(text[2]),
		 "Bring a session back to the state saved in a snapshot: variables changed since "
		 "return to their saved values. Also revives a session whose process ended (a run "
		 "timed out or was cancelled). The snapshot stays usable; the session keeps its "
		 "handle.");
	json_array_append_new(tools, tool("session_new", "Start a Python session", text[0],
					  json_pack("{s:s, s:{}, s:b}", "type", "object",
						    "properties", "additionalProperties", 0)));
	json_array_append_new(tools,
			      tool("session_snapshot", "Snapshot a session", text[1],
				   handle_schema("session", "A session handle from session_new")));
	json_array_append_new(
		tools, tool("session_restore", "Restore a session from a snapshot", text[2],
			    handle_schema("snapshot", "A snapshot handle from session_snapshot")));
	json_array_append_new(
		tools,
		tool("session_close", "Close a session or a snapshot",
		     "Close a session with its snapshots (a run in progress on it is cancelled), "
		     "or drop one snapshot. Frees them at once instead of at the idle timeout.",
		     handle_schema("handle", "A session or snapshot handle")));
}
