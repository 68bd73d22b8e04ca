/* Stopping a cell for a paused run, and continuing it: every process of the cell is sent
 * SIGSTOP from the host, pass after pass, until the cell holds still. Not the family's stop
 * between a session's turns (guest/session.c's kill(-1) from the trusted anchor), and no
 * cgroup freezer: the sandboxes' cgroups are v1 memory ones, and v1's freezer is a hierarchy
 * of its own no cell is in.
 *
 * Which processes are the cell's: at level cgroups, its memory cgroup's (each of its processes
 * is there from its fork on, and none can leave: no cell reaches a cgroup file system);
 * elsewhere, every process below its root as the host's /proc shows them: at level
 * namespaces the root is pid 1 of the cell's pid namespace (or a session's anchor), at level
 * rlimits a subreaper, so every process the code starts is below it whatever its process
 * group or session, and an orphan comes back to it. The code cannot hide from either: the
 * host reads them from outside. */
#define _GNU_SOURCE
#include "host.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

/* Processes of the host read in one pass, and processes of a cell stopped (each new one is
 * looked up among those: quadratic, 16 million steps at most): past either, the freeze fails
 * and the call is refused. A sandbox's processes limit is 64 tasks by default. */
#define FREEZE_MAX_HOST	 (1u << 20)
#define FREEZE_MAX_CELL	 4096u
#define FREEZE_THREADS	 4096 /* threads of one process looked at */
#define FREEZE_SETTLE_NS 50000
/* The longest nap while waiting for the stop to take: naps double up to it. With 50 us naps
 * throughout, a cell that cannot settle (a thread held in 'D') cost the host's thread 26% of
 * a core for the whole 1 s. */
#define FREEZE_NAP_MAX_NS 4000000

struct proc {
	pid_t pid, ppid;
	unsigned long long start;
	char state;	    /* its main thread's, as listed */
	signed char member; /* 0 not known yet, 1 in the tree, -1 not */
};

struct stopped {
	pid_t pid;
	unsigned long long start;
};

struct sc_frozen {
	size_t n, cap;
	struct stopped *v;
};

/* pid's parent and start time from /proc/PID/stat (readable whatever the process's
 * dumpability), and its state in *state when asked. false when it is gone. */
static bool stat_of(const char *path, pid_t *ppid, unsigned long long *start, char *state)
{
	char buf[1024];
	if (sc__read_file_at(AT_FDCWD, path, buf, sizeof(buf)) < 0)
		return false;
	/* The name may hold anything, ")" included: the fields follow the last one. */
	const char *p = strrchr(buf, ')');
	int ppid_v = 0;
	char st = 0;
	if (!p || sscanf(p + 1,
			 " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu",
			 &st, &ppid_v, start) != 3)
		return false;
	*ppid = (pid_t)ppid_v;
	if (state)
		*state = st;
	return true;
}

static int by_pid(const void *a, const void *b)
{
	pid_t x = ((const struct proc *)a)->pid, y = ((const struct proc *)b)->pid;
	return (x > y) - (x < y);
}

static struct proc *find(struct proc *v, size_t n, pid_t pid)
{
	struct proc key = {.pid = pid};
	return bsearch(&key, v, n, sizeof(*v), by_pid);
}

/* Marks the processes whose parent chain reaches root (root included). A chain that loops
 * (pids given again while /proc was listed) ends at the walk's bound, outside the tree. */
static void mark_tree(struct proc *v, size_t n, pid_t root)
{
	for (size_t i = 0; i < n; i++) {
		struct proc *p = &v[i], *at = p;
		signed char answer = -1;
		for (size_t steps = 0; at && steps <= n; steps++) {
			if (at->pid == root || at->member) {
				answer = at->pid == root ? 1 : at->member;
				break;
			}
			at = at->ppid > 0 ? find(v, n, at->ppid) : NULL;
		}
		/* The same answer for every process on the way up. */
		for (struct proc *q = p; q && q != at && !q->member && q->pid != root;
		     q = q->ppid > 0 ? find(v, n, q->ppid) : NULL)
			q->member = answer;
		if (p->pid == root)
			p->member = 1;
	}
}

/* The line of /proc/PID/cgroup that names pid's memory cgroup, into out ("" when it has
 * none). false when it is gone, or the line is longer than out. */
static bool memory_cgroup_of(pid_t pid, char *out, size_t len)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (sc__read_file_at(AT_FDCWD, path, buf, sizeof(buf)) < 0)
		return false;
	const char *line = strstr(buf, ":memory:");
	size_t n = line ? strcspn(line, "\n") : 0;
	snprintf(out, len, "%.*s", (int)n, line ? line : "");
	return n < len;
}

