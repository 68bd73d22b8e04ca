/* libFuzzer target for network allow-list entries: a target, then (after a NUL) fields each
 * ended by a NUL: methods, or for matching a method and a path. Whatever comes in is refused,
 * or becomes an entry in the one canonical form (which parses to itself, with the same kind,
 * host, ports and path, and with a path rule the same scheme), that matches its own host and
 * port and allows a request to its own path, in a list kept sorted with the same target
 * replaced and copied deeply with its headers (never on an http:// entry). The reference's
 * host form (snapcell_normalize_domain) normalises to itself too (a '*' only as a leading
 * "*." label), and the address rules take the input's first bytes as an IPv4 and an IPv6
 * address. Input "t" means methods NULL; "t\0" an empty methods array. */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

#define MAX_FIELDS 40

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_host_form(const char *in)
{
	char once[SNAPCELL_TARGET_MAX], again[SNAPCELL_TARGET_MAX];
	if (snapcell_normalize_domain(in, once, sizeof(once), NULL))
		return;
	size_t n = strlen(once);
	size_t wildcard = strncmp(once, "*.", 2) ? 0 : 2; /* a leading "*." is the one '*' kept */
	if (n == wildcard || strpbrk(once + wildcard, "/?#@ *\\") || once[n - 1] == '.' ||
	    snapcell_normalize_domain(once, again, sizeof(again), NULL) || strcmp(again, once))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)once[i] <= 0x20 || (unsigned char)once[i] >= 0x7f ||
		    (once[i] >= 'A' && once[i] <= 'Z'))
			abort();
}

static void check_target(const struct sc_net_entry *e)
{
	const char *t = e->target;
	for (const char *p = t; *p; p++)
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f || strchr("\\?#", *p))
			abort();
	for (const char *p = e->host; *p; p++)
		if ((*p >= 'A' && *p <= 'Z') || strchr("@/%[]", *p))
			abort();
	struct sc_net_entry again;
	if (sc__net_entry_parse(t, NULL, 0, &again, NULL) || strcmp(again.target, t) ||
	    again.kind != e->kind || strcmp(again.host, e->host) || again.n_ports != e->n_ports ||
	    memcmp(again.ports, e->ports, sizeof(e->ports)) || memcmp(again.addr, e->addr, 16) ||
	    !again.path != !e->path || (e->path && strcmp(again.path, e->path)) ||
	    (e->path && again.scheme != e->scheme))
		abort();
	sc__net_entry_clear(&again);
	if (e->path && (e->path[0] != '/' || strstr(e->path, "//") || strstr(e->path, "/../") ||
			strlen(e->path) > SC_NET_PATH_MAX))
		abort();
}

static void check_methods(const struct sc_net_entry *e, size_t given)
{
	if (e->methods && (e->n_methods == 0 || e->n_methods > given))
		abort();
	for (size_t i = 0; i < e->n_methods; i++) {
		const char *m = e->methods[i];
		if (!*m || strlen(m) > SC_NET_METHOD_MAX ||
		    (i && strcmp(e->methods[i - 1], m) >= 0))
			abort();
		for (const char *p = m; *p; p++)
			if ((*p >= 'a' && *p <= 'z') || (unsigned char)*p <= 0x20 ||
			    (unsigned char)*p >= 0x7f)
				abort();
	}
}

/* The entry matches its own host and port and allows its own path; a request that names
 * something else is refused with a reason that fits. */
static void check_match(const struct sc_net_list *l, const struct sc_net_entry *e,
			const char *method, const char *path)
{
	char host[SC_NET_HOST_MAX + 8];
	snprintf(host, sizeof(host), "%s%s", e->kind == SC_NET_WILDCARD ? "a." : "", e->host);
	const struct sc_net_entry *c[4];
	size_t n = sc__net_match_host(l, host, e->ports[0], c, 4);
	bool found = false;
	for (size_t i = 0; i < n && i < 4; i++)
		found = found || c[i] == e;
	if (!found)
		abort();
	if (e->kind == SC_NET_WILDCARD) { /* never the suffix itself */
		size_t k = sc__net_match_host(l, e->host, e->ports[0], c, 4);
		for (size_t i = 0; i < k && i < 4; i++)
			if (c[i] == e)
				abort();
		n = sc__net_match_host(l, host, e->ports[0], c, 4);
	}
	char why[96];
	const char *m = e->methods ? e->methods[0] : "GET";
	if (!sc__net_match_request(c, n < 4 ? n : 4, m, e->path ? e->path : "/", why, sizeof(why)))
		abort();
	why[0] = 0;
	if (!sc__net_match_request(c, n < 4 ? n : 4, method, path, why, sizeof(why)) &&
	    (!why[0] || strlen(why) >= sizeof(why)))
		abort();
}

