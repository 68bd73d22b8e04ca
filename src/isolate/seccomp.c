/* The cell's system-call policy, fitted to CPython:
 * allow what the interpreter and its standard library use, answer "feature absent" (ENOSYS)
 * where libc or Python fall back, deny the rest with EPERM so code can recover, and kill the
 * process on exploit-only calls. Compiled once in the template, installed in each cell. Not a
 * filesystem policy: the mount layout is. */
#define _GNU_SOURCE
#include "guest.h"

#include <asm/prctl.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

static const char *const allowed[] = {
	/* memory, time, identity */
	"brk",
	"mmap",
	"munmap",
	"mremap",
	"mprotect",
	"msync",
	"mincore",
	"madvise",
	"clock_gettime",
	"clock_getres",
	"clock_nanosleep",
	"nanosleep",
	"gettimeofday",
	"time",
	"getitimer",
	"setitimer",
	"alarm",
	"times",
	"getrusage",
	"getpid",
	"getppid",
	"gettid",
	"getuid",
	"geteuid",
	"getgid",
	"getegid",
	"getresuid",
	"getresgid",
	"getgroups",
	"getpgrp",
	"getpgid",
	"getsid",
	"setsid",
	"setpgid",
	"getpriority",
	"uname",
	"getrandom",
	"getcpu",
	"sched_yield",
	"sched_getaffinity",
	"sched_getparam",
	"sched_getscheduler",
	"sched_get_priority_min",
	"sched_get_priority_max",
	"restart_syscall",
	"rseq",
	"set_robust_list",
	"get_robust_list",
	"set_tid_address",
	"futex",
	"futex_waitv",
	"exit",
	"exit_group",
	"capget",
	"getrlimit",
	"setrlimit",
	/* signals: confined by the cell's pid namespace and session */
	"rt_sigaction",
	"rt_sigprocmask",
	"rt_sigreturn",
	"rt_sigpending",
	"rt_sigtimedwait",
	"rt_sigsuspend",
	"sigaltstack",
	"pause",
	"kill",
	"tgkill",
	"tkill",
	"signalfd",
	"signalfd4",
	"timer_settime",
	"timer_gettime",
	"timer_getoverrun",
	"timer_delete",
	"timerfd_create",
	"timerfd_settime",
	"timerfd_gettime",
	/* descriptors and files: the mount layout is the filesystem policy */
	"read",
	"write",
	"pread64",
	"pwrite64",
	"readv",
	"writev",
	"preadv",
	"pwritev",
	"preadv2",
	"pwritev2",
	"lseek",
	"close",
	"close_range",
	"dup",
	"dup2",
	"dup3",
	"pipe",
	"pipe2",
	"fstat",
	"stat",
	"lstat",
	"newfstatat",
	"statx",
	"fstatfs",
	"statfs",
	"access",
	"faccessat",
	"faccessat2",
	"open",
	"openat",
	"creat",
	"readlink",
	"readlinkat",
	"getdents",
	"getdents64",
	"getcwd",
	"chdir",
	"fchdir",
	"mkdir",
	"mkdirat",
	"rmdir",
	"unlink",
	"unlinkat",
	"rename",
	"renameat",
	"renameat2",
	"chmod",
	"fchmod",
	"fchmodat",
	"fchmodat2",
	"chown",
	"fchown",
	"fchownat",
	"lchown",
	"utime",
	"utimes",
	"utimensat",
	"futimesat",
	"umask",
	"ftruncate",
	"truncate",
	"fallocate",
	"fsync",
	"fdatasync",
	"sync_file_range",
	"fadvise64",
	"flock",
	"sendfile",
	"copy_file_range",
	"link",
	"linkat",
	"symlink",
	"symlinkat",
	"poll",
	"ppoll",
	"select",
	"pselect6",
	"epoll_create",
	"epoll_create1",
	"epoll_ctl",
	"epoll_wait",
	"epoll_pwait",
	"epoll_pwait2",
	"eventfd",
	"eventfd2",
	"wait4",
	"waitid",
	/* only on sockets the cell already holds (its frame socket, socketpairs, TCP to the
	 * gate); send and receive calls are argument-checked below */
	"shutdown",
	"getsockname",
	"getpeername",
	/* getsockopt and setsockopt: argument-checked below */
	/* processes; clone is argument-checked below */
	"fork",
	"vfork",
};

