/* The template's answers to what a cell armed for reset in place reads of its own counters: the
 * calls src/isolate/seccomp_counters.c sends it as seccomp user notifications (getrusage of the
 * process or a thread, times, clock_gettime on a CPU clock, setting RLIMIT_CPU). A reset cell's
 * counters span every run it held, so a run would read how much CPU, how many faults and how
 * large a peak the users before it had; the answer is this run's figures: the cell's now, from
 * the template's procfs of the sandbox and its CPU clocks, less those at the stop before the
 * run (the parked stop, then each reset's), written into the caller's memory. Not the reset
 * (reset.c), which calls in at those stops. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/times.h>
#include <time.h>
#include <unistd.h>

#include "counters.h"
#include "template.h"
#include "util/pagemap_scan.h"
#include "util/util.h"

/* The kernel's CPU clock ids (its posix-timers.h): ~pid << 3 | per-thread << 2 |
 * which. */
enum { CPUCLOCK_PROF, CPUCLOCK_VIRT, CPUCLOCK_SCHED, CPUCLOCK_WHICH_MASK = 3 };
#define CPUCLOCK_PERTHREAD 4

#define KEPT_MAX 5 /* stat, status, io; the main thread's schedstat and stat */

/* One set of counters, of the process or of one thread, in the units the calls answer in. */
struct figures {
	uint64_t sched_ns;		  /* CPU time, exact */
	uint64_t prof_ns, virt_ns;	  /* user and system, user (as sampled at ticks) */
	uint64_t minflt, majflt;	  /* page faults */
	uint64_t nvcsw, nivcsw;		  /* context switches */
	uint64_t read_bytes, write_bytes; /* storage I/O */
	uint64_t peak_kib; /* VmHWM: the peak resident size since the stop (a reset clears it) */
};

/* One armed cell's. In a mapping of its own marked MADV_DONTFORK: the bases are the figures of
 * the runs before, which no later cell (a fork of the template) may carry in its memory. */
struct sc_counters {
	pid_t pid;    /* the cell, in the template's pid namespace */
	pid_t ns_pid; /* the cell in its own (NSpid's last), as its clock ids name it */
	int listener;
	bool watched;	/* in the epoll set */
	bool reset;	/* some run ended here: another run's figures are in the counters */
	bool made_task; /* a clone, clone3, fork or vfork came since the stop (answer) */
	struct figures base, thread_base; /* the process's and its main thread's, at the stop */
	/* The files every reset's rebase reads (take_base), kept open from the cell's first
	 * reset on: the path walk, open and close of each cost more than its read. Read from
	 * offset 0, a kept file is made afresh; opened by pid, it stays the cell's. */
	struct kept_proc {
		char path[40];
		int fd;
	} kept[KEPT_MAX];
	size_t n_kept;
};

static int proc_fd = -1;
static int epoll_fd = -1;

/* At most this many notifications a turn of the template's loop, one per cell: the template
 * serves the whole sandbox on one thread, and a cell that floods it must not hold up resets,
 * parks or other cells' answers. */
#define SERVE_MAX 16

int sc_counters_poll_fd(void)
{
	return epoll_fd;
}

/* A file of the sandbox's procfs (e.g. "57/task/57/stat") into buf, NUL-terminated (cut at
 * cap - 1); kept open in keep's table when keep is given. Every file read here is made whole by
 * one call of the kernel (single_open's show): one read has all of it. */
