/* A strict HTTP/1.1 request-head parser and chunked decoder for the HTTP gate. Everything a
 * request smuggler needs an ambiguity for (two lengths, TE with CL, obs-fold, bare CR or LF,
 * padded or lower-case methods, absolute-form targets, dot segments) is refused, so the
 * request the host rebuilds upstream is the one it checked. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "http_parse.h"

static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Field values: visible ASCII, space, tab and obs-text; never CR, LF, NUL or DEL. */
static bool is_vchar(unsigned char c)
{
	return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static int refuse(struct sc_http_refusal *ref, int status, const char *why)
{
	ref->status = status;
	ref->why = why;
	return -EINVAL;
}

size_t sc__http_head_len(const char *buf, size_t len)
{
	const char *p = memmem(buf, len, "\r\n\r\n", 4);
	return p ? (size_t)(p - buf) + 4 : 0;
}

const char *sc__http_field(const struct sc_http_request *r, const char *name)
{
	for (size_t i = 0; i < r->n_fields; i++)
		if (!strcasecmp(r->fields[i].name, name))
			return r->fields[i].value;
	return NULL;
}

bool sc__http_hop_by_hop(const char *name)
{
	static const char *const hop[] = {
		"connection", "keep-alive",	"te",	"trailer", "transfer-encoding",
		"upgrade",    "content-length", "host", "expect",  "http2-settings"};
	if (!strncasecmp(name, "proxy-", 6))
		return true;
	for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
		if (!strcasecmp(name, hop[i]))
			return true;
	return false;
}

/* A path that a server would resolve elsewhere than it reads: "." or ".." segments, also
 * percent-encoded, backslashes and encoded slashes (a prefix rule on "/v1" must not let
 * "/v1/../admin" or "/v1%2f..%2fadmin" through). */
static bool path_ambiguous(const char *p, size_t n)
{
	size_t dots = 0, other = 0;
	for (size_t i = 1; i <= n; i++) {
		if (i == n || p[i] == '/') {
			if (dots && !other && dots <= 2)
				return true;
			dots = other = 0;
			continue;
		}
		if (p[i] == '\\')
			return true;
		if (p[i] == '%') {
			if (i + 2 >= n)
				return true;
			char h[3] = {p[i + 1], p[i + 2], 0};
			if (!strcasecmp(h, "2e")) {
				dots++;
				i += 2;
				continue;
			}
			if (!strcasecmp(h, "2f") || !strcasecmp(h, "5c") || !strcmp(h, "00"))
				return true;
			other++;
			i += 2;
			continue;
		}
		if (p[i] == '.')
			dots++;
		else
			other++;
	}
	return false;
}

static int parse_target(const char *t, struct sc_http_refusal *ref)
{
	if (t[0] != '/')
		return refuse(ref, 400, "only origin-form request targets (\"/path\") are allowed");
	for (const char *p = t; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c <= 0x20 || c >= 0x7f || c == '#')
			return refuse(ref, 400, "bad byte in the request target");
		if (c == '%' && (!isxdigit((unsigned char)p[1]) || !isxdigit((unsigned char)p[2])))
			return refuse(ref, 400, "bad percent-encoding in the request target");
	}
	size_t path_len = strcspn(t, "?");
	if (path_ambiguous(t, path_len))
		return refuse(ref, 400, "dot segments or encoded slashes in the path");
	const char *q = t[path_len] ? t + path_len + 1 : NULL;
	if (q && sc__http_form_overrides(q, strlen(q)))
		return refuse(ref, 403, "method override (_method) is not allowed");
	return 0;
}

/* Request line: METHOD SP origin-form SP HTTP/1.x, single spaces. */
static int parse_request_line(char *line, struct sc_http_request *r, struct sc_http_refusal *ref)
{
	char *sp1 = strchr(line, ' ');
	if (!sp1)
		return refuse(ref, 400, "malformed request line");
	char *sp2 = strchr(sp1 + 1, ' ');
	if (!sp2 || strchr(sp2 + 1, ' '))
		return refuse(ref, 400, "malformed request line");
	*sp1 = *sp2 = 0;
	size_t mlen = (size_t)(sp1 - line);
	if (!mlen || mlen > SC_NET_METHOD_MAX)
		return refuse(ref, 400, "malformed method");
	for (size_t i = 0; i < mlen; i++)
		if (!is_tchar((unsigned char)line[i]) || (line[i] >= 'a' && line[i] <= 'z'))
			return refuse(ref, 400, "methods must be upper-case tokens");
	r->method = line;
	if (!strcmp(line, "CONNECT") || !strcmp(line, "TRACE") || !strcmp(line, "TRACK"))
		return refuse(ref, 403, "CONNECT and TRACE are not allowed");
	if (!strcmp(sp2 + 1, "HTTP/1.1"))
		r->minor = 1;
	else if (!strcmp(sp2 + 1, "HTTP/1.0"))
		r->minor = 0;
	else
		return refuse(ref, 400, "only HTTP/1.0 and HTTP/1.1 are served");
	r->target = sp1 + 1;
	return parse_target(r->target, ref);
}

