/* `snapcell mcp`: options, the sandbox every run uses, and the transport. The protocol lives
 * in server.c, the transports in stdio.c and http.c. */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "mcp.h"

static const char usage[] =
	"usage: snapcell mcp [options]\n"
	"\n"
	"Serves the Model Context Protocol with one tool, execute_code, that runs Python in a\n"
	"fresh isolated cell. Speaks stdio (newline-delimited JSON-RPC) unless --http is given.\n"
	"\n"
	"options:\n"
	"  --config FILE           read limits, files, network entries, environment and command\n"
	"                          tools from a JSON file (docs/mcp.md)\n"
	"  --http HOST:PORT        serve Streamable HTTP at http://HOST:PORT/mcp instead\n"
	"                          (default host 127.0.0.1)\n"
	"  --token TOKEN           with --http: require \"Authorization: Bearer TOKEN\"\n"
	"                          (default: $SNAPCELL_MCP_TOKEN when set)\n"
	"  --max-runs N            concurrent runs before calls get a busy error\n"
	"                          (default: twice the cores)\n"
	"  --structured-content    also give each run's record as structuredContent\n"
	"  --replica NAME          this server's name in session handles, for routing\n"
	"                          (default: the host name)\n";

struct args {
	const char *config, *http, *token;
	struct mcp_options opts;
};

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"http", required_argument, NULL, 'H'},
		{"token", required_argument, NULL, 't'},
		{"max-runs", required_argument, NULL, 'm'},
		{"structured-content", no_argument, NULL, 's'},
		{"replica", required_argument, NULL, 'r'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int o;
	char *end;
	while ((o = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (o) {
		case 'c':
			a->config = optarg;
			break;
		case 'H':
			a->http = optarg;
			break;
		case 't':
			a->token = optarg;
			break;
		case 'm':
			a->opts.max_runs = (unsigned)strtoul(optarg, &end, 10);
			if (*end || !a->opts.max_runs) {
				fprintf(stderr,
					"snapcell mcp: --max-runs wants a positive number\n");
				return 2;
			}
			break;
		case 's':
			a->opts.structured_content = true;
			break;
		case 'r':
			if (!mcp_replica_valid(optarg)) {
				fprintf(stderr, "snapcell mcp: --replica wants 1 to 63 of the "
						"characters A-Z a-z 0-9 . _ -\n");
				return 2;
			}
			snprintf(a->opts.replica, sizeof(a->opts.replica), "%s", optarg);
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (a->token && !*a->token) {
		/* `--token "$UNSET"` must not quietly serve without one. */
		fprintf(stderr, "snapcell mcp: --token wants a non-empty token\n");
		return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "snapcell mcp: unexpected argument '%s'\n%s", argv[optind], usage);
		return 2;
	}
	return -1;
}

static int serve(struct snapcell_config *cfg, const struct args *a)
{
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_error err = {0};
	/* HTTP waits for SIGINT/SIGTERM with sigwait: block them before any thread starts. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (a->http)
		pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (snapcell_sandbox_new(cfg, &sb, &err) < 0) {
		fprintf(stderr, "snapcell mcp: cannot start the sandbox: %s\n", err.message);
		return 3;
	}
	struct mcp_options opts = a->opts;
	/* Over stdio one client holds one session; over HTTP there are no sessions (yet). */
	opts.require_initialize = !a->http;
	opts.listen = a->http;
	struct mcp_server *srv = mcp_server_new(sb, cfg, &opts);
	int rc = 3;
	if (srv) {
		const char *token = a->token ? a->token : getenv("SNAPCELL_MCP_TOKEN");
		rc = a->http ? mcp_serve_http(srv, a->http, token && *token ? token : NULL)
			     : mcp_serve_stdio(srv);
	}
	mcp_server_free(srv);
	snapcell_sandbox_free(sb);
	return rc;
}

int cli_mcp(int argc, char **argv)
{
	struct args a = {0};
	int rc = parse(argc, argv, &a);
	if (rc >= 0)
		return rc;
	struct snapcell_config *cfg = cli_config_new();
	if (!cfg)
		return 3;
	struct mcp_options file_opts = {0};
	if (a.config && mcp_config_load(a.config, cfg, &file_opts) < 0) {
		snapcell_config_free(cfg);
		mcp_options_clear(&file_opts);
		return 2;
	}
	if (!a.opts.max_runs)
		a.opts.max_runs = file_opts.max_runs;
	a.opts.structured_content |= file_opts.structured_content;
	a.opts.sessions = file_opts.sessions;
	if (!a.opts.replica[0])
		memcpy(a.opts.replica, file_opts.replica, sizeof(a.opts.replica));
	rc = serve(cfg, &a);
	snapcell_config_free(cfg);
	mcp_options_clear(&file_opts);
	return rc;
}
