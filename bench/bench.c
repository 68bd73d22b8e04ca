/* `snapcell bench`: measures cold start, fresh-run latency, parallel throughput and idle memory
 * of a sandbox against a plain `python3 -c` spawn, all in one run, as key=value lines. It uses
 * only the public API and checks nothing but that every run printed 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
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

#define EXIT_USAGE  2
#define EXIT_FAILED 3
#define WARMUP_RUNS 50
#define COLD_STARTS 5
#define PACE_NS	    2000000L
#define MAX_RUNS    10000000UL
#define MAX_THREADS 64
#define PYTHON	    "/usr/bin/python3"
#define PROBE_CODE  "print(1)"

static const char usage[] =
	"usage: snapcell bench [--runs N] [--quick]\n"
	"\n"
	"Measures one sandbox against spawning " PYTHON " and prints key=value lines on\n"
	"stdout (progress on stderr). Exit 3 when a run fails.\n"
	"\n"
	"options:\n"
	"  --runs N   sequential fresh runs per series (default 1000)\n"
	"  --quick    smoke mode: 200 runs, 1 s of parallel runs, 10 python spawns\n"
	"  --help     show this help\n";

struct bench_opts {
	unsigned long runs;
	unsigned parallel_ms;
	unsigned spawns;
};

struct bench_results {
	enum snapcell_isolation isolation;
	double cold_start_ms;
	double fresh_p50_us, fresh_p99_us;
	double paced_p50_us, paced_p99_us;
	unsigned threads;
	double runs_per_s;
	struct snapcell_sandbox_stats stats;
	double spawn_p50_us;
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

/* One fresh run of print(1), timed around the call alone; -1 (reported) unless it printed 1. */
static int run_checked(struct snapcell_sandbox *sb, uint64_t *elapsed_ns)
{
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	uint64_t t0 = now_ns();
	int rc = snapcell_sandbox_run(sb, PROBE_CODE, SIZE_MAX, &res, &err);
	uint64_t t1 = now_ns();
	if (rc < 0) {
		fprintf(stderr, "snapcell bench: run failed: %s (%s)\n", err.message,
			snapcell_strerror(rc));
		return -1;
	}
	bool good = res->status == SNAPCELL_STATUS_OK && res->stdout_len == 2 &&
		    !memcmp(res->stdout_buf, "1\n", 2);
	if (!good)
		fprintf(stderr,
			"snapcell bench: print(1) ended with status %s, stdout \"%.*s\", "
			"stderr: %.*s\n",
			snapcell_status_name(res->status),
			(int)(res->stdout_len > 64 ? 64 : res->stdout_len), res->stdout_buf,
			(int)(res->stderr_len > 512 ? 512 : res->stderr_len), res->stderr_buf);
	snapcell_result_free(res);
	if (elapsed_ns)
		*elapsed_ns = t1 - t0;
	return good ? 0 : -1;
}

static int new_sandbox(const struct snapcell_config *cfg, struct snapcell_sandbox **sb)
{
	struct snapcell_error err = {0};
	int rc = snapcell_sandbox_new(cfg, sb, &err);
	if (rc < 0)
		fprintf(stderr, "snapcell bench: sandbox: %s (%s)\n", err.message,
			snapcell_strerror(rc));
	return rc < 0 ? -1 : 0;
}

/* Median over fresh sandboxes of snapcell_sandbox_new() start to the first result. */
static int measure_cold_start(const struct snapcell_config *cfg, double *ms)
{
	uint64_t ns[COLD_STARTS];
	fprintf(stderr, "measuring cold starts (%d)...\n", COLD_STARTS);
	for (unsigned i = 0; i < COLD_STARTS; i++) {
		struct snapcell_sandbox *sb;
		uint64_t t0 = now_ns();
		if (new_sandbox(cfg, &sb) < 0)
			return -1;
		int rc = run_checked(sb, NULL);
		ns[i] = now_ns() - t0;
		snapcell_sandbox_free(sb);
		if (rc < 0)
			return -1;
	}
	*ms = percentile_us(ns, COLD_STARTS, 50) / 1e3;
	return 0;
}

