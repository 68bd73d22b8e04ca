/* Stopping a paused run's processes (src/isolate/freeze.c), on a process tree made here: a
 * subreaper root (as a cell is) with a thread, a child, a child in a session of its own, an
 * orphan that came back to the root, and code that fights the stop. The integration suites
 * (test_decisions.c, test_rlimits.c) run it against cells. */
#define _GNU_SOURCE
#include "helpers.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include <fcntl.h>
#include <linux/sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "isolate/host.h"
#include "util/util.h"

/* Counters the tree's spinners bump, and pids, in memory its processes share. */
enum { ROOT, THREAD, CHILD, SESSION, ORPHAN, CHAIN, SENDER, N_COUNTERS };
struct shared {
	_Atomic unsigned long count[N_COUNTERS];
	_Atomic pid_t session;
};
static struct shared *sh;
static bool fight;
static int join_fd = -1; /* a cgroup's cgroup.procs the root moves into first, or -1 */

#define BASIC	 ((1u << ROOT) | (1u << THREAD) | (1u << CHILD) | (1u << SESSION) | (1u << ORPHAN))
#define FIGHTERS ((1u << CHAIN) | (1u << SENDER))

static _Noreturn void spin(int slot)
{
	for (;;)
		atomic_fetch_add(&sh->count[slot], 1);
}

static void *spin_thread(void *arg)
{
	(void)arg;
	spin(THREAD);
}

/* A chain of processes, each forking the next and exiting, and one sending SIGCONT to its
 * process group and to the child in its own session. (Not kill(-1): the tests run as root.) */
static void fighters(void)
{
	if (fork() == 0)
		for (;;) {
			atomic_fetch_add(&sh->count[CHAIN], 1);
			if (fork() > 0)
				_exit(0);
		}
	if (fork() == 0)
		for (;;) {
			atomic_fetch_add(&sh->count[SENDER], 1);
			kill(0, SIGCONT);
			kill(atomic_load(&sh->session), SIGCONT);
		}
}

/* Whether every spinner in the set has run (the session's pid is stored before the root's
 * first turn). */
static bool all_ran(unsigned set)
{
	for (int i = 0; i < N_COUNTERS; i++)
		if ((set & (1u << i)) && !atomic_load(&sh->count[i]))
			return false;
	return true;
}

/* The root, in a process group of its own, which everything but the session child shares;
 * returned once each of its spinners has run, however slowly the machine forks. */
static pid_t make_tree(void)
{
	pid_t root = fork();
	cr_assert_geq(root, 0);
	if (root > 0) {
		setpgid(root, root);
		unsigned set = BASIC | (fight ? FIGHTERS : 0);
		for (uint64_t give_up = test_now_ms() + 20000;
		     !all_ran(set) && test_now_ms() < give_up;)
			usleep(1000);
		cr_assert(all_ran(set), "the tree never ran whole");
		return root;
	}
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	setpgid(0, 0);
	if (join_fd >= 0 && write(join_fd, "0", 1) != 1)
		_exit(1);
	if (fork() == 0)
		spin(CHILD);
	pid_t session = fork();
	if (session == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setsid();
		spin(SESSION);
	}
	atomic_store(&sh->session, session);
	if (fork() == 0) {
		if (fork() == 0)
			spin(ORPHAN);
		_exit(0);
	}
	if (fight)
		fighters();
	pthread_t t;
	pthread_create(&t, NULL, spin_thread, NULL);
	for (;;) { /* what comes back to it is reaped */
		atomic_fetch_add(&sh->count[ROOT], 1);
		waitpid(-1, NULL, WNOHANG);
	}
}

static void end_tree(pid_t root)
{
	kill(atomic_load(&sh->session), SIGKILL);
	kill(-root, SIGKILL);
	waitpid(root, NULL, 0);
}

/* Which counters moved over 500 ms, as a bit set (a spinner on a busy machine waits its
 * turn for a while). */
static unsigned moving(void)
{
	unsigned long a[N_COUNTERS];
	for (int i = 0; i < N_COUNTERS; i++)
		a[i] = atomic_load(&sh->count[i]);
	usleep(500 * 1000);
	unsigned bits = 0;
	for (int i = 0; i < N_COUNTERS; i++)
		bits |= (unsigned)(a[i] != atomic_load(&sh->count[i])) << i;
	return bits;
}

