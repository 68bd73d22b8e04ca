/* One connection through the egress gate, on its own thread: the decision (gate_resolve.c),
 * the first bytes (a TLS ClientHello whose server name must be the one dialled, or plain
 * HTTP), then the HTTP gate for entries with HTTP rules and plain HTTP to names, or an
 * upstream connection and the splice that moves bytes both ways, charged to the run's byte
 * budget, until both sides have closed, an error, the idle timeout, the deadline, the byte
 * budget or the stop signal. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gate_internal.h"
#include "http.h"
#include "util/cleanup.h"
#include "util/util.h"

#define PEEK_MAX   (5 + (1u << 14)) /* one TLS record */
#define SPLICE_BUF (64u << 10)

/* ---- connections ---- */

/* Waits for fd (events) or the stop signal, bounded by ms and the run's deadline: 1 ready,
 * 0 timed out or stopped. */
static int wait_for(const struct sc_gate_cell *c, int fd, short events, uint64_t ms)
{
	uint64_t now = sc__now_us(), until = now + ms * 1000;
	if (until > c->deadline_us)
		until = c->deadline_us;
	struct pollfd p[2] = {{fd, events, 0}, {c->stop_fd, POLLIN, 0}};
	int timeout = until > now ? (int)((until - now + 999) / 1000) : 0;
	int n;
	do
		n = poll(p, 2, timeout);
	while (n < 0 && errno == EINTR);
	return n > 0 && !p[1].revents && p[0].revents ? 1 : 0;
}

static int connect_upstream(struct sc_gate_cell *c, const struct decision *d, char *why)
{
	int fd SC_AUTO_CLOSE =
		socket(d->up.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, WHY_LEN, "socket: %s", strerror(errno));
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)&d->up, d->up_len) < 0 && errno != EINPROGRESS) {
		snprintf(why, WHY_LEN, "connect %s: %s", d->address, strerror(errno));
		return -1;
	}
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	if (wait_for(c, fd, POLLOUT, c->g->o.connect_timeout_ms) != 1) {
		snprintf(why, WHY_LEN, "connect %s: no answer in time", d->address);
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr) {
		snprintf(why, WHY_LEN, "connect %s: %s", d->address,
			 strerror(soerr ? soerr : errno));
		return -1;
	}
	return SC_STEAL_FD(fd);
}

/* Charges n bytes to the run's budget as they move; false once it is spent (the caller
 * stops moving them). */
static bool charge(struct sc_gate_cell *c, uint64_t n)
{
	pthread_mutex_lock(&c->lock);
	c->bytes += n;
	bool ok = c->bytes <= c->g->o.max_bytes;
	if (!ok)
		c->hits |= SNAPCELL_NET_HIT_BYTES;
	pthread_mutex_unlock(&c->lock);
	return ok;
}

#define BUDGET_SPENT "the run's network byte budget (net_bytes, %llu bytes) is spent"

/* Lock held. Whether new traffic may start: the byte budget has room and an allowed event
 * can be recorded (reserved when it can; sc__gate_record(..., true) takes it). why when not. */
static bool admit(struct sc_gate_cell *c, char *why, size_t why_len)
{
	if (c->bytes >= c->g->o.max_bytes) {
		c->hits |= SNAPCELL_NET_HIT_BYTES;
		snprintf(why, why_len, BUDGET_SPENT, (unsigned long long)c->g->o.max_bytes);
		return false;
	}
	if (!sc__gate_reserve(c)) {
		snprintf(why, why_len, SC_NET_RECORD_FULL, SC_NET_RECORD_ALLOWED);
		return false;
	}
	return true;
}

struct pipe_dir {
	int from, to;
	uint8_t *buf;
	size_t len, off;
	bool eof, shut;
	uint64_t bytes;
};

/* Moves bytes both ways until both sides have closed, an error, the idle timeout, the
 * deadline, the byte budget or the stop signal. */
