/* `snapcell run`'s arguments: the options that shape the sandbox's config, parsed without
 * running anything but --python's interpreter, which snapcell_config_set_python asks what it
 * is (fuzz/cli_fuzz.c feeds it arbitrary argument vectors without --python). cli/run.c runs
 * what they ask for. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

/* A format: its one %s is the list of isolation levels (print_usage). */
static const char usage[] =
	"usage: snapcell run [options] FILE|-\n"
	"\n"
	"Runs Python code from FILE (or stdin for -) in a fresh, isolated cell.\n"
	"\n"
	"options:\n"
	"  --timeout SECONDS       wall-clock limit (default 30)\n"
	"  --cpu SECONDS           CPU time limit (default 60)\n"
	"  --memory SIZE           address space per process and, with a memory cgroup per\n"
	"                          cell, all the memory a cell costs the host (default 512M)\n"
	"  --processes N           processes and threads per sandbox (default 64)\n"
	"  --file-size SIZE        largest file the code may write (default 64M)\n"
	"  --tmp-size SIZE         size of /tmp (default 64M)\n"
	"  --max-stdout SIZE       stdout kept before the run is stopped (default 1M)\n"
	"  --max-stderr SIZE       stderr kept before the run is stopped (default 1M)\n"
	"  --env NAME=VALUE        pass an environment variable (repeatable)\n"
	"  --tool NAME=COMMAND     register a host tool: COMMAND (run by /bin/sh) gets the\n"
	"                          keyword arguments as JSON on stdin and prints a JSON result;\n"
	"                          a non-zero exit raises ToolError with its stderr (repeatable)\n"
	"  --tool-schema NAME=JSON check the arguments of the --tool NAME given before it\n"
	"                          against a JSON Schema (repeatable)\n"
	"  --approve NAME          each call of the --tool NAME given before it waits for a\n"
	"                          decision asked on the terminal (/dev/tty): y approves,\n"
	"                          anything else rejects (the code gets ToolError); with no\n"
	"                          terminal the call is refused (repeatable)\n"
	"  --approval-timeout SECONDS\n"
	"                          how long a call waits for its decision before the run ends\n"
	"                          as expired (default 600)\n"
	"  --tool-env NAME         --tool commands also get this variable of ours; they start\n"
	"                          with PATH, HOME and the locale only (repeatable)\n"
	"  --workspace DIR         copy DIR's files (not its links) to /input, read-only\n"
	"  --input PATH[:MOUNT]    copy a file or directory to /input/MOUNT (default: PATH);\n"
	"                          later ones win (repeatable)\n"
	"  --output DIR            write the files the code left in /output under DIR\n"
	"  --python-path DIR       expose DIR read-only on sys.path (repeatable), e.g.\n"
	"                          /usr/lib/python3/dist-packages for Debian's numpy\n"
	"  --python PATH           the CPython (3.10 or newer) that runs the code: a file, or a\n"
	"                          name looked up in PATH (default: the --venv's interpreter,\n"
	"                          else python3 on PATH, else /usr/bin/python3)\n"
	"  --venv DIR              use the virtual environment DIR (of CPython 3.10 or newer;\n"
	"                          with --python, one made with it), read-only, .pth files\n"
	"                          processed\n"
	"  --preload MODULE        import MODULE before cells are parked, so runs that use it\n"
	"                          pay nothing for the import, e.g. pandas (repeatable)\n"
	"  --warmup CODE           run CODE once after the preloads, before cells are parked,\n"
	"                          so their first-time work is shared, e.g. 'import pandas as\n"
	"                          pd; pd.DataFrame({\"x\": [1]}).sum()' (trusted code only)\n"
	"  --warmup-file PATH      the same, with the code read from PATH\n"
	"  --require-isolation L   fail unless the host gives level L, one of:\n"
	"                          %s\n"
	"  --uid-range FIRST:COUNT as root, run the sandbox as an outside uid of FIRST ..\n"
	"                          FIRST+COUNT-1 that no other live sandbox holds (default\n"
	"                          2000000000:65536); COUNT 0 runs it as FIRST, unreserved\n"
	"  --allow TARGET[=M,M]    allow a network target for the HTTP methods M (default:\n"
	"                          all): host (ports 80 and 443), host:port, *.domain (its\n"
	"                          subdomains), an IP literal ([v6] in brackets), or a URL,\n"
	"                          whose path is a prefix requests must stay under;\n"
	"                          enforced by the egress gate (repeatable)\n"
	"  --allow-header 'TARGET=NAME: VALUE'\n"
	"                          the host adds header NAME to the requests it lets\n"
	"                          through for an --allow'ed TARGET (given before), over\n"
	"                          verified TLS only (not for an http:// TARGET); in VALUE,\n"
	"                          ${env:VAR} and ${file:PATH} are read now, $$ is '$'; the\n"
	"                          value is never printed (repeatable)\n"
	"  --map-host NAME=ADDR    resolve NAME to ADDR (an IP literal) instead of asking DNS;\n"
	"                          NAME must still be allowed, and ADDR obeys the address\n"
	"                          rules (for tests and private names; repeatable)\n"
	"  --upstream-ca FILE      verify the upstream servers the host itself talks to (for\n"
	"                          targets with HTTP rules) with the CA bundle FILE\n"
	"  --describe[=json]       print the execute_code tool description a model would get\n"
	"                          for these options, and exit (json: schemas as JSON)\n"
	"  --instructions          print the provider instructions for these options, and exit\n"
	"  --reuse, --no-reuse     reset a fresh run's cell in place for a later run, or fork\n"
	"                          a new cell for each run (default: --reuse; where the\n"
	"                          kernel lacks what reuse needs, runs fork: snapcell doctor\n"
	"                          says why)\n"
	"  --config FILE           apply the JSON file `snapcell mcp --config` reads (limits,\n"
	"                          files, paths, network, tools, ...; the server's own keys\n"
	"                          are refused), where it stands: later options win\n"
	"  --json                  print the whole result as JSON on stdout\n"
	"\n"
	"SIZE takes a k, M or G suffix (powers of 1024).\n";