/* Adds pid, with its parent and start time, to the table (a process gone meanwhile is left
 * out, and with cgroup, one whose memory cgroup is not that: a pid read from cgroup.procs may
 * have been given to another process since, the start time read here is then that one's, and
 * the cgroup is read after it, so of the process the start time names). 0, 1 when it was
 * left out, or -ENOMEM, or -E2BIG past max. */
static int add_proc(struct proc **v, size_t *n, size_t *cap, long pid, size_t max,
		    const char *cgroup)
{
	if (*n == *cap) {
		size_t grow = *cap ? 2 * *cap : 512;
		struct proc *g = grow <= max ? realloc(*v, grow * sizeof(**v)) : NULL;
		if (!g)
			return grow <= max ? -ENOMEM : -E2BIG;
		*v = g;
		*cap = grow;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	struct proc *p = &(*v)[*n];
	*p = (struct proc){.pid = (pid_t)pid};
	char now[512];
	if (!stat_of(path, &p->ppid, &p->start, &p->state) ||
	    (cgroup && (!memory_cgroup_of(p->pid, now, sizeof(now)) || strcmp(now, cgroup))))
		return 1;
	(*n)++;
	return 0;
}

static int remember(struct sc_frozen *f, pid_t pid, unsigned long long start);
static bool signal_exact(pid_t pid, unsigned long long start, int sig);

/* What a pass stops while it lists: a process certainly the cell's (a child of its root or of
 * a process this freeze stopped, or one in its cgroup) is sent the stop as soon as its stat is
 * read. One that forks and exits at once (a fork chain) lives a fraction of a listing of the
 * host's /proc, and a stop sent after the listing finds it gone and its child running: so
 * caught, the chain stops. One whose main thread was stopped already is left to the pass
 * (stop: the thaw continues only what the freeze stopped). */
struct early {
	struct sc_frozen *f;
	const struct sc_cell_procs *cell;
	const char *cgroup; /* the root's memory cgroup, a listed process's own (level cgroups) */
	size_t sent;
	size_t gone; /* level cgroups: listed, but ended (or not the cell's) when read */
	int root_fd; /* a pidfd of the root, opened on the process root_start names */
	int rc;
};

/* Whether pid is a process this freeze stopped, alive now: it was the same process all along
 * since (a pid names one process for its whole life), so what was its child when listed is
 * the cell's. */
static bool stopped_alive(const struct sc_frozen *f, pid_t pid)
{
	unsigned long long now;
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].pid == pid)
			return sc__proc_start_time(pid, &now) == 0 && now == f->v[i].start;
	return false;
}

/* Whether the root is not reaped yet, so its pid is not another process's: a signal 0
 * through its pidfd (no /proc read in the listing's path: that slowed it so a fork chain
 * escaped). */
static bool root_same(const struct early *e)
{
	return syscall(SYS_pidfd_send_signal, e->root_fd, 0, NULL, 0) == 0;
}

static void stop_early(struct early *e, const struct proc *p)
{
	const struct sc_cell_procs *c = e->cell;
	bool mine = c->cgroup_fd >= 0
			    ? !(c->keep_root && p->pid == c->root)
			    : (p->ppid == c->root && root_same(e)) || stopped_alive(e->f, p->ppid);
	if (!mine || strchr("TtZXx", p->state) || e->rc < 0)
		return;
	e->rc = remember(e->f, p->pid, p->start);
	e->sent += e->rc == 0 && signal_exact(p->pid, p->start, SIGSTOP);
}

/* add_proc, then the early stop of what it added. */
static int take(struct proc **v, size_t *n, size_t *cap, long pid, size_t max, struct early *early)
{
	size_t had = *n;
	int rc = add_proc(v, n, cap, pid, max, early->cgroup);
	if (rc == 0 && *n > had)
		stop_early(early, &(*v)[had]);
	early->gone += rc == 1 && early->cgroup;
	return rc < 0 ? rc : 0;
}

/* Every process of the host (dir NULL), or of the cgroup whose cgroup.procs is open as f, in
 * pid order. 0, or -errno. */
static int list_procs(DIR *dir, FILE *f, struct proc **out, size_t *n_out, struct early *early)
{
	size_t n = 0, cap = 0;
	struct proc *v = NULL;
	int rc = 0;
	long pid;
	if (dir) {
		for (struct dirent *e; rc == 0 && (e = readdir(dir));) {
			char *end;
			pid = strtol(e->d_name, &end, 10);
			if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && !*end)
				rc = take(&v, &n, &cap, pid, FREEZE_MAX_HOST, early);
		}
	} else {
		while (rc == 0 && fscanf(f, "%ld", &pid) == 1)
			rc = take(&v, &n, &cap, pid, FREEZE_MAX_CELL, early);
	}
	if (rc < 0) {
		free(v);
		return rc;
	}
	qsort(v, n, sizeof(*v), by_pid);
	*out = v;
	*n_out = n;
	return 0;
}

