/* A soak of fresh runs through the public API: tool calls, errors, timeouts, artifacts and
 * output over the limit, on two threads, asserting the host stays flat: resident memory,
 * descriptor count, and /dev/shm (no work directory left behind, usage back where it was).
 * The sandboxes' work directories go in a directory of the soak's own in /dev/shm ($TMPDIR),
 * so other processes' sandboxes do not blur the count.
 *
 *     soak HELPER [RUNS]        (RUNS default 5,000; exit 0 when flat, 1 otherwise)
 *
 * Figures are printed at every tenth of the runs, so a slow leak shows as a trend. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "snapcell.h"

#define THREADS 2

static const char *const codes[] = {
	/* ok, one tool call */
	"print(call_tool('add', a=2, b=3))",
	/* an error */
	"raise ValueError('soak')",
	/* an artifact */
	"open('/output/r.txt', 'w').write('x' * 4096)\nprint('ok')",
	/* a tool that fails */
	"try:\n    call_tool('fail')\nexcept ToolError as e:\n    print(e)",
	/* several calls and an unknown tool */
	"s = sum(call_tool('add', a=i, b=1) for i in range(5))\n"
	"try:\n    call_tool('nope')\nexcept ToolError:\n    pass\nprint(s)",
	/* over the stdout limit */
	"print('y' * 100000)",
	/* a child process and a thread */
	"import os, threading\n"
	"t = threading.Thread(target=lambda: None); t.start(); t.join()\n"
	"pid = os.fork()\n"
	"os._exit(0) if pid == 0 else os.waitpid(pid, 0)",
};
#define N_CODES	      (sizeof(codes) / sizeof(codes[0]))
#define TIMEOUT_EVERY 50 /* one run in this many loops forever, on the short-deadline sandbox */

static int add_tool(void *user, const char *args, char **result)
{
	(void)user;
	long a = 0, b = 0;
	const char *p = strstr(args, "\"a\"");
	const char *q = strstr(args, "\"b\"");
	if (p)
		a = strtol(strchr(p, ':') + 1, NULL, 10);
	if (q)
		b = strtol(strchr(q, ':') + 1, NULL, 10);
	return asprintf(result, "%ld", a + b) < 0 ? -1 : 0;
}

static int fail_tool(void *user, const char *args, char **result)
{
	(void)user, (void)args;
	*result = strdup("the soak's tool fails on purpose");
	return -1;
}

static long rss_kib(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	long pages = 0, res = 0;
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &res) != 2)
			res = 0;
		fclose(f);
	}
	return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int fd_count(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ., .. and the directory's own descriptor */
}

static long long shm_used_kib(void)
{
	struct statvfs s;
	if (statvfs("/dev/shm", &s) < 0)
		return -1;
	return (long long)(s.f_blocks - s.f_bfree) * (long long)s.f_frsize / 1024;
}

/* Entries in dir (the soak's own work-directory parent). */
static int entries(const char *dir)
{
	DIR *d = opendir(dir);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += e->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

static struct snapcell_sandbox *make(const char *helper, uint64_t wall_ms)
{
	struct snapcell_error err;
	struct snapcell_config *cfg = snapcell_config_new();
	struct snapcell_sandbox *sb = NULL;
	if (snapcell_config_set_helper(cfg, helper, &err) < 0 ||
	    snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, wall_ms, &err) < 0 ||
	    snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_STDOUT_BYTES, 65536, &err) < 0 ||
	    snapcell_config_add_tool(cfg, "add", "adds", NULL, SNAPCELL_APPROVAL_NEVER, add_tool,
				     NULL, &err) < 0 ||
	    snapcell_config_add_tool(cfg, "fail", "fails", NULL, SNAPCELL_APPROVAL_NEVER, fail_tool,
				     NULL, &err) < 0 ||
	    snapcell_sandbox_new(cfg, &sb, &err) < 0) {
		fprintf(stderr, "soak: sandbox: %s\n", err.message);
		exit(2);
	}
	snapcell_config_free(cfg);
	return sb;
}

