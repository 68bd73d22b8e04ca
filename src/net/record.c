/* The record of one run's network attempts: see record.h. Allowed events are never crowded
 * out (room is reserved before their traffic moves), refusals are bounded and coalesced
 * (10,050 refused lookups used to fill the record and hide the upload after them).
 * Not the gate's decisions: those are gate_resolve.c's. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "gate.h"
#include "record.h"
#include "util/buf.h"
#include "util/util.h"

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static bool same_text(const char *a, const char *b)
{
	return a == b || (a && b && !strcmp(a, b));
}

static uint32_t hash_text(uint32_t h, const char *t)
{
	for (const char *p = t ? t : ""; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return (h ^ 0xff) * 16777619u;
}

/* The slot of the event like e (allowed, kind, target, port, method, path, rule), or of the
 * free slot where it would go. */
static uint32_t *repeat_slot(struct sc_net_record *r, const struct snapcell_net_event *e)
{
	uint32_t h = (2166136261u ^ (uint32_t)e->kind ^ ((uint32_t)e->port << 8)) * 16777619u;
	h = hash_text(hash_text(hash_text(hash_text(h, e->target), e->method), e->path), e->rule);
	for (uint32_t i = h % SC_NET_RECORD_SLOTS;; i = (i + 1) % SC_NET_RECORD_SLOTS) {
		uint32_t at = r->repeat_at[i];
		if (!at)
			return &r->repeat_at[i];
		const struct snapcell_net_event *d = &r->events[at - 1];
		if (d->allowed == e->allowed && d->kind == e->kind && d->port == e->port &&
		    same_text(d->target, e->target) && same_text(d->method, e->method) &&
		    same_text(d->path, e->path) && same_text(d->rule, e->rule))
			return &r->repeat_at[i];
	}
}

/* Room for n events in all. */
static bool grow(struct sc_net_record *r, size_t n)
{
	return SC_ARRAY_RESERVE(r->events, r->cap_events, n, SC_ARRAY_NO_CAP) == 0;
}

bool sc__net_record_reserve(struct sc_net_record *r)
{
	if (r->n_allowed + r->n_reserved >= SC_NET_RECORD_ALLOWED ||
	    !grow(r, r->n_events + r->n_reserved + 1))
		return false;
	r->n_reserved++;
	return true;
}

bool sc__net_record_add(struct sc_net_record *r, const struct snapcell_net_event *e, bool reserved)
{
	uint32_t *slot = NULL;
	if (reserved)
		r->n_reserved--;
	if (!e->allowed || e->kind == SNAPCELL_NET_RESOLVE) {
		slot = repeat_slot(r, e);
		if (*slot) {
			struct snapcell_net_event *d = &r->events[*slot - 1];
			d->count++;
			d->bytes_out += e->bytes_out, d->bytes_in += e->bytes_in;
			return true;
		}
		/* The hash holds at most SC_NET_RECORD_REFUSED refusals and one allowed lookup per
		 * pinned name, so a lookup always ends; a refusal in reserved room past them (a
		 * connection that failed upstream) is kept unhashed. */
		if (!e->allowed && r->n_refused >= SC_NET_RECORD_REFUSED)
			slot = NULL;
	}
	bool room = reserved || (e->allowed ? r->n_allowed < SC_NET_RECORD_ALLOWED
					    : r->n_refused < SC_NET_RECORD_REFUSED);
	if (!room || (!reserved && !grow(r, r->n_events + r->n_reserved + 1))) {
		r->n_dropped++;
		return false;
	}
	if (e->allowed)
		r->n_allowed++;
	else if (slot)
		r->n_refused++;
	if (slot)
		*slot = (uint32_t)r->n_events + 1;
	struct snapcell_net_event *d = &r->events[r->n_events++];
	*d = *e;
	d->count = 1;
	uint64_t now = sc__now_us();
	d->started_us =
		now - e->duration_us > r->started_us ? now - e->duration_us - r->started_us : 0;
	d->target = dup_or_null(e->target);
	d->address = dup_or_null(e->address);
	d->method = dup_or_null(e->method);
	d->path = dup_or_null(e->path);
	d->rule = dup_or_null(e->rule);
	return true;
}

struct ordered {
	struct snapcell_net_event e;
	size_t seq;
};

static int by_start(const void *a, const void *b)
{
	const struct ordered *x = a, *y = b;
	if (x->e.started_us != y->e.started_us)
		return x->e.started_us < y->e.started_us ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Recorded as they end; listed as they started (equal starts keep their order). Left as
 * recorded when there is no memory to sort. */
static void sort_events(struct sc_net_record *r)
{
	struct ordered *o = r->n_events ? malloc(r->n_events * sizeof(*o)) : NULL;
	if (!o)
		return;
	for (size_t i = 0; i < r->n_events; i++)
		o[i] = (struct ordered){r->events[i], i};
	qsort(o, r->n_events, sizeof(*o), by_start);
	for (size_t i = 0; i < r->n_events; i++)
		r->events[i] = o[i].e;
	free(o);
}

void sc__net_record_take(struct sc_net_record *r, struct snapcell_result *res)
{
	sort_events(r);
	struct snapcell_result tmp = {0}, *to = res ? res : &tmp;
	to->net_events = r->events;
	to->n_net_events = r->n_events;
	to->n_net_events_dropped = r->n_dropped;
	if (!res)
		sc__net_events_free(&tmp);
	uint64_t started_us = r->started_us;
	memset(r, 0, sizeof(*r));
	r->started_us = started_us;
}

void sc__net_events_free(struct snapcell_result *res)
{
	for (size_t i = 0; i < res->n_net_events; i++) {
		struct snapcell_net_event *e = &res->net_events[i];
		free((char *)e->target), free((char *)e->address), free((char *)e->method);
		free((char *)e->path), free((char *)e->rule);
	}
	free(res->net_events);
	res->net_events = NULL;
	res->n_net_events = 0;
}
