/* One connection to a downstream MCP server, as a client of the handshake era: initialize,
 * notifications/initialized, then requests. Over stdio the server is our child process and
 * one request is in flight at a time (a mutex, taken with the caller's deadline): answers are
 * matched by id, so a late answer to a request whose caller gave up is read and dropped.
 * A caller gives up at its run's deadline or, at once, when its run is cancelled (the run's
 * cancel descriptor, watched beside the server's output); the server is then sent
 * notifications/cancelled for the request, over either transport.
 * A server that exits, writes a line that is not JSON-RPC or one past MCP_MESSAGE_MAX is
 * closed (its process group killed); the next request starts it again. Over HTTP every
 * request is a POST of its own (downstream_http.c), so callers do not wait for each other;
 * an expired session (404 to a request that carried Mcp-Session-Id) is initialized again. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../frontend/frontend.h"
#include "downstream.h"
#include "mcp.h"

/* A stdio server's output is read into room for READ_SIZE bytes or more, and only while the
 * line being read is at most MCP_MESSAGE_MAX (a longer one stops the server), so its buffer
 * needs no more than LINE_CAP. */
#define READ_SIZE 65536
#define LINE_CAP  (MCP_MESSAGE_MAX + READ_SIZE)

struct mcp_downstream {
	char *name;
	uint64_t timeout_ms;
	pthread_mutex_t lock; /* stdio: the pipe pair and its reader; HTTP: session, version */
	json_int_t next_id;
	char *version; /* what initialize negotiated */
	/* stdio */
	char **argv, **envp, *cwd;
	pid_t pid; /* 0: not running */
	int to_server, from_server;
	struct sc_buf out; /* bytes read past the last line handed out (LINE_CAP) */
	size_t scanned;	   /* out.data[0, scanned) holds no newline */
	char death[200];   /* why the last process was closed, for the next error */
	/* HTTP */
	char *url, **headers, *session;
};

int mcp_say(char *why, size_t size, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, size, fmt, ap);
	va_end(ap);
	return -1;
}

/* Why a caller stopped waiting before its answer came. */
enum miss { MISS_NONE, MISS_DEADLINE, MISS_CANCELLED };

/* Whether the run's cancel descriptor (-1: none) has fired. */
static bool fired(int cancel_fd)
{
	struct pollfd pf = {cancel_fd, POLLIN, 0};
	return cancel_fd >= 0 && poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN);
}

/* Milliseconds left until deadline_us for poll: 0 once it passed, at most a minute a wait. */
static int ms_left(uint64_t deadline_us)
{
	uint64_t now = fe_now_us();
	if (now >= deadline_us)
		return 0;
	uint64_t ms = (deadline_us - now + 999) / 1000;
	return ms > 60000 ? 60000 : (int)ms;
}

static char **copy_strv(char *const *v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	char **out = calloc(n + 1, sizeof(*out));
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = strdup(v[i]))) {
			while (i--)
				free(out[i]);
			free(out);
			return NULL;
		}
	return out;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* ---- stdio: the child process ---- */

static void stdio_stop(struct mcp_downstream *ds, const char *why)
{
	if (!ds->pid)
		return;
	if (why)
		snprintf(ds->death, sizeof(ds->death), "%s", why);
	close(ds->to_server);
	close(ds->from_server);
	int status = 0;
	/* A moment to exit on end of input, as servers do; then its whole group is stopped. */
	for (int i = 0; i < 20 && waitpid(ds->pid, &status, WNOHANG) == 0; i++) {
		if (i == 10)
			kill(-ds->pid, SIGTERM);
		usleep(10000);
	}
	if (waitpid(ds->pid, &status, WNOHANG) == 0) {
		kill(-ds->pid, SIGKILL);
		while (waitpid(ds->pid, &status, 0) < 0 && errno == EINTR)
			;
	}
	ds->pid = 0;
	sc__buf_reset(&ds->out);
	ds->scanned = 0;
}

