/* The HTTP gate's upstream half: the checked request made again by the host with libcurl
 * (certificates verified, connected only to the pinned address, no redirects, proxies,
 * cookies or netrc), the response streamed back to the cell with its hop-by-hop fields
 * dropped and its own framing. The entry's header values go to curl and nowhere else. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_conn.h"
#include "util/util.h"

struct upstream {
	struct sc_http_io *io;
	const struct sc_http_request *req;
	struct sc_http_body *body; /* NULL: no body */
	struct sc_http_upstream_result *res;
	bool tls;		     /* the request goes upstream as https:// */
	char head[SC_HTTP_HEAD_MAX]; /* the response head being built for the cell */
	size_t head_len;
	bool has_length, chunked_out, close_delimited, no_body, failed;
	bool upstream_te; /* the upstream framed with Transfer-Encoding: its length is not ours */
	uint64_t length, body_bytes, seen_bytes, seen_total, seen_us;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int sc__http_upstream_init(struct snapcell_error *err)
{
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc)
		return sc__err(err, -EIO, "libcurl: %s", curl_easy_strerror(curl_init_rc));
	return 0;
}

void sc__http_upstream_close(struct sc_http_io *io)
{
	if (io->curl)
		curl_easy_cleanup(io->curl);
	io->curl = NULL;
}

static void fail(struct upstream *u, const char *why)
{
	if (!u->res->why[0])
		snprintf(u->res->why, sizeof(u->res->why), "%s", why);
	u->failed = true;
}

static bool head_add(struct upstream *u, const char *s, size_t n)
{
	if (n > sizeof(u->head) - u->head_len) {
		fail(u, "response head over 64 KiB");
		return false;
	}
	memcpy(u->head + u->head_len, s, n);
	u->head_len += n;
	return true;
}

/* Status line: a new response (after a 1xx) starts the head again. */
static bool status_line(struct upstream *u, const char *line, size_t n)
{
	char buf[160];
	int status = 0, off = 0;
	snprintf(buf, sizeof(buf), "%.*s", (int)(n < sizeof(buf) - 1 ? n : sizeof(buf) - 1), line);
	if (sscanf(buf, "HTTP/%*[0-9.] %3d%n", &status, &off) < 1 || status < 100 || status > 599) {
		fail(u, "malformed status line from upstream");
		return false;
	}
	const char *reason = buf + off;
	reason += strspn(reason, " ");
	char clean[100];
	size_t j = 0;
	for (size_t i = 0; reason[i] && j < sizeof(clean) - 1; i++)
		if ((unsigned char)reason[i] >= 0x20 && reason[i] != 0x7f)
			clean[j++] = reason[i];
	clean[j] = 0;
	u->res->status = status;
	u->head_len = 0;
	u->has_length = u->upstream_te = false;
	char sl[160];
	int len = snprintf(sl, sizeof(sl), "HTTP/1.1 %d %s\r\n", status, clean);
	return head_add(u, sl, (size_t)len);
}

static bool no_body_status(int s)
{
	return s < 200 || s == 204 || s == 304;
}

/* The blank line: framing for the cell, then the head goes out. */
static bool head_done(struct upstream *u)
{
	int s = u->res->status;
	if (s < 200)
		return true; /* an interim response: curl reads on to the final one */
	u->no_body = no_body_status(s) || !strcmp(u->req->method, "HEAD");
	if (u->upstream_te)
		u->has_length =
			false; /* curl decoded the chunks; a Content-Length beside them lies */
	if (u->has_length && !u->no_body && u->length > u->io->g->o.body_max_bytes) {
		fail(u, "response body over the gate's cap");
		return false;
	}
	char f[64];
	int n = 0;
	if (u->has_length)
		n = snprintf(f, sizeof(f), "Content-Length: %llu\r\n",
			     (unsigned long long)u->length);
	else if (!u->no_body && u->req->minor == 1)
		u->chunked_out = true, n = snprintf(f, sizeof(f), "Transfer-Encoding: chunked\r\n");
	else if (!u->no_body)
		u->close_delimited = true;
	if (!head_add(u, f, (size_t)n))
		return false;
	bool keep = u->req->keep_alive && !u->close_delimited;
	if (!keep && !head_add(u, "Connection: close\r\n", 19))
		return false;
	if (!head_add(u, "\r\n", 2))
		return false;
	if (sc__http_io_write(u->io, u->head, u->head_len)) {
		fail(u, u->io->why ? u->io->why : "write to the cell failed");
		return false;
	}
	u->io->bytes_in += u->head_len;
	u->res->head_sent = true;
	return true;
}

