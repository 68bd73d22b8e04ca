/* The strict parser of allow-list targets: a user's text made into one entry's host, port
 * rule and path rule, once, in the form the gate compares against. It refuses what URL parsers
 * disagree on (credentials, backslashes, fragments, numbers that read as IPv4 addresses,
 * percent-encoded separators, dot segments) rather than pick one reading. Not the reference's
 * host form: that is snapcell_normalize_domain (entries.c). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <idn2.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "util/util.h"

#define SHOWN SC_NET_SHOWN

/* The parts of a target, as spans of the trimmed input. */
struct parts {
	const char *all;
	size_t all_len;
	unsigned scheme_port; /* 80 for http://, 443 for https://, 0 without a scheme */
	const char *host;     /* brackets included */
	size_t host_len;
	unsigned port; /* 0 when absent */
	const char *path;
	size_t path_len; /* 0 without a path ("/" alone counts as none) */
};

static int fail(struct snapcell_error *err, const struct parts *p, const char *why)
{
	return sc__err(err, SNAPCELL_E_INVAL, "allow '%.*s': %s", SHOWN(p->all_len), p->all, why);
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Surrounding ASCII whitespace is dropped; inside, whitespace and control bytes are refused
 * (CVE-2023-24329: urllib.parse skipped leading whitespace that others kept). */
static int trim(const char *in, struct parts *p, struct snapcell_error *err)
{
	size_t n = strnlen(in, SC_NET_INPUT_MAX + 1);
	if (n > SC_NET_INPUT_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: target longer than %d bytes",
			       SC_NET_INPUT_MAX);
	while (n > 0 && is_space(*in))
		in++, n--;
	while (n > 0 && is_space(in[n - 1]))
		n--;
	if (n == 0)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: empty target");
	p->all = in;
	p->all_len = n;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		if (is_space((char)c))
			return fail(err, p, "whitespace inside the target");
		if (c < 0x20 || c == 0x7f)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow: control byte 0x%02x in the target", c);
		if (c == '\\')
			return fail(err, p,
				    "a backslash, which some URL parsers read as '/', is not "
				    "allowed in a target");
		if (c == '?' || c == '#')
			return fail(err, p,
				    "a query (?...) or fragment (#...) is not part of a target; "
				    "give the host and an optional path prefix");
	}
	return 0;
}

static int scheme(struct parts *p, const char **rest, struct snapcell_error *err)
{
	const char *s = p->all, *end = s + p->all_len;
	const char *slash = memchr(s, '/', p->all_len);
	const char *sep = memmem(s, p->all_len, "://", 3);
	*rest = s;
	if (!sep || (slash && slash < sep))
		return 0;
	size_t n = (size_t)(sep - s);
	if (n == 5 && !strncasecmp(s, "https", 5))
		p->scheme_port = 443;
	else if (n == 4 && !strncasecmp(s, "http", 4))
		p->scheme_port = 80;
	else
		return sc__err(err, SNAPCELL_E_INVAL,
			       "allow '%.*s': scheme '%.*s' is not supported (http:// or "
			       "https://, or none)",
			       SHOWN(p->all_len), p->all, SHOWN(n), s);
	*rest = sep + 3;
	return *rest < end ? 0 : fail(err, p, "no host");
}

static int parse_port(const struct parts *p, const char *s, size_t n, unsigned *port,
		      struct snapcell_error *err)
{
	unsigned v = 0;
	bool ok = n >= 1 && n <= 5;
	for (size_t i = 0; ok && i < n; i++) {
		ok = sc__net_is_digit(s[i]);
		v = v * 10 + (unsigned)(s[i] - '0');
	}
	if (!ok || v == 0 || v > 65535)
		return sc__err(err, SNAPCELL_E_INVAL, "allow '%.*s': bad port '%.*s' (1 to 65535)",
			       SHOWN(p->all_len), p->all, SHOWN(n), s);
	*port = v;
	return 0;
}

