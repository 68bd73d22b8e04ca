/* The Streamable HTTP transport of the downstream client: one JSON-RPC message POSTed with
 * libcurl, the answer read as application/json or as an SSE stream (each event's data lines
 * are one message; the transfer stops once the response to our id arrived, so a server that
 * keeps the stream open costs nothing). Bodies are capped at MCP_MESSAGE_MAX; no redirects;
 * http and https only; the whole exchange ends at the caller's deadline, or at once when the
 * caller's run is cancelled (its cancel descriptor is polled beside the transfer's sockets). */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../frontend/frontend.h"
#include "downstream.h"
#include "mcp.h"

struct answer {
	struct sc_buf body; /* so far (SSE: the part not yet split into events) */
	size_t scanned;	    /* SSE: body.data[0, scanned) holds no event boundary */
	size_t total;	    /* every body byte received, for the cap */
	bool sse;
	bool too_big;
	const json_t *want;
	json_t *response; /* the message answering want, once found */
	char *session;
	char *content_type;
};

int mcp_downstream_http_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -1;
}

/* A header's value with surrounding whitespace dropped, or NULL when line is not name's. */
static char *header_value(const char *line, size_t len, const char *name)
{
	size_t n = strlen(name);
	if (len <= n || strncasecmp(line, name, n) || line[n] != ':')
		return NULL;
	const char *v = line + n + 1, *end = line + len;
	while (v < end && (*v == ' ' || *v == '\t'))
		v++;
	while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
		end--;
	return strndup(v, (size_t)(end - v));
}

static size_t on_header(char *line, size_t one, size_t n, void *user)
{
	struct answer *a = user;
	char *v;
	if ((v = header_value(line, n, "mcp-session-id"))) {
		free(a->session);
		a->session = v;
	} else if ((v = header_value(line, n, "content-type"))) {
		free(a->content_type);
		a->content_type = v;
		a->sse = !strncasecmp(v, "text/event-stream", 17);
	}
	return n;
}

/* One SSE event (its lines, without the blank line ending it): its data lines joined by
 * "\n" are a JSON-RPC message; the one answering want is kept. */
static void sse_event(struct answer *a, char *event, size_t len)
{
	char *data = malloc(len + 1);
	size_t d = 0;
	if (!data)
		return;
	for (char *line = event, *end = event + len; line < end;) {
		char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t n = nl ? (size_t)(nl - line) : (size_t)(end - line);
		size_t l = n && line[n - 1] == '\r' ? n - 1 : n;
		if (l >= 5 && !strncmp(line, "data:", 5)) {
			size_t skip = l > 5 && line[5] == ' ' ? 6 : 5;
			if (d)
				data[d++] = '\n';
			memcpy(data + d, line + skip, l - skip);
			d += l - skip;
		}
		line += n + 1;
	}
	json_t *msg = d ? mcp_downstream_parse(data, d) : NULL;
	free(data);
	if (msg && !json_object_get(msg, "method") &&
	    json_equal(json_object_get(msg, "id"), a->want) && !a->response)
		a->response = msg;
	else
		json_decref(msg);
}

/* Splits the buffered stream into events at blank lines. */
static void sse_feed(struct answer *a)
{
	size_t start = 0;
	/* Resume where the last call stopped (a boundary may straddle chunks: back up 3). */
	for (size_t i = a->scanned > 3 ? a->scanned - 3 : 0; i + 1 < a->body.len && !a->response;
	     i++) {
		size_t end = 0;
		if (a->body.data[i] == '\n' && a->body.data[i + 1] == '\n')
			end = 2;
		else if (i + 3 < a->body.len && !memcmp(a->body.data + i, "\r\n\r\n", 4))
			end = 4;
		if (end) {
			sse_event(a, a->body.data + start, i + 1 - start);
			start = i + end;
			i = start - 1;
		}
	}
	if (start) {
		memmove(a->body.data, a->body.data + start, a->body.len - start);
		sc__buf_truncate(&a->body, a->body.len - start);
	}
	a->scanned = a->body.len;
}

static size_t on_body(char *data, size_t one, size_t n, void *user)
{
	struct answer *a = user;
	a->total += n;
	if (a->total > MCP_MESSAGE_MAX) {
		a->too_big = true;
		return 0; /* stops the transfer */
	}
	if (sc__buf_add(&a->body, data, n) < 0)
		return 0;
	if (a->sse && a->want) {
		sse_feed(a);
		if (a->response)
			return 0; /* the answer is here: no need to wait for the stream's end */
	}
	return n;
}

static struct curl_slist *request_headers(const struct mcp_http_post *post)
{
	struct curl_slist *h = NULL, *next;
	char line[512];
	const char *fixed[] = {"Content-Type: application/json",
			       "Accept: application/json, text/event-stream", "Expect:"};
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if ((next = curl_slist_append(h, fixed[i])))
			h = next;
	if (post->session) {
		snprintf(line, sizeof(line), "Mcp-Session-Id: %s", post->session);
		if ((next = curl_slist_append(h, line)))
			h = next;
	}
	if (post->protocol_version) {
		snprintf(line, sizeof(line), "MCP-Protocol-Version: %s", post->protocol_version);
		if ((next = curl_slist_append(h, line)))
			h = next;
	}
	for (size_t i = 0; post->headers && post->headers[i]; i++)
		if ((next = curl_slist_append(h, post->headers[i])))
			h = next;
	return h;
}