static int stdio_spawn(struct mcp_downstream *ds, char *why, size_t size)
{
	struct sc_fdset fds SC_AUTO_FDSET = SC_FDSET_INIT;
	int in[2], out[2];
	if (sc__fdset_pipe(&fds, in, O_CLOEXEC) < 0 || sc__fdset_pipe(&fds, out, O_CLOEXEC) < 0)
		return mcp_say(why, size, "cannot create a pipe: %s", strerror(errno));
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	/* fd 2 stays ours: its log goes to our stderr, never to our stdout (the protocol). */
	/* Fails only where the running glibc predates it (2.29; the wheel is built for 2.28). */
	int chdir_rc = ds->cwd ? posix_spawn_file_actions_addchdir_np(&fa, ds->cwd) : 0;
	if (chdir_rc) {
		posix_spawn_file_actions_destroy(&fa);
		return mcp_say(why, size, "cannot start %s in %s: %s", ds->argv[0], ds->cwd,
			       strerror(chdir_rc));
	}
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	posix_spawnattr_setpgroup(&attr, 0);
	/* Not our signal state: we ignore SIGPIPE and the HTTP front end blocks SIGINT/SIGTERM. */
	sigset_t none, defaults;
	sigemptyset(&none);
	sigemptyset(&defaults);
	sigaddset(&defaults, SIGPIPE);
	sigaddset(&defaults, SIGINT);
	sigaddset(&defaults, SIGTERM);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &defaults);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
						POSIX_SPAWN_SETSIGDEF);
	int rc = posix_spawnp(&ds->pid, ds->argv[0], &fa, &attr, ds->argv, ds->envp);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	sc__fdset_close(&fds, in[0]);
	sc__fdset_close(&fds, out[1]);
	if (rc) {
		ds->pid = 0;
		return mcp_say(why, size, "cannot start %s: %s", ds->argv[0], strerror(rc));
	}
	ds->to_server = sc__fdset_take(&fds, in[1]);
	ds->from_server = sc__fdset_take(&fds, out[0]);
	fcntl(ds->to_server, F_SETFL, O_NONBLOCK);
	sc__buf_reset(&ds->out);
	ds->scanned = 0;
	return 0;
}

/* Why the process is gone, once it is: its exit status or signal. */
static void stdio_died(struct mcp_downstream *ds, const char *what)
{
	int status = 0;
	char how[64] = "";
	pid_t pid = ds->pid;
	if (!pid) /* already closed (waitpid(0) would reap any child of ours) */
		return;
	/* End of output usually means exit: give it a moment to be reaped with its status. */
	for (int i = 0; i < 50 && waitpid(pid, &status, WNOHANG) == 0; i++)
		usleep(2000);
	if (kill(pid, 0) < 0 || waitpid(pid, &status, WNOHANG) == pid) {
		if (WIFEXITED(status))
			snprintf(how, sizeof(how), " (exit status %d)", WEXITSTATUS(status));
		else if (WIFSIGNALED(status))
			snprintf(how, sizeof(how), " (killed by signal %d)", WTERMSIG(status));
	}
	char msg[200];
	snprintf(msg, sizeof(msg), "%s%s", what, how);
	stdio_stop(ds, msg);
}

static int stdio_write(struct mcp_downstream *ds, const json_t *msg, uint64_t deadline_us,
		       char *why, size_t size)
{
	if (!ds->pid)
		return mcp_say(why, size, "server '%s' stopped: %s", ds->name, ds->death);
	char *text = json_dumps(msg, JSON_COMPACT);
	if (!text)
		return mcp_say(why, size, "out of memory");
	size_t len = strlen(text), off = 0;
	text[len] = '\n'; /* json_dumps leaves room: the NUL becomes the line's end */
	while (off <= len) {
		struct pollfd pf = {ds->to_server, POLLOUT, 0};
		int n = poll(&pf, 1, ms_left(deadline_us));
		if (n == 0) {
			free(text);
			return mcp_say(why, size, "server '%s' did not take the request in time",
				       ds->name);
		}
		ssize_t w = n > 0 ? write(ds->to_server, text + off, len + 1 - off) : 0;
		if (w < 0 && errno != EAGAIN && errno != EINTR) {
			free(text);
			stdio_died(ds, "it closed its input");
			return mcp_say(why, size, "server '%s' stopped reading: %s", ds->name,
				       ds->death);
		}
		if (w > 0)
			off += (size_t)w;
	}
	free(text);
	return 0;
}

/* The next line (NUL-terminated, owned), or NULL with *missed set or the process closed
 * (why filled). Lines are capped at MCP_MESSAGE_MAX: a longer one closes the connection. A
 * line already read is handed out even past the deadline or the cancel; nothing more is read
 * then. */
