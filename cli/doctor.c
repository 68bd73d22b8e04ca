/* `snapcell doctor`: what isolation this host offers, proof that a sandbox starts, (with
 * --preload) what each preloaded module costs a sandbox, and the user's running `snapcell mcp`
 * servers with their sessions. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char usage[] =
	"usage: snapcell doctor [--json] [--python PATH] [--venv DIR] [--python-path DIR]...\n"
	"                       [--preload MODULE]... [--reuse | --no-reuse]\n"
	"  --json              print the report as one JSON object\n"
	"  --python PATH       the interpreter to check and measure (default: the --venv's,\n"
	"                      else python3 on PATH, else /usr/bin/python3)\n"
	"  --venv DIR          a virtual environment for the measured sandboxes\n"
	"  --python-path DIR   a directory on the measured sandboxes' sys.path (repeatable)\n"
	"  --preload MODULE    measure what preloading MODULE costs: the template's extra\n"
	"                      private memory and cold start against a sandbox without it\n"
	"                      (repeatable; each measured alone)\n"
	"  --reuse, --no-reuse the measured sandboxes reset a fresh run's cell in place, or\n"
	"                      fork a new cell for each run (default: --reuse); the\n"
	"                      reuse line says which mode runs and what the kernel gives\n";

static const struct {
	const char *sysctl;
	long want_min;
	const char *why;
} hardening[] = {
	{"kernel/unprivileged_bpf_disabled", 1, "unprivileged eBPF"},
	{"kernel/perf_event_paranoid", 2, "perf events"},
	{"kernel/io_uring_disabled", 2, "io_uring (>= 6.6)"},
	{"fs/protected_hardlinks", 1, "hard links to others' files"},
	{"fs/protected_symlinks", 1, "symlinks in sticky directories"},
};

/* Host settings that narrow what a kernel bug reachable from a cell can do (security notes,
 * "host kernel settings"). Advice only: snapcell blocks these paths with seccomp anyway. */
static json_t *read_hardening(void)
{
	json_t *out = json_array();
	for (size_t i = 0; i < sizeof(hardening) / sizeof(hardening[0]); i++) {
		char path[96], buf[32] = "", name[96];
		snprintf(path, sizeof(path), "/proc/sys/%s", hardening[i].sysctl);
		FILE *f = fopen(path, "re");
		bool have = f && fgets(buf, sizeof(buf), f);
		if (f)
			fclose(f);
		long v = have ? strtol(buf, NULL, 10) : -1;
		snprintf(name, sizeof(name), "%s", hardening[i].sysctl);
		for (char *c = name; *c; c++)
			*c = *c == '/' ? '.' : *c;
		json_array_append_new(
			out,
			json_pack("{s:s, s:s, s:s}", "sysctl", name, "verdict",
				  have ? (v >= hardening[i].want_min ? "ok" : "advise") : "absent",
				  "why",
				  have && v < hardening[i].want_min ? hardening[i].why : ""));
	}
	return out;
}

struct measure_opts {
	const char **python_paths;
	size_t n_python_paths;
	const char *python; /* --python, or NULL */
	const char *venv;   /* --venv, or NULL */
	int reuse;	    /* --reuse 1, --no-reuse 0, else -1 (the library's default) */
};

/* A config with the options' interpreter, venv and python paths; NULL with why. */
static struct snapcell_config *measured_config(const struct measure_opts *o, char *why,
					       size_t why_len)
{
	struct snapcell_config *cfg = fe_config_new();
	struct snapcell_error err = {0};
	int rc = cfg ? 0 : -1;
	if (rc == 0 && o->venv)
		fe_python_venv(cfg);
	if (rc == 0 && o->python)
		fe_python_chosen();
	if (rc == 0 && o->venv && (rc = snapcell_config_set_venv(cfg, o->venv, &err)) < 0)
		snprintf(why, why_len, "--venv: %s", err.message);
	if (rc == 0 && o->python && (rc = snapcell_config_set_python(cfg, o->python, &err)) < 0)
		snprintf(why, why_len, "--python: %s", err.message);
	if (rc == 0 && o->reuse >= 0)
		rc = snapcell_config_set_reuse(cfg, o->reuse == 1, &err);
	for (size_t i = 0; rc == 0 && i < o->n_python_paths; i++)
		if ((rc = snapcell_config_add_python_path(cfg, o->python_paths[i], &err)) < 0)
			snprintf(why, why_len, "--python-path: %s", err.message);
	if (rc < 0 && !cfg)
		snprintf(why, why_len, "out of memory");
	if (rc < 0) {
		snapcell_config_free(cfg);
		return NULL;
	}
	return cfg;
}

