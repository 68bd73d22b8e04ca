/* One cell: the forked copy of the template that runs one piece of untrusted code. It sets
 * itself up in this order (session, mounts, fds,
 * rlimits, capabilities, no_new_privs, seccomp last), warms up, then parks until the host
 * sends code. Everything after the code starts is untrusted: the host believes only the exit
 * status the template reports. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "guest.h"
#include "rpc/control.h"
#include "util/pagemap_scan.h"
#include "util/util.h"

/* How many pages a parked cell pre-faults between looks for waiting work (a poll each). */
#define PREFAULT_CHECK_PAGES 128

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ  22
#define MADV_POPULATE_WRITE 23
#endif

static uint64_t tv_us(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000000u + (uint64_t)tv->tv_usec;
}

/* A cell that cannot set itself up says why on its stderr and reports setup-failure. */
static _Noreturn void setup_failed(const struct snapcell_error *err)
{
	char line[SNAPCELL_ERROR_MESSAGE_LEN + 32];
	int n = snprintf(line, sizeof(line), "snapcell: cell setup: %s\n", err->message);
	(void)!write(2, line, (size_t)n);
	struct sc_done_payload done = {.status = SNAPCELL_STATUS_SETUP_FAILURE};
	sc__frame_write(SC_CELL_RPC_FD, SC_FRAME_DONE, &done, sizeof(done));
	_exit(125);
}

static int place_fds(const struct sc_cell_plan *plan, int tmp_root, struct snapcell_error *err)
{
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull < 0)
		return sc__err(err, -errno, "open /dev/null");
	/* The cell's ends were made above fd 9 by the template, so these cannot clobber them. */
	if (dup2(devnull, 0) < 0 || dup2(plan->stdout_fd, 1) < 0 || dup2(plan->stderr_fd, 2) < 0 ||
	    dup2(plan->rpc_fd, SC_CELL_RPC_FD) < 0 ||
	    (plan->net_fd >= 0 && dup2(plan->net_fd, SC_CELL_NET_FD) < 0) ||
	    dup3(tmp_root, SC_CELL_TMP_FD, O_CLOEXEC) < 0)
		return sc__err(err, -errno, "dup2");
	/* Nothing of the template's (control socket, other cells' pipes, the listeners the
	 * host accepts on) survives. */
	unsigned first = plan->net_fd >= 0 ? SC_CELL_NET_FD + 1 : SC_CELL_RPC_FD + 1;
	if ((first < SC_CELL_TMP_FD &&
	     syscall(SYS_close_range, first, SC_CELL_TMP_FD - 1, 0) < 0) ||
	    syscall(SYS_close_range, SC_CELL_TMP_FD + 1, ~0U, 0) < 0)
		return sc__err(err, -errno, "close_range");
	return 0;
}

/* The kernel's highest signal number (glibc's SIGRTMAX leaves out the two it keeps). */
#define SIGRTMAX_KERNEL 64

static bool reusable(const struct sc_cell_plan *plan)
{
	return sc_cell_reusable(plan->cfg, plan->id, plan->input_layer);
}

/* Before seccomp (which refuses userfaultfd): the descriptor the template takes at the parked
 * stop (reset.c), through which it write-protects this process's memory. Unprivileged with
 * UFFD_USER_MODE_ONLY (faults of user space only, which is all asynchronous protection
 * needs). */
static int reuse_arm(struct snapcell_error *err)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		return sc__err(err, -errno, "userfaultfd");
	int rc = fd == SC_CELL_UFFD_FD || dup3(fd, SC_CELL_UFFD_FD, O_CLOEXEC) >= 0 ? 0 : -errno;
	if (fd != SC_CELL_UFFD_FD)
		close(fd);
	return rc < 0 ? sc__err(err, rc, "dup3 userfaultfd") : 0;
}

