/* The HTTP gate's cell side: one connection handed over by the egress gate, its TLS
 * terminated with a leaf from the sandbox's CA, then one strict request at a time (parsed
 * by http_parse.c), checked against the entries and made upstream (http_upstream.c). Every
 * wait polls the cell's fd with stop_fd, the gate's own stop pipe, the idle timeout and the
 * deadline, so no peer can hold a thread. Not a proxy for anything but HTTP/1.x. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http_conn.h"
#include "util/buf.h"
#include "util/util.h"

#define DEFAULT_CONNECT_TIMEOUT_MS 10000
#define DEFAULT_IDLE_TIMEOUT_MS	   30000
#define DEFAULT_BODY_MAX_BYTES	   (16u << 20)
#define PATH_MAX_BYTES		   8192 /* of a request's path, the part the rules see */

int sc__http_gate_new(const struct sc_http_gate_options *o, struct sc_http_gate **out,
		      struct snapcell_error *err)
{
	int rc = sc__http_upstream_init(err);
	if (rc)
		return rc;
	struct sc_http_gate *g = calloc(1, sizeof(*g));
	if (!g)
		return sc__err(err, -ENOMEM, "http gate");
	g->stop_pipe[0] = g->stop_pipe[1] = -1;
	pthread_mutex_init(&g->lock, NULL);
	pthread_cond_init(&g->drained, NULL);
	g->o = *o;
	g->o.upstream_ca_file = NULL;
	if (!g->o.connect_timeout_ms)
		g->o.connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
	if (!g->o.idle_timeout_ms)
		g->o.idle_timeout_ms = DEFAULT_IDLE_TIMEOUT_MS;
	if (!g->o.body_max_bytes)
		g->o.body_max_bytes = DEFAULT_BODY_MAX_BYTES;
	if (o->upstream_ca_file && !(g->o.upstream_ca_file = strdup(o->upstream_ca_file)))
		rc = sc__err(err, -ENOMEM, "http gate");
	else if (pipe2(g->stop_pipe, O_CLOEXEC | O_NONBLOCK))
		rc = sc__err(err, -errno, "http gate: pipe");
	else
		rc = sc__http_ca_new("snapcell sandbox CA", &g->ca, err);
	if (rc) {
		sc__http_gate_free(g);
		return rc;
	}
	*out = g;
	return 0;
}

/* The caller ends its serve threads first (stop_fd) where it can; whatever still runs sees
 * the stop pipe and ends, and free waits for it before anything goes. */
void sc__http_gate_free(struct sc_http_gate *g)
{
	if (!g)
		return;
	if (g->stop_pipe[1] >= 0 && write(g->stop_pipe[1], "x", 1) < 0) {
		/* A full pipe is readable already. */
	}
	pthread_mutex_lock(&g->lock);
	while (g->n_active)
		pthread_cond_wait(&g->drained, &g->lock);
	pthread_mutex_unlock(&g->lock);
	sc__http_ca_free(g->ca);
	for (int i = 0; i < 2; i++)
		if (g->stop_pipe[i] >= 0)
			close(g->stop_pipe[i]);
	free((char *)g->o.upstream_ca_file);
	pthread_cond_destroy(&g->drained);
	pthread_mutex_destroy(&g->lock);
	free(g);
}

const char *sc__http_gate_ca_pem(const struct sc_http_gate *g)
{
	return sc__http_ca_pem(g->ca);
}

/* Waits for events on the cell's fd within the idle timeout and the deadline. 0, or
 * -ETIMEDOUT / -ECANCELED / -errno with io->why set. */
