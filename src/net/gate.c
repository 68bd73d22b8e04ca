/* The egress gate: see gate.h. One thread per running cell accepts on the cell's listeners
 * and answers its network socket; one thread per connection decides, connects upstream and
 * passes bytes through (or hands the connection to the HTTP gate). Every decision is made
 * from what the host knows (the address the cell dialled, the name the host gave that
 * address, the allow-list, the address the host resolved and pinned), never from what the
 * cell says about itself. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gate.h"
#include "http.h"
#include "record.h"
#include "rpc/frame.h"
#include "util/util.h"

#define EXACT_BASE   0x7f4d0000u /* 127.77.0.0/16: the sandbox's exact names */
#define DYNAMIC_BASE 0x7f4e0000u /* 127.78.0.0/16: names a cell asked for (wildcards) */
#define MAX_NAMES    256	 /* distinct names one cell may resolve */
#define QUESTION_MAX 1024
#define PEEK_MAX     (5 + (1u << 14)) /* one TLS record */
#define SPLICE_BUF   (64u << 10)
#define CONN_STACK   (512u << 10)
#define WHY_LEN	     256

struct sc_gate {
	struct sc_gate_options o;
	char **names; /* exact names: names[i] is at EXACT_BASE + i + 1 */
	size_t n_names;
	char *hosts;
	const char **addresses; /* the entries' IP literals (borrowed from the list) */
	size_t n_addresses;
	bool v6;
	uint16_t ports[SC_NET_MAX_PORTS];
	size_t n_ports;
	struct sc_http_gate *http;
};

/* A name this cell's code may reach: resolved once, and pinned. */
struct pin {
	char *name;
	uint32_t synthetic; /* the loopback address the cell was given (host order) */
	bool resolved, ok;
	struct sockaddr_storage up; /* port 0; the connection's port is set per connection */
	socklen_t up_len;
	char why[WHY_LEN];
};

struct conn {
	struct sc_gate_cell *c;
	int fd;
	pthread_t thread;
	bool done; /* set by the thread as its last act, under c->lock */
};

struct sc_gate_cell {
	struct sc_gate *g;
	int net_fd;
	const int *listeners;
	size_t n_listeners;
	int stop_fd;
	uint64_t started_us, deadline_us;
	pthread_t thread;
	struct sc_frame_reader reader;
	bool net_dead;

	pthread_mutex_t lock; /* guards everything below */
	struct pin pins[MAX_NAMES];
	size_t n_pins;
	uint32_t n_dynamic;
	struct conn **conns;
	size_t n_conns, cap_conns, open;
	uint64_t bytes;
	struct sc_net_record record;
	uint32_t hits;
};

/* What one connection (or a question about one) comes to. */
struct decision {
	bool ok, named;
	char host[SC_NET_HOST_MAX + 1]; /* the name, or the address as text */
	const struct sc_net_entry *cands[16];
	size_t n_cands;
	struct sockaddr_storage up;
	socklen_t up_len;
	char address[INET6_ADDRSTRLEN]; /* of up */
	char why[WHY_LEN];
};

/* ---- the sandbox's gate ---- */

static bool has_name(char **names, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return true;
	return false;
}

