/* The SSE stream of the Streamable HTTP transport: a tools/call whose answer goes out as
 * events (its progress, an elicitation/create asking to approve a call, then the answer),
 * written by the run's thread and read by the connection's. When to stream and everything
 * else of a request are http.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http.h"
#include "mcp.h"

/* An SSE stream with nothing to say sends a comment this often: a client that went away is
 * noticed by the failed write (its run is cancelled), and proxies do not time it out. */
#define KEEPALIVE_S 1

/* A tools/call answered as an SSE stream: the run's progress, then its answer. The worker
 * thread queues events; the connection's own thread (one per connection) blocks in
 * sse_read until there is one. Two references: the run's, dropped with its answer, and the
 * response's, dropped when libmicrohttpd is done with it. */
struct sse {
	struct mcp_sink sink;
	struct mcp_server *srv;
	pthread_mutex_t lock;
	pthread_cond_t ready;
	char *pending; /* events not yet written */
	size_t len, off;
	bool answered, closed;
	bool notified;		/* a notification was queued: the stream has begun */
	json_int_t answer_code; /* the answer's error code, 0 for none */
	int refs;
};

#define SSE_PREFIX "event: message\ndata: "
#define SSE_SUFFIX "\n\n"

static void sse_unref(struct sse *s)
{
	pthread_mutex_lock(&s->lock);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&s->lock);
	if (!last)
		return;
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->ready);
	free(s->pending);
	mcp_server_release(s->srv, s->sink.result_bytes);
	free(s);
}

/* Appends an event (text, n bytes, stolen) to what is pending; with nothing pending the text
 * becomes the buffer, so a large answer is never copied. With s->lock held. */
static void sse_queue(struct sse *s, char *text, size_t n)
{
	if (s->off == s->len) {
		free(s->pending);
		s->pending = text;
		s->off = 0;
		s->len = n;
		return;
	}
	char *grown = realloc(s->pending, s->len + n);
	if (grown) {
		s->pending = grown;
		memcpy(s->pending + s->len, text, n);
		s->len += n;
	}
	free(text);
}

static int sse_send(struct mcp_sink *sink, json_t *msg)
{
	struct sse *s = (struct sse *)sink;
	bool answer = !json_object_get(msg, "method");
	json_int_t code = mcp_http_error_code(msg);
	size_t n = 0;
	char *text = mcp_message_text(msg, SSE_PREFIX, SSE_SUFFIX, &n);
	json_decref(msg);
	pthread_mutex_lock(&s->lock);
	if (answer)
		s->answer_code = code;
	if (text && !s->closed)
		sse_queue(s, text, n);
	else
		free(text);
	s->notified |= !answer;
	s->answered |= answer;
	pthread_cond_signal(&s->ready);
	pthread_mutex_unlock(&s->lock);
	if (answer)
		sse_unref(s);
	return 0;
}

static ssize_t sse_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct sse *s = cls;
	pthread_mutex_lock(&s->lock);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += KEEPALIVE_S;
	while (s->off == s->len && !s->answered)
		if (pthread_cond_timedwait(&s->ready, &s->lock, &until) == ETIMEDOUT &&
		    s->off == s->len && !s->answered) {
			pthread_mutex_unlock(&s->lock);
			static const char comment[] = ": keep-alive\n\n";
			size_t take = sizeof(comment) - 1 < max ? sizeof(comment) - 1 : max;
			memcpy(buf, comment, take);
			return (ssize_t)take;
		}
	ssize_t n = MHD_CONTENT_READER_END_OF_STREAM;
	if (s->off < s->len) {
		size_t take = s->len - s->off < max ? s->len - s->off : max;
		memcpy(buf, s->pending + s->off, take);
		s->off += take;
		if (s->off == s->len)
			s->off = s->len = 0;
		n = (ssize_t)take;
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* libmicrohttpd is done with the stream: sent, or the client went away (a failed progress
 * write tells within a second), in which case the run is cancelled. */
static void sse_free(void *cls)
{
	struct sse *s = cls;
	pthread_mutex_lock(&s->lock);
	s->closed = true;
	bool running = !s->answered;
	pthread_mutex_unlock(&s->lock);
	if (running)
		mcp_server_cancel_sink(s->srv, &s->sink);
	sse_unref(s);
}

/* A stream only for a tools/call from a client that accepts one, and only where it carries
 * something: progress, or an elicitation/create asking to approve a call the code makes (asks:
 * the session's client elicits and some tool needs approval). Everything else is one JSON
 * body, of any size: SSE clients cap an event (the official SDKs at 1 MiB), a body they read
 * whole. A stateless client cancels by closing its connection (the revision has no
 * notifications/cancelled over HTTP), which the server notices through http_gone while the
 * run goes on. */
bool mcp_http_wants_stream(struct MHD_Connection *con, const struct mcp_message *msg, bool asks)
{
	const char *accept = MHD_lookup_connection_value(con, MHD_HEADER_KIND, "Accept");
	return accept && strstr(accept, "text/event-stream") &&
	       !strcmp(msg->method, "tools/call") &&
	       (asks || json_object_get(json_object_get(msg->params, "_meta"), "progressToken"));
}

enum MHD_Result mcp_http_stream(struct mcp_server *srv, struct MHD_Connection *con,
				struct mcp_message *msg, uint64_t scope, bool elicits)
{
	struct sse *s = calloc(1, sizeof(*s));
	if (!s) {
		mcp_message_clear(msg);
		return MHD_NO;
	}
	*s = (struct sse){
		.sink = {sse_send, true, scope, NULL, true, true, 0, NULL, MCP_EVENT_MAX, elicits},
		.srv = srv,
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.ready = PTHREAD_COND_INITIALIZER,
		.refs = 2};
	enum mcp_era era = msg->era;
	mcp_server_handle(srv, msg, &s->sink, false);
	mcp_message_clear(msg);
	/* Answered before the stream began (bad params, busy, a quick run): a plain response
	 * with its own status, the event's text without its framing, and its charge. */
	pthread_mutex_lock(&s->lock);
	bool early = s->answered && !s->notified;
	char *text = early ? s->pending : NULL;
	size_t len = early ? s->len : 0, charged = early ? s->sink.result_bytes : 0;
	json_int_t code = s->answer_code;
	if (early) {
		s->pending = NULL;
		s->off = s->len = 0;
		s->sink.result_bytes = 0;
	}
	pthread_mutex_unlock(&s->lock);
	if (early) {
		sse_unref(s);
		size_t frame = strlen(SSE_PREFIX) + strlen(SSE_SUFFIX);
		if (!text || len < frame) {
			free(text);
			mcp_server_release(srv, charged);
			return mcp_http_refuse(con, MHD_HTTP_INTERNAL_SERVER_ERROR,
					       MCP_INTERNAL_ERROR,
					       "Internal error: out of memory for the answer");
		}
		return mcp_http_respond_owned(con, mcp_http_answer_status(code, era), text,
					      strlen(SSE_PREFIX), len - frame, NULL, srv, charged);
	}
	struct MHD_Response *r =
		MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 65536, sse_read, s, sse_free);
	if (!r) {
		sse_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	MHD_add_response_header(r, "Cache-Control", "no-cache");
	MHD_add_response_header(r, "X-Accel-Buffering", "no");
	enum MHD_Result rc = MHD_queue_response(con, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return rc;
}
