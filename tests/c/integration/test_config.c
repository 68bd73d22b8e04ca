/* Configuration as a sandbox sees it: its own copy, and errors from sandbox creation. */
#include "helpers.h"

Test(config, missing_python_path_fails_sandbox_creation_clearly)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_python_path(cfg, "/nonexistent/site-packages", NULL), 0);
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_sandbox_new(cfg, &sb, &err), -ENOENT);
	cr_expect_null(sb);
	cr_expect(strstr(err.message, "/nonexistent/site-packages"), "%s", err.message);
	snapcell_config_free(cfg);
}

/* The level the probe promises is the level a sandbox gets and a config may require; one
 * above it fails clearly (tests/c/integration/test_cgroups.c: the unprivileged case). */
Test(config, required_isolation_level_is_met_or_fails_clearly)
{
	struct snapcell_probe probe;
	cr_assert_eq(snapcell_probe_host(&probe, NULL), 0);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_error err = {0};
	snapcell_config_require_isolation(cfg, SNAPCELL_ISOLATION_CGROUPS, NULL);
	if (probe.level == SNAPCELL_ISOLATION_CGROUPS) {
		cr_expect_eq(snapcell_sandbox_new(cfg, &sb, &err), 0, "%s", err.message);
		cr_expect_eq(snapcell_sandbox_isolation(sb), SNAPCELL_ISOLATION_CGROUPS);
		snapcell_sandbox_free(sb);
	} else {
		cr_expect_eq(snapcell_sandbox_new(cfg, &sb, &err), SNAPCELL_E_ISOLATION);
		cr_expect(strstr(err.message, "cgroups"), "%s", err.message);
	}
	snapcell_config_require_isolation(cfg, SNAPCELL_ISOLATION_NAMESPACES, NULL);
	cr_expect_eq(snapcell_sandbox_new(cfg, &sb, &err), 0, "%s", err.message);
	cr_expect_eq(snapcell_sandbox_isolation(sb), probe.level);
	snapcell_sandbox_free(sb);
	snapcell_config_free(cfg);
}

Test(config, sandbox_keeps_its_own_copy)
{
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_set_env(cfg, "K", "before", NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_set_env(cfg, "K", "after", NULL);
	snapcell_config_free(cfg);
	struct snapcell_result *res = test_run(sb, "import os; print(os.environ['K'])");
	cr_expect_str_eq(res->stdout_buf, "before\n");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* snapcell_probe_reuse answers the same each time; a sandbox arms its cells for reset in place
 * exactly when its config asks, its level allows and the kernel gives what reuse needs
 * (tests/cli/test_reuse_cli.py forces the kernel's answer to no with tests/simhost). */
Test(config, a_sandbox_reuses_cells_only_where_asked_and_possible)
{
	struct snapcell_reuse_probe a, b;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_probe_reuse(NULL, &err), SNAPCELL_E_INVAL);
	cr_assert_eq(snapcell_probe_reuse(&a, NULL), 0);
	cr_assert_eq(snapcell_probe_reuse(&b, NULL), 0);
	cr_expect_eq(memcmp(&a, &b, sizeof(a)), 0);
	cr_expect_eq(a.available, a.userfaultfd_wp_async && a.pagemap_scan && a.ptrace_child);
	cr_expect_eq(a.detail[0] == 0, a.available, "%s", a.detail);
	for (int on = 0; on <= 1; on++) {
		/* On by default: test_config_new turns it off in the suite's pass with reuse off.
		 */
		struct snapcell_config *plain = snapcell_config_new();
		cr_expect(snapcell_config_reuse(plain), "reuse is on by default");
		snapcell_config_free(plain);
		struct snapcell_config *cfg = test_config_new();
		cr_assert_eq(snapcell_config_set_reuse(cfg, on, NULL), 0);
		cr_expect_eq(snapcell_config_reuse(cfg), on);
		struct snapcell_sandbox *sb = test_sandbox(cfg);
		snapcell_config_free(cfg);
		bool want = on && a.available &&
			    snapcell_sandbox_isolation(sb) >= SNAPCELL_ISOLATION_NAMESPACES;
		cr_expect_eq(snapcell_sandbox_reuse(sb), want, "reuse %d: %d", on,
			     snapcell_sandbox_reuse(sb));
		snapcell_sandbox_free(sb);
	}
	/* A config that does not mention reuse resets cells wherever the kernel allows. */
	struct snapcell_config *plain = snapcell_config_new();
	cr_assert_eq(snapcell_config_set_helper(plain, test_helper_path(), &err), 0, "%s",
		     err.message);
	struct snapcell_sandbox *sb = test_sandbox(plain);
	snapcell_config_free(plain);
	cr_expect_eq(snapcell_sandbox_reuse(sb),
		     a.available && snapcell_sandbox_isolation(sb) >= SNAPCELL_ISOLATION_NAMESPACES,
		     "default: %d", snapcell_sandbox_reuse(sb));
	snapcell_sandbox_free(sb);
	cr_expect(!snapcell_sandbox_reuse(NULL));
	cr_expect(!snapcell_config_reuse(NULL));
}
