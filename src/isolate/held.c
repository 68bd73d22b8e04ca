/* The rlimits level: what a cell's processes hold on the work directory's filesystem that no
 * name shows (files opened, then unlinked; mapped, then closed and unlinked), for the /tmp and
 * /output watch (cell_rlimits.c), which walks the names and decides. It reads the /proc of
 * the cell's tree, which needs CAP_SYS_PTRACE: cells are non-dumpable (guest/cell.c), so even
 * their own uid cannot. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/kcmp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "cell.h"
#include "util/util.h"

/* Bounds on one measurement: processes of the cell's uid met and distinct unlinked files. Past
 * either, the figure is reported as over every limit (the code made that many on purpose). */
#define HELD_MAX_PROCS 4096
#define HELD_MAX_FILES 4096
/* And on the /proc/PID/maps text read in one: its cost is the code's to choose (65,530
 * mappings per process, each line naming a path up to 64 directories deep), and the watch
 * waited ten times a measurement's time before the next. 30,000 mappings of one file 60
 * directories down made 456 MB of it, read in 2.3 s, and the cell wrote 3 GiB in the 23 s
 * gap under a 321 MiB bound; at 32 MiB, 0.8-1.8 GiB. The wait is capped now (run.c), so the
 * measurement's own time is the gap: 8 MiB reads in ~60 ms here. A process that imports
 * numpy, pandas, matplotlib and scipy has 160 KB of it. */
#define HELD_MAX_MAPS_BYTES (8u << 20)
/* And on the listings of /proc in one: each meets the processes not met before. */
#define HELD_MAX_ROUNDS 4096
/* And on the descriptors read in one (one stat each; tables shared by threads are read once):
 * 60 processes of 250 descriptors each (15,000) took ~70 ms a measurement and, the watch
 * waiting ten times that, let a cell write 1.36 GiB against a 321 MiB bound. 4,096 take
 * 10-40 ms here. RLIMIT_NOFILE is 256 a process at this level; a pool of 32 workers holding
 * 64 each is 2,048. */
#define HELD_MAX_DESCRIPTORS 4096
/* The tables read in one process, to know a thread's shared one (kcmp). */
#define HELD_TABLES 16
#define NS_LAST_PID "/proc/sys/kernel/ns_last_pid"

struct held {
	dev_t dev; /* the work directory's filesystem */
	uid_t uid; /* the cell's: as root, the sandbox's own */
	pid_t cell;
	uint64_t mapped_bytes; /* what a mapped file with no descriptor counts: its size bound */
	/* The processes of the uid met, in pid order, with their start times (a pid can be
	 * given again), and whether each is the cell or a descendant of it (a cell is a
	 * subreaper: an orphan of its tree is its). */
	pid_t procs[HELD_MAX_PROCS];
	uint64_t starts[HELD_MAX_PROCS];
	bool member[HELD_MAX_PROCS];
	size_t n_procs;
	ino_t inos[HELD_MAX_FILES]; /* unlinked files a descriptor holds, counted at st_blocks */
	size_t n_inos;
	ino_t maps[HELD_MAX_FILES]; /* unlinked files mapped: those no descriptor holds count */
	size_t n_maps;
	uint64_t bytes, maps_bytes;
	size_t n_descriptors;
	bool over, unreadable;
};

/* Adds ino to a set once; true when it was there (or the set is full: over). */
static bool seen_in(struct held *h, ino_t *set, size_t *n, ino_t ino)
{
	for (size_t i = 0; i < *n; i++)
		if (set[i] == ino)
			return true;
	if (*n == HELD_MAX_FILES) {
		h->over = true;
		return true;
	}
	set[(*n)++] = ino;
	return false;
}

/* The real uid and parent of pid from its status (readable whatever the process's
 * dumpability); false when it is gone. */
static bool status_of(pid_t pid, uid_t *uid, pid_t *ppid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	int found = 0;
	while (f && found < 2 && fgets(line, sizeof(line), f)) {
		unsigned long v;
		if (sscanf(line, "PPid: %lu", &v) == 1) {
			*ppid = (pid_t)v;
			found++;
		} else if (sscanf(line, "Uid: %lu", &v) == 1) {
			*uid = (uid_t)v;
			found++;
		}
	}
	if (f)
		fclose(f);
	return found == 2;
}