static int io_wait(struct sc_http_io *io, short events)
{
	for (;;) {
		uint64_t now = sc__now_us();
		uint64_t end = io->last_io_us + io->g->o.idle_timeout_ms * 1000;
		const char *why = "idle timeout";
		if (io->deadline_us && io->deadline_us < end)
			end = io->deadline_us, why = "deadline";
		if (now >= end) {
			io->why = why;
			return -ETIMEDOUT;
		}
		uint64_t ms = (end - now + 999) / 1000;
		struct pollfd p[3] = {{io->c->fd, events, 0},
				      {io->c->stop_fd, POLLIN, 0},
				      {io->g->stop_pipe[0], POLLIN, 0}};
		int n = poll(p, 3, ms > INT_MAX ? INT_MAX : (int)ms);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			io->why = "poll failed";
			return -errno;
		}
		if (p[1].revents || p[2].revents) {
			io->why = "stopped";
			return -ECANCELED;
		}
		if (p[0].revents)
			return 0;
	}
}

bool sc__http_io_stopped(struct sc_http_io *io)
{
	struct pollfd p[2] = {{io->c->stop_fd, POLLIN, 0}, {io->g->stop_pipe[0], POLLIN, 0}};
	if (poll(p, 2, 0) > 0 && (p[0].revents || p[1].revents)) {
		io->why = "stopped";
		return true;
	}
	if (io->deadline_us && sc__now_us() >= io->deadline_us) {
		io->why = "deadline";
		return true;
	}
	return false;
}

/* One recv: >0 bytes, 0 at EOF, -errno. */
static ssize_t raw_read(struct sc_http_io *io, void *buf, size_t len)
{
	for (;;) {
		int rc = io_wait(io, POLLIN);
		if (rc)
			return rc;
		ssize_t n = recv(io->c->fd, buf, len, 0);
		if (n >= 0) {
			io->last_io_us = sc__now_us();
			return n;
		}
		if (errno != EAGAIN && errno != EINTR) {
			io->why = "read from the cell failed";
			return -errno;
		}
	}
}

static int raw_write(struct sc_http_io *io, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = send(io->c->fd, p, len, MSG_NOSIGNAL);
		if (n > 0) {
			io->last_io_us = sc__now_us();
			p += n, len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			io->why = "write to the cell failed";
			return -errno;
		}
		int rc = io_wait(io, POLLOUT);
		if (rc)
			return rc;
	}
	return 0;
}

static ssize_t tls_pull(gnutls_transport_ptr_t ptr, void *buf, size_t len)
{
	struct sc_http_io *io = ptr;
	ssize_t n = raw_read(io, buf, len);
	if (n < 0) {
		gnutls_transport_set_errno(io->tls, n == -EAGAIN ? EIO : (int)-n);
		return -1;
	}
	return n;
}

static ssize_t tls_push(gnutls_transport_ptr_t ptr, const void *buf, size_t len)
{
	struct sc_http_io *io = ptr;
	int rc = raw_write(io, buf, len);
	if (rc) {
		gnutls_transport_set_errno(io->tls, rc == -EAGAIN ? EIO : -rc);
		return -1;
	}
	return (ssize_t)len;
}

/* gnutls's default would select() on the transport pointer as if it were an fd. */
static int tls_pull_timeout(gnutls_transport_ptr_t ptr, unsigned int ms)
{
	struct sc_http_io *io = ptr;
	if (ms == 0) {
		struct pollfd p = {io->c->fd, POLLIN, 0};
		return poll(&p, 1, 0);
	}
	return io_wait(io, POLLIN) ? -1 : 1;
}

/* >0 bytes, 0 at the cell's end of stream, <0 on error or timeout. */
static ssize_t io_read(struct sc_http_io *io, void *buf, size_t len)
{
	if (!io->tls)
		return raw_read(io, buf, len);
	for (;;) {
		ssize_t n = gnutls_record_recv(io->tls, buf, len);
		if (n >= 0)
			return n;
		if (n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_AGAIN)
			continue;
		if (n == GNUTLS_E_PREMATURE_TERMINATION)
			return 0;
		if (!io->why)
			io->why = "TLS record error";
		return -EPROTO;
	}
}

bool sc__http_charge(struct sc_http_io *io, uint64_t n)
{
	if (io->c->charge && !io->c->charge(io->c->audit_ctx, n))
		io->spent = true;
	return !io->spent;
}

