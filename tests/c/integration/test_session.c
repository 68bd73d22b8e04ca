/* Sessions and snapshots: state kept between runs, snapshot/restore, branching, failures. */
#include "helpers.h"

#include <linux/capability.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>

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

/* A new session from snap (a branch). */
static struct snapcell_session *branch(struct snapcell_snapshot *snap)
{
	struct snapcell_session *b = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_snapshot_new_session(snap, &b, &err), 0, "%s", err.message);
	return b;
}

static void restore(struct snapcell_session *s, struct snapcell_snapshot *snap)
{
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_restore(s, snap, &err), 0, "%s", err.message);
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
	restore(s, snap);
	expect_session_out(s, "print(x, data, 'y' in globals())", "1 {'a': 1} False\n");
	/* A snapshot can be restored again: restoring does not consume it. */
	expect_session_out(s, "x = 99", "");
	restore(s, snap);
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
	struct snapcell_session *a = branch(snap), *b = branch(snap);
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
	restore(s, snap);
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

/* The refusal leaves both sessions as they were: each still runs, with its own state. */
Test(session, snapshot_from_another_family_is_refused)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s1 = new_session(sb), *s2 = new_session(sb);
	expect_session_out(s1, "x = 1", "");
	expect_session_out(s2, "x = 2", "");
	struct snapcell_snapshot *snap = snapshot(s1);
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_session_restore(s2, snap, &err), SNAPCELL_E_INVAL);
	expect_session_out(s2, "print(x)", "2\n");
	expect_session_out(s1, "print(x)", "1\n");
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
	struct snapcell_session *a = new_session(sb);
	/* Children that hold the worker's stdout, as a process pool would; one of them has left
	 * the worker's process group, so the kill cannot reach it. */
	expect_session_out(a,
			   "import os, time\nx = 3\nif os.fork() == 0:\n    time.sleep(100)\n"
			   "if os.fork() == 0:\n    os.setsid()\n    time.sleep(100)\n",
			   "");
	struct snapcell_snapshot *snap = snapshot(a);
	struct snapcell_session *b = branch(snap);
	struct snapcell_error err = {0};
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_session_run(a, "while True: pass", SIZE_MAX, NULL, &res, &err), 0);
	cr_expect_eq(res->status, SNAPCELL_STATUS_TIMEOUT);
	/* The family sleeps 100 s; a run that gives up on it does so 5 s after the kill. */
	cr_expect_lt(res->wall_us, 5500000, "ended at the limit, not by the family's end: %llu",
		     (unsigned long long)res->wall_us);
	snapcell_result_free(res);
	expect_session_out(b, "print(x)", "3\n");
	restore(a, snap);
	expect_session_out(a, "print(x + 1)", "4\n");
	snapcell_snapshot_free(snap);
	snapcell_session_free(a);
	snapcell_session_free(b);
	snapcell_sandbox_free(sb);
}

/* Item 7: a process left from an earlier run wrote into /output (and /tmp) between runs, so
 * the next run collected files no run of it made. It then went on writing
 * during the next run, which reported files it never wrote. Between runs the whole family is
 * stopped (whatever process group or session its processes moved to), and a turn continues
 * only the process it is for: what a run left never runs again. */
Test(session, a_process_a_run_left_never_runs_again, .timeout = 60)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(
		snapcell_session_run(s,
				     "import os, time\n"
				     "if os.fork() == 0:\n"
				     "    os.setsid()\n"
				     "    while True:\n"
				     "        open(f'/output/{time.monotonic_ns()}', 'w').close()\n"
				     "        time.sleep(0.002)\n"
				     "time.sleep(0.1)\n",
				     SIZE_MAX, NULL, &res, &err),
		0, "%s", err.message);
	expect_ok(res);
	cr_expect_gt(res->n_artifacts, 0, "the writer ran during its run");
	snapcell_result_free(res);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(snapcell_session_run(s, "import time\ntime.sleep(0.3)\n", SIZE_MAX,
						  NULL, &res, &err),
			     0, "%s", err.message);
		expect_ok(res);
		cr_expect_eq(res->n_artifacts, 0, "run %d reported %zu files it never wrote", i + 2,
			     res->n_artifacts);
		snapcell_result_free(res);
	}
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* A process a branch left kept rewriting its sibling's /tmp while the
 * sibling ran (2 of 4 tries). The race is run many times. */
