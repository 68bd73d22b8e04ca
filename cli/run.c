/* `snapcell run`: run one file (or stdin) in a fresh cell and mirror its outcome.
 * Exit status: the cell's own for ok and error (SystemExit(3) gives 3, an uncaught exception
 * 1); 124 for a timeout; 125 for the output limit; 128+N when signal N ended the cell (memory
 * exhaustion that kills rather than raises included); 1 for a MemoryError; 2 for bad usage;
 * 3 when snapcell itself could not run the code. SIGINT (Ctrl-C) or SIGTERM during a run
 * cancels it (a command tool it waits in is killed), prints the output so far, then ends
 * snapcell by that signal as before. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define EXIT_USAGE    CLI_EXIT_USAGE
#define EXIT_SNAPCELL 3
#define MAX_SOURCE    (16u << 20)

static char *read_source(const char *path, size_t *len)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
	if (!f) {
		fprintf(stderr, "snapcell: cannot open %s: %s\n", path, strerror(errno));
		return NULL;
	}
	char *buf = malloc(MAX_SOURCE + 1);
	size_t n = buf ? fread(buf, 1, MAX_SOURCE + 1, f) : 0;
	int bad = !buf || ferror(f);
	if (f != stdin)
		fclose(f);
	if (bad || n > MAX_SOURCE) {
		fprintf(stderr, "snapcell: %s: %s\n", path,
			bad ? "read failed" : "larger than the 16 MiB code limit");
		free(buf);
		return NULL;
	}
	*len = n;
	return buf;
}

static int exit_status(const struct snapcell_result *res)
{
	switch (res->status) {
	case SNAPCELL_STATUS_OK:
	case SNAPCELL_STATUS_ERROR:
	case SNAPCELL_STATUS_KILLED:
	case SNAPCELL_STATUS_MEMORY:
		return res->exit_code ? res->exit_code : res->status != SNAPCELL_STATUS_OK;
	case SNAPCELL_STATUS_TIMEOUT:
		return 124;
	case SNAPCELL_STATUS_OUTPUT_LIMIT:
		return 125;
	default:
		return EXIT_SNAPCELL;
	}
}

/* The cell's output, then, for a run the code did not end itself (a limit, a signal, a
 * missing decision), how it ended in the library's words (snapcell_result_summary: what the
 * MCP server and the Python package tell a model), each line after "snapcell: ". An
 * exception or an exit status needs no line of ours: the cell's stderr just said it. */
static void print_plain(const struct snapcell_result *res)
{
	fwrite(res->stdout_buf, 1, res->stdout_len, stdout);
	fflush(stdout);
	fwrite(res->stderr_buf, 1, res->stderr_len, stderr);
	if (res->status == SNAPCELL_STATUS_OK || res->status == SNAPCELL_STATUS_ERROR)
		return;
	char *summary = NULL;
	struct snapcell_error err = {0};
	if (snapcell_result_summary(res, &summary, &err) < 0) {
		fprintf(stderr, "snapcell: run ended with status %s (%s)\n",
			snapcell_status_name(res->status), err.message);
		return;
	}
	for (char *line = summary, *end; *line; line = *end ? end + 1 : end) {
		end = line + strcspn(line, "\n");
		fprintf(stderr, "snapcell: %.*s\n", (int)(end - line), line);
	}
	free(summary);
}

/* The allow-list as it is stored (normalised, sorted), for --json. */
static json_t *allowed_json(const struct snapcell_config *cfg)
{
	json_t *list = json_array();
	for (size_t i = 0; i < snapcell_config_allowed_count(cfg); i++) {
		struct snapcell_allowed_info info;
		if (snapcell_config_allowed_info(cfg, i, &info, NULL) < 0)
			break;
		json_t *methods = info.methods ? json_array() : json_null();
		for (size_t m = 0; m < info.n_methods; m++)
			json_array_append_new(methods, json_string(info.methods[m]));
		json_t *headers = json_array(); /* names only: values never leave the library */
		for (size_t h = 0; h < info.n_headers; h++) {
			const char *name;
			if (snapcell_config_allowed_header_name(cfg, i, h, &name, NULL) == 0)
				json_array_append_new(headers, json_string(name));
		}
		json_array_append_new(list, json_pack("{s:s, s:o, s:s?, s:o}", "target",
						      info.target, "methods", methods, "path",
						      info.path, "headers", headers));
	}
	return list;
}

/* --json: the library's record of the run with the allow-list added. -1 after a message. */
static int print_json(const struct snapcell_result *res, const struct snapcell_config *cfg)
{
	char *text = NULL;
	struct snapcell_error err = {0};
	json_t *j = snapcell_result_to_json(res, SNAPCELL_JSON_ARTIFACT_DATA, &text, &err) == 0
			    ? json_loads(text, JSON_ALLOW_NUL, NULL)
			    : NULL;
	free(text);
	if (!j) {
		fprintf(stderr, "snapcell: --json: %s\n",
			err.message[0] ? err.message : "out of memory");
		return -1;
	}
	json_object_set_new(j, "network", allowed_json(cfg));
	json_dumpf(j, stdout, JSON_INDENT(2));
	putchar('\n');
	json_decref(j);
	return 0;
}

