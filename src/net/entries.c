/* Allow-list entries: a target (target.c) and method names made into the one entry every
 * front end stores, lists and describes; and the reference integration's looser host form
 * (snapcell_normalize_domain), which the Agent Framework adapter lists. Not the gate: nothing
 * here decides whether a connection may happen. Inputs are refused rather than guessed at
 * when they could mean two things (credentials in a URL, an unbracketed IPv6 address). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "util/util.h"

/* Messages quote at most this much of a target, so the reason always fits. */
#define SHOWN(n) ((int)((n) > 64 ? 64 : (n)))

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static char lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Trims ASCII whitespace; refuses what cannot be part of any host or URL we accept, before
 * the text goes into a message. */
static int trim(const char *in, const char **start, size_t *len, const char *what, bool utf8,
		struct snapcell_error *err)
{
	size_t n = strnlen(in, SC_NET_INPUT_MAX + 1);
	if (n > SC_NET_INPUT_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: %s longer than %d bytes", what,
			       SC_NET_INPUT_MAX);
	while (n > 0 && is_space(*in))
		in++, n--;
	while (n > 0 && is_space(in[n - 1]))
		n--;
	if (n == 0)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: empty %s", what);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		if (is_space((char)c))
			return sc__err(err, SNAPCELL_E_INVAL, "allow: whitespace inside the %s",
				       what);
		if (c < 0x20 || c == 0x7f)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow: control byte 0x%02x in the %s", c, what);
		if (c >= 0x80 && !utf8)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow: non-ASCII %s; write an international domain name "
				       "in its xn-- (punycode) form",
				       what);
	}
	*start = in;
	*len = n;
	return 0;
}

/* "scheme://authority/path?query#fragment" or "authority/path": the authority's span. */
static int authority(const char *s, size_t n, const char **a, size_t *a_len,
		     struct snapcell_error *err)
{
	const char *sep = memmem(s, n, "://", 3);
	if (sep) {
		bool ok = sep > s && is_alpha(*s);
		for (const char *p = s; ok && p < sep; p++)
			ok = is_alpha(*p) || is_digit(*p) || *p == '+' || *p == '-' || *p == '.';
		if (!ok)
			return sc__err(err, SNAPCELL_E_INVAL, "allow '%.*s': bad URL scheme",
				       SHOWN(n), s);
		n -= (size_t)(sep + 3 - s);
		s = sep + 3;
	}
	size_t end = strcspn(s, "/?#");
	*a = s;
	*a_len = end < n ? end : n;
	if (*a_len == 0)
		return sc__err(err, SNAPCELL_E_INVAL, "allow '%.*s': no host", SHOWN(n), s);
	if (memchr(s, '@', *a_len))
		return sc__err(err, SNAPCELL_E_INVAL,
			       "allow '%.*s': user names and passwords (user@host) are not "
			       "allowed in a target",
			       SHOWN(*a_len), s);
	return 0;
}

/* Labels of letters, digits, '-' and '_' between dots; one trailing dot (the root) dropped. */
static int check_name(const char *h, size_t *n, struct snapcell_error *err)
{
	if (*n > 1 && h[*n - 1] == '.')
		(*n)--;
	if (h[0] == '*')
		return sc__err(err, SNAPCELL_E_INVAL,
			       "allow '%.*s': a wildcard is only a leading '*.' (*.example.com)",
			       SHOWN(*n), h);
	size_t label = 0;
	for (size_t i = 0; i < *n; i++) {
		char c = h[i];
		if (c == '.') {
			if (label == 0)
				break;
			label = 0;
			continue;
		}
		if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '_')
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow '%.*s': character '%c' is not allowed in a host",
				       SHOWN(*n), h, c);
		if (++label > SC_NET_LABEL_MAX)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow '%.*s': a label is longer than %d bytes", SHOWN(*n),
				       h, SC_NET_LABEL_MAX);
	}
	if (label == 0)
		return sc__err(err, SNAPCELL_E_INVAL, "allow '%.*s': empty label in the host",
			       SHOWN(*n), h);
	return 0;
}