static void splice_streams(struct sc_gate_cell *c, int cell_fd, int up_fd, const uint8_t *prefix,
			   size_t prefix_len, uint64_t *out, uint64_t *in, char *why)
{
	uint8_t *mem = malloc(2 * SPLICE_BUF);
	struct pipe_dir dir[2] = {
		{cell_fd, up_fd, mem, 0, 0, false, false, 0},
		{up_fd, cell_fd, mem ? mem + SPLICE_BUF : NULL, 0, 0, false, false, 0}};
	bool spent = false;
	if (!mem) {
		snprintf(why, WHY_LEN, "out of memory");
	} else if (prefix_len) { /* what the cell sent before the gate decided (PEEK_MAX) */
		/* Charged like any other bytes: a ClientHello can carry 16 KiB of the cell's
		 * choosing (an attack moved 1 MB under a 256 KiB budget in hellos). */
		spent = !charge(c, prefix_len);
		memcpy(dir[0].buf, prefix, prefix_len);
		dir[0].len = spent ? 0 : prefix_len;
		dir[0].bytes = prefix_len;
		if (spent)
			snprintf(why, WHY_LEN, BUDGET_SPENT, (unsigned long long)c->g->o.max_bytes);
	}
	while (mem && !spent && !(dir[0].shut && dir[1].shut)) {
		struct pollfd p[3] = {{c->stop_fd, POLLIN, 0}, {cell_fd, 0, 0}, {up_fd, 0, 0}};
		for (int i = 0; i < 2; i++) {
			struct pollfd *src = &p[dir[i].from == cell_fd ? 1 : 2];
			struct pollfd *dst = &p[dir[i].to == cell_fd ? 1 : 2];
			if (dir[i].len == 0 && !dir[i].eof)
				src->events |= POLLIN;
			if (dir[i].len > dir[i].off)
				dst->events |= POLLOUT;
		}
		uint64_t now = sc__now_us();
		if (now >= c->deadline_us) {
			snprintf(why, WHY_LEN, "the run's time is up");
			break;
		}
		uint64_t idle = c->g->o.idle_timeout_ms * 1000;
		uint64_t until = now + idle < c->deadline_us ? now + idle : c->deadline_us;
		int n = poll(p, 3, (int)((until - now + 999) / 1000));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(why, WHY_LEN, n == 0 ? "idle for %llu ms" : "poll failed",
				 (unsigned long long)c->g->o.idle_timeout_ms);
			break;
		}
		if (p[0].revents)
			break;
		/* A side that closed both ways (or failed) while we no longer read it would
		 * make poll return at once forever. */
		bool failed = false;
		for (int k = 1; k <= 2; k++) {
			bool read_done = dir[p[k].fd == cell_fd ? 0 : 1].eof;
			if ((p[k].revents & (POLLERR | POLLNVAL)) ||
			    ((p[k].revents & POLLHUP) && read_done))
				failed = true;
		}
		for (int i = 0; i < 2 && !failed; i++) {
			struct pipe_dir *d = &dir[i];
			if (d->len == 0 && !d->eof) {
				ssize_t r = recv(d->from, d->buf, SPLICE_BUF, MSG_DONTWAIT);
				if (r > 0) {
					d->len = (size_t)r, d->off = 0;
					d->bytes += (uint64_t)r;
					if (!charge(c, (uint64_t)r)) {
						/* The bytes that crossed the budget stay here. */
						snprintf(why, WHY_LEN, BUDGET_SPENT,
							 (unsigned long long)c->g->o.max_bytes);
						failed = true;
						break;
					}
				} else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
					d->eof = true;
				}
			}
			if (d->len > d->off) {
				ssize_t w = send(d->to, d->buf + d->off, d->len - d->off,
						 MSG_DONTWAIT | MSG_NOSIGNAL);
				if (w > 0)
					d->off += (size_t)w;
				else if (w < 0 && errno != EAGAIN && errno != EINTR)
					failed = true;
				if (d->off == d->len)
					d->len = d->off = 0;
			}
			if (d->eof && d->len == 0 && !d->shut) {
				shutdown(d->to, SHUT_WR);
				d->shut = true;
			}
		}
		if (failed)
			break;
	}
	free(mem);
	*out = dir[0].bytes;
	*in = dir[1].bytes;
}