int sc__gate_new(const struct sc_gate_options *o, struct sc_gate **out, struct snapcell_error *err)
{
	const struct sc_net_list *l = o->list;
	struct sc_gate *g = calloc(1, sizeof(*g));
	if (!g || !(g->names = calloc(l->n + 1, sizeof(char *))) ||
	    !(g->addresses = calloc(l->n + 1, sizeof(char *)))) {
		sc__gate_free(g);
		return sc__err(err, -ENOMEM, "network gate");
	}
	g->o = *o;
	size_t hosts_len = 0;
	for (size_t i = 0; i < l->n; i++) {
		const struct sc_net_entry *e = &l->entries[i];
		if (e->kind == SC_NET_NAME && !has_name(g->names, g->n_names, e->host)) {
			if (!(g->names[g->n_names++] = strdup(e->host))) {
				sc__gate_free(g);
				return sc__err(err, -ENOMEM, "network gate");
			}
			hosts_len += strlen(e->host) + 20;
		} else if (e->kind == SC_NET_IPV4 || e->kind == SC_NET_IPV6) {
			bool seen = false;
			for (size_t j = 0; j < g->n_addresses; j++)
				seen |= strcmp(g->addresses[j], e->host) == 0;
			if (!seen)
				g->addresses[g->n_addresses++] = e->host;
			g->v6 |= e->kind == SC_NET_IPV6;
		}
	}
	if (!(g->hosts = malloc(hosts_len + 1))) {
		sc__gate_free(g);
		return sc__err(err, -ENOMEM, "network gate");
	}
	size_t at = 0;
	for (size_t i = 0; i < g->n_names; i++) {
		uint32_t a = EXACT_BASE + (uint32_t)i + 1;
		at += (size_t)sprintf(g->hosts + at, "127.77.%u.%u %s\n", (a >> 8) & 255, a & 255,
				      g->names[i]);
	}
	g->hosts[at] = 0;
	g->n_ports = sc__net_list_ports(l, g->ports);
	struct sc_http_gate_options ho = {
		.upstream_ca_file = o->upstream_ca_file,
		.connect_timeout_ms = o->connect_timeout_ms,
		.idle_timeout_ms = o->idle_timeout_ms,
		.body_max_bytes = o->max_bytes < (64u << 20) ? o->max_bytes : (64u << 20),
	};
	int rc = sc__http_gate_new(&ho, &g->http, err);
	if (rc < 0) {
		sc__gate_free(g);
		return sc__err_wrap(err, rc, "network gate");
	}
	*out = g;
	return 0;
}

void sc__gate_free(struct sc_gate *g)
{
	if (!g)
		return;
	for (size_t i = 0; g->names && i < g->n_names; i++)
		free(g->names[i]);
	free(g->names);
	free(g->addresses);
	free(g->hosts);
	sc__http_gate_free(g->http);
	free(g);
}

const char *sc__gate_hosts(const struct sc_gate *g)
{
	return g->hosts;
}

const char *sc__gate_ca_pem(const struct sc_gate *g)
{
	return sc__http_gate_ca_pem(g->http);
}

size_t sc__gate_addresses(const struct sc_gate *g, const char *const **out)
{
	*out = g->addresses;
	return g->n_addresses;
}

bool sc__gate_v6(const struct sc_gate *g)
{
	return g->v6;
}

size_t sc__gate_ports(const struct sc_gate *g, const uint16_t **out)
{
	*out = g->ports;
	return g->n_ports;
}

size_t sc__gate_cell_fds(const struct sc_gate *g)
{
	return 1 + g->n_ports * (g->v6 ? 2 : 1);
}

/* ---- the record ---- */

/* Lock held. */
static void record(struct sc_gate_cell *c, const struct snapcell_net_event *e, bool reserved)
{
	if (!sc__net_record_add(&c->record, e, reserved))
		c->hits |= SNAPCELL_NET_HIT_EVENTS;
}

/* Lock held. */
static bool reserve(struct sc_gate_cell *c)
{
	if (sc__net_record_reserve(&c->record))
		return true;
	c->hits |= SNAPCELL_NET_HIT_EVENTS;
	return false;
}

static void record_locked(struct sc_gate_cell *c, const struct snapcell_net_event *e, bool reserved)
{
	pthread_mutex_lock(&c->lock);
	record(c, e, reserved);
	pthread_mutex_unlock(&c->lock);
}

/* ---- names ---- */

static bool valid_name(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > SC_NET_HOST_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
		      s[i] == '.' || s[i] == '_'))
			return false;
	return true;
}

/* The first entry that allows name on some port, or NULL. */
static const struct sc_net_entry *name_entry(const struct sc_gate *g, const char *name)
{
	const struct sc_net_entry *e = NULL;
	for (size_t i = 0; !e && i < g->n_ports; i++)
		sc__net_match_host(g->o.list, name, g->ports[i], &e, 1);
	return e;
}

static void address_text(const struct sockaddr *sa, char *out, size_t len)
{
	const void *a = sa->sa_family == AF_INET6
				? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
				: (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
	if (!inet_ntop(sa->sa_family, a, out, (socklen_t)len))
		snprintf(out, len, "?");
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)ss)->sin_port = htons(port);
}

static bool parse_address(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, text, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		*len = sizeof(*a4);
		return true;
	}
	if (inet_pton(AF_INET6, text, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		*len = sizeof(*a6);
		return true;
	}
	return false;
}

