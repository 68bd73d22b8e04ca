/* Starting the helper inside new namespaces. The child between clone and execve runs only
 * async-signal-safe system calls: the host may be multi-threaded and its locks are not ours.
 * Not the place for mounts or policy: the helper builds its own root after exec. */
#define _GNU_SOURCE
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rpc/control.h"
#include "util/cleanup.h"
#include "util/fdset.h"
#include "util/util.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

/* Where the child parks pass_dirs before moving them to SC_PASS_FD_FIRST... */
#define PASS_HIGH 512

#define NS_FLAGS                                                                                   \
	(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
	 CLONE_NEWCGROUP)

/* What the child reports when it cannot reach execve. */
struct child_failure {
	int32_t step;
	int32_t err;
	int32_t index; /* which pass_dirs entry, for STEP_DIRS */
};

enum { STEP_SYNC, STEP_DIRS, STEP_IDS, STEP_FDS, STEP_EXEC };
static const char *const step_names[] = {"wait for id maps", "open python path",
					 "switch to the sandbox's ids", "set up descriptors",
					 "execve"};

/* The child's code runs in the caller's memory with the caller's thread's thread-local
 * storage (sc__spawn_helper, below): a sanitizer's instrumentation there would update the
 * records of the caller's thread from another process at the same time as that thread (the
 * TSan build's child died of it), so it has none. */
#define CHILD_CODE __attribute__((no_sanitize("address", "thread", "undefined")))

/* The child's calls are raw system calls, not glibc's wrappers: read, write, open and close
 * are cancellation points there, whose bookkeeping writes the calling thread's descriptor,
 * which the CLONE_VM child shares with the caller's thread (sc__spawn_helper, below).
 * syscall() writes nothing but errno. */
CHILD_CODE static long c_read(int fd, void *buf, size_t n)
{
	return syscall(SYS_read, fd, buf, n);
}

CHILD_CODE static long c_write(int fd, const void *buf, size_t n)
{
	return syscall(SYS_write, fd, buf, n);
}

CHILD_CODE static int c_open(const char *path, int flags)
{
	return (int)syscall(SYS_openat, AT_FDCWD, path, flags);
}

CHILD_CODE static void c_close(int fd)
{
	syscall(SYS_close, fd);
}

CHILD_CODE static int c_dup_above(int fd, int lowest)
{
	return (int)syscall(SYS_fcntl, fd, F_DUPFD, lowest);
}

CHILD_CODE static int c_dup2(int fd, int to)
{
	return fd == to ? to : (int)syscall(SYS_dup3, fd, to, 0);
}

CHILD_CODE static void child_fail(int fd, int step, int err)
{
	struct child_failure f = {step, err, -1};
	(void)!c_write(fd, &f, sizeof(f));
	_exit(127);
}

/* A copy of the host's fd above every number the child moves descriptors to (PASS_HIGH up to
 * the helper's and the cgroup's), or -1 for -1: a host with hundreds of descriptors open
 * hands over ones in that range, which a move would clobber. */
CHILD_CODE static int above_moves(int fd)
{
	return fd < 0 ? fd : c_dup_above(fd, PASS_HIGH + SC_PASS_FD_MAX + 2);
}

/* The descriptors the child hands on, above every number it moves descriptors to. */
struct child_fds {
	int fail;    /* the failure pipe */
	int helper;  /* PASS_HIGH + SC_PASS_FD_MAX */
	int cgroup;  /* the one above, when spec->cgroup_fd is one */
	int control; /* for SC_CONTROL_FD */
	int null;    /* for 0 and 1 */
	int err_out; /* for 2 */
};

