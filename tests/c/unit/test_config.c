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

Test(config, uid_range_leaves_out_root_and_the_invalid_ids)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	static const uint32_t good[][2] = {
		{SNAPCELL_UID_RANGE_FIRST, SNAPCELL_UID_RANGE_COUNT},
		{65534, 0},
		{65536, 1},
		{1, 65534},
		{4294967294u, 1},
		{100000, 0},
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_expect_eq(snapcell_config_set_uid_range(cfg, good[i][0], good[i][1], &err), 0,
			     "%u:%u: %s", good[i][0], good[i][1], err.message);
	static const uint32_t bad[][2] = {
		{0, 1},		  {0, 0},	   {65535, 0},	     {65535, 1},
		{1, 65535},	  {60000, 10000},  {4294967295u, 0}, {4294967295u, 1},
		{4294967294u, 2}, {2, UINT32_MAX},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(snapcell_config_set_uid_range(cfg, bad[i][0], bad[i][1], &err),
			     SNAPCELL_E_INVAL, "%u:%u", bad[i][0], bad[i][1]);
	cr_expect(strstr(err.message, "65535") != NULL, "%s", err.message);
	cr_expect_eq(snapcell_config_set_uid_range(NULL, 1, 1, NULL), SNAPCELL_E_INVAL);
	snapcell_config_free(cfg);
}

Test(config, names_for_codes_statuses_and_levels)
{
	cr_expect_str_eq(snapcell_status_name(SNAPCELL_STATUS_OUTPUT_LIMIT), "output-limit");
	cr_expect_null(snapcell_status_name((enum snapcell_status)99));
	cr_expect_str_eq(snapcell_isolation_name(SNAPCELL_ISOLATION_NAMESPACES), "namespaces");
	cr_expect_str_eq(snapcell_strerror(-ENOENT), "No such file or directory");
	cr_expect_str_eq(snapcell_strerror(SNAPCELL_E_TOO_BIG), "input too large");
	cr_expect_str_eq(snapcell_error_name(SNAPCELL_E_EXHAUSTED), "SNAPCELL_E_EXHAUSTED");
}

Test(config, preload_takes_dotted_module_names_once)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_add_preload(cfg, "matplotlib.pyplot", &err), 0, "%s",
		     err.message);
	cr_expect_eq(snapcell_config_add_preload(cfg, "matplotlib.pyplot", NULL), 0);
	cr_expect_eq(snapcell_config_add_preload(cfg, "_x1", NULL), 0);
	static const char *const bad[] = {"", ".a", "a.", "a..b", "1a", "a-b", "a b", "os;x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(snapcell_config_add_preload(cfg, bad[i], NULL), SNAPCELL_E_INVAL, "%s",
			     bad[i]);
	cr_expect_eq(snapcell_config_add_preload(cfg, NULL, NULL), SNAPCELL_E_INVAL);
	snapcell_config_free(cfg);
}

Test(config, warmup_is_utf8_code_under_the_cap)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_set_warmup(cfg, "import json\n", &err), 0, "%s", err.message);
	cr_expect_eq(snapcell_config_set_warmup(cfg, "x = '\xff'", &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "not valid UTF-8"), "%s", err.message);
	char *big = malloc(SNAPCELL_WARMUP_MAX + 2);
	memset(big, 'x', SNAPCELL_WARMUP_MAX + 1);
	big[SNAPCELL_WARMUP_MAX + 1] = 0;
	cr_expect_eq(snapcell_config_set_warmup(cfg, big, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "65537 bytes of code; the limit is 65536"), "%s",
		  err.message);
	big[SNAPCELL_WARMUP_MAX] = 0;
	cr_expect_eq(snapcell_config_set_warmup(cfg, big, &err), 0, "%s", err.message);
	free(big);
	cr_expect_eq(snapcell_config_set_warmup(cfg, NULL, NULL), 0);
	cr_expect_eq(snapcell_config_set_warmup(cfg, "", NULL), 0);
	cr_expect_eq(snapcell_config_set_warmup(NULL, "x", NULL), SNAPCELL_E_INVAL);
	snapcell_config_free(cfg);
}

static void write_venv(const char *dir, const char *cfg_text, const char *lib)
{
	char path[512];
	snprintf(path, sizeof(path), "mkdir -p %s/lib/%s/site-packages", dir, lib);
	cr_assert_eq(system(path), 0);
	snprintf(path, sizeof(path), "%s/pyvenv.cfg", dir);
	FILE *f = fopen(path, "w");
	cr_assert(f);
	fputs(cfg_text, f);
	fclose(f);
}

Test(config, a_venv_without_its_site_packages_or_its_interpreter_is_refused)
{
	char dir[] = "/tmp/snapcell-venv-test-XXXXXX";
	cr_assert(mkdtemp(dir));
	char other[600], same[600], none[600], cmd[700];
	snprintf(other, sizeof(other), "%s/other", dir);
	snprintf(same, sizeof(same), "%s/same", dir);
	snprintf(none, sizeof(none), "%s/none", dir);
	write_venv(other, "home = /opt/py/bin\nversion = 3.12.1\n", "python3.12");
	write_venv(same, "home = /usr/bin\nversion_info = 3.11.2.final.0\n", "python3.11");
	write_venv(none, "home = /usr/bin\nversion = 3.11.2\n", "python3.12");
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_set_venv(cfg, other, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, other) && strstr(err.message, "interpreter it was made from"),
		  "%s", err.message);
	cr_expect_eq(snapcell_config_set_venv(cfg, none, &err), -ENOENT);
	cr_expect(strstr(err.message, "lib/python3.11/site-packages"), "%s", err.message);
	cr_expect_eq(snapcell_config_set_venv(cfg, dir, &err), -ENOENT); /* no pyvenv.cfg */
	cr_expect(strstr(err.message, "pyvenv.cfg"), "%s", err.message);
	cr_expect_eq(snapcell_config_set_venv(cfg, same, &err), 0, "%s", err.message);
	char *text = NULL;
	cr_assert_eq(snapcell_config_describe(cfg, SNAPCELL_DESCRIBE_COMPACT, &text, &err), 0);
	cr_expect(strstr(text, "The standard library and the host's Python packages"), "%s", text);
	free(text);
	cr_expect_eq(snapcell_config_set_venv(cfg, NULL, &err), 0);
	snapcell_config_free(cfg);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}
