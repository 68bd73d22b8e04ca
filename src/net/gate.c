/* The egress gate's lifecycle (gate.h says what the gate is): the sandbox's gate, with what
 * the template builds each cell's namespace and root from; a running cell's thread, which
 * accepts on the cell's listeners and answers its network socket (gate_resolve.c), and one
 * thread per connection (gate_splice.c serves it), all ended and joined when the cell stops;
 * and the cell's record. Every decision is made from what the host knows (the address the
 * cell dialled, the name the host gave that address, the allow-list, the address the host
 * resolved and pinned), never from what the cell says about itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gate_internal.h"
#include "http.h"
#include "util/buf.h"
#include "util/util.h"

#define CONN_STACK (512u << 10)

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
void sc__gate_record(struct sc_gate_cell *c, const struct snapcell_net_event *e, bool reserved)
{
	if (!sc__net_record_add(&c->record, e, reserved))
		c->hits |= SNAPCELL_NET_HIT_EVENTS;
}

/* Lock held. */
bool sc__gate_reserve(struct sc_gate_cell *c)
{
	if (sc__net_record_reserve(&c->record))
		return true;
	c->hits |= SNAPCELL_NET_HIT_EVENTS;
	return false;
}

void sc__gate_record_locked(struct sc_gate_cell *c, const struct snapcell_net_event *e,
			    bool reserved)
{
	pthread_mutex_lock(&c->lock);
	sc__gate_record(c, e, reserved);
	pthread_mutex_unlock(&c->lock);
}

/* ---- a cell: its thread and its connections' ---- */

static void *conn_main(void *arg)
{
	struct conn *k = arg;
	struct sc_gate_cell *c = k->c;
	sc__gate_serve(c, k->fd);
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
			sc__gate_record(c, &e, false);
		} else if (SC_ARRAY_RESERVE(c->conns, c->cap_conns, c->n_conns + 1,
					    SC_ARRAY_NO_CAP) == 0) {
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
			sc__gate_reset(fd);
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
			sc__gate_read_questions(c);
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
