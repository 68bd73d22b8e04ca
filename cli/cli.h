/* The snapcell command: one file per subcommand. Uses only the public header, the front-end
 * library (frontend/) and the MCP server library's face (mcp/snapcell_mcp.h). */
#ifndef SNAPCELL_CLI_H
#define SNAPCELL_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../frontend/frontend.h"
#include "../mcp/snapcell_mcp.h"
#include "snapcell.h"

/* Prints why a sandbox did not start; a missing helper in a CLI user's words (the path, the
 * reason, what to install or set), anything else as the library's message. */
void cli_print_start_error(int rc, const char *message);

int cli_run(int argc, char **argv);

/* The exit status for bad usage, after a message on stderr. */
#define CLI_EXIT_USAGE 2

/* run_args.c: what `snapcell run`'s arguments ask for besides the config. The strings point
 * into argv. */
struct cli_run_args {
	bool help;		/* --help: the usage went to stdout, nothing more to do */
	bool as_json;		/* --json */
	bool instructions;	/* --instructions */
	const char *describe;	/* --describe[=compact|json], checked when used */
	const char *output_dir; /* --output DIR */
	const char *source;	/* FILE or "-"; NULL with --describe or --instructions alone */
};
/* Applies `snapcell run`'s options (argv[0] is "run") to cfg without running anything but
 * --python's interpreter (asked what it is): 0, or CLI_EXIT_USAGE after a message on stderr
 * naming the option. */
int cli_run_parse(int argc, char **argv, struct snapcell_config *cfg, struct cli_run_args *args);
int cli_doctor(int argc, char **argv);
int cli_bench(int argc, char **argv);

/* approve.c: asks on the controlling terminal (/dev/tty) whether the pending call may run:
 * APPROVED for "y", else REJECTED with the reason in reason (also when there is no terminal,
 * saying so). */
enum snapcell_verdict cli_ask_terminal(const struct snapcell_pending_call *p, char *reason,
				       size_t reason_len);

/* artifacts.c: list a run's /output on f; write it under dir (0, or -1 after a message). */
void cli_print_artifacts(const struct snapcell_result *res, FILE *f);
int cli_save_artifacts(const struct snapcell_result *res, const char *dir);

#endif
