/* The rlimits level: descriptors in flight. A descriptor sent with SCM_RIGHTS over an AF_UNIX
 * socket and not yet received is in no process's table: the file stays alive in the socket's
 * queue, where neither the walk of names nor held.c's reading of /proc sees it (245 unlinked
 * 4 MiB files sent over a socketpair and closed held 980 MiB against a 321 MiB bound; 16 GiB
 * at the default limits). The kernel counts them per sending uid (unix_inflight of its
 * user_struct, its real uid's) and shows the count nowhere, but refuses a sendmsg carrying
 * descriptors with ETOOMANYREFS exactly when that count is over the sender's RLIMIT_NOFILE
 * (unless it has CAP_SYS_RESOURCE or CAP_SYS_ADMIN). So a process of the sandbox's real uid
 * whose RLIMIT_NOFILE is k, sending one descriptor, tells whether more than k are in flight:
 * each counts at the file-size limit (a pipe or socket in flight too: nothing tells them
 * apart).
 *
 * The uid's count is the sandbox's: its cells' (all of them: one run's watch counts what a
 * sibling cell has in flight too) and its template's, which sends each parked cell's
 * descriptors to the host over the control socket, where they wait until the host reads them
 * (a run takes a cell and the template parks the next one at once). Those are allowed for:
 * the control socket's queue holds whole records (SOCK_SEQPACKET), so its byte count tells
 * how many wait, each with at most one cell's descriptors. A cell's own brief passes (a
 * session worker's answer to a fork, multiprocessing handing a descriptor to a process it
 * started) last until their receiver reads them: over is believed only when three probes in
 * a row say so. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "net/gate.h"
#include "rpc/control.h"
#include "rpc/fds.h"
#include "util/util.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif

#define PROBE_TRIES 3
#define PROBE_STACK (64u << 10)
/* How long a probe may take (~100 us here): longer, it is stopped or starved, and over. */
#define PROBE_TIMEOUT_US 1000000

/* UNDER and OVER as the kernel said; FAILED: the probe could not be made (not over: the count
 * is not known); SIGNALLED: stopped, killed or late (over, and no more tries). */
enum { PROBE_UNDER, PROBE_OVER, PROBE_FAILED, PROBE_SIGNALLED };

struct probe {
	int sock[2];
	uid_t uid;
	rlim_t k;
};

/* The child, sharing the caller's memory while the caller waits: raw calls only for the ids
 * (glibc's setxid would signal the caller's threads). The kernel counts what is in flight per
 * real uid (the sender's user_struct) and lets CAP_SYS_RESOURCE or CAP_SYS_ADMIN in its
 * effective set past the limit, so the probe changes its real uid only and empties its
 * effective set. Its effective uid stays root's: the host's memory it shares stays as
 * dumpable as it was (a change of the effective uid sets the shared mm's flag to
 * fs.suid_dumpable, the host's too), and no process of the cell's uid may trace it, read its
 * memory or set its limits (all of those want its three uids). Signals it can still be sent
 * (the cell's uid is its real one): the caller treats a stop or a death as over. */