static bool header_line(struct upstream *u, char *line, size_t n)
{
	if (n >= 5 && !strncmp(line, "HTTP/", 5))
		return status_line(u, line, n);
	while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		n--;
	if (!n)
		return head_done(u);
	if (line[0] == ' ' || line[0] == '\t' || memchr(line, 0, n)) {
		fail(u, "malformed header from upstream");
		return false;
	}
	char *colon = memchr(line, ':', n);
	if (!colon || colon == line) {
		fail(u, "malformed header from upstream");
		return false;
	}
	char name[128];
	size_t name_len = (size_t)(colon - line);
	if (name_len >= sizeof(name))
		return head_add(u, line, n) && head_add(u, "\r\n", 2);
	memcpy(name, line, name_len);
	name[name_len] = 0;
	if (!strcasecmp(name, "content-length")) {
		char v[32];
		const char *p = colon + 1;
		size_t vl = n - name_len - 1;
		snprintf(v, sizeof(v), "%.*s", (int)(vl < 31 ? vl : 31), p);
		char *end;
		unsigned long long len = strtoull(v, &end, 10);
		if (end == v || strspn(end, " \t") != strlen(end) ||
		    (u->has_length && len != u->length)) {
			fail(u, "bad Content-Length from upstream");
			return false;
		}
		u->has_length = true;
		u->length = len;
		return true;
	}
	if (!strcasecmp(name, "transfer-encoding"))
		u->upstream_te = true;
	if (sc__http_hop_by_hop(name) && strcasecmp(name, "host"))
		return true;
	return head_add(u, line, n) && head_add(u, "\r\n", 2);
}

static size_t on_header(char *data, size_t size, size_t n, void *ctx)
{
	struct upstream *u = ctx;
	u->seen_bytes += n;
	return header_line(u, data, n * size) ? n * size : 0;
}

static size_t on_body(char *data, size_t size, size_t n, void *ctx)
{
	struct upstream *u = ctx;
	size_t len = size * n;
	u->seen_bytes += len;
	if (!u->res->head_sent || u->no_body)
		return len ? 0 : len;
	u->body_bytes += len;
	if (u->body_bytes > u->io->g->o.body_max_bytes) {
		fail(u, "response body over the gate's cap");
		return 0;
	}
	char frame[32];
	int fl = u->chunked_out ? snprintf(frame, sizeof(frame), "%zx\r\n", len) : 0;
	if ((fl && sc__http_io_write(u->io, frame, (size_t)fl)) ||
	    sc__http_io_write(u->io, data, len) ||
	    (u->chunked_out && sc__http_io_write(u->io, "\r\n", 2))) {
		fail(u, u->io->why ? u->io->why : "write to the cell failed");
		return 0;
	}
	u->io->bytes_in += len + (size_t)fl + (u->chunked_out ? 2 : 0);
	return len;
}

/* Ends the transfer on stop_fd, the gate's end, or idle_timeout_ms without a byte. */
static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct upstream *u = ctx;
	uint64_t now = sc__now_us(), seen = (uint64_t)dn + (uint64_t)un + u->seen_bytes;
	if (seen != u->seen_total || !u->seen_us)
		u->seen_us = now, u->seen_total = seen;
	if (sc__http_io_stopped(u->io)) {
		fail(u, u->io->why);
		return 1;
	}
	if (now - u->seen_us > u->io->g->o.idle_timeout_ms * 1000) {
		fail(u, "upstream idle timeout");
		return 1;
	}
	return 0;
}

/* Whether curl is about to connect to the pinned address: family, port and address (and an
 * IPv6 scope), not padding or flow labels. */
static bool is_pinned(const struct sockaddr *a, socklen_t a_len, const struct sockaddr *pin)
{
	if (a->sa_family != pin->sa_family)
		return false;
	if (a->sa_family == AF_INET && a_len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)pin;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	if (a->sa_family == AF_INET6 && a_len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)pin;
		return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
		       !memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr));
	}
	return false;
}

/* curl resolves nothing (CURLOPT_RESOLVE names the pinned address) and this refuses any
 * other address it might still try. */
static curl_socket_t on_open(void *ctx, curlsocktype purpose, struct curl_sockaddr *a)
{
	const struct sc_http_conn *c = ctx;
	if (purpose != CURLSOCKTYPE_IPCXN || !is_pinned(&a->addr, a->addrlen, c->upstream))
		return CURL_SOCKET_BAD;
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* The pinned address as text, and its port. */
static int pinned_text(const struct sc_http_conn *c, char *out, size_t len)
{
	const struct sockaddr *sa = c->upstream;
	char ip[INET6_ADDRSTRLEN];
	if (sa->sa_family == AF_INET &&
	    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof(ip)))
		return snprintf(out, len, "%s", ip) < (int)len ? 0 : -ENAMETOOLONG;
	if (sa->sa_family == AF_INET6 &&
	    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof(ip)))
		return snprintf(out, len, "[%s]", ip) < (int)len ? 0 : -ENAMETOOLONG;
	return -EAFNOSUPPORT;
}