/* The system resolver, bounded: getaddrinfo_a, abandoned at the deadline. A request that
 * cannot be cancelled keeps its (small) allocation, which glibc still writes to. */
static int system_lookup(const char *name, uint64_t deadline_us, struct addrinfo **out)
{
	struct lookup {
		struct gaicb cb;
		struct addrinfo hints;
		char name[SC_NET_HOST_MAX + 1];
	} *l = calloc(1, sizeof(*l));
	if (!l)
		return EAI_MEMORY;
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->hints = (struct addrinfo){.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
	l->cb = (struct gaicb){.ar_name = l->name, .ar_request = &l->hints};
	struct gaicb *list[1] = {&l->cb};
	struct sigevent none = {.sigev_notify = SIGEV_NONE};
	int rc = getaddrinfo_a(GAI_NOWAIT, list, 1, &none);
	if (rc != 0) {
		free(l);
		return rc;
	}
	while ((rc = gai_error(&l->cb)) == EAI_INPROGRESS) {
		uint64_t now = sc__now_us();
		if (now >= deadline_us) {
			if (gai_cancel(&l->cb) == EAI_CANCELED ||
			    gai_error(&l->cb) != EAI_INPROGRESS)
				break;
			return EAI_AGAIN; /* l stays with glibc */
		}
		uint64_t wait = deadline_us - now;
		struct timespec ts = {(time_t)(wait / 1000000), (long)(wait % 1000000) * 1000};
		gai_suspend((const struct gaicb *const *)list, 1, &ts);
	}
	rc = gai_error(&l->cb);
	*out = rc == 0 ? l->cb.ar_result : NULL;
	if (rc != 0 && l->cb.ar_result)
		freeaddrinfo(l->cb.ar_result);
	free(l);
	return rc;
}

/* Resolves name once (a mapped address, else the system's resolver), refusing it when any
 * address it resolves to is one the address rules refuse (DNS rebinding fails closed).
 * Pins the first (IPv4 preferred). */
static void resolve(const struct sc_gate *g, struct pin *p, uint64_t deadline_us)
{
	p->resolved = true;
	for (size_t i = 0; i < g->o.n_maps; i++) {
		if (strcmp(g->o.map_names[i], p->name) != 0)
			continue;
		if (!parse_address(g->o.map_addresses[i], &p->up, &p->up_len)) {
			snprintf(p->why, sizeof(p->why), "%s is mapped to a bad address", p->name);
			return;
		}
		const char *cls;
		if (sc__net_addr_check((struct sockaddr *)&p->up, p->up_len, &cls) < 0) {
			snprintf(p->why, sizeof(p->why), "%s resolves to %s, a %s address", p->name,
				 g->o.map_addresses[i], cls);
			return;
		}
		p->ok = true;
		return;
	}
	struct addrinfo *res = NULL;
	int rc = system_lookup(p->name, deadline_us, &res);
	if (rc != 0) {
		snprintf(p->why, sizeof(p->why), "cannot resolve %s: %s", p->name,
			 rc == EAI_AGAIN ? "no answer in time" : gai_strerror(rc));
		return;
	}
	const struct addrinfo *pick = NULL;
	for (const struct addrinfo *a = res; a; a = a->ai_next) {
		const char *cls;
		if (a->ai_family != AF_INET && a->ai_family != AF_INET6)
			continue;
		if (sc__net_addr_check(a->ai_addr, a->ai_addrlen, &cls) < 0) {
			char text[INET6_ADDRSTRLEN];
			address_text(a->ai_addr, text, sizeof(text));
			snprintf(p->why, sizeof(p->why), "%s resolves to %s, a %s address", p->name,
				 text, cls);
			freeaddrinfo(res);
			return;
		}
		if (!pick || (pick->ai_family == AF_INET6 && a->ai_family == AF_INET))
			pick = a;
	}
	if (!pick) {
		snprintf(p->why, sizeof(p->why), "%s has no address", p->name);
	} else {
		memcpy(&p->up, pick->ai_addr, pick->ai_addrlen);
		p->up_len = pick->ai_addrlen;
		p->ok = true;
	}
	freeaddrinfo(res);
}

/* Lock held. */
static struct pin *find_pin(struct sc_gate_cell *c, const char *name, uint32_t synthetic)
{
	for (size_t i = 0; i < c->n_pins; i++)
		if ((name && strcmp(c->pins[i].name, name) == 0) ||
		    (!name && c->pins[i].synthetic == synthetic))
			return &c->pins[i];
	return NULL;
}

static uint32_t exact_address(const struct sc_gate *g, const char *name)
{
	for (size_t i = 0; i < g->n_names; i++)
		if (strcmp(g->names[i], name) == 0)
			return EXACT_BASE + (uint32_t)i + 1;
	return 0;
}

/* The pinned record of an allowed name, resolving it the first time; NULL (why filled)
 * past the cell's name cap. The caller has checked that an entry allows the name. */
static struct pin *pin_name(struct sc_gate_cell *c, const char *name, char *why)
{
	pthread_mutex_lock(&c->lock);
	struct pin *p = find_pin(c, name, 0);
	if (!p && c->n_pins < MAX_NAMES) {
		uint32_t synthetic = exact_address(c->g, name);
		if (!synthetic && c->n_dynamic < 65534)
			synthetic = DYNAMIC_BASE + ++c->n_dynamic;
		char *copy = synthetic ? strdup(name) : NULL;
		if (copy) {
			p = &c->pins[c->n_pins++];
			*p = (struct pin){.name = copy, .synthetic = synthetic};
		}
	}
	if (!p) {
		c->hits |= SNAPCELL_NET_HIT_NAMES;
		snprintf(why, WHY_LEN, "this run asked for more than %d names", MAX_NAMES);
		pthread_mutex_unlock(&c->lock);
		return NULL;
	}
	bool todo = !p->resolved;
	pthread_mutex_unlock(&c->lock);
	if (todo) {
		/* Resolved outside the lock; a racing resolution of the same name is harmless
		 * (the first to finish is kept). */
		struct pin fresh = {.name = p->name};
		resolve(c->g, &fresh,
			sc__deadline_ms(c->g->o.connect_timeout_ms) < c->deadline_us
				? sc__deadline_ms(c->g->o.connect_timeout_ms)
				: c->deadline_us);
		pthread_mutex_lock(&c->lock);
		if (!p->resolved) {
			p->resolved = true, p->ok = fresh.ok;
			p->up = fresh.up, p->up_len = fresh.up_len;
			memcpy(p->why, fresh.why, sizeof(p->why));
		}
		pthread_mutex_unlock(&c->lock);
	}
	return p;
}

/* ---- decisions ---- */

static void deny(struct decision *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void deny(struct decision *d, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->why, sizeof(d->why), fmt, ap);
	va_end(ap);
	d->ok = false;
}

/* Where a connection to `dialled` (what the cell connected to, port included) may go. */
static void decide(struct sc_gate_cell *c, const struct sockaddr *dialled, struct decision *d)
{
	const struct sc_gate *g = c->g;
	*d = (struct decision){0};
	uint16_t port;
	uint32_t v4 = 0;
	if (dialled->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)dialled;
		port = ntohs(a->sin_port);
		v4 = ntohl(a->sin_addr.s_addr);
	} else {
		port = ntohs(((const struct sockaddr_in6 *)dialled)->sin6_port);
	}
	if ((v4 & 0xffff0000u) == EXACT_BASE || (v4 & 0xffff0000u) == DYNAMIC_BASE) {
		d->named = true;
		const char *name = NULL;
		if ((v4 & 0xffff0000u) == EXACT_BASE && (v4 & 0xffff) >= 1 &&
		    (v4 & 0xffff) <= g->n_names)
			name = g->names[(v4 & 0xffff) - 1];
		pthread_mutex_lock(&c->lock);
		struct pin *known = name ? NULL : find_pin(c, NULL, v4);
		if (known)
			name = known->name;
		if (name)
			snprintf(d->host, sizeof(d->host), "%s", name);
		pthread_mutex_unlock(&c->lock);
		if (!name) {
			address_text(dialled, d->host, sizeof(d->host));
			return deny(d, "%s is no address this sandbox gave out", d->host);
		}
	} else {
		address_text(dialled, d->host, sizeof(d->host));
	}
	d->n_cands = sc__net_match_host(g->o.list, d->host, port, d->cands, SC_ARRAY_LEN(d->cands));
	if (d->n_cands > SC_ARRAY_LEN(d->cands))
		d->n_cands = SC_ARRAY_LEN(d->cands);
	if (d->n_cands == 0)
		return deny(d, "%s%s%s:%u is not on this sandbox's allow list",
			    dialled->sa_family == AF_INET6 ? "[" : "", d->host,
			    dialled->sa_family == AF_INET6 ? "]" : "", port);
	if (d->named) {
		struct pin *p = pin_name(c, d->host, d->why);
		if (!p)
			return;
		pthread_mutex_lock(&c->lock);
		bool ok = p->ok;
		d->up = p->up, d->up_len = p->up_len;
		if (!ok)
			memcpy(d->why, p->why, sizeof(d->why));
		pthread_mutex_unlock(&c->lock);
		if (!ok)
			return;
	} else {
		/* An IP literal entry allows exactly that address, whatever its class. */
		socklen_t len = dialled->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
							       : sizeof(struct sockaddr_in);
		memcpy(&d->up, dialled, len);
		d->up_len = len;
	}
	set_port(&d->up, port);
	address_text((struct sockaddr *)&d->up, d->address, sizeof(d->address));
	d->ok = true;
}

