/* What a run can leave outside its cell's process for the next run of a cell reset in place
 * (reset.c), and that reset.c's reading of /proc does not show: the attributes of the cell's own
 * /tmp and /output (directories it owns, which outlive the reset), the figures of children it
 * reaped, which only the cell itself can read, and the CPU time of threads that exited. Not the
 * reset's flow: reset.c calls these at parking and at each reset, with the cell stopped under the
 * template's ptrace. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "template.h"
#include "util/util.h"

/* The cell's directories, relative to its root in the sandbox's procfs. /output may be
 * missing (ENOENT): then there is nothing of it to compare. */
static const char *const dir_names[SC_REUSE_DIRS] = {"tmp", "output"};

/* 1 when the directory fd holds anything, 0 when it is empty, or -errno; the names read are
 * zeroed after (they are a run's, and the template's memory is every later cell's: so is all
 * the template reads of a run, reset.c's figures and paths too). */
static int has_entries(int fd)
{
	static _Alignas(struct dirent64) char buf[4096];
	long n;
	int found = 0;
	while (!found && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
		for (long at = 0; at < n && !found;) {
			const struct dirent64 *e = (const struct dirent64 *)(buf + at);
			found = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
			at += e->d_reclen;
		}
	int rc = found ? 1 : n < 0 ? -errno : 0;
	explicit_bzero(buf, sizeof(buf));
	return rc;
}

static int open_dir_of(int proc_fd, pid_t pid, size_t i)
{
	char path[64];
	snprintf(path, sizeof(path), "%d/root/%s", (int)pid, dir_names[i]);
	int fd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	return fd < 0 ? -errno : fd;
}

int sc_reuse_dirs_take(int proc_fd, pid_t pid, struct sc_reuse_dirs *d)
{
	memset(d, 0, sizeof(*d));
	for (size_t i = 0; i < SC_REUSE_DIRS; i++) {
		int fd = open_dir_of(proc_fd, pid, i);
		if (fd == -ENOENT)
			continue;
		if (fd < 0)
			return fd;
		struct stat st;
		int rc = fstat(fd, &st) < 0 ? -errno : 0;
		close(fd);
		if (rc < 0)
			return rc;
		d->present[i] = true;
		d->dev[i] = st.st_dev;
		d->ino[i] = st.st_ino;
		d->mode[i] = st.st_mode;
		d->uid[i] = st.st_uid;
		d->gid[i] = st.st_gid;
		d->times[i][0] = st.st_atim;
		d->times[i][1] = st.st_mtim;
		d->times[i][2] = st.st_ctim;
	}
	return 0;
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Both must be empty. /tmp: what a run left there is the next run's. /output: the host
 * collects it after the run's DONE and retires a cell that left anything there
 * (src/core/run_fresh.c), but a run that forged its DONE went on and made files after the host
 * looked and before the stop; they were the next run's, in its code's view and in its result.
 *
 * And both must be as parked, times included: they are the cell's own for its whole life (its
 * uid owns them), so whatever a run sets on them stays for the next: a mode (fchmod: any 12
 * bits), access and modification times (utimensat on a descriptor: any two 64-bit numbers),
 * and a change time, which no call sets back, so that the moment a run last touched them
 * would reach the next. A file made and removed changes the change time too: each is a tmpfs
 * of the cell's, which numbers its files in order, so the next run's first file would have
 * counted the files of the runs before (open with O_TMPFILE, which numbers one without
 * changing the directory, is refused in these cells: src/isolate/seccomp.c). Both are
 * mounted noatime, so reading them changes nothing. NULL, or why the cell is discarded. */
const char *sc_reuse_dirs_check(int proc_fd, pid_t pid, const struct sc_reuse_dirs *d)
{
	for (size_t i = 0; i < SC_REUSE_DIRS; i++) {
		int fd = open_dir_of(proc_fd, pid, i);
		if (fd == -ENOENT && !d->present[i])
			continue;
		if (fd < 0)
			return "its /tmp or /output cannot be opened";
		struct stat st;
		const char *why = NULL;
		int entries;
		if (fstat(fd, &st) < 0)
			why = "its /tmp or /output cannot be read";
		else if (st.st_dev != d->dev[i] || st.st_ino != d->ino[i] ||
			 st.st_mode != d->mode[i] || st.st_uid != d->uid[i] ||
			 st.st_gid != d->gid[i])
			why = "the mode or owner of its /tmp or /output changed";
		else if ((entries = has_entries(fd)) != 0)
			why = entries < 0 ? "its /tmp or /output cannot be read"
					  : "its /tmp or /output is not empty";
		else if (!same_time(&st.st_atim, &d->times[i][0]) ||
			 !same_time(&st.st_mtim, &d->times[i][1]) ||
			 !same_time(&st.st_ctim, &d->times[i][2]))
			why = "its /tmp or /output changed (a file made there, times or mode set)";
		close(fd);
		if (why)
			return why;
	}
	return NULL;
}

/* How long the cell may take to run the one system call below (it takes microseconds). */
#define STEP_WAIT_NS 250000000ll

/* Waits for the stopped cell's next stop, bounded. 0 at a SIGTRAP stop; -1 otherwise (another
 * signal's stop, an exit, which is left for the template's loop to reap, or no stop in time).
 * The stop sends the template, the cell's tracer, a SIGCHLD, which it keeps blocked for its
 * signalfd: one sigtimedwait for it, as reset.c's interrupt waits, where yields and naps cost
 * a system call each and a context switch; one consumed is raised again after (it may have
 * told of another cell's end too: SIGCHLD does not queue). */
static int wait_trap(pid_t pid)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	bool took = false;
	int rc = -1;
	for (;;) {
		siginfo_t info = {0};
		if (waitid(P_PID, (id_t)pid, &info,
			   WEXITED | WSTOPPED | WNOHANG | WNOWAIT | __WALL) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (info.si_pid == pid) {
			int status;
			if (info.si_code == CLD_TRAPPED && waitpid(pid, &status, __WALL) == pid &&
			    WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP &&
			    (status >> 16) == 0)
				rc = 0; /* else an exit, which the loop reaps, or another stop */
			break;
		}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long long left = STEP_WAIT_NS - ((now.tv_sec - t0.tv_sec) * 1000000000ll +
						 (now.tv_nsec - t0.tv_nsec));
		if (left <= 0)
			break;
		struct timespec wait = {left / 1000000000ll, left % 1000000000ll};
		if (sigtimedwait(&chld, NULL, &wait) == SIGCHLD)
			took = true;
	}
	if (took)
		raise(SIGCHLD);
	return rc;
}

/* The cell's RUSAGE_CHILDREN, read by the cell itself: the template, its tracer, points the
 * stopped cell at the system call instruction of its parked stop (the tgkill that reuse_park
 * made: two bytes before the parked instruction pointer) with getrusage's number and
 * arguments, single-steps it, and reads the answer from the cell's memory (sc_reuse_unmaps,
 * which it writes back as it was). The registers are left as they were at the call's end:
 * the caller puts back its own. A child the run reaped that took no fault and no clock tick
 * (one made with CLONE_VM that only exits) leaves nothing in /proc/PID/stat, but its peak
 * resident size (the cell's memory's) stays in this for the next run to read, and each moved
 * the pid namespace's counter on, which the next run's children's pids would show. 0, or
 * -errno. */
int sc_reuse_children_usage(pid_t pid, const struct user_regs_struct *at, struct rusage *out)
{
	unsigned char insn[2];
	struct user_regs_struct regs = *at;
	void *scratch = &sc_reuse_unmaps;
	unsigned char saved[sizeof(*out)];
	struct iovec mine = {insn, sizeof(insn)};
	struct iovec theirs = {(void *)(uintptr_t)(at->rip - 2), sizeof(insn)};
	if (process_vm_readv(pid, &mine, 1, &theirs, 1, 0) != (ssize_t)sizeof(insn) ||
	    insn[0] != 0x0f || insn[1] != 0x05) /* syscall */
		return -EPROTO;
	mine = (struct iovec){saved, sizeof(saved)};
	theirs = (struct iovec){scratch, sizeof(saved)};
	if (process_vm_readv(pid, &mine, 1, &theirs, 1, 0) != (ssize_t)sizeof(saved))
		return -EIO;
	regs.rip = at->rip - 2;
	regs.rax = SYS_getrusage;
	regs.orig_rax = (unsigned long long)-1; /* no system call to restart on the way out */
	regs.rdi = (unsigned long long)RUSAGE_CHILDREN;
	regs.rsi = (unsigned long long)(uintptr_t)scratch;
	if (ptrace(PTRACE_SETREGS, pid, 0, &regs) < 0 || ptrace(PTRACE_SINGLESTEP, pid, 0, 0) < 0)
		return -errno;
	int rc = 0;
	if (wait_trap(pid) < 0 || ptrace(PTRACE_GETREGS, pid, 0, &regs) < 0 ||
	    regs.rip != at->rip || regs.rax != 0)
		rc = -EPROTO;
	mine = (struct iovec){out, sizeof(*out)};
	if (rc == 0 && process_vm_readv(pid, &mine, 1, &theirs, 1, 0) != (ssize_t)sizeof(*out))
		rc = -EIO;
	mine = (struct iovec){saved, sizeof(saved)}; /* whatever came of the step */
	if (process_vm_writev(pid, &mine, 1, &theirs, 1, 0) != (ssize_t)sizeof(saved))
		rc = -EIO;
	return rc;
}

/* The CPU time of the cell's threads other than its main one, in nanoseconds: the process's CPU
 * clock (every thread's, the dead ones' included) less the main thread's own (the first figure
 * of /proc/PID/schedstat), both exact for a stopped process. A thread a run made and that
 * exited leaves nothing else /proc/PID/status shows once it is gone (a thread of the C
 * library's sets a handler, which is shown; one made with a bare clone does not), but its CPU
 * time stays in the process's, and it moved the pid namespace's counter on, which the next
 * run's threads' and children's ids would show. 0, or -errno. */
int sc_reuse_other_threads_ns(int proc_fd, pid_t pid, int64_t *ns)
{
	char path[64], text[128] = {0};
	snprintf(path, sizeof(path), "%d/schedstat", (int)pid);
	int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	clockid_t clock;
	struct timespec all;
	char *end;
	unsigned long long main_ns = n > 0 ? strtoull(text, &end, 10) : 0;
	if (n <= 0 || end == text || *end != ' ')
		return -EPROTO;
	int rc = clock_getcpuclockid(pid, &clock);
	if (rc != 0)
		return -rc;
	if (clock_gettime(clock, &all) < 0)
		return -errno;
	*ns = (int64_t)all.tv_sec * 1000000000ll + all.tv_nsec - (int64_t)main_ns;
	return 0;
}