CHILD_CODE static void child_lift(const struct sc_spawn *spec, int fail_fd, int devnull,
				  struct child_fds *f)
{
	int fail = above_moves(fail_fd);
	fail_fd = fail < 0 ? fail_fd : fail;
	f->fail = fail_fd;
	int helper_src = above_moves(spec->helper_fd), cgroup_src = above_moves(spec->cgroup_fd);
	f->control = above_moves(spec->control_fd), f->null = above_moves(devnull);
	f->err_out = spec->stderr_fd >= 0 ? above_moves(spec->stderr_fd) : f->null;
	if (helper_src < 0 || f->control < 0 || f->null < 0 || f->err_out < 0 ||
	    (spec->cgroup_fd >= 0 && cgroup_src < 0))
		child_fail(fail_fd, STEP_FDS, errno);
	/* The helper's descriptor may be one of the numbers the python paths move to; park it
	 * above all of them (CLOEXEC again by the close_range below). */
	f->helper = PASS_HIGH + SC_PASS_FD_MAX, f->cgroup = f->helper + 1;
	if (c_dup2(helper_src, f->helper) < 0 ||
	    (cgroup_src >= 0 && c_dup2(cgroup_src, f->cgroup) < 0))
		child_fail(fail_fd, STEP_FDS, errno);
}

/* Opened high, then moved into place (child_place): nothing can clobber what is still to
 * move. */
CHILD_CODE static void child_open_pass(const struct sc_spawn *spec, const struct child_fds *f)
{
	for (size_t i = 0; i < spec->n_pass_dirs; i++) {
		int kind = i + spec->n_pass_files < spec->n_pass_dirs ? O_DIRECTORY : 0;
		int fd = c_open(spec->pass_dirs[i], O_PATH | kind | O_CLOEXEC);
		/* A missing file is the helper's to report (a program that is no helper, or one of
		 * another protocol, must still get to greet): it gets /dev/null instead. */
		if (fd < 0 && !kind)
			fd = c_dup_above(f->null, 0);
		if (fd < 0 || c_dup2(fd, PASS_HIGH + (int)i) < 0) {
			struct child_failure cf = {STEP_DIRS, errno, (int32_t)i};
			(void)!c_write(f->fail, &cf, sizeof(cf));
			_exit(127);
		}
		c_close(fd);
	}
}

/* Become root of the new user namespace. When the host is root the map points inside 0 at
 * another outside uid, so the clone's own uid is unmapped until we switch. Raw calls: glibc's
 * setxid would try to signal the host's other threads. At the rlimits level a root caller's
 * helper becomes the sandbox's own uid here, with no supplementary group, and the exec then
 * leaves it no capability. */
CHILD_CODE static void child_ids(const struct sc_spawn *spec, int fail_fd)
{
	if (spec->namespaces) {
		if (syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
			child_fail(fail_fd, STEP_IDS, errno);
	} else if (spec->outside_uid != geteuid() &&
		   (syscall(SYS_setgroups, 0, NULL) < 0 ||
		    syscall(SYS_setresgid, spec->outside_gid, spec->outside_gid,
			    spec->outside_gid) < 0 ||
		    syscall(SYS_setresuid, spec->outside_uid, spec->outside_uid,
			    spec->outside_uid) < 0)) {
		child_fail(fail_fd, STEP_IDS, errno);
	}
}

CHILD_CODE static void child_place(const struct sc_spawn *spec, const struct child_fds *f)
{
	if (c_dup2(f->null, 0) < 0 || c_dup2(f->null, 1) < 0 || c_dup2(f->err_out, 2) < 0 ||
	    c_dup2(f->control, SC_CONTROL_FD) < 0)
		child_fail(f->fail, STEP_FDS, errno);
	for (size_t i = 0; i < spec->n_pass_dirs; i++)
		if (c_dup2(PASS_HIGH + (int)i, SC_PASS_FD_FIRST + (int)i) < 0)
			child_fail(f->fail, STEP_FDS, errno);
	if (spec->cgroup_fd >= 0 && c_dup2(f->cgroup, SC_CGROUP_FD) < 0)
		child_fail(f->fail, STEP_FDS, errno);
	/* Everything else, the failure pipe included, goes at execve: no host fd leaks. */
	unsigned first = SC_PASS_FD_FIRST + (unsigned)spec->n_pass_dirs;
	if ((first < SC_CGROUP_FD &&
	     syscall(SYS_close_range, first, SC_CGROUP_FD - 1, CLOSE_RANGE_CLOEXEC) < 0) ||
	    syscall(SYS_close_range, spec->cgroup_fd >= 0 ? SC_CGROUP_FD + 1 : SC_CGROUP_FD, ~0U,
		    CLOSE_RANGE_CLOEXEC) < 0)
		child_fail(f->fail, STEP_FDS, errno);
}

CHILD_CODE static void child(const struct sc_spawn *spec, int sync_fd, int fail_fd, int devnull)
{
	char byte;
	if (c_read(sync_fd, &byte, 1) != 1)
		child_fail(fail_fd, STEP_SYNC, errno ? errno : EPIPE);
	struct child_fds f;
	child_lift(spec, fail_fd, devnull, &f);
	child_open_pass(spec, &f);
	child_ids(spec, f.fail);
	child_place(spec, &f);
	/* By descriptor: the sandbox uid need not be able to walk the path to the helper. */
	syscall(SYS_execveat, f.helper, "", spec->argv, spec->envp, AT_EMPTY_PATH);
	child_fail(f.fail, STEP_EXEC, errno);
}

static int write_proc(pid_t pid, const char *file, const char *content)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = sc__write_all(fd, content, strlen(content));
	close(fd);
	return rc;
}