/* The usage, with the levels --require-isolation takes in the library's names. */
static void print_usage(FILE *f)
{
	char levels[64];
	snprintf(levels, sizeof(levels), "%s, %s, %s",
		 snapcell_isolation_name(SNAPCELL_ISOLATION_RLIMITS),
		 snapcell_isolation_name(SNAPCELL_ISOLATION_NAMESPACES),
		 snapcell_isolation_name(SNAPCELL_ISOLATION_CGROUPS));
	fprintf(f, usage, levels);
}

static int parse_seconds_ms(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || !(v > 0) || v > 86400.0)
		return -1;
	*out = (uint64_t)ceil(v * 1000.0);
	return 0;
}

enum opt {
	OPT_TIMEOUT = 256,
	OPT_CPU,
	OPT_MEMORY,
	OPT_PROCS,
	OPT_FSIZE,
	OPT_TMP,
	OPT_STDOUT,
	OPT_STDERR,
	OPT_ENV,
	OPT_PYPATH,
	OPT_ISOLATION,
	OPT_JSON,
	OPT_TOOL,
	OPT_WORKSPACE,
	OPT_INPUT,
	OPT_OUTPUT,
	OPT_TOOL_SCHEMA,
	OPT_TOOL_ENV,
	OPT_ALLOW,
	OPT_DESCRIBE,
	OPT_INSTRUCTIONS,
	OPT_VENV,
	OPT_PRELOAD,
	OPT_WARMUP,
	OPT_WARMUP_FILE,
	OPT_ALLOW_HEADER,
	OPT_MAP_HOST,
	OPT_UPSTREAM_CA,
	OPT_UID_RANGE,
	OPT_APPROVE,
	OPT_APPROVAL_TIMEOUT,
	OPT_PYTHON,
	OPT_CONFIG,
	OPT_REUSE,
	OPT_NO_REUSE
};