/* Before the policy (which refuses seccomp itself): the filter that sends the calls reading
 * this process's counters to the template, which takes its listener at the parked stop
 * (guest/counters.c); a reset cell's counters span the runs before. */
static int counters_arm(struct snapcell_error *err)
{
	int fd = sc__seccomp_counters_install();
	if (fd < 0)
		return sc__err(err, fd, "install the counters filter");
	int rc = fd == SC_CELL_NOTIF_FD || dup3(fd, SC_CELL_NOTIF_FD, O_CLOEXEC) >= 0 ? 0 : -errno;
	if (fd != SC_CELL_NOTIF_FD)
		close(fd);
	return rc < 0 ? sc__err(err, rc, "dup3 seccomp listener") : 0;
}

static int restrict_self(const struct sc_cell_plan *plan, struct snapcell_error *err)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* The template is single-threaded, so its death is this thread's parent's death. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return sc__err(err, -errno, "set parent-death signal");
	/* A new session: kill(0, ...) cannot reach the template's or the host's group. */
	if (setsid() < 0)
		return sc__err(err, -errno, "setsid");
	int tmp_root = -1;
	int rc = plan->cfg->ops->cell_enter(plan, &tmp_root, err);
	/* After the last mount (a Landlock domain cannot mount), before place_fds closes the
	 * ruleset: only the root's python3 and its loader may be executed. */
	if (rc == 0 && plan->landlock_fd >= 0 &&
	    (rc = sc__landlock_restrict(plan->landlock_fd)) < 0)
		sc__err(err, rc, "landlock");
	if (rc == 0)
		rc = place_fds(plan, tmp_root, err);
	if (rc == 0 && reusable(plan))
		rc = reuse_arm(err);
	const char *tmp = plan->cfg->ops->cell_tmp(plan);
	if (rc == 0 && chdir(tmp) < 0)
		rc = sc__err(err, -errno, "chdir %s", tmp);
	struct sc_rlimits limits = plan->cfg->limits;
	if (reusable(plan) && limits.cpu_ms)
		limits.cpu_ms += SC_REUSE_CPU_SLACK_MS; /* the template's budget for resets */
	if (rc == 0)
		rc = sc__rlimits_apply(&limits, err);
	if (rc == 0)
		rc = sc__caps_clear(err);
	/* Non-dumpable, after the last credential change (which would reset it): pipe
	 * core_pattern handlers (apport, systemd-coredump) run as root on the host and ignore
	 * RLIMIT_CORE=0, so a crash would stream the cell's memory to them. It also keeps
	 * /proc/<cell> and ptrace from the outside uid's other processes. Seccomp denies
	 * PR_SET_DUMPABLE, so the code cannot undo it; forks inherit it. */
	if (rc == 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		rc = sc__err(err, -errno, "set non-dumpable");
	if (rc == 0 && reusable(plan))
		rc = counters_arm(err);
	if (rc == 0 && (rc = sc__seccomp_install(plan->seccomp)) < 0)
		sc__err(err, rc, "install seccomp filter");
	return rc;
}

/* What this process had used when its run began: a session's runs, and a reset cell's (its
 * parked stop sets it), report their own CPU time. */
static uint64_t cpu_before;
static bool armed; /* a cell armed for reuse (its counters filter installed) */

static uint64_t cpu_of(const struct rusage *self, const struct rusage *kids)
{
	return tv_us(&self->ru_utime) + tv_us(&self->ru_stime) + tv_us(&kids->ru_utime) +
	       tv_us(&kids->ru_stime);
}