/* --describe and --instructions: what a model would be told about this configuration. */
static int print_model_text(const struct snapcell_config *cfg, const char *describe,
			    bool instructions)
{
	struct snapcell_error err = {0};
	char *text = NULL;
	int rc = 0;
	if (describe && strcmp(describe, "compact") && strcmp(describe, "json")) {
		fprintf(stderr, "snapcell: --describe wants compact or json, got '%s'\n", describe);
		return EXIT_USAGE;
	}
	if (describe) {
		rc = snapcell_config_describe(cfg,
					      strcmp(describe, "json") ? SNAPCELL_DESCRIBE_COMPACT
								       : SNAPCELL_DESCRIBE_JSON,
					      &text, &err);
		if (rc == 0)
			fputs(text, stdout);
		free(text);
	}
	if (rc == 0 && instructions) {
		text = NULL;
		rc = snapcell_config_instructions(cfg, &text, &err);
		if (rc == 0)
			printf("%s%s", describe ? "\n" : "", text);
		free(text);
	}
	if (rc < 0)
		fprintf(stderr, "snapcell: %s\n", err.message);
	return rc < 0 ? EXIT_SNAPCELL : 0;
}

/* Ctrl-C or SIGTERM while a run is in progress cancels it (interrupt_token) instead of
 * killing snapcell outright: a command tool the run waits in has a process group of its own,
 * which the terminal's SIGINT never reaches, and would outlive us. */
static struct snapcell_cancel *interrupt_token;
static volatile sig_atomic_t interrupted;
static const int interrupts[] = {SIGINT, SIGTERM};
static struct sigaction interrupt_old[2];

static void on_interrupt(int sig)
{
	interrupted = sig;
	snapcell_cancel_fire(interrupt_token);
}

/* Catches the interrupts during a run (on), else gives them back their actions (a prompt
 * for a decision dies of Ctrl-C as before); an ignored one stays ignored. */
static void catch_interrupts(bool on)
{
	for (size_t i = 0; i < 2 && interrupt_token; i++) {
		if (!on) {
			sigaction(interrupts[i], &interrupt_old[i], NULL);
			continue;
		}
		struct sigaction sa = {.sa_handler = on_interrupt};
		sigemptyset(&sa.sa_mask);
		sigaction(interrupts[i], NULL, &interrupt_old[i]);
		if (interrupt_old[i].sa_handler != SIG_IGN)
			sigaction(interrupts[i], &sa, NULL);
	}
}

int cli_run(int argc, char **argv)
{
	struct snapcell_config *cfg = fe_config_new();
	if (!cfg)
		return EXIT_SNAPCELL;
	struct cli_run_args a;
	int st = cli_run_parse(argc, argv, cfg, &a);
	if (st == 0 && a.help) {
		fputs("\ninterpreter (as these options choose it):\n", stdout);
		fe_python_print(stdout, cfg, "  ");
	}
	/* A refused interpreter is a usage error, named before anything starts. */
	if (st == 0 && !a.help && fe_python_check(cfg, "snapcell") < 0)
		st = EXIT_USAGE;
	if (st == 0 && !a.help && !a.source)
		st = print_model_text(cfg, a.describe, a.instructions);
	if (st != 0 || a.help || !a.source) {
		snapcell_config_free(cfg);
		return st;
	}
	bool as_json = a.as_json;
	const char *output_dir = a.output_dir;
	size_t len;
	char *code = read_source(a.source, &len);
	if (!code) {
		snapcell_config_free(cfg);
		return EXIT_USAGE;
	}
	struct snapcell_error err = {0};
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_result *res = NULL;
	int rc = snapcell_sandbox_new(cfg, &sb, &err);
	bool started = rc == 0;
	if (snapcell_cancel_new(&interrupt_token, NULL) < 0)
		interrupt_token = NULL; /* then the signals keep their default action */
	struct snapcell_run_options opts = {.size = sizeof(opts), .cancel = interrupt_token};
	if (rc == 0) {
		catch_interrupts(true);
		rc = snapcell_sandbox_run(sb, code, len, &opts, &res, &err);
		catch_interrupts(false);
	}
	while (rc == 0 && res->status == SNAPCELL_STATUS_PAUSED && !interrupted) {
		char reason[160];
		enum snapcell_verdict v = cli_ask_terminal(res->pending, reason, sizeof(reason));
		struct snapcell_result *next = NULL;
		catch_interrupts(true);
		rc = snapcell_sandbox_resume(sb, res->pending->id, v, reason, "terminal", &opts,
					     &next, &err);
		catch_interrupts(false);
		snapcell_result_free(res);
		res = next;
	}
	free(code);
	int status = EXIT_SNAPCELL;
	if (rc < 0) {
		cli_print_start_error(rc, err.message);
		if (!started)
			fe_python_print(stderr, cfg, "snapcell: ");
	} else {
		bool printed = true;
		if (as_json) {
			printed = print_json(res, cfg) == 0;
		} else {
			print_plain(res);
			cli_print_artifacts(res, stderr);
		}
		status = printed ? exit_status(res) : EXIT_SNAPCELL;
		if (output_dir && cli_save_artifacts(res, output_dir) < 0 && status == 0)
			status = EXIT_SNAPCELL;
	}
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	snapcell_config_free(cfg);
	snapcell_cancel_free(interrupt_token);
	interrupt_token = NULL;
	if (interrupted) { /* the run was cancelled and its output shown: now die of it */
		fflush(stdout);
		fflush(stderr);
		signal(interrupted, SIG_DFL);
		raise(interrupted);
	}
	return status;
}