/* A sandbox (with one preload, or none) made, measured and run once: cold start to a ready
 * template, its private memory and one fresh run; NULL members when it fails. */
static json_t *measure(const struct measure_opts *o, const char *preload, char *why, size_t why_len)
{
	struct snapcell_config *cfg = measured_config(o, why, why_len);
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_result *res = NULL;
	struct snapcell_sandbox_stats st = {0};
	struct snapcell_error err = {0};
	if (!cfg)
		return NULL;
	int rc = 0;
	if (rc == 0 && preload)
		rc = snapcell_config_add_preload(cfg, preload, &err);
	uint64_t t0 = fe_now_us(), cold = 0;
	if (rc == 0 && (rc = snapcell_sandbox_new(cfg, &sb, &err)) == 0)
		cold = fe_now_us() - t0;
	if (rc == 0)
		rc = snapcell_sandbox_stats(sb, &st, &err);
	if (rc == 0)
		rc = snapcell_sandbox_run(sb, "print(6 * 7)", (size_t)-1, NULL, &res, &err);
	json_t *j = NULL;
	if (rc < 0)
		snprintf(why, why_len, "%s", err.message);
	else if (res->status != SNAPCELL_STATUS_OK || strcmp(res->stdout_buf, "42\n"))
		snprintf(why, why_len, "test run ended '%s': %s", snapcell_status_name(res->status),
			 res->stderr_buf);
	else
		j = json_pack("{s:s, s:I, s:I, s:I, s:I}", "level",
			      snapcell_isolation_name(snapcell_sandbox_isolation(sb)),
			      "cold_start_us", (json_int_t)cold, "template_private_bytes",
			      (json_int_t)st.template_private_bytes, "parked_cell_private_bytes",
			      (json_int_t)st.parked_cell_private_bytes, "fresh_run_us",
			      (json_int_t)res->wall_us);
	if (j)
		json_object_set_new(j, "reuse", json_boolean(snapcell_sandbox_reuse(sb)));
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	snapcell_config_free(cfg);
	return j;
}

static json_t *measure_preloads(const struct measure_opts *o, const char **modules, size_t n,
				const json_t *base)
{
	json_t *out = json_array();
	json_int_t base_cold = json_integer_value(json_object_get(base, "cold_start_us"));
	json_int_t base_mem = json_integer_value(json_object_get(base, "template_private_bytes"));
	for (size_t i = 0; i < n; i++) {
		char why[SNAPCELL_ERROR_MESSAGE_LEN + 64] = "";
		json_t *m = measure(o, modules[i], why, sizeof(why));
		if (!m) {
			json_array_append_new(
				out, json_pack("{s:s, s:s}", "module", modules[i], "error", why));
			continue;
		}
		json_int_t cold = json_integer_value(json_object_get(m, "cold_start_us"));
		json_int_t mem = json_integer_value(json_object_get(m, "template_private_bytes"));
		json_object_set_new(m, "module", json_string(modules[i]));
		json_object_set_new(m, "extra_cold_start_us", json_integer(cold - base_cold));
		json_object_set_new(m, "extra_template_private_bytes",
				    json_integer(mem - base_mem));
		json_array_append_new(out, m);
	}
	return out;
}

/* Below level namespaces, what stops it and what to change: the library's word on the first
 * namespace mechanism that failed (the later ones were not tried). NULL at namespaces. */