int sc_cell_run(const uint8_t *code, size_t len, const uint8_t *tools, size_t tools_len,
		bool session)
{
	pid_t owner = getpid();
	sc_bridge_set_owner(owner);
	struct sc_done_payload done;
	uint8_t *value;
	size_t value_len;
	int exit_code = sc_py_run(code, len, tools, tools_len, session, &done, &value, &value_len);
	/* A fork of this process that ran off the end of the code leaves without reporting. */
	if (getpid() != owner)
		_exit(exit_code);
	if (session)
		sc_bridge_end_run();
	/* The last expression's value (or why there is none) goes just before DONE. */
	if (value)
		sc__frame_write(SC_CELL_RPC_FD, SC_FRAME_VALUE, value, value_len);
	free(value);
	/* A fresh run in a cell armed for reuse reads no figure of its own: the template would
	 * answer (its counters filter), and the run would wait for it; the host reads them
	 * (SC_DONE_HOST_FIGURES). A session's worker is a process of its own. */
	struct rusage self = {0}, kids;
	done.flags = armed && !session ? SC_DONE_HOST_FIGURES : 0;
	if (!done.flags)
		getrusage(RUSAGE_SELF, &self);
	getrusage(RUSAGE_CHILDREN, &kids);
	uint64_t cpu = cpu_of(&self, &kids);
	done.exit_code = exit_code;
	done.cpu_us = cpu - cpu_before;
	cpu_before = cpu;
	done.maxrss_kib =
		(uint64_t)(self.ru_maxrss > kids.ru_maxrss ? self.ru_maxrss : kids.ru_maxrss);
	sc__frame_write(SC_CELL_RPC_FD, SC_FRAME_DONE, &done, sizeof(done));
	return exit_code;
}

/* The parked point of a cell armed for reuse: it stops itself, and the template, its tracer,
 * takes the state every reset puts back (reset.c: registers at the return of this tgkill,
 * memory, the reference for the checks). A reset restores those registers, so this function
 * returns again after every reset, and what follows the stop runs before each run: the
 * userfaultfd goes (code must never hold it: it could re-protect pages to hide its writes),
 * and what a fork would have renewed is renewed (random generators, the CPU base). Untraced
 * (the template not there yet), the SIGSTOP is ignored, as signals of its own namespace are
 * for a pid 1 without a handler: it stops again until the template marked a stop seen, for
 * 200 ms at most. */
struct sc_reuse_unmaps sc_reuse_unmaps;
volatile int sc_reuse_stop_seen;
#define PARK_TRIES 200 /* a stop a millisecond */