static int write_uncharged(struct sc_http_io *io, const void *buf, size_t len);

int sc__http_io_write(struct sc_http_io *io, const void *buf, size_t len)
{
	if (!sc__http_charge(io, len)) {
		io->why = "the run's network byte budget is spent";
		return -EDQUOT;
	}
	return write_uncharged(io, buf, len);
}

static int write_uncharged(struct sc_http_io *io, const void *buf, size_t len)
{
	if (!io->tls)
		return raw_write(io, buf, len);
	const char *p = buf;
	while (len) {
		ssize_t n = gnutls_record_send(io->tls, p, len);
		if (n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_AGAIN)
			continue;
		if (n < 0) {
			if (!io->why)
				io->why = "TLS write failed";
			return -EPROTO;
		}
		p += n, len -= (size_t)n;
	}
	return 0;
}

/* The SNI, when the cell sends one, names the connection's host; anything else is a cell
 * trying to reach another virtual host through an allowed address. */
static int check_sni(gnutls_session_t s)
{
	struct sc_http_io *io = gnutls_session_get_ptr(s);
	char name[SC_NET_HOST_MAX + 2];
	size_t len = sizeof(name);
	unsigned type;
	int rc = gnutls_server_name_get(s, name, &len, &type, 0);
	if (rc == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
		return 0;
	if (rc || type != GNUTLS_NAME_DNS || strcasecmp(name, io->c->host)) {
		io->why = "TLS server name does not match the host";
		return GNUTLS_E_UNRECOGNIZED_NAME;
	}
	return 0;
}

static int tls_start(struct sc_http_io *io)
{
	struct snapcell_error err = {0};
	if (sc__http_ca_leaf(io->g->ca, io->c->host, &io->leaf, &err)) {
		io->why = "no certificate for the host";
		return -EIO;
	}
	static const gnutls_datum_t alpn = {(unsigned char *)"http/1.1", 8};
	int rc = gnutls_init(&io->tls, GNUTLS_SERVER | GNUTLS_NO_SIGNAL);
	if (rc) {
		io->tls = NULL;
		io->why = "TLS setup failed";
		return -EIO;
	}
	gnutls_session_set_ptr(io->tls, io);
	gnutls_transport_set_ptr(io->tls, io);
	gnutls_transport_set_pull_function(io->tls, tls_pull);
	gnutls_transport_set_push_function(io->tls, tls_push);
	gnutls_transport_set_pull_timeout_function(io->tls, tls_pull_timeout);
	gnutls_handshake_set_timeout(io->tls, 0);
	gnutls_handshake_set_post_client_hello_function(io->tls, check_sni);
	if ((rc = gnutls_set_default_priority(io->tls)) ||
	    (rc = gnutls_credentials_set(io->tls, GNUTLS_CRD_CERTIFICATE,
					 sc__http_leaf_cred(io->leaf))) ||
	    (rc = gnutls_alpn_set_protocols(io->tls, &alpn, 1, 0))) {
		io->why = "TLS setup failed";
		return -EIO;
	}
	do
		rc = gnutls_handshake(io->tls);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	if (rc < 0) {
		if (!io->why)
			io->why = "TLS handshake with the cell failed";
		return rc == GNUTLS_E_UNRECOGNIZED_NAME ? -EACCES : -EPROTO;
	}
	return 0;
}

static void audit(struct sc_http_io *io, const struct sc_http_record *r)
{
	if (io->c->audit)
		io->c->audit(io->c->audit_ctx, r);
}

/* A connection that failed before any request: one record with the reason. */
static void audit_failure(struct sc_http_io *io, uint64_t t0)
{
	struct sc_http_record r = {.method = "",
				   .path = "",
				   .rule = io->why ? io->why : "failed",
				   .duration_us = sc__now_us() - t0};
	audit(io, &r);
}

static const char *reason_phrase(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 403:
		return "Forbidden";
	case 408:
		return "Request Timeout";
	case 413:
		return "Content Too Large";
	case 414:
		return "URI Too Long";
	case 417:
		return "Expectation Failed";
	case 431:
		return "Request Header Fields Too Large";
	case 501:
		return "Not Implemented";
	case 502:
		return "Bad Gateway";
	}
	return "Error";
}