static int parse_field(char *line, struct sc_http_request *r, struct sc_http_refusal *ref)
{
	if (line[0] == ' ' || line[0] == '\t')
		return refuse(ref, 400, "folded header lines are not allowed");
	char *colon = strchr(line, ':');
	if (!colon || colon == line)
		return refuse(ref, 400, "malformed header line");
	for (char *p = line; p < colon; p++)
		if (!is_tchar((unsigned char)*p))
			return refuse(ref, 400, "malformed header name");
	*colon = 0;
	char *v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	char *end = v + strlen(v);
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		*--end = 0;
	for (char *p = v; p < end; p++)
		if (!is_vchar((unsigned char)*p))
			return refuse(ref, 400, "control byte in a header value");
	if (r->n_fields == SC_HTTP_FIELDS_MAX)
		return refuse(ref, 431, "too many header fields");
	r->fields[r->n_fields].name = line;
	r->fields[r->n_fields].value = v;
	r->n_fields++;
	return 0;
}

static bool has_token(const char *list, const char *tok)
{
	size_t n = strlen(tok);
	for (const char *p = list; *p;) {
		p += strspn(p, " \t,");
		size_t len = strcspn(p, " \t,");
		if (len == n && !strncasecmp(p, tok, n))
			return true;
		p += len;
	}
	return false;
}

static int parse_length(const char *v, uint64_t *out)
{
	uint64_t n = 0;
	if (!*v || strlen(v) > 18)
		return -EINVAL;
	for (; *v; v++) {
		if (*v < '0' || *v > '9')
			return -EINVAL;
		n = n * 10 + (uint64_t)(*v - '0');
	}
	*out = n;
	return 0;
}

static const char *const override_fields[] = {"x-http-method-override", "x-method-override",
					      "x-http-method", "x-original-method"};

