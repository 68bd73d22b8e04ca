/* The MCP server library (mcp/) as the snapcell command sees it: the `snapcell mcp`
 * subcommand, the servers' state for `snapcell doctor`, and the config file format that
 * `snapcell run --config` shares. Everything else of the server is internal (mcp.h). */
#ifndef SNAPCELL_MCP_LIB_H
#define SNAPCELL_MCP_LIB_H

#include <jansson.h>

#include "snapcell.h"

/* main.c: `snapcell mcp` (argv[0] is "mcp"); the process's exit status. */
int mcp_main(int argc, char **argv);
/* state.c: the running `snapcell mcp` servers of this user and their sessions, from their
 * state files (files of dead processes are removed): a JSON array. */
json_t *mcp_servers_json(void);
/* config.c: `snapcell run --config FILE`: the `snapcell mcp --config` file format applied
 * to cfg, the server's own keys refused (one message names them all). 0, or -1 after a
 * message. The file's command tools live until the next call. */
int mcp_run_config_load(const char *file, struct snapcell_config *cfg);

#endif