static char *stdio_read_line(struct mcp_downstream *ds, uint64_t deadline_us, int cancel_fd,
			     enum miss *missed, char *why, size_t size)
{
	*missed = MISS_NONE;
	for (;;) {
		if (!ds->pid) { /* closed while we were answering one of its requests */
			mcp_say(why, size, "server '%s' stopped: %s", ds->name, ds->death);
			return NULL;
		}
		struct sc_buf *b = &ds->out;
		char *nl = b->len > ds->scanned
				   ? memchr(b->data + ds->scanned, '\n', b->len - ds->scanned)
				   : NULL;
		ds->scanned = b->len;
		if (nl) {
			ds->scanned = 0;
			size_t n = (size_t)(nl - b->data);
			char *line = strndup(b->data, n);
			memmove(b->data, nl + 1, b->len - n - 1);
			sc__buf_truncate(b, b->len - n - 1);
			if (!line)
				mcp_say(why, size, "out of memory");
			return line;
		}
		if (b->len > MCP_MESSAGE_MAX) {
			stdio_died(ds, "it wrote a line longer than 16 MiB");
			mcp_say(why, size, "server '%s' sent a message longer than 16 MiB",
				ds->name);
			return NULL;
		}
		/* Checked before every read, not only when a wait comes back empty: a server
		 * that keeps its output full (a flood of notifications) would hold us forever. */
		int left = ms_left(deadline_us);
		if (left == 0) {
			*missed = MISS_DEADLINE;
			return NULL;
		}
		struct pollfd pf[2] = {{ds->from_server, POLLIN, 0}, {cancel_fd, POLLIN, 0}};
		if (poll(pf, cancel_fd >= 0 ? 2 : 1, left) <= 0)
			continue;
		if (pf[1].revents & POLLIN) {
			*missed = MISS_CANCELLED;
			return NULL;
		}
		char *at;
		ssize_t room = sc__buf_space(b, READ_SIZE, &at);
		if (room < 0) {
			mcp_say(why, size, "out of memory");
			return NULL;
		}
		ssize_t r = read(ds->from_server, at, (size_t)room);
		if (r > 0)
			sc__buf_commit(b, (size_t)r);
		else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
			stdio_died(ds, "it closed its output");
			mcp_say(why, size, "server '%s' stopped: %s", ds->name, ds->death);
			return NULL;
		}
	}
}

/* A request from the server to us: ping gets {}, anything else method-not-found (this
 * client offers no capabilities: no sampling, roots or elicitation). */
static void stdio_answer(struct mcp_downstream *ds, json_t *msg, uint64_t deadline_us)
{
	json_t *id = json_object_get(msg, "id");
	const char *method = json_string_value(json_object_get(msg, "method"));
	json_t *answer =
		method && !strcmp(method, "ping")
			? mcp_response(id, json_object())
			: mcp_error(id, MCP_METHOD_NOT_FOUND, "snapcell offers no such method");
	char ignored[8];
	if (answer)
		stdio_write(ds, answer, deadline_us, ignored, sizeof(ignored));
	json_decref(answer);
}

/* Reads until the response with id want arrives. Notifications and stale responses are
 * dropped; a line that is not a JSON-RPC message closes the connection. */
static int stdio_await(struct mcp_downstream *ds, const json_t *want, uint64_t deadline_us,
		       int cancel_fd, json_t **response, enum miss *missed, char *why, size_t size)
{
	for (;;) {
		char *line = stdio_read_line(ds, deadline_us, cancel_fd, missed, why, size);
		if (!line)
			return -1;
		json_t *msg = mcp_downstream_parse(line, strlen(line));
		bool blank = strspn(line, " \t\r") == strlen(line);
		free(line);
		if (blank)
			continue;
		const char *version = json_string_value(json_object_get(msg, "jsonrpc"));
		if (!json_is_object(msg) || !version || strcmp(version, "2.0")) {
			json_decref(msg);
			stdio_died(ds, "it wrote a line that is not JSON-RPC 2.0");
			return mcp_say(why, size,
				       "server '%s' sent a line that is not JSON-RPC 2.0",
				       ds->name);
		}
		json_t *id = json_object_get(msg, "id");
		if (json_object_get(msg, "method")) {
			if (id)
				stdio_answer(ds, msg, deadline_us);
		} else if (id && json_equal(id, want)) {
			*response = msg;
			return 0;
		}
		json_decref(msg);
	}
}