static const char *advice(const struct snapcell_probe *p, const char **mech)
{
	if (p->level >= SNAPCELL_ISOLATION_NAMESPACES)
		return NULL;
	for (int m = 0; m < SNAPCELL_MECH__COUNT; m++)
		if (m != SNAPCELL_MECH_SECCOMP && m != SNAPCELL_MECH_CGROUP_LIMITS &&
		    !p->mech[m].available && strncmp(p->mech[m].detail, "not tried", 9) != 0) {
			*mech = p->mech[m].name;
			return p->mech[m].detail;
		}
	return NULL;
}

/* Reset in place: whether the options ask for it, whether the measured sandbox arms its cells
 * (sandbox NULL: it did not start), and what the kernel gives (snapcell_probe_reuse). */
static json_t *reuse_json(const struct measure_opts *o, const json_t *sandbox)
{
	struct snapcell_config *cfg = fe_config_new();
	bool asked = o->reuse >= 0 ? o->reuse == 1 : cfg && snapcell_config_reuse(cfg);
	snapcell_config_free(cfg);
	struct snapcell_reuse_probe k;
	snapcell_probe_reuse(&k, NULL);
	json_t *j = json_pack("{s:b, s:{s:b, s:b, s:b, s:b, s:s, s:b}}", "asked", asked, "kernel",
			      "userfaultfd_wp_async", k.userfaultfd_wp_async, "pagemap_scan",
			      k.pagemap_scan, "ptrace_child", k.ptrace_child, "available",
			      k.available, "detail", k.detail, "procmap_query", k.procmap_query);
	json_t *used = json_object_get(sandbox, "reuse");
	if (used)
		json_object_set(j, "in_use", used);
	const char *mode =
		!asked		     ? "off: each run forks a new cell"
		: json_is_true(used) ? "on: a fresh run's cell is reset in place"
		: !k.available ? "asked for, but the kernel lacks what it needs: each run forks "
				 "a new cell"
		: used	       ? "asked for, but not at this level (namespaces or cgroups "
				 "needed): each run forks a new cell"
			       : "asked for (the sandbox did not start)";
	json_object_set_new(j, "mode", json_string(mode));
	return j;
}

static void print_reuse(const json_t *r)
{
	const json_t *k = json_object_get(r, "kernel");
	printf("reuse:     %s\n", json_string_value(json_object_get(r, "mode")));
	printf("           kernel: userfaultfd write-protect %s, PAGEMAP_SCAN %s, ptrace of a "
	       "child %s%s%s\n",
	       json_is_true(json_object_get(k, "userfaultfd_wp_async")) ? "yes" : "no",
	       json_is_true(json_object_get(k, "pagemap_scan")) ? "yes" : "no",
	       json_is_true(json_object_get(k, "ptrace_child")) ? "yes" : "no",
	       json_is_true(json_object_get(k, "available")) ? "" : ": ",
	       json_string_value(json_object_get(k, "detail")));
	if (json_is_true(json_object_get(k, "available")))
		printf("           mappings compared %s\n",
		       json_is_true(json_object_get(k, "procmap_query"))
			       ? "field by field (PROCMAP_QUERY)"
			       : "through their text (/proc/PID/maps: no PROCMAP_QUERY, Linux "
				 "6.11)");
}

/* The interpreter the options choose, on its own lines: the file, why and its version, what
 * cells see, a warning; or why none can run. */
static void print_python(const struct snapcell_config *cfg, const char *why)
{
	if (cfg) {
		fe_python_print(stdout, cfg, "");
		fe_python_print_probe(stdout, cfg, "");
	} else
		printf("python:    FAILED: %s\n", why);
}

