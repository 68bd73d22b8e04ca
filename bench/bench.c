/* `snapcell bench`: measures cold start, fresh-run latency, parallel throughput, idle memory,
 * host tool calls and sessions of a sandbox against a plain `-c` spawn of its interpreter, all
 * in one run, as key=value lines. It uses only the public API and checks only that each run printed
 * or returned what it should. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <glob.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "snapcell.h"
#include "../cli/cli.h"
#include "floor.h"
#include "workloads.h"

#define EXIT_USAGE  2
#define EXIT_FAILED 3
#define WARMUP_RUNS 50
#define COLD_STARTS 5
#define TOOL_WARMUP 200
#define PACE_NS	    2000000L
/* Time for a template with pandas preloaded to park a cell (fork, set-up, pre-faults, warm). */
#define PANDAS_PACE_NS 20000000L
#define MAX_RUNS       10000000UL
#define MAX_THREADS    64
#define PROBE_CODE     "print(1)"
/* The floor's forking process holds about what a template holds in anonymous memory (9.6 MB in
 * docs/performance.md), which fork copies the page tables of and exit tears down. */
#define FLOOR_FORK_MIB 10
/* The pandas series (when Debian's pandas is installed for the interpreter's X.Y): a fresh run
 * that imports it, without and with the template preloading it. */
#define DIST_PACKAGES "/usr/lib/python3/dist-packages"
#define PANDAS_CODE   "import pandas as pd; print(int(pd.DataFrame({'a': [1, 2]}).sum().a))"
/* The primed series' warm-up (snapcell_config_set_warmup): a small frame of its own built and
 * summed, so pandas' first-time work is done in the template, not the measured code itself. */
#define PANDAS_WARMUP                                                                              \
	"import pandas as pd\n"                                                                    \
	"df = pd.DataFrame({'x': [1.5, 2.5, 4.0], 'y': [3, 4, 5]})\n"                              \
	"print(int(df.sum().y), df.sum().x)\n"
#define TOOL_CALL     "call_tool('echo', d={'a': 1, 'b': [1, 2]})"
#define TOOL_ANSWER   "{\"ok\": true, \"n\": 3}"
#define TOOL_EXPECTED "{'ok': True, 'n': 3}"

/* Steady state: every call timed, the warm-up calls then dropped; the code prints nearest-rank
 * percentiles. */
static const char tool_loop_fmt[] =
	"import json, time\n"
	"clock, ns = time.perf_counter_ns, []\n"
	"for _ in range(%u):\n"
	"    t0 = clock()\n"
	"    r = " TOOL_CALL "\n"
	"    ns.append(clock() - t0)\n"
	"assert r == " TOOL_EXPECTED "\n"
	"ns = sorted(ns[%u:])\n"
	"pct = lambda p: ns[max(0, (len(ns) * p + 99) // 100 - 1)]\n"
	"print(json.dumps({'calls': len(ns), 'p50_ns': pct(50), 'p99_ns': pct(99)}))\n";

/* The first call in a fresh cell, timed inside the cell. */
static const char tool_first_code[] = "import time\n"
				      "t0 = time.perf_counter_ns()\n"
				      "r = " TOOL_CALL "\n"
				      "t1 = time.perf_counter_ns()\n"
				      "assert r == " TOOL_EXPECTED "\n"
				      "print(t1 - t0)\n";

static const char usage[] =
	"usage: snapcell bench [--runs N] [--quick] [--python PATH]\n"
	"\n"
	"Measures one sandbox against spawning its interpreter and prints key=value lines\n"
	"on stdout (progress on stderr). The pandas series run when Debian's pandas is\n"
	"installed for the interpreter's version (else pandas=skipped). Exit 2 for bad\n"
	"options or an interpreter snapcell refuses, 3 when a run fails.\n"
	"\n"
	"options:\n"
	"  --runs N       sequential fresh runs per series (default 1000)\n"
	"  --quick        smoke mode: 200 runs, 1 s of parallel runs, 10 python spawns,\n"
	"                 2,000 tool calls, 100 session runs, 20 first calls and snapshots\n"
	"  --python PATH  the CPython the sandbox runs (default: $SNAPCELL_PYTHON, else\n"
	"                 python3 on PATH, else /usr/bin/python3)\n"
	"  --help         show this help\n";

struct bench_opts {
	unsigned long runs;
	unsigned parallel_ms, spawns;
	unsigned tool_calls;   /* timed calls in the one steady-state run */
	unsigned first_calls;  /* fresh runs, each timing its first tool call */
	unsigned session_runs; /* `x += 1` runs on one session */
	unsigned snapshots;    /* snapshots taken, and restores done */
	const char *python;    /* --python, or NULL */
};

/* A series of n timed samples taken by one(ctx, &ns), pace_ns apart. */
struct series {
	const char *what;
	size_t n;
	long pace_ns;
	int (*one)(void *ctx, uint64_t *ns);
	void *ctx;
	double p50_us, p99_us; /* out */
};