static int read_proc_kept(struct sc_counters *keep, const char *path, char *buf, size_t cap)
{
	int fd = -1;
	for (size_t i = 0; keep && i < keep->n_kept && fd < 0; i++)
		if (!strcmp(keep->kept[i].path, path))
			fd = keep->kept[i].fd;
	bool owned = fd < 0;
	if (owned && (fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (owned && keep && keep->n_kept < KEPT_MAX && strlen(path) < sizeof(keep->kept[0].path)) {
		snprintf(keep->kept[keep->n_kept].path, sizeof(keep->kept[0].path), "%s", path);
		keep->kept[keep->n_kept++].fd = fd;
		owned = false;
	}
	ssize_t n = pread(fd, buf, cap - 1, 0);
	if (owned)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	return n > 0 ? 0 : n < 0 ? -errno : -EIO;
}

static int read_proc(const char *path, char *buf, size_t cap)
{
	return read_proc_kept(NULL, path, buf, cap);
}

/* The number after key ("\nVmHWM:") in a status text, or 0. */
static uint64_t field(const char *text, const char *key)
{
	const char *at = strstr(text, key);
	return at ? strtoull(at + strlen(key), NULL, 10) : 0;
}

static uint64_t ticks_ns(long long ticks)
{
	long hz = sysconf(_SC_CLK_TCK);
	return ticks > 0 ? (uint64_t)ticks * (1000000000ull / (uint64_t)(hz > 0 ? hz : 100)) : 0;
}

static uint64_t clock_ns(clockid_t clock)
{
	struct timespec ts;
	if (clock_gettime(clock, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Context switches of every live thread (the process's, as getrusage sums them; those of
 * threads that exited meanwhile are left out: the kernel keeps them where no file shows). */
static void add_switches(const char *dir, struct figures *f, char *text, size_t cap)
{
	char path[320];
	snprintf(path, sizeof(path), "%s/task", dir);
	int fd = openat(proc_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/task/%s/status", dir, e->d_name);
		if (read_proc(path, text, cap) == 0) {
			f->nvcsw += field(text, "\nvoluntary_ctxt_switches:");
			f->nivcsw += field(text, "\nnonvoluntary_ctxt_switches:");
		}
	}
	closedir(d);
}

/* The process's counters (tid 0: every thread's and the exited ones'), or one thread's; only
 * the CPU clocks when clocks_only; the files kept open in keep's table when keep is given. The
 * buffers hold a run's figures and are zeroed after (the template's stack is every later
 * cell's). */
static int read_figures(pid_t pid, pid_t tid, bool clocks_only, struct figures *f,
			struct sc_counters *keep)
{
	char dir[48], path[64], text[4096];
	if (tid)
		snprintf(dir, sizeof(dir), "%d/task/%d", (int)pid, (int)tid);
	else
		snprintf(dir, sizeof(dir), "%d", (int)pid);
	memset(f, 0, sizeof(*f));
	int rc = 0;
	if (tid == 0) { /* the process's CPU clocks, exact where the kernel counts exactly */
		clockid_t base = (clockid_t)((unsigned)~pid << 3);
		if (!(f->sched_ns = clock_ns(base | CPUCLOCK_SCHED)))
			rc = -ESRCH;
		f->prof_ns = clock_ns(base | CPUCLOCK_PROF);
		f->virt_ns = clock_ns(base | CPUCLOCK_VIRT);
		if (clocks_only || rc < 0)
			return rc;
	} else { /* a thread's: its scheduler's run time (another process's thread clock is
		  * not ours to read) */
		snprintf(path, sizeof(path), "%s/schedstat", dir);
		if ((rc = read_proc_kept(keep, path, text, sizeof(text))) < 0)
			return rc;
		f->sched_ns = strtoull(text, NULL, 10);
	}
	snprintf(path, sizeof(path), "%s/stat", dir);
	rc = read_proc_kept(keep, path, text, sizeof(text));
	char *p = rc == 0 ? strrchr(text, ')') : NULL;
	long long v[21] = {0}; /* fields 3..20 of proc(5)'s numbering */
	size_t k = 3;
	for (char *tok = p ? strtok(p + 1, " \n") : NULL; tok && k < SC_ARRAY_LEN(v);
	     tok = strtok(NULL, " \n"), k++)
		v[k] = strtoll(tok, NULL, 10);
	if (rc == 0 && k < SC_ARRAY_LEN(v))
		rc = -EPROTO;
	f->minflt = (uint64_t)v[10];
	f->majflt = (uint64_t)v[12];
	if (tid) { /* sampled at ticks, as the kernel's own thread clocks of those kinds */
		f->virt_ns = ticks_ns(v[14]);
		f->prof_ns = ticks_ns(v[14] + v[15]);
	}
	snprintf(path, sizeof(path), "%s/status", dir);
	if (rc == 0 && !clocks_only && (rc = read_proc_kept(keep, path, text, sizeof(text))) == 0) {
		f->peak_kib = field(text, "\nVmHWM:");
		f->nvcsw = field(text, "\nvoluntary_ctxt_switches:");
		f->nivcsw = field(text, "\nnonvoluntary_ctxt_switches:");
	}
	/* field 20: threads; more than one, and the status was only the leader's */
	if (rc == 0 && !clocks_only && !tid && v[20] > 1) {
		f->nvcsw = f->nivcsw = 0;
		add_switches(dir, f, text, sizeof(text));
	}
	snprintf(path, sizeof(path), "%s/io", dir);
	/* without task I/O accounting: 0 */
	if (rc == 0 && !clocks_only && read_proc_kept(keep, path, text, sizeof(text)) == 0) {
		f->read_bytes = field(text, "\nread_bytes:");
		f->write_bytes = field(text, "\nwrite_bytes:");
	}
	explicit_bzero(text, sizeof(text));
	explicit_bzero(v, sizeof(v));
	return rc;
}

static uint64_t less(uint64_t now, uint64_t base)
{
	return now > base ? now - base : 0;
}

static void subtract(struct figures *f, const struct figures *base)
{
	f->sched_ns = less(f->sched_ns, base->sched_ns);
	f->prof_ns = less(f->prof_ns, base->prof_ns);
	f->virt_ns = less(f->virt_ns, base->virt_ns);
	f->minflt = less(f->minflt, base->minflt);
	f->majflt = less(f->majflt, base->majflt);
	f->nvcsw = less(f->nvcsw, base->nvcsw);
	f->nivcsw = less(f->nivcsw, base->nivcsw);
	f->read_bytes = less(f->read_bytes, base->read_bytes);
	f->write_bytes = less(f->write_bytes, base->write_bytes);
}

/* This run's figures of the cell's process (tid 0) or of one of its threads: a thread other
 * than the main one began in this run (a thread left running discards the cell), so its own
 * counters are this run's already. */
static int run_figures(const struct sc_counters *k, pid_t tid, bool clocks_only, struct figures *f)
{
	int rc = read_figures(k->pid, tid, clocks_only, f, NULL);
	if (rc == 0 && tid == 0)
		subtract(f, &k->base);
	else if (rc == 0 && tid == k->pid)
		subtract(f, &k->thread_base);
	return rc;
}

/* User and system time as getrusage and times give them: the exact CPU time, split in the
 * proportion of the ticks each was sampled at (the kernel's cputime_adjust). */
static void split(const struct figures *f, uint64_t *user_ns, uint64_t *system_ns)
{
	uint64_t user = f->virt_ns, system = less(f->prof_ns, f->virt_ns);
	*system_ns = user + system
			     ? (uint64_t)((unsigned __int128)f->sched_ns * system / (user + system))
			     : 0;
	*user_ns = f->sched_ns - *system_ns;
}

static struct timeval tv(uint64_t ns)
{
	return (struct timeval){(time_t)(ns / 1000000000ull),
				(suseconds_t)(ns % 1000000000ull / 1000)};
}

/* ru_maxrss is the run's peak (VmHWM): not the kernel's, which also keeps the peak at the exit
 * of any thread of an earlier run. */
static void fill_rusage(const struct figures *f, struct rusage *ru)
{
	uint64_t user, system;
	split(f, &user, &system);
	memset(ru, 0, sizeof(*ru));
	ru->ru_utime = tv(user);
	ru->ru_stime = tv(system);
	ru->ru_maxrss = (long)f->peak_kib;
	ru->ru_minflt = (long)f->minflt;
	ru->ru_majflt = (long)f->majflt;
	ru->ru_inblock = (long)(f->read_bytes >> 9);
	ru->ru_oublock = (long)(f->write_bytes >> 9);
	ru->ru_nvcsw = (long)f->nvcsw;
	ru->ru_nivcsw = (long)f->nivcsw;
}

static void fill_tms(const struct sc_counters *k, const struct figures *f, struct tms *t)
{
	long hz = sysconf(_SC_CLK_TCK);
	uint64_t per_tick = 1000000000ull / (uint64_t)(hz > 0 ? hz : 100);
	uint64_t user, system;
	split(f, &user, &system);
	char path[32], text[1024];
	snprintf(path, sizeof(path), "%d/stat", (int)k->pid);
	long long children[2] = {0}; /* fields 16 and 17: the reaped children's, this run's */
	char *p = read_proc(path, text, sizeof(text)) == 0 ? strrchr(text, ')') : NULL;
	size_t at = 3;
	for (char *tok = p ? strtok(p + 1, " \n") : NULL; tok && at <= 17;
	     tok = strtok(NULL, " \n"), at++)
		if (at >= 16)
			children[at - 16] = strtoll(tok, NULL, 10);
	explicit_bzero(text, sizeof(text));
	*t = (struct tms){.tms_utime = (clock_t)(user / per_tick),
			  .tms_stime = (clock_t)(system / per_tick),
			  .tms_cutime = (clock_t)children[0],
			  .tms_cstime = (clock_t)children[1]};
}

/* Whether tid is a thread of the cell; a process a run forked has counters of its own, from
 * its fork. */
static bool in_cell(const struct sc_counters *k, pid_t tid)
{
	char path[48];
	snprintf(path, sizeof(path), "%d/task/%d", (int)k->pid, (int)tid);
	return tid == k->pid || faccessat(proc_fd, path, F_OK, 0) == 0;
}

/* A process's or thread's id in its own pid namespace: the last of NSpid's. The status also
 * holds a run's figures, zeroed after (see read_figures). */
static pid_t ns_pid(pid_t pid)
{
	char path[32], text[4096];
	snprintf(path, sizeof(path), "%d/status", (int)pid);
	pid_t id = 0;
	char *line = read_proc(path, text, sizeof(text)) == 0 ? strstr(text, "\nNSpid:") : NULL;
	char *end = line ? strchr(line + 1, '\n') : NULL;
	if (end) {
		*end = 0;
		char *last = strrchr(line, '\t');
		id = last ? (pid_t)strtol(last + 1, NULL, 10) : 0;
	}
	explicit_bzero(text, sizeof(text));
	return id;
}

/* Which counters a CPU clock id names for a caller: 0 and *tid 0 the cell's process, 0 and
 * *tid a thread of the cell, 1 none of the cell's (the kernel answers: a process the run forked,
 * or an id it refuses). */
static int clock_target(const struct sc_counters *k, pid_t caller, bool caller_in_cell, int clock,
			pid_t *tid, int *which)
{
	*which = CPUCLOCK_SCHED;
	*tid = 0;
	if (clock == CLOCK_PROCESS_CPUTIME_ID || clock == CLOCK_THREAD_CPUTIME_ID) {
		*tid = clock == CLOCK_THREAD_CPUTIME_ID ? caller : 0;
		return caller_in_cell ? 0 : 1;
	}
	if (clock >= 0)
		return 1;
	pid_t named = (pid_t) ~(clock >> 3);
	bool thread = clock & CPUCLOCK_PERTHREAD;
	*which = clock & CPUCLOCK_WHICH_MASK;
	if (*which > CPUCLOCK_SCHED)
		return 1;
	if (named == 0 && caller_in_cell) { /* the caller itself */
		*tid = thread ? caller : 0;
		return 0;
	}
	if (named == k->ns_pid && (!thread || caller_in_cell)) { /* the cell, or its main thread */
		*tid = thread ? k->pid : 0;
		return 0;
	}
	/* A process clock named by the caller's own thread id is its process's (the kernel's
	 * pid_for_clock), whichever thread of the cell calls; a caller whose id cannot be read
	 * gets the run's figures, never the kernel's. */
	if (!thread && caller_in_cell && caller != k->pid) {
		pid_t own = ns_pid(caller);
		if (own <= 0 || named == own)
			return 0;
	}
	return 1;
}

/* Whether [at, end) is mapped writable, by PROCMAP_QUERY (Linux 6.11): 1 or 0, or -1 where
 * the query gives no answer (an older kernel: ENOTTY). */
static int writable_query(int maps_fd, uint64_t at, uint64_t end)
{
	while (at < end) {
		struct procmap_query q = {.size = sizeof(q),
					  .query_flags = PROCMAP_QUERY_VMA_WRITABLE,
					  .query_addr = at};
		if (ioctl(maps_fd, PROCMAP_QUERY, &q) < 0)
			return errno == ENOENT ? 0 : -1; /* ENOENT: none writable there */
		at = q.vma_end;
	}
	return 1;
}

/* Whether [addr, addr + len) is mapped writable in the memory maps_fd (a /proc/PID/maps)
 * shows, as the kernel's own copy to the caller needs: a write through /proc/PID/mem forces its
 * way into read-only pages. Without PROCMAP_QUERY from the text, whose lines name a run's
 * mappings: zeroed after. */
static bool writable(int maps_fd, uint64_t addr, size_t len)
{
	uint64_t at = addr, end = addr + len;
	if (end <= addr)
		return false;
	int known = writable_query(maps_fd, addr, end);
	if (known >= 0)
		return known;
	char buf[8192]; /* a line: two addresses and a few fields, then a path of PATH_MAX */
	size_t have = 0;
	bool done = false;
	ssize_t n;
	while (!done && (n = read(maps_fd, buf + have, sizeof(buf) - 1 - have)) > 0) {
		have += (size_t)n;
		char *line = buf, *nl;
		while (!done && (nl = memchr(line, '\n', (size_t)(buf + have - line)))) {
			*nl = 0;
			unsigned long long lo, hi;
			char perms[5];
			if (sscanf(line, "%llx-%llx %4s", &lo, &hi, perms) == 3 && hi > at) {
				done = lo > at || perms[1] != 'w'; /* a gap, or not writable */
				if (!done)
					at = hi;
				done = done || at >= end;
			}
			line = nl + 1;
		}
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		done = done || have == sizeof(buf) - 1;
	}
	explicit_bzero(buf, sizeof(buf));
	return at >= end;
}

/* Writes len bytes at the caller's address, through /proc/TID/mem opened before the
 * notification is checked to be still pending: the file is of the caller's memory even if the
 * caller died and its id went to another process meanwhile (its maps, checked first, likewise). */
static int write_to_caller(const struct sc_counters *k, const struct seccomp_notif *req,
			   uint64_t addr, const void *buf, size_t len)
{
	char path[32];
	snprintf(path, sizeof(path), "%d/mem", (int)req->pid);
	int fd = openat(proc_fd, path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -ESRCH;
	snprintf(path, sizeof(path), "%d/maps", (int)req->pid);
	int maps_fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
	int rc = 0;
	if (maps_fd < 0 || ioctl(k->listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0)
		rc = -ESRCH;
	else if (!writable(maps_fd, addr, len) || pwrite(fd, buf, len, (off_t)addr) != (ssize_t)len)
		rc = -EFAULT;
	if (maps_fd >= 0)
		close(maps_fd);
	close(fd);
	return rc;
}

static bool makes_task(int nr)
{
#ifdef SYS_fork
	if (nr == SYS_fork || nr == SYS_vfork)
		return true;
#endif
	return nr == SYS_clone || nr == SYS_clone3;
}

/* The answer to one notification: resp's error and value, or its CONTINUE flag. */
static void answer(struct sc_counters *k, const struct seccomp_notif *req,
		   struct seccomp_notif_resp *resp)
{
	pid_t caller = (pid_t)req->pid;
	bool own = in_cell(k, caller);
	int nr = req->data.nr;
	struct figures f;
	pid_t tid = 0;
	int which = CPUCLOCK_SCHED, rc = 0;
	union {
		struct rusage ru;
		struct tms t;
		struct timespec ts;
	} out;
	size_t out_len = 0;
	memset(&out, 0, sizeof(out));
	if (makes_task(nr)) {
		/* Only a record: the call goes on as the policy lets it, so CONTINUE's caveat (the
		 * caller can change the call's memory after the check) does not apply: nothing
		 * of the call is checked. Marked before the answer, so before the call can take
		 * a pid. */
		k->made_task = true;
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		return;
	}
	if (nr == SYS_setrlimit || nr == SYS_prlimit64) {
		/* Lowered, RLIMIT_CPU's signals come at whole-life seconds: a run in a reset
		 * cell would time where the runs before it left the count. A cell that never ran
		 * (a session's anchor sets its own) has no one else's to time. */
		if (k->reset)
			resp->error = -EPERM;
		else
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		return;
	}
	if (nr == SYS_clock_gettime) {
		if (clock_target(k, caller, own, (int)req->data.args[0], &tid, &which) != 0) {
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			return;
		}
	} else if (!own) { /* getrusage, times of a process the run forked: its own */
		resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		return;
	} else if (nr == SYS_getrusage) { /* who: an int to the kernel */
		tid = (int)req->data.args[0] == RUSAGE_THREAD ? caller : 0;
	} else if (nr != SYS_times) {
		resp->error = -ENOSYS;
		return;
	}
	if ((rc = run_figures(k, tid, nr == SYS_clock_gettime, &f)) < 0) {
		resp->error = rc == -ENOENT ? -ESRCH : rc;
		return;
	}
	uint64_t addr = req->data.args[nr == SYS_clock_gettime || nr == SYS_getrusage ? 1 : 0];
	if (nr == SYS_getrusage) {
		fill_rusage(&f, &out.ru);
		out_len = sizeof(out.ru);
	} else if (nr == SYS_times) {
		fill_tms(k, &f, &out.t);
		out_len = addr ? sizeof(out.t) : 0;
		resp->val = (int64_t)times(NULL); /* ticks since an arbitrary point: no figure */
	} else {
		uint64_t ns = which == CPUCLOCK_SCHED  ? f.sched_ns
			      : which == CPUCLOCK_PROF ? f.prof_ns
						       : f.virt_ns;
		out.ts =
			(struct timespec){(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
		out_len = sizeof(out.ts);
	}
	explicit_bzero(&f, sizeof(f));
	if (out_len && (rc = write_to_caller(k, req, addr, &out, out_len)) < 0)
		resp->error = rc;
	explicit_bzero(&out, sizeof(out));
}

static void serve_one(struct sc_counters *k)
{
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	memset(&req, 0, sizeof(req));
	if (ioctl(k->listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
		return; /* ENOENT: the caller was killed meanwhile */
	memset(&resp, 0, sizeof(resp));
	resp.id = req.id;
	answer(k, &req, &resp);
	ioctl(k->listener, SECCOMP_IOCTL_NOTIF_SEND, &resp); /* ENOENT: as above */
	explicit_bzero(&req, sizeof(req));
}

void sc_counters_serve(void)
{
	struct epoll_event ev[SERVE_MAX];
	int n = epoll_fd >= 0 ? epoll_wait(epoll_fd, ev, SERVE_MAX, 0) : 0;
	for (int i = 0; i < n; i++) {
		struct sc_counters *k = ev[i].data.ptr;
		if (ev[i].events & EPOLLIN)
			serve_one(k);
		else if (ev[i].events & (EPOLLHUP | EPOLLERR)) { /* no process left to ask */
			epoll_ctl(epoll_fd, EPOLL_CTL_DEL, k->listener, NULL);
			k->watched = false;
		}
	}
}

static int take_base(struct sc_counters *k)
{
	struct sc_counters *keep = k->reset ? k : NULL; /* not for cells never reset: sessions */
	int rc = read_figures(k->pid, 0, false, &k->base, keep);
	if (rc == 0)
		rc = read_figures(k->pid, k->pid, true, &k->thread_base, keep);
	/* The rest as the process's: at the stop the main thread is its only thread (so its
	 * status is the process's), and the process's I/O is never less than the thread's: a
	 * base too high at worst, never one that lets an earlier run's figures through. */
	k->thread_base.nvcsw = k->base.nvcsw;
	k->thread_base.nivcsw = k->base.nivcsw;
	k->thread_base.read_bytes = k->base.read_bytes;
	k->thread_base.write_bytes = k->base.write_bytes;
	return rc;
}

struct sc_counters *sc_counters_take(pid_t pid, int pidfd, int sandbox_proc_fd)
{
	proc_fd = sandbox_proc_fd;
	if (epoll_fd < 0 && (epoll_fd = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return NULL;
	struct sc_counters *k =
		mmap(NULL, sizeof(*k), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (k == MAP_FAILED)
		return NULL;
	k->listener = -1;
	k->pid = pid;
	struct epoll_event ev = {.events = EPOLLIN, .data.ptr = k};
	if (madvise(k, sizeof(*k), MADV_DONTFORK) < 0 || (k->ns_pid = ns_pid(pid)) <= 0 ||
	    (k->listener = (int)syscall(SYS_pidfd_getfd, pidfd, SC_CELL_NOTIF_FD, 0)) < 0 ||
	    take_base(k) < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, k->listener, &ev) < 0) {
		sc_counters_drop(k);
		return NULL;
	}
	k->watched = true;
	return k;
}

int sc_counters_rebase(struct sc_counters *k)
{
	k->reset = true;
	k->made_task = false;
	return take_base(k);
}

bool sc_counters_made_task(const struct sc_counters *k)
{
	/* A call still waiting for its answer is another task's (the stopped thread's own was
	 * withdrawn by its stop, before it could take a pid): counted, conservatively. */
	struct pollfd pending = {k->listener, POLLIN, 0};
	return k->made_task || poll(&pending, 1, 0) != 0;
}

void sc_counters_drop(struct sc_counters *k)
{
	if (!k)
		return;
	for (size_t i = 0; i < k->n_kept; i++)
		close(k->kept[i].fd);
	if (k->listener >= 0) {
		if (k->watched)
			epoll_ctl(epoll_fd, EPOLL_CTL_DEL, k->listener, NULL);
		close(k->listener);
	}
	munmap(k, sizeof(*k));
}