static int write_id_maps(pid_t pid, const struct sc_spawn *spec, struct snapcell_error *err)
{
	char map[64];
	int rc = write_proc(pid, "setgroups", "deny");
	if (rc < 0 && rc != -ENOENT)
		return sc__err(err, rc, "write /proc/%d/setgroups", (int)pid);
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)spec->outside_gid);
	if ((rc = write_proc(pid, "gid_map", map)) < 0)
		return sc__err(err, rc, "write gid_map (0 -> %u)", (unsigned)spec->outside_gid);
	snprintf(map, sizeof(map), "0 %u 1\n", (unsigned)spec->outside_uid);
	if ((rc = write_proc(pid, "uid_map", map)) < 0)
		return sc__err(err, rc, "write uid_map (0 -> %u)", (unsigned)spec->outside_uid);
	return 0;
}

static int await_exec(pid_t pid, int fail_fd, const struct sc_spawn *spec,
		      struct snapcell_error *err)
{
	struct child_failure f;
	ssize_t n;
	do
		n = read(fail_fd, &f, sizeof(f));
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 0; /* the pipe closed at a successful execve */
	waitpid(pid, NULL, 0);
	if (n != (ssize_t)sizeof(f) || f.step < 0 || f.step > STEP_EXEC)
		return sc__err(err, SNAPCELL_E_HELPER, "helper start: no report from child");
	if (f.step == STEP_DIRS && f.index >= 0 && (size_t)f.index < spec->n_pass_dirs)
		return sc__err(err, f.err > 0 ? -f.err : SNAPCELL_E_HELPER, "open %s",
			       spec->pass_dirs[f.index]);
	return sc__err(err, f.err > 0 ? -f.err : SNAPCELL_E_HELPER, "helper %s",
		       step_names[f.step]);
}

/* /dev/null for the child's 0 and 1, the pipe that releases it once the id maps are written,
 * and the one its failure report comes back on, all in fds. */
static int spawn_pipes(struct sc_fdset *fds, int *devnull, int sync[2], int fail[2],
		       struct snapcell_error *err)
{
	*devnull = sc__fdset_add(fds, open("/dev/null", O_RDWR | O_CLOEXEC));
	if (*devnull < 0)
		return sc__err(err, *devnull, "open /dev/null");
	int rc = sc__fdset_pipe(fds, sync, O_CLOEXEC);
	if (rc < 0 || (rc = sc__fdset_pipe(fds, fail, O_CLOEXEC)) < 0)
		return sc__err(err, rc, "pipe");
	return 0;
}