struct bench_results {
	enum snapcell_isolation isolation;
	struct series cold, fresh, paced, compute, first_call, session, snapshot, restore, spawn;
	struct series files; /* fresh runs with one small file of their own, paced */
	struct series snapshot_tmp, restore_tmp; /* with TMP_BENCH_MIB MiB in the session's /tmp */
	/* n == 0: pandas is not installed. The preloaded series run back to back, then paced;
	 * the primed ones likewise, with PANDAS_WARMUP as the sandbox's warm-up too. */
	struct series pandas, pandas_preloaded, pandas_preloaded_paced;
	struct series pandas_primed, pandas_primed_paced;
	unsigned threads;
	double runs_per_s;
	struct snapcell_sandbox_stats stats;
	double tool_p50_us, tool_p99_us, tool_host_p50_us;
	/* The floor (floor.c): no sandbox, the kernel's and CPython's own costs. */
	struct series floor_fork, floor_echo, floor_echo_spin;
	double floor_fork_cpu_us;
	struct bench_python_fork python_fork;
	struct snapcell_python_info python; /* what the sandboxes run, and the spawns too */
};

/* What the session samplers work on. */
struct session_ctx {
	struct snapcell_session *s;
	struct snapcell_snapshot *snap;
	bool restoring;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of n samples (sorts them), in microseconds. */
static double percentile_us(uint64_t *ns, size_t n, unsigned pct)
{
	qsort(ns, n, sizeof(*ns), cmp_u64);
	size_t rank = (n * pct + 99) / 100;
	return (double)ns[rank ? rank - 1 : 0] / 1e3;
}

static void sleep_ns(long ns)
{
	struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Takes a series' samples (progress on stderr); -1 when one failed. */
static int sample(struct series *s)
{
	fprintf(stderr, "measuring %s (%zu)...\n", s->what, s->n);
	uint64_t *ns = calloc(s->n ? s->n : 1, sizeof(*ns));
	int rc = ns ? 0 : -1;
	for (size_t i = 0; i < s->n && rc == 0; i++) {
		if (s->pace_ns)
			sleep_ns(s->pace_ns);
		rc = s->one(s->ctx, &ns[i]);
	}
	if (rc == 0) {
		s->p50_us = percentile_us(ns, s->n, 50);
		s->p99_us = percentile_us(ns, s->n, 99);
	}
	free(ns);
	return rc;
}

/* Reports a failed API call; always -1. */
static int api_failed(const char *what, int rc, const struct snapcell_error *err)
{
	fprintf(stderr, "snapcell bench: %s failed: %s (%s)\n", what, err->message,
		snapcell_strerror(rc));
	return -1;
}

/* 0 when a run ended ok and printed exactly want (NULL: anything); else reports, -1. */
static int check(const struct snapcell_result *res, const char *what, const char *want)
{
	if (res->status == SNAPCELL_STATUS_OK &&
	    (!want ||
	     (res->stdout_len == strlen(want) && !memcmp(res->stdout_buf, want, res->stdout_len))))
		return 0;
	int n = (int)strcspn(what, "\n");
	fprintf(stderr,
		"snapcell bench: \"%.*s\" ended with status %s, stdout \"%.*s\", stderr: %.*s\n",
		n > 40 ? 40 : n, what, snapcell_status_name(res->status),
		(int)(res->stdout_len > 64 ? 64 : res->stdout_len), res->stdout_buf,
		(int)(res->stderr_len > 512 ? 512 : res->stderr_len), res->stderr_buf);
	return -1;
}

/* A run of code, fresh in sb or in session s, timed around the call alone: 0 when it ended ok
 * (and printed exactly want, unless NULL), else -1 (reported). *out (NULL: freed here) gets the
 * result of a good run. */
static int run_code(struct snapcell_sandbox *sb, struct snapcell_session *s, const char *code,
		    const char *want, struct snapcell_result **out, uint64_t *ns)
{
	struct snapcell_result *res;
	struct snapcell_error err = {0};
	uint64_t t0 = now_ns();
	int rc = s ? snapcell_session_run(s, code, SIZE_MAX, NULL, &res, &err)
		   : snapcell_sandbox_run(sb, code, SIZE_MAX, NULL, &res, &err);
	if (ns)
		*ns = now_ns() - t0;
	if (rc < 0)
		return api_failed("run", rc, &err);
	rc = check(res, code, want);
	if (rc == 0 && out)
		*out = res;
	else
		snapcell_result_free(res);
	return rc;
}

static int fresh_one(void *sb, uint64_t *ns)
{
	return run_code(sb, NULL, PROBE_CODE, "1\n", NULL, ns);
}

static int compute_one(void *sb, uint64_t *ns)
{
	return run_code(sb, NULL, BENCH_COMPUTE_CODE, BENCH_COMPUTE_WANT, NULL, ns);
}

/* A run with one file of its own (snapcell_run_options.files): a cell forked for it. */
static int files_one(void *sb, uint64_t *ns)
{
	struct snapcell_run_file f = {.name = "run.txt", .data = "1", .data_len = 1};
	struct snapcell_run_options opts = {.size = sizeof(opts), .files = &f, .n_files = 1};
	const char *code = "print(open('/input/run.txt').read())";
	struct snapcell_result *res;
	struct snapcell_error err = {0};
	uint64_t t0 = now_ns();
	int rc = snapcell_sandbox_run(sb, code, SIZE_MAX, &opts, &res, &err);
	*ns = now_ns() - t0;
	if (rc < 0)
		return api_failed("run with a file", rc, &err);
	rc = check(res, code, "1\n");
	snapcell_result_free(res);
	return rc;
}

static int pandas_one(void *sb, uint64_t *ns)
{
	return run_code(sb, NULL, PANDAS_CODE, "3\n", NULL, ns);
}

static int new_sandbox(const struct snapcell_config *cfg, struct snapcell_sandbox **sb)
{
	struct snapcell_error err = {0};
	int rc = snapcell_sandbox_new(cfg, sb, &err);
	return rc < 0 ? api_failed("sandbox_new", rc, &err) : 0;
}

/* snapcell_sandbox_new() start to the first result of a fresh sandbox. */
static int cold_one(void *cfg, uint64_t *ns)
{
	struct snapcell_sandbox *sb;
	uint64_t t0 = now_ns();
	if (new_sandbox(cfg, &sb) < 0)
		return -1;
	int rc = fresh_one(sb, NULL);
	*ns = now_ns() - t0;
	snapcell_sandbox_free(sb);
	return rc;
}

struct parallel_ctx {
	struct snapcell_sandbox *sb;
	atomic_bool stop, failed;
	atomic_ulong done;
};

static void *parallel_worker(void *arg)
{
	struct parallel_ctx *ctx = arg;
	while (!atomic_load(&ctx->stop)) {
		if (fresh_one(ctx->sb, NULL) < 0) {
			atomic_store(&ctx->failed, true);
			atomic_store(&ctx->stop, true);
			break;
		}
		atomic_fetch_add(&ctx->done, 1);
	}
	return NULL;
}

/* One worker thread per online CPU, all on the same sandbox, for duration_ms. */
static int measure_parallel(struct snapcell_sandbox *sb, unsigned duration_ms,
			    struct bench_results *r)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (unsigned)cpus;
	pthread_t tid[MAX_THREADS];
	struct parallel_ctx ctx = {.sb = sb};
	fprintf(stderr, "measuring parallel runs (%u threads, %u ms)...\n", n, duration_ms);
	uint64_t t0 = now_ns();
	unsigned started = 0;
	for (; started < n; started++)
		if (pthread_create(&tid[started], NULL, parallel_worker, &ctx) != 0)
			break;
	for (unsigned waited = 0; waited < duration_ms && !atomic_load(&ctx.stop); waited += 10)
		sleep_ns(10000000L);
	atomic_store(&ctx.stop, true);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	double secs = (double)(now_ns() - t0) / 1e9;
	if (started < n)
		fputs("snapcell bench: could not start worker threads\n", stderr);
	r->threads = n;
	r->runs_per_s = (double)atomic_load(&ctx.done) / secs;
	return started < n || atomic_load(&ctx.failed) ? -1 : 0;
}

/* The bench's host tool: returns a small constant object. */
static int echo_tool(void *user_data, const char *args_json, char **result)
{
	(void)user_data, (void)args_json;
	*result = strdup(TOOL_ANSWER);
	return *result ? 0 : 1;
}

/* Median host-side service time of the timed calls from the run's tool-call log: lookup,
 * argument validation and the callback, not the transport (microsecond resolution). */
static int tool_host_p50(const struct snapcell_result *res, unsigned calls, double *p50)
{
	uint64_t *ns = calloc(calls, sizeof(*ns));
	bool good = ns && res->n_tool_calls == TOOL_WARMUP + (size_t)calls;
	for (unsigned i = 0; good && i < calls; i++) {
		good = res->tool_calls[TOOL_WARMUP + i].ok;
		ns[i] = res->tool_calls[TOOL_WARMUP + i].duration_us * 1000;
	}
	if (good)
		*p50 = percentile_us(ns, calls, 50);
	else
		fprintf(stderr, "snapcell bench: tool log: %zu calls, not %u, or one failed\n",
			res->n_tool_calls, TOOL_WARMUP + calls);
	free(ns);
	return good ? 0 : -1;
}

/* One run looping over tool calls, timing each inside the cell with perf_counter_ns. */
static int measure_tool_loop(struct snapcell_sandbox *sb, unsigned calls, struct bench_results *r)
{
	char code[sizeof(tool_loop_fmt) + 32];
	snprintf(code, sizeof(code), tool_loop_fmt, TOOL_WARMUP + calls, TOOL_WARMUP);
	fprintf(stderr, "measuring tool calls (%u after %u, one run)...\n", calls, TOOL_WARMUP);
	struct snapcell_result *res;
	if (run_code(sb, NULL, code, NULL, &res, NULL) < 0)
		return -1;
	json_t *j = json_loadb(res->stdout_buf, res->stdout_len, 0, NULL);
	json_int_t n = json_integer_value(json_object_get(j, "calls"));
	r->tool_p50_us = (double)json_integer_value(json_object_get(j, "p50_ns")) / 1e3;
	r->tool_p99_us = (double)json_integer_value(json_object_get(j, "p99_ns")) / 1e3;
	json_decref(j);
	int rc = n == (json_int_t)calls && r->tool_p50_us > 0 ? 0 : check(res, "tool loop", "?");
	if (rc == 0)
		rc = tool_host_p50(res, calls, &r->tool_host_p50_us);
	snapcell_result_free(res);
	return rc;
}

/* A fresh run reporting how long its first tool call took, timed inside the cell. */
static int first_call_one(void *sb, uint64_t *ns)
{
	struct snapcell_result *res;
	if (run_code(sb, NULL, tool_first_code, NULL, &res, NULL) < 0)
		return -1;
	char *end;
	*ns = strtoull(res->stdout_buf, &end, 10);
	int rc = end > res->stdout_buf && *end == '\n' && *ns ? 0 : check(res, "first call", "?");
	snapcell_result_free(res);
	return rc;
}

static int increment_one(void *ctx, uint64_t *ns)
{
	return run_code(NULL, ((struct session_ctx *)ctx)->s, "x += 1", NULL, NULL, ns);
}

/* Takes a snapshot into ctx->snap (freeing the one before), or restores it; timed. */
static int snapshot_one(void *ctx, uint64_t *ns)
{
	struct session_ctx *c = ctx;
	struct snapcell_error err = {0};
	if (!c->restoring)
		snapcell_snapshot_free(c->snap), c->snap = NULL;
	uint64_t t0 = now_ns();
	int rc = c->restoring ? snapcell_session_restore(c->s, c->snap, &err)
			      : snapcell_session_snapshot(c->s, &c->snap, &err);
	*ns = now_ns() - t0;
	return rc < 0 ? api_failed(c->restoring ? "restore" : "snapshot", rc, &err) : 0;
}

/* What a session's /tmp holds for snapshot_tmp and restore_tmp: a snapshot copies it. The
 * cell's /tmp is where SNAPCELL_TMP says: /tmp itself at level namespaces, a directory of the
 * work directory at level rlimits (no mount namespace there), where the host's /tmp is out of
 * the cell's reach. */
#define TMP_BENCH_MIB 16
#define TMP_BENCH_CODE                                                                             \
	"import os\ntmp = os.environ['SNAPCELL_TMP']\nfor i in range(16):\n"                       \
	"    open(f'{tmp}/f{i}', 'wb').write(os.urandom(1 << 20))\n"

/* `x += 1` runs on one session, then snapshots, then restores of the last snapshot, then both
 * again with TMP_BENCH_MIB MiB in /tmp, after which x must still be the number of runs. */
static int measure_session(struct snapcell_sandbox *sb, struct bench_results *r)
{
	struct session_ctx c = {0};
	struct snapcell_error err = {0};
	int rc = snapcell_session_new(sb, &c.s, &err);
	if (rc < 0)
		return api_failed("session_new", rc, &err);
	r->session.ctx = r->snapshot.ctx = r->restore.ctx = &c;
	r->snapshot_tmp.ctx = r->restore_tmp.ctx = &c;
	char want[32];
	snprintf(want, sizeof(want), "%zu\n", r->session.n);
	bool ok = run_code(NULL, c.s, "x = 0", NULL, NULL, NULL) == 0 && sample(&r->session) == 0 &&
		  sample(&r->snapshot) == 0 && (c.restoring = true, sample(&r->restore) == 0) &&
		  run_code(NULL, c.s, TMP_BENCH_CODE, NULL, NULL, NULL) == 0 &&
		  (c.restoring = false, sample(&r->snapshot_tmp) == 0) &&
		  (c.restoring = true, sample(&r->restore_tmp) == 0) &&
		  run_code(NULL, c.s, "print(x)", want, NULL, NULL) == 0;
	snapcell_snapshot_free(c.snap);
	snapcell_session_free(c.s);
	return ok ? 0 : -1;
}

/* fork + exec of the interpreter (ctx, its path) -c 'print(1)' with stdout to a pipe, read to
 * EOF and waited for. */
static int spawn_one(void *python, uint64_t *elapsed_ns)
{
	char *const args[] = {(char *)"python3", (char *)"-c", (char *)PROBE_CODE, NULL};
	int p[2];
	uint64_t t0 = now_ns();
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		/* Only async-signal-safe calls here. dup2 leaves the new stdout inheritable. */
		if (dup2(p[1], STDOUT_FILENO) >= 0)
			execv(python, args);
		_exit(127);
	}
	close(p[1]);
	char out[16];
	size_t len = 0; /* past sizeof(out), the pipe is closed early and the check fails */
	for (ssize_t n;
	     pid > 0 && len < sizeof(out) &&
	     ((n = read(p[0], out + len, sizeof(out) - len)) > 0 || (n < 0 && errno == EINTR));)
		len += n > 0 ? (size_t)n : 0;
	close(p[0]);
	int status;
	while (pid > 0 && waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	*elapsed_ns = now_ns() - t0;
	bool good = pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && len == 2 &&
		    !memcmp(out, "1\n", 2);
	if (!good)
		fprintf(stderr, "snapcell bench: %s -c '%s' failed\n", (const char *)python,
			PROBE_CODE);
	return good ? 0 : -1;
}

static int measure_stats(struct snapcell_sandbox *sb, struct snapcell_sandbox_stats *stats)
{
	fputs("measuring memory...\n", stderr);
	struct snapcell_error err = {0};
	int rc = snapcell_sandbox_stats(sb, stats, &err);
	if (rc < 0)
		fprintf(stderr, "snapcell bench: %s\n", err.message);
	return rc < 0 ? -1 : 0;
}

/* Everything that needs the long-lived sandbox: warm-up, both series, parallel runs, stats,
 * tools and a session. */
static int measure_sandbox(const struct snapcell_config *cfg, const struct bench_opts *o,
			   struct bench_results *r)
{
	struct snapcell_sandbox *sb;
	if (new_sandbox(cfg, &sb) < 0)
		return -1;
	r->isolation = snapcell_sandbox_isolation(sb);
	r->fresh.ctx = r->paced.ctx = r->compute.ctx = r->first_call.ctx = r->files.ctx = sb;
	struct series warmup = {
		.what = "warm-up runs", .n = WARMUP_RUNS, .one = fresh_one, .ctx = sb};
	bool ok = sample(&warmup) == 0 && sample(&r->fresh) == 0 && sample(&r->paced) == 0 &&
		  (r->isolation == SNAPCELL_ISOLATION_RLIMITS || sample(&r->files) == 0) &&
		  sample(&r->compute) == 0 && measure_parallel(sb, o->parallel_ms, r) == 0 &&
		  measure_stats(sb, &r->stats) == 0 &&
		  measure_tool_loop(sb, o->tool_calls, r) == 0 && sample(&r->first_call) == 0 &&
		  measure_session(sb, r) == 0;
	snapcell_sandbox_free(sb);
	return ok ? 0 : -1;
}

/* The pandas series on a sandbox of their own: the interpreter the others ran, Debian's
 * dist-packages, room for pandas' address space, and pandas preloaded or not, with a warm-up
 * or none; then, on the same sandbox, the paced one (NULL: none). */
static int measure_pandas_series(const char *python, struct series *s, struct series *paced,
				 bool preload, const char *prime)
{
	if (s->n == 0)
		return 0;
	struct snapcell_config *cfg = fe_config_new();
	struct snapcell_error err = {0};
	int rc = cfg ? 0 : -1;
	if (rc == 0)
		rc = snapcell_config_set_python(cfg, python, &err);
	if (rc == 0)
		rc = snapcell_config_add_python_path(cfg, DIST_PACKAGES, &err);
	if (rc == 0)
		rc = snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_MEMORY_BYTES, 2ull << 30, &err);
	if (rc == 0 && preload)
		rc = snapcell_config_add_preload(cfg, "pandas", &err);
	if (rc == 0 && prime)
		rc = snapcell_config_set_warmup(cfg, prime, &err);
	struct snapcell_sandbox *sb = NULL;
	if (rc < 0)
		fprintf(stderr, "snapcell bench: pandas config: %s\n", err.message);
	else if ((rc = new_sandbox(cfg, &sb)) == 0) {
		s->ctx = sb;
		if (paced)
			paced->ctx = sb;
		struct series warmup = {
			.what = "pandas warm-up", .n = 2, .one = pandas_one, .ctx = sb};
		rc = sample(&warmup) == 0 && sample(s) == 0 && (!paced || sample(paced) == 0) ? 0
											      : -1;
		snapcell_sandbox_free(sb);
	}
	snapcell_config_free(cfg);
	return rc < 0 ? -1 : 0;
}

