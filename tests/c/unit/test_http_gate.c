/* The HTTP gate (src/net/http*.c) without a sandbox: a socketpair is the cell's connection,
 * sc__http_serve runs on a thread, the test speaks for the cell (plain HTTP or TLS trusting
 * the gate's CA) and runs the upstream itself on 127.0.0.1 (plain or TLS with a test CA). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "net/http.h"
#include "net/http_ca.h"
#include "net/http_parse.h"
#include "util/util.h"

#define HOST "api.example.test"

/* ---- The upstream: one thread, one connection at a time, keep-alive. ---- */

struct upstream {
	int lfd;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	uint16_t port;
	gnutls_certificate_credentials_t cred; /* NULL: plain HTTP */
	pthread_t thread;
	pthread_mutex_t lock;
	int n_requests;
	char seen[65536]; /* every request head and body, concatenated */
	size_t seen_len;
	volatile bool stop;
};

struct up_io {
	int fd;
	gnutls_session_t s;
};

static ssize_t up_read(struct up_io *c, char *b, size_t n)
{
	if (c->s) {
		ssize_t r;
		do
			r = gnutls_record_recv(c->s, b, n);
		while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
		return r < 0 ? -1 : r;
	}
	return read(c->fd, b, n);
}

static void up_write(struct up_io *c, const char *b, size_t n)
{
	if (c->s)
		gnutls_record_send(c->s, b, n);
	else if (write(c->fd, b, n) < 0)
		return;
}

static void up_answer(struct upstream *u, struct up_io *c, const char *method, const char *path)
{
	char resp[20000];
	int n;
	if (!strcmp(path, "/v1/redirect")) {
		n = snprintf(resp, sizeof(resp),
			     "HTTP/1.1 302 Found\r\nLocation: https://other.example.test/x\r\n"
			     "Content-Length: 0\r\n\r\n");
	} else if (!strcmp(path, "/v1/chunky")) {
		n = snprintf(resp, sizeof(resp),
			     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
			     "5\r\nhello\r\n6\r\n chunk\r\n0\r\n\r\n");
	} else if (!strcmp(path, "/v1/hang")) {
		for (int i = 0; i < 100 && !u->stop; i++)
			usleep(50000);
		return;
	} else if (!strcmp(path, "/v1/tecl")) {
		n = snprintf(resp, sizeof(resp),
			     "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n"
			     "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
	} else if (!strcmp(path, "/v1/big")) {
		n = snprintf(resp, sizeof(resp),
			     "HTTP/1.1 200 OK\r\nContent-Length: 10000\r\n\r\n");
		memset(resp + n, 'x', 10000);
		n += 10000;
	} else {
		char body[512];
		int bl = snprintf(body, sizeof(body), "hello %s %s", method, path);
		n = snprintf(resp, sizeof(resp),
			     "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Up: 1\r\n"
			     "Content-Length: %d\r\n\r\n%s",
			     bl, body);
	}
	up_write(c, resp, (size_t)n);
}

static void up_serve(struct upstream *u, struct up_io *c)
{
	char buf[65536];
	size_t len = 0;
	for (;;) {
		char *end;
		while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
			ssize_t r = up_read(c, buf + len, sizeof(buf) - len - 1);
			if (r <= 0)
				return;
			len += (size_t)r;
		}
		size_t head = (size_t)(end - buf) + 4, body = 0;
		buf[len] = 0;
		char *cl = strcasestr(buf, "\r\ncontent-length:");
		bool chunked = strcasestr(buf, "\r\ntransfer-encoding: chunked") != NULL;
		if (cl && cl < end)
			body = strtoul(cl + 17, NULL, 10);
		char decoded[16384];
		uint64_t dlen = 0;
		if (chunked) {
			/* The gate's own decoder: the request as curl framed it. */
			struct sc_http_chunked st = {0};
			size_t at = head;
			while (!st.done) {
				size_t used;
				if (sc__http_chunked_feed(&st, buf + at, len - at, &used, decoded,
							  &dlen, sizeof(decoded)))
					return;
				at += used;
				if (st.done)
					break;
				ssize_t r = up_read(c, buf + len, sizeof(buf) - len - 1);
				if (r <= 0)
					return;
				len += (size_t)r;
			}
			body = at - head;
		}
		while (len < head + body) {
			ssize_t r = up_read(c, buf + len, sizeof(buf) - len - 1);
			if (r <= 0)
				return;
			len += (size_t)r;
		}
		if (!chunked) {
			memcpy(decoded, buf + head,
			       body < sizeof(decoded) ? body : sizeof(decoded));
			dlen = body < sizeof(decoded) ? body : sizeof(decoded);
		}
		char method[32] = "", path[1024] = "";
		sscanf(buf, "%31s %1023s", method, path);
		pthread_mutex_lock(&u->lock);
		u->n_requests++;
		size_t room = sizeof(u->seen) - u->seen_len - 1;
		size_t take = head < room ? head : room;
		memcpy(u->seen + u->seen_len, buf, take);
		u->seen_len += take;
		room -= take;
		take = dlen < room ? (size_t)dlen : room;
		memcpy(u->seen + u->seen_len, decoded, take);
		u->seen_len += take;
		u->seen[u->seen_len] = 0;
		pthread_mutex_unlock(&u->lock);
		up_answer(u, c, method, path);
		memmove(buf, buf + head + body, len - head - body);
		len -= head + body;
	}
}

static void *up_main(void *arg)
{
	struct upstream *u = arg;
	while (!u->stop) {
		struct pollfd p = {u->lfd, POLLIN, 0};
		if (poll(&p, 1, 50) <= 0)
			continue;
		struct up_io c = {accept4(u->lfd, NULL, NULL, SOCK_CLOEXEC), NULL};
		if (c.fd < 0)
			continue;
		if (u->cred) {
			gnutls_init(&c.s, GNUTLS_SERVER);
			gnutls_set_default_priority(c.s);
			gnutls_credentials_set(c.s, GNUTLS_CRD_CERTIFICATE, u->cred);
			gnutls_transport_set_int(c.s, c.fd);
			gnutls_handshake_set_timeout(c.s, 5000);
			int rc;
			do
				rc = gnutls_handshake(c.s);
			while (rc < 0 && !gnutls_error_is_fatal(rc));
			if (rc >= 0)
				up_serve(u, &c);
			gnutls_deinit(c.s);
		} else {
			up_serve(u, &c);
		}
		close(c.fd);
	}
	return NULL;
}