static void setup(void)
{
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(sh, MAP_FAILED);
}

TestSuite(freeze, .init = setup);

/* The freeze's budget here (a paused run's is 1 s): a tree that fights (a fork chain, SIGCONT
 * to its group) is caught by the pass that reads a chain member's stat while it lives, which
 * on a loaded 2-core machine, under ASan, can take some passes more than 5 s hold. */
#define FREEZE_BUDGET_MS 20000

/* The cell of root, with its start time read now (0 when it is gone). */
static struct sc_cell_procs cell_of(pid_t root, bool keep_root, int cgroup_fd)
{
	struct sc_cell_procs cell = {root, keep_root, cgroup_fd, 0};
	sc__proc_start_time(root, &cell.root_start);
	return cell;
}

/* Each check is an expectation: the tree is ended whatever it found. cgroup_fd: the cgroup
 * the tree is in, for the freeze to list, or -1. */
static void freeze_and_thaw(bool keep_root, unsigned running, unsigned stopped, int cgroup_fd)
{
	pid_t root = make_tree();
	unsigned bits = moving();
	cr_expect_eq(bits & (running | stopped), running | stopped, "not all started: %#x", bits);
	struct sc_frozen *f = NULL;
	struct sc_cell_procs cell = cell_of(root, keep_root, cgroup_fd);
	int rc = sc__cell_freeze(&cell, FREEZE_BUDGET_MS, &f);
	cr_expect_eq(rc, 0, "%s", strerror(-rc));
	for (int i = 0; rc == 0 && i < 2; i++) {
		bits = moving();
		cr_expect_eq(bits & stopped, 0, "ran while stopped: %#x", bits);
		cr_expect_eq(bits & running, running, "stopped, but should run on: %#x", bits);
	}
	sc__cell_thaw(f);
	bits = moving();
	cr_expect_eq(bits & (running | stopped), running | stopped, "not continued: %#x", bits);
	end_tree(root);
}

Test(freeze, stops_every_thread_and_process_below_the_root_and_thaws_them)
{
	freeze_and_thaw(false, 0, BASIC, -1);
}

/* A session's anchor goes on (its threads with it); what is below it stops. */
Test(freeze, keep_root_leaves_the_root_running)
{
	freeze_and_thaw(true, (1u << ROOT) | (1u << THREAD),
			(1u << CHILD) | (1u << SESSION) | (1u << ORPHAN), -1);
}

Test(freeze, a_tree_that_forks_on_and_sends_sigcont_is_stopped)
{
	fight = true;
	freeze_and_thaw(false, 0, BASIC | FIGHTERS, -1);
}

/* A sandbox cgroup in cg with a cell cgroup "1", whose directory it returns; join_fd is its
 * cgroup.procs, which make_tree's root joins. A caller that is not root has a memory cgroup
 * only where one was delegated to it; its sandboxes otherwise run at level namespaces, as
 * designed, not for want of a feature. */
static int cell_cgroup(struct sc_cgroup *cg)
{
	struct snapcell_error err = {0};
	int rc = sc__cgroup_sandbox_new(cg, geteuid(), getegid(), &err);
	if (rc < 0 && geteuid() != 0)
		criterion_skip_test("no memory cgroup of this user's: %s", err.message);
	else if (rc < 0)
		test_skip_or_fail(err.message);
	cr_assert_eq(mkdirat(cg->dir_fd, "1", 0755), 0);
	int dir = sc__cgroup_cell_open(cg, 1);
	cr_assert_geq(dir, 0);
	join_fd = openat(dir, "cgroup.procs", O_WRONLY | O_CLOEXEC);
	cr_assert_geq(join_fd, 0);
	return dir;
}

/* Level cgroups: the freeze lists the cell's memory cgroup, which every process of the tree
 * joins at its fork, instead of walking the host's /proc. */