/* The floor's series, in this process. */
static int measure_floor(const struct bench_opts *o, struct bench_results *r)
{
	struct bench_forker forker;
	struct bench_echo echo;
	if (bench_forker_init(&forker, (size_t)FLOOR_FORK_MIB << 20) < 0) {
		fprintf(stderr, "snapcell bench: %d MiB for the floor's fork: %s\n", FLOOR_FORK_MIB,
			strerror(errno));
		return -1;
	}
	double cpu0 = bench_cpu_us();
	int rc = sample(&r->floor_fork);
	r->floor_fork_cpu_us = (bench_cpu_us() - cpu0) / (double)r->floor_fork.n;
	bench_forker_free(&forker);
	for (int spin = 0; spin <= 1 && rc == 0; spin++) {
		struct series *s = spin ? &r->floor_echo_spin : &r->floor_echo;
		if ((rc = bench_echo_start(&echo, spin)) < 0) {
			fprintf(stderr, "snapcell bench: the floor's echo process: %s\n",
				strerror(-rc));
			break;
		}
		s->ctx = &echo;
		rc = sample(s);
		bench_echo_stop(&echo);
	}
	const char *python = r->python.executable;
	fprintf(stderr, "measuring %s forking itself (%u)...\n", python, o->spawns * 10);
	return rc == 0 ? bench_python_fork(python, o->spawns * 10, &r->python_fork) : -1;
}

