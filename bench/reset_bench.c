/* Back-to-back fresh runs with reset in place on and off (snapcell_config_set_reuse), in the
 * same process, alternating rounds, so both see the same machine. Prints key=value lines:
 * reuse_{on,off}_{fresh,compute}_p50_us, _p99_us, _runs_per_s, _failed_runs, and the CPU time a
 * run costs, which a loaded machine does not blur as it does the wall clock: _cell_cpu_us
 * (the result's cpu_us), _template_cpu_us (the template's, which resets cells), and
 * _host_cpu_us (this process's), each the mean per run. Usage:
 * snapcell-reset-bench [--runs N] [--rounds R] [--compute] [--only on|off] (N runs a round,
 * default 200 and 5; `print(1)`, or with --compute the json/re/datetime workload of
 * bench/workloads.h; --only measures one side, for a profiler's sake). The
 * helper is $SNAPCELL_HELPER when set (as `meson devenv` sets it), else the library's
 * default. */
#define _GNU_SOURCE
#include <snapcell.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "workloads.h"

static const char *code = "print(1)";
static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static struct snapcell_sandbox *sandbox(bool reuse)
{
	struct snapcell_error err = {0};
	struct snapcell_config *cfg = snapcell_config_new();
	const char *helper = getenv("SNAPCELL_HELPER");
	struct snapcell_sandbox *sb = NULL;
	if (!cfg || (helper && snapcell_config_set_helper(cfg, helper, &err) != 0) ||
	    snapcell_config_set_reuse(cfg, reuse, &err) != 0 ||
	    snapcell_sandbox_new(cfg, &sb, &err) != 0) {
		fprintf(stderr, "reset bench: %s\n", err.message);
		exit(1);
	}
	snapcell_config_free(cfg);
	return sb;
}

/* CPU time so far, µs, to the nanosecond (not sampled at ticks as /proc/PID/stat's): of the
 * sandbox's template (its one thread's /proc/PID/schedstat), or with template_pid 0 of this
 * process. */
static double cpu_us(int template_pid)
{
	if (!template_pid) {
		struct timespec ts;
		clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
		return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/schedstat", template_pid);
	FILE *f = fopen(path, "re");
	unsigned long long ns = 0;
	if (f && fscanf(f, "%llu", &ns) != 1)
		ns = 0;
	if (f)
		fclose(f);
	return (double)ns / 1e3;
}

/* n runs back to back into lat (µs each); returns the runs that were not ok, and adds their
 * cells' CPU time to *cell_us. */
static int round_of(struct snapcell_sandbox *sb, int n, double *lat, double *cell_us)
{
	int bad = 0;
	for (int i = 0; i < n; i++) {
		struct snapcell_result *res = NULL;
		struct snapcell_error err = {0};
		double t0 = now_us();
		int rc = snapcell_sandbox_run(sb, code, SIZE_MAX, NULL, &res, &err);
		lat[i] = now_us() - t0;
		bad += rc != 0 || res->status != SNAPCELL_STATUS_OK;
		*cell_us += rc == 0 ? (double)res->cpu_us : 0;
		snapcell_result_free(res);
	}
	return bad;
}

int main(int argc, char **argv)
{
	int runs = 200, rounds = 5;
	const char *kind = "fresh";
	int first = 0, last = 1;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--compute")) {
			code = BENCH_COMPUTE_CODE;
			kind = "compute";
		} else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
			runs = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) {
			rounds = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
			first = last = !strcmp(argv[++i], "off");
			runs *= !strcmp(argv[i], "on") || !strcmp(argv[i], "off");
		} else {
			runs = 0;
		}
	}
	if (runs < 1 || rounds < 1) {
		fprintf(stderr, "usage: snapcell-reset-bench [--runs N] [--rounds R] [--compute] "
				"[--only on|off]\n");
		return 2;
	}
	struct snapcell_sandbox *sb[2] = {NULL, NULL};
	const char *name[2] = {"reuse_on", "reuse_off"};
	double *lat[2] = {NULL, NULL};
	double wall[2] = {0, 0}, cell[2] = {0, 0}, tmpl[2] = {0, 0}, host[2] = {0, 0}, ignored = 0;
	int bad[2] = {0, 0}, tpid[2] = {0, 0};
	double warm[64];
	for (int k = first; k <= last; k++) {
		sb[k] = sandbox(k == 0);
		lat[k] = calloc((size_t)runs * rounds, sizeof(double));
		struct snapcell_sandbox_stats st;
		if (snapcell_sandbox_stats(sb[k], &st, NULL) == 0)
			tpid[k] = st.template_pid;
		round_of(sb[k], 64, warm, &ignored); /* the learner's first runs, the warm-up */
	}
	for (int r = 0; r < rounds; r++)
		for (int j = first; j <= last; j++) {
			int which = r % 2 ? first + last - j : j; /* alternate who goes first */
			double t0 = now_us(), t_cpu = cpu_us(tpid[which]), h_cpu = cpu_us(0);
			bad[which] += round_of(sb[which], runs, lat[which] + (size_t)r * runs,
					       &cell[which]);
			wall[which] += now_us() - t0;
			tmpl[which] += cpu_us(tpid[which]) - t_cpu;
			host[which] += cpu_us(0) - h_cpu;
		}
	size_t n = (size_t)runs * rounds;
	for (int k = first; k <= last; k++) {
		qsort(lat[k], n, sizeof(double), by_value);
		printf("%s_%s_p50_us=%.0f\n", name[k], kind, lat[k][n / 2]);
		printf("%s_%s_p99_us=%.0f\n", name[k], kind, lat[k][n * 99 / 100]);
		printf("%s_%s_runs_per_s=%.0f\n", name[k], kind, (double)n / (wall[k] / 1e6));
		printf("%s_%s_failed_runs=%d\n", name[k], kind, bad[k]);
		printf("%s_%s_cell_cpu_us=%.0f\n", name[k], kind, cell[k] / (double)n);
		printf("%s_%s_template_cpu_us=%.0f\n", name[k], kind, tmpl[k] / (double)n);
		printf("%s_%s_host_cpu_us=%.0f\n", name[k], kind, host[k] / (double)n);
		snapcell_sandbox_free(sb[k]);
		free(lat[k]);
	}
	return 0;
}