/* What the cell sent first: a TLS ClientHello, read (consumed) into h until its server
 * name is known, or not TLS (one byte peeked, nothing consumed, for the HTTP gate to read).
 * 1 with sni (empty when the hello has none), 0 not TLS, -1 nothing usable in time (why
 * filled). */
struct hello {
	uint8_t buf[PEEK_MAX];
	size_t len;
};

static int read_hello(struct sc_gate_cell *c, int fd, struct hello *h, char *sni, size_t sni_len,
		      char *why)
{
	int rc = -1;
	ssize_t n = 1;
	uint64_t until = sc__deadline_ms(c->g->o.connect_timeout_ms), now;
	sni[0] = 0;
	h->len = 0;
	/* One deadline for the whole hello, however it trickles in. */
	while (n > 0 && (now = sc__now_us()) < until &&
	       wait_for(c, fd, POLLIN, (until - now + 999) / 1000) == 1) {
		if (h->len == 0) {
			uint8_t first;
			n = recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT);
			if (n == 1 && first != 0x16) {
				rc = 0;
				break;
			}
		}
		n = recv(fd, h->buf + h->len, sizeof(h->buf) - h->len, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			n = 1;
			continue;
		}
		if (n <= 0)
			break;
		h->len += (size_t)n;
		int s = sc__tls_sni(h->buf, h->len, sni, sni_len);
		if (s == -EAGAIN && h->len < sizeof(h->buf))
			continue;
		rc = s >= 0 ? 1 : -1;
		if (s < 0)
			snprintf(why, WHY_LEN, "not a TLS ClientHello the gate can read");
		break;
	}
	struct pollfd stop = {c->stop_fd, POLLIN, 0};
	if (rc == -1 && !why[0])
		snprintf(why, WHY_LEN, "%s",
			 n == 0			  ? "the code closed the connection first"
			 : poll(&stop, 1, 0) == 1 ? "the run ended before the code sent anything"
						  : "no TLS or HTTP request in time");
	return rc;
}

struct request_sink {
	struct sc_gate_cell *c;
	const struct decision *d;
	uint16_t port;
};

static void on_request(void *ctx, const struct sc_http_record *r)
{
	struct request_sink *s = ctx;
	struct snapcell_net_event e = {.kind = SNAPCELL_NET_REQUEST,
				       .allowed = r->allowed,
				       .target = s->d->host,
				       .address = s->d->address,
				       .port = s->port,
				       .method = r->method,
				       .path = r->path,
				       .http_status = r->status,
				       .header_added = r->header_added,
				       .rule = r->rule,
				       .bytes_out = r->bytes_out,
				       .bytes_in = r->bytes_in,
				       .duration_us = r->duration_us,
				       .upstream_tls = r->upstream_tls};
	/* The HTTP gate marks a request allowed only after on_admit held its room. */
	sc__gate_record_locked(s->c, &e, r->allowed);
}

static bool on_admit(void *ctx, char *why, size_t why_len)
{
	struct request_sink *s = ctx;
	pthread_mutex_lock(&s->c->lock);
	bool ok = admit(s->c, why, why_len);
	pthread_mutex_unlock(&s->c->lock);
	return ok;
}

static bool on_charge(void *ctx, uint64_t n)
{
	struct request_sink *s = ctx;
	return charge(s->c, n);
}

static bool any_http(const struct decision *d)
{
	for (size_t i = 0; i < d->n_cands; i++)
		if (sc__net_entry_http(d->cands[i]))
			return true;
	return false;
}

