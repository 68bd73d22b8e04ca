/* `snapcell mcp`: options, the sandbox every run uses, and the transport. The protocol lives
 * in server.c, the transports in stdio.c and http.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/frontend.h"
#include "http_limits.h"
#include "mcp.h"

static const char usage[] =
	"usage: snapcell mcp [options]\n"
	"\n"
	"Serves the Model Context Protocol with one tool, execute_code, that runs Python in a\n"
	"fresh isolated cell. Speaks stdio (newline-delimited JSON-RPC) unless --http is given.\n"
	"\n"
	"options:\n"
	"  --config FILE           read limits, files, network entries, environment, command\n"
	"                          tools and downstream MCP servers from a JSON file "
	"(docs/mcp.md)\n"
	"  --http HOST:PORT        serve Streamable HTTP at http://HOST:PORT/mcp instead\n"
	"                          (default host 127.0.0.1)\n"
	"  --token TOKEN           with --http: require \"Authorization: Bearer TOKEN\"\n"
	"                          (default: $SNAPCELL_MCP_TOKEN when set)\n"
	"  --allow-host NAME       with --http: Host and Origin may also name NAME, the name\n"
	"                          clients of a balancer use (repeatable, up to 16)\n"
	"  --http-sessions N       with --http: live handshake-era sessions (Mcp-Session-Id)\n"
	"                          before the least recently used one ends (default 1024)\n"
	"  --http-session-idle S   with --http: a session unused for S seconds ends\n"
	"                          (default 3600)\n"
	"  --http-head-timeout S   with --http: a request's head must arrive within S seconds\n"
	"                          of the connection (or of its previous answer), else the\n"
	"                          connection is closed (default 10; 1 once every slot\n"
	"                          was taken while it waited)\n"
	"  --http-max-connections N  with --http: open connections (default 256); /healthz\n"
	"                          answers 503 when none is left\n"
	"  --http-request-memory SIZE  with --http: request bodies and their parsed form held at\n"
	"                          once; past it a message gets 503 (default 256M)\n"
	"  --max-runs N            concurrent runs (default: twice the cores)\n"
	"  --max-queued N          calls that wait for a run to end before more get a busy\n"
	"                          error (0 to 16384; default: four times --max-runs)\n"
	"  --max-per-client N      calls one HTTP session may have running or waiting\n"
	"                          (default: half of --max-runs plus --max-queued)\n"
	"  --queue-wait S          with --http: a call that finds the queue full waits up to\n"
	"                          S seconds for room before it is busy (0 to 600; default 10)\n"
	"  --result-memory SIZE    memory all results may hold until sent; a result past\n"
	"                          what is left gets an error instead (default 768M)\n"
	"  --link-ttl S            a result's resource links (its big items, when an answer\n"
	"                          goes out as a server-sent event) stay readable S seconds\n"
	"                          (1 to 86400; default 600)\n"
	"  --structured-content    also give each run's record as structuredContent\n"
	"  --code-errors-as-results\n"
	"                          answer a run that failed through its code (exception,\n"
	"                          limit) with isError false; the text says why either way\n"
	"  --replica NAME          this server's name in session handles, for routing\n"
	"                          (default: the host name)\n"
	"  --reuse, --no-reuse     reset a fresh run's cell in place for a later run, or fork\n"
	"                          a new cell for each run (over the config's \"reuse\";\n"
	"                          default: --reuse; where the kernel lacks what reuse needs,\n"
	"                          runs fork: snapcell doctor says why)\n";

#define MAX_ALLOW_HOSTS 16

struct args {
	const char *config, *http, *token;
	struct mcp_options opts;
	unsigned long http_sessions, session_idle_s, head_timeout_s, max_connections;
	uint64_t request_memory;
	const char *allow_hosts[MAX_ALLOW_HOSTS];
	size_t n_allow_hosts;
	int reuse; /* --reuse 1, --no-reuse 0, else -1 */
};

/* A host name or a bracketed IPv6 literal, nothing that could smuggle a port, a path or
 * credentials into the Host and Origin comparison. */
static bool host_name_ok(const char *name)
{
	size_t n = strlen(name);
	if (!n || n > 253)
		return false;
	if (name[0] == '[')
		return name[n - 1] == ']' && strspn(name + 1, "0123456789abcdefABCDEF:.") == n - 2;
	return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") ==
	       n;
}

/* A whole number in [1, max], or 0 after a message naming the option. */
static unsigned long positive(const char *option, const char *value, unsigned long max)
{
	char *end;
	errno = 0;
	unsigned long n = strtoul(value, &end, 10);
	if (errno || end == value || *end || value[0] == '-' || n < 1 || n > max) {
		fprintf(stderr, "snapcell mcp: %s wants a whole number from 1 to %lu\n", option,
			max);
		return 0;
	}
	return n;
}