/* Authority (up to the first '/') into host and port; the rest is the path. */
static int authority(struct parts *p, const char *a, struct snapcell_error *err)
{
	const char *end = p->all + p->all_len;
	const char *slash = memchr(a, '/', (size_t)(end - a));
	const char *a_end = slash ? slash : end;
	size_t n = (size_t)(a_end - a);
	if (n == 0)
		return fail(err, p, "no host");
	if (memchr(a, '@', n))
		return fail(err, p,
			    "user names and passwords (user@host) are not allowed in a target");
	const char *colon;
	if (a[0] == '[') {
		const char *close = memchr(a, ']', n);
		if (!close)
			return fail(err, p, "unclosed '['");
		p->host_len = (size_t)(close - a) + 1;
		colon = close + 1 < a_end ? close + 1 : NULL;
		if (colon && *colon != ':')
			return fail(err, p, "unexpected text after ']'");
	} else {
		colon = memchr(a, ':', n);
		p->host_len = colon ? (size_t)(colon - a) : n;
		if (colon && memchr(colon + 1, ':', (size_t)(a_end - colon - 1)))
			return fail(err, p, "write an IPv6 address in brackets ([::1]:8080)");
	}
	p->host = a;
	if (p->host_len == 0)
		return fail(err, p, "no host");
	if (colon) {
		int rc = parse_port(p, colon + 1, (size_t)(a_end - colon - 1), &p->port, err);
		if (rc < 0)
			return rc;
	}
	if (slash && end - slash > 1) {
		p->path = slash;
		p->path_len = (size_t)(end - slash);
	}
	return 0;
}

/* Characters of RFC 3986's pchar other than '%', and '/'. */
static bool path_char(char c)
{
	return sc__net_is_alpha(c) || sc__net_is_digit(c) || (c && strchr("-._~!$&'()*+,;=:@/", c));
}

static int hexval(char c)
{
	return sc__net_is_digit(c) ? c - '0' : (sc__net_lower(c) - 'a' + 10);
}

/* A "." or ".." segment, with any ";params" (which some servers drop) ignored. */
static bool dot_segment(const char *seg, size_t n)
{
	const char *semi = memchr(seg, ';', n);
	if (semi)
		n = (size_t)(semi - seg);
	return (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.');
}

/* The path prefix, checked and copied with upper-case percent-encoding hex digits. */
static int path_rule(const struct parts *p, char **out, struct snapcell_error *err)
{
	if (p->path_len > SC_NET_PATH_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "allow '%.*s': path longer than %d bytes",
			       SHOWN(p->all_len), p->all, SC_NET_PATH_MAX);
	const char *s = p->path;
	size_t n = p->path_len;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c >= 0x80)
			return fail(err, p, "non-ASCII path; percent-encode it (%C3%BC)");
		if (c == '%') {
			if (i + 2 >= n || !sc__net_is_hex(s[i + 1]) || !sc__net_is_hex(s[i + 2]))
				return fail(err, p,
					    "'%' in the path is not followed by two hex digits");
			int v = hexval(s[i + 1]) * 16 + hexval(s[i + 2]);
			if (v == '/' || v == '\\' || v == '%' || v == '.' || v == 0)
				return fail(err, p,
					    "the path percent-encodes '/', '\\', '%', '.' or NUL, "
					    "which servers decode differently");
			if (sc__net_is_alpha((char)v) || sc__net_is_digit((char)v) || v == '-' ||
			    v == '_' || v == '~')
				return fail(err, p,
					    "the path percent-encodes a character that needs no "
					    "encoding; write it as it is");
			i += 2;
		} else if (!path_char((char)c)) {
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow '%.*s': character '%c' is not allowed in a path",
				       SHOWN(p->all_len), p->all, c);
		}
	}
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && s[j] != '/')
			j++;
		if (j == i + 1 && j < n)
			return fail(err, p, "empty path segment (//)");
		if (dot_segment(s + i + 1, j - i - 1))
			return fail(err, p, "'.' or '..' segment in the path");
		i = j;
	}
	/* What the gate refuses in a request it must refuse in a prefix too, or the entry
	 * would allow nothing. */
	const char *bad = sc__net_path_ambiguous(s, n);
	if (bad)
		return sc__err(err, SNAPCELL_E_INVAL, "allow '%.*s': the path has %s",
			       SHOWN(p->all_len), p->all, bad);
	if (!(*out = strndup(s, n)))
		return sc__err(err, -ENOMEM, "allow");
	for (char *c = *out; *c; c++)
		if (*c == '%')
			c[1] = (char)(c[1] >= 'a' ? c[1] - 'a' + 'A' : c[1]),
			c[2] = (char)(c[2] >= 'a' ? c[2] - 'a' + 'A' : c[2]), c += 2;
	return 0;
}