/* The child cloned (pid, or -1 with saved): its id maps written and it released to exec. */
static int release_child(const struct sc_spawn *spec, long pid, int saved, int sync_fd,
			 struct snapcell_error *err)
{
	int rc = 0;
	if (pid < 0) {
		rc = sc__err(err, spec->namespaces ? SNAPCELL_E_ISOLATION : -saved, "clone%s: %s",
			     spec->namespaces ? " into new namespaces" : "", strerror(saved));
	} else if (!spec->namespaces || (rc = write_id_maps((pid_t)pid, spec, err)) == 0) {
		if (write(sync_fd, "g", 1) != 1)
			rc = sc__err(err, -errno, "release helper");
	}
	return rc;
}

/* The child runs on a stack of its own in this process's memory (CLONE_VM, as posix_spawn
 * does): the clone then copies none of the caller's mappings and page tables, which cost
 * ~0.35 ms plus ~6 us per MiB the caller has resident (a Python host of 100 MiB: ~1 ms). It
 * reads spec, the pipes' numbers and its own stack, makes raw calls only (c_read and the
 * others, above), writes nothing the parent reads (errno is the caller's thread's: the
 * parent keeps every signal blocked, so its own calls are not interrupted, and reads errno
 * only while the child waits for its release or is gone), and runs with every signal
 * blocked, so no handler of the caller's runs in the caller's memory; the helper unblocks
 * them at its start (guest/helper.c). The stack is freed once the child has exec'd or died.
 * Runs no atfork handler: the child only execs. */
#define CHILD_STACK_BYTES (64 * 1024)

/* TSan's interceptor of clone() does its fork bookkeeping in the child, which with CLONE_VM
 * would be the caller's own runtime state (the child died of it): a TSan build's child gets
 * a copy of the caller's memory, as a fork's does. */
#if defined(__SANITIZE_THREAD__)
#define SHARE_MEMORY 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHARE_MEMORY 0
#endif
#endif
#ifndef SHARE_MEMORY
#define SHARE_MEMORY CLONE_VM
#endif

/* Whether the child's ids differ from the caller's: its switch to them (child_ids) is then
 * a change of its effective ids, at which the kernel sets the dumpable flag of its memory to
 * fs.suid_dumpable. */
static int ids_change(const struct sc_spawn *spec)
{
	return spec->outside_uid != geteuid() || spec->outside_gid != getegid();
}

/* Whether the child may share the caller's memory. Not when its switch of ids would make
 * that memory dumpable by the sandbox's uid (fs.suid_dumpable = 1): any process of that uid
 * (the shared fallback uid 65534 is every "nobody" daemon's) could then ptrace the child and
 * write the caller's memory. Read at each spawn, as the sysctl can change; unreadable counts
 * as 1. */
static int share_memory(const struct sc_spawn *spec)
{
	if (!SHARE_MEMORY || !ids_change(spec))
		return SHARE_MEMORY;
	char value = '1';
	int fd = open("/proc/sys/fs/suid_dumpable", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, &value, 1) != 1)
			value = '1';
		close(fd);
	}
	return value == '0' || value == '2' ? SHARE_MEMORY : 0;
}

/* The caller's dumpable flag across the spawns under way at once, whose children share its
 * memory and each set its flag at their switch of ids: the first to start saves it, the last
 * to end puts it back (a spawn that saved its own would save another's cleared flag, and put
 * that back for good). A fork while spawns are under way gives its child the saved flag. */
static pthread_mutex_t dumpable_lock = PTHREAD_MUTEX_INITIALIZER;
static int dumpable_spawns, dumpable_saved;
static pthread_once_t dumpable_once = PTHREAD_ONCE_INIT;

static void dumpable_lock_all(void)
{
	pthread_mutex_lock(&dumpable_lock);
}

static void dumpable_unlock_all(void)
{
	pthread_mutex_unlock(&dumpable_lock);
}