/* ---- the network socket: the cell's questions ---- */

static void answer(struct sc_gate_cell *c, bool ok, const char *text)
{
	size_t len = strlen(text);
	uint8_t buf[SC_FRAME_HEADER_LEN + 1 + WHY_LEN + 64];
	if (len > sizeof(buf) - SC_FRAME_HEADER_LEN - 1)
		len = sizeof(buf) - SC_FRAME_HEADER_LEN - 1;
	sc__frame_header(buf, SC_FRAME_NET_ANSWER, 1 + len);
	buf[SC_FRAME_HEADER_LEN] = ok ? '1' : '0';
	memcpy(buf + SC_FRAME_HEADER_LEN + 1, text, len);
	/* The cell asks one question at a time; one that does not read its answers loses its
	 * socket rather than stalling the gate. */
	ssize_t n =
		send(c->net_fd, buf, SC_FRAME_HEADER_LEN + 1 + len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n != (ssize_t)(SC_FRAME_HEADER_LEN + 1 + len))
		c->net_dead = true;
}

static void ask_name(struct sc_gate_cell *c, const char *name)
{
	char why[WHY_LEN] = "", text[24];
	struct snapcell_net_event e = {.kind = SNAPCELL_NET_RESOLVE, .target = name};
	uint64_t t0 = sc__now_us();
	const struct sc_net_entry *entry = valid_name(name) ? name_entry(c->g, name) : NULL;
	struct pin *p = NULL;
	bool reserved = false;
	if (!entry)
		snprintf(why, sizeof(why), "%.*s is not on this sandbox's allow list", 200, name);
	else if ((p = pin_name(c, name, why))) {
		pthread_mutex_lock(&c->lock);
		if (p->ok && !(reserved = reserve(c))) {
			snprintf(why, sizeof(why), SC_NET_RECORD_FULL, SC_NET_RECORD_ALLOWED);
		} else if (p->ok) {
			e.allowed = true;
			snprintf(text, sizeof(text), "127.%u.%u.%u", (p->synthetic >> 16) & 255,
				 (p->synthetic >> 8) & 255, p->synthetic & 255);
		} else {
			memcpy(why, p->why, sizeof(why));
		}
		pthread_mutex_unlock(&c->lock);
	}
	char pinned[INET6_ADDRSTRLEN] = "";
	if (e.allowed) {
		address_text((struct sockaddr *)&p->up, pinned, sizeof(pinned));
		e.address = pinned;
		e.rule = entry->target;
	} else {
		e.rule = why;
	}
	e.duration_us = sc__now_us() - t0;
	record_locked(c, &e, reserved);
	answer(c, e.allowed, e.allowed ? text : why);
}