/* Refuses with a reset, so the code's read fails at once. */
void sc__gate_reset(int fd)
{
	struct linger l = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

void sc__gate_serve(struct sc_gate_cell *c, int fd)
{
	struct sockaddr_storage dialled;
	socklen_t len = sizeof(dialled);
	struct decision d;
	uint64_t t0 = sc__now_us();
	if (getsockname(fd, (struct sockaddr *)&dialled, &len) < 0) {
		close(fd);
		return;
	}
	uint16_t port =
		ntohs(dialled.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&dialled)->sin6_port
						    : ((struct sockaddr_in *)&dialled)->sin_port);
	sc__gate_decide(c, (struct sockaddr *)&dialled, &d);
	struct snapcell_net_event e = {.kind = SNAPCELL_NET_CONNECT,
				       .target = d.host,
				       .address = d.ok ? d.address : NULL,
				       .port = port};
	char why[WHY_LEN] = "", sni[SC_NET_HOST_MAX + 2];
	bool reserved = false;
	/* A stream passed through is read up to its ClientHello when it goes to a name (the
	 * SNI must name it) or to an IP-literal https:// entry (a whole ClientHello, any name:
	 * a first byte of 0x16 let plain HTTP through, recorded as TLS). */
	bool pass = d.ok && !any_http(&d);
	bool ip_tls = pass && !d.named && d.cands[0]->scheme == SC_NET_SCHEME_HTTPS;
	struct hello *h = pass && (d.named || ip_tls) ? malloc(sizeof(*h)) : NULL;
	int hello = h ? read_hello(c, fd, h, sni, sizeof(sni), why) : 0;
	if (pass && (d.named || ip_tls) && !h)
		hello = -1, snprintf(why, sizeof(why), "out of memory");
	if (!d.ok) {
		e.rule = d.why;
	} else if (hello < 0) {
		e.rule = why;
	} else if (d.named && hello == 1 && strcmp(sni, d.host) != 0) {
		snprintf(why, sizeof(why), "TLS for %.100s on a connection to %.100s",
			 sni[0] ? sni : "(no name)", d.host);
		e.rule = why;
	} else if (any_http(&d) || (d.named && hello == 0)) {
		/* HTTP rules, or plain HTTP to a name: the HTTP gate checks every request. */
		struct request_sink sink = {c, &d, port};
		struct sc_http_conn hc = {.fd = fd,
					  .host = d.host,
					  .port = port,
					  .upstream = (struct sockaddr *)&d.up,
					  .upstream_len = d.up_len,
					  .entries = d.cands,
					  .n_entries = d.n_cands,
					  .deadline_us = c->deadline_us,
					  .stop_fd = c->stop_fd,
					  .audit = on_request,
					  .admit = on_admit,
					  .charge = on_charge,
					  .audit_ctx = &sink};
		free(h);
		sc__http_serve(c->g->http, &hc);
		return;
	} else if (ip_tls && hello != 1) {
		snprintf(why, sizeof(why),
			 "%.150s was allowed as https://: a stream that does not start TLS is "
			 "refused",
			 d.cands[0]->target);
		e.rule = why;
	} else {
		pthread_mutex_lock(&c->lock);
		reserved = admit(c, why, sizeof(why));
		pthread_mutex_unlock(&c->lock);
		int up = reserved ? connect_upstream(c, &d, why) : -1;
		if (up >= 0) {
			e.allowed = true;
			e.rule = d.cands[0]->target;
			char end[WHY_LEN] = "";
			splice_streams(c, fd, up, h ? h->buf : NULL, h ? h->len : 0, &e.bytes_out,
				       &e.bytes_in, end);
			close(up);
		} else {
			e.rule = why;
		}
	}
	free(h);
	e.upstream_tls = e.allowed && hello == 1;
	e.duration_us = sc__now_us() - t0;
	sc__gate_record_locked(c, &e, reserved);
	if (e.allowed)
		close(fd);
	else
		sc__gate_reset(fd);
}