static void dumpable_put_back(void)
{
	if ((dumpable_saved == 0 || dumpable_saved == 1) &&
	    prctl(PR_GET_DUMPABLE) != dumpable_saved)
		prctl(PR_SET_DUMPABLE, dumpable_saved);
}

static void dumpable_forked(void)
{
	if (dumpable_spawns > 0)
		dumpable_put_back();
	dumpable_spawns = 0;
	pthread_mutex_unlock(&dumpable_lock);
}

static void dumpable_at_fork(void)
{
	pthread_atfork(dumpable_lock_all, dumpable_unlock_all, dumpable_forked);
}

static void dumpable_hold(void)
{
	pthread_once(&dumpable_once, dumpable_at_fork);
	pthread_mutex_lock(&dumpable_lock);
	if (dumpable_spawns++ == 0)
		dumpable_saved = prctl(PR_GET_DUMPABLE);
	pthread_mutex_unlock(&dumpable_lock);
}

static void dumpable_release(void)
{
	pthread_mutex_lock(&dumpable_lock);
	if (--dumpable_spawns == 0)
		dumpable_put_back();
	pthread_mutex_unlock(&dumpable_lock);
}

struct child_args {
	const struct sc_spawn *spec;
	int sync[2], fail[2], devnull;
};

CHILD_CODE static int child_start(void *p)
{
	const struct child_args *a = p;
	c_close(a->sync[1]);
	c_close(a->fail[0]);
	child(a->spec, a->sync[0], a->fail[1], a->devnull);
	return 127;
}

int sc__spawn_helper(const struct sc_spawn *spec, pid_t *pid_out, int *pidfd_out,
		     struct snapcell_error *err)
{
	struct sc_fdset fds SC_AUTO_FDSET = SC_FDSET_INIT; /* five members: always room */
	struct child_args a = {.spec = spec};
	int rc = spawn_pipes(&fds, &a.devnull, a.sync, a.fail, err);
	if (rc < 0)
		return rc;
	/* Below it a guard page: an overflow faults in the child instead of writing the
	 * caller's memory. */
	size_t guard = (size_t)sysconf(_SC_PAGESIZE), size = guard + CHILD_STACK_BYTES;
	char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED || mprotect(stack, guard, PROT_NONE) < 0) {
		rc = sc__err(err, -errno, "helper start: child stack");
		if (stack != MAP_FAILED)
			munmap(stack, size);
		return rc;
	}
	int share = share_memory(spec), holds = share && ids_change(spec);
	if (holds)
		dumpable_hold();
	sigset_t all, was;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &was);
	int pidfd SC_AUTO_CLOSE = -1;
	int flags = (spec->namespaces ? NS_FLAGS : 0) | share | CLONE_PIDFD | SIGCHLD;
	long pid = clone(child_start, stack + size, flags, &a, &pidfd);
	int saved = errno;
	sc__fdset_close(&fds, a.sync[0]);
	sc__fdset_close(&fds, a.fail[1]);
	sc__fdset_close(&fds, a.devnull);
	rc = release_child(spec, pid, saved, a.sync[1], err);
	sc__fdset_close(&fds, a.sync[1]); /* the child reads EOF when it was not released */
	if (rc == 0 && pid > 0)
		rc = await_exec((pid_t)pid, a.fail[0], spec, err);
	else if (pid > 0) {
		kill((pid_t)pid, SIGKILL);
		waitpid((pid_t)pid, NULL, 0);
	}
	/* The child's switch to the sandbox's uid (child_ids) set the dumpable flag of the
	 * memory it shared to fs.suid_dumpable (commit_creds, when the euid changes: a root
	 * caller's); it is this process's flag, given back now that the child has its own. */
	if (holds)
		dumpable_release();
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	munmap(stack, size);
	if (rc < 0)
		return rc;
	*pid_out = (pid_t)pid;
	*pidfd_out = SC_STEAL_FD(pidfd);
	return 0;
}