/* Where pid is, or would go, in the list. */
static size_t place(const struct held *h, pid_t pid)
{
	size_t lo = 0, hi = h->n_procs;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (h->procs[mid] < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The index of pid in the list, or -1. */
static ssize_t find(const struct held *h, pid_t pid)
{
	size_t at = place(h, pid);
	return at < h->n_procs && h->procs[at] == pid ? (ssize_t)at : -1;
}

/* When pid started (sc__proc_start_time) plus one, so never 0; 0 when it is gone. */
static uint64_t start_of(pid_t pid)
{
	unsigned long long start;
	return sc__proc_start_time(pid, &start) < 0 ? 0 : start + 1;
}

/* Whether pid (of the cell's uid, its parent ppid) is in the cell's tree: its ancestors up to
 * the first of another uid pass through the cell. A parent met earlier in this pass answers
 * from the list (pids grow, so a parent is usually met first); others are read. An ancestor
 * gone meanwhile gave its children to the nearest subreaper above it (the cell, for the
 * cell's), so the walk starts again. Undecided after that, pid counts as the cell's. */
static bool in_tree(const struct held *h, pid_t pid, pid_t ppid)
{
	pid_t at = pid, up = ppid;
	for (unsigned step = 0; step < 256; step++) {
		if (at == h->cell || up == h->cell)
			return true;
		ssize_t i = find(h, up);
		if (i >= 0)
			return h->member[i];
		if (up <= 1)
			return false;
		uid_t uid;
		pid_t next;
		if (status_of(up, &uid, &next)) {
			if (uid != h->uid)
				return false;
			at = up;
			up = next;
		} else if (!status_of(pid, &uid, &up)) {
			return false; /* gone itself: it holds nothing now */
		} else {
			at = pid;
		}
	}
	return true;
}

/* Unlinked regular files on the work directory's filesystem in one descriptor table (path:
 * a task's fd directory): their blocks as st_blocks says (seccomp refuses O_TMPFILE there;
 * these came from unlink). */
static void add_table(struct held *h, const char *path)
{
	DIR *d = opendir(path);
	/* Gone meanwhile is nothing held; unreadable is not known (no CAP_SYS_PTRACE). */
	if (!d && errno != ENOENT)
		h->unreadable = true;
	for (struct dirent *e; d && (e = readdir(d)) && !h->over;) {
		struct stat st;
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		if (++h->n_descriptors > HELD_MAX_DESCRIPTORS) {
			h->over = true;
			break;
		}
		if (fstatat(dirfd(d), e->d_name, &st, 0) < 0)
			continue;
		if (S_ISREG(st.st_mode) && st.st_nlink == 0 && st.st_dev == h->dev &&
		    !seen_in(h, h->inos, &h->n_inos, st.st_ino))
			h->bytes += (uint64_t)st.st_blocks * 512;
	}
	if (d)
		closedir(d);
}

/* Whether task has the table of one of read[] (kcmp: the same files_struct). Where kcmp is
 * refused or missing, no: the table is read again, and the descriptor bound still holds.
 * Docker's default profile allows kcmp with CAP_SYS_PTRACE, which reading tables needs. */
static bool table_read(pid_t task, const pid_t *read, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (syscall(SYS_kcmp, read[i], task, KCMP_FILES, 0, 0) == 0)
			return true;
	return false;
}

/* Every task's table, not only the process's: a thread made without CLONE_FILES, or one that
 * called unshare(CLONE_FILES), has its own, which /proc/PID/fd (the leader's) does not list.
 * A table shared by threads is read once (40 threads sharing 200 descriptors were 8,000
 * reads); the inode check counts each file once. */
static void add_descriptors(struct held *h, pid_t pid)
{
	char path[64];
	pid_t read[HELD_TABLES];
	size_t n_read = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *tasks = opendir(path);
	for (struct dirent *t; tasks && !h->over && !h->unreadable && (t = readdir(tasks));) {
		char fds[384];
		if (t->d_name[0] < '0' || t->d_name[0] > '9')
			continue;
		pid_t task = (pid_t)strtol(t->d_name, NULL, 10);
		if (table_read(task, read, n_read))
			continue;
		if (n_read < HELD_TABLES)
			read[n_read++] = task;
		snprintf(fds, sizeof(fds), "%s/%s/fd", path, t->d_name);
		add_table(h, fds);
	}
	if (tasks)
		closedir(tasks);
}

/* Unlinked files on that filesystem that pid maps. /proc/PID/maps names their device and
 * inode, not their size (map_files/ needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), so those
 * no descriptor of the pass holds (mmap, close, unlink) count as the largest file the cell
 * may write, at the pass's end: a file also held open counts as measured. */
static void add_mappings(struct held *h, pid_t pid)
{
	char path[64], *line = NULL;
	size_t cap = 0;
	ssize_t len;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	FILE *f = fopen(path, "re");
	/* Whole lines (getline): a long path must not split one into pieces read as others. */
	while (f && !h->over && (len = getline(&line, &cap, f)) > 0) {
		unsigned major, minor;
		unsigned long long ino;
		h->maps_bytes += (uint64_t)len;
		if (h->maps_bytes > HELD_MAX_MAPS_BYTES) {
			h->over = true;
			break;
		}
		if (len < 11 || strcmp(line + len - 11, " (deleted)\n") != 0 ||
		    sscanf(line, "%*s %*s %*s %x:%x %llu", &major, &minor, &ino) != 3 ||
		    makedev(major, minor) != h->dev || ino == 0)
			continue;
		seen_in(h, h->maps, &h->n_maps, (ino_t)ino);
	}
	free(line);
	if (f)
		fclose(f);
}

/* Meets pid (listed in /proc): if it is a process of the cell's uid not met before, lists it
 * and, if it is in the cell's tree, reads its tables. True when it was such a process. */
/* The uids of the processes whose /proc/PID is root's, across measurements and sandboxes: a
 * non-dumpable process's /proc/PID is root's whatever its uid, so only its status tells, and
 * reading that of each root process made a measurement cost ~15 us per process of the host.
 * A slot per pid (modulo), known by the directory's inode and change time, which a new
 * process of the same pid does not share (its /proc/PID is a new inode). A process of the
 * cells' uid never had another (cells cannot change uid), so a uid remembered can only let
 * through a process that is not the cell's. 512 KiB, taken at the first measurement and kept
 * for the process's life. */
#define KNOWN_SLOTS 16384
struct known {
	pid_t pid;
	uid_t uid;
	ino_t ino;
	struct timespec ctime;
};
static pthread_mutex_t known_lock = PTHREAD_MUTEX_INITIALIZER;
static struct known *known;

/* The uid of pid as status says (remembered for the next), or false when it is gone. */
static bool uid_of(pid_t pid, const struct stat *st, uid_t *uid, pid_t *ppid, bool *read)
{
	struct known *k = NULL;
	pthread_mutex_lock(&known_lock);
	if (!known)
		known = calloc(KNOWN_SLOTS, sizeof(*known));
	if (known) {
		k = &known[(size_t)pid % KNOWN_SLOTS];
		if (k->pid == pid && k->ino == st->st_ino &&
		    k->ctime.tv_sec == st->st_ctim.tv_sec &&
		    k->ctime.tv_nsec == st->st_ctim.tv_nsec) {
			*uid = k->uid;
			pthread_mutex_unlock(&known_lock);
			*read = false;
			return true;
		}
	}
	pthread_mutex_unlock(&known_lock);
	*read = true;
	if (!status_of(pid, uid, ppid))
		return false;
	pthread_mutex_lock(&known_lock);
	if (k)
		*k = (struct known){pid, *uid, st->st_ino, st->st_ctim};
	pthread_mutex_unlock(&known_lock);
	return true;
}

static bool meet(struct held *h, pid_t pid, const struct stat *st)
{
	uid_t uid;
	pid_t ppid;
	uint64_t start;
	bool read;
	/* A non-dumpable process's /proc/PID is root's: only those and the uid's qualify. */
	if ((st->st_uid != 0 && st->st_uid != h->uid) || !uid_of(pid, st, &uid, &ppid, &read) ||
	    uid != h->uid || (!read && !status_of(pid, &uid, &ppid)) || uid != h->uid ||
	    !(start = start_of(pid)))
		return false;
	size_t at = place(h, pid);
	if (at < h->n_procs && h->procs[at] == pid && h->starts[at] == start)
		return false;
	bool member = in_tree(h, pid, ppid);
	if (at == h->n_procs || h->procs[at] != pid) {
		if (h->n_procs == HELD_MAX_PROCS) {
			h->over = true;
			return false;
		}
		memmove(h->procs + at + 1, h->procs + at, (h->n_procs - at) * sizeof(*h->procs));
		memmove(h->starts + at + 1, h->starts + at, (h->n_procs - at) * sizeof(*h->starts));
		memmove(h->member + at + 1, h->member + at, (h->n_procs - at) * sizeof(*h->member));
		h->n_procs++;
	}
	h->procs[at] = pid;
	h->starts[at] = start;
	h->member[at] = member;
	if (member) {
		add_descriptors(h, pid);
		add_mappings(h, pid);
	}
	return true;
}

/* One listing of /proc; true when it met a process not met before. */
static bool list_new(struct held *h)
{
	DIR *proc = opendir("/proc");
	if (!proc) {
		h->unreadable = true;
		return false;
	}
	bool any = false;
	for (struct dirent *e; !h->over && !h->unreadable && (e = readdir(proc));) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		struct stat st;
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9' && !*end &&
		    fstatat(dirfd(proc), e->d_name, &st, 0) == 0 && meet(h, (pid_t)pid, &st))
			any = true;
	}
	closedir(proc);
	return any;
}

