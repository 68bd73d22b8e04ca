/* The policy a config carries beyond limits: its network allow-list (parsed in net/entries.c,
 * stored here) and the approval execute_code needs. Nothing here enforces; the front ends act
 * on approval, and the egress gate will act on the list. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "util/buf.h"
#include "util/util.h"

int snapcell_config_allow(struct snapcell_config *cfg, const char *target,
			  const char *const *methods, size_t n_methods, struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "allow: NULL config");
	struct sc_net_entry e;
	int rc = sc__net_entry_parse(target, methods, n_methods, &e, err);
	return rc < 0 ? rc : sc__net_list_put(&cfg->allowed, &e, err);
}

static bool has_target(const struct sc_net_list *l, const char *target)
{
	for (size_t i = 0; i < l->n; i++)
		if (!strcmp(l->entries[i].target, target))
			return true;
	return false;
}

int snapcell_config_allow_header(struct snapcell_config *cfg, const char *target, const char *name,
				 const char *value, struct snapcell_error *err)
{
	char norm[SC_NET_TARGET_MAX];
	char *expanded = NULL;
	if (!cfg || !target || !name || !value)
		return sc__err(err, SNAPCELL_E_INVAL, "allow header: NULL argument");
	int rc = sc__net_target_normalize(target, norm, sizeof(norm), err);
	if (rc == 0 && !has_target(&cfg->allowed, norm))
		rc = sc__err(err, -ENOENT, "allow header %s: no such target (allow it first)",
			     norm);
	if (rc == 0)
		rc = sc__net_header_expand(value, &expanded, err);
	if (rc == 0)
		rc = sc__net_list_add_header(&cfg->allowed, norm, name, expanded, err);
	if (expanded)
		explicit_bzero(expanded, strlen(expanded));
	free(expanded);
	return rc;
}

int snapcell_config_remove_allowed(struct snapcell_config *cfg, const char *target,
				   struct snapcell_error *err)
{
	char norm[SC_NET_TARGET_MAX];
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "remove_allowed: NULL config");
	int rc = sc__net_target_normalize(target, norm, sizeof(norm), err);
	if (rc < 0)
		return rc;
	if (sc__net_list_remove(&cfg->allowed, norm) < 0)
		return sc__err(err, -ENOENT, "remove_allowed %s", norm);
	return 0;
}

size_t snapcell_config_allowed_count(const struct snapcell_config *cfg)
{
	return cfg ? cfg->allowed.n : 0;
}

/* path and n_headers took two of the four reserved words: the size stays. */
struct allowed_info_v1 {
	const char *target;
	const char *const *methods;
	size_t n_methods;
	uint64_t reserved[4];
};
_Static_assert(sizeof(void *) != 8 ||
		       sizeof(struct snapcell_allowed_info) == sizeof(struct allowed_info_v1),
	       "snapcell_allowed_info changed size");

static const struct sc_net_entry *entry_at(const struct snapcell_config *cfg, size_t index,
					   struct snapcell_error *err)
{
	if (index < cfg->allowed.n)
		return &cfg->allowed.entries[index];
	sc__err(err, SNAPCELL_E_INVAL, "allowed_info: index %zu of %zu", index, cfg->allowed.n);
	return NULL;
}

int snapcell_config_allowed_info(const struct snapcell_config *cfg, size_t index,
				 struct snapcell_allowed_info *out, struct snapcell_error *err)
{
	if (!cfg || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "allowed_info: NULL argument");
	const struct sc_net_entry *e = entry_at(cfg, index, err);
	if (!e)
		return SNAPCELL_E_INVAL;
	*out = (struct snapcell_allowed_info){.target = e->target,
					      .methods = (const char *const *)e->methods,
					      .n_methods = e->n_methods,
					      .path = e->path,
					      .n_headers = e->n_headers};
	return 0;
}

int snapcell_config_allowed_header_name(const struct snapcell_config *cfg, size_t index, size_t h,
					const char **name, struct snapcell_error *err)
{
	if (!cfg || !name)
		return sc__err(err, SNAPCELL_E_INVAL, "allowed_header_name: NULL argument");
	const struct sc_net_entry *e = entry_at(cfg, index, err);
	if (!e)
		return SNAPCELL_E_INVAL;
	if (h >= e->n_headers)
		return sc__err(err, SNAPCELL_E_INVAL, "allowed_header_name: header %zu of %zu", h,
			       e->n_headers);
	*name = e->headers[h].name;
	return 0;
}

enum snapcell_approval snapcell_config_approval(const struct snapcell_config *cfg,
						enum snapcell_approval base)
{
	if (base != SNAPCELL_APPROVAL_NEVER) /* an unknown value fails closed */
		return SNAPCELL_APPROVAL_ALWAYS;
	for (size_t i = 0; cfg && i < cfg->n_tools; i++)
		if (cfg->tools[i].approval == SNAPCELL_APPROVAL_ALWAYS)
			return SNAPCELL_APPROVAL_ALWAYS;
	return SNAPCELL_APPROVAL_NEVER;
}

int snapcell_config_map_host(struct snapcell_config *cfg, const char *name, const char *address,
			     struct snapcell_error *err)
{
	char norm[SNAPCELL_TARGET_MAX];
	uint8_t bin[16];
	if (!cfg || !name || !address)
		return sc__err(err, SNAPCELL_E_INVAL, "map_host: NULL argument");
	int rc = snapcell_normalize_domain(name, norm, sizeof(norm), err);
	if (rc < 0)
		return sc__err_wrap(err, rc, "map_host");
	if (strchr(norm, ':') || inet_pton(AF_INET, norm, bin) == 1)
		return sc__err(err, SNAPCELL_E_INVAL, "map_host %s: give a host name, no port",
			       norm);
	if (inet_pton(AF_INET, address, bin) != 1 && inet_pton(AF_INET6, address, bin) != 1)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "map_host %s: '%.64s' is not an IPv4 or IPv6 address", norm,
			       address);
	for (size_t i = 0; i < cfg->n_maps; i++)
		if (strcmp(cfg->map_names[i], norm) == 0) {
			char *copy = strdup(address);
			if (!copy)
				return sc__err(err, -ENOMEM, "map_host");
			free(cfg->map_addresses[i]);
			cfg->map_addresses[i] = copy;
			return 0;
		}
	if (cfg->n_maps == SC_NET_MAX_ENTRIES)
		return sc__err(err, SNAPCELL_E_TOO_BIG, "map_host: more than %d names",
			       SC_NET_MAX_ENTRIES);
	bool room = SC_ARRAY_ADD(cfg->map_names, cfg->n_maps, SC_NET_MAX_ENTRIES) == 0 &&
		    SC_ARRAY_ADD(cfg->map_addresses, cfg->n_maps, SC_NET_MAX_ENTRIES) == 0;
	char *n = room ? strdup(norm) : NULL, *a = n ? strdup(address) : NULL;
	if (!a) {
		free(n);
		return sc__err(err, -ENOMEM, "map_host");
	}
	cfg->map_names[cfg->n_maps] = n;
	cfg->map_addresses[cfg->n_maps++] = a;
	return 0;
}

int snapcell_config_set_upstream_ca(struct snapcell_config *cfg, const char *path,
				    struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "set_upstream_ca: NULL config");
	char *resolved = NULL;
	if (path && !(resolved = realpath(path, NULL)))
		return sc__err(err, -errno, "set_upstream_ca %s", path);
	free(cfg->upstream_ca);
	cfg->upstream_ca = resolved;
	return 0;
}