Test(session, a_branchs_leftover_never_writes_its_siblings_tmp, .timeout = 120)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s, "import os, time", "");
	struct snapcell_snapshot *snap = snapshot(s);
	for (int i = 0; i < 20; i++) {
		struct snapcell_session *a = branch(snap), *b = branch(snap);
		expect_session_out(a,
				   "if os.fork() == 0:\n"
				   "    os.setsid()\n"
				   "    n = 0\n"
				   "    while True:\n"
				   "        n += 1\n"
				   "        try:\n"
				   "            open('/tmp/counter', 'w').write(str(n))\n"
				   "        except OSError:\n"
				   "            pass\n"
				   "        time.sleep(0.001)\n"
				   "time.sleep(0.02)\n",
				   "");
		expect_session_out(b,
				   "def read():\n"
				   "    try:\n"
				   "        return open('/tmp/counter').read()\n"
				   "    except OSError:\n"
				   "        return None\n"
				   "first = read()\n"
				   "time.sleep(0.05)\n"
				   "print(first, read())\n",
				   "None None\n");
		snapcell_session_free(a);
		snapcell_session_free(b);
	}
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* Item 7: a snapshot is the whole state a run can see. Restoring it brought back the
 * interpreter but left /tmp as the session had changed it since (and the working directory
 * pointing into that). */
Test(session, a_snapshot_keeps_its_tmp_and_working_directory)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s,
			   "import os\n"
			   "open('/tmp/a.txt', 'w').write('at the snapshot')\n"
			   "os.mkdir('/tmp/work')\n"
			   "os.chdir('/tmp/work')\n"
			   "open('b.txt', 'w').write('b')\n"
			   "os.symlink('../a.txt', 'link')\n",
			   "");
	struct snapcell_snapshot *snap = snapshot(s);
	expect_session_out(s,
			   "import shutil\n"
			   "open('/tmp/a.txt', 'w').write('changed')\n"
			   "open('/tmp/c.txt', 'w').write('new')\n"
			   "os.chdir('/')\n"
			   "shutil.rmtree('/tmp/work')\n",
			   "");
	restore(s, snap);
	expect_session_out(
		s,
		"print(os.getcwd(), sorted(os.listdir('/tmp')), sorted(os.listdir('.')))\n"
		"print(open('/tmp/a.txt').read(), open('link').read())\n",
		"/tmp/work ['a.txt', 'work'] ['b.txt', 'link']\n"
		"at the snapshot at the snapshot\n");
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* Item 7: branches of one snapshot shared one /tmp, so each saw what the other wrote. */
Test(session, branches_each_have_their_own_tmp)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s, "import os\nopen('/tmp/base', 'w').close()", "");
	struct snapcell_snapshot *snap = snapshot(s);
	struct snapcell_session *a = branch(snap), *b = branch(snap);
	/* A file a branch keeps open stays its own while the others run. */
	expect_session_out(a, "f = open('/tmp/a', 'w')\nf.write('a1')\nf.flush()", "");
	expect_session_out(b, "print(sorted(os.listdir('/tmp')))\nopen('/tmp/b', 'w').close()",
			   "['base']\n");
	expect_session_out(s, "print(sorted(os.listdir('/tmp')))\nos.remove('/tmp/base')",
			   "['base']\n");
	expect_session_out(a, "f.write('a2')\nf.flush()\nprint(sorted(os.listdir('/tmp')))",
			   "['a', 'base']\n");
	expect_session_out(b, "print(sorted(os.listdir('/tmp')))", "['b', 'base']\n");
	expect_session_out(a, "print(open('/tmp/a').read())", "a1a2\n");
	expect_session_out(s, "print(os.listdir('/tmp'))", "[]\n");
	snapcell_session_free(a);
	snapcell_session_free(b);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* The copies share the family's one /tmp size limit: a snapshot that does not fit fails with
 * a clear error, and the session goes on. */