/* A number from a /proc/sys file, or -1 where the kernel does not give it. */
static long sys_number(const char *path)
{
	long n = -1;
	FILE *f = fopen(path, "re");
	if (f && fscanf(f, "%ld", &n) != 1)
		n = -1;
	if (f)
		fclose(f);
	return n;
}

/* Meets the processes given pids after *last (the pid namespace's last pid when this was
 * last called) until no new pid is given meanwhile. Pids are given in turn, wrapping at
 * pid_max, so every process made since is in that range. */
static void chase(struct held *h, long last, long pid_max)
{
	int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long probed = 0;
	for (long now; proc >= 0 && !h->over && (now = sys_number(NS_LAST_PID)) != last;) {
		for (long pid = last; pid != now && !h->over;) {
			char name[24];
			struct stat st;
			pid = pid + 1 >= pid_max ? 1 : pid + 1;
			/* More than half the pids given in one measurement: one could be given
			 * twice in the time of one probe (the pass would not know a process it
			 * met). */
			if (++probed > pid_max / 2) {
				h->over = true;
				break;
			}
			snprintf(name, sizeof(name), "%ld", pid);
			if (fstatat(proc, name, &st, 0) == 0)
				meet(h, (pid_t)pid, &st);
		}
		last = now;
	}
	if (proc >= 0)
		close(proc);
}