/* "[" hex digits, ':' and '.' "]": an IPv6 literal, kept bracketed so a port stays readable. */
static int check_ipv6(const char *h, size_t n, struct snapcell_error *err)
{
	bool colon = false;
	for (size_t i = 1; i + 1 < n; i++) {
		char c = lower(h[i]);
		colon = colon || c == ':';
		if (!is_digit(c) && !(c >= 'a' && c <= 'f') && c != ':' && c != '.')
			return sc__err(err, SNAPCELL_E_INVAL, "allow '%.*s': bad IPv6 address",
				       SHOWN(n), h);
	}
	if (!colon)
		return sc__err(err, SNAPCELL_E_INVAL, "allow '%.*s': bad IPv6 address", SHOWN(n),
			       h);
	return 0;
}

static int parse_port(const char *p, size_t n, unsigned *port, struct snapcell_error *err)
{
	unsigned v = 0;
	bool ok = n >= 1 && n <= 5;
	for (size_t i = 0; ok && i < n; i++) {
		ok = is_digit(p[i]);
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	if (!ok || v == 0 || v > 65535)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: bad port '%.*s' (1 to 65535)",
			       SHOWN(n), p);
	*port = v;
	return 0;
}

/* Splits the authority into host and port and checks both; *port is 0 when absent. */
static int host_port(const char *a, size_t n, size_t *host_len, unsigned *port,
		     struct snapcell_error *err)
{
	const char *colon;
	*port = 0;
	if (a[0] == '[') {
		const char *close = memchr(a, ']', n);
		if (!close)
			return sc__err(err, SNAPCELL_E_INVAL, "allow '%.*s': unclosed '['",
				       SHOWN(n), a);
		*host_len = (size_t)(close - a) + 1;
		colon = *host_len < n ? close + 1 : NULL;
		if (colon && *colon != ':')
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow '%.*s': unexpected text after ']'", SHOWN(n), a);
	} else {
		colon = memchr(a, ':', n);
		*host_len = colon ? (size_t)(colon - a) : n;
		if (colon && memchr(colon + 1, ':', n - *host_len - 1))
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow '%.*s': write an IPv6 address in brackets "
				       "([::1]:8080)",
				       SHOWN(n), a);
	}
	if (*host_len == 0 || *host_len > SC_NET_HOST_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: host %s",
			       *host_len ? "longer than 253 bytes" : "missing");
	int rc = a[0] == '[' ? check_ipv6(a, *host_len, err) : check_name(a, host_len, err);
	if (rc == 0 && colon)
		rc = parse_port(colon + 1, (size_t)(a + n - colon - 1), port, err);
	return rc;
}