/* The gate's own answer: a short plain-text body the cell's code can show. Charged, but
 * written even when the budget is spent, so the code learns why. */
static void respond_error(struct sc_http_io *io, int status, const char *why, bool keep)
{
	char body[512], head[256];
	int blen = snprintf(body, sizeof(body), "snapcell: %s\n", why);
	if (blen < 0 || (size_t)blen >= sizeof(body))
		blen = (int)sizeof(body) - 1;
	int hlen =
		snprintf(head, sizeof(head),
			 "HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
			 "Content-Length: %d\r\n%s\r\n",
			 status, reason_phrase(status), blen, keep ? "" : "Connection: close\r\n");
	sc__http_charge(io, (uint64_t)hlen + (uint64_t)blen);
	if (write_uncharged(io, head, (size_t)hlen) == 0 &&
	    write_uncharged(io, body, (size_t)blen) == 0)
		io->bytes_in += (uint64_t)hlen + (uint64_t)blen;
}

/* Reads more of the cell's bytes into io->in: >0, 0 at EOF, <0. */
static ssize_t fill(struct sc_http_io *io)
{
	if (io->in_len == sizeof(io->in))
		return -ENOBUFS;
	ssize_t n = io_read(io, io->in + io->in_len, sizeof(io->in) - io->in_len);
	if (n > 0)
		io->in_len += (size_t)n;
	return n;
}

/* Every byte from the cell is consumed once, here, and charged as it is. */
static void consume(struct sc_http_io *io, size_t n)
{
	sc__http_charge(io, n);
	memmove(io->in, io->in + n, io->in_len - n);
	io->in_len -= n;
}

/* Reads the request body into *out (NULL to discard), at most cap bytes. 0, -E2BIG, or
 * another negative code for a malformed body or failed I/O. *n_raw counts the bytes read. */
static int read_body(struct sc_http_io *io, const struct sc_http_request *r, char **out,
		     uint64_t *len, uint64_t cap, uint64_t *n_raw)
{
	struct sc_http_chunked st = {0};
	uint64_t want = r->content_length;
	struct sc_buf body;
	sc__buf_init(&body, (size_t)cap);
	*len = 0;
	if (!r->chunked && want > cap)
		return -E2BIG;
	int rc = 0;
	while (rc == 0 && !(r->chunked ? st.done : *len == want)) {
		if (!io->in_len && fill(io) <= 0) {
			rc = -EPIPE;
			break;
		}
		/* Room for all that came (what it decodes to is no longer) or up to the cap. */
		size_t used, avail = io->in_len;
		char *at = NULL;
		ssize_t room = out ? sc__buf_space(&body, avail, &at) : 0;
		if (room < 0) {
			rc = (int)room;
			break;
		}
		if (r->chunked) {
			rc = sc__http_chunked_feed(&st, io->in, avail, &used,
						   out ? body.data : NULL, len,
						   out ? body.len + (size_t)room : cap);
		} else {
			used = want - *len < avail ? (size_t)(want - *len) : avail;
			if (out)
				memcpy(at, io->in, used);
			*len += used;
		}
		if (out && *len > body.len)
			sc__buf_commit(&body, (size_t)*len - body.len);
		if (rc == 0) {
			*n_raw += used;
			consume(io, used);
		}
	}
	if (rc == 0 && out)
		*out = body.data ? sc__buf_take(&body, NULL) : NULL;
	sc__buf_free(&body);
	return rc;
}

/* The Host a client sends for this connection: the host, bracketed if IPv6, with the port
 * unless it is the scheme's default (the explicit default is accepted too). */