/* Meets every process of the cell's tree, reading its tables as met. Reading the tree first
 * and the tables after lost a child that forked and exited every 2 ms: the
 * successor holding the files was made after the children lists were read. A process hands
 * its descriptors and mappings on only by forking (SCM_RIGHTS aside: docs/security.md), so a
 * child has them from its start. One listing of /proc meets the processes that last through
 * it; then each pid given since it began is looked at, in the order given, until none is
 * given meanwhile: a successor is looked at after its predecessor was found gone, so fully
 * made, and the first of a chain found alive holds the files. Where the kernel does not give
 * its last pid, listings go on until one meets no process not met before. */
static void scan(struct held *h)
{
	long last = sys_number(NS_LAST_PID), pid_max = sys_number("/proc/sys/kernel/pid_max");
	if (last >= 0 && pid_max > 1) {
		list_new(h);
		if (!h->unreadable)
			chase(h, last, pid_max);
		return;
	}
	for (unsigned rounds = 0; !h->over && !h->unreadable && list_new(h);)
		if (++rounds == HELD_MAX_ROUNDS)
			h->over = true; /* processes made faster than they can be read */
}

uint64_t sc__held_bytes(pid_t cell, dev_t dev, uint64_t file_bytes)
{
	/* Without CAP_SYS_PTRACE nothing is known: counted as nothing (docs/security.md), and
	 * the scan of every process is not worth its time. */
	char fds[64];
	snprintf(fds, sizeof(fds), "/proc/%d/fd", (int)cell);
	int fd = open(fds, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	close(fd);
	/* Runs of several threads are watched at once: each measurement has its own. */
	struct held *h = calloc(1, sizeof(*h)); /* 116 KiB: never on a caller's thread stack */
	pid_t ppid;
	if (!h)
		return 0;
	h->dev = dev;
	h->cell = cell;
	h->mapped_bytes = file_bytes;
	bool gone = !status_of(cell, &h->uid, &ppid);
	if (!gone)
		scan(h);
	for (size_t i = 0; i < h->n_maps; i++)
		for (size_t j = 0; j <= h->n_inos; j++)
			if (j == h->n_inos)
				h->bytes += h->mapped_bytes;
			else if (h->inos[j] == h->maps[i])
				break;
	uint64_t bytes = h->unreadable || gone ? 0 : h->over ? UINT64_MAX : h->bytes;
	free(h);
	return bytes;
}