static void in_a_cgroup(bool keep_root, unsigned running, unsigned stopped)
{
	struct sc_cgroup cg;
	int dir = cell_cgroup(&cg);
	fight = true;
	freeze_and_thaw(keep_root, running, stopped, dir);
	close(join_fd);
	/* Until the killed tree has left the cgroup, which is then removed with its parent. */
	char left[64] = "x";
	for (int i = 0; i < 250 && left[0]; i++) {
		sc__read_file_at(dir, "cgroup.procs", left, sizeof(left));
		usleep(left[0] ? 20 * 1000 : 0);
	}
	cr_expect_eq(left[0], 0, "the tree is still in its cgroup: %s", left);
	close(dir);
	sc__cgroup_sandbox_free(&cg);
}

Test(freeze, a_cell_with_a_cgroup_is_listed_from_it)
{
	in_a_cgroup(false, 0, BASIC | FIGHTERS);
}

/* A session's anchor in its cgroup goes on (its threads with it), though it is listed there
 * and the listing stops each process as it reads it. */
Test(freeze, keep_root_leaves_the_root_running_in_a_cgroup)
{
	in_a_cgroup(true, (1u << ROOT) | (1u << THREAD),
		    (BASIC | FIGHTERS) & ~((1u << ROOT) | (1u << THREAD)));
}

/* The state of pid's main thread ('?' when it is gone). */
static char state_of(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	const char *p =
		sc__read_file_at(AT_FDCWD, path, buf, sizeof(buf)) < 0 ? NULL : strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : '?';
}

/* Level cgroups: a pid read from cgroup.procs may name another process by the time its stat
 * is read (the member ended and a host process, or another sandbox's, was given its pid):
 * here a cgroup.procs lists the cell's root, which is in its memory cgroup, and such a
 * process, which is not. It is never stopped (nor continued); a real cgroup.procs lists it
 * once, this one in every pass, so the cell never holds still. */
Test(freeze, a_listed_pid_given_to_a_process_of_another_cgroup_is_not_stopped)
{
	struct sc_cgroup cg;
	int dir = cell_cgroup(&cg);
	pid_t root = make_tree();
	close(join_fd);
	pid_t host = fork();
	cr_assert_geq(host, 0);
	if (host == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		for (;;)
			pause();
	}
	char listed[] = "/tmp/snapcell-freeze-XXXXXX", procs[64], path[96];
	cr_assert_not_null(mkdtemp(listed));
	snprintf(path, sizeof(path), "%s/cgroup.procs", listed);
	snprintf(procs, sizeof(procs), "%d\n%d\n", (int)root, (int)host);
	cr_assert_eq(sc__write_file_at(AT_FDCWD, path, procs, 0600), 0);
	int fake = open(listed, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(fake, 0);
	struct sc_frozen *f = NULL;
	struct sc_cell_procs cell = cell_of(root, false, fake);
	int rc = sc__cell_freeze(&cell, 300, &f);
	cr_expect_eq(rc, -ETIMEDOUT, "%s", strerror(-rc));
	siginfo_t si = {0};
	cr_expect_eq(waitid(P_PID, (id_t)host, &si, WSTOPPED | WCONTINUED | WNOHANG), 0);
	cr_expect_eq(si.si_pid, 0, "the host's process was stopped or continued: %d", si.si_code);
	sc__cell_thaw(f);
	kill(host, SIGKILL);
	waitpid(host, NULL, 0);
	end_tree(root);
	close(fake);
	unlink(path);
	rmdir(listed);
	char left[64] = "x";
	for (int i = 0; i < 250 && left[0]; i++) {
		sc__read_file_at(dir, "cgroup.procs", left, sizeof(left));
		usleep(left[0] ? 20 * 1000 : 0);
	}
	close(dir);
	sc__cgroup_sandbox_free(&cg);
}

/* The root ended (its code killed it, its parent reaped it) and its pid was given to another
 * process, here with a child: neither is the cell's, neither is stopped, and the freeze is
 * refused. */
Test(freeze, a_root_whose_pid_was_given_to_another_process_is_esrch)
{
	pid_t root = fork();
	cr_assert_geq(root, 0);
	if (root == 0)
		for (;;)
			pause();
	struct sc_cell_procs cell = cell_of(root, false, -1);
	cr_assert_neq(cell.root_start, 0);
	/* Start times count clock ticks (10 ms): the pid comes round again far later than that. */
	usleep(30 * 1000);
	kill(root, SIGKILL);
	waitpid(root, NULL, 0);
	/* The pid given again at once (clone3's set_tid, which root may ask for), as it is when
	 * pids come round to it: the turn could be anyone's on the host. */
	struct clone_args args = {
		.exit_signal = SIGCHLD, .set_tid = (uintptr_t)&root, .set_tid_size = 1};
	pid_t other = (pid_t)syscall(SYS_clone3, &args, sizeof(args));
	if (other == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fork() == 0)
			for (;;)
				pause();
		for (;;)
			pause();
	}
	if (other < 0 && errno == EPERM)
		criterion_skip_test("clone3 set_tid needs CAP_CHECKPOINT_RESTORE");
	cr_assert_eq(other, root, "%s", strerror(errno));
	usleep(100 * 1000); /* its child forked */
	struct sc_frozen *f = NULL;
	int rc = sc__cell_freeze(&cell, 2000, &f);
	cr_expect_eq(rc, -ESRCH, "%s", strerror(-rc));
	char children[64] = "";
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)other, (int)other);
	sc__read_file_at(AT_FDCWD, path, children, sizeof(children));
	pid_t child = (pid_t)atoi(children);
	cr_expect_gt(child, 0, "no child");
	cr_expect_neq(state_of(other), 'T', "the other process was stopped");
	cr_expect_neq(state_of(child), 'T', "its child was stopped");
	sc__cell_thaw(f);
	if (child > 0)
		kill(child, SIGKILL);
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);
}