static int ipv6(const struct parts *p, struct sc_net_entry *e, struct snapcell_error *err)
{
	char in[INET6_ADDRSTRLEN + 1], out[INET6_ADDRSTRLEN];
	size_t n = p->host_len - 2;
	if (memchr(p->host, '%', p->host_len))
		return fail(err, p, "an IPv6 zone (%...) is not allowed in a target");
	if (n >= sizeof(in))
		return fail(err, p, "bad IPv6 address");
	memcpy(in, p->host + 1, n);
	in[n] = 0;
	if (inet_pton(AF_INET6, in, e->addr) != 1 ||
	    !inet_ntop(AF_INET6, e->addr, out, sizeof(out)))
		return fail(err, p, "bad IPv6 address");
	e->kind = SC_NET_IPV6;
	return (e->host = strdup(out)) ? 0 : sc__err(err, -ENOMEM, "allow");
}

/* A canonical dotted quad: four decimal numbers 0-255 without leading zeros. */
static bool dotted_quad(const char *h, uint8_t addr[4])
{
	for (int part = 0; part < 4; part++) {
		unsigned v = 0;
		size_t digits = 0;
		while (sc__net_is_digit(*h) && digits < 4)
			v = v * 10 + (unsigned)(*h++ - '0'), digits++;
		if (digits == 0 || digits > 3 || v > 255 || (digits > 1 && h[-(long)digits] == '0'))
			return false;
		addr[part] = (uint8_t)v;
		if (part < 3 && *h++ != '.')
			return false;
	}
	return *h == 0;
}

/* WHATWG URL parsers read a host whose last label is a number (decimal, or 0x hex) as an
 * IPv4 address, and inet_aton() takes "127.1", "0x7f000001", "2130706433" and octal. */
static bool reads_as_number(const char *h)
{
	const char *last = strrchr(h, '.');
	last = last ? last + 1 : h;
	bool hex = (last[0] == '0' && (last[1] == 'x' || last[1] == 'X'));
	const char *d = hex ? last + 2 : last;
	bool all = *last != 0;
	for (; *d && all; d++)
		all = hex ? sc__net_is_hex(*d) : sc__net_is_digit(*d);
	struct in_addr a;
	return all || inet_aton(h, &a);
}

/* Labels of letters, digits, '-' and '_'; 1 to 63 bytes each; 253 in all. */
static int check_labels(const struct parts *p, const char *h, struct snapcell_error *err)
{
	size_t label = 0, n = strlen(h);
	if (n > SC_NET_HOST_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: host longer than %d bytes",
			       SC_NET_HOST_MAX);
	for (size_t i = 0; i <= n; i++) {
		char c = h[i];
		if (c == '.' || c == 0) {
			if (label == 0)
				return fail(err, p, "empty label in the host");
			label = 0;
			continue;
		}
		if (!sc__net_is_alpha(c) && !sc__net_is_digit(c) && c != '-' && c != '_')
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow '%.*s': character '%c' is not allowed in a host",
				       SHOWN(p->all_len), p->all, c);
		if (++label > SC_NET_LABEL_MAX)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow '%.*s': a label is longer than %d bytes",
				       SHOWN(p->all_len), p->all, SC_NET_LABEL_MAX);
	}
	return 0;
}

/* A name (or a wildcard's suffix) as lower-case A-labels, one trailing dot dropped;
 * non-ASCII text goes through IDNA 2008 with UTS #46 non-transitional mapping. */
static int name(const struct parts *p, const char *h, size_t n, char **out,
		struct snapcell_error *err)
{
	char buf[SC_NET_INPUT_MAX + 1];
	memcpy(buf, h, n);
	buf[n] = 0;
	bool ascii = true;
	for (size_t i = 0; i < n; i++)
		ascii = ascii && (unsigned char)buf[i] < 0x80;
	if (ascii) {
		*out = strdup(buf);
	} else {
		char *a = NULL;
		int rc = idn2_to_ascii_8z(buf, &a, IDN2_NONTRANSITIONAL | IDN2_NFC_INPUT);
		if (rc != IDN2_OK)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow '%.*s': not an international domain name (%s)",
				       SHOWN(p->all_len), p->all, idn2_strerror(rc));
		*out = strdup(a);
		idn2_free(a);
	}
	if (!*out)
		return sc__err(err, -ENOMEM, "allow");
	char *s = *out;
	size_t len = strlen(s);
	for (size_t i = 0; i < len; i++)
		s[i] = sc__net_lower(s[i]);
	if (len > 1 && s[len - 1] == '.')
		s[--len] = 0;
	if (strchr(s, '*'))
		return fail(err, p, "a wildcard is '*.' followed by a domain (*.example.com)");
	return check_labels(p, s, err);
}