/* n sequential runs, optionally paced so the template re-parks its spares in between. */
static int measure_series(struct snapcell_sandbox *sb, size_t n, long pace_ns, double *p50,
			  double *p99)
{
	uint64_t *ns = calloc(n, sizeof(*ns));
	if (!ns) {
		fputs("snapcell bench: out of memory\n", stderr);
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (pace_ns)
			sleep_ns(pace_ns);
		rc = run_checked(sb, &ns[i]);
	}
	if (rc == 0) {
		*p50 = percentile_us(ns, n, 50);
		*p99 = percentile_us(ns, n, 99);
	}
	free(ns);
	return rc;
}

struct parallel_ctx {
	struct snapcell_sandbox *sb;
	atomic_bool stop;
	atomic_bool failed;
	atomic_ulong done;
};

static void *parallel_worker(void *arg)
{
	struct parallel_ctx *ctx = arg;
	while (!atomic_load(&ctx->stop)) {
		if (run_checked(ctx->sb, NULL) < 0) {
			atomic_store(&ctx->failed, true);
			atomic_store(&ctx->stop, true);
			break;
		}
		atomic_fetch_add(&ctx->done, 1);
	}
	return NULL;
}

/* One worker thread per online CPU, all on the same sandbox, for duration_ms. */
static int measure_parallel(struct snapcell_sandbox *sb, unsigned duration_ms, unsigned *threads,
			    double *per_s)
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
	if (started < n) {
		fputs("snapcell bench: could not start worker threads\n", stderr);
		return -1;
	}
	if (atomic_load(&ctx.failed))
		return -1;
	*threads = n;
	*per_s = (double)atomic_load(&ctx.done) / secs;
	return 0;
}

/* Reads fd to EOF, keeping the first cap bytes; returns the total length. */
static size_t drain(int fd, char *buf, size_t cap)
{
	char scratch[256];
	size_t total = 0;
	for (;;) {
		ssize_t n = read(fd, scratch, sizeof(scratch));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return total;
		for (ssize_t i = 0; i < n; i++, total++)
			if (total < cap)
				buf[total] = scratch[i];
	}
}

/* fork + exec of python3 -c 'print(1)' with stdout to a pipe, read to EOF and waited for. */
static int spawn_python_once(uint64_t *elapsed_ns)
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
			execv(PYTHON, args);
		_exit(127);
	}
	close(p[1]);
	char out[16];
	size_t len = pid > 0 ? drain(p[0], out, sizeof(out)) : 0;
	close(p[0]);
	if (pid < 0)
		return -1;
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	*elapsed_ns = now_ns() - t0;
	bool printed_one = len == 2 && !memcmp(out, "1\n", 2);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 && printed_one ? 0 : -1;
}

static int measure_spawn(unsigned n, double *p50)
{
	uint64_t ns[64];
	if (n > 64)
		n = 64;
	fprintf(stderr, "measuring %s spawns (%u)...\n", PYTHON, n);
	for (unsigned i = 0; i < n; i++) {
		if (spawn_python_once(&ns[i]) < 0) {
			fprintf(stderr, "snapcell bench: %s -c '%s' failed\n", PYTHON, PROBE_CODE);
			return -1;
		}
	}
	*p50 = percentile_us(ns, n, 50);
	return 0;
}

/* Everything that needs the long-lived sandbox: warm-up, both series, parallel, stats. */
static int measure_sandbox(const struct snapcell_config *cfg, const struct bench_opts *o,
			   struct bench_results *r)
{
	struct snapcell_sandbox *sb;
	if (new_sandbox(cfg, &sb) < 0)
		return -1;
	r->isolation = snapcell_sandbox_isolation(sb);
	double ignored;
	fprintf(stderr, "warming up (%d runs)...\n", WARMUP_RUNS);
	int rc = measure_series(sb, WARMUP_RUNS, 0, &ignored, &ignored);
	if (rc == 0) {
		fprintf(stderr, "measuring fresh runs (%lu)...\n", o->runs);
		rc = measure_series(sb, o->runs, 0, &r->fresh_p50_us, &r->fresh_p99_us);
	}
	if (rc == 0) {
		fprintf(stderr, "measuring paced fresh runs (%lu, 2 ms apart)...\n", o->runs);
		rc = measure_series(sb, o->runs, PACE_NS, &r->paced_p50_us, &r->paced_p99_us);
	}
	if (rc == 0)
		rc = measure_parallel(sb, o->parallel_ms, &r->threads, &r->runs_per_s);
	if (rc == 0) {
		fputs("measuring memory...\n", stderr);
		int e = snapcell_sandbox_stats(sb, &r->stats);
		if (e < 0)
			fprintf(stderr, "snapcell bench: stats: %s\n", snapcell_strerror(e));
		rc = e < 0 ? -1 : 0;
	}
	snapcell_sandbox_free(sb);
	return rc;
}

