/* Outside uids of a root caller's sandboxes: one per live sandbox from the configured range,
 * reserved across processes, taken again once freed, and separate per-user kernel quotas. */
#define _GNU_SOURCE
#include "helpers.h"

#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* Ranges of their own, outside the default one, so tests running at once never meet. */
#define RANGE_ONE    2100000000u
#define RANGE_SHARED 2100000010u
#define RANGE_CHILD  2100000020u
#define RANGE_ORPHAN 2100000030u

static void require_root(void)
{
	if (geteuid() != 0)
		criterion_skip_test("outside uid ranges apply only when the caller is root");
}

/* The template's outside uid and gid, from the host's /proc. */
static void template_ids(struct snapcell_sandbox *sb, unsigned *uid, unsigned *gid)
{
	struct snapcell_sandbox_stats st;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, &err), 0, "%s", err.message);
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", st.template_pid);
	FILE *f = fopen(path, "re");
	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	*uid = *gid = 0;
	while (fgets(line, sizeof(line), f)) {
		sscanf(line, "Uid: %u", uid);
		sscanf(line, "Gid: %u", gid);
	}
	fclose(f);
	cr_assert_neq(*uid, 0, "no Uid in %s", path);
}

static struct snapcell_config *range_config(uint32_t first, uint32_t count)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_uid_range(cfg, first, count, &err), 0, "%s", err.message);
	return cfg;
}

/* Whether this process's user namespace maps the default range (in a container it may not,
 * and the default then falls back to 65534). */
static bool default_range_mapped(void)
{
	FILE *f = fopen("/proc/self/uid_map", "re");
	unsigned long in, out, len;
	bool ok = false;
	while (f && !ok && fscanf(f, "%lu %lu %lu", &in, &out, &len) == 3)
		ok = in <= SNAPCELL_UID_RANGE_FIRST &&
		     (uint64_t)SNAPCELL_UID_RANGE_FIRST + SNAPCELL_UID_RANGE_COUNT <= in + len;
	if (f)
		fclose(f);
	return ok;
}

Test(uids, live_sandboxes_have_their_own_uid_from_the_default_range)
{
	require_root();
	if (!default_range_mapped())
		test_skip_or_fail("this user namespace does not map the default uid range");
	struct snapcell_sandbox *a = test_sandbox(NULL), *b = test_sandbox(NULL);
	unsigned ua, ga, ub, gb;
	template_ids(a, &ua, &ga);
	template_ids(b, &ub, &gb);
	cr_expect_neq(ua, ub, "two live sandboxes share outside uid %u", ua);
	cr_expect_eq(ga, ua, "gid %u for uid %u", ga, ua);
	cr_expect_eq(gb, ub, "gid %u for uid %u", gb, ub);
	for (int i = 0; i < 2; i++) {
		unsigned u = i ? ub : ua;
		cr_expect(u >= SNAPCELL_UID_RANGE_FIRST &&
				  u - SNAPCELL_UID_RANGE_FIRST < SNAPCELL_UID_RANGE_COUNT,
			  "uid %u outside the default range", u);
		char lock[64];
		snprintf(lock, sizeof(lock), "/run/snapcell/uids/%u", u);
		cr_expect_eq(access(lock, F_OK), 0, "%s: %s", lock, strerror(errno));
	}
	/* The /output mount points belong to each sandbox's own uid. */
	expect_output(a, "open('/output/a.txt', 'w').write('a'); print('ok')", "ok\n");
	expect_output(b, "open('/output/b.txt', 'w').write('b'); print('ok')", "ok\n");
	snapcell_sandbox_free(a);
	snapcell_sandbox_free(b);
}

Test(uids, a_range_of_one_refuses_a_second_sandbox_until_the_first_is_freed)
{
	require_root();
	struct snapcell_config *cfg = range_config(RANGE_ONE, 1);
	struct snapcell_sandbox *a = test_sandbox(cfg), *b = NULL;
	unsigned ua, ga;
	template_ids(a, &ua, &ga);
	cr_expect_eq(ua, RANGE_ONE);
	cr_expect_eq(ga, RANGE_ONE);
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_sandbox_new(cfg, &b, &err), SNAPCELL_E_EXHAUSTED, "%s", err.message);
	cr_expect_null(b);
	cr_expect(strstr(err.message, "2100000000..2100000000") != NULL, "%s", err.message);
	snapcell_sandbox_free(a);
	/* Freed: its uid is free again. */
	b = test_sandbox(cfg);
	unsigned ub, gb;
	template_ids(b, &ub, &gb);
	cr_expect_eq(ub, RANGE_ONE);
	expect_output(b, "print(1)", "1\n");
	snapcell_sandbox_free(b);
	snapcell_config_free(cfg);
}

