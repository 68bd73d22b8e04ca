/* The allow-list a config keeps: entries sorted by target, one per target, with the caps
 * the gate relies on (entries, distinct ports, headers), and the headers the host adds for an
 * entry, their values expanded from the host's environment or files. Not matching (match.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "util/buf.h"
#include "util/util.h"

/* Index of target, or of where it would go (*found false). */
static size_t find(const struct sc_net_list *l, const char *target, bool *found)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(l->entries[mid].target, target);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

static size_t add_ports(uint16_t ports[SC_NET_MAX_PORTS + 2], size_t n,
			const struct sc_net_entry *e)
{
	for (size_t j = 0; j < e->n_ports; j++) {
		size_t k = 0;
		while (k < n && ports[k] != e->ports[j])
			k++;
		if (k == n && n < SC_NET_MAX_PORTS + 2)
			ports[n++] = e->ports[j];
	}
	return n;
}

/* Distinct ports of l with e in place of the entry at skip (l->n for none). */
static size_t ports_with(const struct sc_net_list *l, const struct sc_net_entry *e, size_t skip)
{
	uint16_t ports[SC_NET_MAX_PORTS + 2];
	size_t n = add_ports(ports, 0, e);
	for (size_t i = 0; i < l->n && n <= SC_NET_MAX_PORTS; i++)
		if (i != skip)
			n = add_ports(ports, n, &l->entries[i]);
	return n;
}

static int insert(struct sc_net_list *l, size_t i, struct sc_net_entry *e,
		  struct snapcell_error *err)
{
	if (l->n == SC_NET_MAX_ENTRIES)
		return sc__err(err, SNAPCELL_E_TOO_BIG, "allow %s: more than %d targets", e->target,
			       SC_NET_MAX_ENTRIES);
	if (SC_ARRAY_ADD(l->entries, l->n, SC_NET_MAX_ENTRIES) < 0)
		return sc__err(err, -ENOMEM, "allow %s", e->target);
	memmove(&l->entries[i + 1], &l->entries[i], (l->n - i) * sizeof(*l->entries));
	l->entries[i] = *e;
	l->n++;
	return 0;
}

int sc__net_list_put(struct sc_net_list *l, struct sc_net_entry *e, struct snapcell_error *err)
{
	bool found;
	size_t i = find(l, e->target, &found);
	int rc = 0;
	if (ports_with(l, e, found ? i : l->n) > SC_NET_MAX_PORTS)
		rc = sc__err(err, SNAPCELL_E_TOO_BIG,
			     "allow %s: more than %d distinct ports over all targets", e->target,
			     SC_NET_MAX_PORTS);
	else if (found)
		sc__net_entry_clear(&l->entries[i]), l->entries[i] = *e;
	else
		rc = insert(l, i, e, err);
	if (rc < 0)
		sc__net_entry_clear(e);
	return rc;
}

int sc__net_list_remove(struct sc_net_list *l, const char *target)
{
	bool found;
	size_t i = find(l, target, &found);
	if (!found)
		return -ENOENT;
	sc__net_entry_clear(&l->entries[i]);
	memmove(&l->entries[i], &l->entries[i + 1], (l->n - i - 1) * sizeof(*l->entries));
	l->n--;
	return 0;
}

static char *dup_or_null(const char *s, bool *failed)
{
	char *d = s ? strdup(s) : NULL;
	*failed = *failed || (s && !d);
	return d;
}

static int entry_copy(const struct sc_net_entry *s, struct sc_net_entry *d)
{
	bool failed = false;
	*d = *s;
	d->methods = NULL;
	d->headers = NULL;
	d->n_methods = d->n_headers = 0;
	d->target = dup_or_null(s->target, &failed);
	d->host = dup_or_null(s->host, &failed);
	d->path = dup_or_null(s->path, &failed);
	if (s->methods && !failed && !(d->methods = calloc(s->n_methods, sizeof(char *))))
		failed = true;
	for (size_t i = 0; d->methods && i < s->n_methods && !failed; i++, d->n_methods++)
		d->methods[i] = dup_or_null(s->methods[i], &failed);
	if (s->n_headers && !failed && !(d->headers = calloc(s->n_headers, sizeof(*d->headers))))
		failed = true;
	for (size_t i = 0; d->headers && i < s->n_headers && !failed; i++, d->n_headers++) {
		d->headers[i].name = dup_or_null(s->headers[i].name, &failed);
		d->headers[i].value = dup_or_null(s->headers[i].value, &failed);
	}
	if (failed)
		sc__net_entry_clear(d);
	return failed ? -ENOMEM : 0;
}