static void reuse_park(void)
{
	/* Kernel state the template cannot read from outside, put back from inside: the
	 * alternate signal stack as parked (its memory is restored; a run could leave one
	 * pointing into the next run's), every signal's action as parked (/proc shows only
	 * which signals are caught or ignored, not a handler's address, flags or mask: a run
	 * could point a caught signal's handler at other code, or set SA_NOCLDWAIT on SIGCHLD)
	 * and no interval timer (a fork has none; an alarm left by a run would signal the
	 * next). The saved actions are in this process's memory, which each reset restores. */
	stack_t alt;
	bool have_alt = sigaltstack(NULL, &alt) == 0;
	static struct kernel_action {
		uintptr_t handler;
		unsigned long flags;
		uintptr_t restorer;
		uint64_t mask;
	} actions[SIGRTMAX_KERNEL + 1];
	for (int sig = 1; sig <= SIGRTMAX_KERNEL; sig++)
		if (sig != SIGKILL && sig != SIGSTOP &&
		    syscall(SYS_rt_sigaction, sig, NULL, &actions[sig], sizeof(uint64_t)) < 0)
			_exit(124);
	/* The template seizes a cell right after its fork, but a loaded machine can run the cell
	 * up to here first; a stop it was not there for is ignored (as signals of its own
	 * namespace are for a pid 1), and with its counters' listener not taken, no one would
	 * answer the calls that read them: again until it was (it marks the stop it saw). A
	 * template that never comes (stopped) leaves the cell to run once, unparked, its
	 * counters' calls (and so its clones and forks) failing with ENOSYS once it closes the
	 * listener below. */
	for (int i = 0; !sc_reuse_stop_seen && i < PARK_TRIES; i++) {
		if (i)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
		syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGSTOP);
	}
	/* The timers first: one a run left could fire meanwhile (a narrow window, not closed:
	 * docs/security.md). */
	static const int itimers[] = {ITIMER_REAL, ITIMER_VIRTUAL, ITIMER_PROF};
	for (size_t i = 0; i < SC_ARRAY_LEN(itimers); i++)
		if (setitimer(itimers[i], &(struct itimerval){0}, NULL) < 0)
			_exit(124);
	if (have_alt && sigaltstack(&alt, NULL) < 0)
		_exit(124);
	/* The kernel's break back to glibc's, which the reset made the parked one again (a
	 * later sbrk must map fresh, zeroed pages), first: the kernel shrinks it only while
	 * the heap's growth is mapped. Then what else the run mapped beyond the parked mappings
	 * (its contents are the run's; a registered heap's growth is a mapping of its own). */
	void *brk_now = sbrk(0);
	if (brk_now == (void *)-1 || syscall(SYS_brk, brk_now) != (long)(uintptr_t)brk_now)
		_exit(124);
	for (uint64_t i = 0; i < sc_reuse_unmaps.n && i < SC_REUSE_UNMAP_MAX; i++)
		if (munmap((void *)(uintptr_t)sc_reuse_unmaps.at[i].start,
			   sc_reuse_unmaps.at[i].end - sc_reuse_unmaps.at[i].start) < 0)
			_exit(124);
	/* The list is where the run before mapped what: not the next run's to read. */
	explicit_bzero(&sc_reuse_unmaps, sizeof(sc_reuse_unmaps));
	for (int sig = 1; sig <= SIGRTMAX_KERNEL; sig++)
		if (sig != SIGKILL && sig != SIGSTOP &&
		    syscall(SYS_rt_sigaction, sig, &actions[sig], NULL, sizeof(uint64_t)) < 0)
			_exit(124);
	close(SC_CELL_UFFD_FD);
	close(SC_CELL_NOTIF_FD); /* code answering its own calls would forge its figures */
	sc_py_after_reset();
	/* The template answers RUSAGE_SELF with the figures since this stop (counters.c): only
	 * the children's, which it does not answer, count from here. */
	struct rusage kids;
	getrusage(RUSAGE_CHILDREN, &kids);
	cpu_before = tv_us(&kids.ru_utime) + tv_us(&kids.ru_stime);
}

/* A reusable cell after its run: waits to be reset (or killed); the host asks for the reset
 * only after it has the run's DONE and output. Only on the socket the run began with (as
 * linger): code that put another file on fd 3 sent its DONE elsewhere, and the host waits for
 * this cell's exit, never to reset it. */
static void reuse_wait(const struct stat *socket_before)
{
	struct stat now;
	if (fstat(SC_CELL_RPC_FD, &now) < 0 || now.st_ino != socket_before->st_ino ||
	    now.st_dev != socket_before->st_dev)
		return;
	for (;;)
		pause();
}

/* True when the host has already sent this cell its work, as it does when runs come back to
 * back and each takes a cell as soon as it parks. */
static bool work_waiting(void)
{
	struct pollfd pf = {SC_CELL_RPC_FD, POLLIN, 0};
	return poll(&pf, 1, 0) != 0;
}

/* While parked, off any run's path: the pages runs were seen to touch (the host learns them,
 * core/prefault.c). Writable ones get the cell's own copy now instead of a copy-on-write
 * fault during the run; read-only ones (code) get mapped. Each range is a hint: one that is
 * not mapped as expected here fails alone. Before Linux 5.14 the first call fails and the
 * rest are skipped. It stops once work is waiting: a run should not wait for pages it may
 * not touch (the whole list costs more than the faults of one `print(1)`), and on two busy
 * CPUs that CPU is better spent on the run. */
