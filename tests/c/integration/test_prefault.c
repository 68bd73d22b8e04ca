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
	struct snapcell_sandbox *sb = test_sandbox(NULL);
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
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	long first = faults_of_touch(sb), last = first;
	for (int i = 0; i < 60 && last * 4 > first; i++)
		last = faults_of_touch(sb);
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