void mcp_downstream_http_end(const struct mcp_http_post *post)
{
	CURL *curl = curl_easy_init();
	struct curl_slist *headers = request_headers(post);
	if (curl && headers) {
		curl_easy_setopt(curl, CURLOPT_URL, post->url);
		curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
		curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "DELETE");
		curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
		curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 1000L);
		curl_easy_perform(curl);
	}
	curl_slist_free_all(headers);
	curl_easy_cleanup(curl);
}

/* curl_easy_perform, except that the transfer stops once cancel_fd (-1: none) becomes
 * readable: CURLE_ABORTED_BY_CALLBACK then. A multi handle of its own, for curl_multi_poll's
 * extra descriptor; the connection is not reused after an abort. */
static CURLcode perform(CURL *curl, int cancel_fd)
{
	if (cancel_fd < 0)
		return curl_easy_perform(curl);
	CURLM *multi = curl_multi_init();
	if (!multi || curl_multi_add_handle(multi, curl) != CURLM_OK) {
		curl_multi_cleanup(multi);
		return CURLE_OUT_OF_MEMORY;
	}
	CURLcode cc = CURLE_ABORTED_BY_CALLBACK;
	for (;;) {
		int running = 0, queued;
		if (curl_multi_perform(multi, &running) != CURLM_OK) {
			cc = CURLE_RECV_ERROR;
			break;
		}
		if (!running) {
			CURLMsg *m;
			while ((m = curl_multi_info_read(multi, &queued)))
				if (m->msg == CURLMSG_DONE)
					cc = m->data.result;
			break;
		}
		struct curl_waitfd cancel = {cancel_fd, CURL_WAIT_POLLIN, 0};
		if (curl_multi_poll(multi, &cancel, 1, 1000, NULL) != CURLM_OK) {
			cc = CURLE_RECV_ERROR;
			break;
		}
		if (cancel.revents & CURL_WAIT_POLLIN)
			break;
	}
	curl_multi_remove_handle(multi, curl);
	curl_multi_cleanup(multi);
	return cc;
}

int mcp_downstream_http_post(const struct mcp_http_post *post, const json_t *msg,
			     const json_t *want_id, json_t **response, char **new_session,
			     long *status, char *why, size_t size)
{
	*status = 0;
	*new_session = NULL;
	if (response)
		*response = NULL;
	uint64_t now = fe_now_us();
	if (now >= post->deadline_us)
		return mcp_say(why, size, "no time left before the deadline");
	char *body = json_dumps(msg, JSON_COMPACT);
	CURL *curl = curl_easy_init();
	struct curl_slist *headers = request_headers(post);
	if (!body || !curl || !headers) {
		free(body);
		curl_easy_cleanup(curl);
		curl_slist_free_all(headers);
		return mcp_say(why, size, "out of memory");
	}
	struct answer a = {.body = SC_BUF_INIT(MCP_MESSAGE_MAX), .want = want_id};
	curl_easy_setopt(curl, CURLOPT_URL, post->url);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)((post->deadline_us - now + 999) / 1000));
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, &a);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &a);
	CURLcode cc = perform(curl, post->cancel_fd);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, status);
	int rc = 0;
	if (a.too_big) {
		rc = mcp_say(why, size, "the answer is longer than 16 MiB");
	} else if (cc != CURLE_OK && !(cc == CURLE_WRITE_ERROR && a.response)) {
		if (cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_ABORTED_BY_CALLBACK)
			*status = 0;
		rc = cc == CURLE_ABORTED_BY_CALLBACK
			     ? mcp_say(why, size, "the run was cancelled")
			     : mcp_say(why, size, "%s", curl_easy_strerror(cc));
	} else if (*status < 200 || *status > 299) {
		rc = mcp_say(why, size, "HTTP status %ld", *status);
	} else if (want_id && !a.sse) {
		json_t *m = a.body.len ? mcp_downstream_parse(a.body.data, a.body.len) : NULL;
		if (json_is_object(m) && json_equal(json_object_get(m, "id"), want_id))
			a.response = m;
		else
			json_decref(m);
		if (!a.response)
			rc = mcp_say(why, size, "the answer (%s) is not the JSON-RPC response",
				     a.content_type ? a.content_type : "no Content-Type");
	} else if (want_id && !a.response) {
		sse_feed(&a);
		if (a.body.len)
			sse_event(&a, a.body.data,
				  a.body.len); /* a last event without its blank line */
		if (!a.response)
			rc = mcp_say(why, size, "the event stream ended without the response");
	}
	if (rc == 0 && response)
		*response = a.response;
	else
		json_decref(a.response);
	if (rc == 0) {
		*new_session = a.session;
		a.session = NULL;
	}
	free(a.session);
	free(a.content_type);
	sc__buf_free(&a.body);
	free(body);
	curl_slist_free_all(headers);
	curl_easy_cleanup(curl);
	return rc;
}
