/* The egress gate (gate.c, its lifecycle; gate_resolve.c, names and decisions;
 * gate_splice.c, one connection): what the host runs for a sandbox with network entries.
 * Each cell of such a sandbox has a network namespace of its own holding only loopback, the
 * entries' IP literals and one listening socket per port, made by the template and held by
 * the host; so every TCP connection a cell makes is accepted here, by the host, which maps
 * the address the cell dialled back to the name it asked for, matches (name, port) against
 * the allow-list, resolves the name itself (once, pinned), applies the address rules,
 * connects upstream and passes the stream through (its TLS SNI or HTTP Host checked against
 * the name) or hands it to the HTTP gate (http.h) for entries with HTTP rules. Names resolve
 * in the cell only through this gate: exact names from the cell's /etc/hosts (addresses
 * fixed per sandbox in 127.77/16), wildcard names through a question on the cell's network
 * socket (addresses of that cell in 127.78/16). */
#ifndef SC_NET_GATE_H
#define SC_NET_GATE_H

#include <stdint.h>

#include "net.h"
#include "snapcell.h"

struct sc_gate_options {
	const struct sc_net_list *list; /* borrowed; outlives the gate */
	/* Lookups of names[i] answer addresses[i] instead of DNS (tests, private names); the
	 * address rules still apply to the answer. */
	const char *const *map_names;
	const char *const *map_addresses;
	size_t n_maps;
	const char *upstream_ca_file; /* NULL: the system's bundle */
	uint64_t max_connections, max_bytes, connect_timeout_ms, idle_timeout_ms;
};

#define SC_CELL_LISTENERS_MAX 64 /* 2 * SC_NET_MAX_PORTS; SC_CELL_NET_MAX - 1 */

struct sc_gate;
struct sc_gate_cell;

int sc__gate_new(const struct sc_gate_options *o, struct sc_gate **out, struct snapcell_error *err);
void sc__gate_free(struct sc_gate *g);

/* What the template builds each cell's namespace and root from. */
const char *sc__gate_hosts(const struct sc_gate *g); /* /etc/hosts lines */
const char *sc__gate_ca_pem(const struct sc_gate *g);
/* The IP literals of the entries (text), and whether one is IPv6. */
size_t sc__gate_addresses(const struct sc_gate *g, const char *const **out);
bool sc__gate_v6(const struct sc_gate *g);
/* The ports listened on, and how many descriptors a cell brings: its network socket and a
 * listener per port (and per family with IPv6). */
size_t sc__gate_ports(const struct sc_gate *g, const uint16_t **out);
size_t sc__gate_cell_fds(const struct sc_gate *g);

/* Starts serving one cell for one run: fds[0] its network socket, then its listeners
 * (borrowed: the caller closes them after sc__gate_cell_stop). deadline_us ends every
 * connection. */
int sc__gate_cell_start(struct sc_gate *g, const int *fds, size_t n_fds, uint64_t deadline_us,
			struct sc_gate_cell **out, struct snapcell_error *err);
/* Ends the cell's connections, waits for its threads, and moves the run's events and limit
 * flags into res (when not NULL). */
void sc__gate_cell_stop(struct sc_gate_cell *c, struct snapcell_result *res);

/* Frees what a result's network events hold. */
void sc__net_events_free(struct snapcell_result *res);

/* sni.c: the server name of a TLS ClientHello at the start of buf. 1 with the name in out
 * (lower-cased), 0 when the hello has none, -EAGAIN when buf ends before the hello does,
 * -EPROTO when it is not a ClientHello, is malformed, or could name another server to it
 * (two names, or an Encrypted Client Hello, whose inner name the gate cannot read). */
int sc__tls_sni(const uint8_t *buf, size_t len, char *out, size_t out_len);

#endif