/* The candidates of one pass: the cell's cgroup's processes, all of them members, where it
 * has a cgroup (nothing leaves it: no cell can reach a cgroup file system; each is checked
 * to be in the root's memory cgroup still as its stat is read); else every process of the
 * host, those below root marked. */
static int list_cell(const struct sc_cell_procs *cell, struct proc **v, size_t *n,
		     struct early *early)
{
	if (cell->cgroup_fd >= 0) {
		char cgroup[512];
		if (!memory_cgroup_of(cell->root, cgroup, sizeof(cgroup)) || !root_same(early))
			return -ESRCH;
		early->cgroup = cgroup;
		int fd = openat(cell->cgroup_fd, "cgroup.procs", O_RDONLY | O_CLOEXEC);
		FILE *f = fd < 0 ? NULL : fdopen(fd, "re");
		if (!f) {
			int rc = fd < 0 ? -errno : -ENOMEM;
			if (fd >= 0)
				close(fd);
			return rc;
		}
		int rc = list_procs(NULL, f, v, n, early);
		early->cgroup = NULL;
		fclose(f);
		for (size_t i = 0; rc == 0 && i < *n; i++)
			(*v)[i].member = 1;
		return rc;
	}
	DIR *d = opendir("/proc");
	if (!d)
		return -errno;
	int rc = list_procs(d, NULL, v, n, early);
	closedir(d);
	if (rc == 0)
		mark_tree(*v, *n, cell->root);
	return rc;
}

/* Whether every thread of pid is stopped (or gone, or a zombie): it runs no more code until
 * something continues it. A thread in an uninterruptible sleep ('D', a vfork's parent among
 * them) has not taken the stop yet. */
static bool all_stopped(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return errno == ENOENT;
	bool stopped = true;
	unsigned seen = 0;
	for (struct dirent *e; stopped && (e = readdir(d)) && seen < FREEZE_THREADS;) {
		char task[320], state = 'X';
		pid_t ppid;
		unsigned long long start;
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		seen++;
		snprintf(task, sizeof(task), "/proc/%d/task/%s/stat", (int)pid, e->d_name);
		if (stat_of(task, &ppid, &start, &state))
			stopped = strchr("TtZXx", state) != NULL;
	}
	closedir(d);
	return stopped && seen < FREEZE_THREADS;
}

/* Sends sig to the process pid that started at start, and never to another that has its pid
 * now: the pidfd holds the process the start time was checked on. */
static bool signal_exact(pid_t pid, unsigned long long start, int sig)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return false;
	unsigned long long now;
	bool same = sc__proc_start_time(pid, &now) == 0 && now == start;
	bool sent = same && syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) == 0;
	close(fd);
	return sent;
}

static int remember(struct sc_frozen *f, pid_t pid, unsigned long long start)
{
	for (size_t i = 0; i < f->n; i++)
		if (f->v[i].pid == pid && f->v[i].start == start)
			return 0;
	if (f->n == f->cap) {
		size_t grow = f->cap ? 2 * f->cap : 16;
		struct stopped *g =
			grow <= FREEZE_MAX_CELL ? realloc(f->v, grow * sizeof(*g)) : NULL;
		if (!g)
			return grow <= FREEZE_MAX_CELL ? -ENOMEM : -E2BIG;
		f->v = g;
		f->cap = grow;
	}
	f->v[f->n++] = (struct stopped){pid, start};
	return 0;
}

static bool same_members(const struct stopped *a, size_t n_a, const struct stopped *b, size_t n_b)
{
	bool same = n_a == n_b;
	for (size_t i = 0; same && i < n_a; i++)
		same = a[i].pid == b[i].pid && a[i].start == b[i].start;
	return same;
}

/* Stops pid unless it is stopped; *sent: whether it was sent the stop. */
static int stop(struct sc_frozen *f, pid_t pid, unsigned long long start, bool *sent)
{
	*sent = false;
	if (all_stopped(pid))
		return 0;
	/* One found stopped already (by the code, or by the family's stop between turns) is
	 * left as found: the thaw does not continue what the freeze did not stop. */
	int rc = remember(f, pid, start);
	*sent = rc == 0 && signal_exact(pid, start, SIGSTOP);
	return rc;
}