static void print_text(const struct snapcell_probe *p, json_t *hard, json_t *sandbox,
		       const char *failure, json_t *preloads)
{
	for (int m = 0; m < SNAPCELL_MECH__COUNT; m++)
		printf("%-18s %-3s %-7s %s\n", p->mech[m].name, p->mech[m].available ? "yes" : "no",
		       p->mech[m].used ? "used" : "-", p->mech[m].detail);
	printf("level:     %s\n", snapcell_isolation_name(p->level));
	const char *mech = NULL, *why = advice(p, &mech);
	if (why)
		printf("advice:    %s: %s\n", mech, why);
	puts("host hardening (advice; seccomp blocks these paths in cells either way):");
	size_t i;
	json_t *h;
	json_array_foreach(hard, i, h)
	{
		printf("  %-34s %-8s %s\n", json_string_value(json_object_get(h, "sysctl")),
		       json_string_value(json_object_get(h, "verdict")),
		       json_string_value(json_object_get(h, "why")));
	}
	if (!sandbox)
		printf("sandbox:   FAILED: %s\n", failure);
	else
		printf("sandbox:   works at level '%s' (test run %.2f ms)\n",
		       json_string_value(json_object_get(sandbox, "level")),
		       (double)json_integer_value(json_object_get(sandbox, "fresh_run_us")) /
			       1000.0);
	json_array_foreach(preloads, i, h)
	{
		const char *err = json_string_value(json_object_get(h, "error"));
		if (err)
			printf("preload %s: FAILED: %s\n",
			       json_string_value(json_object_get(h, "module")), err);
		else
			printf("preload %s: +%.1f MiB template memory, +%.1f ms cold start, fresh "
			       "run "
			       "%.2f ms\n",
			       json_string_value(json_object_get(h, "module")),
			       (double)json_integer_value(
				       json_object_get(h, "extra_template_private_bytes")) /
				       (1 << 20),
			       (double)json_integer_value(
				       json_object_get(h, "extra_cold_start_us")) /
				       1000.0,
			       (double)json_integer_value(json_object_get(h, "fresh_run_us")) /
				       1000.0);
	}
}

/* The running MCP servers (mcp/state.c); a session is shown by its handle's prefix only. */
static void print_servers(json_t *servers)
{
	size_t i, k;
	json_t *srv, *s;
	if (!json_array_size(servers))
		puts("mcp servers: none running");
	json_array_foreach(servers, i, srv)
	{
		json_t *list = json_object_get(srv, "sessions");
		printf("mcp server: pid %lld, replica %s, %s, up %lld s, ",
		       json_integer_value(json_object_get(srv, "pid")),
		       json_string_value(json_object_get(srv, "replica")),
		       json_string_value(json_object_get(srv, "transport")),
		       json_integer_value(json_object_get(srv, "uptime_s")));
		if (!json_is_true(json_object_get(srv, "sessions_enabled"))) {
			puts("sessions off");
			continue;
		}
		printf("%zu of %lld sessions, idle timeout %lld s\n", json_array_size(list),
		       json_integer_value(json_object_get(srv, "max_sessions")),
		       json_integer_value(json_object_get(srv, "idle_timeout_s")));
		json_array_foreach(list, k, s)
		{
			printf("  session %s...  age %lld s, idle %lld s, %lld snapshots%s%s\n",
			       json_string_value(json_object_get(s, "handle_prefix")),
			       json_integer_value(json_object_get(s, "age_s")),
			       json_integer_value(json_object_get(s, "idle_s")),
			       json_integer_value(json_object_get(s, "snapshots")),
			       json_is_true(json_object_get(s, "busy")) ? ", running" : "",
			       json_is_true(json_object_get(s, "alive")) ? "" : ", ended");
		}
	}
}