/* "Feature absent": libc and CPython fall back (clone3 -> clone keeps threads working). */
static const char *const absent[] = {
	"clone3",
	/* the host's task count, load, uptime and RAM (glibc's sysconf(_SC_PHYS_PAGES) then
	 * reads an unfilled struct: its number means nothing, and qsort, which sizes a buffer
	 * by it, sorts either way) */
	"sysinfo",
	"io_uring_setup",
	"io_uring_enter",
	"io_uring_register",
	"fsopen",
	"fsconfig",
	"fsmount",
	"fspick",
	"open_tree",
	"move_mount",
	"mount_setattr",
	"pidfd_open",
	"pidfd_getfd",
	"pidfd_send_signal",
	"openat2",
	"memfd_secret",
	"process_madvise",
	"landlock_create_ruleset",
	"landlock_add_rule",
	"landlock_restrict_self",
	"map_shadow_stack",
};

/* shutil.copy2 ignores EOPNOTSUPP from the xattr calls and fails on EPERM. */
static const char *const no_xattr[] = {
	"setxattr",  "lsetxattr",  "fsetxattr",	 "getxattr",	"lgetxattr",	"fgetxattr",
	"listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr",
};

/* Never called by benign Python; classic exploit primitives. The process dies (SIGSYS). */
static const char *const tripwires[] = {
	"kexec_load",	  "kexec_file_load", "init_module", "finit_module", "delete_module",
	"iopl",		  "ioperm",	     "modify_ldt",  "bpf",	    "perf_event_open",
	"userfaultfd",	  "keyctl",	     "add_key",	    "request_key",  "open_by_handle_at",
	"lookup_dcookie",
};

static const unsigned long ioctl_ok[] = {TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIOCLEX, FIONCLEX};
static const int fcntl_ok[] = {F_DUPFD,	    F_DUPFD_CLOEXEC, F_GETFD,	  F_SETFD,     F_GETFL,
			       F_SETFL,	    F_GETLK,	     F_SETLK,	  F_SETLKW,    F_OFD_GETLK,
			       F_OFD_SETLK, F_OFD_SETLKW,    F_GET_SEALS, F_GETPIPE_SZ};
static const int prctl_ok[] = {PR_SET_NAME,	    PR_GET_NAME,     PR_GET_DUMPABLE,
			       PR_GET_NO_NEW_PRIVS, PR_CAPBSET_READ, PR_GET_SECCOMP,
			       0x53564d41 /* PR_SET_VMA */};

#define CLONE_NS_FLAGS                                                                             \
	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
	 CLONE_NEWCGROUP | 0x00000080 /* CLONE_NEWTIME */)

/* The first syscall number above those the table names; newer calls answer ENOSYS. */
#define FIRST_FUTURE_NR 435
#define LAST_FUTURE_NR	511

static int add_names(scmp_filter_ctx ctx, uint32_t action, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(names[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* unknown to this libseccomp: falls under the default */
		int rc = seccomp_rule_add(ctx, action, nr, 0);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* TCP sockets and connect; everything else of socket() (AF_UNIX, UDP, raw, netlink,
 * packet) falls to the default, as do bind, listen and accept. */
static int add_tcp_rules(scmp_filter_ctx ctx)
{
	static const int families[] = {AF_INET, AF_INET6};
	static const int protocols[] = {0, IPPROTO_TCP};
	int rc = 0;
	for (size_t f = 0; rc == 0 && f < SC_ARRAY_LEN(families); f++)
		for (size_t p = 0; rc == 0 && p < SC_ARRAY_LEN(protocols); p++)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3,
					      SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[f]),
					      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM),
					      SCMP_A2(SCMP_CMP_EQ, (scmp_datum_t)protocols[p]));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(connect), 0);
	return rc;
}

/* AF_UNIX sockets of any type, with bind, listen, accept and connect: multiprocessing's
 * forkserver and socket servers among the cell's own processes. Only without network (no
 * TCP socket can exist, so these calls can only act on AF_UNIX ones: seccomp cannot tell a
 * socket's family at listen) and only under the Landlock domain sc__landlock_exec_ruleset
 * makes with unix_scope, whose scope keeps abstract sockets within the cell. Path sockets
 * the cell makes live in its own /tmp and /output; the host's, in a directory bound
 * read-only, stay out of reach because the template asks for this only where Landlock
 * confines pathname sockets too or the root binds no directory of the caller's. */
