/* Which entries allow a connection to (host, port), and which of them allows one HTTP
 * request. The host and request come from the gate, which parsed them from what a cell sent;
 * nothing here resolves names or judges addresses (addr.c). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static bool has_port(const struct sc_net_entry *e, uint16_t port)
{
	for (size_t i = 0; i < e->n_ports; i++)
		if (e->ports[i] == port)
			return true;
	return false;
}

/* "a.example.com" and "a.b.example.com" under "example.com"; never "example.com" itself. */
static bool under(const char *host, const char *suffix)
{
	size_t h = strlen(host), s = strlen(suffix);
	return h > s + 1 && host[h - s - 1] == '.' && !strcmp(host + h - s, suffix);
}

size_t sc__net_match_host(const struct sc_net_list *l, const char *host, uint16_t port,
			  const struct sc_net_entry **out, size_t cap)
{
	uint8_t addr[16] = {0};
	enum sc_net_kind ip = SC_NET_NAME;
	if (inet_pton(AF_INET, host, addr) == 1)
		ip = SC_NET_IPV4;
	else if (inet_pton(AF_INET6, host, addr) == 1)
		ip = SC_NET_IPV6;
	size_t n = 0;
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < l->n; i++) {
			const struct sc_net_entry *e = &l->entries[i];
			bool hit;
			if (!has_port(e, port))
				continue;
			if (pass == 0 && ip != SC_NET_NAME)
				hit = e->kind == ip &&
				      !memcmp(e->addr, addr, ip == SC_NET_IPV4 ? 4 : 16);
			else if (pass == 0)
				hit = e->kind == SC_NET_NAME && !strcmp(e->host, host);
			else
				hit = ip == SC_NET_NAME && e->kind == SC_NET_WILDCARD &&
				      under(host, e->host);
			if (hit && n < cap)
				out[n] = e;
			n += hit;
		}
	return n;
}

static bool method_allowed(const struct sc_net_entry *e, const char *method)
{
	if (!e->methods)
		return true;
	for (size_t i = 0; i < e->n_methods; i++)
		if (!strcmp(e->methods[i], method))
			return true;
	return false;
}

/* Code points that a server or framework behind the gate may fold into a path separator,
 * a dot, a parameter or query delimiter, or a '%' (NFKC, UTS #46 mapping, Windows best-fit
 * code pages): decoded after the gate compared the path, "/v1/%EF%BC%8E%EF%BC%8E/admin"
 * would become "/v1/../admin". The list is docs/security.md's. */