static int probe_child(void *arg)
{
	const struct probe *p = arg;
	struct rlimit rl = {p->k, p->k};
	struct __user_cap_header_struct head = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct caps[2];
	if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &rl, NULL) < 0 ||
	    syscall(SYS_setresuid, p->uid, -1, -1) < 0 || syscall(SYS_capget, &head, caps) < 0)
		_exit(PROBE_FAILED);
	caps[0].effective = caps[1].effective = 0;
	if (syscall(SYS_capset, &head, caps) < 0)
		_exit(PROBE_FAILED);
	union sc_fd_cmsg u;
	char byte = 0;
	struct iovec iov = {&byte, 1};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	sc__msg_attach_fds(&mh, &u, &p->sock[0], 1);
	if (syscall(SYS_sendmsg, p->sock[0], &mh, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
		_exit(PROBE_UNDER);
	_exit(errno == ETOOMANYREFS ? PROBE_OVER : PROBE_FAILED);
}

/* Waits for the probe pid (pidfd: its pidfd) to end, at most PROBE_TIMEOUT_US: its result, or
 * PROBE_SIGNALLED when it stopped (continued or not), was killed or ran late (then it is
 * killed and reaped). The pidfd wakes the wait at its end; a stop, which it does not show, is
 * looked for each ms. */
static int probe_wait(pid_t pid, int pidfd)
{
	uint64_t until = sc__now_us() + PROBE_TIMEOUT_US;
	while (sc__now_us() < until) {
		siginfo_t si = {0};
		if (waitid(P_PID, (id_t)pid, &si,
			   WEXITED | WSTOPPED | WCONTINUED | WNOHANG | __WALL) < 0) {
			if (errno == EINTR)
				continue;
			return PROBE_SIGNALLED; /* reaped by another: its pid is not ours to kill */
		}
		if (si.si_pid == pid && si.si_code == CLD_EXITED)
			return si.si_status;
		if (si.si_pid == pid && (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED))
			return PROBE_SIGNALLED; /* reaped */
		if (si.si_pid == pid)
			break; /* stopped, or stopped and continued since the last look */
		poll(&(struct pollfd){.fd = pidfd, .events = POLLIN}, 1, 1);
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, NULL, __WALL) < 0 && errno == EINTR)
		;
	return PROBE_SIGNALLED;
}

/* Whether more than k descriptors are in flight from uid: enum above. One at a time in this
 * process: a probe's own descriptor is in flight until its socket closes. */
static int probe(uid_t uid, rlim_t k)
{
	static pthread_mutex_t one = PTHREAD_MUTEX_INITIALIZER;
	static _Alignas(16) char stack[PROBE_STACK];
	struct probe p = {.uid = uid, .k = k};
	int result = PROBE_FAILED, saved = errno; /* the child's calls set the caller's errno */
	sigset_t all, was;
	sigfillset(&all);
	pthread_mutex_lock(&one);
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, p.sock) == 0) {
		/* No exit signal: only a wait with __WALL reaps it, so no reaper of the
		 * caller's takes it. Signals blocked: no handler of the caller's runs in it. No
		 * CLONE_VFORK: a stopped probe would hold the caller for as long as it is. */
		pthread_sigmask(SIG_SETMASK, &all, &was);
		int pidfd = -1;
		pid_t pid = clone(probe_child, stack + sizeof(stack), CLONE_VM | CLONE_PIDFD, &p,
				  &pidfd);
		pthread_sigmask(SIG_SETMASK, &was, NULL);
		if (pid > 0)
			result = probe_wait(pid, pidfd);
		if (pidfd >= 0)
			close(pidfd);
		close(p.sock[0]);
		close(p.sock[1]);
	}
	pthread_mutex_unlock(&one);
	errno = saved;
	return result;
}

/* At most how many descriptors the template has in flight to the host now: the records
 * waiting in the control socket, each with one cell's. */
static size_t template_in_flight(const struct snapcell_sandbox *sb)
{
	int bytes = 0;
	if (ioctl(sb->ctl, SIOCINQ, &bytes) < 0 || bytes <= 0)
		return 0;
	size_t records =
		((size_t)bytes + sizeof(struct sc_ctl_msg) - 1) / sizeof(struct sc_ctl_msg);
	return records * (SC_CELL_NFDS + (sb->gate ? sc__gate_cell_fds(sb->gate) : 0));
}

bool sc__inflight_over(const struct snapcell_sandbox *sb, uint64_t room, uint64_t file_bytes)
{
	/* Only a sandbox with a uid of its own (locked: sc__ids_take): with the caller's, the
	 * count is the caller's too (its own passes to the template), and a shared one's is
	 * every sandbox's and their templates', which would be counted against this run. */
	if (sb->ids.lock_fd < 0 || sb->ids.uid == 0 || sb->ids.uid == geteuid() || geteuid() != 0 ||
	    file_bytes == 0)
		return false;
	for (int i = 0; i < PROBE_TRIES; i++) {
		if (i > 0)
			nanosleep(&(struct timespec){0, 1000000}, NULL); /* its receiver's turn */
		rlim_t k = (rlim_t)(room / file_bytes + template_in_flight(sb));
		int said = probe(sb->ids.uid, k);
		if (said == PROBE_SIGNALLED)
			return true;
		if (said != PROBE_OVER)
			return false;
	}
	return true;
}