/* One pass: lists the cell's processes into *members (pid order; root left out when
 * keep_root) and stops each still running; *sent: how many were (at level cgroups, and how
 * many listed were gone when read). */
static int pass(struct sc_frozen *f, const struct sc_cell_procs *cell, struct stopped **members,
		size_t *n_members, size_t *sent)
{
	struct proc *v = NULL;
	size_t n = 0, m = 0;
	struct early early = {
		.f = f, .cell = cell, .root_fd = (int)syscall(SYS_pidfd_open, cell->root, 0)};
	unsigned long long start;
	int rc = early.root_fd >= 0 && sc__proc_start_time(cell->root, &start) == 0 &&
				 start == cell->root_start
			 ? list_cell(cell, &v, &n, &early)
			 : -ESRCH;
	/* The root still the process root_start names after the listing, so all along it:
	 * what the listing read as its children, and its own entry, were the root's. */
	if (rc == 0 && (early.rc < 0 || !root_same(&early))) {
		free(v);
		rc = early.rc < 0 ? early.rc : -ESRCH;
	}
	if (early.root_fd >= 0)
		close(early.root_fd);
	if (rc < 0)
		return rc;
	struct stopped *list = find(v, n, cell->root) ? malloc((n + 1) * sizeof(*list)) : NULL;
	if (!list) {
		rc = find(v, n, cell->root) ? -ENOMEM : -ESRCH;
		free(v);
		return rc;
	}
	/* A member that ended while listed (a fork chain's, its child made after cgroup.procs
	 * was read; one exiting already shows another memory cgroup) is in neither this pass's
	 * members nor the next's: the cell changed, as when one was sent the stop. */
	*sent = early.sent + early.gone;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (v[i].member != 1 || (cell->keep_root && v[i].pid == cell->root))
			continue;
		list[m++] = (struct stopped){v[i].pid, v[i].start};
		bool one;
		rc = stop(f, v[i].pid, v[i].start, &one);
		*sent += one;
	}
	free(v);
	free(*members);
	*members = list;
	*n_members = m;
	return rc;
}

/* Waits until every member is seen stopped, stopping again any that something continued;
 * naps that double from 50 us. */
static int settle(struct sc_frozen *f, const struct stopped *members, size_t n, uint64_t deadline)
{
	for (long nap_ns = FREEZE_SETTLE_NS;;
	     nap_ns = nap_ns < FREEZE_NAP_MAX_NS / 2 ? 2 * nap_ns : FREEZE_NAP_MAX_NS) {
		size_t running = 0;
		for (size_t i = 0; i < n; i++) {
			bool one;
			int rc = stop(f, members[i].pid, members[i].start, &one);
			if (rc < 0)
				return rc;
			running += one;
		}
		if (!running)
			return 0;
		if (sc__now_us() >= deadline)
			return -ETIMEDOUT;
		struct timespec nap = {0, nap_ns};
		nanosleep(&nap, NULL);
	}
}

void sc__cell_thaw(struct sc_frozen *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n; i++)
		signal_exact(f->v[i].pid, f->v[i].start, SIGCONT);
	sc__cell_frozen_free(f);
}

void sc__cell_frozen_free(struct sc_frozen *f)
{
	if (!f)
		return;
	free(f->v);
	free(f);
}

int sc__cell_freeze(const struct sc_cell_procs *cell, unsigned timeout_ms, struct sc_frozen **out)
{
	*out = NULL;
	struct sc_frozen *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	uint64_t deadline = sc__deadline_ms(timeout_ms);
	struct stopped *before = NULL, *now = NULL;
	size_t n_before = SIZE_MAX, n_now = 0;
	int rc;
	for (;;) {
		size_t sent;
		rc = pass(f, cell, &now, &n_now, &sent);
		if (rc < 0)
			break;
		/* Settled: the last pass's members were all seen stopped before this listing
		 * began, and this one found the same, all stopped. A process made while the last
		 * listing ran (by a member not stopped yet) lives through this whole listing, or
		 * ended before its end (anything it did by then, such as continuing a member, this
		 * pass's check saw), so it is in this one. */
		if (sent == 0 && same_members(now, n_now, before, n_before)) {
			free(before);
			free(now);
			*out = f;
			return 0;
		}
		struct stopped *swap = before;
		before = now;
		n_before = n_now;
		now = swap;
		rc = settle(f, before, n_before, deadline);
		if (rc == 0 && sc__now_us() >= deadline)
			rc = -ETIMEDOUT;
		if (rc < 0)
			break;
	}
	free(before);
	free(now);
	sc__cell_thaw(f);
	return rc;
}
