/* snapcell: command-line front end. Dispatches to one file per subcommand. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
	"usage: snapcell <command> [options]\n"
	"\n"
	"commands:\n"
	"  run FILE|-     run Python code in a fresh isolated cell (snapcell run --help)\n"
	"  doctor         show which isolation mechanisms this host offers\n"
	"  bench          measure run latency and throughput (key=value lines)\n"
	"  mcp            serve execute_code over MCP (stdio, or --http HOST:PORT)\n"
	"  version        print the version\n"
	"\n"
	"environment:\n"
	"  SNAPCELL_HELPER  the snapcell-cell executable to run (default: the installed one)\n"
	"  SNAPCELL_PYTHON  the interpreter cells run unless --python, a config's \"python\" or\n"
	"                   a venv (which runs its own) says otherwise (default: python3 on\n"
	"                   PATH, then /usr/bin/python3; the wheel's snapcell command sets it\n"
	"                   to the Python that runs it)\n";

void cli_print_start_error(int rc, const char *message)
{
	static const char prefix[] = "sandbox helper ";
	if (strncmp(message, prefix, sizeof(prefix) - 1) != 0 || rc >= 0) {
		fprintf(stderr, "snapcell: %s\n", message);
		return;
	}
	/* "sandbox helper PATH, where ..." or "sandbox helper PATH (set by ...)": the library
	 * speaks to programs; a CLI user needs the path, the reason and what to do. */
	const char *path = message + sizeof(prefix) - 1, *end = strstr(path, ", where ");
	const char *set = strstr(path, " (set by ");
	if (!end || (set && set < end))
		end = set;
	int len = end ? (int)(end - path) : (int)strlen(path);
	fprintf(stderr,
		"snapcell: cannot start the sandbox helper %.*s: %s\n"
		"snapcell: install snapcell (meson install -C build), or set SNAPCELL_HELPER to "
		"the snapcell-cell executable (in a build tree: build/snapcell-cell)\n",
		len, path, snapcell_strerror(rc));
}

int main(int argc, char **argv)
{
	/* A --tool command that exits without reading its input must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		fputs(usage, stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage, stdout);
		struct snapcell_config *cfg = fe_config_new();
		if (cfg) {
			puts("\ninterpreter (snapcell run --python PATH chooses another):");
			fe_python_print(stdout, cfg, "  ");
		}
		snapcell_config_free(cfg);
		return 0;
	}
	if (!strcmp(argv[1], "run"))
		return cli_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "doctor"))
		return cli_doctor(argc - 1, argv + 1);
	if (!strcmp(argv[1], "mcp"))
		return mcp_main(argc - 1, argv + 1);
	if (!strcmp(argv[1], "bench"))
		return cli_bench(argc - 1, argv + 1);
	if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
		printf("snapcell %s\n", snapcell_version());
		return 0;
	}
	fprintf(stderr, "snapcell: unknown command '%s'\n\n%s", argv[1], usage);
	return 2;
}
