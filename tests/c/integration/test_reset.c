/* Reset in place (snapcell_config_set_reuse, guest/reset.c): a fresh run's cell brought back to
 * its parked state and handed to the next fresh run, with nothing of the run before it left;
 * any state the reset does not restore discards the cell, and the next run gets a forked one. */
#include "helpers.h"

#include <stdlib.h>
#include <string.h>

/* Which cell ran: its /tmp and /output, tmpfs mounts of its own (a new device each). */
static const char identity_code[] = "import os\n"
				    "print(os.stat('/tmp').st_dev, os.stat('/output').st_dev)\n";

static char *identity(struct snapcell_sandbox *sb)
{
	struct snapcell_result *res = test_run(sb, identity_code);
	cr_assert_eq(res->status, SNAPCELL_STATUS_OK, "status %s, stderr %s",
		     snapcell_status_name(res->status), res->stderr_buf);
	char *id = strdup(res->stdout_buf);
	snapcell_result_free(res);
	return id;
}

static struct snapcell_sandbox *reuse_sandbox(bool on)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_reuse(cfg, on, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	if (on && snapcell_sandbox_isolation(sb) < SNAPCELL_ISOLATION_NAMESPACES)
		cr_skip_test("reset in place needs level namespaces");
	return sb;
}

/* Runs until a cell comes back: true when some run's cell is the one before it. */
static bool some_cell_reused(struct snapcell_sandbox *sb, int rounds)
{
	char *last = identity(sb);
	bool seen = false;
	for (int i = 0; i < rounds && !seen; i++) {
		char *now = identity(sb);
		seen = strcmp(now, last) == 0;
		free(last);
		last = now;
	}
	free(last);
	return seen;
}

Test(reset, with_reuse_on_a_cell_runs_again)
{
	struct snapcell_sandbox *sb = reuse_sandbox(true);
	cr_expect(some_cell_reused(sb, 8), "no cell was reused in 8 runs");
	snapcell_sandbox_free(sb);
}

Test(reset, with_reuse_off_every_run_has_a_new_cell)
{
	struct snapcell_sandbox *sb = reuse_sandbox(false);
	cr_expect(!some_cell_reused(sb, 8), "a cell ran twice with reuse off");
	snapcell_sandbox_free(sb);
}
