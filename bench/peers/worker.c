/* snapcell's worker for the peer comparison (bench/peers/run.py): one sandbox through the C
 * API, driven over stdin/stdout by the line protocol in bench/peers/README.md. It times each
 * run around the API call and answers raw samples; statistics are the driver's job. It is not
 * a benchmark on its own: `snapcell bench` is. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "snapcell.h"
#include "../workloads.h"

#define PACE_NS	    2000000L
#define MAX_N	    100000u
#define MAX_THREADS 64
#define TOOL_ANSWER "{\"ok\": true, \"n\": 3}"

/* The workloads' code and expected output; worker.py and worker.mjs have the same text. */
static const char compute_code[] = BENCH_COMPUTE_CODE;
static const char compute_want[] = BENCH_COMPUTE_WANT;
static const char tools_fmt[] = "for i in range(%u):\n"
				"    r = call_tool('echo', d={'a': 1, 'b': [1, 2]})\n"
				"assert r == {'ok': True, 'n': 3}\n"
				"print(i + 1)\n";

struct worker {
	struct snapcell_config *cfg;
	struct snapcell_sandbox *sb;
};

/* One timed kind of run: code, what it must print, pause before each, and whether each run
 * is a whole new sandbox (cold start). */
struct workload {
	const char *name;
	const char *code;
	const char *want;
	long pace_ns;
	bool cold;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(long ns)
{
	struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Error text for the driver: one line, no newlines. */
static void answer_error(const char *what, const char *msg)
{
	printf("error=%s: ", what);
	for (const char *p = msg; p && *p; p++)
		putchar(*p == '\n' ? ' ' : *p);
	fputs("\nend\n", stdout);
	fflush(stdout);
}

static int echo_tool(void *user_data, const char *args_json, char **result)
{
	(void)user_data, (void)args_json;
	*result = strdup(TOOL_ANSWER);
	return *result ? 0 : 1;
}

/* A configuration with the echo tool, the helper from SNAPCELL_HELPER (a build tree) and reset
 * in place as SNAPCELL_PEER_REUSE says (1 or 0; unset: the library's default), which run.py
 * --reuse sets. */
static int make_config(struct worker *w, struct snapcell_error *err)
{
	w->cfg = snapcell_config_new();
	if (!w->cfg)
		return -ENOMEM;
	const char *helper = getenv("SNAPCELL_HELPER");
	const char *reuse = getenv("SNAPCELL_PEER_REUSE");
	int rc = helper && *helper ? snapcell_config_set_helper(w->cfg, helper, err) : 0;
	if (rc == 0 && reuse && *reuse)
		rc = snapcell_config_set_reuse(w->cfg, strcmp(reuse, "0") != 0, err);
	if (rc == 0)
		rc = snapcell_config_add_tool(w->cfg, "echo", "Returns " TOOL_ANSWER ".", NULL,
					      SNAPCELL_APPROVAL_NEVER, echo_tool, NULL, err);
	return rc;
}

/* 0 when code ran ok in sb and printed exactly want; else -1 with a message in msg. */
static int run_checked(struct snapcell_sandbox *sb, const char *code, const char *want, char *msg,
		       size_t msg_len)
{
	struct snapcell_result *res;
	struct snapcell_error err = {0};
	int rc = snapcell_sandbox_run(sb, code, SIZE_MAX, NULL, &res, &err);
	if (rc < 0) {
		snprintf(msg, msg_len, "run: %s (%s)", err.message, snapcell_strerror(rc));
		return -1;
	}
	bool good = res->status == SNAPCELL_STATUS_OK && res->stdout_len == strlen(want) &&
		    !memcmp(res->stdout_buf, want, res->stdout_len);
	if (!good)
		snprintf(msg, msg_len, "status %s, stdout \"%.*s\", stderr %.*s",
			 snapcell_status_name(res->status),
			 (int)(res->stdout_len > 64 ? 64 : res->stdout_len), res->stdout_buf,
			 (int)(res->stderr_len > 300 ? 300 : res->stderr_len), res->stderr_buf);
	snapcell_result_free(res);
	return good ? 0 : -1;
}

/* A new sandbox that has answered print(1). */
static int new_ready(const struct snapcell_config *cfg, struct snapcell_sandbox **sb, char *msg,
		     size_t msg_len)
{
	struct snapcell_error err = {0};
	int rc = snapcell_sandbox_new(cfg, sb, &err);
	if (rc < 0) {
		snprintf(msg, msg_len, "sandbox_new: %s (%s)", err.message, snapcell_strerror(rc));
		return -1;
	}
	if (run_checked(*sb, "print(1)", "1\n", msg, msg_len) < 0) {
		snapcell_sandbox_free(*sb);
		*sb = NULL;
		return -1;
	}
	return 0;
}

/* n timed runs of wl, answered as one us= line of samples. */
static void measure_series(struct worker *w, const struct workload *wl, unsigned n)
{
	char msg[512] = "";
	uint64_t *ns = calloc(n, sizeof(*ns));
	if (!ns) {
		answer_error(wl->name, "out of memory");
		return;
	}
	int rc = 0;
	for (unsigned i = 0; i < n && rc == 0; i++) {
		if (wl->pace_ns)
			sleep_ns(wl->pace_ns);
		uint64_t t0 = now_ns();
		if (wl->cold) {
			struct snapcell_sandbox *sb;
			rc = new_ready(w->cfg, &sb, msg, sizeof(msg));
			ns[i] = now_ns() - t0;
			snapcell_sandbox_free(sb);
		} else {
			rc = run_checked(w->sb, wl->code, wl->want, msg, sizeof(msg));
			ns[i] = now_ns() - t0;
		}
	}
	if (rc < 0) {
		answer_error(wl->name, msg);
	} else {
		fputs("us=", stdout);
		for (unsigned i = 0; i < n; i++)
			printf("%s%.1f", i ? "," : "", (double)ns[i] / 1e3);
		fputs("\nend\n", stdout);
		fflush(stdout);
	}
	free(ns);
}

struct parallel_ctx {
	struct snapcell_sandbox *sb;
	atomic_bool stop, failed;
	atomic_ulong done;
};

static void *parallel_thread(void *arg)
{
	struct parallel_ctx *ctx = arg;
	char msg[256];
	while (!atomic_load(&ctx->stop)) {
		if (run_checked(ctx->sb, "print(1)", "1\n", msg, sizeof(msg)) < 0) {
			atomic_store(&ctx->failed, true);
			break;
		}
		atomic_fetch_add(&ctx->done, 1);
	}
	return NULL;
}

/* One thread per online CPU running print(1) on the one sandbox for duration_ms. */
static void measure_throughput(struct worker *w, unsigned duration_ms)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (unsigned)cpus;
	pthread_t tid[MAX_THREADS];
	struct parallel_ctx ctx = {.sb = w->sb};
	uint64_t t0 = now_ns();
	unsigned started = 0;
	for (; started < n; started++)
		if (pthread_create(&tid[started], NULL, parallel_thread, &ctx) != 0)
			break;
	sleep_ns((long)duration_ms * 1000000L);
	atomic_store(&ctx.stop, true);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	double secs = (double)(now_ns() - t0) / 1e9;
	if (started < n || atomic_load(&ctx.failed)) {
		answer_error("throughput", started < n ? "pthread_create failed" : "a run failed");
		return;
	}
	printf("runs_per_s=%.1f\nthreads=%u\nend\n", (double)atomic_load(&ctx.done) / secs, n);
	fflush(stdout);
}

/* Settles (the template parks its spare cells) so the driver can read the processes' PSS. */
static void hold_ready(struct worker *w)
{
	struct snapcell_sandbox_stats st;
	struct snapcell_error err = {0};
	if (snapcell_sandbox_stats(w->sb, &st, &err) < 0) {
		answer_error("memory", err.message);
		return;
	}
	printf("template_pid=%d\nparked_cells=%u\nend\n", st.template_pid, st.parked_cells);
	fflush(stdout);
}

static void dispatch(struct worker *w, const char *name, unsigned n)
{
	static char tools10[sizeof(tools_fmt) + 16], tools1000[sizeof(tools_fmt) + 16];
	snprintf(tools10, sizeof(tools10), tools_fmt, 10u);
	snprintf(tools1000, sizeof(tools1000), tools_fmt, 1000u);
	const struct workload table[] = {
		{"fresh", "print(1)", "1\n", 0, false},
		{"paced", "print(1)", "1\n", PACE_NS, false},
		{"compute", compute_code, compute_want, 0, false},
		{"tools10", tools10, "10\n", 0, false},
		{"tools1000", tools1000, "1000\n", 0, false},
		{"cold", NULL, NULL, 0, true},
	};
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (!strcmp(name, table[i].name)) {
			measure_series(w, &table[i], n);
			return;
		}
	if (!strcmp(name, "throughput"))
		measure_throughput(w, n);
	else if (!strcmp(name, "memory"))
		hold_ready(w);
	else
		answer_error(name, "unknown workload");
}

int main(void)
{
	struct worker w = {0};
	char line[128], msg[512] = "";
	struct snapcell_error err = {0};
	/* The driver reads this process's memory here, before the sandbox exists. */
	printf("hello pid=%d\n", (int)getpid());
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin) || strcmp(line, "start\n") != 0)
		return 2;
	int rc = make_config(&w, &err);
	if (rc < 0)
		snprintf(msg, sizeof(msg), "config: %s (%s)", err.message, snapcell_strerror(rc));
	if (rc < 0 || new_ready(w.cfg, &w.sb, msg, sizeof(msg)) < 0) {
		printf("error %s\n", msg);
		snapcell_config_free(w.cfg);
		return 1;
	}
	printf("ready {\"isolation\": \"%s\", \"version\": \"%s\", \"reuse\": %s}\n",
	       snapcell_isolation_name(snapcell_sandbox_isolation(w.sb)), SNAPCELL_VERSION,
	       snapcell_sandbox_reuse(w.sb) ? "true" : "false");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		char name[32];
		unsigned n = 0;
		if (sscanf(line, "%31s %u", name, &n) < 1 || !strcmp(name, "quit"))
			break;
		if (n > MAX_N)
			answer_error(name, "n too large");
		else
			dispatch(&w, name, n);
	}
	snapcell_sandbox_free(w.sb);
	snapcell_config_free(w.cfg);
	return 0;
}