static struct snapcell_sandbox *main_sb, *short_sb;
static atomic_long next_run, total, failures;
static long runs;
static atomic_long by_status[8];

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		long i = atomic_load(&next_run);
		do {
			if (i >= runs)
				return NULL;
		} while (!atomic_compare_exchange_weak(&next_run, &i, i + 1));
		bool timeout = i % TIMEOUT_EVERY == TIMEOUT_EVERY - 1;
		const char *code = timeout ? "while True: pass" : codes[i % N_CODES];
		struct snapcell_result *res;
		struct snapcell_error err;
		if (snapcell_sandbox_run(timeout ? short_sb : main_sb, code, SIZE_MAX, NULL, &res,
					 &err) < 0) {
			fprintf(stderr, "soak: run %ld: %s\n", i, err.message);
			atomic_fetch_add(&failures, 1);
			continue;
		}
		enum snapcell_status want[] = {SNAPCELL_STATUS_OK, SNAPCELL_STATUS_ERROR,
					       SNAPCELL_STATUS_OK, SNAPCELL_STATUS_OK,
					       SNAPCELL_STATUS_OK, SNAPCELL_STATUS_OUTPUT_LIMIT,
					       SNAPCELL_STATUS_OK};
		enum snapcell_status w = timeout ? SNAPCELL_STATUS_TIMEOUT : want[i % N_CODES];
		if (res->status != w) {
			fprintf(stderr, "soak: run %ld (%s): status %s, stderr %.200s\n", i,
				timeout ? "timeout" : codes[i % N_CODES],
				snapcell_status_name(res->status), res->stderr_buf);
			atomic_fetch_add(&failures, 1);
		}
		if (!timeout && i % N_CODES == 2 && res->n_artifacts != 1)
			atomic_fetch_add(&failures, 1);
		atomic_fetch_add(&by_status[res->status & 7], 1);
		snapcell_result_free(res);
		atomic_fetch_add(&total, 1);
	}
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: soak HELPER [RUNS]\n");
		return 2;
	}
	runs = argc > 2 ? atol(argv[2]) : 5000;
	char parent[] = "/dev/shm/soak-XXXXXX";
	if (!mkdtemp(parent) || chmod(parent, 0711) < 0 || setenv("TMPDIR", parent, 1) < 0) {
		perror("soak: /dev/shm");
		return 2;
	}
	long long shm0 = shm_used_kib();
	int fd0 = fd_count();
	main_sb = make(argv[1], 10000);
	short_sb = make(argv[1], 50);

	/* Warm up (allocator arenas, jansson, the two threads' stacks) before the baseline. */
	long warm = runs / 10 > 200 ? 200 : runs / 10;
	long goal = runs;
	runs = warm;
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	long rss_base = rss_kib();
	int fd_base = fd_count();
	uint64_t start = now_ms();
	printf("soak: baseline after %ld runs: rss %ld KiB, %d fds, /dev/shm %lld KiB used\n", warm,
	       rss_base, fd_base, shm_used_kib());
	long rss_max = rss_base;
	for (long step = 1; step <= 10; step++) {
		runs = warm + (goal - warm) * step / 10;
		for (int i = 0; i < THREADS; i++)
			pthread_create(&t[i], NULL, worker, NULL);
		for (int i = 0; i < THREADS; i++)
			pthread_join(t[i], NULL);
		long rss = rss_kib();
		if (rss > rss_max)
			rss_max = rss;
		printf("soak: %6ld runs: rss %ld KiB, %d fds, /dev/shm %lld KiB used\n", runs, rss,
		       fd_count(), shm_used_kib());
		fflush(stdout);
	}
	uint64_t took = now_ms() - start;
	long rss_end = rss_kib();
	int fd_end = fd_count();
	snapcell_sandbox_free(main_sb);
	snapcell_sandbox_free(short_sb);
	int fd_after = fd_count();
	long long shm1 = shm_used_kib();
	int left = entries(parent);
	rmdir(parent);
	printf("soak: %ld runs (%ld ok, %ld error, %ld timeout, %ld output-limit) in %.1f s, "
	       "%.0f runs/s after warm-up\n",
	       (long)total, (long)by_status[SNAPCELL_STATUS_OK],
	       (long)by_status[SNAPCELL_STATUS_ERROR], (long)by_status[SNAPCELL_STATUS_TIMEOUT],
	       (long)by_status[SNAPCELL_STATUS_OUTPUT_LIMIT], (double)took / 1000,
	       (double)(goal - warm) * 1000 / (double)(took ? took : 1));
	printf("soak: rss %ld -> %ld KiB (max %ld); fds %d -> %d, %d before the sandboxes and "
	       "%d after; /dev/shm %lld -> %lld KiB, %d work directories left\n",
	       rss_base, rss_end, rss_max, fd_base, fd_end, fd0, fd_after, shm0, shm1, left);
	int bad = 0;
	if (failures) {
		printf("soak: FAIL: %ld runs went wrong\n", (long)failures);
		bad = 1;
	}
	if (rss_end - rss_base > 8 * 1024) {
		printf("soak: FAIL: resident memory grew by %ld KiB\n", rss_end - rss_base);
		bad = 1;
	}
	/* Between runs each sandbox holds its parked cells and ones being retired: a few
	 * descriptors come and go; after the sandboxes are freed there must be none. */
	if (fd_end - fd_base > 8 || fd_after != fd0) {
		printf("soak: FAIL: descriptors leaked\n");
		bad = 1;
	}
	/* Other processes may use /dev/shm meanwhile: only a leak of our size counts. */
	if (left > 0 || shm1 - shm0 > 16 * 1024) {
		printf("soak: FAIL: /dev/shm not back where it was\n");
		bad = 1;
	}
	printf("soak: %s\n", bad ? "FAIL" : "flat");
	return bad;
}