static int parse(int argc, char **argv, struct args *a)
{
	static const struct option longopts[] = {
		{"config", required_argument, NULL, 'c'},
		{"http", required_argument, NULL, 'H'},
		{"token", required_argument, NULL, 't'},
		{"max-runs", required_argument, NULL, 'm'},
		{"max-queued", required_argument, NULL, 'q'},
		{"http-sessions", required_argument, NULL, 'S'},
		{"allow-host", required_argument, NULL, 'A'},
		{"http-session-idle", required_argument, NULL, 'I'},
		{"structured-content", no_argument, NULL, 's'},
		{"code-errors-as-results", no_argument, NULL, 'E'},
		{"replica", required_argument, NULL, 'r'},
		{"http-head-timeout", required_argument, NULL, 'T'},
		{"max-per-client", required_argument, NULL, 'P'},
		{"queue-wait", required_argument, NULL, 'W'},
		{"result-memory", required_argument, NULL, 'R'},
		{"link-ttl", required_argument, NULL, 'L'},
		{"http-max-connections", required_argument, NULL, 'C'},
		{"http-request-memory", required_argument, NULL, 'M'},
		{"reuse", no_argument, NULL, 'u'},
		{"no-reuse", no_argument, NULL, 'U'},
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
		case 'q':
			errno = 0;
			a->opts.max_queued = (unsigned)strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' ||
			    a->opts.max_queued > MCP_QUEUED_MAX) {
				fprintf(stderr,
					"snapcell mcp: --max-queued wants a whole number from 0 "
					"to %d\n",
					MCP_QUEUED_MAX);
				return 2;
			}
			a->opts.max_queued_set = true;
			break;
		case 's':
			a->opts.structured_content = true;
			break;
		case 'E':
			a->opts.code_errors_as_results = true;
			break;
		case 'r':
			if (!mcp_replica_valid(optarg)) {
				fprintf(stderr, "snapcell mcp: --replica wants 1 to 63 of the "
						"characters A-Z a-z 0-9 . _ -\n");
				return 2;
			}
			snprintf(a->opts.replica, sizeof(a->opts.replica), "%s", optarg);
			break;
		case 'A':
			if (!host_name_ok(optarg) || a->n_allow_hosts == MAX_ALLOW_HOSTS) {
				fprintf(stderr,
					"snapcell mcp: --allow-host wants a host name or a [v6] "
					"address (no port), at most %d times\n",
					MAX_ALLOW_HOSTS);
				return 2;
			}
			a->allow_hosts[a->n_allow_hosts++] = optarg;
			break;
		case 'S':
			a->http_sessions =
				positive("--http-sessions", optarg, MCP_HTTP_SESSIONS_MAX);
			if (!a->http_sessions)
				return 2;
			break;
		case 'I':
			/* A day at most: longer, a leaked id outlives any reason to keep it. */
			a->session_idle_s = positive("--http-session-idle", optarg, 86400);
			if (!a->session_idle_s)
				return 2;
			break;
		case 'P':
			a->opts.max_per_client = (unsigned)positive("--max-per-client", optarg,
								    MCP_QUEUED_MAX + 4096);
			if (!a->opts.max_per_client)
				return 2;
			break;
		case 'W':
			errno = 0;
			a->opts.queue_wait_s = (unsigned)strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' ||
			    a->opts.queue_wait_s > MCP_QUEUE_WAIT_S_MAX) {
				fprintf(stderr,
					"snapcell mcp: --queue-wait wants a whole number from 0 "
					"to %u\n",
					MCP_QUEUE_WAIT_S_MAX);
				return 2;
			}
			a->opts.queue_wait_set = true;
			break;
		case 'R':
			if (fe_parse_size(optarg, &a->opts.result_memory) < 0 ||
			    a->opts.result_memory < MCP_RESULT_MEMORY_MIN ||
			    a->opts.result_memory > MCP_RESULT_MEMORY_MAX) {
				fprintf(stderr, "snapcell mcp: --result-memory wants a size from "
						"16M to 1T\n");
				return 2;
			}
			break;
		case 'L':
			a->opts.link_ttl_s =
				(unsigned)positive("--link-ttl", optarg, MCP_LINK_TTL_S_MAX);
			if (!a->opts.link_ttl_s)
				return 2;
			break;
		case 'T':
			a->head_timeout_s =
				positive("--http-head-timeout", optarg, MCP_HEAD_TIMEOUT_S_MAX);
			if (!a->head_timeout_s)
				return 2;
			break;
		case 'C':
			a->max_connections =
				positive("--http-max-connections", optarg, MCP_MAX_CONNECTIONS_MAX);
			if (!a->max_connections)
				return 2;
			break;
		case 'M':
			/* A message up to 16 MiB must fit, with its tree. */
			if (fe_parse_size(optarg, &a->request_memory) < 0 ||
			    a->request_memory < (64u << 20) || a->request_memory > (1ull << 40)) {
				fprintf(stderr, "snapcell mcp: --http-request-memory wants a size "
						"from 64M to 1T\n");
				return 2;
			}
			break;
		case 'u':
		case 'U':
			a->reuse = o == 'u';
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
	if (!a->http && (a->http_sessions || a->session_idle_s || a->n_allow_hosts ||
			 a->head_timeout_s || a->max_connections || a->request_memory)) {
		fprintf(stderr, "snapcell mcp: --allow-host and the --http-* options need "
				"--http\n");
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
		fe_python_print(stderr, cfg, "snapcell mcp: ");
		return 3;
	}
	struct mcp_options opts = a->opts;
	/* Over stdio one client holds one session; over HTTP the transport checks each
	 * handshake-era message's Mcp-Session-Id, which only initialize mints. */
	opts.require_initialize = !a->http;
	opts.listen = a->http;
	struct mcp_server *srv = mcp_server_new(sb, cfg, &opts);
	int rc = 3;
	if (srv && a->http) {
		const char *token = a->token ? a->token : getenv("SNAPCELL_MCP_TOKEN");
		struct mcp_http_options http = {
			a->http,
			token && *token ? token : NULL,
			a->http_sessions ? (unsigned)a->http_sessions : 1024,
			a->session_idle_s ? (unsigned)a->session_idle_s : 3600,
			a->allow_hosts,
			a->n_allow_hosts,
			a->head_timeout_s ? (unsigned)a->head_timeout_s
					  : MCP_HEAD_TIMEOUT_S_DEFAULT,
			a->max_connections ? (unsigned)a->max_connections
					   : MCP_MAX_CONNECTIONS_DEFAULT,
			a->request_memory ? (size_t)a->request_memory : MCP_REQUEST_MEMORY_DEFAULT};
		rc = mcp_serve_http(srv, &http);
	} else if (srv) {
		rc = mcp_serve_stdio(srv);
	}
	mcp_server_free(srv);
	snapcell_sandbox_free(sb);
	return rc;
}