static bool host_matches(const struct sc_http_io *io, const char *h)
{
	const char *host = io->c->host;
	bool v6 = strchr(host, ':') != NULL;
	char want[SC_NET_HOST_MAX + 8], with_port[SC_NET_HOST_MAX + 16];
	snprintf(want, sizeof(want), v6 ? "[%s]" : "%s", host);
	snprintf(with_port, sizeof(with_port), "%s:%u", want, io->c->port);
	bool is_default = io->c->port == (io->tls ? 443 : 80);
	return !strcasecmp(h, with_port) || (is_default && !strcasecmp(h, want));
}

struct outcome {
	struct sc_http_record rec;
	char rule[512];
	char path[PATH_MAX_BYTES + 1];
	bool keep;
};

/* A request refused after a sound parse: its body is read and dropped (bounded) so the
 * cell sees the 403 rather than a reset, and the connection stays usable. */
static void refuse_request(struct sc_http_io *io, const struct sc_http_request *r, int status,
			   struct outcome *o)
{
	uint64_t len;
	/* Read even when the connection ends, and once the byte budget is spent (dropped bytes
	 * go nowhere; they are still counted): closing with the cell's bytes unread would reset
	 * it, and the cell would lose the answer. */
	bool read = !r->expect_continue &&
		    read_body(io, r, NULL, &len, io->g->o.body_max_bytes, &o->rec.bytes_out) == 0;
	bool keep = r->keep_alive && read;
	respond_error(io, status, o->rule, keep);
	o->keep = keep;
}

ssize_t sc__http_body_read(struct sc_http_io *io, struct sc_http_body *b, char *buf, size_t len)
{
	const struct sc_http_request *r = b->r;
	uint64_t cap = io->g->o.body_max_bytes;
	while (!b->done && !b->err) {
		if (!r->chunked && b->got == r->content_length) {
			b->done = true;
			break;
		}
		if (!io->in_len && fill(io) <= 0) {
			b->err = -EPIPE;
			break;
		}
		/* Decoded bytes never outnumber the bytes they come from, so offering at most len
		 * of input always fits buf. */
		size_t avail = io->in_len < len ? io->in_len : len, used;
		uint64_t out = 0;
		if (r->chunked) {
			b->err =
				sc__http_chunked_feed(&b->st, io->in, avail, &used, buf, &out, len);
			b->done = b->st.done;
		} else {
			uint64_t left = r->content_length - b->got;
			used = left < avail ? (size_t)left : avail;
			memcpy(buf, io->in, used);
			out = used;
		}
		*b->n_raw += used;
		consume(io, used);
		if (!b->err && (b->got += out) > cap)
			b->err = -E2BIG;
		if (!b->err && io->spent)
			b->err = -EDQUOT;
		/* curl stops asking once it has the length it announced. */
		if (!r->chunked && b->got == r->content_length)
			b->done = true;
		if (out && !b->err)
			return (ssize_t)out;
	}
	return b->err ? b->err : 0;
}

static const char *body_why(int err)
{
	return err == -E2BIG	? "request body over the gate's cap"
	       : err == -EINVAL ? "malformed chunked body"
	       : err == -EDQUOT ? "the run's network byte budget is spent"
				: "request body cut short";
}

