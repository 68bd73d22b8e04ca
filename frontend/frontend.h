/* The front-end library: what the snapcell command (cli/) and its MCP server (mcp/) share on
 * top of the public header: the config they start from, the interpreter it runs, command
 * tools on the host and the environment of the children they start. It parses no command
 * line but --tool's specs and prints its messages on stderr; nothing here is MCP's or one
 * subcommand's. */
#ifndef SNAPCELL_FRONTEND_H
#define SNAPCELL_FRONTEND_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "snapcell.h"

/* The util layer's capped buffer, descriptor set and cleanup attributes, the library's own
 * (frontend/meson.build links its util_lib): the front ends use them as src/ does, and reach
 * them only through this header. */
#include "../src/util/buf.h"
#include "../src/util/cleanup.h"
#include "../src/util/fdset.h"

/* config.c: a new config with the helper from $SNAPCELL_HELPER when set (the build tree's,
 * say), else the library's built-in default; NULL after a message. */
struct snapcell_config *fe_config_new(void);
/* Parses "512M", "1.5G", "64k" or plain bytes; 0 on success. */
int fe_parse_size(const char *s, uint64_t *out);

/* CLOCK_MONOTONIC microseconds: the clock of every deadline and idle time in cli/ and mcp/. */
static inline uint64_t fe_now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* interpreter.c: SNAPCELL_PYTHON (fe_python_env, called by fe_config_new) is a default: call
 * fe_python_chosen() when an option or config key names the interpreter, fe_python_venv()
 * before setting a venv (which then runs its own interpreter). */
int fe_python_env(struct snapcell_config *cfg);
void fe_python_chosen(void);
void fe_python_venv(struct snapcell_config *cfg);
/* The interpreter cfg runs. check: 0, or -1 after "<who>: <why>" on stderr (a version newer
 * than snapcell knows is 0: print and json carry the warning). print: lines on f, each after
 * prefix: the file, its version and why it; what cells see; a warning; or why there is none.
 * json: {"executable", "chosen_by", "version", "cells": {"sys_executable", "version"},
 * "warning"?}, or {"error"}. */
int fe_python_check(const struct snapcell_config *cfg, const char *who);
void fe_python_print(FILE *f, const struct snapcell_config *cfg, const char *prefix);
/* A line saying how the interpreter's answers were had: from the per-user probe cache, or by
 * running it (and why not cached), for doctor. */
void fe_python_print_probe(FILE *f, const struct snapcell_config *cfg, const char *prefix);
json_t *fe_python_json(const struct snapcell_config *cfg);

/* tool_command.c: registers --tool NAME=COMMAND; prints why not and returns -1. */
int fe_add_command_tool(struct snapcell_config *cfg, const char *spec);
/* --tool-schema NAME=JSON: gives the --tool NAME registered before it a parameter schema;
 * prints why not (the library's reason) and returns -1. */
int fe_set_tool_schema(struct snapcell_config *cfg, const char *spec);
/* Forgets the --tool specs seen so far: a new argument vector starts without them. */
void fe_command_tools_forget(void);
/* --tool-env NAME: --tool commands also get our NAME (see fe_child_env). -1 after a message. */
int fe_add_tool_env(const char *name);

/* A command tool of the MCP config: argv (argv[0] looked up on PATH) and the names of our
 * variables it also gets (inherit_env), both NULL-terminated. */
struct fe_tool_command {
	char **argv, **inherit;
};
/* A snapcell_tool_fn that runs the command user_data names (a struct fe_tool_command; it
 * must outlive every sandbox), as --tool runs its commands: arguments on stdin, JSON result on
 * stdout, killed with its process group at the run's deadline. */
int fe_argv_tool(void *tool, const char *args_json, char **result);
/* Its asynchronous face (snapcell_config_set_tool_async), for calls the code awaits: each runs
 * on a thread of its own, and cancelling one kills its command's process group. The cancel
 * serves --tool commands too. */
void fe_argv_tool_start(void *tool, struct snapcell_call *call, const char *args_json);
void fe_command_tool_cancel(void *tool, struct snapcell_call *call);

/* child_env.c: the environment of a child we start on the host (a command tool, a stdio
 * downstream MCP server): PATH, HOME, LANG, LANGUAGE and LC_* from ours, then our variables
 * inherit names (NULL-terminated; unset ones skipped), then set's NAME=VALUE entries over
 * them. Never SNAPCELL_MCP_TOKEN or a variable a header reads, unless set gives it a value.
 * Malloc'd and NULL-terminated; NULL when out of memory. */
char **fe_child_env(char *const *inherit, char *const *set);
void fe_child_env_free(char **env);
/* Notes the variables "${env:NAME}" in text reads (an allow-list header's value): no child
 * is given them. Call before any child starts. 0, or -1 when out of memory. */
int fe_env_note_secrets(const char *text);
/* Why our variable name must not be given to a child, or NULL when it may be. */
const char *fe_env_withheld(const char *name);

#endif