static int add_unix_rules(scmp_filter_ctx ctx)
{
	static const char *const calls[] = {"bind", "listen", "accept", "accept4", "connect"};
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
				  SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 1,
				      SCMP_A0(SCMP_CMP_NE, AF_UNIX));
	if (rc == 0)
		rc = add_names(ctx, SCMP_ACT_ALLOW, calls, SC_ARRAY_LEN(calls));
	return rc;
}

/* Sending and receiving, without MSG_OOB: out-of-band data on AF_UNIX sockets is rarely
 * used and the primitive of kernel bugs (CVE-2025-38236), so it answers EOPNOTSUPP. */
static int add_io_rules(scmp_filter_ctx ctx)
{
	static const struct {
		const char *name;
		unsigned flags_arg;
	} calls[] = {{"sendto", 3},  {"recvfrom", 3}, {"sendmsg", 2},
		     {"recvmsg", 2}, {"sendmmsg", 3}, {"recvmmsg", 3}};
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < SC_ARRAY_LEN(calls); i++) {
		int nr = seccomp_syscall_resolve_name(calls[i].name);
		struct scmp_arg_cmp oob = {calls[i].flags_arg, SCMP_CMP_MASKED_EQ, MSG_OOB,
					   MSG_OOB};
		struct scmp_arg_cmp no_oob = {calls[i].flags_arg, SCMP_CMP_MASKED_EQ, MSG_OOB, 0};
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, nr, 1, &no_oob);
		if (rc == 0)
			rc = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EOPNOTSUPP), nr, 1, &oob);
	}
	return rc;
}

/* Allows call nr for every value of its int argument arg but `except` (refused as the kernel
 * refuses an option it does not know). The kernel reads only the argument's low 32 bits,
 * which a comparison of all 64 cannot single out, so what is allowed is spelled as [0,
 * except) and aligned blocks up to 2^32; a value with high bits set falls to the default. */
static int allow_all_but(scmp_filter_ctx ctx, int nr, unsigned arg, uint64_t except)
{
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
				  SCMP_CMP(arg, SCMP_CMP_LT, (scmp_datum_t)except));
	for (uint64_t lo = except + 1; rc == 0 && lo < 1ULL << 32;) {
		uint64_t size = lo & -lo;
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
				      SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, ~(size - 1), lo));
		lo += size;
	}
	return rc == 0 ? seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOPROTOOPT), nr, 1,
					  SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, 0xffffffffu, except))
		       : rc;
}

/* No pidfd of a socket's peer: the host made a session worker's frame socket, so
 * SO_PEERPIDFD on it, or SO_PASSPIDFD and a frame from the host, handed code a live pidfd for
 * the host process. */
static int add_sockopt_rules(scmp_filter_ctx ctx)
{
	enum { PASS_PIDFD = 76, PEER_PIDFD = 77 }; /* SO_PASSPIDFD, SO_PEERPIDFD (Linux 6.5) */
	int rc = allow_all_but(ctx, SCMP_SYS(getsockopt), 2, PEER_PIDFD);
	return rc == 0 ? allow_all_but(ctx, SCMP_SYS(setsockopt), 2, PASS_PIDFD) : rc;
}