static const struct {
	uint32_t first, last;
} folds_to_syntax[] = {
	{0x037e, 0x037e},   /* GREEK QUESTION MARK: ';' (canonically) */
	{0x2024, 0x2026},   /* ONE DOT LEADER, TWO DOT LEADER, HORIZONTAL ELLIPSIS: dots */
	{0x2044, 0x2044},   /* FRACTION SLASH */
	{0x2047, 0x2049},   /* DOUBLE QUESTION MARK .. EXCLAMATION QUESTION MARK: "??" "?!" "!?" */
	{0x2100, 0x2101},   /* ACCOUNT OF, ADDRESSED TO THE SUBJECT: "a/c", "a/s" */
	{0x2105, 0x2106},   /* CARE OF, CADA UNA: "c/o", "c/u" */
	{0x2215, 0x2216},   /* DIVISION SLASH, SET MINUS (a backslash in best-fit tables) */
	{0x2488, 0x249b},   /* DIGIT ONE FULL STOP .. NUMBER TWENTY FULL STOP: "1." .. "20." */
	{0x29f5, 0x29f5},   /* REVERSE SOLIDUS OPERATOR */
	{0x29f8, 0x29f9},   /* BIG SOLIDUS, BIG REVERSE SOLIDUS */
	{0x3002, 0x3002},   /* IDEOGRAPHIC FULL STOP: '.' (UTS #46) */
	{0x33c2, 0x33c2},   /* SQUARE AM: "a.m." */
	{0x33c7, 0x33c7},   /* SQUARE CO: "Co." */
	{0x33d8, 0x33d8},   /* SQUARE PM: "p.m." */
	{0xfe14, 0xfe14},   /* PRESENTATION FORM FOR VERTICAL SEMICOLON */
	{0xfe16, 0xfe16},   /* PRESENTATION FORM FOR VERTICAL QUESTION MARK */
	{0xfe19, 0xfe19},   /* PRESENTATION FORM FOR VERTICAL HORIZONTAL ELLIPSIS: "..." */
	{0xfe30, 0xfe30},   /* PRESENTATION FORM FOR VERTICAL TWO DOT LEADER: ".." */
	{0xfe52, 0xfe52},   /* SMALL FULL STOP */
	{0xfe54, 0xfe54},   /* SMALL SEMICOLON */
	{0xfe56, 0xfe56},   /* SMALL QUESTION MARK */
	{0xfe5f, 0xfe5f},   /* SMALL NUMBER SIGN */
	{0xfe68, 0xfe68},   /* SMALL REVERSE SOLIDUS */
	{0xfe6a, 0xfe6a},   /* SMALL PERCENT SIGN */
	{0xff03, 0xff03},   /* FULLWIDTH NUMBER SIGN */
	{0xff05, 0xff05},   /* FULLWIDTH PERCENT SIGN */
	{0xff0e, 0xff0f},   /* FULLWIDTH FULL STOP, FULLWIDTH SOLIDUS */
	{0xff1b, 0xff1b},   /* FULLWIDTH SEMICOLON */
	{0xff1f, 0xff1f},   /* FULLWIDTH QUESTION MARK */
	{0xff3c, 0xff3c},   /* FULLWIDTH REVERSE SOLIDUS */
	{0xff61, 0xff61},   /* HALFWIDTH IDEOGRAPHIC FULL STOP */
	{0x1f100, 0x1f100}, /* DIGIT ZERO FULL STOP: "0." */
};

static bool folds(uint32_t cp)
{
	for (size_t i = 0; i < sizeof(folds_to_syntax) / sizeof(folds_to_syntax[0]); i++)
		if (cp >= folds_to_syntax[i].first && cp <= folds_to_syntax[i].last)
			return true;
	return false;
}

static int hex_value(char c)
{
	return sc__net_is_digit(c) ? c - '0' : sc__net_lower(c) - 'a' + 10;
}

/* The byte "%XX" at p[i] encodes (the caller checked the hex digits). */
static unsigned pct_byte(const char *p, size_t i)
{
	return (unsigned)(hex_value(p[i + 1]) * 16 + hex_value(p[i + 2]));
}

/* A percent-encoded UTF-8 sequence at p[i] (its first byte >= 0x80), each byte "%XX":
 * the bytes of path text it spans, with its code point in *cp; 0 when it is not strict
 * UTF-8 (a stray continuation byte, overlong forms such as %C0%AE, surrogates, past
 * U+10FFFF, cut short), which decoders disagree on. */