static const struct option options[] = {
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"cpu", required_argument, NULL, OPT_CPU},
	{"memory", required_argument, NULL, OPT_MEMORY},
	{"processes", required_argument, NULL, OPT_PROCS},
	{"file-size", required_argument, NULL, OPT_FSIZE},
	{"tmp-size", required_argument, NULL, OPT_TMP},
	{"max-stdout", required_argument, NULL, OPT_STDOUT},
	{"max-stderr", required_argument, NULL, OPT_STDERR},
	{"env", required_argument, NULL, OPT_ENV},
	{"python-path", required_argument, NULL, OPT_PYPATH},
	{"require-isolation", required_argument, NULL, OPT_ISOLATION},
	{"json", no_argument, NULL, OPT_JSON},
	{"tool", required_argument, NULL, OPT_TOOL},
	{"workspace", required_argument, NULL, OPT_WORKSPACE},
	{"input", required_argument, NULL, OPT_INPUT},
	{"output", required_argument, NULL, OPT_OUTPUT},
	{"tool-schema", required_argument, NULL, OPT_TOOL_SCHEMA},
	{"tool-env", required_argument, NULL, OPT_TOOL_ENV},
	{"allow", required_argument, NULL, OPT_ALLOW},
	{"describe", optional_argument, NULL, OPT_DESCRIBE},
	{"instructions", no_argument, NULL, OPT_INSTRUCTIONS},
	{"venv", required_argument, NULL, OPT_VENV},
	{"preload", required_argument, NULL, OPT_PRELOAD},
	{"warmup", required_argument, NULL, OPT_WARMUP},
	{"warmup-file", required_argument, NULL, OPT_WARMUP_FILE},
	{"allow-header", required_argument, NULL, OPT_ALLOW_HEADER},
	{"map-host", required_argument, NULL, OPT_MAP_HOST},
	{"upstream-ca", required_argument, NULL, OPT_UPSTREAM_CA},
	{"uid-range", required_argument, NULL, OPT_UID_RANGE},
	{"approve", required_argument, NULL, OPT_APPROVE},
	{"approval-timeout", required_argument, NULL, OPT_APPROVAL_TIMEOUT},
	{"python", required_argument, NULL, OPT_PYTHON},
	{"config", required_argument, NULL, OPT_CONFIG},
	{"reuse", no_argument, NULL, OPT_REUSE},
	{"no-reuse", no_argument, NULL, OPT_NO_REUSE},
	{"help", no_argument, NULL, 'h'},
	/* Before --python existed, getopt_long took these abbreviations of --python-path for
	 * it; exact entries keep them meaning that (they would be ambiguous now). */
	{"py", required_argument, NULL, OPT_PYPATH},
	{"pyt", required_argument, NULL, OPT_PYPATH},
	{"pyth", required_argument, NULL, OPT_PYPATH},
	{"pytho", required_argument, NULL, OPT_PYPATH},
	{0},
};

/* The long name of an option of ours (one of enum opt). */
static const char *option_name(int opt)
{
	return options[opt - OPT_TIMEOUT].name;
}

/* A setter's result: 0, or -1 with its error reported under the option's name. */
static int reported(int opt, int rc, const struct snapcell_error *err)
{
	if (rc < 0)
		fprintf(stderr, "snapcell: --%s: %s\n", option_name(opt), err->message);
	return rc < 0 ? -1 : 0;
}

/* --warmup CODE, or --warmup-file PATH read here (the size cap is the library's to check, so
 * one byte over it is read). */
static int set_warmup(struct snapcell_config *cfg, const char *path, const char *code)
{
	struct snapcell_error err = {0};
	char *buf = NULL;
	if (path) {
		FILE *f = fopen(path, "rb");
		if (!f) {
			fprintf(stderr, "snapcell: --warmup-file %s: %s\n", path, strerror(errno));
			return -1;
		}
		buf = malloc(SNAPCELL_WARMUP_MAX + 2);
		size_t n = buf ? fread(buf, 1, SNAPCELL_WARMUP_MAX + 1, f) : 0;
		bool bad = !buf || ferror(f);
		fclose(f);
		if (bad || memchr(buf, 0, n)) {
			fprintf(stderr, "snapcell: --warmup-file %s: %s\n", path,
				bad ? "read failed" : "a NUL byte in the code");
			free(buf);
			return -1;
		}
		buf[n] = 0;
		code = buf;
	}
	int rc = reported(path ? OPT_WARMUP_FILE : OPT_WARMUP,
			  snapcell_config_set_warmup(cfg, code, &err), &err);
	free(buf);
	return rc;
}