/* Framing and the fields that change what the request means. */
static int check_fields(struct sc_http_request *r, struct sc_http_refusal *ref)
{
	size_t n_host = 0, n_cl = 0, n_te = 0;
	const char *te = NULL, *cl = NULL, *conn = "";
	for (size_t i = 0; i < r->n_fields; i++) {
		const char *n = r->fields[i].name, *v = r->fields[i].value;
		if (!strcasecmp(n, "host"))
			n_host++, r->host = v;
		else if (!strcasecmp(n, "content-length"))
			n_cl++, cl = v;
		else if (!strcasecmp(n, "transfer-encoding"))
			n_te++, te = v;
		else if (!strcasecmp(n, "connection"))
			conn = v;
		else if (!strcasecmp(n, "upgrade") || !strcasecmp(n, "http2-settings"))
			return refuse(ref, 403, "protocol upgrades are not allowed");
		else if (!strcasecmp(n, "expect")) {
			if (strcasecmp(v, "100-continue"))
				return refuse(ref, 417, "only Expect: 100-continue is understood");
			r->expect_continue = true;
		}
		for (size_t j = 0; j < sizeof(override_fields) / sizeof(override_fields[0]); j++)
			if (!strcasecmp(n, override_fields[j]))
				return refuse(ref, 403, "method-override headers are not allowed");
	}
	if (n_host != 1)
		return refuse(ref, 400, "exactly one Host header is required");
	if (n_cl > 1)
		return refuse(ref, 400, "more than one Content-Length");
	if (n_te && (n_cl || r->minor == 0))
		return refuse(ref, 400, "Transfer-Encoding with Content-Length or HTTP/1.0");
	if (n_te > 1 || (te && strcasecmp(te, "chunked")))
		return refuse(ref, 501, "only Transfer-Encoding: chunked is understood");
	r->chunked = te != NULL;
	if (cl && parse_length(cl, &r->content_length))
		return refuse(ref, 400, "bad Content-Length");
	/* A body on GET or HEAD means nothing, and an upstream that ignores its length (or a
	 * proxy before it) would read the body as the next request (CL.0 desync). */
	if ((r->chunked || r->content_length) &&
	    (!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD")))
		return refuse(ref, 400, "a GET or HEAD request with a body is refused");
	if (has_token(conn, "upgrade"))
		return refuse(ref, 403, "protocol upgrades are not allowed");
	r->keep_alive = r->minor ? !has_token(conn, "close") : has_token(conn, "keep-alive");
	return 0;
}

int sc__http_parse_head(char *buf, size_t len, struct sc_http_request *r,
			struct sc_http_refusal *ref)
{
	memset(r, 0, sizeof(*r));
	if (len < 4 || len > SC_HTTP_HEAD_MAX || memcmp(buf + len - 4, "\r\n\r\n", 4))
		return refuse(ref, 400, "incomplete request head");
	/* Every CR ends a line with LF and every LF follows a CR; no NUL anywhere. */
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == 0 || (buf[i] == '\r' && (i + 1 == len || buf[i + 1] != '\n')) ||
		    (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r')))
			return refuse(ref, 400, "bare CR, LF or NUL in the request head");
	}
	buf[len - 4] = 0;
	char *line = buf;
	char *next = strstr(line, "\r\n");
	if (next)
		*next = 0, next += 2;
	int rc = parse_request_line(line, r, ref);
	while (!rc && next) {
		line = next;
		next = strstr(line, "\r\n");
		if (next)
			*next = 0, next += 2;
		rc = parse_field(line, r, ref);
	}
	return rc ? rc : check_fields(r, ref);
}

enum { CH_SIZE, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_TRAILER_LF };

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Rails-style overrides turn an allowed POST into DELETE at the origin. A key is read as
 * frameworks read it: percent-decoded, '+' a space, and (PHP) ' ', '.' and '[' as '_'. */
bool sc__http_form_overrides(const char *s, size_t n)
{
	static const char want[] = "_method";
	for (size_t i = 0; i < n; i++) {
		size_t k = 0;
		bool same = true;
		for (; i < n && s[i] != '&' && s[i] != ';' && s[i] != '='; k++) {
			char c = s[i++];
			if (c == '%' && i + 1 < n && hexval(s[i]) >= 0 && hexval(s[i + 1]) >= 0)
				c = (char)(hexval(s[i]) * 16 + hexval(s[i + 1])), i += 2;
			c = c == '+' || c == ' ' || c == '.' || c == '['
				    ? '_'
				    : (char)tolower((unsigned char)c);
			same = same && k < sizeof(want) - 1 && c == want[k];
		}
		if (same && k == sizeof(want) - 1)
			return true;
		while (i < n && s[i] != '&' && s[i] != ';')
			i++;
	}
	return false;
}

/* One byte of a size line, a CRLF or a trailer line. */
static int chunked_ctl(struct sc_http_chunked *st, char c)
{
	switch (st->state) {
	case CH_SIZE:
		if (++st->line_len > SC_HTTP_CHUNK_LINE_MAX)
			return -EINVAL;
		if (c == '\r') {
			if (!st->size_seen)
				return -EINVAL;
			st->state = CH_SIZE_LF;
		} else if (c == ';' || st->ext) {
			if (c == '\n' || c == 0)
				return -EINVAL;
			st->ext = true;
		} else {
			int h = hexval(c);
			if (h < 0 || st->left > (UINT64_MAX >> 8))
				return -EINVAL;
			st->left = st->left * 16 + (uint64_t)h;
			st->size_seen = true;
		}
		return 0;
	case CH_SIZE_LF:
		if (c != '\n')
			return -EINVAL;
		st->line_len = 0;
		st->size_seen = st->ext = false;
		st->state = st->left ? CH_DATA : CH_TRAILER;
		return 0;
	case CH_DATA_CR:
		if (c != '\r')
			return -EINVAL;
		st->state = CH_DATA_LF;
		return 0;
	case CH_DATA_LF:
		if (c != '\n')
			return -EINVAL;
		st->state = CH_SIZE;
		return 0;
	case CH_TRAILER:
		if (++st->trailer_len > SC_HTTP_TRAILER_MAX)
			return -EINVAL;
		if (c == '\r')
			st->state = CH_TRAILER_LF;
		else if (c == '\n' || c == 0)
			return -EINVAL;
		else
			st->line_len++;
		return 0;
	case CH_TRAILER_LF:
		if (c != '\n')
			return -EINVAL;
		if (st->line_len == 0)
			st->done = true;
		st->line_len = 0;
		st->state = CH_TRAILER;
		return 0;
	}
	return -EINVAL;
}

int sc__http_chunked_feed(struct sc_http_chunked *st, const char *in, size_t in_len, size_t *used,
			  char *out, uint64_t *out_len, uint64_t out_cap)
{
	size_t i = 0;
	while (i < in_len && !st->done) {
		if (st->state != CH_DATA) {
			int rc = chunked_ctl(st, in[i++]);
			if (rc) {
				*used = i;
				return rc;
			}
			continue;
		}
		size_t n = in_len - i;
		if (n > st->left)
			n = (size_t)st->left;
		if (n > out_cap - *out_len) {
			*used = i;
			return -E2BIG;
		}
		if (out)
			memcpy(out + *out_len, in + i, n);
		*out_len += n;
		st->left -= n;
		i += n;
		if (!st->left)
			st->state = CH_DATA_CR;
	}
	*used = i;
	return 0;
}
