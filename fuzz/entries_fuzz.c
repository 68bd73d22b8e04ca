/* libFuzzer target for network allow-list entries: a target, then (after a NUL) methods each
 * ended by a NUL. Whatever comes in is refused, or becomes an entry in the one normal form
 * (lower-case host[:port], sorted unique upper-case tokens) that normalises to itself, and a
 * list kept sorted with the same target replaced. Input "t" means methods NULL; "t\0" an
 * empty methods array. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/net.h"

#define MAX_FIELDS 40

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_target(const char *t)
{
	char again[SNAPCELL_TARGET_MAX];
	size_t n = strlen(t);
	if (n == 0 || n >= SNAPCELL_TARGET_MAX || strpbrk(t, "/?#@ *\\") || t[n - 1] == '.' ||
	    snapcell_normalize_domain(t, again, sizeof(again), NULL) || strcmp(again, t))
		abort();
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f ||
		    (t[i] >= 'A' && t[i] <= 'Z'))
			abort();
}

static void check_entry(const struct sc_net_entry *e, size_t given)
{
	check_target(e->target);
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

/* Puts e and a copy of it with no methods: the list keeps one entry, the later one. */
static void check_list(const struct sc_net_entry *e)
{
	struct sc_net_list l = {0}, copy = {0};
	struct sc_net_entry a, b;
	if (sc__net_entry_parse("zz.example", NULL, 0, &a, NULL) ||
	    sc__net_list_put(&l, &a, NULL) ||
	    sc__net_entry_parse(e->target, (const char *const *)e->methods, e->n_methods, &a,
				NULL) ||
	    sc__net_list_put(&l, &a, NULL) || sc__net_entry_parse(e->target, NULL, 0, &b, NULL) ||
	    sc__net_list_put(&l, &b, NULL))
		abort();
	size_t want = strcmp(e->target, "zz.example") ? 2 : 1;
	if (l.n != want || (want == 2 && strcmp(l.entries[0].target, l.entries[1].target) >= 0) ||
	    sc__net_list_copy(&l, &copy) || copy.n != want)
		abort();
	for (size_t i = 0; i < l.n; i++)
		if (!strcmp(l.entries[i].target, e->target) && l.entries[i].methods)
			abort();
	if (sc__net_list_remove(&l, e->target) || sc__net_list_remove(&l, e->target) != -ENOENT)
		abort();
	sc__net_list_free(&l);
	sc__net_list_free(&copy);
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
	struct sc_net_entry e;
	struct snapcell_error err;
	if (sc__net_entry_parse(in, has_methods ? fields : NULL, n, &e, &err) == 0) {
		check_entry(&e, n);
		check_list(&e);
		sc__net_entry_clear(&e);
	} else if (err.code != SNAPCELL_E_INVAL || !err.message[0]) {
		abort();
	}
	free(in);
	return 0;
}