/* --python PATH. Before it existed, --python was an abbreviation of --python-path: a
 * directory given to it is likely meant for that, so the refusal says so. */
static int set_python(struct snapcell_config *cfg, const char *path)
{
	struct snapcell_error err = {0};
	if (reported(OPT_PYTHON, snapcell_config_set_python(cfg, path, &err), &err) == 0)
		return 0;
	struct stat st;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		fprintf(stderr, "snapcell: --python-path DIR puts a directory on sys.path\n");
	return -1;
}

/* --input PATH[:MOUNT]: the last colon splits, so host paths may contain colons. */
static int add_input(struct snapcell_config *cfg, const char *arg, struct snapcell_error *err)
{
	const char *colon = strrchr(arg, ':');
	char *host = colon ? strndup(arg, (size_t)(colon - arg)) : strdup(arg);
	int rc = host ? snapcell_config_add_mount(cfg, host, colon ? colon + 1 : arg, err) : -1;
	free(host);
	return rc;
}

/* --allow TARGET[=METHOD,METHOD]: the last '=' splits, so a URL with a query needs methods. */
static int add_allowed(struct snapcell_config *cfg, const char *arg)
{
	const char *eq = strrchr(arg, '=');
	char *target = eq ? strndup(arg, (size_t)(eq - arg)) : strdup(arg);
	char *list = eq ? strdup(eq + 1) : NULL;
	const char *methods[64];
	size_t n = 0;
	for (char *p = list, *comma; p && n < sizeof(methods) / sizeof(methods[0]);
	     p = comma ? comma + 1 : NULL) {
		comma = strchr(p, ',');
		if (comma)
			*comma = 0;
		methods[n++] = p;
	}
	struct snapcell_error err = {0};
	int rc = target && (list || !eq)
			 ? snapcell_config_allow(cfg, target, list ? methods : NULL, n, &err)
			 : -ENOMEM;
	if (rc < 0)
		fprintf(stderr, "snapcell: --allow %s: %s\n", arg,
			rc == -ENOMEM ? "out of memory" : err.message);
	free(target);
	free(list);
	return rc < 0 ? -1 : 0;
}

/* --allow-header TARGET=NAME: VALUE: the first '=' ends the target, the first ':' after it
 * the name; the value is trimmed. Messages never show the value. */
static int add_allowed_header(struct snapcell_config *cfg, const char *arg)
{
	const char *eq = strchr(arg, '=');
	const char *colon = eq ? strchr(eq + 1, ':') : NULL;
	if (!colon) {
		fprintf(stderr, "snapcell: --allow-header wants TARGET=NAME: VALUE\n");
		return -1;
	}
	const char *v = colon + 1, *end = v + strlen(v);
	while (*v == ' ' || *v == '\t')
		v++;
	while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	char *target = strndup(arg, (size_t)(eq - arg));
	char *name = strndup(eq + 1, (size_t)(colon - eq - 1));
	char *value = strndup(v, (size_t)(end - v));
	struct snapcell_error err = {0};
	/* Its ${env:NAME} variables hold a credential: no child we start gets them. */
	int rc = target && name && value && fe_env_note_secrets(value) == 0
			 ? snapcell_config_allow_header(cfg, target, name, value, &err)
			 : -ENOMEM;
	if (rc < 0)
		fprintf(stderr, "snapcell: --allow-header %s=%s: %s\n", target ? target : "",
			name ? name : "", rc == -ENOMEM ? "out of memory" : err.message);
	free(target);
	free(name);
	free(value);
	return rc < 0 ? -1 : 0;
}