/* Puts e and a copy of it with no methods: the list keeps one entry, the later one; a header
 * travels with a deep copy. */
static void check_list(const struct sc_net_entry *e, const char *hname, const char *hvalue)
{
	struct sc_net_list l = {0}, copy = {0};
	struct sc_net_entry a, b;
	if (sc__net_entry_parse("zz.example", NULL, 0, &a, NULL) ||
	    sc__net_list_put(&l, &a, NULL) ||
	    sc__net_entry_parse(e->target, (const char *const *)e->methods, e->n_methods, &a,
				NULL) ||
	    sc__net_list_put(&l, &a, NULL))
		abort();
	check_match(&l, &l.entries[strcmp(e->target, "zz.example") < 0 ? 0 : l.n - 1], hname,
		    hvalue);
	if (sc__net_entry_parse(e->target, NULL, 0, &b, NULL) || sc__net_list_put(&l, &b, NULL))
		abort();
	size_t want = strcmp(e->target, "zz.example") ? 2 : 1;
	bool header = sc__net_list_add_header(&l, e->target, hname, hvalue, NULL) == 0;
	if (l.n != want || (want == 2 && strcmp(l.entries[0].target, l.entries[1].target) >= 0) ||
	    sc__net_list_copy(&l, &copy) || copy.n != want)
		abort();
	for (size_t i = 0; i < l.n; i++) {
		bool mine = !strcmp(l.entries[i].target, e->target);
		if (mine && (l.entries[i].methods || copy.entries[i].n_headers != (size_t)header ||
			     (header &&
			      (copy.entries[i].headers[0].value == l.entries[i].headers[0].value))))
			abort();
	}
	uint16_t ports[SC_NET_MAX_PORTS];
	size_t np = sc__net_list_ports(&l, ports);
	if (np == 0 || np > 3)
		abort();
	if (sc__net_list_remove(&l, e->target) || sc__net_list_remove(&l, e->target) != -ENOENT)
		abort();
	sc__net_list_free(&l);
	sc__net_list_free(&copy);
}

/* The entry parsed from the input itself (a canonical target without a path does not show
 * its scheme) never takes a header when it was written http://: credentials never travel
 * in cleartext. */
static void check_scheme_header(const char *in, const char *hname, const char *hvalue)
{
	struct sc_net_list l = {0};
	struct sc_net_entry x;
	if (sc__net_entry_parse(in, NULL, 0, &x, NULL))
		abort();
	enum sc_net_scheme scheme = x.scheme;
	char *target = strdup(x.target);
	if (!target || sc__net_list_put(&l, &x, NULL))
		abort();
	if (sc__net_list_add_header(&l, target, hname, hvalue, NULL) == 0 &&
	    scheme == SC_NET_SCHEME_HTTP)
		abort();
	free(target);
	sc__net_list_free(&l);
}

static void check_addr(const uint8_t *data, size_t size)
{
	struct sockaddr_in in = {.sin_family = AF_INET};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};
	memcpy(&in.sin_addr, data, size < 4 ? size : 4);
	memcpy(&in6.sin6_addr, data, size < 16 ? size : 16);
	const char *why = NULL;
	int rc = sc__net_addr_check((struct sockaddr *)&in, sizeof(in), &why);
	if (rc != 0 && (rc != -EACCES || !why))
		abort();
	why = NULL;
	rc = sc__net_addr_check((struct sockaddr *)&in6, sizeof(in6), &why);
	if (rc != 0 && (rc != -EACCES || !why))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1);
	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = 0;
	const char *fields[MAX_FIELDS];
	size_t n = 0, first = strlen(in);
	bool has_methods = first < size;
	for (size_t at = first + 1; has_methods && at < size && n < MAX_FIELDS; n++) {
		fields[n] = in + at;
		at += strlen(in + at) + 1;
	}
	check_host_form(in);
	check_addr(data, size);
	struct sc_net_entry e;
	struct snapcell_error err;
	if (sc__net_entry_parse(in, has_methods ? fields : NULL, n, &e, &err) == 0) {
		check_target(&e);
		check_methods(&e, n);
		check_list(&e, n > 0 ? fields[0] : "X-A", n > 1 ? fields[1] : "/");
		check_scheme_header(in, n > 0 ? fields[0] : "X-A", n > 1 ? fields[1] : "v");
		sc__net_entry_clear(&e);
	} else if (err.code != SNAPCELL_E_INVAL || !err.message[0]) {
		abort();
	}
	free(in);
	return 0;
}
