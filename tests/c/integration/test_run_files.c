#define _GNU_SOURCE
/* Files given for one run (snapcell_run_options.files): read-only at /input beside the
 * workspace, gone for the next run, refused when they clash, break the name rule or the caps,
 * and never a new template. */
#include "helpers.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A sandbox whose workspace holds notes.txt and data/a.csv; ws gets its directory. */
static struct snapcell_sandbox *sandbox_with_workspace(char **wsp)
{
	char *ws = *wsp = test_make_tree();
	test_write_file(ws, "notes.txt", "workspace notes");
	test_write_file(ws, "data/a.csv", "from workspace");
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_workspace(cfg, ws, &err), 0, "%s", err.message);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

static int run_files(struct snapcell_sandbox *sb, const char *code,
		     const struct snapcell_run_file *files, size_t n, struct snapcell_result **res,
		     struct snapcell_error *err)
{
	struct snapcell_run_options opts = {.size = sizeof(opts), .files = files, .n_files = n};
	*res = NULL;
	return snapcell_sandbox_run(sb, code, SIZE_MAX, &opts, res, err);
}

Test(run_files, are_read_only_at_input_for_that_run_only_without_a_new_template)
{
	char *ws, *host = test_make_tree();
	struct snapcell_sandbox *sb = sandbox_with_workspace(&ws);
	if (snapcell_sandbox_isolation(sb) == SNAPCELL_ISOLATION_RLIMITS)
		criterion_skip_test("level rlimits: run files are refused there (suite rlimits)");
	unsigned long long template = test_template_identity(sb);
	test_write_file(host, "big.bin", "from the host");
	char host_file[128];
	snprintf(host_file, sizeof(host_file), "%s/big.bin", host);
	struct snapcell_run_file files[] = {
		{.name = "q.txt", .data = "question\0?", .data_len = 10},
		{.name = "data/b.csv", .data = "b", .data_len = 1},
		{.name = "deep/er/c.bin", .host_path = host_file},
	};
	struct snapcell_result *res;
	struct snapcell_error err = {0};
	cr_assert_eq(
		run_files(sb,
			  "import os\n"
			  "print(repr(open('/input/q.txt','rb').read()),"
			  " open('/input/data/b.csv').read(), open('/input/data/a.csv').read(),"
			  " open('/input/deep/er/c.bin').read(), open('/input/notes.txt').read(),"
			  " sorted(os.listdir('/input/data')))\n"
			  "try:\n    open('/input/q.txt', 'a')\nexcept OSError as e:\n"
			  "    print(type(e).__name__, e.errno)\n"
			  "try:\n    open('/input/new.txt', 'w')\nexcept OSError as e:\n"
			  "    print(type(e).__name__, e.errno)\n",
			  files, 3, &res, &err),
		0, "%s", err.message);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf,
			 "b'question\\x00?' b from workspace from the host workspace notes "
			 "['a.csv', 'b.csv']\nOSError 30\nOSError 30\n");
	snapcell_result_free(res);
	/* The next run has the workspace alone. */
	res = test_run(sb, "import os\nprint(sorted(os.listdir('/input')),"
			   " sorted(os.listdir('/input/data')))");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "['data', 'notes.txt'] ['a.csv']\n");
	snapcell_result_free(res);
	cr_expect_eq(test_template_identity(sb), template, "the same template");
	/* The host's copy is gone once the run ended (seen where the template's root is: the
	 * test runs as root, or as the sandbox's uid). */
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0);
	char out[64];
	snprintf(out, sizeof(out), "/proc/%d/root/.snapcell/out", st.template_pid);
	DIR *d = opendir(out);
	cr_expect(d || geteuid() != 0, "open %s", out);
	for (struct dirent *e; d && (e = readdir(d));)
		cr_expect(strncmp(e->d_name, "in-", 3) != 0, "%s left", e->d_name);
	if (d)
		closedir(d);
	snapcell_sandbox_free(sb);
	test_remove_tree(ws);
	free(ws);
	test_remove_tree(host);
	free(host);
}