static struct sc_http_ca *up_ca;
static struct sc_http_leaf *up_leaf;
static char up_ca_file[64];

static void upstream_start_family(struct upstream *u, bool tls, int family)
{
	memset(u, 0, sizeof(*u));
	pthread_mutex_init(&u->lock, NULL);
	u->lfd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&u->addr;
		a->sin6_family = AF_INET6;
		a->sin6_addr = in6addr_loopback;
		u->addr_len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&u->addr;
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		u->addr_len = sizeof(*a);
	}
	cr_assert_eq(bind(u->lfd, (struct sockaddr *)&u->addr, u->addr_len), 0);
	cr_assert_eq(listen(u->lfd, 8), 0);
	socklen_t l = u->addr_len;
	getsockname(u->lfd, (struct sockaddr *)&u->addr, &l);
	u->port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&u->addr)->sin6_port
					   : ((struct sockaddr_in *)&u->addr)->sin_port);
	if (tls) {
		struct snapcell_error err = {0};
		cr_assert_eq(sc__http_ca_new("test upstream CA", &up_ca, &err), 0, "%s",
			     err.message);
		cr_assert_eq(sc__http_ca_leaf(up_ca, HOST, &up_leaf, &err), 0, "%s", err.message);
		u->cred = sc__http_leaf_cred(up_leaf);
		snprintf(up_ca_file, sizeof(up_ca_file), "/tmp/sc-http-ca-XXXXXX");
		int fd = mkstemp(up_ca_file);
		const char *pem = sc__http_ca_pem(up_ca);
		cr_assert(fd >= 0 && write(fd, pem, strlen(pem)) == (ssize_t)strlen(pem));
		close(fd);
	}
	pthread_create(&u->thread, NULL, up_main, u);
}

static void upstream_start(struct upstream *u, bool tls)
{
	upstream_start_family(u, tls, AF_INET);
}

static void upstream_stop(struct upstream *u)
{
	u->stop = true;
	pthread_join(u->thread, NULL);
	close(u->lfd);
	if (up_ca_file[0])
		unlink(up_ca_file);
}

static int up_count(struct upstream *u)
{
	pthread_mutex_lock(&u->lock);
	int n = u->n_requests;
	pthread_mutex_unlock(&u->lock);
	return n;
}

/* ---- The gate on a thread, and its audit. ---- */

struct rec {
	char method[32], path[256], rule[512];
	int status;
	bool allowed, header_added, upstream_tls;
	uint64_t bytes_out, bytes_in;
};

struct served {
	struct sc_http_gate *g;
	struct sc_http_conn c;
	pthread_t thread;
	int rc;
	int cell_fd;
	int stop[2];
	pthread_mutex_t lock;
	struct rec recs[16];
	size_t n_recs;
};

static void on_audit(void *ctx, const struct sc_http_record *r)
{
	struct served *s = ctx;
	pthread_mutex_lock(&s->lock);
	if (s->n_recs < 16) {
		struct rec *d = &s->recs[s->n_recs++];
		snprintf(d->method, sizeof(d->method), "%s", r->method);
		snprintf(d->path, sizeof(d->path), "%s", r->path);
		snprintf(d->rule, sizeof(d->rule), "%s", r->rule);
		d->status = r->status, d->allowed = r->allowed, d->header_added = r->header_added;
		d->upstream_tls = r->upstream_tls;
		d->bytes_out = r->bytes_out, d->bytes_in = r->bytes_in;
	}
	pthread_mutex_unlock(&s->lock);
}

static void *serve_main(void *arg)
{
	struct served *s = arg;
	s->rc = sc__http_serve(s->g, &s->c);
	return NULL;
}

static char *get_methods[] = {"GET"};
static char *post_methods[] = {"POST"};
static struct sc_net_header auth_header[] = {{"Authorization", "Bearer sekrit"}};
static struct sc_net_entry e_get = {.target = "https://" HOST "/v1",
				    .kind = SC_NET_NAME,
				    .host = HOST,
				    .path = "/v1",
				    .methods = get_methods,
				    .n_methods = 1};
static struct sc_net_entry e_post = {.target = "https://" HOST "/upload",
				     .kind = SC_NET_NAME,
				     .host = HOST,
				     .path = "/upload",
				     .methods = post_methods,
				     .n_methods = 1};
static struct sc_net_entry e_auth = {.target = "https://" HOST "/auth",
				     .kind = SC_NET_NAME,
				     .host = HOST,
				     .path = "/auth",
				     .headers = auth_header,
				     .n_headers = 1};
static struct sc_net_entry e_open = {
	.target = HOST "/open", .kind = SC_NET_NAME, .host = HOST, .path = "/open"};
static struct sc_net_entry e_secure = {.target = "https://" HOST "/secure",
				       .kind = SC_NET_NAME,
				       .scheme = SC_NET_SCHEME_HTTPS,
				       .host = HOST,
				       .path = "/secure"};
static const struct sc_net_entry *all_entries[] = {&e_get, &e_post, &e_auth, &e_open, &e_secure};

struct opts {
	bool trust_upstream;
	uint64_t idle_ms;
	uint64_t deadline_ms;
	uint64_t body_max;
};

static void serve_start(struct served *s, struct upstream *u, struct opts o)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	struct sc_http_gate_options go = {.upstream_ca_file = o.trust_upstream ? up_ca_file : NULL,
					  .connect_timeout_ms = 2000,
					  .idle_timeout_ms = o.idle_ms ? o.idle_ms : 5000,
					  .body_max_bytes = o.body_max ? o.body_max : 1 << 20};
	struct snapcell_error err = {0};
	cr_assert_eq(sc__http_gate_new(&go, &s->g, &err), 0, "%s", err.message);
	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(pipe2(s->stop, O_CLOEXEC), 0);
	s->cell_fd = sv[0];
	s->c = (struct sc_http_conn){.fd = sv[1],
				     .host = HOST,
				     .port = u->port,
				     .upstream = (struct sockaddr *)&u->addr,
				     .upstream_len = u->addr_len,
				     .entries = all_entries,
				     .n_entries = SC_ARRAY_LEN(all_entries),
				     .deadline_us =
					     o.deadline_ms ? sc__deadline_ms(o.deadline_ms) : 0,
				     .stop_fd = s->stop[0],
				     .audit = on_audit,
				     .audit_ctx = s};
	pthread_create(&s->thread, NULL, serve_main, s);
}

