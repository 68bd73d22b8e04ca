/* The stdio transport: newline-delimited JSON-RPC on stdin and stdout. stdout carries nothing
 * but protocol messages: the server moves it to a private descriptor and points fd 1 at
 * stderr, so neither a stray write nor a child process can reach the client's channel. A
 * line is capped at MCP_MESSAGE_MAX; a longer one is skipped as it arrives, never held. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "mcp.h"

struct stdio_sink {
	struct mcp_sink sink;
	pthread_mutex_t lock;
	int fd;
	bool gone;
};

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
	/* Compact output escapes every newline inside strings: one message, one line. */
	char *text = json_dumps(msg, JSON_COMPACT);
	json_decref(msg);
	pthread_mutex_lock(&s->lock);
	if (!s->gone && (!text || write_line(s->fd, text, strlen(text)) < 0))
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

static void handle_line(struct mcp_server *srv, struct mcp_sink *sink, const char *line, size_t len)
{
	while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
		len--;
	if (!len)
		return;
	struct mcp_message msg;
	json_t *error;
	if (mcp_envelope_parse(line, len, &msg, &error) < 0) {
		if (error)
			sink->send(sink, error);
		return;
	}
	if (msg.kind == MCP_REQUEST && mcp_envelope_era(&msg, NULL, &error) < 0) {
		sink->send(sink, error);
		mcp_message_clear(&msg);
		return;
	}
	mcp_server_handle(srv, &msg, sink, false);
	mcp_message_clear(&msg);
}

/* Line assembly: buf holds the current line while it is under the cap; past the cap the
 * rest of the line is dropped (skipping) and one error answers it. */
struct reader {
	char *buf;
	size_t len, cap;
	bool skipping;
};

static int append(struct reader *r, const char *p, size_t n)
{
	if (r->skipping)
		return 0;
	if (r->len + n > MCP_MESSAGE_MAX) {
		r->skipping = true;
		free(r->buf);
		r->buf = NULL;
		r->len = r->cap = 0;
		return 0;
	}
	if (r->len + n > r->cap) {
		size_t cap = r->cap ? r->cap : 65536;
		while (cap < r->len + n)
			cap *= 2;
		char *grown = realloc(r->buf, cap);
		if (!grown)
			return -1;
		r->buf = grown;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, p, n);
	r->len += n;
	return 0;
}

static void end_line(struct reader *r, struct mcp_server *srv, struct mcp_sink *sink)
{
	if (r->skipping) {
		char why[96];
		snprintf(why, sizeof(why), "Invalid Request: message over %u MiB",
			 MCP_MESSAGE_MAX >> 20);
		sink->send(sink, mcp_error(NULL, MCP_INVALID_REQUEST, why));
		r->skipping = false;
	} else {
		handle_line(srv, sink, r->buf ? r->buf : "", r->len);
	}
	r->len = 0;
}

static void read_loop(int in, struct mcp_server *srv, struct stdio_sink *sink)
{
	static char chunk[1 << 16];
	struct reader r = {0};
	for (;;) {
		ssize_t n = read(in, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (char *p = chunk, *end = chunk + n; p < end;) {
			char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t take = (size_t)((nl ? nl : end) - p);
			if (append(&r, p, take) < 0)
				r.skipping = true;
			if (nl)
				end_line(&r, srv, &sink->sink);
			p += take + (nl != NULL);
		}
	}
	/* A last line without its newline is still a message. */
	if (r.len || r.skipping)
		end_line(&r, srv, &sink->sink);
	free(r.buf);
}

int mcp_serve_stdio(struct mcp_server *srv)
{
	int in, out;
	if (take_stdio(&in, &out) < 0)
		return 1;
	struct stdio_sink sink = {{stdio_send, false, 0}, PTHREAD_MUTEX_INITIALIZER, out, false};
	read_loop(in, srv, &sink);
	/* The client is gone (end of input): kill what it started, then leave. */
	mcp_server_drain(srv);
	close(in);
	close(out);
	return 0;
}