static void print_floor(const struct bench_results *r)
{
	printf("floor_fork_mib=%d\n", FLOOR_FORK_MIB);
	printf("floor_fork_exit_p50_us=%.1f\nfloor_fork_exit_p99_us=%.1f\n", r->floor_fork.p50_us,
	       r->floor_fork.p99_us);
	printf("floor_fork_exit_cpu_us=%.1f\n", r->floor_fork_cpu_us);
	printf("floor_python_fork_p50_us=%.1f\nfloor_python_fork_p99_us=%.1f\n",
	       r->python_fork.p50_us, r->python_fork.p99_us);
	printf("floor_python_fork_cpu_us=%.1f\n", r->python_fork.cpu_us);
	printf("floor_roundtrip_p50_us=%.1f\n", r->floor_echo.p50_us);
	printf("floor_roundtrip_spin_p50_us=%.1f\n", r->floor_echo_spin.p50_us);
	printf("fresh_over_floor_python_fork_p50=%.2f\n", r->fresh.p50_us / r->python_fork.p50_us);
	printf("paced_over_floor_python_fork_p50=%.2f\n", r->paced.p50_us / r->python_fork.p50_us);
	printf("tool_call_over_floor_roundtrip_p50=%.2f\n", r->tool_p50_us / r->floor_echo.p50_us);
}

