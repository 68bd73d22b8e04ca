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
				      ") speaks protocol 11"),
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
	cr_expect(strstr(err.message,
			 "exited without a greeting: not a snapcell-cell of protocol 11"),
		  "%s", err.message);
	snapcell_config_free(cfg);
}

/* sandbox_new with a dying helper from tests/ (c/dying_helper.c): its message in err. */
static int try_dying(const char *how, struct snapcell_error *err)
{
	char name[64];
	snprintf(name, sizeof(name), "dying-helper-%s", how);
	struct snapcell_config *cfg = snapcell_config_new();
	cr_assert_eq(snapcell_config_set_helper(cfg, test_build_path(name), err), 0, "%s",
		     err->message);
	int rc = try_sandbox(cfg, err);
	snapcell_config_free(cfg);
	return rc;
}

Test(helper, a_helper_that_cannot_start_is_reported_with_its_own_words)
{
	struct snapcell_error err = {0};
	uint64_t start = now_ms();
	cr_expect_eq(try_dying("loader", &err), SNAPCELL_E_HELPER);
	cr_expect_lt(now_ms() - start, 5000);
	char want[SNAPCELL_ERROR_MESSAGE_LEN];
	snprintf(want, sizeof(want),
		 "helper %s exited with status 127 before its greeting: snapcell-cell: error while "
		 "loading shared libraries: libpython3.11.so.1.0: cannot open shared object file: "
		 "No such file or directory",
		 test_build_path("dying-helper-loader"));
	cr_expect_str_eq(err.message, want);
}

Test(helper, control_bytes_in_its_words_are_escaped_and_newlines_kept)
{
	struct snapcell_error err = {0};
	cr_expect_eq(try_dying("control", &err), SNAPCELL_E_HELPER);
	const char *words = strstr(err.message, "before its greeting: ");
	cr_assert(words, "%s", err.message);
	cr_expect_str_eq(words + strlen("before its greeting: "),
			 "bad \\x1b[31mred\\x1b[0m\\x09and\\x0d\\x7f \\xff\\xfe end: caf\xc3\xa9\n"
			 "second line");
	cr_expect(strstr(err.message, "exited with status 1 "), "%s", err.message);
}

Test(helper, a_huge_stderr_is_capped_to_its_last_whole_lines)
{
	struct snapcell_error err = {0};
	uint64_t start = now_ms();
	cr_expect_eq(try_dying("huge", &err), SNAPCELL_E_HELPER);
	cr_expect_lt(now_ms() - start, 5000);
	cr_expect_lt(strlen(err.message), SNAPCELL_ERROR_MESSAGE_LEN);
	const char *words = strstr(err.message, "before its greeting: ");
	cr_assert(words, "%s", err.message);
	words += strlen("before its greeting: ");
	size_t len = strlen(words);
	const char *last = "noise line 65535\nthe last words";
	cr_assert_geq(len, strlen(last), "%s", err.message);
	cr_expect_str_eq(words + len - strlen(last), last);
	/* Whole lines only: the first one kept starts at its beginning. */
	cr_expect_eq(strncmp(words, "noise line ", 11), 0, "%s", err.message);
}

Test(helper, a_helper_killed_by_a_signal_before_its_greeting_says_so)
{
	struct snapcell_error err = {0};
	cr_expect_eq(try_dying("crash", &err), SNAPCELL_E_HELPER);
	char want[SNAPCELL_ERROR_MESSAGE_LEN];
	snprintf(want, sizeof(want), "helper %s was killed by signal 11 before its greeting",
		 test_build_path("dying-helper-crash"));
	cr_expect_str_eq(err.message, want);
}

Test(helper, a_helper_that_dies_during_setup_is_reported_with_its_words)
{
	struct snapcell_error err = {0};
	cr_expect_eq(try_dying("greets", &err), SNAPCELL_E_HELPER);
	cr_expect_str_eq(err.message,
			 "template setup: helper exited with status 1: Fatal Python error: "
			 "init_fs_encoding: failed to get the Python codec of the filesystem "
			 "encoding");
}

Test(helper, a_silent_helper_that_never_greets_times_out_as_before, .timeout = 60)
{
	struct snapcell_error err = {0};
	uint64_t start = now_ms();
	cr_expect_eq(try_dying("silent", &err), SNAPCELL_E_HELPER);
	cr_expect_lt(now_ms() - start, 20000);
	char want[SNAPCELL_ERROR_MESSAGE_LEN];
	snprintf(want, sizeof(want),
		 "helper %s sent no greeting in 10000 ms: not a snapcell-cell of protocol 11 (this "
		 "library, " SNAPCELL_VERSION ")",
		 test_build_path("dying-helper-silent"));
	cr_expect_str_eq(err.message, want);
}