static int append(struct curl_slist **l, const char *line)
{
	struct curl_slist *nl = curl_slist_append(*l, line);
	if (!nl)
		return -ENOMEM;
	*l = nl;
	return 0;
}

static int add_header(struct curl_slist **l, const char *name, const char *value)
{
	char *line;
	int n = *value ? asprintf(&line, "%s: %s", name, value) : asprintf(&line, "%s;", name);
	if (n < 0)
		return -ENOMEM;
	int rc = append(l, line);
	free(line);
	return rc;
}

static bool entry_sets(const struct sc_net_entry *e, const char *name)
{
	for (size_t i = 0; i < e->n_headers; i++)
		if (!strcasecmp(e->headers[i].name, name))
			return true;
	return false;
}

/* The cell's fields minus hop-by-hop ones (and those its Connection names) and those the
 * entry replaces, then the entry's own; curl's defaults the cell did not ask for are off. */
static int build_headers(const struct sc_http_request *r, const struct sc_net_entry *e,
			 struct curl_slist **out)
{
	const char *conn = sc__http_field(r, "connection");
	int rc = 0;
	for (size_t i = 0; !rc && i < r->n_fields; i++) {
		const char *n = r->fields[i].name;
		if (sc__http_hop_by_hop(n) || entry_sets(e, n))
			continue;
		if (conn && strcasestr(conn, n)) {
			size_t nl = strlen(n);
			const char *p = conn;
			bool named = false;
			while ((p = strcasestr(p, n))) {
				bool start = p == conn || strchr(" \t,", p[-1]);
				bool end = !p[nl] || strchr(" \t,", p[nl]);
				named |= start && end;
				p += nl;
			}
			if (named)
				continue;
		}
		rc = add_header(out, n, r->fields[i].value);
	}
	/* "Name:" tells curl not to add its own. */
	static const char *const curl_defaults[] = {"Accept:", "Content-Type:"};
	for (size_t i = 0; !rc && i < SC_ARRAY_LEN(curl_defaults); i++) {
		char name[16];
		snprintf(name, sizeof(name), "%.*s", (int)strlen(curl_defaults[i]) - 1,
			 curl_defaults[i]);
		if (!sc__http_field(r, name) && !entry_sets(e, name))
			rc = append(out, curl_defaults[i]);
	}
	if (!rc)
		rc = append(out, "Expect:");
	for (size_t i = 0; !rc && i < e->n_headers; i++)
		rc = add_header(out, e->headers[i].name, e->headers[i].value);
	return rc;
}

static size_t on_read(char *buf, size_t size, size_t n, void *ctx)
{
	struct upstream *u = ctx;
	ssize_t got = sc__http_body_read(u->io, u->body, buf, size * n);
	return got < 0 ? CURL_READFUNC_ABORT : (size_t)got;
}

/* A body goes as curl reads it: its length when the cell gave one, else chunked. */
static int set_method(CURL *h, struct upstream *u)
{
	const struct sc_http_request *r = u->req;
	bool has_body = u->body != NULL;
	if (!strcmp(r->method, "HEAD"))
		return curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	if (!strcmp(r->method, "GET") && !has_body)
		return curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	int rc = 0;
	if (has_body) {
		curl_off_t len = r->chunked ? -1 : (curl_off_t)r->content_length;
		/* An upstream that ignores this body (CL.0) would read it as the start of the
		 * next request on the connection, which the next request, its entry's headers
		 * included, would complete: such a connection is never reused. */
		rc |= curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
		rc |= curl_easy_setopt(h, CURLOPT_POST, 1L);
		rc |= curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, len);
		rc |= curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
		rc |= curl_easy_setopt(h, CURLOPT_READDATA, u);
	} else if (!strcmp(r->method, "POST") || !strcmp(r->method, "PUT") ||
		   !strcmp(r->method, "PATCH")) {
		rc |= curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
		rc |= curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
	}
	rc |= curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
	return rc;
}