/* One pandas setting's series, back to back and paced, each also over its print(1) figure. */
static void print_pandas(const char *setting, const struct series *fresh,
			 const struct series *paced, const struct bench_results *r)
{
	printf("pandas_%s_fresh_p50_us=%.1f\n", setting, fresh->p50_us);
	printf("pandas_%s_over_fresh_p50=%.2f\n", setting, fresh->p50_us / r->fresh.p50_us);
	printf("pandas_%s_paced_p50_us=%.1f\n", setting, paced->p50_us);
	printf("pandas_%s_paced_over_paced_p50=%.2f\n", setting, paced->p50_us / r->paced.p50_us);
}

static void print_results(const struct bench_opts *o, const struct bench_results *r)
{
	printf("isolation=%s\nruns=%lu\n", snapcell_isolation_name(r->isolation), o->runs);
	printf("python=%s\npython_version=%s\n", r->python.executable, r->python.version);
	printf("cold_start_ms=%.2f\n", r->cold.p50_us / 1e3);
	printf("fresh_p50_us=%.1f\nfresh_p99_us=%.1f\n", r->fresh.p50_us, r->fresh.p99_us);
	printf("fresh_paced_p50_us=%.1f\nfresh_paced_p99_us=%.1f\n", r->paced.p50_us,
	       r->paced.p99_us);
	printf("files_fresh_p50_us=%.1f\nfiles_fresh_p99_us=%.1f\n", r->files.p50_us,
	       r->files.p99_us);
	printf("compute_fresh_p50_us=%.1f\ncompute_fresh_p99_us=%.1f\n", r->compute.p50_us,
	       r->compute.p99_us);
	printf("parallel_threads=%u\nruns_per_s=%.0f\n", r->threads, r->runs_per_s);
	printf("template_private_kib=%llu\nparked_cells=%u\ncell_private_kib=%llu\n",
	       (unsigned long long)(r->stats.template_private_bytes / 1024), r->stats.parked_cells,
	       (unsigned long long)(r->stats.parked_cell_private_bytes / 1024));
	printf("ready_private_kib=%llu\n",
	       (unsigned long long)((r->stats.template_private_bytes +
				     r->stats.parked_cells * r->stats.parked_cell_private_bytes) /
				    1024));
	printf("tool_calls=%u\ntool_call_p50_us=%.1f\ntool_call_p99_us=%.1f\n", o->tool_calls,
	       r->tool_p50_us, r->tool_p99_us);
	printf("tool_call_host_p50_us=%.1f\n", r->tool_host_p50_us);
	printf("tool_call_first_us=%.1f\n", r->first_call.p50_us);
	printf("session_runs=%u\nsession_run_p50_us=%.1f\nsession_run_p99_us=%.1f\n",
	       o->session_runs, r->session.p50_us, r->session.p99_us);
	printf("snapshot_us=%.1f\nrestore_us=%.1f\n", r->snapshot.p50_us, r->restore.p50_us);
	printf("snapshot_tmp%dm_us=%.1f\nrestore_tmp%dm_us=%.1f\n", TMP_BENCH_MIB,
	       r->snapshot_tmp.p50_us, TMP_BENCH_MIB, r->restore_tmp.p50_us);
	printf("python_spawn_p50_us=%.1f\n", r->spawn.p50_us);
	printf("spawn_over_fresh_p50=%.1f\n", r->spawn.p50_us / r->fresh.p50_us);
	printf("spawn_over_paced_p50=%.1f\n", r->spawn.p50_us / r->paced.p50_us);
	printf("spawn_over_cold_start=%.2f\n", r->spawn.p50_us / r->cold.p50_us);
	print_floor(r);
	printf("pandas=%s\n", r->pandas.n ? "measured" : "skipped");
	if (r->pandas.n) {
		printf("pandas_fresh_p50_us=%.1f\n", r->pandas.p50_us);
		print_pandas("preloaded", &r->pandas_preloaded, &r->pandas_preloaded_paced, r);
		print_pandas("primed", &r->pandas_primed, &r->pandas_primed_paced, r);
	}
}

