/* The snapcell command: one file per subcommand. Uses only the public header. */
#ifndef SNAPCELL_CLI_H
#define SNAPCELL_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "snapcell.h"

/* A new config with the helper from $SNAPCELL_HELPER when set (the build tree's, say), else
 * the library's built-in default; NULL after a message. */
/* Prints why a sandbox did not start; a missing helper in a CLI user's words (the path, the
 * reason, what to install or set), anything else as the library's message. */
void cli_print_start_error(int rc, const char *message);
struct snapcell_config *cli_config_new(void);
/* SNAPCELL_PYTHON (cli_python_env, called by cli_config_new) is a default: call
 * cli_python_chosen() when an option or config key names the interpreter, cli_python_venv()
 * before setting a venv (which then runs its own interpreter). */
int cli_python_env(struct snapcell_config *cfg);
void cli_python_chosen(void);
void cli_python_venv(struct snapcell_config *cfg);

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

/* Registers --tool NAME=COMMAND; prints why not and returns -1. */
int cli_add_command_tool(struct snapcell_config *cfg, const char *spec);
/* --tool-schema NAME=JSON: gives the --tool NAME registered before it a parameter schema;
 * prints why not (the library's reason) and returns -1. */
int cli_set_tool_schema(struct snapcell_config *cfg, const char *spec);
/* Forgets the --tool specs seen so far: a new argument vector starts without them. */
void cli_command_tools_forget(void);

/* --tool-env NAME: --tool commands also get our NAME (see cli_child_env). -1 after a message. */
int cli_add_tool_env(const char *name);

/* A command tool of the MCP config: argv (argv[0] looked up on PATH) and the names of our
 * variables it also gets (inherit_env), both NULL-terminated. */
struct cli_tool_command {
	char **argv, **inherit;
};
/* A snapcell_tool_fn that runs the command user_data names (a struct cli_tool_command; it
 * must outlive every sandbox), as --tool runs its commands: arguments on stdin, JSON result on
 * stdout, killed with its process group at the run's deadline. */
int cli_argv_tool(void *tool, const char *args_json, char **result);
/* Its asynchronous face (snapcell_config_set_tool_async), for calls the code awaits: each runs
 * on a thread of its own, and cancelling one kills its command's process group. The cancel
 * serves --tool commands too. */
void cli_argv_tool_start(void *tool, struct snapcell_call *call, const char *args_json);
void cli_command_tool_cancel(void *tool, struct snapcell_call *call);

/* child_env.c: the environment of a child we start on the host (a command tool, a stdio
 * downstream MCP server): PATH, HOME, LANG, LANGUAGE and LC_* from ours, then our variables
 * inherit names (NULL-terminated; unset ones skipped), then set's NAME=VALUE entries over
 * them. Never SNAPCELL_MCP_TOKEN or a variable a header reads, unless set gives it a value.
 * Malloc'd and NULL-terminated; NULL when out of memory. */
char **cli_child_env(char *const *inherit, char *const *set);
void cli_child_env_free(char **env);
/* Notes the variables "${env:NAME}" in text reads (an allow-list header's value): no child
 * is given them. Call before any child starts. 0, or -1 when out of memory. */
int cli_env_note_secrets(const char *text);
/* Why our variable name must not be given to a child, or NULL when it may be. */
const char *cli_env_withheld(const char *name);

/* mcp/config.c: `snapcell run --config FILE`: the `snapcell mcp --config` file format applied
 * to cfg, the server's own keys refused (one message names them all). 0, or -1 after a
 * message. The file's command tools live until the next call. */
int cli_run_config_load(const char *file, struct snapcell_config *cfg);

/* mcp/: `snapcell mcp`, the MCP server. */
int cli_mcp(int argc, char **argv);
/* mcp/state.c: the running `snapcell mcp` servers of this user and their sessions, from their
 * state files (files of dead processes are removed): a JSON array. */
json_t *cli_mcp_servers(void);

/* approve.c: asks on the controlling terminal (/dev/tty) whether the pending call may run:
 * APPROVED for "y", else REJECTED with the reason in reason (also when there is no terminal,
 * saying so). */
enum snapcell_verdict cli_ask_terminal(const struct snapcell_pending_call *p, char *reason,
				       size_t reason_len);
/* interpreter.c: the interpreter cfg runs. check: 0, or -1 after "<who>: <why>" on stderr
 * (a version newer than snapcell knows is 0: print and json carry the warning). print:
 * lines on f, each after prefix: the file, its version and why it; what cells see; a
 * warning; or why there is none.
 * json: {"executable", "chosen_by", "version", "cells": {"sys_executable", "version"},
 * "warning"?}, or {"error"}. */
int cli_python_check(const struct snapcell_config *cfg, const char *who);
void cli_python_print(FILE *f, const struct snapcell_config *cfg, const char *prefix);
/* A line saying how the interpreter's answers were had: from the per-user probe cache, or by
 * running it (and why not cached), for doctor. */
void cli_python_print_probe(FILE *f, const struct snapcell_config *cfg, const char *prefix);
json_t *cli_python_json(const struct snapcell_config *cfg);

/* artifacts.c: list a run's /output on f; write it under dir (0, or -1 after a message). */
void cli_print_artifacts(const struct snapcell_result *res, FILE *f);
int cli_save_artifacts(const struct snapcell_result *res, const char *dir);

/* Parses "512M", "1.5G", "64k" or plain bytes; 0 on success. */
int cli_parse_size(const char *s, uint64_t *out);

/* CLOCK_MONOTONIC microseconds: the clock of every deadline and idle time in cli/ and mcp/. */
static inline uint64_t cli_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

#endif