static int add_arg_rules(scmp_filter_ctx ctx, bool network, bool unix_sockets, bool host)
{
	int rc = add_io_rules(ctx);
	if (rc == 0)
		rc = add_sockopt_rules(ctx);
	for (size_t i = 0; rc == 0 && i < SC_ARRAY_LEN(ioctl_ok); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, ioctl_ok[i]));
	for (size_t i = 0; rc == 0 && i < SC_ARRAY_LEN(fcntl_ok); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1,
				      SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)fcntl_ok[i]));
	for (size_t i = 0; rc == 0 && i < SC_ARRAY_LEN(prctl_ok); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1,
				      SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)prctl_ok[i]));
	/* Timers that cannot wake a stopped cell (src/isolate/freeze.c): SIGALRM's (no
	 * sigevent), or on the caller's own CPU clocks, which a stopped process does not
	 * advance. A wall-clock timer sending SIGCONT continued a paused run's cell, and one
	 * sending SIGKILL to a stopped process orphaned a stopped group, which the kernel
	 * continues; the rest is EPERM. */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(timer_create), 1,
				      SCMP_A1(SCMP_CMP_EQ, 0));
	for (int clock = CLOCK_PROCESS_CPUTIME_ID; rc == 0 && clock <= CLOCK_THREAD_CPUTIME_ID;
	     clock++)
		rc = seccomp_rule_add(
			ctx, SCMP_ACT_ALLOW, SCMP_SYS(timer_create), 1,
			SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, (scmp_datum_t)clock));
	/* Fork and threads, never new namespaces, nor a process whose parent is the caller's
	 * (CLONE_PARENT): at the rlimits level a cell's sibling is the template's child, outside
	 * the cell's tree, which the host's /tmp watch reads (src/isolate/held.c). Nor a pidfd
	 * (as pidfd_open is absent): a clone whose pidfd cannot be stored fails after the kernel
	 * took a pid number, which leaves no child and no thread to see, and moved the pid
	 * namespace's counter on for a reset cell's next run (guest/reset.c). */
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ,
					      CLONE_NS_FLAGS | CLONE_PARENT | CLONE_PIDFD, 0));
	if (rc == 0 && !host) /* asyncio's self-pipe needs AF_UNIX pairs */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
				      SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	if (rc == 0 && !host)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
				      SCMP_A0(SCMP_CMP_NE, AF_UNIX));
	/* Without network no socket of another family: PermissionError, asyncio still runs. */
	if (rc == 0)
		rc = network ? add_tcp_rules(ctx)
		     : unix_sockets
			     ? add_unix_rules(ctx)
			     : seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(socket), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 1,
				      SCMP_A0(SCMP_CMP_EQ, 0));
	if (rc == 0) /* os.mkfifo only; no device nodes */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mknodat), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, S_IFMT, S_IFIFO));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mknod), 1,
				      SCMP_A1(SCMP_CMP_MASKED_EQ, S_IFMT, S_IFIFO));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
				      SCMP_A0(SCMP_CMP_EQ, 0xffffffffu));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
				      SCMP_A0(SCMP_CMP_EQ, 0));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(arch_prctl), 1,
				      SCMP_A0(SCMP_CMP_EQ, ARCH_GET_FS));
	return rc;
}

/* A cell with an interpreter to exec (Landlock decides which file: seccomp cannot see the
 * path). The loader of a fresh program sets its thread pointer, and the exec'd helper makes
 * itself non-dumpable again (exec reset it); setting it back to 1 stays denied. */
static int add_exec_rules(scmp_filter_ctx ctx)
{
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(execve), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(execveat), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(arch_prctl), 1,
				      SCMP_A0(SCMP_CMP_EQ, ARCH_SET_FS));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 2,
				      SCMP_A0(SCMP_CMP_EQ, PR_SET_DUMPABLE),
				      SCMP_A1(SCMP_CMP_EQ, 0));
	return rc;
}

/* Path-based attribute changes, which Landlock does not see: the cells' uid owns files they
 * must not change (the caller's, or the sandbox's work directory and sibling cells'). */
static const char *const path_attrs[] = {
	"chmod",    "fchmodat", "fchmodat2", "chown",	  "lchown",
	"fchownat", "utime",	"utimes",    "futimesat", "truncate",
};

static bool listed(const char *name, const char *const *names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(name, names[i]))
			return true;
	return false;
}

/* Cells reset in place (SC_SECCOMP_NO_LAZY_FREE): madvise with the advice that neither frees
 * lazily nor sets flags on a mapping, which stay after a reset and that /proc/PID/maps does
 * not show (MADV_WIPEONFORK, MADV_DONTFORK, MADV_HUGEPAGE, MADV_MERGEABLE, MADV_DONTDUMP,
 * MADV_RANDOM, ...: a run could leave them on the next run's memory), nor installs guard
 * markers; the rest EINVAL, the answer to advice a kernel does not know. */
