/* Network allow-list entries: normalising a target (host or host:port) and its HTTP methods,
 * and the sorted list a config keeps. This is the parser every front end shares; it does not
 * enforce anything (the egress gate will read the list). */
#ifndef SC_NET_H
#define SC_NET_H

#include <stddef.h>

#include "snapcell.h"

#define SC_NET_INPUT_MAX   4096 /* bytes of a raw target: a URL before its path is dropped */
#define SC_NET_HOST_MAX	   253	/* bytes of a host name (RFC 1035), brackets included */
#define SC_NET_LABEL_MAX   63
#define SC_NET_MAX_ENTRIES 256
#define SC_NET_MAX_METHODS 32 /* methods given for one entry, duplicates included */
#define SC_NET_METHOD_MAX  32 /* bytes of one method name */

struct sc_net_entry {
	char *target;	/* normalised: "host" or "host:port" */
	char **methods; /* upper-case HTTP tokens, sorted, unique; NULL for any method */
	size_t n_methods;
};

/* Invariant: entries sorted by target (bytewise), targets unique. */
struct sc_net_list {
	struct sc_net_entry *entries;
	size_t n;
};

/* Parses one entry into out (owned by the caller; sc__net_entry_clear). 0 or SNAPCELL_E_INVAL
 * (the reason in err), -ENOMEM. */
int sc__net_entry_parse(const char *target, const char *const *methods, size_t n_methods,
			struct sc_net_entry *out, struct snapcell_error *err);
void sc__net_entry_clear(struct sc_net_entry *e);

/* Adds e (taken over whatever happens), replacing the entry with the same target.
 * SNAPCELL_E_TOO_BIG past SC_NET_MAX_ENTRIES, -ENOMEM. */
int sc__net_list_put(struct sc_net_list *l, struct sc_net_entry *e, struct snapcell_error *err);
/* Removes the entry with this normalised target; -ENOENT if there is none. */
int sc__net_list_remove(struct sc_net_list *l, const char *target);
int sc__net_list_copy(const struct sc_net_list *src, struct sc_net_list *dst);
void sc__net_list_free(struct sc_net_list *l);

#endif
