/* Finding and checking the helper: the configured path or the build-time default, never a
 * search; a missing helper names its path and the fix; a helper speaking another protocol, or
 * no helper at all, is a clear SNAPCELL_E_HELPER within seconds. */
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>

#include "helpers.h"

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* sandbox_new's code, with its message in err; the sandbox (if any) is freed. */
static int try_sandbox(struct snapcell_config *cfg, struct snapcell_error *err)
{
	struct snapcell_sandbox *sb = NULL;
	int rc = snapcell_sandbox_new(cfg, &sb, err);
	cr_expect_eq(rc == 0, sb != NULL);
	snapcell_sandbox_free(sb);
	return rc;
}

Test(helper, set_helper_resolves_and_checks_the_path)
{
	struct snapcell_config *cfg = snapcell_config_new();
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_set_helper(cfg, "/nonexistent/snapcell-cell", &err), -ENOENT);
	cr_expect_str_eq(err.message,
			 "set_helper /nonexistent/snapcell-cell: No such file or directory");
	cr_expect_lt(snapcell_config_set_helper(cfg, "/tmp", &err), 0);
	cr_expect(strstr(err.message, "not an executable file"), "%s", err.message);
	cr_expect_eq(snapcell_config_set_helper(NULL, "/bin/true", &err), SNAPCELL_E_INVAL);
	snapcell_config_free(cfg);
}

Test(helper, the_default_is_the_build_time_path_and_nothing_else)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_helper(cfg, NULL, &err), 0, "NULL restores the default");
	if (access(SC_TEST_DEFAULT_HELPER, F_OK) == 0) {
		snapcell_config_free(cfg);
		criterion_skip_test("a helper is installed at " SC_TEST_DEFAULT_HELPER);
	}
	/* Not the build tree's helper beside libsnapcell.so: no lookup but the configured one. */
	cr_expect_eq(try_sandbox(cfg, &err), -ENOENT);
	cr_expect(strstr(err.message, "sandbox helper " SC_TEST_DEFAULT_HELPER), "%s", err.message);
	cr_expect(strstr(err.message, "snapcell_config_set_helper"), "%s", err.message);
	snapcell_config_free(cfg);
}

Test(helper, a_helper_gone_since_it_was_set_is_named)
{
	char path[] = "/tmp/snapcell-helper-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	fchmod(fd, 0755);
	close(fd);
	struct snapcell_config *cfg = snapcell_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_helper(cfg, path, &err), 0, "%s", err.message);
	unlink(path);
	cr_expect_eq(try_sandbox(cfg, &err), -ENOENT);
	cr_expect(strstr(err.message, path), "%s", err.message);
	cr_expect(strstr(err.message, "set by snapcell_config_set_helper"), "%s", err.message);
	snapcell_config_free(cfg);
}

Test(helper, a_helper_of_another_protocol_is_refused_by_both_versions)
{
	struct snapcell_config *cfg = snapcell_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_helper(cfg, test_build_path("snapcell-cell-protocol-999"),
						&err),
		     0, "%s", err.message);
	uint64_t start = now_ms();
	cr_expect_eq(try_sandbox(cfg, &err), SNAPCELL_E_HELPER);
	cr_expect_lt(now_ms() - start, 5000);
	cr_expect(strstr(err.message, "speaks protocol 999, this library (" SNAPCELL_VERSION
				      ") speaks protocol 6"),
		  "%s", err.message);
	cr_expect(strstr(err.message, "snapcell-cell-protocol-999"), "%s", err.message);
	snapcell_config_free(cfg);
}

Test(helper, a_program_that_is_no_helper_fails_fast)
{
	struct snapcell_config *cfg = snapcell_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_helper(cfg, "/bin/true", &err), 0, "%s", err.message);
	uint64_t start = now_ms();
	cr_expect_eq(try_sandbox(cfg, &err), SNAPCELL_E_HELPER);
	cr_expect_lt(now_ms() - start, 5000);
	cr_expect(
		strstr(err.message, "exited without a greeting: not a snapcell-cell of protocol 6"),
		"%s", err.message);
	snapcell_config_free(cfg);
}