Test(session, a_snapshot_whose_tmp_does_not_fit_fails_clearly)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_TMP_BYTES, 8u << 20, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s, "open('/tmp/big', 'wb').write(b'x' * (5 << 20))", "");
	struct snapcell_snapshot *snap = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_snapshot(s, &snap, &err), -ENOSPC, "%s", err.message);
	cr_expect(strstr(err.message, "no room in the family's /tmp"), "%s", err.message);
	expect_session_out(s, "import os\nprint(os.path.getsize('/tmp/big'), os.listdir('/tmp'))",
			   "5242880 ['big']\n");
	expect_session_out(s, "os.remove('/tmp/big')\nopen('/tmp/small', 'w').write('s')", "");
	snap = snapshot(s);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* A directory the code made read-only still moves aside when a sibling branch runs (moving a
 * directory rewrites its ".."), and a freed branch's leaves nothing for the next. */
Test(session, read_only_directories_in_tmp_move_with_their_session)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	struct snapcell_snapshot *snap = snapshot(s);
	struct snapcell_session *b = branch(snap);
	expect_session_out(s,
			   "import os\nos.mkdir('/tmp/ro')\nopen('/tmp/ro/f', 'w').write('kept')\n"
			   "os.chmod('/tmp/ro', 0o555)",
			   "");
	expect_session_out(b, "import os\nprint(os.listdir('/tmp'))", "[]\n");
	expect_session_out(s, "print(open('/tmp/ro/f').read(), oct(os.stat('/tmp/ro').st_mode))",
			   "kept 0o40555\n");
	snapcell_session_free(s);
	expect_session_out(b, "print(os.listdir('/tmp'))", "[]\n");
	snapcell_session_free(b);
	snapcell_snapshot_free(snap);
	snapcell_sandbox_free(sb);
}

/* Code that uses up its /tmp's inodes (every file and directory is one, and every session's
 * and snapshot's tree shares them) cannot end its family: the sibling branch still runs with
 * its own /tmp, and the filler finds its files where it left them. */
Test(session, a_tmp_out_of_inodes_does_not_end_the_family, .timeout = 60)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_TMP_BYTES, 1u << 20, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_session *s = new_session(sb);
	struct snapcell_snapshot *snap = snapshot(s);
	struct snapcell_session *b = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_snapshot_new_session(snap, &b, &err), 0, "%s", err.message);
	expect_session_out(s,
			   "import os\nn = 0\n"
			   "try:\n"
			   "    while True:\n"
			   "        open('/tmp/f%d' % n, 'w').close()\n"
			   "        n += 1\n"
			   "except OSError as e:\n"
			   "    print(e.errno == 28, n > 100)",
			   "True True\n");
	expect_session_out(b, "import os\nprint(os.listdir('/tmp'))", "[]\n");
	expect_session_out(s, "print(len(os.listdir('/tmp')) == n)", "True\n");
	cr_expect(snapcell_session_alive(b));
	snapcell_session_free(b);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* The host makes a branch's frame socket, so SO_PEERPIDFD on it (or
 * SO_PASSPIDFD, then a frame from the host) gave the code a live pidfd for the host process.
 * Every socket the code holds is tried, in a first session and in a branch. */