int sc__net_list_copy(const struct sc_net_list *src, struct sc_net_list *dst)
{
	for (size_t i = 0; i < src->n; i++) {
		struct sc_net_entry e;
		int rc = entry_copy(&src->entries[i], &e);
		if (rc == 0)
			rc = sc__net_list_put(dst, &e, NULL);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void sc__net_list_free(struct sc_net_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		sc__net_entry_clear(&l->entries[i]);
	free(l->entries);
	*l = (struct sc_net_list){0};
}

size_t sc__net_list_ports(const struct sc_net_list *l, uint16_t ports[SC_NET_MAX_PORTS])
{
	uint16_t all[SC_NET_MAX_PORTS + 2];
	size_t n = 0;
	for (size_t i = 0; i < l->n && n <= SC_NET_MAX_PORTS; i++)
		n = add_ports(all, n, &l->entries[i]);
	if (n > SC_NET_MAX_PORTS) /* sc__net_list_put keeps this from happening */
		n = SC_NET_MAX_PORTS;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && all[j - 1] > all[j]; j--) {
			uint16_t t = all[j];
			all[j] = all[j - 1];
			all[j - 1] = t;
		}
	memcpy(ports, all, n * sizeof(*ports));
	return n;
}

/* Headers the host must own: framing and hop-by-hop ones (a cell's request could be split
 * or smuggled otherwise) and method overrides (an allowed GET turned into DELETE). */
static const char *const refused_headers[] = {
	"Host",
	"Connection",
	"Content-Length",
	"Transfer-Encoding",
	"Upgrade",
	"TE",
	"Trailer",
	"Keep-Alive",
	"X-HTTP-Method-Override",
	"X-HTTP-Method",
	"X-Method-Override",
};

static int check_header(const char *name, const char *value, struct snapcell_error *err)
{
	size_t n = strnlen(name, SC_NET_HEADER_NAME_MAX + 1);
	if (n == 0 || n > SC_NET_HEADER_NAME_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "allow header: name %s",
			       n ? "longer than 64 bytes" : "empty");
	for (size_t i = 0; i < n; i++)
		if (!sc__net_is_tchar(name[i]))
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow header '%.*s': the name is not an HTTP token",
				       SC_NET_SHOWN(n), name);
	bool refused = !strncasecmp(name, "Proxy-", 6);
	for (size_t i = 0; i < SC_ARRAY_LEN(refused_headers) && !refused; i++)
		refused = !strcasecmp(name, refused_headers[i]);
	if (refused)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "allow header %s: the host sets or refuses this header itself",
			       name);
	size_t v = strnlen(value, SC_NET_HEADER_VALUE_MAX + 1);
	if (v == 0 || v > SC_NET_HEADER_VALUE_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "allow header %s: value %s", name,
			       v ? "longer than 8192 bytes" : "empty");
	for (size_t i = 0; i < v; i++) {
		unsigned char c = (unsigned char)value[i];
		if ((c < 0x20 && c != '\t') || c == 0x7f) /* the value itself is never shown */
			return sc__err(err, SNAPCELL_E_INVAL,
				       "allow header %s: control byte 0x%02x in the value", name,
				       c);
	}
	return 0;
}

int sc__net_list_add_header(struct sc_net_list *l, const char *target, const char *name,
			    const char *value, struct snapcell_error *err)
{
	bool found;
	size_t i = find(l, target, &found);
	if (!found)
		return sc__err(err, -ENOENT, "allow header: no entry for %s", target);
	int rc = check_header(name, value, err);
	if (rc < 0)
		return rc;
	struct sc_net_entry *e = &l->entries[i];
	if (e->scheme == SC_NET_SCHEME_HTTP)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "allow header %s: the entry was allowed as http://, and its headers "
			       "would travel in cleartext; allow it as https:// (or without a "
			       "scheme: headers then go over TLS only)",
			       target);
	size_t h = 0;
	while (h < e->n_headers && strcasecmp(e->headers[h].name, name))
		h++;
	if (h == SC_NET_MAX_HEADERS)
		return sc__err(err, SNAPCELL_E_TOO_BIG, "allow header %s: more than %d headers",
			       target, SC_NET_MAX_HEADERS);
	char *n = strdup(name), *v = strdup(value);
	if (!n || !v ||
	    (h == e->n_headers && SC_ARRAY_ADD(e->headers, e->n_headers, SC_NET_MAX_HEADERS) < 0)) {
		free(n);
		free(v);
		return sc__err(err, -ENOMEM, "allow header %s", target);
	}
	if (h < e->n_headers) {
		free(e->headers[h].name);
		explicit_bzero(e->headers[h].value, strlen(e->headers[h].value));
		free(e->headers[h].value);
	} else {
		e->n_headers++;
	}
	e->headers[h] = (struct sc_net_header){.name = n, .value = v};
	return 0;
}
