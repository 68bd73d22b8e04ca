/* What the egress gate's files share (gate.c: the sandbox's gate, a cell's start and stop,
 * its threads and its record; gate_resolve.c: names, pins and where a connection may go, and
 * the cell's questions; gate_splice.c: one connection, from its first bytes to its end). The
 * state of a cell and the decision a connection comes to. Private to the gate: the rest of
 * the library sees gate.h. */
#ifndef SC_NET_GATE_INTERNAL_H
#define SC_NET_GATE_INTERNAL_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "gate.h"
#include "record.h"
#include "rpc/frame.h"

#define EXACT_BASE   0x7f4d0000u /* 127.77.0.0/16: the sandbox's exact names */
#define DYNAMIC_BASE 0x7f4e0000u /* 127.78.0.0/16: names a cell asked for (wildcards) */
#define MAX_NAMES    256	 /* distinct names one cell may resolve */
#define QUESTION_MAX 1024
#define WHY_LEN	     256

struct sc_http_gate;

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

/* ---- gate.c: the record ---- */

/* Lock held. Records e (reserved: in the room sc__gate_reserve held); a dropped event sets
 * the cell's SNAPCELL_NET_HIT_EVENTS. */
void sc__gate_record(struct sc_gate_cell *c, const struct snapcell_net_event *e, bool reserved);
/* Lock held. Holds room for one allowed event; false (SNAPCELL_NET_HIT_EVENTS set) when the
 * record has none. */
bool sc__gate_reserve(struct sc_gate_cell *c);
/* sc__gate_record, taking the lock. */
void sc__gate_record_locked(struct sc_gate_cell *c, const struct snapcell_net_event *e,
			    bool reserved);

/* ---- gate_resolve.c ---- */

/* Where a connection to `dialled` (what the cell connected to, port included) may go. */
void sc__gate_decide(struct sc_gate_cell *c, const struct sockaddr *dialled, struct decision *d);
/* Reads what the cell's network socket holds and answers its questions; sets c->net_dead
 * when the socket is done with or misused. */
void sc__gate_read_questions(struct sc_gate_cell *c);

/* ---- gate_splice.c ---- */

/* Serves one accepted connection on its thread, to its end; closes fd. */
void sc__gate_serve(struct sc_gate_cell *c, int fd);
/* Refuses with a reset, so the code's read fails at once. */
void sc__gate_reset(int fd);

#endif