/* --uid-range FIRST:COUNT, both decimal. */
static int set_uid_range(struct snapcell_config *cfg, const char *arg)
{
	char *colon, *end;
	errno = 0;
	unsigned long long first = strtoull(arg, &colon, 10), count = 0;
	bool bad = errno || colon == arg || *colon != ':' || *arg == '-' || first > UINT32_MAX;
	if (!bad) {
		count = strtoull(colon + 1, &end, 10);
		bad = errno || end == colon + 1 || *end || colon[1] == '-' || count > UINT32_MAX;
	}
	struct snapcell_error err = {0};
	if (bad) {
		fprintf(stderr, "snapcell: --uid-range wants FIRST:COUNT, got '%s'\n", arg);
		return -1;
	}
	if (snapcell_config_set_uid_range(cfg, (uint32_t)first, (uint32_t)count, &err) < 0) {
		fprintf(stderr, "snapcell: --uid-range: %s\n", err.message);
		return -1;
	}
	return 0;
}

/* Applies one option to cfg; returns 0 or prints why not and returns -1. */
static int apply_option(struct snapcell_config *cfg, int opt, const char *arg)
{
	static const struct {
		int opt;
		enum snapcell_limit limit;
		int kind; /* 0 seconds, 1 size, 2 count */
	} limits[] = {
		{OPT_TIMEOUT, SNAPCELL_LIMIT_WALL_MS, 0},
		{OPT_CPU, SNAPCELL_LIMIT_CPU_MS, 0},
		{OPT_MEMORY, SNAPCELL_LIMIT_MEMORY_BYTES, 1},
		{OPT_PROCS, SNAPCELL_LIMIT_PROCESSES, 2},
		{OPT_FSIZE, SNAPCELL_LIMIT_FILE_BYTES, 1},
		{OPT_TMP, SNAPCELL_LIMIT_TMP_BYTES, 1},
		{OPT_STDOUT, SNAPCELL_LIMIT_STDOUT_BYTES, 1},
		{OPT_STDERR, SNAPCELL_LIMIT_STDERR_BYTES, 1},
		{OPT_APPROVAL_TIMEOUT, SNAPCELL_LIMIT_PAUSE_MS, 0},
	};
	for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
		if (limits[i].opt != opt)
			continue;
		uint64_t v;
		char *end;
		int bad = limits[i].kind == 0 ? parse_seconds_ms(arg, &v)
			  : limits[i].kind == 1
				  ? fe_parse_size(arg, &v)
				  : (v = strtoull(arg, &end, 10), *arg == 0 || *end != 0);
		if (bad || snapcell_config_set_limit(cfg, limits[i].limit, v, NULL) < 0) {
			fprintf(stderr, "snapcell: invalid value '%s' for --%s\n", arg,
				option_name(opt));
			return -1;
		}
		return 0;
	}
	struct snapcell_error err = {0};
	if (opt == OPT_ENV) {
		char *eq = strchr(arg, '=');
		char *name = eq ? strndup(arg, (size_t)(eq - arg)) : NULL;
		int rc = name ? snapcell_config_set_env(cfg, name, eq + 1, &err) : -1;
		free(name);
		if (rc < 0 && eq)
			fprintf(stderr, "snapcell: --env: %s\n", err.message);
		else if (rc < 0)
			fprintf(stderr, "snapcell: --env wants NAME=VALUE, got '%s'\n", arg);
		return rc < 0 ? -1 : 0;
	}
	if (opt == OPT_REUSE || opt == OPT_NO_REUSE)
		return reported(opt, snapcell_config_set_reuse(cfg, opt == OPT_REUSE, &err), &err);
	if (opt == OPT_TOOL)
		return fe_add_command_tool(cfg, arg);
	if (opt == OPT_CONFIG)
		return mcp_run_config_load(arg, cfg);
	if (opt == OPT_TOOL_SCHEMA)
		return fe_set_tool_schema(cfg, arg);
	if (opt == OPT_APPROVE) {
		int rc = snapcell_config_set_tool_decision(cfg, arg, true, &err);
		if (rc == -ENOENT)
			fprintf(stderr, "snapcell: --approve %s: no --tool %s=COMMAND before it\n",
				arg, arg);
		else if (rc < 0)
			fprintf(stderr, "snapcell: --approve: %s\n", err.message);
		return rc < 0 ? -1 : 0;
	}
	if (opt == OPT_TOOL_ENV)
		return fe_add_tool_env(arg);
	if (opt == OPT_ALLOW)
		return add_allowed(cfg, arg);
	if (opt == OPT_ALLOW_HEADER)
		return add_allowed_header(cfg, arg);
	if (opt == OPT_UID_RANGE)
		return set_uid_range(cfg, arg);
	if (opt == OPT_MAP_HOST || opt == OPT_UPSTREAM_CA) {
		char *eq = strchr(arg, '=');
		char *name = eq ? strndup(arg, (size_t)(eq - arg)) : NULL;
		int rc = opt == OPT_UPSTREAM_CA ? snapcell_config_set_upstream_ca(cfg, arg, &err)
			 : name			? snapcell_config_map_host(cfg, name, eq + 1, &err)
						: -1;
		free(name);
		if (rc < 0 && (eq || opt == OPT_UPSTREAM_CA))
			fprintf(stderr, "snapcell: --%s: %s\n",
				opt == OPT_MAP_HOST ? "map-host" : "upstream-ca", err.message);
		else if (rc < 0)
			fprintf(stderr, "snapcell: --map-host wants NAME=ADDRESS, got '%s'\n", arg);
		return rc < 0 ? -1 : 0;
	}
	if (opt == OPT_WORKSPACE)
		return reported(opt, snapcell_config_set_workspace(cfg, arg, &err), &err);
	if (opt == OPT_INPUT)
		return reported(opt, add_input(cfg, arg, &err), &err);
	if (opt == OPT_WARMUP || opt == OPT_WARMUP_FILE)
		return set_warmup(cfg, opt == OPT_WARMUP_FILE ? arg : NULL,
				  opt == OPT_WARMUP ? arg : NULL);
	if (opt == OPT_VENV) {
		fe_python_venv(cfg);
		return reported(opt, snapcell_config_set_venv(cfg, arg, &err), &err);
	}
	if (opt == OPT_PYTHON) {
		fe_python_chosen();
		return set_python(cfg, arg);
	}
	if (opt == OPT_PRELOAD)
		return reported(opt, snapcell_config_add_preload(cfg, arg, &err), &err);
	if (opt == OPT_PYPATH) {
		char *real = realpath(arg, NULL);
		int rc = real ? snapcell_config_add_python_path(cfg, real, &err) : -1;
		if (!real)
			fprintf(stderr, "snapcell: --python-path %s: %s\n", arg, strerror(errno));
		else if (rc < 0)
			fprintf(stderr, "snapcell: --python-path: %s\n", err.message);
		free(real);
		return rc < 0 ? -1 : 0;
	}
	enum snapcell_isolation level;
	if (snapcell_isolation_from_name(arg, &level) < 0 ||
	    snapcell_config_require_isolation(cfg, level, NULL) < 0) {
		fprintf(stderr, "snapcell: unknown isolation level '%s'\n", arg);
		return -1;
	}
	return 0;
}

