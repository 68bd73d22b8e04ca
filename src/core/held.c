/* The rlimits level: what a cell's processes hold on the work directory's filesystem that no
 * name shows (files opened, then unlinked; mapped, then closed and unlinked), for the /tmp and
 * /output watch (run.c), which walks the names and decides. It reads the cell's /proc, which
 * needs CAP_SYS_PTRACE: cells are non-dumpable (guest/cell.c), so even their own uid cannot. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "core.h"

/* Bounds on one measurement: processes of the tree and distinct unlinked files. Past either,
 * the figure is reported as over every limit (the code made that many on purpose). */
#define HELD_MAX_PROCS 4096
#define HELD_MAX_FILES 4096
/* And on the /proc/PID/maps text read in one: its cost is the code's to choose (65,530
 * mappings per process, each line naming a path up to 64 directories deep), and the watch
 * waits ten times a measurement's time before the next. 30,000 mappings of one file 60
 * directories down made 456 MB of it, read in 2.3 s, and the cell wrote 3 GiB in the 23 s
 * gap under a 321 MiB bound. A process that imports numpy, pandas, matplotlib and scipy has
 * 160 KB of it. */
#define HELD_MAX_MAPS_BYTES (32u << 20)

struct held {
	dev_t dev;	       /* the work directory's filesystem */
	uint64_t mapped_bytes; /* what a mapped file with no descriptor counts: its size bound */
	pid_t procs[HELD_MAX_PROCS];
	size_t n_procs;
	ino_t inos[HELD_MAX_FILES];
	size_t n_inos;
	uint64_t bytes, maps_bytes;
	bool over, unreadable;
	char buf[16 * HELD_MAX_PROCS]; /* a children list: pids of up to 7 digits and a space */
};

/* Counts an unlinked file once, whichever processes and descriptors hold it. */
static bool seen(struct held *h, ino_t ino)
{
	for (size_t i = 0; i < h->n_inos; i++)
		if (h->inos[i] == ino)
			return true;
	if (h->n_inos == HELD_MAX_FILES) {
		h->over = true;
		return true;
	}
	h->inos[h->n_inos++] = ino;
	return false;
}

/* Reads all of a task's children list into h->buf; false when it does not fit (more
 * children than HELD_MAX_PROCS could hold anyway). */
static bool read_children(struct held *h, const char *file)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n = 0;
	while (fd >= 0 && len < sizeof(h->buf) - 1 &&
	       (n = read(fd, h->buf + len, sizeof(h->buf) - 1 - len)) > 0)
		len += (size_t)n;
	if (fd >= 0)
		close(fd);
	h->buf[len] = 0;
	return len < sizeof(h->buf) - 1;
}

/* The process pid and its descendants, in h->procs: a cell is a subreaper, so everything its
 * code started stays below it while it lives. Each thread keeps its own children list. */
static void add_tree(struct held *h, pid_t cell)
{
	h->procs[h->n_procs++] = cell;
	for (size_t at = 0; at < h->n_procs && !h->over; at++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task", (int)h->procs[at]);
		DIR *tasks = opendir(path);
		for (struct dirent *t; tasks && !h->over && (t = readdir(tasks));) {
			char file[384];
			if (t->d_name[0] < '0' || t->d_name[0] > '9')
				continue;
			snprintf(file, sizeof(file), "%s/%s/children", path, t->d_name);
			if (!read_children(h, file))
				h->over = true;
			for (char *p = h->buf, *end; *p && !h->over; p = end) {
				long pid = strtol(p, &end, 10);
				if (end == p)
					break;
				if (h->n_procs == HELD_MAX_PROCS)
					h->over = true;
				else
					h->procs[h->n_procs++] = (pid_t)pid;
			}
		}
		if (tasks)
			closedir(tasks);
	}
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
		if (e->d_name[0] < '0' || e->d_name[0] > '9' ||
		    fstatat(dirfd(d), e->d_name, &st, 0) < 0)
			continue;
		if (S_ISREG(st.st_mode) && st.st_nlink == 0 && st.st_dev == h->dev &&
		    !seen(h, st.st_ino))
			h->bytes += (uint64_t)st.st_blocks * 512;
	}
	if (d)
		closedir(d);
}

/* Every task's table, not only the process's: a thread made without CLONE_FILES, or one that
 * called unshare(CLONE_FILES), has its own, which /proc/PID/fd (the leader's) does not list.
 * Shared tables are read once per task; the inode check counts each file once. */
static void add_descriptors(struct held *h, pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *tasks = opendir(path);
	for (struct dirent *t; tasks && !h->over && !h->unreadable && (t = readdir(tasks));) {
		char fds[384];
		if (t->d_name[0] < '0' || t->d_name[0] > '9')
			continue;
		snprintf(fds, sizeof(fds), "%s/%s/fd", path, t->d_name);
		add_table(h, fds);
	}
	if (tasks)
		closedir(tasks);
}

/* Unlinked files on that filesystem that pid maps but holds no descriptor of (mmap, close,
 * unlink). /proc/PID/maps names their device and inode, not their size (map_files/ needs
 * CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), so each counts as the largest file the cell may
 * write. Run after every process's descriptors, so a file also held open counts as measured. */
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
		if (!seen(h, (ino_t)ino))
			h->bytes += h->mapped_bytes;
	}
	free(line);
	if (f)
		fclose(f);
}

uint64_t sc__held_bytes(pid_t cell, dev_t dev, uint64_t file_bytes)
{
	/* Runs of several threads are watched at once: each measurement has its own. */
	struct held *h = calloc(1, sizeof(*h)); /* 112 KiB: never on a caller's thread stack */
	if (!h)
		return 0;
	h->dev = dev;
	h->mapped_bytes = file_bytes;
	add_tree(h, cell);
	for (size_t i = 0; i < h->n_procs && !h->over && !h->unreadable; i++)
		add_descriptors(h, h->procs[i]);
	for (size_t i = 0; i < h->n_procs && !h->over && !h->unreadable; i++)
		add_mappings(h, h->procs[i]);
	/* Without CAP_SYS_PTRACE nothing is known: counted as nothing (docs/security.md). */
	uint64_t bytes = h->unreadable ? 0 : h->over ? UINT64_MAX : h->bytes;
	free(h);
	return bytes;
}
