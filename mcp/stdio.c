/* The stdio transport: newline-delimited JSON-RPC on stdin and stdout. stdout carries nothing
 * but protocol messages: the server moves it to a private descriptor and points fd 1 at
 * stderr, so neither a stray write nor a child process can reach the client's channel. A
 * line is capped at MCP_MESSAGE_MAX; a longer one is skipped as it arrives, never held.
 *
 * Reading is a role that passes between threads (leader/follower): the thread that reads a
 * tools/call, once it is admitted, hands reading to a waiting thread (or a new one) and runs
 * the call itself, so a run starts without waiting for another thread to wake up, while
 * reading goes on for cancellations and more calls. Messages are read and admitted in order
 * by whichever thread holds the role. At the end of input the calls in flight are answered
 * before the server returns, as long as someone reads the output. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../frontend/frontend.h"
#include "mcp.h"

/* Line assembly: line holds the current line while it is under the cap (MCP_MESSAGE_MAX);
 * past the cap the rest of the line is dropped (skipping) and one error answers it. */
struct reader {
	struct sc_buf line;
	bool skipping;
};

/* The transport: the sink the server answers through (first), the output, and the reading
 * role with what only its holder touches (the line being assembled, bytes read not yet
 * split). */
struct stdio_sink {
	struct mcp_sink sink;
	pthread_mutex_t lock; /* the output */
	int fd;
	bool gone;
	struct mcp_server *srv;
	pthread_mutex_t role_lock;
	pthread_cond_t turn; /* the role is free, the input ended, or a thread left */
	bool reading, ended;
	unsigned spare;	  /* threads waiting for the role */
	unsigned threads; /* started besides the first, not yet gone */
	int in;
	struct reader r;
	char chunk[1 << 16];
	size_t pos, end;
	bool eof;
};

/* Threads that may wait for the role, the first included; more leave. Two: the thread that
 * just answered a call may not be waiting yet when the next call is read, and a new thread
 * would then start; a second waiting one keeps that rare. */
#define MAX_SPARE 2

/* Set by run_here() on the thread that gave the role away with a call to run. */
static _Thread_local bool handed_off;

/* The message and its newline in one writev: written apart, a client reading lines wakes
 * for the message, finds no newline and sleeps again until the second write, a scheduling
 * delay on every answer of a loaded machine. */
static int write_line(int fd, const char *text, size_t len)
{
	struct iovec iov[2] = {{(void *)text, len}, {"\n", 1}};
	struct iovec *v = iov;
	int cnt = 2;
	while (cnt) {
		ssize_t n = writev(fd, v, cnt);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		size_t done = (size_t)n;
		for (; cnt && done >= v->iov_len; v++, cnt--)
			done -= v->iov_len;
		if (cnt) {
			v->iov_base = (char *)v->iov_base + done;
			v->iov_len -= done;
		}
	}
	return 0;
}

static int stdio_send(struct mcp_sink *sink, json_t *msg)
{
	struct stdio_sink *s = (struct stdio_sink *)sink;
	size_t len = 0;
	char *text = mcp_message_text(msg, NULL, NULL, &len);
	json_decref(msg);
	pthread_mutex_lock(&s->lock);
	if (!s->gone && (!text || write_line(s->fd, text, len) < 0))
		s->gone = true;
	int rc = s->gone ? -1 : 0;
	pthread_mutex_unlock(&s->lock);
	free(text);
	return rc;
}

/* Takes fds 0 and 1 for the protocol: returns the private copies, and leaves 0 reading
 * /dev/null and 1 writing to stderr. */
static int take_stdio(int *in, int *out)
{
	*in = fcntl(0, F_DUPFD_CLOEXEC, 3);
	*out = fcntl(1, F_DUPFD_CLOEXEC, 3);
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (*in < 0 || *out < 0 || null < 0 || dup2(null, 0) < 0 || dup2(2, 1) < 0) {
		fprintf(stderr, "snapcell mcp: cannot take stdin and stdout: %s\n",
			strerror(errno));
		return -1;
	}
	close(null);
	return 0;
}

static int append(struct reader *r, const char *p, size_t n)
{
	if (r->skipping)
		return 0;
	int rc = sc__buf_add(&r->line, p, n);
	if (rc == SNAPCELL_E_TOO_BIG) {
		r->skipping = true;
		sc__buf_free(&r->line);
		return 0;
	}
	return rc < 0 ? -1 : 0;
}

/* With the role: assembles the next line in s->r; false at the end of input (a last line
 * without its newline is still a line). */
static bool next_line(struct stdio_sink *s)
{
	for (;;) {
		if (s->pos == s->end) {
			ssize_t n = s->eof ? 0 : read(s->in, s->chunk, sizeof(s->chunk));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				s->eof = true;
				return s->r.line.len || s->r.skipping;
			}
			s->pos = 0;
			s->end = (size_t)n;
		}
		char *p = s->chunk + s->pos;
		size_t left = s->end - s->pos;
		char *nl = memchr(p, '\n', left);
		size_t take = nl ? (size_t)(nl - p) : left;
		if (append(&s->r, p, take) < 0)
			s->r.skipping = true;
		s->pos += take + (nl != NULL);
		if (nl)
			return true;
	}
}

/* With the role: serves the line in s->r. A tools/call may give the role away (run_here)
 * and run before this returns. */