int cli_doctor(int argc, char **argv)
{
	static const struct option options[] = {
		{"json", no_argument, NULL, 'j'},
		{"python-path", required_argument, NULL, 'p'},
		{"preload", required_argument, NULL, 'l'},
		{"python", required_argument, NULL, 'P'},
		{"venv", required_argument, NULL, 'v'},
		{"reuse", no_argument, NULL, 'u'},
		{"no-reuse", no_argument, NULL, 'U'},
		{"help", no_argument, NULL, 'h'},
		/* --python-path's abbreviations from before --python existed (run_args.c). */
		{"py", required_argument, NULL, 'p'},
		{"pyt", required_argument, NULL, 'p'},
		{"pyth", required_argument, NULL, 'p'},
		{"pytho", required_argument, NULL, 'p'},
		{0},
	};
	const char *paths[64], *modules[64];
	struct measure_opts o = {paths, 0, NULL, NULL, -1};
	size_t n_modules = 0;
	bool as_json = false;
	optind = 1;
	for (int c; (c = getopt_long(argc, argv, "", options, NULL)) != -1;) {
		if (c == 'j')
			as_json = true;
		else if (c == 'p' && o.n_python_paths < 64)
			paths[o.n_python_paths++] = optarg;
		else if (c == 'l' && n_modules < 64)
			modules[n_modules++] = optarg;
		else if (c == 'P')
			o.python = optarg;
		else if (c == 'v')
			o.venv = optarg;
		else if (c == 'u' || c == 'U')
			o.reuse = c == 'u';
		else {
			fputs(usage, c == 'h' ? stdout : stderr);
			return c == 'h' ? 0 : 2;
		}
	}
	if (optind < argc) {
		fputs(usage, stderr);
		return 2;
	}
	struct snapcell_probe p;
	struct snapcell_error err = {0};
	if (snapcell_probe_host(&p, &err) < 0) {
		fprintf(stderr, "snapcell: %s\n", err.message);
		return 3;
	}
	char why[SNAPCELL_ERROR_MESSAGE_LEN + 64] = "", py_why[sizeof(why)] = "";
	struct snapcell_config *py_cfg = measured_config(&o, py_why, sizeof(py_why));
	json_t *python = py_cfg ? fe_python_json(py_cfg) : json_pack("{s:s}", "error", py_why);
	json_t *hard = read_hardening(), *sandbox = measure(&o, NULL, why, sizeof(why));
	json_t *preloads =
		sandbox ? measure_preloads(&o, modules, n_modules, sandbox) : json_array();
	bool failed =
		!sandbox || p.level == SNAPCELL_ISOLATION_NONE || json_object_get(python, "error");
	size_t i;
	json_t *m;
	json_array_foreach(preloads, i, m) failed |= json_object_get(m, "error") != NULL;
	json_t *servers = mcp_servers_json();
	json_t *reuse = reuse_json(&o, sandbox);
	if (as_json) {
		json_t *mechs = json_array();
		for (int k = 0; k < SNAPCELL_MECH__COUNT; k++)
			json_array_append_new(
				mechs, json_pack("{s:s, s:b, s:b, s:s}", "name", p.mech[k].name,
						 "available", p.mech[k].available, "used",
						 p.mech[k].used, "detail", p.mech[k].detail));
		json_t *j = json_pack(
			"{s:o, s:s, s:O, s:o, s:o, s:o, s:O, s:O}", "mechanisms", mechs, "level",
			snapcell_isolation_name(p.level), "python", python, "hardening", hard,
			"sandbox",
			sandbox ? json_incref(sandbox) : json_pack("{s:s}", "error", why),
			"preloads", json_incref(preloads), "mcp_servers", servers, "reuse", reuse);
		const char *mech = NULL, *fix = advice(&p, &mech);
		if (fix)
			json_object_set_new(j, "advice",
					    json_pack("{s:s, s:s}", "mechanism", mech, "why", fix));
		char *text = json_dumps(j, JSON_INDENT(2));
		if (text)
			puts(text);
		free(text);
		json_decref(j);
	} else {
		print_text(&p, hard, sandbox, why, preloads);
		print_reuse(reuse);
		print_python(py_cfg, py_why);
		print_servers(servers);
		json_decref(hard);
	}
	json_decref(servers);
	json_decref(reuse);
	json_decref(sandbox);
	json_decref(preloads);
	json_decref(python);
	snapcell_config_free(py_cfg);
	return failed ? 1 : 0;
}
