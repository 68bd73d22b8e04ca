/* The second filter of a cell armed for reset in place (below its policy, seccomp.c): the
 * calls through which a process reads its own counters (CPU time, faults, context switches,
 * I/O, its peak), which in a reset cell span every earlier run in it, go to the template as
 * user notifications (guest/counters.c answers them with this run's figures); so do the calls
 * that make a task, which the template only records; what no answer can make per run is
 * refused here. Not a policy of what a cell may do: a call this filter lets
 * through is still the policy's to allow, and the kernel takes the stricter answer of the two. */
#define _GNU_SOURCE
#include "guest.h"

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

#define ARG_LO(i)	  (offsetof(struct seccomp_data, args) + 8 * (i))
#define ARG_HI(i)	  (ARG_LO(i) + 4)
#define LD(off)		  BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define IF_EQ(k, jt, jf)  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (k), (jt), (jf))
#define IF_SET(k, jt, jf) BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, (k), (jt), (jf))
#define RET(v)		  BPF_STMT(BPF_RET | BPF_K, (v))
#define ALLOW		  RET(SECCOMP_RET_ALLOW)
#define NOTIFY		  RET(SECCOMP_RET_USER_NOTIF)
#define REFUSE		  RET(SECCOMP_RET_ERRNO | EINVAL)
/* A clock id that counts CPU time: the caller's process or thread clock, or one that names a
 * process or thread by its pid (negative: ~pid << 3 | kind); the kernel reads 32 bits. */
#define PROCESS_CLOCK CLOCK_PROCESS_CPUTIME_ID
#define THREAD_CLOCK  CLOCK_THREAD_CPUTIME_ID
#define PID_CLOCK     0x80000000u
/* With a clock id in A: what for a CPU clock, else allowed (five instructions). */
#define IF_CPU_CLOCK(what)                                                                         \
	IF_EQ(PROCESS_CLOCK, 3, 0), IF_EQ(THREAD_CLOCK, 2, 0), IF_SET(PID_CLOCK, 1, 0), ALLOW, what

/* Each block is entered with the call's number in A and ends in a return; the offsets skip
 * whole blocks. */
static const struct sock_filter program[] = {
	LD(offsetof(struct seccomp_data, arch)),
#ifdef NATIVE_ARCH
	IF_EQ(NATIVE_ARCH, 1, 0),
#endif
	ALLOW, /* another ABI: the policy decides (it kills) */
	LD(offsetof(struct seccomp_data, nr)),
	BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1), /* x32: the policy decides */
	ALLOW,
	/* a new task, made or tried (clone3: the policy's ENOSYS wins over a notification):
	 * the template records that the run made one, as a gone task (a child the kernel
	 * reaped, a clone that failed) leaves nothing else a reset sees but the pid it took */
	IF_EQ(SYS_clone, 0, 1),
	NOTIFY,
	IF_EQ(SYS_clone3, 0, 1),
	NOTIFY,
#ifdef SYS_fork
	IF_EQ(SYS_fork, 0, 1),
	NOTIFY,
	IF_EQ(SYS_vfork, 0, 1),
	NOTIFY,
#endif
	/* getrusage(RUSAGE_SELF or RUSAGE_THREAD): RUSAGE_CHILDREN is the run's own */
	IF_EQ(SYS_getrusage, 0, 5),
	LD(ARG_LO(0)),
	IF_EQ(RUSAGE_SELF, 2, 0),
	IF_EQ(RUSAGE_THREAD, 1, 0),
	ALLOW,
	NOTIFY,
#ifdef SYS_times
	IF_EQ(SYS_times, 0, 1),
	NOTIFY,
#endif
	/* clock_gettime on a CPU clock (the vDSO answers the others without a call) */
	IF_EQ(SYS_clock_gettime, 0, 6),
	LD(ARG_LO(0)),
	IF_CPU_CLOCK(NOTIFY),
	/* a sleep until an absolute point of a CPU clock ends, or not, where the clock's whole
	 * count stands: refused (a relative one counts from now) */
	IF_EQ(SYS_clock_nanosleep, 0, 8),
	LD(ARG_LO(1)),
	IF_SET(TIMER_ABSTIME, 0, 4),
	LD(ARG_LO(0)),
	IF_CPU_CLOCK(REFUSE),
	/* a timer: on a CPU clock, an absolute timer_settime and timer_gettime would turn it
	 * into a reading of the whole count; on any clock, its id is the count of timers the
	 * process made in its whole life (one a run made and deleted leaves no other trace, and
	 * the next run's first timer had the id after it): refused */
	IF_EQ(SYS_timer_create, 0, 1),
	REFUSE,
/* RLIMIT_CPU set: its SIGXCPU and SIGKILL come at whole-life seconds, which a run that
 * lowers it times; the template decides */
#ifdef SYS_setrlimit
	IF_EQ(SYS_setrlimit, 0, 4),
	LD(ARG_LO(0)),
	IF_EQ(RLIMIT_CPU, 1, 0),
	ALLOW,
	NOTIFY,
#endif
	IF_EQ(SYS_prlimit64, 0, 8),
	LD(ARG_LO(1)),
	IF_EQ(RLIMIT_CPU, 0, 4),
	LD(ARG_LO(2)),
	IF_EQ(0, 0, 3),
	LD(ARG_HI(2)),
	IF_EQ(0, 0, 1),
	ALLOW,
	NOTIFY,
	ALLOW,
};

int sc__seccomp_counters_install(void)
{
	struct sock_fprog prog = {.len = (unsigned short)SC_ARRAY_LEN(program),
				  .filter = (struct sock_filter *)program};
	long fd = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
			  &prog);
	return fd < 0 ? -errno : (int)fd;
}
