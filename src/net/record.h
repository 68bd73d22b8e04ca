/* The record of one run's network attempts (record.c): the events the egress gate keeps for
 * a cell's run, bounded so that no flood of refusals can push allowed traffic out of it.
 * Not thread-safe: the gate calls it under its cell's lock. */
#ifndef SC_NET_RECORD_H
#define SC_NET_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapcell.h"

/* Room for this many allowed events is reserved before their traffic moves (past it the gate
 * refuses the traffic rather than let it go unrecorded); refusals have a share of their own.
 * A refusal, or an allowed lookup, like one recorded already adds to that one's count. */
#define SC_NET_RECORD_ALLOWED 10000
#define SC_NET_RECORD_REFUSED 1000
#define SC_NET_RECORD_FULL    "this run's network record is full (%d allowed events)"
#define SC_NET_RECORD_SLOTS   2048 /* the repeats' hash: > REFUSED + the 256 names of a run */

struct sc_net_record {
	uint64_t started_us; /* the run's start (sc__now_us), which events are timed from */
	struct snapcell_net_event *events;
	size_t n_events, cap_events, n_dropped;
	size_t n_allowed, n_refused, n_reserved; /* events of each kind; room held for allowed */
	uint32_t repeat_at[SC_NET_RECORD_SLOTS]; /* index + 1 of an event repeats join, 0 free */
};

/* Holds room for one allowed event before the traffic it records moves. False (the run's
 * allowed events at their cap, or no memory): the traffic is to be refused. */
bool sc__net_record_reserve(struct sc_net_record *r);
/* Records e (strings copied); reserved: it takes the room sc__net_record_reserve held (an
 * event made in reserved room is always kept). False when e was dropped (a cap, memory). */
bool sc__net_record_add(struct sc_net_record *r, const struct snapcell_net_event *e, bool reserved);
/* Moves the events into res (net_events, n_net_events, n_net_events_dropped) in the order
 * they started, or frees them when res is NULL; r is empty after. */
void sc__net_record_take(struct sc_net_record *r, struct snapcell_result *res);

#endif