Test(run_files, clashes_bad_names_and_oversize_are_refused_before_the_run)
{
	char *ws;
	struct snapcell_sandbox *sb = sandbox_with_workspace(&ws);
	if (snapcell_sandbox_isolation(sb) == SNAPCELL_ISOLATION_RLIMITS)
		criterion_skip_test("level rlimits: run files are refused there (suite rlimits)");
	struct {
		const char *name, *said;
		int code;
	} bad[] = {
		{"notes.txt", "/input/notes.txt is already the workspace's", SNAPCELL_E_INVAL},
		{"data", "/input/data is already the workspace's", SNAPCELL_E_INVAL},
		{"notes.txt/x", "/input/notes.txt is a file of the workspace", SNAPCELL_E_INVAL},
		{"../escape", "'..' part", SNAPCELL_E_INVAL},
		{"a/./b", "'..' part", SNAPCELL_E_INVAL},
		{"a//b", "'..' part", SNAPCELL_E_INVAL},
		{"/etc/passwd", "an absolute name", SNAPCELL_E_INVAL},
		{"", "an empty name", SNAPCELL_E_INVAL},
		{"line\nbreak", "a control byte", SNAPCELL_E_INVAL},
		{"\xff.txt", "not UTF-8", SNAPCELL_E_INVAL},
	};
	struct snapcell_result *res;
	struct snapcell_error err = {0};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct snapcell_run_file f = {.name = bad[i].name, .data = "x", .data_len = 1};
		cr_expect_eq(run_files(sb, "print(1)", &f, 1, &res, &err), bad[i].code, "%s",
			     bad[i].name);
		cr_expect(strstr(err.message, bad[i].said), "%s: %s", bad[i].name, err.message);
		cr_expect_null(res);
	}
	/* Given twice, or a file of the run as another's parent. */
	struct snapcell_run_file twice[] = {{.name = "t", .data = "1", .data_len = 1},
					    {.name = "t", .data = "2", .data_len = 1}};
	cr_expect_eq(run_files(sb, "1", twice, 2, &res, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "given twice"), "%s", err.message);
	struct snapcell_run_file parent[] = {{.name = "p", .data = "1", .data_len = 1},
					     {.name = "p/q", .data = "2", .data_len = 1}};
	cr_expect_eq(run_files(sb, "1", parent, 2, &res, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "another file of the run"), "%s", err.message);
	/* Over the bytes cap, and over the count. */
	static char big[SNAPCELL_RUN_FILES_BYTES_MAX / 2 + 1];
	struct snapcell_run_file two_big[] = {{.name = "a", .data = big, .data_len = sizeof(big)},
					      {.name = "b", .data = big, .data_len = sizeof(big)}};
	cr_expect_eq(run_files(sb, "1", two_big, 2, &res, &err), SNAPCELL_E_TOO_BIG);
	cr_expect(strstr(err.message, "bytes in all"), "%s", err.message);
	static struct snapcell_run_file many[SNAPCELL_RUN_FILES_MAX + 1];
	cr_expect_eq(run_files(sb, "1", many, SNAPCELL_RUN_FILES_MAX + 1, &res, &err),
		     SNAPCELL_E_TOO_BIG);
	/* A link and a directory as host paths. */
	char link[600];
	snprintf(link, sizeof(link), "%s/link", ws);
	cr_assert_eq(symlink("/etc/hostname", link), 0);
	struct snapcell_run_file hosts[] = {{.name = "l", .host_path = link},
					    {.name = "d", .host_path = ws}};
	cr_expect_eq(run_files(sb, "1", hosts, 1, &res, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "a symbolic link"), "%s", err.message);
	cr_expect_eq(run_files(sb, "1", hosts + 1, 1, &res, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "not a regular file"), "%s", err.message);
	/* A FIFO no one writes to: refused at once, not waited on. */
	char fifo[600];
	snprintf(fifo, sizeof(fifo), "%s/fifo", ws);
	cr_assert_eq(mkfifo(fifo, 0644), 0);
	struct snapcell_run_file pipe_file = {.name = "p", .host_path = fifo};
	cr_expect_eq(run_files(sb, "1", &pipe_file, 1, &res, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "not a regular file"), "%s", err.message);
	/* After all that the sandbox runs as before. */
	res = test_run(sb, "import os\nprint(sorted(os.listdir('/input')))");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "['data', 'notes.txt']\n");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	test_remove_tree(ws);
	free(ws);
}