static void serve_allowed(struct sc_http_io *io, const struct sc_http_request *r,
			  const struct sc_net_entry *e, struct outcome *o)
{
	bool has_body = r->chunked || r->content_length;
	struct sc_http_body body = {.r = r, .n_raw = &o->rec.bytes_out};
	if (!r->chunked && r->content_length > io->g->o.body_max_bytes) {
		snprintf(o->rule, sizeof(o->rule), "%s", body_why(-E2BIG));
		respond_error(io, 413, o->rule, false);
		return;
	}
	if (io->c->admit && !io->c->admit(io->c->audit_ctx, o->rule, sizeof(o->rule))) {
		refuse_request(io, r, 403, o);
		return;
	}
	o->rec.allowed = true; /* from here it is recorded so, in the room admit held */
	if (has_body && r->expect_continue) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
		if (sc__http_io_write(io, cont, sizeof(cont) - 1)) {
			snprintf(o->rule, sizeof(o->rule), "%s: %s", e->target,
				 io->why ? io->why : "write to the cell failed");
			return;
		}
		io->bytes_in += sizeof(cont) - 1;
	}
	struct sc_http_upstream_result res = {0};
	bool tls = io->tls || e->scheme == SC_NET_SCHEME_HTTPS;
	sc__http_upstream(io, r, e, tls, has_body ? &body : NULL, &res);
	o->rec.header_added = e->n_headers > 0;
	o->rec.upstream_tls = tls;
	o->rec.status = res.status;
	/* A body curl did not take to its end leaves the connection mid-request. */
	bool in_step = !has_body || body.done;
	if (body.err)
		snprintf(res.why, sizeof(res.why), "%s", body_why(body.err));
	if (!res.why[0]) {
		snprintf(o->rule, sizeof(o->rule), "%s", e->target);
		o->keep = res.reusable && r->keep_alive && in_step;
		return;
	}
	snprintf(o->rule, sizeof(o->rule), "%s: %s", e->target, res.why);
	if (!res.head_sent) {
		int status = body.err == -E2BIG	   ? 413
			     : body.err == -EINVAL ? 400
			     : io->spent	   ? 403
						   : 502;
		o->rec.status = 0;
		o->keep = r->keep_alive && in_step && !io->spent;
		if (body.err != -EPIPE)
			respond_error(io, status, o->rule, o->keep);
	}
}

/* Credentials never cross in cleartext: an https:// entry is reached over TLS only (a cell
 * speaking plain HTTP to its port 443, or following a redirect to http://, is refused
 * rather than have the host make the request in the clear), and an entry that adds headers
 * adds them over TLS only (http:// entries cannot have headers: list.c). True, with the
 * rule, when a plain-HTTP request to e must be refused. */
static bool cleartext_refused(const struct sc_net_entry *e, char *why, size_t why_len)
{
	if (e->scheme == SC_NET_SCHEME_HTTPS)
		snprintf(why, why_len,
			 "%s was allowed as https://: plain HTTP to it is refused (use https://)",
			 e->target);
	else if (e->n_headers)
		snprintf(why, why_len,
			 "%s adds headers, which go over TLS only: plain HTTP to it is refused "
			 "(use https://)",
			 e->target);
	else
		return false;
	return true;
}

/* Checks one parsed request and answers it. */
static void serve_request(struct sc_http_io *io, const struct sc_http_request *r, struct outcome *o)
{
	size_t path_len = strcspn(r->target, "?");
	if (path_len > PATH_MAX_BYTES) {
		snprintf(o->rule, sizeof(o->rule), "request path over %d bytes", PATH_MAX_BYTES);
		snprintf(o->path, sizeof(o->path), "%.*s", PATH_MAX_BYTES, r->target);
		respond_error(io, 414, o->rule, false);
		return;
	}
	memcpy(o->path, r->target, path_len);
	o->path[path_len] = 0;
	if (!host_matches(io, r->host)) {
		snprintf(o->rule, sizeof(o->rule), "the Host header does not name %s", io->c->host);
		refuse_request(io, r, 403, o);
		return;
	}
	char why[256];
	const struct sc_net_entry *e = sc__net_match_request(io->c->entries, io->c->n_entries,
							     r->method, o->path, why, sizeof(why));
	if (!e) {
		snprintf(o->rule, sizeof(o->rule), "%s", why);
		refuse_request(io, r, 403, o);
		return;
	}
	if (!io->tls && cleartext_refused(e, o->rule, sizeof(o->rule))) {
		refuse_request(io, r, 403, o);
		return;
	}
	serve_allowed(io, r, e, o);
}

