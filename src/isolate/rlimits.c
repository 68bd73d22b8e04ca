/* Resource limits for a cell. They are the backstop where no cgroup controller is delegated:
 * address space for memory, RLIMIT_NPROC (counted per user namespace, so per sandbox) for
 * processes, RLIMIT_CPU for CPU time.
 *
 * The kernel counts some quotas per user through every user namespace level: a cell's pending
 * signals are charged to the sandbox's uid and also to its outside uid, against the limit the
 * host user had. Left at the host's value, one cell could queue ~96k real-time signals (kill()
 * with a handler installed) and make timer_create and sigqueue fail for every process of that
 * outside uid, host ones included. Each such quota a cell can reach is set low here:
 * SIGPENDING (SC_CELL_SIGPENDING per sandbox: the count is the sandbox uid's), MSGQUEUE and
 * MEMLOCK (0: POSIX queues and locked memory are not a cell's business). */
#define _GNU_SOURCE
#include "guest.h"

#include <errno.h>
#include <sys/resource.h>

#include "util/util.h"

/* Signals a sandbox may have queued at once (all its cells together). */
#define SC_CELL_SIGPENDING 256

int sc__rlimits_apply(const struct sc_rlimits *lim, struct snapcell_error *err)
{
	rlim_t cpu_s = (rlim_t)((lim->cpu_ms + 999) / 1000);
	const struct {
		int resource;
		const char *name;
		rlim_t soft, hard;
	} table[] = {
		{RLIMIT_AS, "RLIMIT_AS", lim->memory_bytes, lim->memory_bytes},
		/* soft = hard: a cell is pid 1 of its namespace, which the kernel's SIGXCPU
		 * (default action) cannot end; SIGKILL at the hard limit can */
		{RLIMIT_CPU, "RLIMIT_CPU", cpu_s, cpu_s},
		{RLIMIT_NPROC, "RLIMIT_NPROC", lim->processes, lim->processes},
		{RLIMIT_FSIZE, "RLIMIT_FSIZE", lim->file_bytes, lim->file_bytes},
		{RLIMIT_NOFILE, "RLIMIT_NOFILE", lim->open_files, lim->open_files},
		{RLIMIT_CORE, "RLIMIT_CORE", 0, 0},
		{RLIMIT_MEMLOCK, "RLIMIT_MEMLOCK", 0, 0},
		{RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE", 0, 0},
		{RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING", SC_CELL_SIGPENDING, SC_CELL_SIGPENDING},
		/* no real-time scheduling or raised priority, whatever the host allows */
		{RLIMIT_RTPRIO, "RLIMIT_RTPRIO", 0, 0},
		{RLIMIT_RTTIME, "RLIMIT_RTTIME", 0, 0},
		{RLIMIT_NICE, "RLIMIT_NICE", 0, 0},
	};
	for (size_t i = 0; i < SC_ARRAY_LEN(table); i++) {
		struct rlimit rl = {table[i].soft, table[i].hard};
		struct rlimit cur;
		/* Never try to raise a hard limit the host already set lower. */
		if (getrlimit(table[i].resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY) {
			if (rl.rlim_max > cur.rlim_max)
				rl.rlim_max = cur.rlim_max;
			if (rl.rlim_cur > rl.rlim_max)
				rl.rlim_cur = rl.rlim_max;
		}
		if (setrlimit(table[i].resource, &rl) < 0)
			return sc__err(err, -errno, "setrlimit %s", table[i].name);
	}
	return 0;
}