/* Everything but the request's own parts: where, how verified, how long. */
static int set_transport(CURL *h, struct sc_http_io *io, struct curl_slist *resolve, char *errbuf)
{
	const struct sc_http_gate_options *o = &io->g->o;
	uint64_t now = sc__now_us();
	int rc = 0;
	rc |= curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	rc |= curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	rc |= curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	rc |= curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
	rc |= curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	rc |= curl_easy_setopt(h, CURLOPT_PROXY, "");
	rc |= curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	rc |= curl_easy_setopt(h, CURLOPT_NETRC, (long)CURL_NETRC_IGNORED);
	rc |= curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L);
	rc |= curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	rc |= curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	rc |= curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (o->upstream_ca_file)
		rc |= curl_easy_setopt(h, CURLOPT_CAINFO, o->upstream_ca_file);
	rc |= curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)o->connect_timeout_ms);
	if (io->deadline_us) {
		uint64_t left_ms = io->deadline_us > now ? (io->deadline_us - now) / 1000 : 0;
		rc |= curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(left_ms ? left_ms : 1));
	}
	if (resolve)
		rc |= curl_easy_setopt(h, CURLOPT_RESOLVE, resolve);
	rc |= curl_easy_setopt(h, CURLOPT_OPENSOCKETFUNCTION, on_open);
	rc |= curl_easy_setopt(h, CURLOPT_OPENSOCKETDATA, (void *)io->c);
	return rc;
}

static int set_request(CURL *h, struct upstream *u, struct curl_slist *headers, char **url)
{
	struct sc_http_io *io = u->io;
	const char *host = io->c->host;
	bool v6 = strchr(host, ':') != NULL;
	if (asprintf(url, "%s://%s%s%s:%u%s", u->tls ? "https" : "http", v6 ? "[" : "", host,
		     v6 ? "]" : "", io->c->port, u->req->target) < 0) {
		*url = NULL;
		return -ENOMEM;
	}
	int rc = 0;
	rc |= curl_easy_setopt(h, CURLOPT_URL, *url);
	rc |= curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	rc |= curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	rc |= curl_easy_setopt(h, CURLOPT_HEADERDATA, u);
	rc |= curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	rc |= curl_easy_setopt(h, CURLOPT_WRITEDATA, u);
	rc |= curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	rc |= curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	rc |= curl_easy_setopt(h, CURLOPT_XFERINFODATA, u);
	rc |= set_method(h, u);
	return rc;
}

static struct curl_slist *resolve_list(const struct sc_http_conn *c)
{
	char ip[INET6_ADDRSTRLEN + 2], line[SC_NET_HOST_MAX + INET6_ADDRSTRLEN + 16];
	unsigned char tmp[16];
	if (inet_pton(AF_INET, c->host, tmp) == 1 || inet_pton(AF_INET6, c->host, tmp) == 1)
		return NULL; /* an IP literal: curl resolves nothing, on_open checks it */
	if (pinned_text(c, ip, sizeof(ip)))
		return NULL;
	snprintf(line, sizeof(line), "%s:%u:%s", c->host, c->port, ip);
	return curl_slist_append(NULL, line);
}

void sc__http_upstream(struct sc_http_io *io, const struct sc_http_request *req,
		       const struct sc_net_entry *e, bool tls, struct sc_http_body *body,
		       struct sc_http_upstream_result *res)
{
	char errbuf[CURL_ERROR_SIZE] = "", *url = NULL;
	struct curl_slist *headers = NULL, *resolve = resolve_list(io->c);
	struct upstream *up = calloc(1, sizeof(*up));
	if (!up) {
		snprintf(res->why, sizeof(res->why), "out of memory");
		curl_slist_free_all(resolve);
		return;
	}
	up->io = io, up->req = req, up->res = res, up->body = body, up->tls = tls;
	if (!io->curl)
		io->curl = curl_easy_init();
	CURL *h = io->curl;
	if (!h || build_headers(req, e, &headers)) {
		fail(up, "out of memory");
		goto out;
	}
	curl_easy_reset(h);
	if (set_transport(h, io, resolve, errbuf) || set_request(h, up, headers, &url)) {
		fail(up, "libcurl setup failed");
		goto out;
	}
	CURLcode rc = curl_easy_perform(h);
	if (rc != CURLE_OK) {
		char why[sizeof(res->why)];
		snprintf(why, sizeof(why), "upstream %s%s%s", curl_easy_strerror(rc),
			 errbuf[0] ? ": " : "", errbuf);
		fail(up, why);
	} else if (!res->head_sent) {
		fail(up, "no response from upstream");
	} else if (up->chunked_out && sc__http_io_write(io, "0\r\n\r\n", 5) == 0) {
		io->bytes_in += 5;
	}
	res->reusable = !up->failed && !up->close_delimited;
out:
	if (h)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(headers);
	curl_slist_free_all(resolve);
	free(url);
	free(up);
}
