/* What the files reading `--config` share (config.c, its keys and their order;
 * config_programs.c, command tools and downstream servers): the file being read and what it
 * fills, and the checks every key's reader uses. Each prints "snapcell CMD: --config FILE:
 * PATH: WHY" and returns -1, or returns 0. */
#ifndef SNAPCELL_MCP_CONFIG_H
#define SNAPCELL_MCP_CONFIG_H

#include <jansson.h>

#include "mcp.h"

struct ctx {
	const char *file;
	struct snapcell_config *cfg;
	struct mcp_options *opts;
	const char *command; /* "mcp" or "run": whose --config the messages name */
};

int mcp_config_fail(const struct ctx *c, const char *path, const char *why);
int mcp_config_lib_fail(const struct ctx *c, const char *path, const struct snapcell_error *err);
/* Applies one to each member of the object v (path.key in messages); shape says what the
 * object must hold when v is not one. */
int mcp_config_each_member(const struct ctx *c, const char *path, json_t *v, const char *shape,
			   int (*one)(const struct ctx *, const char *, const char *, json_t *));
/* Checks that object v has only the keys in allowed (NULL-terminated). */
int mcp_config_only_keys(const struct ctx *c, const char *path, json_t *v,
			 const char *const *allowed);
/* Applies one to each element of the array v (path[i] in messages); shape says what the
 * array must hold when v is not one. */
int mcp_config_each(const struct ctx *c, const char *path, json_t *v, const char *shape,
		    int (*one)(const struct ctx *, const char *, json_t *));

/* config_programs.c: the readers of "tools", "mcp_servers" and "downstream_calls_per_run". */
int mcp_config_tools(const struct ctx *c, const char *path, json_t *v);
int mcp_config_servers(const struct ctx *c, const char *path, json_t *v);
int mcp_config_downstream_calls(const struct ctx *c, const char *path, json_t *v);

#endif