/* 0 to go on, 1 after --help, -1 on a usage error (reported). */
static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
	static const struct option longopts[] = {
		{"runs", required_argument, NULL, 'r'},
		{"quick", no_argument, NULL, 'q'},
		{"python", required_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool quick = false;
	unsigned long runs = 0;
	const char *python = NULL;
	for (int c; (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
		char *end;
		if (c == 'q') {
			quick = true;
		} else if (c == 'p') {
			python = optarg;
		} else if (c == 'h') {
			fputs(usage, stdout);
			return 1;
		} else if (c != 'r') {
			fputs(usage, stderr);
			return -1;
		} else if (errno = 0, runs = strtoul(optarg, &end, 10),
			   errno || end == optarg || *end || runs < 1 || runs > MAX_RUNS) {
			fprintf(stderr, "snapcell bench: --runs wants 1..%lu\n", MAX_RUNS);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "snapcell bench: unexpected argument '%s'\n%s", argv[optind],
			usage);
		return -1;
	}
	*o = quick ? (struct bench_opts){200, 1000, 10, 2000, 20, 100, 20, NULL}
		   : (struct bench_opts){1000, 3000, 50, 10000, 50, 500, 50, NULL};
	o->runs = runs ? runs : o->runs;
	o->python = python;
	return 0;
}

/* Whether Debian's pandas is installed for the interpreter's X.Y (its compiled modules are
 * built for one CPython: another version cannot import them). */
static bool have_pandas(const struct snapcell_python_info *python)
{
	char pattern[128];
	glob_t g;
	snprintf(pattern, sizeof(pattern), DIST_PACKAGES "/pandas/_libs/lib.cpython-%u%u-*.so",
		 python->major, python->minor);
	bool found = glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0;
	globfree(&g);
	if (!found)
		fprintf(stderr,
			"snapcell bench: no pandas for CPython %u.%u in " DIST_PACKAGES
			": the pandas series are skipped\n",
			python->major, python->minor);
	return found;
}

/* The interpreter: --python's, else the config's default; what snapcell refuses is a usage
 * error, as in `snapcell run`. */
static int choose_python(struct snapcell_config *cfg, const struct bench_opts *o,
			 struct snapcell_python_info *info)
{
	struct snapcell_error err = {0};
	if (o->python) {
		fe_python_chosen();
		if (snapcell_config_set_python(cfg, o->python, &err) < 0) {
			fprintf(stderr, "snapcell bench: --python %s: %s\n", o->python,
				err.message);
			return -1;
		}
	}
	if (snapcell_config_python_info(cfg, info, &err) < 0) {
		fprintf(stderr, "snapcell bench: %s\n", err.message);
		return -1;
	}
	fprintf(stderr, "python: %s, CPython %s (%s)\n", info->executable, info->version,
		info->chosen_by);
	return 0;
}

/* The series' sizes, pacing and samplers; contexts are filled in when they exist. */
static void plan_series(const struct bench_opts *o, struct snapcell_config *cfg,
			struct bench_results *r)
{
	r->cold = (struct series){.what = "cold starts", .n = COLD_STARTS, .one = cold_one};
	r->cold.ctx = cfg;
	r->fresh = (struct series){.what = "fresh runs", .n = o->runs, .one = fresh_one};
	r->paced = r->fresh;
	r->paced.what = "paced fresh runs, 2 ms apart";
	r->paced.pace_ns = PACE_NS;
	r->files = r->paced;
	r->files.what = "paced fresh runs with one file of their own, 2 ms apart";
	r->files.n = o->runs / 2 + 1;
	r->files.one = files_one;
	r->compute = (struct series){
		.what = "fresh json/re/datetime runs", .n = o->runs / 2 + 1, .one = compute_one};
	r->first_call = (struct series){.what = "first tool calls of fresh runs, 2 ms apart",
					.n = o->first_calls,
					.pace_ns = PACE_NS,
					.one = first_call_one};
	r->session =
		(struct series){.what = "session runs", .n = o->session_runs, .one = increment_one};
	r->snapshot = (struct series){.what = "snapshots", .n = o->snapshots, .one = snapshot_one};
	r->restore = (struct series){.what = "restores", .n = o->snapshots, .one = snapshot_one};
	r->snapshot_tmp = r->snapshot;
	r->snapshot_tmp.what = "snapshots with 16 MiB in /tmp";
	r->restore_tmp = r->restore;
	r->restore_tmp.what = "restores with 16 MiB in /tmp";
	r->spawn = (struct series){.what = "python spawns",
				   .n = o->spawns,
				   .one = spawn_one,
				   .ctx = r->python.executable};
	r->floor_fork = (struct series){.what = "the floor: forks of a template-sized process",
					.n = o->runs,
					.one = bench_fork_exit_one};
	r->floor_echo = (struct series){.what = "the floor: round trips to a process",
					.n = o->tool_calls,
					.one = bench_echo_one};
	r->floor_echo_spin = r->floor_echo;
	r->floor_echo_spin.what = "the floor: round trips to a process, both ends spinning";
	/* A fresh pandas import costs about half a second: few of those, more preloaded. */
	bool pandas = have_pandas(&r->python);
	r->pandas = (struct series){.what = "fresh pandas runs",
				    .n = pandas ? (o->runs >= 1000 ? 20 : 5) : 0,
				    .one = pandas_one};
	r->pandas_preloaded = (struct series){.what = "fresh pandas runs, pandas preloaded",
					      .n = pandas ? o->runs / 5 + 1 : 0,
					      .one = pandas_one};
	r->pandas_preloaded_paced =
		(struct series){.what = "fresh pandas runs, pandas preloaded, 20 ms apart",
				.n = pandas ? o->runs / 20 + 1 : 0,
				.pace_ns = PANDAS_PACE_NS,
				.one = pandas_one};
	r->pandas_primed = r->pandas_preloaded;
	r->pandas_primed.what = "fresh pandas runs, pandas preloaded and primed";
	r->pandas_primed_paced = r->pandas_preloaded_paced;
	r->pandas_primed_paced.what = "fresh pandas runs, pandas preloaded and primed, 20 ms apart";
}

int cli_bench(int argc, char **argv)
{
	struct bench_opts o;
	int rc = parse_opts(argc, argv, &o);
	if (rc != 0)
		return rc > 0 ? 0 : EXIT_USAGE;
	struct snapcell_config *cfg = fe_config_new();
	if (!cfg)
		return EXIT_FAILED;
	struct bench_results r = {0};
	if (choose_python(cfg, &o, &r.python) < 0) {
		snapcell_config_free(cfg);
		return EXIT_USAGE;
	}
	plan_series(&o, cfg, &r);
	struct snapcell_error err = {0};
	rc = snapcell_config_add_tool(cfg, "echo", "Returns " TOOL_ANSWER ".", NULL,
				      SNAPCELL_APPROVAL_NEVER, echo_tool, NULL, &err);
	if (rc < 0)
		fprintf(stderr, "snapcell bench: %s\n", err.message);
	const char *python = r.python.executable;
	/* The floor first, while this process is small: fork copies all of it. */
	bool ok = rc == 0 && measure_floor(&o, &r) == 0 && sample(&r.cold) == 0 &&
		  measure_sandbox(cfg, &o, &r) == 0 &&
		  measure_pandas_series(python, &r.pandas, NULL, false, NULL) == 0 &&
		  measure_pandas_series(python, &r.pandas_preloaded, &r.pandas_preloaded_paced,
					true, NULL) == 0 &&
		  measure_pandas_series(python, &r.pandas_primed, &r.pandas_primed_paced, true,
					PANDAS_WARMUP) == 0;
	snapcell_config_free(cfg);
	if (!ok || sample(&r.spawn) < 0) {
		fputs("snapcell bench: failed; no results\n", stderr);
		return EXIT_FAILED;
	}
	print_results(&o, &r);
	return 0;
}