Test(uids, count_zero_runs_every_sandbox_as_first)
{
	require_root();
	struct snapcell_config *cfg = range_config(RANGE_SHARED, 0);
	struct snapcell_sandbox *a = test_sandbox(cfg), *b = test_sandbox(cfg);
	unsigned ua, ga, ub, gb;
	template_ids(a, &ua, &ga);
	template_ids(b, &ub, &gb);
	cr_expect_eq(ua, RANGE_SHARED);
	cr_expect_eq(ub, RANGE_SHARED);
	snapcell_sandbox_free(a);
	snapcell_sandbox_free(b);
	snapcell_config_free(cfg);
}

/* A child process that makes a sandbox of cfg and keeps it until killed; its pid, with the
 * sandbox's template pid in *template. */
static pid_t hold_sandbox(const struct snapcell_config *cfg, int *template)
{
	int ready[2];
	cr_assert_eq(pipe(ready), 0);
	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		struct snapcell_sandbox *sb = NULL;
		struct snapcell_sandbox_stats st = {0};
		int pid = snapcell_sandbox_new(cfg, &sb, NULL) == 0 &&
					  snapcell_sandbox_stats(sb, &st, NULL) == 0
				  ? st.template_pid
				  : -1;
		(void)!write(ready[1], &pid, sizeof(pid));
		pause();
		_exit(0);
	}
	close(ready[1]);
	*template = -1;
	cr_assert_eq(read(ready[0], template, sizeof(*template)), (ssize_t)sizeof(*template));
	close(ready[0]);
	cr_assert_gt(*template, 0, "the child could not make its sandbox");
	return child;
}

/* The reservation holds across processes, and a process that dies without freeing its
 * sandbox (SIGKILL) gives its uid back once its template is gone. */
Test(uids, another_process_holds_its_uid_until_it_dies)
{
	require_root();
	struct snapcell_config *cfg = range_config(RANGE_CHILD, 1);
	int template;
	pid_t child = hold_sandbox(cfg, &template);
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_sandbox_new(cfg, &sb, &err), SNAPCELL_E_EXHAUSTED, "%s", err.message);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	/* Free once the orphaned template has seen EOF and exited, its cells with it. */
	int rc = SNAPCELL_E_EXHAUSTED;
	for (int i = 0; i < 500 && rc == SNAPCELL_E_EXHAUSTED; i++)
		if ((rc = snapcell_sandbox_new(cfg, &sb, &err)) == SNAPCELL_E_EXHAUSTED)
			usleep(10000);
	cr_assert_eq(rc, 0, "%s", err.message);
	unsigned u, g;
	template_ids(sb, &u, &g);
	cr_expect_eq(u, RANGE_CHILD);
	snapcell_sandbox_free(sb);
	snapcell_config_free(cfg);
}

/* The kernel drops a dead process's lock at once, but its template (and the cells, which die
 * after it) may still be running as the uid: exiting on EOF takes as long as the template is
 * slow to see it, here for ever as it is stopped. No other sandbox may take the uid until
 * that template is gone. */
Test(uids, a_dead_processs_uid_stays_taken_while_its_template_lives)
{
	require_root();
	struct snapcell_config *cfg = range_config(RANGE_ORPHAN, 1);
	int template;
	pid_t child = hold_sandbox(cfg, &template);
	cr_assert_eq(kill(template, SIGSTOP), 0, "%s", strerror(errno));
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_sandbox_new(cfg, &sb, &err), SNAPCELL_E_EXHAUSTED,
		     "a sandbox took the uid of a live template: %s", err.message);
	if (sb)
		snapcell_sandbox_free(sb);
	/* Gone (a zombie at most, all its namespace dead): the uid is free again. */
	kill(template, SIGKILL);
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", template);
	for (int i = 0; i < 500; i++) {
		char state = 0;
		FILE *f = fopen(path, "re");
		bool gone = !f || fscanf(f, "%*d (%*[^)]) %c", &state) != 1 || state == 'Z';
		if (f)
			fclose(f);
		if (gone)
			break;
		usleep(10000);
	}
	sb = test_sandbox(cfg);
	unsigned u, g;
	template_ids(sb, &u, &g);
	cr_expect_eq(u, RANGE_ORPHAN);
	snapcell_sandbox_free(sb);
	snapcell_config_free(cfg);
}

