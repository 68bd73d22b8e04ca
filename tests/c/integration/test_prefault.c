/* Learned pre-faulting (src/core/prefault.c): parked cells fault in the template pages that
 * earlier runs touched, and that changes nothing a run can see but its page-fault count. */
#include "helpers.h"

#include <stdlib.h>

/* Reads every loaded module's attributes (a refcount write on each object, so a copy of most
 * of the template's heap pages) and prints how many page faults that took. */
static const char touch_code[] = "import resource, sys\n"
				 "def touch():\n"
				 "    n = 0\n"
				 "    for m in list(sys.modules.values()):\n"
				 "        for v in list(vars(m).values()):\n"
				 "            n += 1\n"
				 "    return n\n"
				 "f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
				 "touch()\n"
				 "print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)\n";

/* A sandbox that resets its cells learns from no run (prefault.c): a reset cell already holds
 * the pages its runs touched, and a learning run's cell would be retired. */
static struct snapcell_sandbox *learning_sandbox(void)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	if (snapcell_sandbox_reuse(sb)) {
		snapcell_sandbox_free(sb);
		cr_skip_test("no run is learned from with reuse on");
	}
	return sb;
}

static long faults_of_touch(struct snapcell_sandbox *sb)
{
	struct snapcell_result *res = test_run(sb, touch_code);
	expect_ok(res);
	long n = strtol(res->stdout_buf, NULL, 10);
	snapcell_result_free(res);
	return n;
}

Test(prefault, pages_earlier_runs_touched_are_faulted_in_before_later_runs)
{
	struct snapcell_sandbox *sb = learning_sandbox();
	long first = faults_of_touch(sb), last = first;
	cr_assert_gt(first, 50, "the touch takes copy-on-write faults in a cell: %ld", first);
	/* The learner reads the first runs' cells on its own thread; cells parked after it
	 * told the template come with the pages. */
	for (int i = 0; i < 60 && last * 4 > first; i++)
		last = faults_of_touch(sb);
	cr_expect_leq(last * 4, first, "faults in a run: %ld at first, still %ld later", first,
		      last);
	snapcell_sandbox_free(sb);
}

Test(prefault, pre_faulted_cells_still_start_from_the_template)
{
	struct snapcell_sandbox *sb = learning_sandbox();
	long first = faults_of_touch(sb), last = first;
	for (int i = 0; i < 60 && last * 4 > first; i++)
		last = faults_of_touch(sb);
	/* Only cells that came with the pages say anything here. */
	cr_assert_leq(last * 4, first, "no cell was pre-faulted: %ld faults at first, %ld later",
		      first, last);
	/* Writes to the very pages the cells now copy while parked: module dicts, a builtin
	 * module's attribute, the interpreter's caches. */
	expect_output(sb,
		      "import json, sys, re\nx = 41\njson.secret = 'kept?'\n"
		      "sys.modules['builtins'].leak = 1\nre.compile('leak+')\nprint('set')",
		      "set\n");
	expect_output(sb,
		      "import json, sys, builtins\n"
		      "print('x' in globals(), hasattr(json, 'secret'), hasattr(builtins, 'leak'))",
		      "False False False\n");
	snapcell_sandbox_free(sb);
}

/* A learning run's cell stays after DONE until the host shuts its frame socket: code that put
 * another socket on fd 3 (its DONE goes there) must not keep it, or the run would last until
 * its wall-clock limit. */
Test(prefault, a_run_that_replaces_its_frame_socket_still_ends_by_itself)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 20000, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	for (int i = 0; i < 2; i++) {
		struct snapcell_result *res =
			test_run(sb, "import os, socket\nkept = socket.socketpair()\n"
				     "os.dup2(kept[0].fileno(), 3)\nprint('moved')\n");
		cr_expect_eq(res->status, SNAPCELL_STATUS_OK, "status %s, stderr %s",
			     snapcell_status_name(res->status), res->stderr_buf);
		cr_expect_str_eq(res->stdout_buf, "moved\n");
		snapcell_result_free(res);
	}
	expect_output(sb, "print(2)", "2\n");
	snapcell_sandbox_free(sb);
}
