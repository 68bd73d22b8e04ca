/* Which entries allow a connection to (host, port), and which of them allows one HTTP
 * request. The host and request come from the gate, which parsed them from what a cell sent;
 * nothing here resolves names or judges addresses (addr.c). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
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

/* Why a request path cannot be compared with a prefix without guessing; NULL when it can. */
static const char *ambiguous_path(const char *p, size_t n)
{
	if (n == 0 || p[0] != '/')
		return "not an origin-form path";
	size_t seg = 1;
	for (size_t i = 0; i <= n; i++) {
		unsigned char c = i < n ? (unsigned char)p[i] : '/';
		if (c == '/' && i > 0) {
			const char *s = p + seg;
			size_t len = i - seg;
			const char *semi = memchr(s, ';', len);
			len = semi ? (size_t)(semi - s) : len;
			if (i < n && i == seg)
				return "an empty segment (//)";
			if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
				return "a '.' or '..' segment";
			seg = i + 1;
		} else if (c == '\\') {
			return "a backslash";
		} else if (c <= 0x20 || c >= 0x7f || c == '#') {
			return "a byte not allowed in a path";
		} else if (c == '%') {
			if (i + 2 >= n || !sc__net_is_hex(p[i + 1]) || !sc__net_is_hex(p[i + 2]))
				return "a '%' not followed by two hex digits";
			char a = sc__net_lower(p[i + 1]), b = sc__net_lower(p[i + 2]);
			if ((a == '2' && (b == 'f' || b == 'e' || b == '5')) ||
			    (a == '5' && b == 'c') || (a == '0' && b == '0'))
				return "a percent-encoded '/', '.', '\\', '%' or NUL";
			i += 2;
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
	const char *bad = path ? ambiguous_path(path, path_len) : "no path";
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