static void ask_connect(struct sc_gate_cell *c, const char *address, const char *port_text)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char *end;
	unsigned long port = strtoul(port_text, &end, 10);
	struct decision d;
	if (!parse_address(address, &ss, &len) || *end || port == 0 || port > 65535) {
		snprintf(d.why, sizeof(d.why), "not an address and port: %.64s %.8s", address,
			 port_text);
		answer(c, false, d.why);
		return;
	}
	set_port(&ss, (uint16_t)port);
	decide(c, (struct sockaddr *)&ss, &d);
	if (!d.ok) {
		/* Allowed connections are recorded when they are made; refusals here. */
		struct snapcell_net_event e = {.kind = SNAPCELL_NET_CONNECT,
					       .target = d.host,
					       .port = (uint16_t)port,
					       .rule = d.why};
		record_locked(c, &e, false);
	}
	answer(c, d.ok, d.ok ? d.address : d.why);
}

/* "R name" or "C address port". */
static void question(struct sc_gate_cell *c, char *q, size_t len)
{
	if (len > QUESTION_MAX || memchr(q, 0, len)) {
		c->net_dead = true;
		return;
	}
	q[len] = 0;
	char *space = strchr(q, ' ');
	if (len > 2 && q[0] == 'R' && q[1] == ' ') {
		ask_name(c, q + 2);
	} else if (len > 2 && q[0] == 'C' && q[1] == ' ' && (space = strchr(q + 2, ' '))) {
		*space = 0;
		ask_connect(c, q + 2, space + 1);
	} else {
		c->net_dead = true;
	}
}