int cli_run_parse(int argc, char **argv, struct snapcell_config *cfg, struct cli_run_args *args)
{
	int opt;
	*args = (struct cli_run_args){0};
	fe_command_tools_forget();
	optind = 0; /* GNU getopt: a full restart, whatever an earlier parse left */
	while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
		if (opt == 'h') {
			print_usage(stdout);
			args->help = true;
			return 0;
		}
		if (opt == OPT_DESCRIBE || opt == OPT_INSTRUCTIONS) {
			args->describe = opt == OPT_DESCRIBE ? (optarg ? optarg : "compact")
							     : args->describe;
			args->instructions = args->instructions || opt == OPT_INSTRUCTIONS;
			continue;
		}
		if (opt == OPT_JSON || opt == OPT_OUTPUT) {
			args->as_json = args->as_json || opt == OPT_JSON;
			args->output_dir = opt == OPT_OUTPUT ? optarg : args->output_dir;
			continue;
		}
		if (opt == '?' || apply_option(cfg, opt, optarg) < 0)
			return CLI_EXIT_USAGE;
	}
	if ((args->describe || args->instructions) && optind == argc)
		return 0;
	if (optind != argc - 1) {
		print_usage(stderr);
		return CLI_EXIT_USAGE;
	}
	args->source = argv[optind];
	return 0;
}