Test(session, no_socket_gives_a_pidfd_of_its_peer)
{
	static const char probe[] =
		"import os, socket, stat\n"
		"got, types = [], set()\n"
		"for fd in range(1024):\n"
		"    try:\n"
		"        if not stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
		"            continue\n"
		"    except OSError:\n"
		"        continue\n"
		"    s = socket.socket(fileno=os.dup(fd))\n"
		"    types.add(s.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE))\n"
		"    for call in (lambda: s.getsockopt(socket.SOL_SOCKET, 77),\n"
		"                 lambda: s.setsockopt(socket.SOL_SOCKET, 76, 1)):\n"
		"        try:\n"
		"            got.append((fd, call()))\n"
		"        except OSError as e:\n"
		"            if e.errno != 92:\n"
		"                got.append((fd, e.errno))\n"
		"    s.close()\n"
		"print(got, types)\n";
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = new_session(sb);
	expect_session_out(s, probe, "[] {1}\n");
	struct snapcell_snapshot *snap = snapshot(s);
	struct snapcell_session *b = branch(snap);
	expect_session_out(b, probe, "[] {1}\n");
	restore(s, snap);
	expect_session_out(s, probe, "[] {1}\n");
	snapcell_session_free(b);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* The calling thread's file-system ids: setfsuid answers with the current one when asked for an
 * id it refuses. */
static unsigned fsuid_now(void)
{
	return (unsigned)setfsuid((uid_t)-1);
}

static unsigned fsgid_now(void)
{
	return (unsigned)setfsgid((gid_t)-1);
}

#define expect_fs_ids(uid, gid, when)                                                              \
	do {                                                                                       \
		cr_expect_eq(fsuid_now(), (uid), "fsuid %u after %s", fsuid_now(), (when));        \
		cr_expect_eq(fsgid_now(), (gid), "fsgid %u after %s", fsgid_now(), (when));        \
	} while (0)

/* Session operations move /tmp trees with the sandbox user's file-system ids, then give the
 * calling thread back the ones it had: here ids of its own choosing, not its effective ones
 * (first both, then only the gid: copying a snapshot's tree needs root's fsuid to read it). */
Test(session, operations_give_the_thread_back_its_own_file_system_ids, .timeout = 60)
{
	if (geteuid() != 0)
		criterion_skip_test("choosing other file-system ids needs root");
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	setfsgid(4242);
	setfsuid(4242);
	expect_fs_ids(4242u, 4242u, "setfsuid");
	struct snapcell_session *s = new_session(sb);
	expect_fs_ids(4242u, 4242u, "session_new");
	expect_session_out(s, "open('/tmp/a', 'w').write('1'); print('ok')", "ok\n");
	struct snapcell_snapshot *snap = snapshot(s);
	expect_fs_ids(4242u, 4242u, "snapshot");
	setfsuid(0);
	struct snapcell_session *b = branch(snap);
	expect_fs_ids(0u, 4242u, "snapshot_new_session");
	expect_session_out(b, "print(open('/tmp/a').read())", "1\n");
	expect_session_out(s, "print(open('/tmp/a').read())", "1\n"); /* switches the trees */
	expect_fs_ids(0u, 4242u, "session_run");
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_session_restore(s, snap, &err), 0, "%s", err.message);
	expect_fs_ids(0u, 4242u, "session_restore");
	snapcell_session_free(b);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	expect_fs_ids(0u, 4242u, "session_free");
	setfsgid(0);
	snapcell_sandbox_free(sb);
}

/* This thread's effective capabilities, with setuid and setgid on or off (they stay
 * permitted). */
static void thread_can_set_ids(bool on)
{
	struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct d[2];
	cr_assert_eq(syscall(SYS_capget, &h, d), 0, "%s", strerror(errno));
	uint32_t bits = 1u << CAP_SETUID | 1u << CAP_SETGID;
	d[0].effective = on ? d[0].effective | bits : d[0].effective & ~bits;
	cr_assert_eq(syscall(SYS_capset, &h, d), 0, "%s", strerror(errno));
}

/* A thread that may not take the sandbox user's ids gets a clear error, and its ids as they
 * were, instead of /tmp trees made as itself. */
Test(session, a_thread_that_cannot_take_the_sandbox_users_ids_is_refused, .timeout = 60)
{
	if (geteuid() != 0)
		criterion_skip_test("a caller that is not root runs sessions as its own ids");
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	thread_can_set_ids(false);
	struct snapcell_session *s = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_session_new(sb, &s, &err), -EPERM, "%s", err.message);
	cr_expect(strstr(err.message, "file-system ids"), "%s", err.message);
	expect_fs_ids(0u, 0u, "a refused session_new");
	thread_can_set_ids(true);
	s = new_session(sb);
	expect_session_out(s, "print('ok')", "ok\n");
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}