static void print_results(const struct bench_opts *o, const struct bench_results *r)
{
	printf("isolation=%s\n", snapcell_isolation_name(r->isolation));
	printf("runs=%lu\n", o->runs);
	printf("cold_start_ms=%.2f\n", r->cold_start_ms);
	printf("fresh_p50_us=%.1f\n", r->fresh_p50_us);
	printf("fresh_p99_us=%.1f\n", r->fresh_p99_us);
	printf("fresh_paced_p50_us=%.1f\n", r->paced_p50_us);
	printf("fresh_paced_p99_us=%.1f\n", r->paced_p99_us);
	printf("parallel_threads=%u\n", r->threads);
	printf("runs_per_s=%.0f\n", r->runs_per_s);
	printf("template_private_kib=%llu\n",
	       (unsigned long long)(r->stats.template_private_bytes / 1024));
	printf("parked_cells=%u\n", r->stats.parked_cells);
	printf("cell_private_kib=%llu\n",
	       (unsigned long long)(r->stats.parked_cell_private_bytes / 1024));
	printf("python_spawn_p50_us=%.1f\n", r->spawn_p50_us);
	printf("spawn_over_fresh_p50=%.1f\n", r->spawn_p50_us / r->fresh_p50_us);
	printf("spawn_over_paced_p50=%.1f\n", r->spawn_p50_us / r->paced_p50_us);
	printf("spawn_over_cold_start=%.2f\n", r->spawn_p50_us / 1e3 / r->cold_start_ms);
}

/* 0 to go on, 1 after --help, -1 on a usage error (reported). */
static int parse_opts(int argc, char **argv, struct bench_opts *o)
{
	static const struct option longopts[] = {
		{"runs", required_argument, NULL, 'r'},
		{"quick", no_argument, NULL, 'q'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	bool quick = false, runs_set = false;
	*o = (struct bench_opts){.runs = 1000, .parallel_ms = 3000, .spawns = 50};
	for (int c; (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
		char *end;
		switch (c) {
		case 'r':
			errno = 0;
			o->runs = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || o->runs < 1 || o->runs > MAX_RUNS) {
				fprintf(stderr, "snapcell bench: --runs wants 1..%lu\n", MAX_RUNS);
				return -1;
			}
			runs_set = true;
			break;
		case 'q':
			quick = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 1;
		default:
			fputs(usage, stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "snapcell bench: unexpected argument '%s'\n%s", argv[optind],
			usage);
		return -1;
	}
	if (quick) {
		o->runs = runs_set ? o->runs : 200;
		o->parallel_ms = 1000;
		o->spawns = 10;
	}
	return 0;
}

int cli_bench(int argc, char **argv)
{
	struct bench_opts o;
	int rc = parse_opts(argc, argv, &o);
	if (rc != 0)
		return rc > 0 ? 0 : EXIT_USAGE;
	struct snapcell_config *cfg = snapcell_config_new();
	if (!cfg) {
		fputs("snapcell bench: out of memory\n", stderr);
		return EXIT_FAILED;
	}
	struct bench_results r = {0};
	rc = measure_cold_start(cfg, &r.cold_start_ms);
	if (rc == 0)
		rc = measure_sandbox(cfg, &o, &r);
	snapcell_config_free(cfg);
	if (rc == 0)
		rc = measure_spawn(o.spawns, &r.spawn_p50_us);
	if (rc < 0) {
		fputs("snapcell bench: failed; no results\n", stderr);
		return EXIT_FAILED;
	}
	print_results(&o, &r);
	return 0;
}