/* The code stopped one of its processes itself: the thaw leaves it stopped. */
Test(freeze, what_was_stopped_before_stays_stopped)
{
	pid_t root = make_tree();
	kill(atomic_load(&sh->session), SIGSTOP);
	usleep(100 * 1000);
	struct sc_frozen *f = NULL;
	struct sc_cell_procs cell = cell_of(root, false, -1);
	cr_expect_eq(sc__cell_freeze(&cell, FREEZE_BUDGET_MS, &f), 0);
	sc__cell_thaw(f);
	unsigned bits = moving();
	cr_expect_eq(bits & BASIC, BASIC & ~(1u << SESSION), "%#x", bits);
	end_tree(root);
}

Test(freeze, a_gone_root_is_esrch)
{
	pid_t gone = fork();
	if (gone == 0)
		_exit(0);
	waitpid(gone, NULL, 0);
	struct sc_frozen *f = (struct sc_frozen *)&gone;
	struct sc_cell_procs cell = cell_of(gone, false, -1);
	cr_expect_eq(sc__cell_freeze(&cell, 500, &f), -ESRCH);
	cr_expect_null(f);
}

/* A vfork's parent waits for its child in an uninterruptible sleep, which a stop does not
 * end while the child is stopped: the freeze gives up at its time limit and continues what it
 * stopped (a paused run's call is then refused, docs/approval.md). */
Test(freeze, a_tree_that_cannot_hold_still_times_out_and_is_continued)
{
	pid_t root = fork();
	cr_assert_geq(root, 0);
	if (root == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setpgid(0, 0);
		if (vfork() == 0)
			spin(CHILD); /* never execs: the parent waits for good */
		_exit(0);
	}
	setpgid(root, root);
	for (uint64_t give_up = test_now_ms() + 20000;
	     !all_ran(1u << CHILD) && test_now_ms() < give_up;)
		usleep(1000);
	cr_assert(all_ran(1u << CHILD), "the vfork child never ran");
	struct sc_frozen *f = NULL;
	uint64_t start = test_now_ms();
	struct sc_cell_procs cell = cell_of(root, false, -1);
	cr_expect_eq(sc__cell_freeze(&cell, 500, &f), -ETIMEDOUT);
	cr_expect_null(f);
	cr_expect_lt(test_now_ms() - start, 4000, "gave up at its 0.5 s limit, not later");
	cr_expect(moving() & (1u << CHILD), "the vfork child was left stopped");
	kill(-root, SIGKILL);
	waitpid(root, NULL, 0);
}