static void prefault(const struct sc_cell_plan *plan)
{
	uint64_t pages = 0, check_at = 0;
	for (size_t i = 0; i < plan->n_prefault; i++) {
		const struct sc_prefault_range *r = &plan->prefault[i];
		if (pages >= check_at) {
			if (work_waiting())
				return;
			check_at = pages + PREFAULT_CHECK_PAGES;
		}
		if (madvise((void *)(uintptr_t)r->start, (size_t)r->pages * 4096,
			    r->write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) < 0 &&
		    errno == EINVAL)
			return;
		pages += r->pages;
	}
}

/* After the DONE of a RUN_LEARN: stays until the host shuts its end of the frame socket, so
 * the host can look at which pages the run touched (core/prefault.c) before the cell goes.
 * The host kills the cell when it retires it in any case; EOF, an error or a signal ends this.
 * Only on the socket the run began with: code that put another file on fd 3 sent its DONE
 * (if any) elsewhere, and the host now waits for this exit. */
static void linger(const struct stat *socket_before)
{
	struct stat now;
	if (fstat(SC_CELL_RPC_FD, &now) < 0 || now.st_ino != socket_before->st_ino ||
	    now.st_dev != socket_before->st_dev)
		return;
	char byte;
	ssize_t n;
	do
		n = read(SC_CELL_RPC_FD, &byte, 1);
	while (n > 0 || (n < 0 && errno == EINTR));
}

_Noreturn void sc_cell_main(const struct sc_cell_plan *plan)
{
	struct snapcell_error err = {0};
	if (restrict_self(plan, &err) < 0) {
		/* fds may not be in place yet: put the report where the host reads it. */
		dup2(plan->stderr_fd, 2);
		dup2(plan->rpc_fd, SC_CELL_RPC_FD);
		setup_failed(&err);
	}
	/* Tell the template, and drop the page before any code can see it: the template's
	 * word, not the cell's frames, decides a setup-failure status. */
	*plan->set_up = 1;
	munmap(plan->set_up_map, plan->set_up_len);
	/* First, so the after-fork hooks and the warm-up find most of their pages in place. */
	prefault(plan);
	sc_py_after_fork_child();
	plan->cfg->ops->cell_environ(plan);
	sc_py_warm();
	armed = reusable(plan);
	if (armed)
		reuse_park();

	uint8_t type;
	uint8_t *code, *tools = NULL;
	size_t len, tools_len = 0;
	int rc = sc__frame_read(SC_CELL_RPC_FD, plan->cfg->frame_cap, &type, &code, &len);
	if (rc == 0 && type == SC_FRAME_TOOLS) { /* the run's own tools come before its code */
		tools = code;
		tools_len = len;
		rc = sc__frame_read(SC_CELL_RPC_FD, plan->cfg->frame_cap, &type, &code, &len);
		if (rc == 0 && type != SC_FRAME_RUN && type != SC_FRAME_RUN_LEARN)
			_exit(124);
	}
	if (rc < 0)
		_exit(rc == -EPIPE ? 0 : 124); /* the host went away */
	if (type == SC_FRAME_RUN || type == SC_FRAME_RUN_LEARN) {
		close(SC_CELL_TMP_FD);
		struct stat socket_before;
		fstat(SC_CELL_RPC_FD, &socket_before);
		int exit_code = sc_cell_run(code, len, tools, tools_len, false);
		if (type == SC_FRAME_RUN_LEARN)
			linger(&socket_before);
		else if (reusable(plan))
			reuse_wait(&socket_before);
		_exit(exit_code);
	}
	if (type == SC_FRAME_SESSION) {
		/* A session is never reset: its CPU limit is the configured one, without the
		 * slack a reset cell has (a hard limit may always be lowered). */
		if (reusable(plan) && sc__rlimits_apply(&plan->cfg->limits, &err) < 0)
			_exit(124);
		sc_session_anchor(plan->cfg->frame_cap);
	}
	_exit(124); /* the host spoke out of turn */
}