static void serve_line(struct stdio_sink *s)
{
	struct reader *r = &s->r;
	if (r->skipping) {
		char why[96];
		snprintf(why, sizeof(why), "Invalid Request: message over %u MiB",
			 MCP_MESSAGE_MAX >> 20);
		s->sink.send(&s->sink, mcp_error(NULL, MCP_INVALID_REQUEST, why));
		r->skipping = false;
		sc__buf_reset(&r->line);
		return;
	}
	const char *text = r->line.data;
	size_t len = r->line.len;
	while (len && (text[len - 1] == '\r' || text[len - 1] == ' ' || text[len - 1] == '\t'))
		len--;
	/* Parsed into its own memory before the role (and r) can pass to another thread. */
	struct mcp_message msg;
	json_t *error = NULL;
	int rc = len ? mcp_envelope_parse(text, len, &msg, &error) : -1;
	sc__buf_reset(&r->line);
	if (rc < 0) {
		if (error)
			s->sink.send(&s->sink, error);
		return;
	}
	if (msg.kind == MCP_REQUEST && mcp_envelope_era(&msg, NULL, &error) < 0) {
		s->sink.send(&s->sink, error);
		mcp_message_clear(&msg);
		return;
	}
	mcp_server_handle(s->srv, &msg, &s->sink, false);
	mcp_message_clear(&msg);
}

static void *reader_main(void *arg);

/* With role_lock held: one more thread to take the role. */
static bool start_reader(struct stdio_sink *s)
{
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	bool started = pthread_create(&t, &attr, reader_main, s) == 0;
	pthread_attr_destroy(&attr);
	s->threads += started;
	return started;
}

/* The server admitted a tools/call read on this thread: the role goes to a waiting thread,
 * or a new one, and the call runs here. False (the server hands the call to a worker) when
 * no thread can take the role. */
static bool run_here(struct mcp_sink *sink)
{
	struct stdio_sink *s = (struct stdio_sink *)sink;
	pthread_mutex_lock(&s->role_lock);
	bool ok = s->spare > 0 || start_reader(s);
	if (ok) {
		s->reading = false;
		pthread_cond_signal(&s->turn);
	}
	pthread_mutex_unlock(&s->role_lock);
	handed_off = ok;
	return ok;
}

/* Whether nobody reads the answers any more: a write failed, or the pipe's reader closed it
 * (poll reports POLLERR on a pipe without readers). */
static bool output_gone(struct stdio_sink *s)
{
	struct pollfd p = {s->fd, 0, 0};
	pthread_mutex_lock(&s->lock);
	bool gone = s->gone || (poll(&p, 1, 0) == 1 && p.revents & (POLLERR | POLLHUP));
	pthread_mutex_unlock(&s->lock);
	return gone;
}

/* The input ended: the calls in flight run to their end and are answered (`snapcell mcp <
 * requests.jsonl` gets every answer), unless their answers have no reader left, in which case
 * the client is gone and its runs are cancelled. */
static void finish(struct stdio_sink *s)
{
	while (!mcp_server_wait_calls(s->srv, 200) && !output_gone(s))
		;
	mcp_server_drain(s->srv);
}

/* Takes the role when it is free and serves lines until it hands the role off with a call
 * (then waits for it again) or the input ends. At most MAX_SPARE threads wait (the first
 * always may); more leave. The thread that sees the end cancels every run (the client is
 * gone). */
static void serve(struct stdio_sink *s, bool first)
{
	pthread_mutex_lock(&s->role_lock);
	while (!s->ended) {
		if (s->reading) {
			if (!first && s->spare >= MAX_SPARE)
				break;
			s->spare++;
			pthread_cond_wait(&s->turn, &s->role_lock);
			s->spare--;
			continue;
		}
		s->reading = true;
		pthread_mutex_unlock(&s->role_lock);
		bool more;
		do {
			handed_off = false;
			more = next_line(s);
			if (more)
				serve_line(s);
		} while (more && !handed_off);
		if (!more)
			finish(s);
		pthread_mutex_lock(&s->role_lock);
		if (!more) {
			s->ended = true;
			pthread_cond_broadcast(&s->turn);
		}
	}
	pthread_mutex_unlock(&s->role_lock);
}

static void *reader_main(void *arg)
{
	struct stdio_sink *s = arg;
	serve(s, false);
	pthread_mutex_lock(&s->role_lock);
	s->threads--;
	pthread_cond_broadcast(&s->turn);
	pthread_mutex_unlock(&s->role_lock);
	return NULL;
}

int mcp_serve_stdio(struct mcp_server *srv)
{
	int in, out;
	if (take_stdio(&in, &out) < 0)
		return 1;
	struct stdio_sink *s = calloc(1, sizeof(*s));
	if (!s) {
		fprintf(stderr, "snapcell mcp: out of memory\n");
		return 1;
	}
	s->sink =
		(struct mcp_sink){stdio_send, false, 0, run_here, false, false, 0, NULL, 0, false};
	sc__buf_init(&s->r.line, MCP_MESSAGE_MAX);
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->role_lock, NULL);
	pthread_cond_init(&s->turn, NULL);
	s->fd = out;
	s->srv = srv;
	s->in = in;
	serve(s, true);
	/* The client is gone (end of input): its runs are cancelled; wait for every thread. */
	mcp_server_drain(srv);
	pthread_mutex_lock(&s->role_lock);
	while (s->threads)
		pthread_cond_wait(&s->turn, &s->role_lock);
	pthread_mutex_unlock(&s->role_lock);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->role_lock);
	pthread_cond_destroy(&s->turn);
	sc__buf_free(&s->r.line);
	free(s);
	close(in);
	close(out);
	return 0;
}
