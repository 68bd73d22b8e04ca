/* Configuration without a sandbox: defaults, validation, and the names of codes and levels. */
#include "helpers.h"

Test(config, defaults_are_what_a_user_would_pick)
{
	struct snapcell_config *cfg = test_config_new();
	cr_expect_eq(snapcell_config_get_limit(cfg, SNAPCELL_LIMIT_WALL_MS), 30000);
	cr_expect_eq(snapcell_config_get_limit(cfg, SNAPCELL_LIMIT_MEMORY_BYTES), 512u << 20);
	cr_expect_eq(snapcell_config_get_limit(cfg, SNAPCELL_LIMIT_STDOUT_BYTES), 1u << 20);
	snapcell_config_free(cfg);
	snapcell_config_free(NULL);
}

Test(config, rejects_invalid_values)
{
	struct snapcell_config *cfg = test_config_new();
	cr_expect_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 0, NULL),
		     SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_MEMORY_BYTES, 1024, NULL),
		     SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT__COUNT, 5, NULL),
		     SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_set_env(cfg, "A=B", "x", NULL), SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_set_env(cfg, "", "x", NULL), SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_set_env(cfg, "X", "\xff", NULL), SNAPCELL_E_INVAL,
		     "not UTF-8");
	cr_expect_eq(snapcell_config_add_python_path(cfg, "relative/path", NULL), SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_require_isolation(cfg, 7, NULL), SNAPCELL_E_INVAL);
	snapcell_config_free(cfg);
}

Test(config, names_for_codes_statuses_and_levels)
{
	cr_expect_str_eq(snapcell_status_name(SNAPCELL_STATUS_OUTPUT_LIMIT), "output-limit");
	cr_expect_null(snapcell_status_name((enum snapcell_status)99));
	cr_expect_str_eq(snapcell_isolation_name(SNAPCELL_ISOLATION_NAMESPACES), "namespaces");
	cr_expect_str_eq(snapcell_strerror(-ENOENT), "No such file or directory");
	cr_expect_str_eq(snapcell_strerror(SNAPCELL_E_TOO_BIG), "input too large");
}