/* ---- both transports ---- */

static json_t *message(json_int_t id, const char *method, json_t *params)
{
	json_t *msg = json_pack("{s:s, s:s}", "jsonrpc", "2.0", "method", method);
	if (msg && id)
		json_object_set_new(msg, "id", json_integer(id));
	if (msg && params)
		json_object_set(msg, "params", params);
	json_decref(params);
	return msg;
}

static int http_post(struct mcp_downstream *ds, const json_t *msg, const json_t *want,
		     uint64_t deadline_us, int cancel_fd, json_t **response, long *status,
		     char *why, size_t size)
{
	pthread_mutex_lock(&ds->lock);
	char *session = ds->session ? strdup(ds->session) : NULL;
	char *version = ds->version ? strdup(ds->version) : NULL;
	pthread_mutex_unlock(&ds->lock);
	struct mcp_http_post post = {ds->url, ds->headers, session,
				     version, deadline_us, cancel_fd};
	char *new_session = NULL;
	int rc = mcp_downstream_http_post(&post, msg, want, response, &new_session, status, why,
					  size);
	if (rc == 0 && new_session) {
		pthread_mutex_lock(&ds->lock);
		free(ds->session);
		ds->session = new_session;
		new_session = NULL;
		pthread_mutex_unlock(&ds->lock);
	}
	free(new_session);
	free(session);
	free(version);
	return rc;
}

/* One exchange on the connection as it is (no restart); *missed tells a deadline miss or a
 * cancel (the connection is still good) from a broken one. cancel_fd: the run's cancel
 * descriptor, -1 for none. Stdio: the caller holds the lock. */
static int exchange(struct mcp_downstream *ds, json_t *msg, uint64_t deadline_us, int cancel_fd,
		    json_t **response, enum miss *missed, long *status, char *why, size_t size)
{
	json_t *id = json_object_get(msg, "id");
	*missed = MISS_NONE;
	*status = 0;
	if (response)
		*response = NULL;
	if (ds->url) {
		int rc =
			http_post(ds, msg, id, deadline_us, cancel_fd, response, status, why, size);
		if (rc < 0 && *status == 0)
			*missed = fired(cancel_fd)	      ? MISS_CANCELLED
				  : ms_left(deadline_us) == 0 ? MISS_DEADLINE
							      : MISS_NONE;
		return rc;
	}
	if (stdio_write(ds, msg, deadline_us, why, size) < 0)
		return -1;
	return id ? stdio_await(ds, id, deadline_us, cancel_fd, response, missed, why, size) : 0;
}

/* Tells the server to stop working on msg's request, whose answer nobody waits for any more
 * (the late answer is dropped); its own answer ignored. A tenth of a second at most over
 * stdio; a second over HTTP, where the notification is a POST on a new connection (TLS
 * included), as the session's DELETE is. */
static void send_cancelled(struct mcp_downstream *ds, const json_t *msg, enum miss missed)
{
	const char *reason = missed == MISS_CANCELLED ? "the calling run was cancelled"
						      : "the calling run's deadline passed";
	json_t *cancel = message(
		0, "notifications/cancelled",
		json_pack("{s:O, s:s}", "requestId", json_object_get(msg, "id"), "reason", reason));
	char ignored[8];
	long status;
	if (cancel && ds->url)
		http_post(ds, cancel, NULL, fe_now_us() + 1000000, -1, NULL, &status, ignored,
			  sizeof(ignored));
	else if (cancel)
		stdio_write(ds, cancel, fe_now_us() + 100000, ignored, sizeof(ignored));
	json_decref(cancel);
}

/* What a caller that stopped waiting is told. */
static int say_missed(const struct mcp_downstream *ds, enum miss missed, char *why, size_t size)
{
	return missed == MISS_CANCELLED
		       ? mcp_say(why, size, "server '%s': the call was cancelled with its run",
				 ds->name)
		       : mcp_say(why, size,
				 "server '%s' did not answer in time (the run's deadline)",
				 ds->name);
}

static json_int_t take_id(struct mcp_downstream *ds)
{
	return __atomic_add_fetch(&ds->next_id, 1, __ATOMIC_RELAXED);
}

