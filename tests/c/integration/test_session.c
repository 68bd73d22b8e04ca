/* Sessions and snapshots: state kept between runs, snapshot/restore, branching, failures. */
#include "helpers.h"

static struct snapcell_session *new_session(struct snapcell_sandbox *sb)
{
	struct snapcell_session *s = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	return s;
}

static char *session_out(struct snapcell_session *s, const char *code, enum snapcell_status want)
{
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_run(s, code, SIZE_MAX, NULL, &res, &err), 0, "%s",
		     err.message);
	cr_expect_eq(res->status, want, "%s -> %s: %s", code, snapcell_status_name(res->status),
		     res->stderr_buf);
	char *out = strdup(res->stdout_buf);
	snapcell_result_free(res);
	return out;
}

#define expect_session_out(s, code, want_out)                                                      \
	do {                                                                                       \
		char *got_ = session_out((s), (code), SNAPCELL_STATUS_OK);                         \
		cr_expect_str_eq(got_, (want_out), "%s", (code));                                  \
		free(got_);                                                                        \
	} while (0)

static struct snapcell_snapshot *snapshot(struct snapcell_session *s)
{
	struct snapcell_snapshot *snap = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_snapshot(s, &snap, &err), 0, "%s", err.message);
	return snap;
}

Test(session, state_persists_in_a_session_but_not_in_fresh_runs)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s, "x = 1\nimport json", "");
	expect_session_out(s, "print(x, json.dumps([x]))", "1 [1]\n");
	struct snapcell_result *res = test_run(sb, "print(x)");
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	cr_expect(strstr(res->stderr_buf, "NameError"), "%s", res->stderr_buf);
	snapcell_result_free(res);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

Test(session, errors_and_system_exit_end_only_the_run)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s, "x = 5", "");
	free(session_out(s, "1 / 0", SNAPCELL_STATUS_ERROR));
	struct snapcell_result *res = NULL;
	struct snapcell_error err;
	cr_assert_eq(snapcell_session_run(s, "raise SystemExit(4)", SIZE_MAX, NULL, &res, &err), 0);
	cr_expect_eq(res->exit_code, 4);
	snapcell_result_free(res);
	expect_session_out(s, "print(x)", "5\n");
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

Test(session, snapshot_change_restore_gives_the_snapshot_state)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s, "x = 1\ndata = {'a': 1}", "");
	struct snapcell_snapshot *snap = snapshot(s);
	expect_session_out(s, "x = 2\ndata['b'] = 2\ny = 'new'", "");
	expect_session_out(s, "print(x, data)", "2 {'a': 1, 'b': 2}\n");
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_restore(s, snap, &err), 0, "%s", err.message);
	expect_session_out(s, "print(x, data, 'y' in globals())", "1 {'a': 1} False\n");
	/* A snapshot can be restored again: restoring does not consume it. */
	expect_session_out(s, "x = 99", "");
	cr_assert_eq(snapcell_session_restore(s, snap, &err), 0, "%s", err.message);
	expect_session_out(s, "print(x)", "1\n");
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

Test(session, two_sessions_from_one_snapshot_diverge)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s, "items = ['base']", "");
	struct snapcell_snapshot *snap = snapshot(s);
	struct snapcell_session *a = NULL, *b = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_snapshot_new_session(snap, &a, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_snapshot_new_session(snap, &b, &err), 0, "%s", err.message);
	expect_session_out(a, "items.append('a')", "");
	expect_session_out(b, "items.append('b')", "");
	expect_session_out(a, "print(items)", "['base', 'a']\n");
	expect_session_out(b, "print(items)", "['base', 'b']\n");
	expect_session_out(s, "print(items)", "['base']\n");
	/* Branches outlive the session and the snapshot they came from. */
	snapcell_session_free(s);
	snapcell_snapshot_free(snap);
	expect_session_out(a, "print(len(items))", "2\n");
	snapcell_session_free(a);
	snapcell_session_free(b);
	snapcell_sandbox_free(sb);
}

Test(session, a_killed_run_ends_the_session_until_restored, .timeout = 30)
{
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 500, NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s, "x = 7", "");
	cr_expect(snapcell_session_alive(s));
	struct snapcell_snapshot *snap = snapshot(s);
	free(session_out(s, "while True: pass", SNAPCELL_STATUS_TIMEOUT));
	cr_expect(!snapcell_session_alive(s));
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_session_run(s, "print(x)", SIZE_MAX, NULL, &res, &err),
		     SNAPCELL_E_TEMPLATE);
	cr_expect(strstr(err.message, "restore a snapshot"), "%s", err.message);
	cr_assert_eq(snapcell_session_restore(s, snap, &err), 0, "%s", err.message);
	cr_expect(snapcell_session_alive(s));
	expect_session_out(s, "print(x)", "7\n");
	/* Fresh runs on the sandbox were never affected. */
	res = test_run(sb, "print('fresh')");
	expect_ok(res);
	snapcell_result_free(res);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

Test(session, output_limit_and_tools_work_in_sessions)
{
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_STDOUT_BYTES, 1000, NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s, "print('a' * 10)", "aaaaaaaaaa\n");
	free(session_out(s, "print('a' * 5000)", SNAPCELL_STATUS_OUTPUT_LIMIT));
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

Test(session, freeing_the_sandbox_ends_sessions_and_snapshots)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	struct snapcell_snapshot *snap = snapshot(s);
	snapcell_sandbox_free(sb);
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_session_run(s, "print(1)", SIZE_MAX, NULL, &res, &err),
		     SNAPCELL_E_TEMPLATE);
	cr_expect(strstr(err.message, "sandbox was freed"), "%s", err.message);
	struct snapcell_session *b = NULL;
	cr_expect_eq(snapcell_snapshot_new_session(snap, &b, &err), SNAPCELL_E_TEMPLATE);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
}

Test(session, snapshot_from_another_family_is_refused)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s1 = new_session(sb), *s2 = new_session(sb);
	struct snapcell_snapshot *snap = snapshot(s1);
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_session_restore(s2, snap, &err), SNAPCELL_E_INVAL);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s1);
	snapcell_session_free(s2);
	snapcell_sandbox_free(sb);
}

Test(session, a_kill_takes_the_workers_children_and_spares_its_branches, .timeout = 30)
{
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 1000, NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_session *a = new_session(sb), *b = NULL;
	/* Children that hold the worker's stdout, as a process pool would; one of them has left
	 * the worker's process group, so the kill cannot reach it. */
	expect_session_out(a,
			   "import os, time\nx = 3\nif os.fork() == 0:\n    time.sleep(100)\n"
			   "if os.fork() == 0:\n    os.setsid()\n    time.sleep(100)\n",
			   "");
	struct snapcell_snapshot *snap = snapshot(a);
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_snapshot_new_session(snap, &b, &err), 0, "%s", err.message);
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_session_run(a, "while True: pass", SIZE_MAX, NULL, &res, &err), 0);
	cr_expect_eq(res->status, SNAPCELL_STATUS_TIMEOUT);
	cr_expect_lt(res->wall_us, 2500000, "ended at the limit, not by the family's end: %llu",
		     (unsigned long long)res->wall_us);
	snapcell_result_free(res);
	expect_session_out(b, "print(x)", "3\n");
	cr_assert_eq(snapcell_session_restore(a, snap, &err), 0, "%s", err.message);
	expect_session_out(a, "print(x + 1)", "4\n");
	snapcell_snapshot_free(snap);
	snapcell_session_free(a);
	snapcell_session_free(b);
	snapcell_sandbox_free(sb);
}
