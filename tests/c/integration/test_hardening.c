/* Issue 9's adversarial findings: code in a cell hurting the host or other sandboxes (core
 * dumps, per-user kernel quotas, host memory through tool calls, forged reports, tool names).
 * Each test failed before its fix. */
#define _GNU_SOURCE
#include "helpers.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>

/* A run on another thread, so the test can act while it is in progress. */
struct hz_run {
	struct snapcell_sandbox *sb;
	const char *code;
	struct snapcell_result *res;
	pthread_t thread;
};

static void *hz_main(void *arg)
{
	struct hz_run *b = arg;
	struct snapcell_error err;
	if (snapcell_sandbox_run(b->sb, b->code, SIZE_MAX, NULL, &b->res, &err) < 0)
		b->res = NULL;
	return NULL;
}

static void hz_start(struct hz_run *b, struct snapcell_sandbox *sb, const char *code)
{
	*b = (struct hz_run){.sb = sb, .code = code};
	cr_assert_eq(pthread_create(&b->thread, NULL, hz_main, b), 0);
}

static struct snapcell_result *hz_join(struct hz_run *b)
{
	pthread_join(b->thread, NULL);
	cr_assert_not_null(b->res, "background run failed in the library");
	return b->res;
}

/* Item 5: a crash must not stream the cell's memory to a pipe core_pattern handler (they
 * ignore RLIMIT_CORE=0); only a non-dumpable process is safe from them. */
Test(hardening, cells_are_not_dumpable)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb,
		      "import ctypes\n"
		      "libc = ctypes.CDLL(None, use_errno=True)\n"
		      "print(libc.prctl(3, 0, 0, 0, 0))\n" /* PR_GET_DUMPABLE */
		      "print(libc.prctl(4, 1, 0, 0, 0), ctypes.get_errno() != 0)\n" /* SET */
		      "print(libc.prctl(3, 0, 0, 0, 0))\n"
		      "import os\n"
		      "import sys; sys.stdout.flush()\n"
		      "if os.fork() == 0:\n"
		      "    print(libc.prctl(3, 0, 0, 0, 0), flush=True)\n"
		      "    os._exit(0)\n"
		      "os.wait()\n",
		      "0\n-1 True\n0\n0\n");
	snapcell_sandbox_free(sb);
}
