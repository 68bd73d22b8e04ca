/* The HTTP gate's request parser (http_parse.c): one strict HTTP/1.1 request head, parsed in
 * place, and a chunked body decoder. Pure functions over bounded buffers, no I/O, so the
 * fuzz target drives exactly what a cell's bytes reach. Not a general HTTP parser: what a
 * well-behaved client does not send is refused, not tolerated. */
#ifndef SC_NET_HTTP_PARSE_H
#define SC_NET_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "net.h"

#define SC_HTTP_HEAD_MAX       65536 /* bytes of a request head, the blank line included */
#define SC_HTTP_FIELDS_MAX     100
#define SC_HTTP_CHUNK_LINE_MAX 1024 /* a chunk-size line (extensions included) or a trailer */
#define SC_HTTP_TRAILER_MAX    8192 /* bytes of all trailer lines of one body */

struct sc_http_field {
	const char *name;  /* NUL-ended inside the parsed buffer */
	const char *value; /* without leading or trailing whitespace */
};

struct sc_http_request {
	const char *method; /* an upper-case token, at most SC_NET_METHOD_MAX bytes */
	const char *target; /* origin-form: '/' then path and query */
	int minor;	    /* HTTP/1.<minor>: 0 or 1 */
	struct sc_http_field fields[SC_HTTP_FIELDS_MAX];
	size_t n_fields;
	const char *host;	 /* the one Host field's value */
	bool chunked;		 /* Transfer-Encoding: chunked */
	uint64_t content_length; /* when !chunked; 0 without Content-Length */
	bool keep_alive;	 /* the client lets the connection stay open */
	bool expect_continue;	 /* Expect: 100-continue */
};

/* Why a head was refused: the status to answer and a short reason. */
struct sc_http_refusal {
	int status; /* 400, 403, 417, 431, 501 */
	const char *why;
};

/* The length of the head at the start of buf (through the blank line), 0 if it is not
 * complete yet. */
size_t sc__http_head_len(const char *buf, size_t len);

/* Parses the head buf[0..len) (len from sc__http_head_len), writing NULs into buf; r points
 * into buf. 0, or -EINVAL with *ref filled. */
int sc__http_parse_head(char *buf, size_t len, struct sc_http_request *r,
			struct sc_http_refusal *ref);

/* The value of the first field named name (case-insensitive), or NULL. */
const char *sc__http_field(const struct sc_http_request *r, const char *name);

/* True when the query or form body s[0..n) has a method-override field (_method, spelled
 * any way a framework decodes to it). */
bool sc__http_form_overrides(const char *s, size_t n);

/* True for the hop-by-hop and framing fields that are never forwarded either way. */
bool sc__http_hop_by_hop(const char *name);

/* Decodes a chunked body incrementally. */
struct sc_http_chunked {
	int state;
	uint64_t left;	    /* bytes of the current chunk still to come */
	size_t line_len;    /* bytes of the current size or trailer line so far */
	size_t trailer_len; /* bytes of trailers so far */
	bool size_seen;	    /* a hex digit on the current size line */
	bool ext;	    /* past the ';' of a chunk extension */
	bool done;	    /* the last chunk and the trailers ended */
};

/* Consumes in[0..in_len) up to the end of the body: *used bytes taken (the rest belongs to
 * the next request), decoded data appended to out (*out_len grows, never past out_cap).
 * 0 (check st->done), -EINVAL for a malformed body, -E2BIG when the data would pass
 * out_cap. out may be NULL to discard (out_cap then only counts). */
int sc__http_chunked_feed(struct sc_http_chunked *st, const char *in, size_t in_len, size_t *used,
			  char *out, uint64_t *out_len, uint64_t out_cap);

#endif