/* initialize and notifications/initialized; ds->version set. Stdio: lock held. */
static int handshake(struct mcp_downstream *ds, uint64_t deadline_us, int cancel_fd, char *why,
		     size_t size)
{
	json_t *params = json_pack("{s:s, s:{}, s:{s:s, s:s}}", "protocolVersion",
				   MCP_LEGACY_VERSION, "capabilities", "clientInfo", "name",
				   "snapcell", "version", SNAPCELL_VERSION);
	json_t *msg = message(take_id(ds), "initialize", params), *response = NULL;
	enum miss missed;
	long status;
	char inner[256];
	int rc = exchange(ds, msg, deadline_us, cancel_fd, &response, &missed, &status, inner,
			  sizeof(inner));
	json_decref(msg);
	if (rc < 0)
		return mcp_say(why, size, "initialize: %s",
			       missed == MISS_CANCELLED ? "the run was cancelled"
			       : missed			? "no answer in time"
							: inner);
	json_t *result = json_object_get(response, "result");
	const char *version = json_string_value(json_object_get(result, "protocolVersion"));
	if (!version) {
		json_t *error = json_object_get(response, "error");
		const char *text = json_string_value(json_object_get(error, "message"));
		rc = mcp_say(why, size, "initialize: %s%s", error ? "the server refused it: " : "",
			     error ? (text ? text : "no message")
				   : "the answer has no protocolVersion");
		json_decref(response);
		return rc;
	}
	pthread_mutex_t *lock = ds->url ? &ds->lock : NULL;
	if (lock)
		pthread_mutex_lock(lock);
	free(ds->version);
	ds->version = strdup(version);
	if (lock)
		pthread_mutex_unlock(lock);
	json_decref(response);
	msg = message(0, "notifications/initialized", NULL);
	rc = exchange(ds, msg, deadline_us, cancel_fd, NULL, &missed, &status, inner,
		      sizeof(inner));
	json_decref(msg);
	return rc < 0 ? mcp_say(why, size, "notifications/initialized: %s", inner) : 0;
}

static int stdio_start(struct mcp_downstream *ds, uint64_t deadline_us, int cancel_fd, char *why,
		       size_t size)
{
	if (stdio_spawn(ds, why, size) < 0)
		return -1;
	if (handshake(ds, deadline_us, cancel_fd, why, size) < 0) {
		stdio_stop(ds, why);
		return -1;
	}
	return 0;
}

int mcp_downstream_open(const struct mcp_downstream_spec *spec, struct mcp_downstream **out,
			char *why, size_t size)
{
	struct mcp_downstream *ds = calloc(1, sizeof(*ds));
	if (!ds)
		return mcp_say(why, size, "out of memory");
	pthread_mutex_init(&ds->lock, NULL);
	sc__buf_init(&ds->out, LINE_CAP);
	ds->name = strdup(spec->name);
	ds->timeout_ms = spec->timeout_ms;
	bool ok = ds->name;
	if (spec->url) {
		ds->url = strdup(spec->url);
		ds->headers = copy_strv(spec->headers);
		ok = ok && ds->url && ds->headers;
	} else {
		ds->argv = copy_strv(spec->argv);
		ds->envp = fe_child_env(spec->inherit, spec->env);
		ds->cwd = spec->cwd ? strdup(spec->cwd) : NULL;
		ok = ok && ds->argv && ds->envp && (!spec->cwd || ds->cwd);
	}
	if (!ok) {
		mcp_downstream_close(ds);
		return mcp_say(why, size, "out of memory");
	}
	uint64_t deadline_us = fe_now_us() + ds->timeout_ms * 1000;
	int rc = ds->url ? handshake(ds, deadline_us, -1, why, size)
			 : stdio_start(ds, deadline_us, -1, why, size);
	if (rc < 0) {
		mcp_downstream_close(ds);
		return -1;
	}
	*out = ds;
	return 0;
}

/* Takes the stdio connection's lock for a caller that waits until deadline_us, or until its
 * run is cancelled: the lock is tried in slices of 20 ms, so a cancelled caller stops waiting
 * for another run's request within one. MISS_NONE once held. */