static int add_reuse_madvise_rules(scmp_filter_ctx ctx)
{
	static const unsigned ok[] = {MADV_NORMAL,
				      MADV_WILLNEED,
				      MADV_DONTNEED,
				      20 /* MADV_COLD */,
				      21 /* MADV_PAGEOUT */,
				      22 /* MADV_POPULATE_READ */,
				      23 /* MADV_POPULATE_WRITE */,
				      24 /* MADV_DONTNEED_LOCKED */};
	enum { LAST = 24 };
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), SCMP_SYS(madvise), 1,
				  SCMP_A2_32(SCMP_CMP_GT, LAST));
	for (unsigned advice = 0; rc == 0 && advice <= LAST; advice++) {
		bool allowed_advice = false;
		for (size_t i = 0; i < SC_ARRAY_LEN(ok); i++)
			allowed_advice = allowed_advice || ok[i] == advice;
		rc = seccomp_rule_add(ctx, allowed_advice ? SCMP_ACT_ALLOW : SCMP_ACT_ERRNO(EINVAL),
				      SCMP_SYS(madvise), 1, SCMP_A2_32(SCMP_CMP_EQ, advice));
	}
	return rc;
}

/* The rlimits level: open and openat without O_TMPFILE. A cell's /tmp there is a directory
 * on the work directory's filesystem, and a file with no name holds its blocks where the
 * host's walk of the names cannot see them; "not supported by this filesystem" makes
 * tempfile.TemporaryFile fall back to mkstemp and unlink, whose open file the host's watch counts
 * (src/isolate/held.c). openat2, whose flags are in a struct, is refused whole (absent).
 * Cells reset in place too: a file with no name takes an inode number of the cell's /tmp
 * without changing the directory, which the reset reads (guest/reset_leftovers.c). */
static int add_no_tmpfile_rules(scmp_filter_ctx ctx)
{
	const scmp_datum_t tmpfile = O_TMPFILE & ~O_DIRECTORY;
	int rc = 0;
	for (unsigned arg = 1; rc == 0 && arg <= 2; arg++) {
		int nr = arg == 1 ? SCMP_SYS(open) : SCMP_SYS(openat);
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
				      SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, tmpfile, 0));
		if (rc == 0)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EOPNOTSUPP), nr, 1,
					      SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, tmpfile, tmpfile));
	}
	return rc;
}

/* The allowed list, less what the rlimits level argument-checks or refuses. */
static int add_allowed(scmp_filter_ctx ctx, unsigned flags)
{
	static const char *const host_checked[] = {"kill", "utimensat", "open", "openat"};
	for (size_t i = 0; i < SC_ARRAY_LEN(allowed); i++) {
		if ((flags & SC_SECCOMP_HOST) &&
		    listed(allowed[i], host_checked, SC_ARRAY_LEN(host_checked)))
			continue;
		if ((flags & SC_SECCOMP_NO_PATH_ATTRS) &&
		    listed(allowed[i], path_attrs, SC_ARRAY_LEN(path_attrs)))
			continue;
		if ((flags & SC_SECCOMP_NO_LAZY_FREE) &&
		    (!strcmp(allowed[i], "madvise") || !strcmp(allowed[i], "open") ||
		     !strcmp(allowed[i], "openat")))
			continue;
		int rc = add_names(ctx, SCMP_ACT_ALLOW, &allowed[i], 1);
		if (rc < 0)
			return rc;
	}
	if (!(flags & SC_SECCOMP_NO_LAZY_FREE))
		return 0;
	int rc = add_reuse_madvise_rules(ctx);
	return rc == 0 ? add_no_tmpfile_rules(ctx) : rc;
}

unsigned sc__seccomp_namespaces_flags(bool network, size_t n_python_paths, int landlock_abi,
				      bool reuse)
{
	bool exec = landlock_abi >= 1;
	bool unix_sockets = !network && landlock_abi >= SC_LANDLOCK_ABI_UNIX &&
			    (landlock_abi >= SC_LANDLOCK_ABI_UNIX_PATH || n_python_paths == 0);
	return (network ? SC_SECCOMP_NETWORK : 0) | (exec ? SC_SECCOMP_EXEC : 0) |
	       (unix_sockets ? SC_SECCOMP_UNIX : 0) | (reuse ? SC_SECCOMP_NO_LAZY_FREE : 0);
}

/* The rlimits level: kill(-1) refused where signals are not scoped (pid_t is 32 bits),
 * socketpairs of stream and seqpacket types only, utimensat by path only where attributes by
 * path are allowed. */
