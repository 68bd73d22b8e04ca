/* The policy a config carries beyond limits: its network allow-list (parsed in net/entries.c,
 * stored here) and the approval execute_code needs. Nothing here enforces; the front ends act
 * on approval, and the egress gate will act on the list. */
#define _GNU_SOURCE
#include <errno.h>

#include "core.h"
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

int snapcell_config_remove_allowed(struct snapcell_config *cfg, const char *target,
				   struct snapcell_error *err)
{
	char norm[SNAPCELL_TARGET_MAX];
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "remove_allowed: NULL config");
	int rc = snapcell_normalize_domain(target, norm, sizeof(norm), err);
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

int snapcell_config_allowed_info(const struct snapcell_config *cfg, size_t index,
				 struct snapcell_allowed_info *out, struct snapcell_error *err)
{
	if (!cfg || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "allowed_info: NULL argument");
	if (index >= cfg->allowed.n)
		return sc__err(err, SNAPCELL_E_INVAL, "allowed_info: index %zu of %zu", index,
			       cfg->allowed.n);
	const struct sc_net_entry *e = &cfg->allowed.entries[index];
	*out = (struct snapcell_allowed_info){.target = e->target,
					      .methods = (const char *const *)e->methods,
					      .n_methods = e->n_methods};
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