static enum miss stdio_lock(struct mcp_downstream *ds, uint64_t deadline_us, int cancel_fd)
{
	for (;;) {
		uint64_t now = fe_now_us(), d = deadline_us;
		if (cancel_fd >= 0 && d > now + 20000)
			d = now + 20000;
		struct timespec until = {(time_t)(d / 1000000u), (long)(d % 1000000u) * 1000};
		if (pthread_mutex_clocklock(&ds->lock, CLOCK_MONOTONIC, &until) == 0)
			return MISS_NONE;
		if (fired(cancel_fd))
			return MISS_CANCELLED;
		if (fe_now_us() >= deadline_us)
			return MISS_DEADLINE;
	}
}

static int stdio_request(struct mcp_downstream *ds, json_t *msg, uint64_t deadline_us,
			 int cancel_fd, json_t **response, char *why, size_t size)
{
	enum miss missed = stdio_lock(ds, deadline_us, cancel_fd);
	if (missed == MISS_CANCELLED)
		return say_missed(ds, missed, why, size);
	if (missed)
		return mcp_say(why, size,
			       "server '%s' was busy with other calls until the run's deadline",
			       ds->name);
	int rc = 0;
	if (!ds->pid) {
		char inner[256];
		if (stdio_start(ds, deadline_us, cancel_fd, inner, sizeof(inner)) < 0)
			rc = mcp_say(why, size,
				     "server '%s' is not running (%s) and did not start again: %s",
				     ds->name, ds->death, inner);
	}
	long status;
	if (rc == 0)
		rc = exchange(ds, msg, deadline_us, cancel_fd, response, &missed, &status, why,
			      size);
	if (rc < 0 && missed) {
		/* The server may still be working: tell it to stop; its late answer is dropped. */
		send_cancelled(ds, msg, missed);
		say_missed(ds, missed, why, size);
	}
	pthread_mutex_unlock(&ds->lock);
	return rc;
}

static int http_request(struct mcp_downstream *ds, json_t *msg, uint64_t deadline_us, int cancel_fd,
			json_t **response, char *why, size_t size)
{
	enum miss missed;
	long status;
	int rc = exchange(ds, msg, deadline_us, cancel_fd, response, &missed, &status, why, size);
	if (rc < 0 && status == 404) {
		/* The session expired: a new one, once. */
		pthread_mutex_lock(&ds->lock);
		free(ds->session);
		ds->session = NULL;
		pthread_mutex_unlock(&ds->lock);
		char inner[256];
		if (handshake(ds, deadline_us, cancel_fd, inner, sizeof(inner)) < 0)
			return mcp_say(why, size,
				       "server '%s' lost the session and refused a new one: %s",
				       ds->name, inner);
		rc = exchange(ds, msg, deadline_us, cancel_fd, response, &missed, &status, why,
			      size);
	}
	if (rc < 0 && missed) {
		send_cancelled(ds, msg, missed);
		say_missed(ds, missed, why, size);
	}
	return rc;
}

int mcp_downstream_request(struct mcp_downstream *ds, const char *method, json_t *params,
			   uint64_t deadline_us, int cancel_fd, json_t **response, char *why,
			   size_t size)
{
	json_t *msg = message(take_id(ds), method, params);
	if (!msg)
		return mcp_say(why, size, "out of memory");
	if (!deadline_us)
		deadline_us = fe_now_us() + ds->timeout_ms * 1000;
	int rc = ds->url ? http_request(ds, msg, deadline_us, cancel_fd, response, why, size)
			 : stdio_request(ds, msg, deadline_us, cancel_fd, response, why, size);
	json_decref(msg);
	return rc;
}

const char *mcp_downstream_name(const struct mcp_downstream *ds)
{
	return ds->name;
}

void mcp_downstream_close(struct mcp_downstream *ds)
{
	if (!ds)
		return;
	stdio_stop(ds, NULL);
	if (ds->url && ds->session) {
		struct mcp_http_post end = {ds->url, ds->headers, ds->session, ds->version, 0, -1};
		mcp_downstream_http_end(&end);
	}
	pthread_mutex_destroy(&ds->lock);
	free(ds->name);
	free(ds->version);
	free_strv(ds->argv);
	free_strv(ds->envp);
	free(ds->cwd);
	sc__buf_free(&ds->out);
	free(ds->url);
	free_strv(ds->headers);
	free(ds->session);
	free(ds);
}