Test(run_files, a_session_and_a_resume_refuse_them)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	struct snapcell_run_file f = {.name = "a", .data = "x", .data_len = 1};
	struct snapcell_run_options opts = {.size = sizeof(opts), .files = &f, .n_files = 1};
	struct snapcell_result *res = NULL;
	cr_expect_eq(snapcell_session_run(s, "1", SIZE_MAX, &opts, &res, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "a session's runs take no files"), "%s", err.message);
	cr_assert_eq(snapcell_session_run(s, "x = 1", SIZE_MAX, NULL, &res, &err), 0, "%s",
		     err.message);
	expect_ok(res);
	snapcell_result_free(res);
	cr_expect_eq(snapcell_sandbox_resume(sb, 1, SNAPCELL_VERDICT_APPROVED, NULL, NULL, &opts,
					     &res, &err),
		     SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "files are given when it starts"), "%s", err.message);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

static int answer(void *user, const char *args, char **result)
{
	*result = strdup("\"approved\"");
	return 0;
}

/* A run paused at a call keeps its files until the resume ends it. */
Test(run_files, a_paused_run_keeps_them_until_it_ends)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "ask", NULL, NULL, SNAPCELL_APPROVAL_NEVER,
					      answer, NULL, NULL),
		     0);
	cr_assert_eq(snapcell_config_set_tool_decision(cfg, "ask", true, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	if (snapcell_sandbox_isolation(sb) == SNAPCELL_ISOLATION_RLIMITS)
		criterion_skip_test("level rlimits: run files are refused there (suite rlimits)");
	struct snapcell_run_file f = {.name = "kept.txt", .data = "still here", .data_len = 10};
	struct snapcell_result *res;
	struct snapcell_error err = {0};
	cr_assert_eq(
		run_files(sb, "tools.ask()\nopen('/input/kept.txt').read()", &f, 1, &res, &err), 0,
		"%s", err.message);
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "%s", res->stderr_buf);
	uint64_t id = res->pending->id;
	snapcell_result_free(res);
	/* Another run meanwhile, with files of its own, and one without. */
	struct snapcell_run_file g = {.name = "other.txt", .data = "other", .data_len = 5};
	cr_assert_eq(run_files(sb, "import os\nsorted(os.listdir('/input'))", &g, 1, &res, &err), 0,
		     "%s", err.message);
	cr_expect_str_eq(res->value_json, "[\"other.txt\"]");
	snapcell_result_free(res);
	cr_assert_eq(snapcell_sandbox_resume(sb, id, SNAPCELL_VERDICT_APPROVED, NULL, NULL, NULL,
					     &res, &err),
		     0, "%s", err.message);
	expect_ok(res);
	cr_expect_str_eq(res->value_json, "\"still here\"");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

struct peer {
	struct snapcell_sandbox *sb;
	const char *name;
	char seen[256];
};

static void *run_peer(void *arg)
{
	struct peer *p = arg;
	struct snapcell_run_file f = {
		.name = p->name, .data = p->name, .data_len = strlen(p->name)};
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	/* Each looks for the other's files while both cells live, there and where the host
	 * keeps them. */
	int rc = run_files(p->sb,
			   "import os, time\ntime.sleep(0.3)\n"
			   "print(sorted(os.listdir('/input')), os.listdir('/.snapcell/out'))",
			   &f, 1, &res, &err);
	snprintf(p->seen, sizeof(p->seen), "%s", rc == 0 ? res->stdout_buf : err.message);
	snapcell_result_free(res);
	return NULL;
}

/* Two runs at once, each with its own files: neither sees the other's. */
Test(run_files, concurrent_runs_see_only_their_own)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	if (snapcell_sandbox_isolation(sb) == SNAPCELL_ISOLATION_RLIMITS)
		criterion_skip_test("level rlimits: run files are refused there (suite rlimits)");
	struct peer a = {sb, "alpha.txt", ""}, b = {sb, "beta.txt", ""};
	pthread_t ta, tb;
	cr_assert_eq(pthread_create(&ta, NULL, run_peer, &a), 0);
	cr_assert_eq(pthread_create(&tb, NULL, run_peer, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	cr_expect_str_eq(a.seen, "['alpha.txt'] []\n");
	cr_expect_str_eq(b.seen, "['beta.txt'] []\n");
	snapcell_sandbox_free(sb);
}

/* A run in a thread of its own, with one file or none, that says when it blocked. */
struct waiter {
	struct snapcell_sandbox *sb;
	const char *code;
	struct snapcell_run_file file; /* name NULL: no files */
	_Atomic int tid;
	_Atomic bool done;
	int rc;
	struct snapcell_result *res;
	struct snapcell_error err;
	pthread_t thread;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	w->tid = (int)syscall(SYS_gettid);
	w->rc = run_files(w->sb, w->code, &w->file, w->file.name ? 1 : 0, &w->res, &w->err);
	w->done = true;
	return NULL;
}

static void waiter_start(struct waiter *w, bool blocks)
{
	cr_assert_eq(pthread_create(&w->thread, NULL, waiter_main, w), 0);
	if (!blocks)
		return;
	uint64_t give_up = test_now_ms() + 10000;
	while (!(w->tid && test_thread_asleep(w->tid)) && !w->done && test_now_ms() < give_up)
		test_pause_ms(2);
	cr_assert(!w->done, "the run did not wait for the stopped template: %s",
		  w->rc ? w->err.message : "it ran");
	cr_assert(test_thread_asleep(w->tid), "the run never blocked");
}

/* The lock is not held while a run with files waits for the template's answer: with the
 * template stopped, a run with files and one without wait for a cell, and a run with files
 * that has its cell ends (and retires it) meanwhile instead of queueing behind them; once the
 * template goes on, each waiter gets its own cell. */
Test(run_files, a_run_with_files_ends_while_other_threads_wait_for_a_slow_template, .timeout = 120)
{
	struct snapcell_config *cfg = test_config_new();
	struct test_gate g;
	test_gate_add(cfg, &g, true);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	if (snapcell_sandbox_isolation(sb) == SNAPCELL_ISOLATION_RLIMITS)
		criterion_skip_test("level rlimits: run files are refused there (suite rlimits)");
	struct waiter held = {.sb = sb,
			      .code = "tools.gate()\nprint(open('/input/held.txt').read())",
			      .file = {.name = "held.txt", .data = "held", .data_len = 4}};
	waiter_start(&held, false);
	test_gate_wait(&g); /* held has the cell forked for it */
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0); /* both spares parked */
	test_wait_cells_parked(st.template_pid); /* with reuse on, at their parked stops */
	cr_assert_eq(kill(st.template_pid, SIGSTOP), 0);
	struct waiter spare1 = {.sb = sb, .code = "print(1)"}, spare2 = {.sb = sb, .code = "2"};
	waiter_start(&spare1, false);
	waiter_start(&spare2, false);
	pthread_join(spare1.thread, NULL); /* the spares need no template */
	pthread_join(spare2.thread, NULL);
	cr_assert_eq(spare1.rc, 0, "%s", spare1.err.message);
	cr_assert_eq(spare2.rc, 0, "%s", spare2.err.message);
	snapcell_result_free(spare1.res);
	snapcell_result_free(spare2.res);
	struct waiter with = {.sb = sb,
			      .code = "import os\nsorted(os.listdir('/input'))",
			      .file = {.name = "mine.txt", .data = "m", .data_len = 1}};
	struct waiter without = {.sb = sb, .code = "print('a')"};
	waiter_start(&with, true);
	waiter_start(&without, true);
	uint64_t released = test_now_ms();
	sem_post(&g.open);
	pthread_join(held.thread, NULL);
	uint64_t took = test_now_ms() - released;
	cr_assert_eq(held.rc, 0, "%s", held.err.message);
	expect_ok(held.res);
	cr_expect_str_eq(held.res->stdout_buf, "held\n");
	snapcell_result_free(held.res);
	/* Not behind them: they wait 20 s for a cell before they give up. */
	cr_expect_lt(took, 15000, "the run took %llu ms to end behind the waiting threads",
		     (unsigned long long)took);
	cr_expect(!with.done && !without.done, "a cell came from a stopped template");
	cr_assert_eq(kill(st.template_pid, SIGCONT), 0);
	pthread_join(with.thread, NULL);
	pthread_join(without.thread, NULL);
	cr_assert_eq(with.rc, 0, "%s", with.err.message);
	expect_ok(with.res);
	cr_expect_str_eq(with.res->value_json, "[\"mine.txt\"]");
	snapcell_result_free(with.res);
	cr_assert_eq(without.rc, 0, "%s", without.err.message);
	expect_ok(without.res);
	cr_expect_str_eq(without.res->stdout_buf, "a\n");
	snapcell_result_free(without.res);
	snapcell_sandbox_free(sb);
}

/* The processes under pid (the helper: the template, its parked cells, and cells of runs not
 * yet gone), or -1 without /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN). */
static int descendants(int pid)
{
	char path[96], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	int count = 0, child;
	for (char *p = buf; sscanf(p, "%d%n", &child, &(int){0}) == 1;) {
		int below = descendants(child);
		count += 1 + (below > 0 ? below : 0);
		p = strchr(p, ' ');
		if (!p)
			break;
		p++;
	}
	return count;
}

/* A run with files that gave up waiting for its cell (the template stopped for 20 s) leaves
 * nothing behind: the cell the template forks for it later is killed, and the next run with
 * files gets its own cell, not that one. */
Test(run_files, a_run_that_gave_up_on_its_cell_leaves_none_behind, .timeout = 120)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	if (snapcell_sandbox_isolation(sb) == SNAPCELL_ISOLATION_RLIMITS)
		criterion_skip_test("level rlimits: run files are refused there (suite rlimits)");
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0); /* both spares parked */
	int before = descendants(st.template_pid), fds_before = test_open_fds();
	cr_assert_eq(kill(st.template_pid, SIGSTOP), 0);
	struct snapcell_run_file a = {.name = "a.txt", .data = "a", .data_len = 1};
	struct snapcell_result *res;
	struct snapcell_error err = {0};
	uint64_t start = test_now_ms();
	cr_expect_eq(run_files(sb, "print(1)", &a, 1, &res, &err), SNAPCELL_E_TEMPLATE);
	cr_expect(strstr(err.message, "no cell from the template"), "%s", err.message);
	cr_expect_geq(test_now_ms() - start, 19000);
	cr_assert_eq(kill(st.template_pid, SIGCONT), 0);
	struct snapcell_run_file b = {.name = "b.txt", .data = "b", .data_len = 1};
	cr_assert_eq(run_files(sb, "import os\nsorted(os.listdir('/input'))", &b, 1, &res, &err), 0,
		     "%s", err.message);
	expect_ok(res);
	cr_expect_str_eq(res->value_json, "[\"b.txt\"]");
	snapcell_result_free(res);
	/* Retired cells keep their pidfd until a later run finds them gone; that run's own
	 * stays. Each run changes its working directory, so that with reuse on its cell is
	 * retired too (not reset in place, which keeps it by design). */
	uint64_t give_up = test_now_ms() + 10000;
	do
		expect_output(sb, "import os\nos.chdir('/output')\nprint(3)", "3\n");
	while (snapcell_sandbox_stats(sb, &st, NULL) == 0 && test_open_fds() > fds_before + 1 &&
	       test_now_ms() < give_up && test_pause_ms(20) == 0);
	cr_expect_eq(test_open_fds(), fds_before + 1, "the late cell's descriptors were kept");
	if (before < 0)
		criterion_skip_test("no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN)");
	/* The runs' cells are killed: as many processes as before them stay. */
	give_up = test_now_ms() + 10000;
	while (descendants(st.template_pid) > before && test_now_ms() < give_up)
		test_pause_ms(20);
	cr_expect_eq(descendants(st.template_pid), before, "a cell outlived its run");
	snapcell_sandbox_free(sb);
}
