/* The egress gate's names and decisions: the names a cell may reach, each resolved once by
 * the host (a mapped address, else the system's resolver, bounded) and pinned, with the
 * loopback address the cell was given for it; where a connection to what the cell dialled
 * may go; and the cell's questions on its network socket ("R name", "C address port"),
 * answered from the same decisions. Not the connections themselves (gate_splice.c). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "gate_internal.h"
#include "util/util.h"

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
void sc__gate_decide(struct sc_gate_cell *c, const struct sockaddr *dialled, struct decision *d)
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
		if (p->ok && !(reserved = sc__gate_reserve(c))) {
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
	sc__gate_record_locked(c, &e, reserved);
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
	sc__gate_decide(c, (struct sockaddr *)&ss, &d);
	if (!d.ok) {
		/* Allowed connections are recorded when they are made; refusals here. */
		struct snapcell_net_event e = {.kind = SNAPCELL_NET_CONNECT,
					       .target = d.host,
					       .port = (uint16_t)port,
					       .rule = d.why};
		sc__gate_record_locked(c, &e, false);
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

void sc__gate_read_questions(struct sc_gate_cell *c)
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