/* Reads and answers one request. False when the connection is to end. */
static bool serve_one(struct sc_http_io *io)
{
	size_t head_len;
	uint64_t t0 = sc__now_us();
	while (!(head_len = sc__http_head_len(io->in, io->in_len))) {
		ssize_t n = fill(io);
		if (n > 0)
			continue;
		if (n == -ENOBUFS) {
			struct sc_http_record r = {.method = "",
						   .path = "",
						   .rule = "request head over 64 KiB",
						   .bytes_out = io->in_len};
			respond_error(io, 431, r.rule, false);
			r.bytes_in = io->bytes_in;
			r.duration_us = sc__now_us() - t0;
			audit(io, &r);
		} else if (io->in_len) {
			struct sc_http_record r = {.method = "",
						   .path = "",
						   .bytes_out = io->in_len,
						   .rule = !n	     ? "incomplete request"
							   : io->why ? io->why
								     : "read failed"};
			r.duration_us = sc__now_us() - t0;
			audit(io, &r);
		}
		return false;
	}
	struct outcome o = {0};
	io->bytes_in = 0;
	memcpy(io->head, io->in, head_len);
	consume(io, head_len);
	o.rec.bytes_out = head_len;
	struct sc_http_request req;
	struct sc_http_refusal ref;
	if (sc__http_parse_head(io->head, head_len, &req, &ref)) {
		snprintf(o.rule, sizeof(o.rule), "%s", ref.why);
		respond_error(io, ref.status, ref.why, false);
	} else {
		serve_request(io, &req, &o);
	}
	o.rec.method = req.method ? req.method : "";
	o.rec.path = o.path;
	o.rec.rule = o.rule;
	o.rec.bytes_in = io->bytes_in;
	o.rec.duration_us = sc__now_us() - t0;
	audit(io, &o.rec);
	return o.keep;
}

static void gate_enter(struct sc_http_gate *g, int delta)
{
	pthread_mutex_lock(&g->lock);
	g->n_active += (size_t)delta;
	if (!g->n_active)
		pthread_cond_broadcast(&g->drained);
	pthread_mutex_unlock(&g->lock);
}

/* The first byte of a TLS connection is a handshake record (22). */
static int detect_tls(struct sc_http_io *io, bool *tls)
{
	unsigned char b;
	for (;;) {
		int rc = io_wait(io, POLLIN);
		if (rc)
			return rc;
		ssize_t n = recv(io->c->fd, &b, 1, MSG_PEEK);
		if (n == 1) {
			*tls = b == 0x16;
			return 0;
		}
		if (n == 0)
			return -EPIPE;
		if (errno != EAGAIN && errno != EINTR)
			return -errno;
	}
}

int sc__http_serve(struct sc_http_gate *g, const struct sc_http_conn *c)
{
	uint64_t t0 = sc__now_us();
	gate_enter(g, 1);
	struct sc_http_io *io = calloc(1, sizeof(*io));
	int rc = io ? 0 : -ENOMEM;
	if (io) {
		io->g = g, io->c = c, io->last_io_us = t0, io->deadline_us = c->deadline_us;
		int fl = fcntl(c->fd, F_GETFL);
		bool tls = false;
		if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0)
			rc = -errno;
		else if ((rc = detect_tls(io, &tls)) == -EPIPE)
			rc = 0; /* closed before a byte: nothing to serve or audit */
		else if (rc)
			audit_failure(io, t0);
		else if (tls && (rc = tls_start(io)))
			audit_failure(io, t0);
		else
			while (serve_one(io) && !sc__http_io_stopped(io)) {
			}
		sc__http_upstream_close(io);
		if (io->tls) {
			if (!io->why) /* a clean end: close_notify, bounded by the same waits */
				gnutls_bye(io->tls, GNUTLS_SHUT_WR);
			gnutls_deinit(io->tls);
		}
		sc__http_ca_release(g->ca, io->leaf);
		free(io);
	}
	close(c->fd);
	gate_enter(g, -1);
	return rc;
}