static int host(const struct parts *p, struct sc_net_entry *e, struct snapcell_error *err)
{
	if (p->host[0] == '[')
		return ipv6(p, e, err);
	bool wild = p->host_len >= 2 && p->host[0] == '*' && p->host[1] == '.';
	size_t skip = wild ? 2 : 0;
	int rc = name(p, p->host + skip, p->host_len - skip, &e->host, err);
	if (rc < 0)
		return rc;
	e->kind = wild ? SC_NET_WILDCARD : SC_NET_NAME;
	if (!wild && dotted_quad(e->host, e->addr)) {
		e->kind = SC_NET_IPV4;
		return 0;
	}
	struct in_addr a;
	if (!wild && inet_aton(e->host, &a)) {
		char quad[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &a, quad, sizeof(quad));
		return sc__err(err, SNAPCELL_E_INVAL,
			       "allow '%.*s': write an IPv4 address as its dotted quad (%s)",
			       SHOWN(p->all_len), p->all, quad);
	}
	if (reads_as_number(e->host))
		return fail(err, p,
			    "a host whose last label is a number is read as an IPv4 address "
			    "by some clients; write an IPv4 address as its dotted quad");
	if (wild && !strchr(e->host, '.'))
		return fail(err, p,
			    "a wildcard needs at least two labels after '*.' (*.example.com)");
	if (strlen(e->host) + skip > SC_NET_HOST_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: host longer than %d bytes",
			       SC_NET_HOST_MAX);
	return 0;
}

/* The canonical text (net.h, struct sc_net_entry's target). */
static int canonical(const struct parts *p, struct sc_net_entry *e, struct snapcell_error *err)
{
	char t[SC_NET_TARGET_MAX], h[SC_NET_HOST_MAX + 3], port[16] = "";
	const char *pre = e->kind == SC_NET_WILDCARD ? "*." : "";
	if (e->kind == SC_NET_IPV6)
		snprintf(h, sizeof(h), "[%s]", e->host);
	else
		snprintf(h, sizeof(h), "%s%s", pre, e->host);
	unsigned shown = p->port;
	if (e->path && p->scheme_port && p->port == p->scheme_port)
		shown = 0;
	if (!e->path && !p->port)
		shown = p->scheme_port;
	if (shown)
		snprintf(port, sizeof(port), ":%u", shown);
	const char *sch = !e->path || !p->scheme_port ? ""
			  : p->scheme_port == 443     ? "https://"
						      : "http://";
	snprintf(t, sizeof(t), "%s%s%s%s", sch, h, port, e->path ? e->path : "");
	return (e->target = strdup(t)) ? 0 : sc__err(err, -ENOMEM, "allow");
}

int sc__net_target_parse(const char *in, struct sc_net_entry *e, struct snapcell_error *err)
{
	struct parts p = {0};
	const char *rest;
	if (!in)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: NULL target");
	int rc = trim(in, &p, err);
	if (rc == 0)
		rc = scheme(&p, &rest, err);
	if (rc == 0)
		rc = authority(&p, rest, err);
	if (rc == 0)
		rc = host(&p, e, err);
	if (rc == 0 && p.path_len)
		rc = path_rule(&p, &e->path, err);
	if (rc < 0)
		return rc;
	e->scheme = p.scheme_port == 443  ? SC_NET_SCHEME_HTTPS
		    : p.scheme_port == 80 ? SC_NET_SCHEME_HTTP
					  : SC_NET_SCHEME_NONE;
	unsigned port = p.port ? p.port : p.scheme_port;
	if (port) {
		e->ports[0] = (uint16_t)port;
		e->n_ports = 1;
	} else {
		e->ports[0] = 80;
		e->ports[1] = 443;
		e->n_ports = 2;
	}
	return canonical(&p, e, err);
}
