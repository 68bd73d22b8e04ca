/* What http.c (the cell's side: I/O, TLS, the request loop) and http_upstream.c (libcurl)
 * share about one connection being served. Private to the HTTP gate. */
#ifndef SC_NET_HTTP_CONN_H
#define SC_NET_HTTP_CONN_H

#include <gnutls/gnutls.h>

#include "http.h"
#include "http_ca.h"
#include "http_parse.h"

struct sc_http_gate {
	struct sc_http_gate_options o; /* defaults filled in; upstream_ca_file owned */
	struct sc_http_ca *ca;
	int stop_pipe[2]; /* written by free: every connection's poll sees it */
	pthread_mutex_t lock;
	pthread_cond_t drained;
	size_t n_active;
	uint64_t bodies_bytes; /* request bodies held for upstream now, all connections */
};

struct sc_http_io {
	struct sc_http_gate *g;
	const struct sc_http_conn *c;
	gnutls_session_t tls; /* NULL for plain HTTP */
	struct sc_http_leaf *leaf;
	void *curl;	      /* CURL *, kept for the connection so upstream keep-alive works */
	uint64_t last_io_us;  /* the last byte either way, for the idle timeout */
	uint64_t deadline_us; /* c->deadline_us, 0 meaning none */
	const char *why;      /* why I/O ended: "idle timeout", "deadline", "stopped", ... */
	uint64_t bytes_in;    /* written to the cell for the current request */
	bool spent;	      /* the run's byte budget ran out: no more bytes move */
	size_t in_len;
	char in[SC_HTTP_HEAD_MAX];   /* bytes read from the cell, not yet consumed */
	char head[SC_HTTP_HEAD_MAX]; /* the current request's head, parsed in place */
};

/* Charges n bytes that moved to the run's byte budget; false (io->spent) once it is spent. */
bool sc__http_charge(struct sc_http_io *io, uint64_t n);
/* Writes all of buf to the cell, charged: 0, or -errno with io->why set (-EDQUOT once the
 * byte budget is spent). */
int sc__http_io_write(struct sc_http_io *io, const void *buf, size_t len);
/* True when the connection must end now (stop_fd, the gate freed, the deadline). */
bool sc__http_io_stopped(struct sc_http_io *io);

/* A request body read from the cell while curl sends it upstream. */
struct sc_http_body {
	const struct sc_http_request *r;
	struct sc_http_chunked st;
	uint64_t got;	 /* decoded bytes so far */
	uint64_t *n_raw; /* the record's bytes from the cell */
	int err;   /* 0, -E2BIG past body_max_bytes, -EINVAL malformed, -EPIPE cut short, -EDQUOT
		      the byte budget spent */
	bool done; /* all of it read: the connection is at the next request */
};

/* Up to len more bytes of the body: >0, 0 at its end, <0 (also in b->err). */
ssize_t sc__http_body_read(struct sc_http_io *io, struct sc_http_body *b, char *buf, size_t len);

/* The upstream's answer to one allowed request, streamed to the cell. */
struct sc_http_upstream_result {
	int status;	/* 0 when no response head came */
	bool head_sent; /* a response head went to the cell (then no error page) */
	bool reusable;	/* the cell connection can take another request */
	char why[256];	/* for a failure: what went wrong (no header values) */
};

/* Makes the request upstream with libcurl, the body (NULL for none) streamed from the cell,
 * and streams the response to the cell. */
void sc__http_upstream(struct sc_http_io *io, const struct sc_http_request *req,
		       const struct sc_net_entry *e, bool tls, struct sc_http_body *body,
		       struct sc_http_upstream_result *res);
/* Once per process, before any request. */
int sc__http_upstream_init(struct snapcell_error *err);
void sc__http_upstream_close(struct sc_http_io *io);

#endif
