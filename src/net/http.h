/* The HTTP gate (http.c): enforces entries with method, path or header rules per request.
 * One per sandbox with such entries. A connection from a cell that the egress gate (gate.h)
 * has matched to (host, port) and pinned to a checked upstream address is handed over here:
 * its TLS (if the first byte is a TLS handshake) is terminated with a certificate for host
 * issued by the sandbox's own certificate authority (which only this sandbox's cells trust),
 * each request is checked (method, path on segment boundaries, Host equal to host, no
 * CONNECT, TRACE, Upgrade, absolute-form targets, method overrides (headers, or _method in
 * the query or a form body), or conflicting framing) and made upstream by the host with
 * libcurl (certificates verified, connected to the pinned address only, redirects not
 * followed: the cell's client follows them through the gate again), with the entry's headers
 * added. Each request is one audit record. */
#ifndef SC_NET_HTTP_H
#define SC_NET_HTTP_H

#include <stdint.h>
#include <sys/socket.h>

#include "net.h"

struct sc_http_gate;

struct sc_http_gate_options {
	/* CA bundle the host verifies upstream servers with; NULL for the system's. */
	const char *upstream_ca_file;
	uint64_t connect_timeout_ms; /* upstream connect */
	uint64_t idle_timeout_ms;    /* no byte either way for this long ends a connection */
	uint64_t body_max_bytes;     /* request or response body; past it the request fails */
};

/* Makes the sandbox's certificate authority (a fresh key, never written to disk) and
 * whatever serving needs. */
int sc__http_gate_new(const struct sc_http_gate_options *o, struct sc_http_gate **out,
		      struct snapcell_error *err);
/* Ends every connection still served and waits for them. NULL does nothing. */
void sc__http_gate_free(struct sc_http_gate *g);
/* The CA certificate (PEM) the cells' bundle must trust. */
const char *sc__http_gate_ca_pem(const struct sc_http_gate *g);

/* One request, as audited. Strings are valid during the callback only. */
struct sc_http_record {
	const char *method;
	const char *path;
	int status; /* upstream's HTTP status, or 0 when refused or failed */
	bool allowed;
	const char *rule;   /* the matching entry's target, or why it was refused */
	bool header_added;  /* the entry's headers were sent (their values never appear) */
	bool upstream_tls;  /* made (or tried) upstream over verified TLS, never in cleartext */
	uint64_t bytes_out; /* request bytes from the cell (head and body) */
	uint64_t bytes_in;  /* response bytes to the cell */
	uint64_t duration_us;
};

struct sc_http_conn {
	int fd;		  /* accepted from the cell; taken over (closed by the gate) */
	const char *host; /* what the cell asked for: a name, or an IP text */
	uint16_t port;
	const struct sockaddr *upstream; /* pinned, already checked by the address rules */
	socklen_t upstream_len;
	const struct sc_net_entry *const *entries; /* candidates for (host, port), borrowed */
	size_t n_entries;
	uint64_t deadline_us; /* sc__now_us() clock; the connection ends there */
	int stop_fd;	      /* readable: end the connection now (run over or cancelled) */
	void (*audit)(void *ctx, const struct sc_http_record *r);
	/* Before a request goes upstream: false (why filled) refuses it, e.g. the run's byte
	 * budget is spent or its record is full. A request admitted is audited as allowed.
	 * NULL admits all. */
	bool (*admit)(void *ctx, char *why, size_t why_len);
	/* Bytes of requests and responses as they move (heads, bodies, the gate's answers):
	 * false when the run's byte budget is spent, which ends the connection. NULL: none. */
	bool (*charge)(void *ctx, uint64_t n);
	void *audit_ctx; /* the context of all three */
};

/* Serves one connection until the cell closes it, an error, the deadline or stop_fd.
 * Blocks; called on a thread of the egress gate. Returns 0, or a negative code for a
 * connection that failed before any request (its reason already audited). */
int sc__http_serve(struct sc_http_gate *g, const struct sc_http_conn *c);

#endif