static size_t pct_utf8(const char *p, size_t n, size_t i, uint32_t *cp)
{
	unsigned b = pct_byte(p, i);
	size_t len = b >= 0xc2 && b <= 0xdf   ? 2
		     : b >= 0xe0 && b <= 0xef ? 3
		     : b >= 0xf0 && b <= 0xf4 ? 4
					      : 0;
	if (!len)
		return 0;
	uint32_t c = b & (0x7f >> len);
	for (size_t k = 1; k < len; k++) {
		size_t at = i + 3 * k;
		if (at + 2 >= n || p[at] != '%' || !sc__net_is_hex(p[at + 1]) ||
		    !sc__net_is_hex(p[at + 2]))
			return 0;
		unsigned cb = pct_byte(p, at);
		if ((cb & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (cb & 0x3f);
	}
	static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
	if (c < least[len] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return 3 * len;
}

const char *sc__net_path_ambiguous(const char *p, size_t n)
{
	if (n == 0 || p[0] != '/')
		return "not an origin-form path";
	size_t seg = 1;
	for (size_t i = 0; i <= n; i++) {
		unsigned char c = i < n ? (unsigned char)p[i] : '/';
		if (c == '/' && i > 0) {
			const char *s = p + seg;
			size_t len = i - seg;
			if (i < n && i == seg)
				return "an empty segment (//)";
			if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
				return "a '.' or '..' segment";
			seg = i + 1;
		} else if (c == '\\') {
			return "a backslash";
		} else if (c == ';') {
			/* Path parameters: Tomcat and Spring drop "..;x" to "..", others do not. */
			return "a ';' (a path parameter)";
		} else if (c <= 0x20 || c >= 0x7f || c == '#') {
			return "a byte not allowed in a path";
		} else if (c == '%') {
			if (i + 2 >= n || !sc__net_is_hex(p[i + 1]) || !sc__net_is_hex(p[i + 2]))
				return "a '%' not followed by two hex digits";
			char a = sc__net_lower(p[i + 1]), b = sc__net_lower(p[i + 2]);
			if ((a == '2' && (b == 'f' || b == 'e' || b == '5')) ||
			    (a == '5' && b == 'c') || (a == '0' && b == '0') ||
			    (a == '3' && b == 'b'))
				return "a percent-encoded '/', '.', '\\', '%', ';' or NUL";
			if (pct_byte(p, i) < 0x80) {
				i += 2;
				continue;
			}
			uint32_t cp;
			size_t len = pct_utf8(p, n, i, &cp);
			if (!len)
				return "percent-encoded bytes that are not UTF-8 (or overlong)";
			if (folds(cp))
				return "a percent-encoded character that folds to '.', '/', '\\', "
				       "';', '?', '#' or '%'";
			i += len - 1;
		}
	}
	return NULL;
}

/* Whether path (n bytes) is prefix or continues it at a '/'; percent-encoding hex digits
 * compare case-insensitively (the prefix has them upper-case). */
static bool path_under(const char *path, size_t n, const char *prefix)
{
	size_t i = 0;
	for (; prefix[i]; i++) {
		if (i >= n)
			return false;
		bool hex = i >= 1 && (prefix[i - 1] == '%' || (i >= 2 && prefix[i - 2] == '%'));
		char a = hex ? sc__net_lower(path[i]) : path[i];
		char b = hex ? sc__net_lower(prefix[i]) : prefix[i];
		if (a != b)
			return false;
	}
	return i == n || prefix[i - 1] == '/' || path[i] == '/';
}

static void methods_text(const struct sc_net_entry *e, char *buf, size_t len)
{
	size_t at = 0;
	buf[0] = 0;
	for (size_t i = 0; i < e->n_methods && at < len; i++) {
		int w = snprintf(buf + at, len - at, "%s%s", i ? ", " : "", e->methods[i]);
		at += w > 0 ? (size_t)w : 0;
	}
}

const struct sc_net_entry *sc__net_match_request(const struct sc_net_entry *const *cands, size_t n,
						 const char *method, const char *path, char *why,
						 size_t why_len)
{
	const char *q = path ? strchr(path, '?') : NULL;
	size_t path_len = !path ? 0 : q ? (size_t)(q - path) : strlen(path);
	const char *bad = path ? sc__net_path_ambiguous(path, path_len) : "no path";
	const struct sc_net_entry *path_miss = NULL, *method_miss = NULL, *ambiguous = NULL;
	if (why_len)
		snprintf(why, why_len, "no entry allows this host and port");
	for (size_t i = 0; i < n; i++) {
		const struct sc_net_entry *e = cands[i];
		bool path_ok = !e->path || (!bad && path_under(path, path_len, e->path));
		if (e->path && bad && !ambiguous)
			ambiguous = e;
		else if (!path_ok && !path_miss)
			path_miss = e;
		bool method_ok = method && method_allowed(e, method);
		if (path_ok && method_ok)
			return e;
		if (path_ok && !method_miss)
			method_miss = e;
	}
	char list[256];
	if (!why_len)
		return NULL;
	if (method_miss) {
		methods_text(method_miss, list, sizeof(list));
		snprintf(why, why_len, "%.32s is not allowed for %s (%s)", method ? method : "?",
			 method_miss->target, list);
	} else if (ambiguous) {
		snprintf(why, why_len, "the path has %s; refused for %s rather than guessed", bad,
			 ambiguous->target);
	} else if (path_miss) {
		snprintf(why, why_len, "the path is not under %s for %s", path_miss->path,
			 path_miss->target);
	}
	return NULL;
}