/* Joins the serve thread (the cell's end already closed, or about to end by itself). */
static void serve_join(struct served *s)
{
	pthread_join(s->thread, NULL);
	sc__http_gate_free(s->g);
	close(s->stop[0]);
	close(s->stop[1]);
}

/* ---- The cell's side. ---- */

struct cell {
	int fd;
	gnutls_session_t s;
	gnutls_certificate_credentials_t cred;
};

static void cell_plain(struct cell *c, struct served *s)
{
	memset(c, 0, sizeof(*c));
	c->fd = s->cell_fd;
}

/* 0 or the gnutls error of the handshake. */
static int cell_tls(struct cell *c, struct served *s, const char *sni)
{
	memset(c, 0, sizeof(*c));
	c->fd = s->cell_fd;
	const char *pem = sc__http_gate_ca_pem(s->g);
	gnutls_datum_t ca = {(unsigned char *)pem, (unsigned)strlen(pem)};
	gnutls_certificate_allocate_credentials(&c->cred);
	cr_assert_eq(gnutls_certificate_set_x509_trust_mem(c->cred, &ca, GNUTLS_X509_FMT_PEM), 1);
	gnutls_init(&c->s, GNUTLS_CLIENT);
	gnutls_set_default_priority(c->s);
	gnutls_credentials_set(c->s, GNUTLS_CRD_CERTIFICATE, c->cred);
	gnutls_server_name_set(c->s, GNUTLS_NAME_DNS, sni, strlen(sni));
	gnutls_session_set_verify_cert(c->s, HOST, 0);
	gnutls_transport_set_int(c->s, c->fd);
	gnutls_handshake_set_timeout(c->s, 5000);
	int rc;
	do
		rc = gnutls_handshake(c->s);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	return rc < 0 ? rc : 0;
}

static void cell_close(struct cell *c)
{
	if (c->s)
		gnutls_deinit(c->s);
	if (c->cred)
		gnutls_certificate_free_credentials(c->cred);
	close(c->fd);
}

static void cell_send(struct cell *c, const char *req)
{
	size_t n = strlen(req);
	if (c->s)
		cr_assert_eq(gnutls_record_send(c->s, req, n), (ssize_t)n);
	else
		cr_assert_eq(write(c->fd, req, n), (ssize_t)n);
}

static ssize_t cell_read(struct cell *c, char *b, size_t n)
{
	struct pollfd p = {c->fd, POLLIN, 0};
	if (!(c->s && gnutls_record_check_pending(c->s)) && poll(&p, 1, 10000) <= 0)
		return -1;
	if (!c->s)
		return read(c->fd, b, n);
	ssize_t r;
	do
		r = gnutls_record_recv(c->s, b, n);
	while (r == GNUTLS_E_AGAIN || r == GNUTLS_E_INTERRUPTED);
	return r < 0 ? (r == GNUTLS_E_PREMATURE_TERMINATION ? 0 : -1) : r;
}

struct resp {
	int status;
	char head[8192];
	char body[32768];
	size_t body_len, total;
};