static void read_questions(struct sc_gate_cell *c)
{
	uint8_t buf[4096];
	ssize_t n = recv(c->net_fd, buf, sizeof(buf), MSG_DONTWAIT);
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			c->net_dead = true;
		return;
	}
	for (size_t at = 0; at < (size_t)n && !c->net_dead;) {
		size_t used;
		int rc = sc__frame_feed(&c->reader, buf + at, (size_t)n - at, &used);
		at += used;
		if (rc < 0 || (rc == 1 && sc__frame_type(&c->reader) != SC_FRAME_NET))
			c->net_dead = true;
		else if (rc == 1)
			question(c, (char *)c->reader.payload, c->reader.payload_len);
	}
}

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
	int fd = socket(d->up.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, WHY_LEN, "socket: %s", strerror(errno));
		return -1;
	}
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)&d->up, d->up_len) < 0 && errno != EINPROGRESS) {
		snprintf(why, WHY_LEN, "connect %s: %s", d->address, strerror(errno));
		close(fd);
		return -1;
	}
	int soerr = 0;
	socklen_t len = sizeof(soerr);
	if (wait_for(c, fd, POLLOUT, c->g->o.connect_timeout_ms) != 1) {
		snprintf(why, WHY_LEN, "connect %s: no answer in time", d->address);
		close(fd);
		return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0 || soerr) {
		snprintf(why, WHY_LEN, "connect %s: %s", d->address,
			 strerror(soerr ? soerr : errno));
		close(fd);
		return -1;
	}
	return fd;
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
 * can be recorded (reserved when it can; record(..., true) takes it). why when not. */