/* In a child with a mount namespace of its own and an empty lock directory, plants `kind` at
 * the default range's first uid and makes a sandbox of the default config: 0 when that fails,
 * 1 when it runs, 2 when the child could not set up. */
static int plant_and_create(char kind)
{
	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		char lock[64];
		snprintf(lock, sizeof(lock), "/run/snapcell/uids/%u", SNAPCELL_UID_RANGE_FIRST);
		if (unshare(CLONE_NEWNS) < 0 ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
		    mount("tmpfs", "/run/snapcell/uids", "tmpfs", 0, "mode=0700") < 0)
			_exit(2);
		if (kind == 'l' ? symlink("/etc/passwd", lock) < 0 : mkfifo(lock, 0600) < 0)
			_exit(2);
		struct snapcell_config *cfg = test_config_new();
		struct snapcell_sandbox *sb = NULL;
		int rc = snapcell_sandbox_new(cfg, &sb, NULL);
		snapcell_sandbox_free(sb);
		_exit(rc < 0 ? 0 : 1);
	}
	int status = 0;
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status), "the child died: %d", status);
	return WEXITSTATUS(status);
}

/* A lock file replaced (a symlink, a FIFO) is someone else's doing, not a host without the
 * range: the default must not quietly give the shared uid 65534, nor take a FIFO as a lock. */
Test(uids, a_planted_lock_file_fails_creation_without_the_shared_fallback)
{
	require_root();
	if (!default_range_mapped())
		test_skip_or_fail("this user namespace does not map the default uid range");
	if (access("/run/snapcell/uids", F_OK) < 0) {
		struct snapcell_sandbox *sb = test_sandbox(NULL); /* makes the directory */
		snapcell_sandbox_free(sb);
	}
	int rc = plant_and_create('l');
	cr_assert_neq(rc, 2, "could not set up a private lock directory");
	cr_expect_eq(rc, 0, "a symlinked lock file: the sandbox fell back and ran");
	cr_expect_eq(plant_and_create('f'), 0, "a FIFO lock file: the sandbox ran");
}

/* docs/security.md: once a uid's pipes pass fs.pipe-user-pages-soft, every new pipe of that
 * uid gets 2 pages instead of 16. A cell of one sandbox doing that must leave another's pipes
 * whole. Pipes are charged at creation whatever they hold; F_SETPIPE_SZ is denied, so the cell
 * opens enough of them (with more descriptors than the default; forked processes would do as
 * well), and keeps them in a session between runs. */
Test(uids, one_sandbox_filling_its_pipe_quota_leaves_another_sandboxs_pipes_whole)
{
	require_root();
	unsigned long soft = 0;
	FILE *f = fopen("/proc/sys/fs/pipe-user-pages-soft", "re");
	if (!f || fscanf(f, "%lu", &soft) != 1 || soft == 0 || soft > 8 * 16384) {
		if (f)
			fclose(f);
		criterion_skip_test("fs.pipe-user-pages-soft is %lu: no soft limit to reach", soft);
	}
	fclose(f);
	if (!default_range_mapped())
		test_skip_or_fail("this user namespace does not map the default uid range");
	unsigned long pipes = soft / 16 + 16;
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(
		snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_OPEN_FILES, 2 * pipes + 64, &err), 0,
		"%s", err.message);
	struct snapcell_sandbox *a = test_sandbox(cfg), *b = test_sandbox(cfg);
	struct snapcell_session *s = NULL;
	cr_assert_eq(snapcell_session_new(a, &s, &err), 0, "%s", err.message);
	char code[512];
	snprintf(code, sizeof(code),
		 "import os, fcntl\n"
		 "keep = [os.pipe() for _ in range(%lu)]\n"
		 "r, w = os.pipe()\n"
		 "print(fcntl.fcntl(w, fcntl.F_GETPIPE_SZ))\n",
		 pipes);
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_session_run(s, code, SIZE_MAX, NULL, &res, &err), 0, "%s",
		     err.message);
	expect_ok(res);
	/* The attack worked within its own sandbox... */
	cr_expect_str_eq(res->stdout_buf, "8192\n", "a new pipe of the filling sandbox: %s",
			 res->stdout_buf);
	snapcell_result_free(res);
	/* ...and not beyond it: the pipes are still open in the session's worker. */
	expect_output(b,
		      "import os, fcntl\n"
		      "r, w = os.pipe()\n"
		      "print(fcntl.fcntl(w, fcntl.F_GETPIPE_SZ))\n",
		      "65536\n");
	snapcell_session_free(s);
	snapcell_sandbox_free(a);
	snapcell_sandbox_free(b);
	snapcell_config_free(cfg);
}