/* Reads one response (Content-Length or chunked framing); status -1 if the gate closed. */
static void cell_recv(struct cell *c, struct resp *r)
{
	static char buf[65536];
	size_t len = 0;
	char *end;
	memset(r, 0, sizeof(*r));
	r->status = -1;
	while (!(end = memmem(buf, len, "\r\n\r\n", 4))) {
		ssize_t n = cell_read(c, buf + len, sizeof(buf) - len - 1);
		if (n <= 0)
			return;
		len += (size_t)n;
	}
	size_t head = (size_t)(end - buf) + 4;
	memcpy(r->head, buf, head < sizeof(r->head) - 1 ? head : sizeof(r->head) - 1);
	sscanf(buf, "HTTP/1.1 %d", &r->status);
	char *cl = strcasestr(r->head, "\r\ncontent-length:");
	bool chunked = strcasestr(r->head, "\r\ntransfer-encoding: chunked") != NULL;
	size_t want = cl ? strtoul(cl + 17, NULL, 10) : 0;
	for (;;) {
		if (!chunked && len - head >= want)
			break;
		if (chunked && memmem(buf + head, len - head, "\r\n0\r\n\r\n", 7))
			break;
		if (chunked && len - head >= 5 && !memcmp(buf + head, "0\r\n\r\n", 5))
			break;
		ssize_t n = cell_read(c, buf + len, sizeof(buf) - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	r->total = len;
	if (!chunked) {
		r->body_len = len - head < sizeof(r->body) - 1 ? len - head : sizeof(r->body) - 1;
		memcpy(r->body, buf + head, r->body_len);
		return;
	}
	for (size_t p = head; p < len;) {
		size_t sz = strtoul(buf + p, &end, 16);
		p = (size_t)(end - buf) + 2;
		if (!sz)
			break;
		memcpy(r->body + r->body_len, buf + p, sz);
		r->body_len += sz;
		p += sz + 2;
	}
}

static char host_hdr[64];

static const char *hh(struct upstream *u)
{
	snprintf(host_hdr, sizeof(host_hdr), "%s:%u", HOST, u->port);
	return host_hdr;
}

/* One request and its response on a fresh plain connection; the connection is then closed
 * and the gate joined. */
static void plain_exchange(struct upstream *u, const char *req, struct resp *r, struct served *s)
{
	struct cell c;
	serve_start(s, u, (struct opts){0});
	cell_plain(&c, s);
	cell_send(&c, req);
	cell_recv(&c, r);
	cell_close(&c);
	serve_join(s);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
	static char bufs[4][8192];
	static int i;
	char *b = bufs[i++ % 4];
	va_list ap;
	va_start(ap, f);
	vsnprintf(b, sizeof(bufs[0]), f, ap);
	va_end(ap);
	return b;
}

/* ---- Tests. ---- */

Test(http_gate, allowed_get_passes_the_upstream_status_and_body)
{
	struct upstream u;
	struct served s;
	struct resp r;
	upstream_start(&u, false);
	plain_exchange(&u, fmt("GET /v1/items?q=1 HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)), &r, &s);
	cr_expect_eq(r.status, 200, "%s", r.head);
	cr_expect_str_eq(r.body, "hello GET /v1/items?q=1");
	cr_expect(strstr(r.head, "X-Up: 1"));
	cr_assert_eq(s.n_recs, 1);
	cr_expect(s.recs[0].allowed);
	cr_expect_eq(s.recs[0].status, 200);
	cr_expect_str_eq(s.recs[0].method, "GET");
	cr_expect_str_eq(s.recs[0].path, "/v1/items");
	cr_expect_str_eq(s.recs[0].rule, e_get.target);
	cr_expect_eq(s.rc, 0);
	upstream_stop(&u);
}

Test(http_gate, https_with_a_method_rule)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r;
	upstream_start(&u, true);
	serve_start(&s, &u, (struct opts){.trust_upstream = true});
	cr_assert_eq(cell_tls(&c, &s, HOST), 0, "the cell's TLS to the gate");
	cell_send(&c, fmt("GET /v1/a HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 200, "%s%s", r.head, r.body);
	cr_expect_str_eq(r.body, "hello GET /v1/a");
	cell_send(&c, fmt("DELETE /v1/a HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 403);
	cr_expect(strstr(r.body, "DELETE"), "%s", r.body);
	cell_close(&c);
	serve_join(&s);
	cr_expect_eq(up_count(&u), 1);
	cr_assert_eq(s.n_recs, 2);
	cr_expect(s.recs[0].allowed && !s.recs[1].allowed);
	upstream_stop(&u);
}

Test(http_gate, upstream_with_an_untrusted_certificate_is_refused)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r;
	upstream_start(&u, true);
	serve_start(&s, &u, (struct opts){.trust_upstream = false});
	cr_assert_eq(cell_tls(&c, &s, HOST), 0);
	cell_send(&c, fmt("GET /v1/a HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 502, "%s", r.head);
	cr_expect(strstr(r.body, "upstream"), "%s", r.body);
	cell_close(&c);
	serve_join(&s);
	cr_expect_eq(up_count(&u), 0);
	cr_assert_eq(s.n_recs, 1);
	cr_expect_eq(s.recs[0].status, 0);
	cr_expect(strstr(s.recs[0].rule, "upstream"), "%s", s.recs[0].rule);
	upstream_stop(&u);
}

Test(http_gate, post_to_a_get_only_entry_is_refused_and_the_connection_stays_usable)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){0});
	cell_plain(&c, &s);
	cell_send(&c,
		  fmt("POST /v1/a HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\n\r\nhello", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 403);
	cr_expect(strstr(r.body, "POST is not allowed"), "%s", r.body);
	cell_send(&c, fmt("GET /v1/a HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 200);
	cell_close(&c);
	serve_join(&s);
	cr_expect_eq(up_count(&u), 1);
	cr_expect(!strstr(u.seen, "POST"));
	cr_assert_eq(s.n_recs, 2);
	cr_expect(!s.recs[0].allowed);
	cr_expect(strstr(s.recs[0].rule, "POST"));
	upstream_stop(&u);
}

Test(http_gate, paths_outside_the_prefix_are_refused)
{
	struct upstream u;
	struct served s;
	struct resp r;
	upstream_start(&u, false);
	const char *paths[] = {"/v10",	      "/admin", "/",	 "/v1/../admin", "/v1/%2e%2e/admin",
			       "/v1%2fadmin", "/v1/.",	"/v1\\x"};
	for (size_t i = 0; i < SC_ARRAY_LEN(paths); i++) {
		plain_exchange(&u, fmt("GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", paths[i], hh(&u)), &r,
			       &s);
		cr_expect(r.status == 403 || r.status == 400, "%s: %d", paths[i], r.status);
		cr_expect(s.n_recs == 1 && !s.recs[0].allowed, "%s", paths[i]);
	}
	cr_expect_eq(up_count(&u), 0);
	upstream_stop(&u);
}

Test(http_gate, a_host_header_naming_another_host_is_refused)
{
	struct upstream u;
	struct served s;
	struct resp r;
	upstream_start(&u, false);
	const char *hosts[] = {"evil.example.test", HOST, "api.example.test:1", ""};
	for (size_t i = 0; i < SC_ARRAY_LEN(hosts); i++) {
		plain_exchange(&u, fmt("GET /v1 HTTP/1.1\r\nHost: %s\r\n\r\n", hosts[i]), &r, &s);
		cr_expect_eq(r.status, 403, "Host %s: %d", hosts[i], r.status);
		cr_expect(strstr(r.body, "Host"), "%s", r.body);
	}
	plain_exchange(&u, "GET /v1 HTTP/1.1\r\n\r\n", &r, &s);
	cr_expect_eq(r.status, 400);
	cr_expect_eq(up_count(&u), 0);
	upstream_stop(&u);
}

Test(http_gate, a_tls_server_name_other_than_the_host_is_refused)
{
	struct upstream u;
	struct served s;
	struct cell c;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){0});
	cr_expect_neq(cell_tls(&c, &s, "evil.example.test"), 0);
	cell_close(&c);
	serve_join(&s);
	cr_expect_lt(s.rc, 0);
	cr_assert_eq(s.n_recs, 1);
	cr_expect(strstr(s.recs[0].rule, "server name"), "%s", s.recs[0].rule);
	upstream_stop(&u);
}

Test(http_gate, the_entry_header_reaches_the_upstream_and_replaces_the_cells)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r;
	upstream_start(&u, true);
	serve_start(&s, &u, (struct opts){.trust_upstream = true});
	cr_assert_eq(cell_tls(&c, &s, HOST), 0);
	cell_send(&c, fmt("GET /auth/me HTTP/1.1\r\nHost: %s\r\nauthorization: Bearer mine\r\n"
			  "Connection: keep-alive, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\n"
			  "X-Keep: yes\r\n\r\n",
			  hh(&u)));
	cell_recv(&c, &r);
	cell_close(&c);
	serve_join(&s);
	cr_expect_eq(r.status, 200, "%s%s", r.head, r.body);
	cr_expect(strstr(u.seen, "Authorization: Bearer sekrit\r\n"), "%s", u.seen);
	cr_expect(!strstr(u.seen, "mine"), "%s", u.seen);
	cr_expect(!strcasestr(u.seen, "x-hop"), "%s", u.seen);
	cr_expect(!strcasestr(u.seen, "keep-alive: 5"), "%s", u.seen);
	cr_expect(strstr(u.seen, "X-Keep: yes"), "%s", u.seen);
	cr_assert_eq(s.n_recs, 1);
	cr_expect(s.recs[0].header_added);
	cr_expect(s.recs[0].upstream_tls);
	cr_expect(!strstr(s.recs[0].rule, "sekrit"));
	upstream_stop(&u);
}

/* The upstream's scheme followed the cell's, so plain HTTP to port 443
 * of an https:// entry (or to any entry with headers) had the host send the credential in
 * cleartext. Now such a request is refused with the rule, and nothing goes upstream. */
Test(http_gate, credentials_never_go_upstream_in_cleartext)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){0});
	cell_plain(&c, &s);
	cell_send(&c, fmt("GET /auth/me HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 403, "%s%s", r.head, r.body);
	cr_expect(strstr(r.body, "over TLS only") && strstr(r.body, e_auth.target), "%s", r.body);
	cell_send(&c, fmt("GET /secure/x HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 403, "%s%s", r.head, r.body);
	cr_expect(strstr(r.body, "allowed as https://") && strstr(r.body, e_secure.target), "%s",
		  r.body);
	/* An entry without headers or a scheme still follows the cell: plain, recorded so. */
	cell_send(&c, fmt("GET /open/x HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 200, "%s%s", r.head, r.body);
	cell_close(&c);
	serve_join(&s);
	cr_expect_eq(up_count(&u), 1);
	cr_expect(!strstr(u.seen, "sekrit"), "%s", u.seen);
	cr_assert_eq(s.n_recs, 3);
	cr_expect(!s.recs[0].allowed && !s.recs[0].header_added && !s.recs[0].upstream_tls);
	cr_expect(!s.recs[1].allowed && !s.recs[1].upstream_tls);
	cr_expect(s.recs[2].allowed && !s.recs[2].upstream_tls);
	upstream_stop(&u);
}

/* Over TLS an https:// entry goes upstream over verified TLS. */
Test(http_gate, an_https_entry_goes_upstream_over_verified_tls)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r;
	upstream_start(&u, true);
	serve_start(&s, &u, (struct opts){.trust_upstream = true});
	cr_assert_eq(cell_tls(&c, &s, HOST), 0);
	cell_send(&c, fmt("GET /secure/x HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cell_close(&c);
	serve_join(&s);
	cr_expect_eq(r.status, 200, "%s%s", r.head, r.body);
	cr_assert_eq(s.n_recs, 1);
	cr_expect(s.recs[0].allowed && s.recs[0].upstream_tls);
	upstream_stop(&u);
}

Test(http_gate, a_redirect_is_passed_back_not_followed)
{
	struct upstream u;
	struct served s;
	struct resp r;
	upstream_start(&u, false);
	plain_exchange(&u, fmt("GET /v1/redirect HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)), &r, &s);
	cr_expect_eq(r.status, 302);
	cr_expect(strstr(r.head, "Location: https://other.example.test/x"), "%s", r.head);
	cr_expect_eq(up_count(&u), 1);
	cr_expect_eq(s.recs[0].status, 302);
	upstream_stop(&u);
}

Test(http_gate, keep_alive_serves_two_requests_with_two_records)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r1, r2;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){0});
	cell_plain(&c, &s);
	const char *q1 = fmt("GET /v1/one HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u));
	cell_send(&c, q1);
	cell_recv(&c, &r1);
	const char *q2 = fmt("GET /v1/chunky HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u));
	cell_send(&c, q2);
	cell_recv(&c, &r2);
	cell_close(&c);
	serve_join(&s);
	cr_expect_eq(r1.status, 200);
	cr_expect_str_eq(r1.body, "hello GET /v1/one");
	cr_expect_eq(r2.status, 200);
	cr_expect_str_eq(r2.body, "hello chunk");
	cr_assert_eq(s.n_recs, 2);
	cr_expect_eq(s.recs[0].bytes_out, strlen(q1));
	cr_expect_eq(s.recs[1].bytes_out, strlen(q2));
	cr_expect_eq(s.recs[0].bytes_in, r1.total);
	cr_expect_eq(s.recs[1].bytes_in, r2.total);
	upstream_stop(&u);
}

/* An upstream that frames with both: the cell gets the decoded body in the gate's own
 * framing, never the upstream's Content-Length beside it. */
Test(http_gate, the_cell_gets_the_gates_framing_not_the_upstreams)
{
	struct upstream u;
	struct served s;
	struct resp r;
	upstream_start(&u, false);
	plain_exchange(&u, fmt("GET /v1/tecl HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)), &r, &s);
	cr_expect_eq(r.status, 200);
	cr_expect_str_eq(r.body, "hello");
	cr_expect(!strcasestr(r.head, "content-length"), "%s", r.head);
	/* HTTP/1.0 and HEAD: close-delimited, and the length without a body. */
	plain_exchange(&u, fmt("GET /v1/chunky HTTP/1.0\r\nHost: %s\r\n\r\n", hh(&u)), &r, &s);
	cr_expect_eq(r.status, 200);
	cr_expect(strstr(r.head, "Connection: close"), "%s", r.head);
	plain_exchange(&u, fmt("HEAD /open/x HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)), &r, &s);
	cr_expect_eq(r.status, 200, "%s | %s", r.head, s.n_recs ? s.recs[0].rule : "");
	upstream_stop(&u);
}

Test(http_gate, request_bodies_go_upstream_in_either_framing)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){0});
	cell_plain(&c, &s);
	cell_send(&c, fmt("POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 11\r\n"
			  "Content-Type: text/plain\r\n\r\nhello there",
			  hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 200);
	cell_send(&c, fmt("POST /upload HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n"
			  "Expect: 100-continue\r\n\r\n",
			  hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 100);
	cell_send(&c, "4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\nX-Trailer: t\r\n\r\n");
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 200);
	cell_close(&c);
	serve_join(&s);
	cr_expect(strstr(u.seen, "\r\n\r\nhello there"), "%s", u.seen);
	cr_expect(strstr(u.seen, "Transfer-Encoding: chunked\r\n"), "%s", u.seen);
	cr_expect(strstr(u.seen, "\r\n\r\nabcdefg"), "%s", u.seen);
	cr_expect(!strstr(u.seen, "X-Trailer"), "%s", u.seen);
	upstream_stop(&u);
}

Test(http_gate, bodies_over_the_cap_fail_clearly)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){.body_max = 1000});
	cell_plain(&c, &s);
	cell_send(&c, fmt("GET /v1/big HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 502);
	cr_expect(strstr(r.body, "cap"), "%s", r.body);
	cell_send(&c,
		  fmt("POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 5000\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 413);
	cell_close(&c);
	serve_join(&s);
	cr_assert_eq(s.n_recs, 2);
	cr_expect(strstr(s.recs[0].rule, "cap"));
	upstream_stop(&u);
}

static void expect_ends_within(struct served *s, int ms)
{
	uint64_t t0 = sc__now_us();
	pthread_join(s->thread, NULL);
	uint64_t took = (sc__now_us() - t0) / 1000;
	cr_expect_lt(took, (uint64_t)ms, "took %llu ms", (unsigned long long)took);
	sc__http_gate_free(s->g);
	close(s->stop[0]);
	close(s->stop[1]);
}

Test(http_gate, a_silent_peer_ends_at_the_idle_timeout)
{
	struct upstream u;
	struct served s;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){.idle_ms = 200});
	expect_ends_within(&s, 2000);
	/* A head that stops half-way is audited as what it is. */
	serve_start(&s, &u, (struct opts){.idle_ms = 200});
	cr_assert_eq(write(s.cell_fd, "GET /v1 HT", 10), 10);
	expect_ends_within(&s, 2000);
	cr_assert_eq(s.n_recs, 1);
	cr_expect(strstr(s.recs[0].rule, "idle"), "%s", s.recs[0].rule);
	close(s.cell_fd);
	upstream_stop(&u);
}

Test(http_gate, stop_fd_and_the_deadline_end_a_connection)
{
	struct upstream u;
	struct served s;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){0});
	usleep(50000);
	cr_assert_eq(write(s.stop[1], "x", 1), 1);
	expect_ends_within(&s, 2000);
	close(s.cell_fd);
	serve_start(&s, &u, (struct opts){.deadline_ms = 200});
	expect_ends_within(&s, 2000);
	close(s.cell_fd);
	upstream_stop(&u);
}

Test(http_gate, freeing_the_gate_ends_its_connections)
{
	struct upstream u;
	struct served s;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){0});
	usleep(50000);
	uint64_t t0 = sc__now_us();
	sc__http_gate_free(s.g);
	cr_expect_lt(sc__now_us() - t0, 2000000);
	pthread_join(s.thread, NULL);
	close(s.cell_fd);
	upstream_stop(&u);
}

Test(http_gate, smuggling_forms_are_refused)
{
	struct upstream u;
	struct served s;
	struct resp r;
	upstream_start(&u, false);
	const char *h = hh(&u);
	const char *reqs[] = {
		fmt("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", h, h),
		fmt("TRACE /v1 HTTP/1.1\r\nHost: %s\r\n\r\n", h),
		fmt("GET /v1 HTTP/1.1\r\nHost: %s\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
		    h)};
	const char *more[] = {
		fmt("GET http://%s/v1 HTTP/1.1\r\nHost: %s\r\n\r\n", h, h),
		fmt("POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 3\r\n"
		    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		    h),
		fmt("POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 3\r\nContent-Length: 4"
		    "\r\n\r\nabcd",
		    h),
		fmt("GET /v1 HTTP/1.1\r\nHost: %s\r\nX-HTTP-Method-Override: DELETE\r\n\r\n", h),
		fmt("get /v1 HTTP/1.1\r\nHost: %s\r\n\r\n", h),
		fmt("GET  /v1 HTTP/1.1\r\nHost: %s\r\n\r\n", h),
		fmt("GET /v1 HTTP/1.1\r\nHost: %s\r\n X-Folded: 1\r\n\r\n", h),
		fmt("GET /v1 HTTP/1.1\r\nHost: %s\r\nX-A: a\nb\r\n\r\n", h),
		fmt("GET /v1 HTTP/1.1\r\nHost: %s\r\nHost: %s\r\n\r\n", h, h),
		fmt("POST /upload HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		    h),
		fmt("GET /v1?_method=DELETE HTTP/1.1\r\nHost: %s\r\n\r\n", h),
		fmt("GET /v1 HTTP/2.0\r\nHost: %s\r\n\r\n", h),
		fmt("GET /v1 HTTP/1.1\r\nHost : %s\r\n\r\n", h),
	};
	for (size_t i = 0; i < SC_ARRAY_LEN(reqs) + SC_ARRAY_LEN(more); i++) {
		const char *q = i < 3 ? reqs[i] : more[i - 3];
		char copy[1024];
		snprintf(copy, sizeof(copy), "%s", q);
		plain_exchange(&u, copy, &r, &s);
		cr_expect(r.status >= 400 && r.status < 600, "%s: %d", copy, r.status);
		cr_expect(s.n_recs == 1 && !s.recs[0].allowed, "%s", copy);
	}
	cr_expect_eq(up_count(&u), 0);
	upstream_stop(&u);
}

/* A body on GET or HEAD, which an upstream that ignores it would read
 * as the next request (CL.0). */
Test(http_gate, a_body_on_get_or_head_is_refused)
{
	struct upstream u;
	struct served s;
	struct resp r;
	upstream_start(&u, false);
	const char *h = hh(&u);
	const char *reqs[] = {
		fmt("GET /v1/a HTTP/1.1\r\nHost: %s\r\nContent-Length: 38\r\n\r\n"
		    "GET /admin HTTP/1.1\r\nHost: x\r\n\r\n",
		    h),
		fmt("HEAD /open/a HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "5\r\nhello\r\n0\r\n\r\n",
		    h),
		fmt("GET /v1/a HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n"
		    "0\r\n\r\n",
		    h)};
	for (size_t i = 0; i < SC_ARRAY_LEN(reqs); i++) {
		plain_exchange(&u, reqs[i], &r, &s);
		cr_expect_eq(r.status, 400, "%zu: %s", i, r.head);
		cr_expect(strstr(r.body, "GET or HEAD request with a body"), "%s", r.body);
		cr_expect(s.n_recs == 1 && !s.recs[0].allowed);
	}
	/* An empty body said so is no body. */
	plain_exchange(&u, fmt("GET /v1/a HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n", h),
		       &r, &s);
	cr_expect_eq(r.status, 200, "%s", r.head);
	cr_expect_eq(up_count(&u), 1);
	upstream_stop(&u);
}

Test(http_gate, chunked_decoder_takes_exactly_one_body)
{
	const char in[] = "3\r\nabc\r\n10;x=y\r\n0123456789abcdef\r\n0\r\nT: 1\r\n\r\nNEXT";
	struct sc_http_chunked st = {0};
	char out[64];
	uint64_t len = 0;
	size_t used;
	cr_assert_eq(sc__http_chunked_feed(&st, in, sizeof(in) - 1, &used, out, &len, sizeof(out)),
		     0);
	cr_expect(st.done);
	cr_expect_eq(len, 19);
	cr_expect_str_eq(in + used, "NEXT");
	const char *bad[] = {"x\r\n", "3\r\nabcX\r\n", "\r\n", "3\nabc", "fffffffffffffffff\r\n"};
	for (size_t i = 0; i < SC_ARRAY_LEN(bad); i++) {
		struct sc_http_chunked b = {0};
		len = 0;
		cr_expect_eq(sc__http_chunked_feed(&b, bad[i], strlen(bad[i]), &used, out, &len,
						   sizeof(out)),
			     -EINVAL, "%s", bad[i]);
	}
	struct sc_http_chunked big = {0};
	len = 0;
	cr_expect_eq(sc__http_chunked_feed(&big, "40\r\n", 4, &used, out, &len, 10), 0);
	char data[64] = {0};
	cr_expect_eq(sc__http_chunked_feed(&big, data, 64, &used, out, &len, 10), -E2BIG);
}

Test(http_gate, leaves_name_the_host_and_chain_to_the_ca)
{
	struct sc_http_ca *ca;
	struct sc_http_leaf *a, *b, *ip;
	struct snapcell_error err = {0};
	cr_assert_eq(sc__http_ca_new("t", &ca, &err), 0);
	cr_assert_eq(sc__http_ca_leaf(ca, HOST, &a, &err), 0);
	cr_assert_eq(sc__http_ca_leaf(ca, HOST, &b, &err), 0);
	cr_expect_eq(a, b, "cached per host");
	cr_assert_eq(sc__http_ca_leaf(ca, "203.0.113.7", &ip, &err), 0);
	cr_expect_neq(a, ip);
	sc__http_ca_release(ca, a);
	sc__http_ca_release(ca, b);
	gnutls_datum_t der;
	gnutls_x509_crt_t crt;
	cr_assert_eq(gnutls_certificate_get_crt_raw(sc__http_leaf_cred(ip), 0, 0, &der), 0);
	gnutls_x509_crt_init(&crt);
	cr_assert_eq(gnutls_x509_crt_import(crt, &der, GNUTLS_X509_FMT_DER), 0);
	unsigned char addr[4] = {203, 0, 113, 7};
	cr_expect(gnutls_x509_crt_check_ip(crt, addr, 4, 0), "IP SAN");
	cr_expect(!gnutls_x509_crt_check_hostname(crt, HOST));
	gnutls_x509_crt_deinit(crt);
	cr_expect(strstr(sc__http_ca_pem(ca), "BEGIN CERTIFICATE"));
	sc__http_ca_release(ca, ip);
	sc__http_ca_free(ca);
}

/* Python's ssl default context (with VERIFY_X509_STRICT, the default from 3.13) trusts the
 * gate's leaves when the gate's CA is in its bundle: what the cell's clients do. */
Test(http_gate, python_ssl_default_context_trusts_the_gate)
{
	if (access("/usr/bin/python3", X_OK))
		cr_skip_test("no /usr/bin/python3");
	struct upstream u;
	struct served s;
	upstream_start(&u, true);
	serve_start(&s, &u, (struct opts){.trust_upstream = true});
	char ca[] = "/tmp/sc-http-gate-ca-XXXXXX";
	int fd = mkstemp(ca);
	const char *pem = sc__http_gate_ca_pem(s.g);
	cr_assert(fd >= 0 && write(fd, pem, strlen(pem)) == (ssize_t)strlen(pem));
	close(fd);
	char code[1024];
	snprintf(code, sizeof(code),
		 "import socket, ssl, http.client, sys\n"
		 "ctx = ssl.create_default_context(cafile=sys.argv[1])\n"
		 "ctx.verify_flags |= getattr(ssl, 'VERIFY_X509_STRICT', 0)\n"
		 "s = ctx.wrap_socket(socket.socket(fileno=3), server_hostname='%s')\n"
		 "c = http.client.HTTPConnection('%s', %u)\n"
		 "c.sock = s\n"
		 "c.request('GET', '/v1/py')\n"
		 "r = c.getresponse()\n"
		 "sys.exit(0 if r.status == 200 and r.read() == b'hello GET /v1/py' else 1)\n",
		 HOST, HOST, u.port);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(s.cell_fd, 3);
		/* A bare argv[0] makes Python find itself on PATH, where a venv's python3 (the
		 * test venv, first on scripts/test's PATH) would lend it that venv's packages. */
		execl("/usr/bin/python3", "/usr/bin/python3", "-c", code, ca, (char *)NULL);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	unlink(ca);
	close(s.cell_fd);
	serve_join(&s);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0, "python exited %d", status);
	cr_expect_eq(up_count(&u), 1);
	upstream_stop(&u);
}

Test(http_gate, a_hung_upstream_ends_at_stop_fd_or_the_idle_timeout)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){0});
	cell_plain(&c, &s);
	cell_send(&c, fmt("GET /v1/hang HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	usleep(200000);
	cr_assert_eq(write(s.stop[1], "x", 1), 1);
	expect_ends_within(&s, 2500);
	close(c.fd);
	cr_assert_eq(s.n_recs, 1);
	cr_expect(strstr(s.recs[0].rule, "stopped"), "%s", s.recs[0].rule);
	serve_start(&s, &u, (struct opts){.idle_ms = 300});
	cell_plain(&c, &s);
	cell_send(&c, fmt("GET /v1/hang HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 502);
	cr_expect(strstr(r.body, "idle"), "%s", r.body);
	cell_close(&c);
	serve_join(&s);
	upstream_stop(&u);
}

struct parallel {
	struct served *s;
	int fd;
	int status;
	char host[64];
};

static void *parallel_cell(void *arg)
{
	struct parallel *p = arg;
	struct served one = *p->s;
	one.cell_fd = p->fd;
	struct cell c;
	struct resp *r = malloc(sizeof(*r));
	if (cell_tls(&c, &one, HOST) == 0) {
		char q[256];
		snprintf(q, sizeof(q), "GET /v1/p HTTP/1.1\r\nHost: %s\r\n\r\n", p->host);
		cell_send(&c, q);
		cell_recv(&c, r);
		p->status = r->status;
	}
	cell_close(&c);
	free(r);
	return NULL;
}

struct parallel_serve {
	struct sc_http_gate *g;
	struct sc_http_conn c;
	pthread_t thread;
};

static void *parallel_serve_main(void *arg)
{
	struct parallel_serve *p = arg;
	sc__http_serve(p->g, &p->c);
	return NULL;
}

/* Several connections at once on one gate: the leaf cache and curl from many threads. */
Test(http_gate, connections_are_served_in_parallel_on_one_gate)
{
	enum { N = 6 };
	struct upstream u;
	struct served s;
	upstream_start(&u, true);
	serve_start(&s, &u, (struct opts){.trust_upstream = true});
	struct parallel cells[N];
	struct parallel_serve serves[N];
	pthread_t threads[N];
	for (int i = 0; i < N; i++) {
		int sv[2];
		cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		serves[i].g = s.g;
		serves[i].c = s.c;
		serves[i].c.fd = sv[1];
		serves[i].c.audit = NULL;
		pthread_create(&serves[i].thread, NULL, parallel_serve_main, &serves[i]);
		cells[i] = (struct parallel){.s = &s, .fd = sv[0], .status = -1};
		snprintf(cells[i].host, sizeof(cells[i].host), "%s", hh(&u));
		pthread_create(&threads[i], NULL, parallel_cell, &cells[i]);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(threads[i], NULL);
		pthread_join(serves[i].thread, NULL);
		cr_expect_eq(cells[i].status, 200, "cell %d", i);
	}
	close(s.cell_fd);
	serve_join(&s);
	cr_expect_eq(up_count(&u), N);
	upstream_stop(&u);
}

/* A name pinned to an IPv6 address: curl gets it as "[addr]" and connects there. */
Test(http_gate, an_ipv6_pin_is_where_curl_connects)
{
	int probe = socket(AF_INET6, SOCK_STREAM, 0);
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
	if (probe < 0 || bind(probe, (struct sockaddr *)&a, sizeof(a)))
		cr_skip_test("no IPv6 loopback");
	close(probe);
	struct upstream u;
	struct served s;
	struct resp r;
	upstream_start_family(&u, true, AF_INET6);
	serve_start(&s, &u, (struct opts){.trust_upstream = true});
	struct cell c;
	cr_assert_eq(cell_tls(&c, &s, HOST), 0);
	cell_send(&c, fmt("GET /v1/six HTTP/1.1\r\nHost: %s\r\n\r\n", hh(&u)));
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 200, "%s%s", r.head, r.body);
	cell_close(&c);
	serve_join(&s);
	cr_expect_eq(up_count(&u), 1);
	upstream_stop(&u);
}

/* A body that arrives in pieces goes upstream as it comes (curl reads it from the cell); a
 * chunked one past the cap ends the request with 413. */
Test(http_gate, request_bodies_are_streamed_and_capped)
{
	struct upstream u;
	struct served s;
	struct cell c;
	struct resp r;
	upstream_start(&u, false);
	serve_start(&s, &u, (struct opts){.body_max = 30000});
	cell_plain(&c, &s);
	cell_send(&c, fmt("POST /upload HTTP/1.1\r\nHost: %s\r\nContent-Length: 24000\r\n\r\n",
			  hh(&u)));
	char piece[6001];
	memset(piece, 'b', 6000);
	piece[6000] = 0;
	for (int i = 0; i < 4; i++) {
		usleep(20000);
		cell_send(&c, piece);
	}
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 200);
	cell_send(&c, fmt("POST /upload HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked\r\n\r\n",
			  hh(&u)));
	for (int i = 0; i < 6; i++) {
		char size[16];
		snprintf(size, sizeof(size), "1770\r\n"); /* 6000 */
		cell_send(&c, size);
		cell_send(&c, piece);
		cell_send(&c, "\r\n");
	}
	cell_recv(&c, &r);
	cr_expect_eq(r.status, 413, "%s%s", r.head, r.body);
	cell_close(&c);
	serve_join(&s);
	cr_expect(strstr(u.seen, "Content-Length: 24000\r\n"), "%s", u.seen);
	cr_assert_eq(s.n_recs, 2);
	cr_expect_eq(s.recs[0].bytes_out, strlen(fmt("POST /upload HTTP/1.1\r\nHost: %s\r\n"
						     "Content-Length: 24000\r\n\r\n",
						     hh(&u))) +
						  24000);
	cr_expect(strstr(s.recs[1].rule, "cap"), "%s", s.recs[1].rule);
	upstream_stop(&u);
}