static bool admit(struct sc_gate_cell *c, char *why, size_t why_len)
{
	if (c->bytes >= c->g->o.max_bytes) {
		c->hits |= SNAPCELL_NET_HIT_BYTES;
		snprintf(why, why_len, BUDGET_SPENT, (unsigned long long)c->g->o.max_bytes);
		return false;
	}
	if (!reserve(c)) {
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
		 * choosing (an attack pass on issue 21 moved 1 MB under 256 KiB in hellos). */
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
	record_locked(s->c, &e, r->allowed);
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
static void reset(int fd)
{
	struct linger l = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static void serve(struct sc_gate_cell *c, int fd)
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
	decide(c, (struct sockaddr *)&dialled, &d);
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
	record_locked(c, &e, reserved);
	if (e.allowed)
		close(fd);
	else
		reset(fd);
}

static void *conn_main(void *arg)
{
	struct conn *k = arg;
	struct sc_gate_cell *c = k->c;
	serve(c, k->fd);
	pthread_mutex_lock(&c->lock);
	c->open--;
	k->done = true;
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* Joins finished connection threads (all of them with wait). */
static void join_conns(struct sc_gate_cell *c, bool wait)
{
	pthread_mutex_lock(&c->lock);
	size_t kept = 0;
	for (size_t i = 0; i < c->n_conns; i++) {
		struct conn *k = c->conns[i];
		if (!k->done && !wait) {
			c->conns[kept++] = k;
			continue;
		}
		pthread_mutex_unlock(&c->lock);
		pthread_join(k->thread, NULL);
		free(k);
		pthread_mutex_lock(&c->lock);
	}
	c->n_conns = kept;
	pthread_mutex_unlock(&c->lock);
}

/* Lock held. */
static bool grow_conns(struct sc_gate_cell *c)
{
	size_t cap = c->cap_conns ? c->cap_conns * 2 : 8;
	struct conn **grown = realloc(c->conns, cap * sizeof(*grown));
	if (!grown)
		return false;
	c->conns = grown;
	c->cap_conns = cap;
	return true;
}

static void accept_all(struct sc_gate_cell *c, int listener)
{
	for (;;) {
		int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0)
			return;
		pthread_mutex_lock(&c->lock);
		bool over = c->open >= c->g->o.max_connections;
		struct conn *k = NULL;
		if (over) {
			c->hits |= SNAPCELL_NET_HIT_CONNECTIONS;
			struct snapcell_net_event e = {.kind = SNAPCELL_NET_CONNECT,
						       .target = "?",
						       .rule = "too many open connections"};
			record(c, &e, false);
		} else if (c->n_conns < c->cap_conns || grow_conns(c)) {
			k = calloc(1, sizeof(*k));
		}
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setstacksize(&attr, CONN_STACK);
		if (k) {
			*k = (struct conn){.c = c, .fd = fd};
			if (sc__thread_start(&k->thread, &attr, conn_main, k) == 0) {
				c->conns[c->n_conns++] = k;
				c->open++;
			} else {
				free(k);
				k = NULL;
			}
		}
		pthread_attr_destroy(&attr);
		pthread_mutex_unlock(&c->lock);
		if (!k)
			reset(fd);
	}
}

static void *cell_main(void *arg)
{
	struct sc_gate_cell *c = arg;
	struct pollfd p[2 + SC_CELL_LISTENERS_MAX];
	for (;;) {
		size_t n = 0;
		p[n++] = (struct pollfd){c->stop_fd, POLLIN, 0};
		p[n++] = (struct pollfd){c->net_dead ? -1 : c->net_fd, POLLIN, 0};
		for (size_t i = 0; i < c->n_listeners; i++)
			p[n++] = (struct pollfd){c->listeners[i], POLLIN, 0};
		if (poll(p, n, 1000) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		if (p[1].revents)
			read_questions(c);
		for (size_t i = 0; i < c->n_listeners; i++)
			if (p[2 + i].revents)
				accept_all(c, c->listeners[i]);
		join_conns(c, false);
	}
	return NULL;
}

int sc__gate_cell_start(struct sc_gate *g, const int *fds, size_t n_fds, uint64_t deadline_us,
			struct sc_gate_cell **out, struct snapcell_error *err)
{
	if (n_fds < 1 || n_fds - 1 > SC_CELL_LISTENERS_MAX)
		return sc__err(err, -EINVAL, "network gate: %zu descriptors", n_fds);
	struct sc_gate_cell *c = calloc(1, sizeof(*c));
	if (!c)
		return sc__err(err, -ENOMEM, "network gate");
	c->g = g;
	c->net_fd = fds[0];
	c->listeners = fds + 1;
	c->n_listeners = n_fds - 1;
	c->started_us = sc__now_us();
	c->record.started_us = c->started_us;
	c->deadline_us = deadline_us;
	sc__frame_reader_init(&c->reader, QUESTION_MAX);
	pthread_mutex_init(&c->lock, NULL);
	c->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int rc = c->stop_fd < 0 ? -errno : -sc__thread_start(&c->thread, NULL, cell_main, c);
	if (rc < 0) {
		if (c->stop_fd >= 0)
			close(c->stop_fd);
		pthread_mutex_destroy(&c->lock);
		free(c);
		return sc__err(err, rc, "network gate: start");
	}
	*out = c;
	return 0;
}

void sc__gate_cell_stop(struct sc_gate_cell *c, struct snapcell_result *res)
{
	if (!c)
		return;
	uint64_t one = 1;
	(void)!write(c->stop_fd, &one, sizeof(one));
	pthread_join(c->thread, NULL);
	join_conns(c, true);
	sc__net_record_take(&c->record, res);
	if (res)
		res->net_limits_hit = c->hits;
	for (size_t i = 0; i < c->n_pins; i++)
		free(c->pins[i].name);
	free(c->conns);
	sc__frame_reader_reset(&c->reader);
	close(c->stop_fd);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