int snapcell_normalize_domain(const char *in, char *out, size_t out_len, struct snapcell_error *err)
{
	if (!in || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: NULL argument");
	const char *s = NULL, *a = NULL;
	size_t n = 0, a_len = 0, host_len = 0;
	unsigned port = 0;
	int rc = trim(in, &s, &n, "target", false, err);
	if (rc == 0)
		rc = authority(s, n, &a, &a_len, err);
	/* "*.example.org" as snapcell_config_allow takes it: the wildcard label kept, the domain
	 * after it checked and normalised like any host (the reference lists such entries). */
	bool wildcard = rc == 0 && a_len > 2 && a[0] == '*' && a[1] == '.';
	if (wildcard) {
		a += 2;
		a_len -= 2;
	}
	if (rc == 0)
		rc = host_port(a, a_len, &host_len, &port, err);
	if (rc < 0)
		return rc;
	size_t pre = wildcard ? 2 : 0;
	if (pre + host_len + (port ? 6 : 0) >= out_len)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: output buffer too small");
	memcpy(out, "*.", pre);
	for (size_t i = 0; i < host_len; i++)
		out[pre + i] = lower(a[i]);
	out[pre + host_len] = 0;
	if (port)
		snprintf(out + pre + host_len, out_len - pre - host_len, ":%u", port);
	return 0;
}

static int parse_method(const char *in, char *out, struct snapcell_error *err)
{
	const char *s;
	size_t n;
	int rc = trim(in, &s, &n, "method", false, err);
	if (rc < 0)
		return rc;
	if (n > SC_NET_METHOD_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: method longer than %d bytes",
			       SC_NET_METHOD_MAX);
	for (size_t i = 0; i < n; i++) {
		if (!sc__net_is_tchar(s[i]))
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow: method '%.*s' is not an HTTP token (character '%c')",
				       SHOWN(n), s, s[i]);
		out[i] = s[i] >= 'a' && s[i] <= 'z' ? (char)(s[i] - 'a' + 'A') : s[i];
	}
	out[n] = 0;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int parse_methods(const char *const *methods, size_t n, struct sc_net_entry *e,
			 struct snapcell_error *err)
{
	if (!methods)
		return n ? sc__err(err, SNAPCELL_E_INVAL,
				   "allow %s: methods NULL but n_methods %zu", e->target, n)
			 : 0;
	if (n == 0)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "allow %s: an empty methods list allows nothing; pass NULL for any "
			       "method",
			       e->target);
	if (n > SC_NET_MAX_METHODS)
		return sc__err(err, SNAPCELL_E_INVAL, "allow %s: more than %d methods", e->target,
			       SC_NET_MAX_METHODS);
	if (!(e->methods = calloc(n, sizeof(char *))))
		return sc__err(err, -ENOMEM, "allow %s", e->target);
	for (size_t i = 0; i < n; i++) {
		char m[SC_NET_METHOD_MAX + 1];
		int rc = methods[i]
				 ? parse_method(methods[i], m, err)
				 : sc__err(err, SNAPCELL_E_INVAL, "allow: method %zu is NULL", i);
		if (rc < 0)
			return rc;
		if (!(e->methods[e->n_methods++] = strdup(m)))
			return sc__err(err, -ENOMEM, "allow %s", e->target);
	}
	qsort(e->methods, e->n_methods, sizeof(char *), cmp_str);
	size_t kept = 1;
	for (size_t i = 1; i < e->n_methods; i++) {
		if (strcmp(e->methods[i], e->methods[kept - 1]))
			e->methods[kept++] = e->methods[i];
		else
			free(e->methods[i]);
	}
	e->n_methods = kept;
	return 0;
}

int sc__net_entry_parse(const char *target, const char *const *methods, size_t n_methods,
			struct sc_net_entry *out, struct snapcell_error *err)
{
	*out = (struct sc_net_entry){0};
	int rc = sc__net_target_parse(target, out, err);
	if (rc == 0)
		rc = parse_methods(methods, n_methods, out, err);
	if (rc < 0)
		sc__net_entry_clear(out);
	return rc;
}

int sc__net_target_normalize(const char *target, char *out, size_t out_len,
			     struct snapcell_error *err)
{
	struct sc_net_entry e = {0};
	int rc = sc__net_target_parse(target, &e, err);
	if (rc == 0 && strlen(e.target) >= out_len)
		rc = sc__err(err, SNAPCELL_E_INVAL, "allow: output buffer too small");
	if (rc == 0)
		strcpy(out, e.target);
	sc__net_entry_clear(&e);
	return rc;
}

void sc__net_entry_clear(struct sc_net_entry *e)
{
	for (size_t i = 0; i < e->n_methods; i++)
		free(e->methods[i]);
	free(e->methods);
	for (size_t i = 0; i < e->n_headers; i++) {
		free(e->headers[i].name);
		if (e->headers[i].value)
			explicit_bzero(e->headers[i].value, strlen(e->headers[i].value));
		free(e->headers[i].value);
	}
	free(e->headers);
	free(e->target);
	free(e->host);
	free(e->path);
	*e = (struct sc_net_entry){0};
}