int mcp_main(int argc, char **argv)
{
	struct args a = {.reuse = -1};
	int rc = parse(argc, argv, &a);
	if (rc >= 0)
		return rc;
	struct snapcell_config *cfg = fe_config_new();
	if (!cfg)
		return 3;
	struct mcp_options file_opts = {0};
	if (a.config && mcp_config_load(a.config, cfg, &file_opts) < 0) {
		snapcell_config_free(cfg);
		mcp_options_clear(&file_opts);
		return 2;
	}
	if (a.reuse >= 0)
		snapcell_config_set_reuse(cfg, a.reuse == 1, NULL); /* fails only for NULL */
	/* The interpreter, chosen by the file or by default, is checked before anything starts. */
	if (fe_python_check(cfg, "snapcell mcp") < 0) {
		snapcell_config_free(cfg);
		mcp_options_clear(&file_opts);
		return 2;
	}
	if (!a.opts.max_runs)
		a.opts.max_runs = file_opts.max_runs;
	if (!a.opts.max_queued_set) {
		a.opts.max_queued = file_opts.max_queued;
		a.opts.max_queued_set = file_opts.max_queued_set;
	}
	if (!a.opts.result_memory)
		a.opts.result_memory = file_opts.result_memory;
	if (!a.opts.link_ttl_s)
		a.opts.link_ttl_s = file_opts.link_ttl_s;
	if (!a.opts.max_per_client)
		a.opts.max_per_client = file_opts.max_per_client;
	if (!a.opts.queue_wait_set) {
		a.opts.queue_wait_s = file_opts.queue_wait_s;
		a.opts.queue_wait_set = file_opts.queue_wait_set;
	}
	a.opts.structured_content |= file_opts.structured_content;
	a.opts.code_errors_as_results |= file_opts.code_errors_as_results;
	mcp_result_set_code_errors_as_results(a.opts.code_errors_as_results);
	a.opts.sessions = file_opts.sessions;
	if (!a.opts.replica[0])
		memcpy(a.opts.replica, file_opts.replica, sizeof(a.opts.replica));
	rc = serve(cfg, &a);
	snapcell_config_free(cfg);
	mcp_options_clear(&file_opts);
	return rc;
}