static int add_host_rules(scmp_filter_ctx ctx, unsigned flags)
{
	int rc = (flags & SC_SECCOMP_SIGNALS_SCOPED)
			 ? seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 0)
			 : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
					    SCMP_A0_32(SCMP_CMP_NE, (uint32_t)-1));
	for (int type = SOCK_STREAM; rc == 0 && type <= SOCK_SEQPACKET; type += 4)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 2,
				      SCMP_A0(SCMP_CMP_EQ, AF_UNIX),
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, (scmp_datum_t)type));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
				      SCMP_A0(SCMP_CMP_NE, AF_UNIX));
	if (rc == 0)
		rc = add_no_tmpfile_rules(ctx);
	if (rc == 0 && (flags & SC_SECCOMP_NO_PATH_ATTRS)) /* futimens: no path */
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(utimensat), 1,
				      SCMP_A1(SCMP_CMP_EQ, 0));
	else if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(utimensat), 0);
	return rc;
}

static int add_future(scmp_filter_ctx ctx)
{
	for (int nr = FIRST_FUTURE_NR; nr <= LAST_FUTURE_NR; nr++) {
		char *name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);
		free(name);
		if (name)
			continue; /* named: the tables above decide */
		int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
		if (rc < 0 && rc != -EEXIST && rc != -EDOM && rc != -EINVAL)
			return rc;
	}
	return 0;
}

static int build(scmp_filter_ctx ctx, unsigned flags)
{
	int rc;
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0)) < 0 ||
	    (rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
		return rc;
	if ((rc = add_allowed(ctx, flags)) < 0 ||
	    (rc = add_names(ctx, SCMP_ACT_ERRNO(ENOSYS), absent, SC_ARRAY_LEN(absent))) < 0 ||
	    (rc = add_names(ctx, SCMP_ACT_ERRNO(EOPNOTSUPP), no_xattr, SC_ARRAY_LEN(no_xattr))) <
		    0 ||
	    (rc = add_names(ctx, SCMP_ACT_KILL_PROCESS, tripwires, SC_ARRAY_LEN(tripwires))) < 0)
		return rc;
	if ((rc = add_arg_rules(ctx, flags & SC_SECCOMP_NETWORK, flags & SC_SECCOMP_UNIX,
				flags & SC_SECCOMP_HOST)) < 0 ||
	    ((flags & SC_SECCOMP_EXEC) && (rc = add_exec_rules(ctx)) < 0) ||
	    ((flags & SC_SECCOMP_HOST) && (rc = add_host_rules(ctx, flags)) < 0))
		return rc;
	return add_future(ctx);
}

int sc__seccomp_compile(struct sc_bpf *out, unsigned flags, struct snapcell_error *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx)
		return sc__err(err, -ENOMEM, "seccomp_init");
	int rc = build(ctx, flags);
	if (rc < 0) {
		seccomp_release(ctx);
		return sc__err(err, rc, "seccomp policy");
	}
	/* libseccomp 2.5 exports only to a descriptor; a pipe holds the few KiB of BPF. */
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		seccomp_release(ctx);
		return sc__err(err, -errno, "pipe");
	}
	rc = seccomp_export_bpf(ctx, p[1]);
	seccomp_release(ctx);
	close(p[1]);
	static char buf[65536];
	ssize_t n = rc < 0 ? -1 : read(p[0], buf, sizeof(buf));
	close(p[0]);
	if (rc < 0 || n <= 0 || n % sizeof(struct sock_filter) || n == sizeof(buf))
		return sc__err(err, rc < 0 ? rc : -EIO, "export seccomp filter");
	out->filter = malloc((size_t)n);
	if (!out->filter)
		return sc__err(err, -ENOMEM, "seccomp filter");
	memcpy(out->filter, buf, (size_t)n);
	out->len = (unsigned short)(n / sizeof(struct sock_filter));
	return 0;
}

int sc__seccomp_compile_to(int fd, unsigned flags)
{
	pid_t self = getpid();
	struct sc_bpf bpf = {0};
	int ok = sc__write_all(fd, &self, sizeof(self)) == 0 &&
		 sc__write_all(fd, &flags, sizeof(flags)) == 0 &&
		 sc__seccomp_compile(&bpf, flags, NULL) == 0 &&
		 sc__write_all(fd, &bpf.len, sizeof(bpf.len)) == 0 &&
		 sc__write_all(fd, bpf.filter, bpf.len * sizeof(struct sock_filter)) == 0;
	free(bpf.filter);
	return ok ? 0 : -1;
}

int sc__seccomp_install(const struct sc_bpf *bpf)
{
	struct sock_fprog prog = {.len = bpf->len, .filter = bpf->filter};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return -errno;
	return 0;
}
