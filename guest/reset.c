/* Reset in place (snapcell_config_set_reuse): the template brings a fresh cell that ran code back
 * to the state it was parked in, so a later fresh run can take it instead of a newly forked one.
 *
 * The template drives it: it is the cells' parent, never runs code, and holds what a reset puts
 * back. A cell armed for reuse (cell.c) opens a userfaultfd before its seccomp filter and, once
 * warm, stops itself with SIGSTOP. The template, which seized it with ptrace right after the
 * fork, then parks it (park): takes the userfaultfd (the cell closes its own copy when it goes
 * on), registers asynchronous write-protection on every private mapping, copies the writable
 * ones into an image, protects every page, and keeps the registers and what the checks compare
 * against; then it detaches. A reset (sc_reuse_reset, the host's SC_CTL_RESET after a run whose
 * DONE and output it has) seizes and interrupts the cell again, checks every piece of process
 * state it does not restore, copies back the pages the run wrote (PAGEMAP_SCAN finds them),
 * protects them again, lists the mappings the run added for the cell to unmap, puts the
 * registers back (the cell goes on from the return of its SIGSTOP, see cell.c reuse_park,
 * which unmaps them before anything else) and detaches. Any difference or error kills the cell: the
 * host then retires it and the next run gets a forked cell. What is checked and what is not:
 * docs/security.md, "Reset in place". */
#define _GNU_SOURCE
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "counters.h"
#include "template.h"
#include "util/buf.h"
#include "util/pagemap_scan.h"
#include "util/util.h"

#ifndef KCMP_FILE
#define KCMP_FILE 0
#endif

#define PAGE	    4096u
#define MAX_RANGES  1024  /* private mappings of a parked cell */
#define MAX_REGIONS 4096  /* written extents one scan returns */
#define XSTATE_MAX  16384 /* NT_X86_XSTATE: 2.5-11 KiB */
#define TEXT_MAX    65536 /* /proc/PID/maps and the other texts compared */
#define MAX_VMAS    4096  /* mappings of a parked cell compared through PROCMAP_QUERY */
#define MAX_FDS	    16	  /* descriptors of a parked cell (0-3, 4 with a network) */
#define SMALL_TEXT  4096
#define HOT_MAX	    4096 /* regions of a cell's hot set (reset_hot) */
#define HOT_RUNS    16	 /* runs a hot set is left unprotected for before it is learned again */
#define KEPT_MAX    32	 /* /proc files of a cell kept open (kept_open) */

enum range_kind {
	RESTORED, /* writable, registered: written pages copied back from the image */
	GUARDED,  /* read-only, registered: a written page discards the cell */
	COMPARED, /* read-only, not registered (the vDSO): compared with the image */
};

struct range {
	uint64_t start, end;
	enum range_kind kind;
	size_t image_off; /* RESTORED, COMPARED: where its parked bytes are in the image */
	bool of_file;	  /* some mapping in it maps a file (the others are anonymous) */
};

struct text {
	char *buf;
	size_t len, cap;
};

/* One mapping as PROCMAP_QUERY reports it: what its line in /proc/PID/maps shows (range,
 * permissions and private or shared, offset, device, inode), and its name (name_len bytes at
 * name_at in the parked names) where it is not a private file's (map_query_named). */
struct vma {
	uint64_t start, end, flags, offset, inode;
	uint32_t dev_major, dev_minor;
	size_t name_at, name_len;
};

/* Frees t's buffer, zeroed first: what it held was read from a cell after a run (its
 * mappings' names, say), and the template's freed memory is in every cell forked later. */
static void text_drop(struct text *t)
{
	if (t->buf)
		explicit_bzero(t->buf, t->cap);
	free(t->buf);
	t->buf = NULL;
	t->cap = t->len = 0;
}

/* Room for cap bytes in t (what it holds is dropped). */
static int text_room(struct text *t, size_t cap)
{
	if (t->buf && t->cap >= cap)
		return 0;
	text_drop(t);
	t->cap = 0;
	if (!(t->buf = malloc(cap)))
		return -ENOMEM;
	t->cap = cap;
	return 0;
}

enum reuse_state {
	ARMING, /* seized, not yet at its parked stop */
	PARKED, /* its parked state taken: it can be reset */
	BROKEN, /* never reset (arming failed, or it was parked wrongly) */
};

struct sc_reuse {
	enum reuse_state state;
	char why[120]; /* BROKEN: why it was not parked */
	int uffd, pidfd, pagemap_fd;
	struct range ranges[MAX_RANGES];
	size_t n_ranges;
	uint64_t span_start, span_end;
	char *image;
	size_t image_len;
	struct user_regs_struct regs;
	unsigned char xstate[XSTATE_MAX];
	size_t xstate_len;
	/* What the checks compare against: its mappings as PROCMAP_QUERY lists them (vmas, with
	 * the names of those that are not a private file's in names), or where the kernel has no
	 * PROCMAP_QUERY (vmas NULL) the text of /proc/PID/maps. */
	struct vma *vmas;
	size_t n_vmas;
	struct text names, maps, status, limits, misc, sockopts;
	int fd_nums[MAX_FDS], fd_dups[MAX_FDS];
	unsigned fd_flags[MAX_FDS]; /* fdinfo's: status flags and close-on-exec */
	size_t n_fds;
	struct rseq_config {
		uint64_t abi_pointer;
		uint32_t len, flags, signature;
	} rseq;		    /* PTRACE_GET_RSEQ_CONFIGURATION: where the kernel writes */
	uint64_t robust[2]; /* get_robust_list: head and its size */
	/* The pages of read-only mappings that were the process's own when parked (a
	 * library's relocations, made read-only after the loader wrote them), as regions. */
	struct page_region *own;
	size_t n_own;
	struct sc_reuse_dirs dirs; /* its /tmp and /output as parked (reset_leftovers.c) */
	struct rusage children;	   /* its RUSAGE_CHILDREN as parked */
	int64_t other_threads_ns;  /* the CPU time of its threads but the main one, as parked */
	timer_t cpu_timer; /* on the cell's CPU clock: its run's CPU limit (cpu_limit_arm) */
	bool have_cpu_timer;
	/* The hot set (reset_hot): the regions of writable mappings the last run with every
	 * page protected wrote, left unprotected for the next hot_left runs. In a mapping of
	 * its own that no later fork inherits: where a run wrote is no later cell's business. */
	struct page_region *hot;
	size_t n_hot;
	unsigned hot_left; /* 0: the run that ended ran with every page protected: learn */
	/* Its /proc files, opened once (kept_open). */
	struct kept_file {
		char what[24];
		int fd;
	} kept[KEPT_MAX];
	size_t n_kept;
	int cgroup_fds[2]; /* its memory cgroup's files, opened at its first reset (rearm) */
	struct sc_counters *counters; /* what its runs read of their counters (counters.c) */
};

/* Where the kernel writes into the cell on its own: its rseq area (on every resume) and its
 * robust futex list (at exit). A run could register others in memory the next run uses. */
static int kernel_writes(pid_t pid, struct rseq_config *rseq, uint64_t robust[2])
{
	memset(rseq, 0, sizeof(*rseq));
	if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, pid, (void *)sizeof(*rseq), rseq) < 0)
		return -errno;
	void *head = NULL;
	size_t len = 0;
	if (syscall(SYS_get_robust_list, pid, &head, &len) < 0)
		return -errno;
	robust[0] = (uint64_t)(uintptr_t)head;
	robust[1] = len;
	return 0;
}

/* The sandbox's procfs (SC_GUEST_PROC_FD, a mount attached nowhere: guest/helper.c), or -1. */
static int proc_fd = -1;
/* Set when a parking failed for want of a kernel feature (userfaultfd's asynchronous
 * write-protection, PAGEMAP_SCAN: Linux 6.7): later cells are not seized at all, and every
 * reset is refused, so runs get forked cells as without reuse. */
static bool unsupported;
/* Whether the kernel answers PROCMAP_QUERY (Linux 6.11), known from the first parking: the
 * mappings are then compared through it, else through the text of /proc/PID/maps (6.7-6.10,
 * or the setup's reuse_maps_text, which tests set). Either way every cell of the sandbox is
 * checked the same way. */
static enum { QUERY_UNKNOWN, QUERY_YES, QUERY_NO } maps_query;

void sc_reuse_init(void)
{
	struct statfs fs;
	if (T.cfg.s.reuse_maps_text)
		maps_query = QUERY_NO;
	if (T.cfg.reuse && fstatfs(SC_GUEST_PROC_FD, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC &&
	    fcntl(SC_GUEST_PROC_FD, F_SETFD, FD_CLOEXEC) == 0)
		proc_fd = SC_GUEST_PROC_FD;
	else
		T.cfg.reuse = false;
}

/* The cell being reset (the template resets one at a time), whose /proc files kept_open
 * keeps from its first reset on: a reset reads some twenty of them, and the path walk and the
 * open and close of each cost more than the read. A file opened by pid stays the process's
 * (its reads fail once it is gone, whatever takes its pid), and a read at offset 0 starts it
 * afresh. Not from parking: a parked cell may become a session's anchor, never reset, and
 * sessions are many; cells reset are as many as runs at once, and a few more. */
static struct sc_reuse *kept_for;
static pid_t kept_pid;

/* A descriptor of /proc/PID/what: kept (*owned false) when pid is kept_for's, else new. */
static int kept_open(pid_t pid, const char *what, int flags, bool *owned)
{
	struct sc_reuse *r = pid == kept_pid ? kept_for : NULL;
	for (size_t i = 0; r && i < r->n_kept; i++)
		if (!strcmp(r->kept[i].what, what)) {
			*owned = false;
			return r->kept[i].fd;
		}
	char path[64];
	snprintf(path, sizeof(path), "%d/%s", (int)pid, what);
	int fd = openat(proc_fd, path, flags | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*owned = !r || r->n_kept == KEPT_MAX || strlen(what) >= sizeof(r->kept[0].what);
	if (!*owned) {
		snprintf(r->kept[r->n_kept].what, sizeof(r->kept[0].what), "%s", what);
		r->kept[r->n_kept++].fd = fd;
	}
	return fd;
}

/* Whether /proc/PID/what is made whole by one call of the kernel (single_open's show, or a
 * text copied out of one buffer: simple_read_from_buffer), so that a read into a buffer
 * larger than the text returns all of it and a read shorter than asked ends it: the read for
 * the end would make the text a second time. Not maps, timers or children, which the kernel
 * makes a record at a time, a page of records a read. */
static bool made_whole(const char *what)
{
	static const char *const whole[] = {
		"status", "stat",	   "limits",   "personality", "comm",
		"cgroup", "oom_score_adj", "loginuid", "sessionid",   "smaps_rollup"};
	for (size_t i = 0; i < SC_ARRAY_LEN(whole); i++)
		if (!strcmp(what, whole[i]))
			return true;
	return !strncmp(what, "fdinfo/", 7);
}

static int proc_text(pid_t pid, const char *what, struct text *t, size_t cap)
{
	bool owned;
	int fd = kept_open(pid, what, O_RDONLY, &owned);
	if (fd < 0)
		return fd;
	int rc = text_room(t, cap);
	t->len = 0;
	ssize_t n = 0;
	bool whole = made_whole(what);
	while (rc == 0 && (n = pread(fd, t->buf + t->len, cap - t->len, (off_t)t->len)) > 0) {
		t->len += (size_t)n;
		if (whole && t->len < cap)
			break;
	}
	if (rc == 0)
		rc = n < 0 ? -errno : t->len == cap ? -E2BIG : 0;
	if (rc == 0)
		t->buf[t->len] = 0; /* for the parsers; not part of what is compared */
	if (owned)
		close(fd);
	return rc;
}

static bool text_same(const struct text *a, const struct text *b)
{
	return a->len == b->len && memcmp(a->buf, b->buf, a->len) == 0;
}

/* The lines of /proc/PID/status a run could change and a reset does not restore. Not SigQ: it
 * counts the signals queued to the whole real uid (other cells' too). Not the memory lines,
 * which the reset restores or which change with it. */
static int read_status(pid_t pid, struct text *t)
{
	static const char *const keep[] = {"Umask:",
					   "State:",
					   "Tgid:",
					   "Ngid:",
					   "Pid:",
					   "PPid:",
					   "TracerPid:",
					   "Uid:",
					   "Gid:",
					   "FDSize:",
					   "Groups:",
					   "NStgid:",
					   "NSpid:",
					   "NSpgid:",
					   "NSsid:",
					   "Kthread:",
					   "Threads:",
					   "SigPnd:",
					   "ShdPnd:",
					   "SigBlk:",
					   "SigIgn:",
					   "SigCgt:",
					   "CapInh:",
					   "CapPrm:",
					   "CapEff:",
					   "CapBnd:",
					   "CapAmb:",
					   "NoNewPrivs:",
					   "Seccomp:",
					   "Seccomp_filters:",
					   "Speculation_Store_Bypass:",
					   "SpeculationIndirectBranch:",
					   "Cpus_allowed:",
					   "Mems_allowed:",
					   "untag_mask:",
					   "x86_Thread_features:",
					   "x86_Thread_features_locked:"};
	struct text all = {0};
	int rc = proc_text(pid, "status", &all, SMALL_TEXT);
	if (text_room(t, SMALL_TEXT) < 0)
		rc = -ENOMEM;
	t->len = 0;
	for (char *line = all.buf; rc == 0 && line < all.buf + all.len;) {
		char *nl = memchr(line, '\n', (size_t)(all.buf + all.len - line));
		size_t len = nl ? (size_t)(nl - line) + 1 : (size_t)(all.buf + all.len - line);
		for (size_t i = 0; i < SC_ARRAY_LEN(keep); i++)
			if (strncmp(line, keep[i], strlen(keep[i])) == 0) {
				memcpy(t->buf + t->len, line, len);
				t->len += len;
				break;
			}
		line += len;
	}
	text_drop(&all);
	return rc;
}

/* Fields 1-based as proc(5) numbers them, of /proc/PID/stat (v[k] for k < max; fields 1 and
 * 2, the pid and the name, which may hold anything, are left 0). */
static int stat_fields(pid_t pid, long long *v, size_t max)
{
	struct text t = {0};
	int rc = proc_text(pid, "stat", &t, SMALL_TEXT);
	char *p = NULL;
	if (rc == 0) {
		t.buf[t.len < SMALL_TEXT ? t.len : SMALL_TEXT - 1] = 0;
		p = strrchr(t.buf, ')');
	}
	memset(v, 0, max * sizeof(*v));
	size_t k = 3;
	for (char *tok = p ? strtok(p + 1, " \n") : NULL; tok && k < max;
	     tok = strtok(NULL, " \n"), k++)
		v[k] = strtoll(tok, NULL, 10);
	text_drop(&t);
	return rc < 0 ? rc : k == max ? 0 : -EPROTO;
}

#define STAT_FIELDS 42

/* The cell's CPU time so far (itself and its reaped children), in microseconds. */
static int cpu_used(pid_t pid, uint64_t *us)
{
	long long v[STAT_FIELDS];
	int rc = stat_fields(pid, v, STAT_FIELDS);
	long hz = sysconf(_SC_CLK_TCK);
	/* fields 14-17: utime stime cutime cstime, in clock ticks */
	if (rc == 0)
		*us = (uint64_t)(v[14] + v[15] + v[16] + v[17]) * 1000000ull /
		      (uint64_t)(hz > 0 ? hz : 100);
	explicit_bzero(v, sizeof(v)); /* a run's: see has_entries */
	return rc;
}

/* What else a run could change that a reset does not put back, as one text: the working
 * directory, the root, the personality, the name, the POSIX timers, the scheduling policy,
 * priority and nice value, the session and process group, the children, those reaped. Not the
 * namespaces (a path walk and a link read each, eight a reset): a process changes its own
 * only by unshare, setns or clone3, which the cell's filter refuses (src/isolate/seccomp.c:
 * not in its list, and clone with a CLONE_NEW* flag is EPERM), a filter every reset finds in
 * place (the status's Seccomp lines), and no other process can move it into another. */
static int read_misc(pid_t pid, struct text *t)
{
	if (text_room(t, TEXT_MAX) < 0)
		return -ENOMEM;
	t->len = 0;
	static const char *const links[] = {"cwd", "root"};
	for (size_t i = 0; i < SC_ARRAY_LEN(links); i++) {
		char path[64], target[PATH_MAX];
		snprintf(path, sizeof(path), "%d/%s", (int)pid, links[i]);
		ssize_t n = readlinkat(proc_fd, path, target, sizeof(target) - 1);
		if (n < 0 && errno != ENOENT)
			return -errno;
		target[n < 0 ? 0 : n] = 0;
		t->len += (size_t)snprintf(t->buf + t->len, TEXT_MAX - t->len, "%s %s\n", links[i],
					   target);
		explicit_bzero(target, sizeof(target)); /* a run's: see has_entries */
	}
	char path[64];
	snprintf(path, sizeof(path), "task/%d/children", (int)pid);
	static const char *const files[] = {"personality",   "comm",	 "timers",   "cgroup",
					    "oom_score_adj", "loginuid", "sessionid"};
	for (size_t i = 0; i <= SC_ARRAY_LEN(files); i++) {
		struct text f = {0};
		const char *name = i < SC_ARRAY_LEN(files) ? files[i] : path;
		int rc = proc_text(pid, name, &f, SMALL_TEXT);
		if (rc == -ENOENT) {
			text_drop(&f);
			continue;
		}
		if (rc < 0 || f.len + strlen(name) + 8 > TEXT_MAX - t->len) {
			text_drop(&f);
			return rc < 0 ? rc : -E2BIG;
		}
		t->len += (size_t)snprintf(t->buf + t->len, TEXT_MAX - t->len, "%s:\n", name);
		memcpy(t->buf + t->len, f.buf, f.len);
		t->len += f.len;
		text_drop(&f);
	}
	/* pgrp session tty_nr tpgid (5-8), priority nice (18-19), rt_priority policy (40-41);
	 * the reaped children's faults and CPU time (cminflt 11, cmajflt 13, cutime 16, cstime
	 * 17): a child the run reaped left its peak resident size and CPU time in the cell's
	 * RUSAGE_CHILDREN for good, for the next run to read, and every child faults. */
	long long v[STAT_FIELDS];
	int rc = stat_fields(pid, v, STAT_FIELDS);
	if (rc < 0)
		return rc;
	t->len += (size_t)snprintf(
		t->buf + t->len, TEXT_MAX - t->len,
		"stat %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld %lld\n", v[5], v[6],
		v[7], v[8], v[18], v[19], v[40], v[41], v[11], v[13], v[16], v[17]);
	explicit_bzero(v, sizeof(v));
	return t->len < TEXT_MAX ? 0 : -E2BIG;
}

/* The descriptor numbers of the cell's fd table, sorted; SC_CELL_TMP_FD and SC_CELL_UFFD_FD,
 * which a cell closes before its code runs, are left out. Read through a descriptor kept open
 * (kept_open) from the first reset on: /proc/PID/fd lists the table as it is at each read from
 * offset 0, whatever it was when opened. */
static long list_fds(pid_t pid, int *nums, size_t max)
{
	bool owned;
	int dir = kept_open(pid, "fd", O_RDONLY | O_DIRECTORY, &owned);
	if (dir < 0)
		return dir;
	static _Alignas(struct dirent64) char buf[2048];
	size_t n = 0;
	long rc = lseek(dir, 0, SEEK_SET) < 0 ? -errno : 0, got = 0;
	while (rc == 0 && (got = syscall(SYS_getdents64, dir, buf, sizeof(buf))) > 0)
		for (long at = 0; rc == 0 && at < got;) {
			const struct dirent64 *e = (const struct dirent64 *)(buf + at);
			at += e->d_reclen;
			if (e->d_name[0] == '.')
				continue;
			int fd = atoi(e->d_name);
			/* closed by the cell before any code runs (cell.c), after each reset too */
			if (fd == SC_CELL_TMP_FD || fd == SC_CELL_UFFD_FD || fd == SC_CELL_NOTIF_FD)
				continue;
			if (n == max) {
				rc = -E2BIG;
				break;
			}
			size_t i = n++;
			while (i > 0 && nums[i - 1] > fd) {
				nums[i] = nums[i - 1];
				i--;
			}
			nums[i] = fd;
		}
	if (rc == 0 && got < 0)
		rc = -errno;
	if (owned)
		close(dir);
	return rc < 0 ? rc : (long)n;
}

static int take_fd(int pidfd, int fd)
{
	int got = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
	return got < 0 ? -errno : got;
}

/* Regions of [start, end) in every category of mask; with PM_SCAN_WP_MATCHING they are
 * protected again in the same walk; flags PM_SCAN_CHECK_WPASYNC fails (EPERM) where a mapping
 * is not registered. Returns the count or -errno; *walk_end where the walk stopped. */
static long scan_any(int pagemap_fd, uint64_t start, uint64_t end, uint64_t flags, uint64_t mask,
		     uint64_t inverted, uint64_t anyof, struct page_region *vec, size_t vec_len,
		     uint64_t *walk_end)
{
	struct pm_scan_arg a = {
		.size = sizeof(a),
		.flags = flags,
		.start = start,
		.end = end,
		.vec = (uintptr_t)vec,
		.vec_len = vec_len,
		.category_inverted = inverted,
		.category_mask = mask,
		.category_anyof_mask = anyof,
		.return_mask = mask | anyof,
	};
	long n = ioctl(pagemap_fd, PAGEMAP_SCAN, &a);
	if (walk_end)
		*walk_end = a.walk_end;
	return n < 0 ? -errno : n;
}

static long scan(int pagemap_fd, uint64_t start, uint64_t end, uint64_t flags, uint64_t mask,
		 struct page_region *vec, size_t vec_len, uint64_t *walk_end)
{
	return scan_any(pagemap_fd, start, end, flags, mask, 0, 0, vec, vec_len, walk_end);
}

/* Protects every page of the registered mappings (unregistered ones skipped). */
static int protect_all(const struct sc_reuse *r)
{
	long n = scan(r->pagemap_fd, r->span_start, r->span_end, PM_SCAN_WP_MATCHING,
		      PAGE_IS_WPALLOWED | PAGE_IS_WRITTEN, NULL, 0, NULL);
	return n < 0 ? (int)n : 0;
}

/* One batch of copy_back: where the run wrote, zeroed after each reset as vec is. */
enum { BATCH = 512 };
static struct iovec batch_local[BATCH], batch_remote[BATCH];

/* The parked bytes of the written regions back into the cell, in batches. */
static int copy_back(pid_t pid, const struct sc_reuse *r, const struct range *rg,
		     const struct page_region *vec, size_t n)
{
	size_t k = 0, bytes = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t start = vec[i].start < rg->start ? rg->start : vec[i].start;
		uint64_t end = vec[i].end > rg->end ? rg->end : vec[i].end;
		if (start >= end)
			continue;
		batch_local[k] =
			(struct iovec){r->image + rg->image_off + (start - rg->start), end - start};
		batch_remote[k++] = (struct iovec){(void *)(uintptr_t)start, end - start};
		bytes += end - start;
		if (k < BATCH && i + 1 < n)
			continue;
		if (process_vm_writev(pid, batch_local, k, batch_remote, k, 0) != (ssize_t)bytes)
			return -EIO;
		k = bytes = 0;
	}
	if (k && process_vm_writev(pid, batch_local, k, batch_remote, k, 0) != (ssize_t)bytes)
		return -EIO;
	return 0;
}

/* Whether a mapping the reset cannot protect still holds its parked bytes. */
static bool same_bytes(pid_t pid, const struct sc_reuse *r, const struct range *rg)
{
	char buf[4 * PAGE];
	for (uint64_t at = rg->start; at < rg->end; at += sizeof(buf)) {
		size_t len = rg->end - at < sizeof(buf) ? rg->end - at : sizeof(buf);
		struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)at, len};
		if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)len ||
		    memcmp(buf, r->image + rg->image_off + (at - rg->start), len))
			return false;
	}
	return true;
}

static struct page_region vec[MAX_REGIONS]; /* one scan's regions, zeroed after each reset */

/* The hot set: pages of writable mappings that nearly every run writes (the interpreter's
 * state, the allocator's, the frames the cell exchanges) are left unprotected after a reset,
 * so the next run takes no write-protect fault on them (one per page, dear under nested
 * virtualisation). Correct by construction: PAGEMAP_SCAN reports a page without its
 * write-protect bit as written, so the next reset copies every such page back from the image
 * whether the run wrote it or not, as a page the run wrote. The set is what a run with every
 * page protected wrote (the first run after parking, and every HOT_RUNS runs after, so a set
 * learned from one large run does not cost every later reset its copies for long). */
static void learn_hot(struct sc_reuse *r, const struct range *rg, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t start = vec[i].start < rg->start ? rg->start : vec[i].start;
		uint64_t end = vec[i].end > rg->end ? rg->end : vec[i].end;
		if (start >= end)
			continue;
		struct page_region *last = r->n_hot ? &r->hot[r->n_hot - 1] : NULL;
		if (last && last->end == start) { /* split only by the scan's batches */
			last->end = end;
			continue;
		}
		if (r->n_hot == HOT_MAX) {
			r->n_hot = 0; /* too scattered to pay: protect it all */
			r->hot_left = HOT_RUNS;
			return;
		}
		r->hot[r->n_hot++] = (struct page_region){.start = start, .end = end};
	}
}

/* After every page was protected: the hot set unprotected again, or learned anew. */
static int reset_hot(struct sc_reuse *r)
{
	if (!r->hot_left) /* learned in this reset (learn_hot), or overflowed */
		r->hot_left = HOT_RUNS;
	else if (!--r->hot_left)
		r->n_hot = 0; /* the next run runs protected, and its writes are learned */
	for (size_t i = 0; i < r->n_hot; i++) {
		struct uffdio_writeprotect wp = {
			.range = {r->hot[i].start, r->hot[i].end - r->hot[i].start}, .mode = 0};
		if (ioctl(r->uffd, UFFDIO_WRITEPROTECT, &wp) < 0)
			return -errno;
	}
	return 0;
}

/* Where a reset that keeps its hot set protects again: the pages its scans found (written,
 * or dropped and faulted in by the copy), less the hot set, which stays unprotected. Walking
 * the whole span again (protect_all) and unprotecting the hot set after (reset_hot) cost a
 * seventh of a small reset; a run writes few pages outside its hot set. Zeroed after each
 * reset, as vec is. */
enum { PROTECT_MAX = 64 };
static struct page_region protect_list[PROTECT_MAX];
static size_t n_protect, hot_at;
static bool protect_overflow;

/* The parts of the scan's regions in rg outside the hot set, added to protect_list; the
 * regions come in ascending order over a reset, as the hot set is kept (hot_at its cursor). */
static void note_protect(const struct sc_reuse *r, const struct range *rg, size_t n)
{
	for (size_t i = 0; i < n && !protect_overflow; i++) {
		uint64_t at = vec[i].start < rg->start ? rg->start : vec[i].start;
		uint64_t end = vec[i].end > rg->end ? rg->end : vec[i].end;
		while (hot_at < r->n_hot && r->hot[hot_at].end <= at)
			hot_at++;
		for (size_t h = hot_at; at < end && !protect_overflow; h++) {
			uint64_t upto =
				h < r->n_hot && r->hot[h].start < end ? r->hot[h].start : end;
			struct page_region *last = n_protect ? &protect_list[n_protect - 1] : NULL;
			if (at < upto && last && last->end == at)
				last->end = upto;
			else if (at < upto && n_protect == PROTECT_MAX)
				protect_overflow = true;
			else if (at < upto)
				protect_list[n_protect++] =
					(struct page_region){.start = at, .end = upto};
			if (upto == end)
				break;
			at = r->hot[h].end > at ? r->hot[h].end : at;
		}
	}
}

/* Protects protect_list's regions again. */
static int protect_noted(const struct sc_reuse *r)
{
	for (size_t i = 0; i < n_protect; i++) {
		struct uffdio_writeprotect wp = {
			.range = {protect_list[i].start,
				  protect_list[i].end - protect_list[i].start},
			.mode = UFFDIO_WRITEPROTECT_MODE_WP};
		if (ioctl(r->uffd, UFFDIO_WRITEPROTECT, &wp) < 0)
			return -errno;
	}
	return 0;
}

/* Whether own lists [start, end) among the pages that were the process's own when parked. */
static bool own_covers(const struct sc_reuse *r, uint64_t start, uint64_t end)
{
	size_t lo = 0, hi = r->n_own; /* the first region that starts after start: lo */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r->own[mid].start <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && r->own[lo - 1].end >= end;
}

/* What a run changed in a guarded range, from its scan (restore_memory): the pages written,
 * and in an anonymous range the pages present too, each of which must have been present when
 * parked (own). A page no one had touched there is no page, and one the run read is the zero
 * page, still protected, no write: mincore showed the next run which pages the run before it
 * read. NULL, or why the cell is discarded. */
static const char *guarded_change(const struct sc_reuse *r, const struct range *rg,
				  const struct page_region *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (rg->of_file || (v[i].categories & PAGE_IS_WRITTEN))
			return "a read-only mapping was written";
		if (!own_covers(r, v[i].start, v[i].end))
			return "a page no one had touched in a read-only mapping was read";
	}
	return NULL;
}

/* The pages of each registered mapping that the run wrote: copied back (writable ones), or a
 * reason to discard (a read-only one written, a mapping no longer registered). A reset that
 * keeps the hot set (it is neither learned nor dropped) protects only what it copied outside
 * the set; the others protect the whole span and leave the set they keep unprotected. */
static int restore_memory(pid_t pid, struct sc_reuse *r, const char **why)
{
	bool keeps_hot = r->hot_left >= 2;
	n_protect = hot_at = 0;
	protect_overflow = false;
	for (size_t i = 0; i < r->n_ranges; i++) {
		const struct range *rg = &r->ranges[i];
		if (rg->kind == COMPARED) {
			if (!same_bytes(pid, r, rg)) {
				*why = "the vDSO's pages changed";
				return -EPERM;
			}
			continue;
		}
		for (uint64_t at = rg->start; at < rg->end;) {
			uint64_t walk_end = rg->end;
			/* Restored: the pages written, those no longer present (every page was
			 * present once parked, its image read; MADV_DONTNEED drops an anonymous
			 * page and its protection with it), and a file's (every page was the
			 * process's own once parked: own_file_pages), asked for only where a
			 * file is mapped: no other page can be a file's, and telling takes the
			 * kernel a look at each page's struct page. Guarded: the pages written.
			 */
			uint64_t file = rg->of_file ? PAGE_IS_FILE : 0;
			/* and in an anonymous guarded range, the pages present (guarded_change) */
			uint64_t present = rg->of_file ? 0 : PAGE_IS_PRESENT;
			long n = rg->kind == RESTORED
					 ? scan_any(r->pagemap_fd, at, rg->end,
						    PM_SCAN_CHECK_WPASYNC, 0, PAGE_IS_PRESENT,
						    PAGE_IS_WRITTEN | PAGE_IS_PRESENT | file, vec,
						    MAX_REGIONS, &walk_end)
					 : scan_any(r->pagemap_fd, at, rg->end,
						    PM_SCAN_CHECK_WPASYNC, 0, 0,
						    PAGE_IS_WRITTEN | present, vec, MAX_REGIONS,
						    &walk_end);
			if (n == -EPERM) {
				*why = "a mapping lost its write-protection (remapped)";
				return -EPERM;
			}
			if (n < 0) {
				*why = "PAGEMAP_SCAN failed";
				return (int)n;
			}
			if (n > 0 && rg->kind == GUARDED &&
			    (*why = guarded_change(r, rg, vec, (size_t)n)))
				return -EPERM;
			if (n > 0 && rg->kind == RESTORED &&
			    copy_back(pid, r, rg, vec, (size_t)n) < 0) {
				*why = "process_vm_writev failed";
				return -EIO;
			}
			if (n > 0 && rg->kind == RESTORED && !r->hot_left)
				learn_hot(r, rg, (size_t)n);
			if (n > 0 && rg->kind == RESTORED && keeps_hot)
				note_protect(r, rg, (size_t)n);
			if (walk_end <= at)
				break;
			at = walk_end;
		}
	}
	/* Dropped (MADV_DONTNEED), such a page reads as the file's bytes again, and is no
	 * written page: a run left the next one a library's unrelocated pointers. */
	for (size_t i = 0; i < r->n_own; i++) {
		long n = scan_any(r->pagemap_fd, r->own[i].start, r->own[i].end, 0, 0,
				  PAGE_IS_PRESENT, PAGE_IS_PRESENT | PAGE_IS_FILE, vec, 1, NULL);
		if (n != 0) {
			*why = n < 0 ? "PAGEMAP_SCAN failed"
				     : "a page of a read-only mapping that was its own was dropped";
			return n < 0 ? (int)n : -EPERM;
		}
	}
	bool noted = keeps_hot && !protect_overflow; /* else as a reset that learns */
	int rc = noted ? protect_noted(r) : protect_all(r);
	if (rc < 0)
		*why = "re-protecting the pages failed";
	if (rc == 0 && noted)
		r->hot_left--;
	else if (rc == 0 && (rc = reset_hot(r)) < 0)
		*why = "leaving the hot pages unprotected failed";
	return rc;
}

/* Makes every page of the writable mappings the process's own: a file's page still shared
 * with the file gets a copy of its bytes. A file's page found there at a reset is then one the
 * run dropped (MADV_DONTNEED) and read back, the file's bytes again (a library's unrelocated
 * pointers), which the protection marker the drop left keeps protected: neither written nor
 * missing, restore_memory copies it back as a file's page. */
static int own_file_pages(pid_t pid, const struct sc_reuse *r)
{
	for (size_t i = 0; i < r->n_ranges; i++) {
		const struct range *rg = &r->ranges[i];
		for (uint64_t at = rg->start; rg->kind == RESTORED && at < rg->end;) {
			uint64_t walk_end = rg->end;
			long n = scan(r->pagemap_fd, at, rg->end, 0, PAGE_IS_PRESENT | PAGE_IS_FILE,
				      vec, MAX_REGIONS, &walk_end);
			if (n < 0)
				return (int)n;
			if (n > 0 && copy_back(pid, r, rg, vec, (size_t)n) < 0)
				return -EIO;
			if (walk_end <= at)
				break;
			at = walk_end;
		}
	}
	return 0;
}

/* Lists r->own: in every guarded range, the pages present and not a file's. */
static int find_own_pages(struct sc_reuse *r)
{
	r->n_own = 0;
	size_t cap = 0;
	for (size_t i = 0; i < r->n_ranges; i++) {
		const struct range *rg = &r->ranges[i];
		for (uint64_t at = rg->start; rg->kind == GUARDED && at < rg->end;) {
			uint64_t walk_end = rg->end;
			long n = scan_any(r->pagemap_fd, at, rg->end, 0,
					  PAGE_IS_PRESENT | PAGE_IS_FILE, PAGE_IS_FILE, 0, vec,
					  MAX_REGIONS, &walk_end);
			if (n < 0)
				return (int)n;
			if (SC_ARRAY_RESERVE(r->own, cap, r->n_own + (size_t)n, SC_ARRAY_NO_CAP) <
			    0)
				return -ENOMEM;
			memcpy(r->own + r->n_own, vec, (size_t)n * sizeof(*vec));
			r->n_own += (size_t)n;
			if (walk_end <= at)
				break;
			at = walk_end;
		}
	}
	return 0;
}

static int get_xstate(pid_t pid, unsigned char *buf, size_t *len)
{
	struct iovec iov = {buf, XSTATE_MAX};
	if (ptrace(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &iov) < 0)
		return -errno;
	*len = iov.iov_len;
	return 0;
}

/* Is this special mapping one no process can write (the kernel's data for the vDSO)? */
static bool unwritable_special(const char *name)
{
	return !strncmp(name, "[vvar", 5) || !strcmp(name, "[vsyscall]");
}

/* Registers write-protection on every private mapping of the maps text and lists them. */
static int register_ranges(struct sc_reuse *r)
{
	r->n_ranges = 0;
	r->image_len = 0;
	for (char *line = r->maps.buf; line < r->maps.buf + r->maps.len;) {
		char *nl = memchr(line, '\n', (size_t)(r->maps.buf + r->maps.len - line));
		if (!nl)
			return -EPROTO;
		*nl = 0;
		unsigned long long start, end, inode = 0;
		char perms[5];
		int name_at = 0;
		if (sscanf(line, "%llx-%llx %4s %*s %*s %llu %n", &start, &end, perms, &inode,
			   &name_at) < 4)
			return -EPROTO;
		char name[32];
		snprintf(name, sizeof(name), "%s", name_at ? line + name_at : "");
		*nl = '\n';
		bool shared = perms[3] != 'p', writable = perms[1] == 'w';
		line = nl + 1;
		enum range_kind kind = writable ? RESTORED : GUARDED;
		struct uffdio_register reg = {.range = {start, end - start},
					      .mode = UFFDIO_REGISTER_MODE_WP};
		if (shared && writable) {
			snprintf(r->why, sizeof(r->why), "writable shared memory at %llx", start);
			return -EPERM; /* none is parked; never reset one */
		} else if (shared || unwritable_special(name)) {
			continue; /* a file's own pages, or the kernel's that no process can write
				   */
		} else if (ioctl(r->uffd, UFFDIO_REGISTER, &reg) < 0) {
			if (writable || strcmp(name, "[vdso]")) {
				int e = errno;
				snprintf(r->why, sizeof(r->why), "register %llx-%llx %s %s: %s",
					 start, end, perms, name, strerror(e));
				return -e;
			}
			kind = COMPARED;
		}
		struct range *last = r->n_ranges ? &r->ranges[r->n_ranges - 1] : NULL;
		/* a guarded range is anonymous or of files whole: guarded_change */
		bool joins = last && last->end == start && last->kind == kind && kind != COMPARED &&
			     (kind != GUARDED || last->of_file == (inode != 0));
		if (joins) {
			/* One range for neighbours of a kind (a library's mappings): a reset scans
			 * each range once, and the scan still checks every mapping in it is
			 * registered (PM_SCAN_CHECK_WPASYNC); their images are neighbours too. */
			last->end = end;
			last->of_file |= inode != 0;
		} else if (r->n_ranges == MAX_RANGES) {
			return -E2BIG;
		} else {
			r->ranges[r->n_ranges++] =
				(struct range){start, end, kind, r->image_len, inode != 0};
		}
		if (kind != GUARDED)
			r->image_len += end - start;
	}
	if (!r->n_ranges)
		return -EPROTO;
	r->span_start = r->ranges[0].start;
	r->span_end = r->ranges[r->n_ranges - 1].end;
	return 0;
}

/* Whether the run shut a direction of this socket (the host's end shows the other: answer_reset
 * in src/core/sandbox.c), or its other end is gone. */
static bool shut(int fd)
{
	struct pollfd p = {fd, POLLRDHUP, 0};
	return poll(&p, 1, 0) != 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* The options a cell can set on its sockets (its frame socket, the parked descriptors' only
 * one), which stay with the socket after a reset: a run could leave a receive timeout, a
 * buffer size or a flag for the next one to read, or to trip over. Their values, as one
 * text. Not SO_PEERPIDFD (it would make a pidfd here), nor what the kernel changes by
 * itself (SO_MEMINFO, SO_ERROR). */
static int socket_options(const struct sc_reuse *r, struct text *t)
{
	/* SOL_SOCKET's, by number (headers lag the kernel): DEBUG REUSEADDR DONTROUTE BROADCAST
	 * SNDBUF RCVBUF KEEPALIVE OOBINLINE NO_CHECK PRIORITY LINGER BSDCOMPAT REUSEPORT PASSCRED
	 * RCVLOWAT SNDLOWAT RCVTIMEO SNDTIMEO BINDTODEVICE GET_FILTER TIMESTAMP PASSSEC
	 * TIMESTAMPNS MARK TIMESTAMPING RXQ_OVFL WIFI_STATUS PEEK_OFF NOFCS LOCK_FILTER
	 * SELECT_ERR_QUEUE BUSY_POLL MAX_PACING_RATE INCOMING_CPU ZEROCOPY TXTIME
	 * PREFER_BUSY_POLL BUSY_POLL_BUDGET BUF_LOCK RESERVE_MEM TXREHASH RCVMARK PASSPIDFD. */
	static const int opts[] = {1,  2,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 18,
				   19, 20, 21, 25, 26, 29, 34, 35, 36, 37, 40, 41, 42, 43, 44,
				   45, 46, 47, 49, 60, 61, 69, 70, 72, 73, 74, 75, 76};
	if (text_room(t, SMALL_TEXT) < 0)
		return -ENOMEM;
	t->len = 0;
	for (size_t i = 0; i < r->n_fds; i++) {
		int type;
		socklen_t len = sizeof(type);
		if (getsockopt(r->fd_dups[i], SOL_SOCKET, SO_TYPE, &type, &len) < 0)
			continue; /* not a socket */
		for (size_t k = 0; k < SC_ARRAY_LEN(opts); k++) {
			unsigned char value[32] = {0};
			/* GET_FILTER takes the length as a count of instructions, and copies the
			 * filter whole when it fits: asked with 0, it answers the count alone (a
			 * filter attached is compared by its size; one it cannot show, an eBPF
			 * program's, by the failure). */
			bool filter = opts[k] == SO_GET_FILTER;
			len = filter ? 0 : sizeof(value);
			/* failed: not this kind of socket's, or not this kernel's */
			if (getsockopt(r->fd_dups[i], SOL_SOCKET, opts[k], value, &len) < 0)
				len = filter ? (socklen_t)-1 : 0;
			if (filter) {
				memcpy(value, &len, sizeof(len));
				len = sizeof(len);
			}
			if (t->len + sizeof(len) + len > SMALL_TEXT)
				return -E2BIG;
			memcpy(t->buf + t->len, &len, sizeof(len));
			memcpy(t->buf + t->len + sizeof(len), value, len);
			t->len += sizeof(len) + len;
			explicit_bzero(value, sizeof(value));
		}
	}
	return 0;
}

/* What /proc/PID/fdinfo says of the cell's descriptor fd: its flags (the file's status flags
 * and the descriptor's own close-on-exec, which a duplicate does not share: a run could set it
 * on a parked descriptor for the next run to read), in *flags; and whether the cell holds a
 * lock (flock, OFD or POSIX) on its file: a lock outlives a reset, and others see it from
 * descriptors of their own (the cell's /dev/null is everyone's). 0, or -errno. */
static int fd_info(pid_t pid, int fd, unsigned *flags, bool *locked)
{
	char what[32];
	snprintf(what, sizeof(what), "fdinfo/%d", fd);
	struct text info = {0};
	int rc = proc_text(pid, what, &info, SMALL_TEXT);
	const char *at = rc == 0 ? strstr(info.buf, "\nflags:") : NULL;
	if (rc == 0 && (!at || sscanf(at + 7, "%o", flags) != 1))
		rc = -EPROTO;
	*locked = rc == 0 && (!strncmp(info.buf, "lock:", 5) || strstr(info.buf, "\nlock:"));
	text_drop(&info);
	return rc;
}

/* The reference the checks compare against, read with the cell stopped. */
static int take_reference(pid_t pid, struct sc_reuse *r)
{
	int rc = read_status(pid, &r->status);
	if (rc == 0)
		rc = proc_text(pid, "limits", &r->limits, SMALL_TEXT);
	if (rc == 0)
		rc = read_misc(pid, &r->misc);
	long n = rc == 0 ? list_fds(pid, r->fd_nums, MAX_FDS) : rc;
	if (n < 0)
		return (int)n;
	r->n_fds = 0;
	for (size_t i = 0; i < (size_t)n; i++) {
		int fd = take_fd(r->pidfd, r->fd_nums[i]);
		if (fd < 0)
			return fd;
		r->fd_dups[r->n_fds++] = fd;
		bool locked;
		if (fd_info(pid, r->fd_nums[i], &r->fd_flags[i], &locked) < 0 || locked)
			return -EPROTO;
	}
	if ((rc = socket_options(r, &r->sockopts)) < 0 ||
	    (rc = sc_reuse_dirs_take(proc_fd, pid, &r->dirs)) < 0 ||
	    (rc = sc_reuse_other_threads_ns(proc_fd, pid, &r->other_threads_ns)) < 0)
		return rc;
	/* Last: it runs a system call in the cell, whose registers then go back as parked,
	 * whatever came of it (a cell parked wrongly still runs once, from its parked stop). */
	rc = sc_reuse_children_usage(pid, &r->regs, &r->children);
	if (ptrace(PTRACE_SETREGS, pid, 0, &r->regs) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

/* MADV_FREE leaves a page present and protected, to be dropped (zeroed) at the kernel's
 * leisure, later: no scan can tell. The kernel frees lazily for MADV_FREE alone (as of 6.18,
 * folio_mark_lazyfree's callers are its page walk in mm/madvise.c and the huge-page step of
 * that walk in mm/huge_memory.c), which a cell asks for by madvise, by
 * process_madvise (any advice where the target is the caller itself, since 6.13) or by
 * io_uring's IORING_OP_MADVISE: a reuse cell's filter refuses all three
 * (src/isolate/seccomp.c, SC_SECCOMP_NO_LAZY_FREE). Checked once here, so that no reset
 * walks the page tables for smaps_rollup's count: that the cell parked under a filter, which
 * every reset then finds unchanged (the status's Seccomp and Seccomp_filters lines: a filter
 * cannot be removed, one more changes the count), and that it froze nothing lazily before. */
static int lazy_free_shut(pid_t pid, struct sc_reuse *r)
{
	static const char filtered[] = "\nSeccomp:\t2\n";
	struct text rollup = {0};
	int rc = proc_text(pid, "smaps_rollup", &rollup, SMALL_TEXT);
	const char *lazy = rc == 0 ? strstr(rollup.buf, "\nLazyFree:") : NULL;
	bool none = lazy && strtoull(lazy + 10, NULL, 10) == 0;
	text_drop(&rollup);
	if (rc < 0)
		return rc;
	if (!memmem(r->status.buf, r->status.len, filtered, sizeof(filtered) - 1) || !none) {
		snprintf(r->why, sizeof(r->why), "%s",
			 none ? "parked without its seccomp filter"
			      : "parked with pages freed lazily");
		return -EPROTO;
	}
	return 0;
}

/* Whether PROCMAP_QUERY's name of this mapping is compared: all but a private file's, whose
 * name is its file's path, which the rest identifies (the device, the inode and the offset
 * name the pages; its path changes only by a rename, an unlink or a mount, none of which a run
 * can do to a file a parked cell maps: docs/security.md, "Reset in place"). Its d_path is most
 * of what the text costs the kernel. A shared mapping's name is compared: an anonymous shared
 * one's ([anon_shmem:...]) is the run's to set. */
static bool map_query_named(const struct procmap_query *q)
{
	return !q->inode || (q->vma_flags & PROCMAP_QUERY_VMA_SHARED);
}

/* The mapping at or after at by PROCMAP_QUERY on fd, with its name into name[PATH_MAX] when
 * with_name (its length with the NUL in q->vma_name_size; 0 when not asked or when it has
 * none). 1, 0 past the last mapping, or -errno. */
static int map_query_once(int fd, uint64_t at, bool with_name, char *name, struct procmap_query *q)
{
	*q = (struct procmap_query){.size = sizeof(*q),
				    .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
				    .query_addr = at};
	if (with_name) {
		q->vma_name_addr = (uint64_t)(uintptr_t)name;
		q->vma_name_size = PATH_MAX;
	}
	if (ioctl(fd, PROCMAP_QUERY, q) < 0)
		return errno == ENOENT ? 0 : -errno;
	return 1;
}

/* The mapping at or after at, with its name where map_query_named (asked with it when
 * want_name, the guess, else asked again at its start: the cell is stopped) and none
 * otherwise. 1, 0 past the last mapping, or -errno. */
static int map_query(int fd, uint64_t at, bool want_name, char *name, struct procmap_query *q)
{
	int rc = map_query_once(fd, at, want_name, name, q);
	if (rc > 0 && !map_query_named(q))
		q->vma_name_size = 0; /* a private file's path: not compared */
	else if (rc > 0 && !want_name)
		rc = map_query_once(fd, q->vma_start, true, name, q);
	return rc;
}

/* The parked mappings through PROCMAP_QUERY on fd, into r->vmas and r->names. */
static int record_vmas(int fd, struct sc_reuse *r)
{
	static char name[PATH_MAX];
	size_t cap = 0;
	int rc;
	r->n_vmas = 0;
	if ((rc = text_room(&r->names, SMALL_TEXT)) < 0)
		return rc;
	r->names.len = 0;
	struct procmap_query q;
	for (uint64_t at = 0; (rc = map_query(fd, at, true, name, &q)) > 0; at = q.vma_end) {
		if (r->n_vmas == cap) {
			if (cap == MAX_VMAS)
				return -E2BIG;
			cap = cap ? 2 * cap : 256;
			struct vma *more = realloc(r->vmas, cap * sizeof(*more));
			if (!more)
				return -ENOMEM;
			r->vmas = more;
		}
		size_t len = q.vma_name_size;
		while (r->names.len + len > r->names.cap) {
			if (r->names.cap >= TEXT_MAX)
				return -E2BIG;
			char *more = realloc(r->names.buf, 2 * r->names.cap);
			if (!more)
				return -ENOMEM;
			r->names.buf = more;
			r->names.cap *= 2;
		}
		memcpy(r->names.buf + r->names.len, name, len);
		r->vmas[r->n_vmas++] =
			(struct vma){q.vma_start, q.vma_end,   q.vma_flags,  q.vma_offset, q.inode,
				     q.dev_major, q.dev_minor, r->names.len, len};
		r->names.len += len;
	}
	return rc < 0 ? rc : r->n_vmas ? 0 : -EPROTO;
}

/* The parked mappings, as a reset compares them: through PROCMAP_QUERY where the kernel has
 * it, else as the text of /proc/PID/maps. */
static int take_mappings(pid_t pid, struct sc_reuse *r)
{
	if (maps_query != QUERY_NO) {
		char path[64];
		snprintf(path, sizeof(path), "%d/maps", (int)pid);
		int fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		int rc = record_vmas(fd, r);
		close(fd);
		if (rc == 0) {
			maps_query = QUERY_YES;
			text_drop(&r->maps);
			return 0;
		}
		free(r->vmas);
		r->vmas = NULL;
		if (maps_query == QUERY_YES || (rc != -ENOTTY && rc != -EINVAL))
			return rc;
		maps_query = QUERY_NO;
	}
	return proc_text(pid, "maps", &r->maps, TEXT_MAX);
}

/* At the cell's parked stop (a signal-delivery stop for its SIGSTOP, the cell inside tgkill). */
static int park(pid_t pid, struct sc_reuse *r)
{
	if (ptrace(PTRACE_GETREGS, pid, 0, &r->regs) < 0)
		return -errno;
	if (r->regs.orig_rax != SYS_tgkill || r->regs.rax != 0)
		return -EPROTO; /* not the stop of cell.c's reuse_park */
	int rc = get_xstate(pid, r->xstate, &r->xstate_len);
	if (rc < 0)
		return rc;
	if (r->pidfd < 0 && (r->pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
		return -errno;
	if ((r->uffd = take_fd(r->pidfd, SC_CELL_UFFD_FD)) < 0)
		return r->uffd;
	struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC};
	if (ioctl(r->uffd, UFFDIO_API, &api) < 0) {
		snprintf(r->why, sizeof(r->why), "UFFDIO_API: %s", strerror(errno));
		unsupported = true;
		return -EINVAL;
	}
	char path[64];
	snprintf(path, sizeof(path), "%d/pagemap", (int)pid);
	if ((r->pagemap_fd = openat(proc_fd, path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if ((rc = proc_text(pid, "maps", &r->maps, TEXT_MAX)) < 0 || (rc = register_ranges(r)) < 0)
		return rc;
	/* A mapping of its own that no later fork inherits: a cell forked after this one would
	 * otherwise carry the image in its own writable memory (its RLIMIT_AS, and its image
	 * again, each new image holding the ones before). */
	r->image = mmap(NULL, r->image_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			0);
	if (r->image == MAP_FAILED) {
		r->image = NULL;
		return -ENOMEM;
	}
	if (madvise(r->image, r->image_len, MADV_DONTFORK) < 0)
		return -errno;
	r->hot = mmap(NULL, HOT_MAX * sizeof(*r->hot), PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->hot == MAP_FAILED) {
		r->hot = NULL;
		return -ENOMEM;
	}
	if (madvise(r->hot, HOT_MAX * sizeof(*r->hot), MADV_DONTFORK) < 0)
		return -errno;
	for (size_t i = 0; i < r->n_ranges; i++) {
		const struct range *rg = &r->ranges[i];
		if (rg->kind == GUARDED)
			continue;
		struct iovec local = {r->image + rg->image_off, rg->end - rg->start};
		struct iovec remote = {(void *)(uintptr_t)rg->start, rg->end - rg->start};
		if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)local.iov_len)
			return -EIO;
	}
	/* Registering may merge or split nothing, but take the maps as a reset will see them. */
	if ((rc = take_mappings(pid, r)) < 0)
		return rc;
	if ((rc = own_file_pages(pid, r)) < 0 || (rc = protect_all(r)) < 0) {
		unsupported = unsupported || rc == -ENOTTY || rc == -EINVAL; /* no PAGEMAP_SCAN */
		return rc;
	}
	if ((rc = find_own_pages(r)) < 0 || (rc = kernel_writes(pid, &r->rseq, r->robust)) < 0)
		return rc;
	if ((rc = take_reference(pid, r)) < 0)
		return rc;
	return lazy_free_shut(pid, r);
}

static void reuse_drop(struct sc_reuse *r)
{
	if (!r)
		return;
	if (r->uffd >= 0)
		close(r->uffd);
	if (r->pidfd >= 0)
		close(r->pidfd);
	if (r->pagemap_fd >= 0)
		close(r->pagemap_fd);
	if (r->have_cpu_timer)
		timer_delete(r->cpu_timer);
	sc_counters_drop(r->counters);
	for (size_t i = 0; i < r->n_fds; i++)
		close(r->fd_dups[i]);
	for (size_t i = 0; i < r->n_kept; i++)
		close(r->kept[i].fd);
	for (int i = 0; i < 2; i++)
		if (r->cgroup_fds[i] >= 0)
			close(r->cgroup_fds[i]);
	if (r->image)
		munmap(r->image, r->image_len);
	if (r->hot)
		munmap(r->hot, HOT_MAX * sizeof(*r->hot));
	free(r->vmas);
	text_drop(&r->names);
	text_drop(&r->maps);
	text_drop(&r->status);
	text_drop(&r->limits);
	text_drop(&r->misc);
	text_drop(&r->sockopts);
	free(r->own);
	free(r);
}

/* The CPU limit of each run in an armed cell, exact. Its RLIMIT_CPU (the limit and the slack)
 * spans all its runs, and whole seconds cannot start where a run starts, so the template
 * times each run on the cell's own CPU clock: a POSIX timer of the template's (a process's
 * timer, which the cell can neither see nor cancel) that expires once the cell's CPU time
 * reaches base + the limit in whole seconds, as a fresh cell's RLIMIT_CPU does: base 0 for
 * the first run (its warm-up counts, as a fresh cell's does), the CPU time at the reset's stop
 * for a reset one. The expiry comes to the template's signalfd as SC_REUSE_CPU_SIGNAL with
 * the cell's id (sc_reuse_cpu_expired), and the template kills the cell, as the kernel would
 * at the limit. The cell's processes' own RLIMIT_CPU stays the backstop. */
static int cpu_limit_arm(pid_t pid, uint32_t id, struct sc_reuse *r, bool from_now)
{
	uint64_t limit_s = (T.cfg.limits.cpu_ms + 999) / 1000;
	if (!limit_s)
		return 0;
	clockid_t clock;
	int rc = clock_getcpuclockid(pid, &clock);
	if (rc != 0)
		return -rc;
	if (!r->have_cpu_timer) {
		struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL,
				      .sigev_signo = SC_REUSE_CPU_SIGNAL,
				      .sigev_value.sival_int = (int)id};
		if (timer_create(clock, &ev, &r->cpu_timer) < 0)
			return -errno;
		r->have_cpu_timer = true;
	}
	struct timespec now = {0};
	if (from_now && clock_gettime(clock, &now) < 0)
		return -errno;
	struct itimerspec at = {.it_value = {now.tv_sec + (time_t)limit_s, now.tv_nsec}};
	return timer_settime(r->cpu_timer, TIMER_ABSTIME, &at, NULL) < 0 ? -errno : 0;
}

/* Whether the cell's timer expired: disarmed, as a one-shot timer is once it fired. Any
 * process of the uid can queue SC_REUSE_CPU_SIGNAL to the template, with any value and code
 * (rt_sigqueueinfo), so the signal alone proves nothing. */
static bool cpu_limit_expired(const struct sc_reuse *r)
{
	struct itimerspec left;
	return r && r->have_cpu_timer && timer_gettime(r->cpu_timer, &left) == 0 &&
	       !left.it_value.tv_sec && !left.it_value.tv_nsec;
}

void sc_reuse_cpu_expired(uint32_t id)
{
	for (size_t i = 0; i < T.n_cells; i++)
		if (T.cells[i].id == id && cpu_limit_expired(T.cells[i].reuse))
			kill(T.cells[i].pid, SIGKILL);
}

void sc_reuse_seize(struct live_cell *c)
{
	c->reuse = NULL;
	/* Its first run's CPU limit first, whether or not it is ever reset: an armed cell's
	 * RLIMIT_CPU has the slack. Without its timer the cell does not run. */
	struct sc_reuse *r = calloc(1, sizeof(*r));
	if (r)
		r->uffd = r->pidfd = r->pagemap_fd = r->cgroup_fds[0] = r->cgroup_fds[1] = -1;
	if (!r || cpu_limit_arm(c->pid, c->id, r, false) < 0) {
		kill(c->pid, SIGKILL);
		reuse_drop(r);
		return;
	}
	c->reuse = r;
	if (unsupported || T.cfg.ops->level() < SNAPCELL_ISOLATION_NAMESPACES) {
		r->state = BROKEN;
		snprintf(r->why, sizeof(r->why), "not parked: reset is unsupported here");
		if (T.cfg.ops->level() < SNAPCELL_ISOLATION_NAMESPACES)
			return;
	}
	/* Until its parked stop; the cell stops only once it is warm, so this comes first. Even
	 * where it will not be parked: its counters' listener is taken there. */
	if (ptrace(PTRACE_SEIZE, c->pid, 0, PTRACE_O_EXITKILL) < 0) {
		r->state = BROKEN;
		snprintf(r->why, sizeof(r->why), "PTRACE_SEIZE: %s", strerror(errno));
	}
}

void sc_reuse_free(struct live_cell *c)
{
	reuse_drop(c->reuse);
	c->reuse = NULL;
}

/* At the parked stop, whether or not the cell can be parked: its counters' listener taken (a
 * cell whose calls no one would answer must not run) and the stop marked seen, before any
 * image is taken (cell.c reuse_park stops again until it is). */
static int counters_at_park(pid_t pid, struct sc_reuse *r)
{
	static const int seen = 1;
	struct iovec local = {(void *)&seen, sizeof(seen)},
		     remote = {(void *)&sc_reuse_stop_seen, sizeof(seen)};
	if (r->pidfd < 0 && (r->pidfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
		return -errno;
	if (!(r->counters = sc_counters_take(pid, r->pidfd, proc_fd)))
		return -EIO;
	return process_vm_writev(pid, &local, 1, &remote, 1, 0) == sizeof(seen) ? 0 : -EIO;
}

void sc_reuse_stopped(struct live_cell *c, int status)
{
	struct sc_reuse *r = c->reuse;
	int sig = WSTOPSIG(status);
	/* Its parked stop: the only SIGSTOP it sends itself while traced. */
	bool at_park = r && !r->counters && sig == SIGSTOP && (status >> 16) == 0;
	if (at_park && counters_at_park(c->pid, r) < 0) {
		r->state = BROKEN;
		kill(c->pid, SIGKILL);
		ptrace(PTRACE_DETACH, c->pid, 0, 0);
		return;
	}
	bool parked_stop = at_park && r->state == ARMING;
	int rc = parked_stop ? park(c->pid, r) : 0;
	if (parked_stop && rc == 0) {
		r->state = PARKED;
		sig = 0;
	} else if (r) {
		r->state = BROKEN;
		if (!r->why[0])
			snprintf(r->why, sizeof(r->why), "parking: %s (stop %#x)",
				 rc < 0 ? strerror(-rc) : "not its parked stop", (unsigned)status);
		if (at_park)
			sig = 0;
	}
	if ((status >> 16) != 0)
		sig = 0; /* an event stop carries no signal to pass on */
	/* Detached: a run's signals reach the cell as without a tracer. */
	ptrace(PTRACE_DETACH, c->pid, 0, (void *)(uintptr_t)sig);
}

/* One line of /proc/PID/maps: its range, and the rest (permissions, offset, device, inode,
 * name), which must match exactly. */
struct map_line {
	uint64_t start, end;
	const char *rest;
	size_t rest_len;
};

static bool next_line(const struct text *t, size_t *at, struct map_line *l)
{
	if (*at >= t->len)
		return false;
	const char *p = t->buf + *at, *nl = memchr(p, '\n', t->len - *at);
	size_t len = nl ? (size_t)(nl - p) + 1 : t->len - *at;
	char *dash, *space;
	l->start = strtoull(p, &dash, 16);
	l->end = *dash == '-' ? strtoull(dash + 1, &space, 16) : 0;
	if (*dash != '-' || *space != ' ')
		return false;
	l->rest = space;
	l->rest_len = len - (size_t)(space - p);
	*at += len;
	return true;
}

static bool same_rest(const struct map_line *a, const struct map_line *b)
{
	return a->rest_len == b->rest_len && !memcmp(a->rest, b->rest, a->rest_len);
}

/* Whether the mappings now are the parked ones, each exactly as parked, plus whole mappings the
 * run added (a heap's growth is one: it does not merge with the registered heap), listed in
 * *unmaps for the cell to unmap (cell.c reuse_park). Any parked mapping changed, moved, split
 * or gone, or a special one added: false. */
static bool added_only(const struct text *parked, const struct text *now,
		       struct sc_reuse_unmaps *unmaps)
{
	size_t at_p = 0, at_n = 0;
	struct map_line p, n;
	bool have_p = next_line(parked, &at_p, &p);
	unmaps->n = 0;
	while (next_line(now, &at_n, &n)) {
		if (have_p && n.start == p.start && n.end == p.end && same_rest(&n, &p)) {
			have_p = next_line(parked, &at_p, &p);
			continue;
		}
		if ((have_p && n.end > p.start) || unmaps->n == SC_REUSE_UNMAP_MAX ||
		    memmem(n.rest, n.rest_len, "[v", 2) ||
		    memmem(n.rest, n.rest_len, "[stack", 6)) {
			unmaps->n = 0;
			return false; /* overlaps what was parked; too many; a special mapping */
		}
		unmaps->at[unmaps->n].start = n.start;
		unmaps->at[unmaps->n++].end = n.end;
	}
	if (have_p)
		unmaps->n = 0;
	return !have_p;
}

static bool same_vma(const struct sc_reuse *r, const struct vma *v, const struct procmap_query *q,
		     const char *name)
{
	return v->start == q->vma_start && v->end == q->vma_end && v->flags == q->vma_flags &&
	       v->offset == q->vma_offset && v->inode == q->inode && v->dev_major == q->dev_major &&
	       v->dev_minor == q->dev_minor && v->name_len == q->vma_name_size &&
	       !memcmp(r->names.buf + v->name_at, name, v->name_len);
}

/* added_only through PROCMAP_QUERY on fd, against the parked r->vmas, in one walk: a mapping
 * is asked with its name where the parked one at that place has one, so a reset that finds
 * them as parked asks each once. An added mapping's name is asked whatever it maps, for the
 * same refusal of special ones as the text's. */
static bool vmas_added_only(int fd, const struct sc_reuse *r, struct sc_reuse_unmaps *unmaps)
{
	static char name[PATH_MAX];
	struct procmap_query q;
	size_t i = 0;
	int rc = 0;
	bool ok = true;
	unmaps->n = 0;
	for (uint64_t at = 0;
	     ok && (rc = map_query(fd, at, i < r->n_vmas && r->vmas[i].name_len, name, &q)) > 0;
	     at = q.vma_end) {
		if (i < r->n_vmas && same_vma(r, &r->vmas[i], &q, name)) {
			i++;
			continue;
		}
		if (!q.vma_name_size && map_query_once(fd, q.vma_start, true, name, &q) <= 0) {
			ok = false; /* gone while the cell is stopped: nothing to trust */
			break;
		}
		size_t len = q.vma_name_size;
		ok = !(i < r->n_vmas && q.vma_end > r->vmas[i].start) &&
		     unmaps->n < SC_REUSE_UNMAP_MAX && !memmem(name, len, "[v", 2) &&
		     !memmem(name, len, "[stack", 6);
		if (ok) {
			unmaps->at[unmaps->n].start = q.vma_start;
			unmaps->at[unmaps->n++].end = q.vma_end;
		}
	}
	/* a run's mapping's name and place: no later cell's business */
	explicit_bzero(name, sizeof(name));
	explicit_bzero(&q, sizeof(q));
	ok = ok && rc == 0 && i == r->n_vmas;
	if (!ok)
		unmaps->n = 0;
	return ok;
}

/* Whether the mappings now are the parked ones, plus whole ones the run added (in *unmaps):
 * through PROCMAP_QUERY when the cell was parked so, else through the text of maps. */
static bool mappings_as_parked(pid_t pid, const struct sc_reuse *r, struct text *now,
			       struct sc_reuse_unmaps *unmaps)
{
	if (!r->vmas)
		return proc_text(pid, "maps", now, TEXT_MAX) == 0 &&
		       (text_same(now, &r->maps) || added_only(&r->maps, now, unmaps));
	bool owned;
	int fd = kept_open(pid, "maps", O_RDONLY, &owned);
	if (fd < 0)
		return false;
	bool same = vmas_added_only(fd, r, unmaps);
	if (owned)
		close(fd);
	return same;
}

/* The checks of a stopped cell against its parked reference; NULL when all agree. */
static const char *check(pid_t pid, struct sc_reuse *r, uint64_t cpu_us,
			 struct sc_reuse_unmaps *unmaps)
{
	struct text now = {0};
	const char *why = NULL;
	unmaps->n = 0;
	if (read_status(pid, &now) < 0 || !text_same(&now, &r->status))
		why = "its status (threads, signals, credentials, seccomp, umask) differs";
	if (!why && !mappings_as_parked(pid, r, &now, unmaps))
		why = "its mappings differ";
	if (!why && (proc_text(pid, "limits", &now, TEXT_MAX) < 0 || !text_same(&now, &r->limits)))
		why = "its resource limits differ";
	if (!why && (read_misc(pid, &now) < 0 || !text_same(&now, &r->misc)))
		why = "its working directory, name, timers, scheduling or children differ";
	struct rseq_config rseq;
	uint64_t robust[2];
	if (!why &&
	    (kernel_writes(pid, &rseq, robust) < 0 || memcmp(&rseq, &r->rseq, sizeof(rseq)) ||
	     memcmp(robust, r->robust, sizeof(robust))))
		why = "its rseq area or robust futex list moved";
	if (!why && cpu_us >= SC_REUSE_CPU_SLACK_MS * 1000ull)
		why = "it used up its CPU slack";
	int nums[MAX_FDS];
	long n = why ? 0 : list_fds(pid, nums, MAX_FDS);
	if (!why && (n != (long)r->n_fds || memcmp(nums, r->fd_nums, r->n_fds * sizeof(int))))
		why = "its descriptor table differs";
	for (size_t i = 0; !why && i < r->n_fds; i++) {
		int queued = 0, unsent = 0;
		unsigned flags;
		bool locked;
		if (syscall(SYS_kcmp, getpid(), pid, KCMP_FILE, r->fd_dups[i], nums[i]) != 0 ||
		    fd_info(pid, nums[i], &flags, &locked) < 0 || flags != r->fd_flags[i])
			why = "a descriptor was replaced or its flags changed";
		else if ((ioctl(r->fd_dups[i], FIONREAD, &queued) == 0 && queued) ||
			 (ioctl(r->fd_dups[i], SIOCOUTQ, &unsent) == 0 && unsent))
			why = "output or frames are left unread";
		else if (locked)
			why = "a descriptor holds a lock";
		else if (shut(r->fd_dups[i]))
			why = "a descriptor was shut down";
	}
	if (!why && (socket_options(r, &now) < 0 || !text_same(&now, &r->sockopts)))
		why = "an option of its frame socket changed";
	text_drop(&now);
	return why;
}

/* How long a reset waits for the cell to stop. A stop request is honoured on the way back to
 * user space, which a thread waiting in vfork (until its child ends), or one whose group
 * leader exited while another thread runs on, never takes: the template, which serves every
 * cell of the sandbox, must not wait for it. A cell that does not stop in time is discarded. */
#define STOP_WAIT_NS 250000000ll

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ll + t.tv_nsec;
}

/* Stops the seized cell: 0 at its interrupt stop, 1 when it died meanwhile (reaped here), or
 * -1 when it stopped for something else (a signal pending) or not in STOP_WAIT_NS. The stop
 * sends the template, its tracer, a SIGCHLD, which the template keeps blocked for its
 * signalfd: waited for with sigtimedwait, which takes SIGCHLD alone, one sleep, where naps
 * of growing length cost each a timer and two context switches (under nested
 * virtualisation, exits), a sixth of the reset's CPU. One consumed is raised again after,
 * for the signalfd: it may have told of another cell's end too (SIGCHLD does not queue). */
static int interrupt(struct live_cell *c)
{
	if (ptrace(PTRACE_INTERRUPT, c->pid, 0, 0) < 0)
		return -1;
	int status;
	struct rusage ru;
	pid_t got;
	long long deadline = now_ns() + STOP_WAIT_NS;
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	bool took = false;
	while ((got = wait4(c->pid, &status, __WALL | WNOHANG, &ru)) == 0 ||
	       (got < 0 && errno == EINTR)) {
		long long left = deadline - now_ns();
		if (got == 0 && left <= 0)
			break;
		struct timespec wait = {left / 1000000000ll, left % 1000000000ll};
		if (got == 0 && sigtimedwait(&chld, NULL, &wait) == SIGCHLD)
			took = true;
	}
	if (took)
		raise(SIGCHLD);
	if (got == 0)
		return -1;
	if (got != c->pid)
		return -1;
	if (!WIFSTOPPED(status)) {
		sc_template_reaped(c->pid, status, &ru);
		return 1;
	}
	return (status >> 16) == PTRACE_EVENT_STOP ? 0 : -1;
}

static void answer(uint32_t id, int status, const char *why, uint64_t cpu_us)
{
	struct sc_ctl_msg m = {
		.type = SC_CTL_RESET, .status = status, .cell_id = id, .cpu_us = cpu_us};
	snprintf(m.message, sizeof(m.message), "%s", why ? why : "reset");
	sc__ctl_send(CTL, &m, NULL, 0);
}

/* What the run left outside the process (reset_leftovers.c): children it reaped, threads that
 * ran and exited, any task it made or tried to (each took a pid: counters.c records the
 * calls), files in /tmp or /output, either changed in any way (times included).
 * NULL, or why the cell is discarded. */
static const char *leftovers(pid_t pid, struct sc_reuse *r)
{
	struct rusage children;
	if (sc_reuse_children_usage(pid, &r->regs, &children) < 0)
		return "its children's usage cannot be read";
	bool same = !memcmp(&children, &r->children, sizeof(children));
	explicit_bzero(&children, sizeof(children)); /* a run's: see has_entries */
	if (!same)
		return "it reaped a child";
	int64_t threads_ns;
	if (sc_reuse_other_threads_ns(proc_fd, pid, &threads_ns) < 0 ||
	    threads_ns != r->other_threads_ns)
		return "a thread other than its main one ran";
	if (sc_counters_made_task(r->counters))
		return "it made a task (called clone, fork or vfork)";
	return sc_reuse_dirs_check(proc_fd, pid, &r->dirs);
}

/* The mappings the run added, for its cell to unmap: where the run mapped what, and how
 * much, which it chooses. Zeroed after each reset (reset_stopped_kept), as the cell zeroes
 * its copy once it unmapped them (cell.c reuse_park): the template's memory is every later
 * cell's, and the list goes whole to the next cell reset, whose next run read a list left by
 * another cell's run (reset_attack::mappings_a_run_added_are_not_listed_*). */
static struct sc_reuse_unmaps unmaps;

/* The stopped cell put back as parked: checks, memory, registers, the peaks. NULL, or why
 * not (the cell is then to be discarded). */
static const char *reset_stopped(pid_t pid, uint32_t id, struct sc_reuse *r, uint64_t *cpu_us)
{
	const char *why = NULL;
	if (cpu_used(pid, cpu_us) < 0)
		return "its CPU time cannot be read";
	if ((why = check(pid, r, *cpu_us, &unmaps)) || (why = leftovers(pid, r)))
		return why;
	int restored = restore_memory(pid, r, &why);
	explicit_bzero(vec, sizeof(vec)); /* where the run wrote: no later cell's business */
	explicit_bzero(batch_local, sizeof(batch_local));
	explicit_bzero(batch_remote, sizeof(batch_remote));
	explicit_bzero(protect_list, sizeof(protect_list));
	if (restored < 0)
		return why ? why : "its memory could not be restored";
	/* After the copy, which puts the list's page back too; the cell unmaps them before it
	 * runs anything else (cell.c reuse_park). */
	struct iovec local = {&unmaps, sizeof(unmaps)}, remote = {&sc_reuse_unmaps, sizeof(unmaps)};
	if (process_vm_writev(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof(unmaps))
		return "the mappings to unmap could not be handed over";
	struct iovec iov = {r->xstate, r->xstate_len};
	if (ptrace(PTRACE_SETREGS, pid, 0, &r->regs) < 0 ||
	    ptrace(PTRACE_SETREGSET, pid, (void *)NT_X86_XSTATE, &iov) < 0)
		return "its registers could not be restored";
	bool owned;
	int fd = kept_open(pid, "clear_refs", O_WRONLY, &owned);
	bool cleared = fd >= 0 && write(fd, "5", 1) == 1;
	if (fd >= 0 && owned)
		close(fd);
	if (!cleared)
		return "its peak resident size could not be reset";
	if (T.cgroup_fd >= 0 && sc__cgroup_cell_rearm(T.cgroup_fd, id, r->cgroup_fds) < 0)
		return "its memory cgroup counted an out-of-memory kill, or its peak cannot be "
		       "reset";
	return NULL;
}

static const char *reset_stopped_kept(pid_t pid, uint32_t id, struct sc_reuse *r, uint64_t *cpu_us)
{
	kept_for = r;
	kept_pid = pid;
	const char *why = reset_stopped(pid, id, r, cpu_us);
	explicit_bzero(&unmaps, sizeof(unmaps));
	kept_for = NULL;
	return why;
}

/* A cell that cannot be reset: killed (the host retires it; its exit record comes as for any
 * cell) and the host told why. */
static void discard(pid_t pid, uint32_t id, struct sc_reuse *r, int code, const char *why,
		    uint64_t cpu_us)
{
	if (r)
		r->state = BROKEN;
	kill(pid, SIGKILL);
	ptrace(PTRACE_DETACH, pid, 0, 0);
	answer(id, code, why, cpu_us);
}

void sc_reuse_reset(uint32_t id)
{
	struct live_cell *c = NULL;
	for (size_t i = 0; i < T.n_cells; i++)
		if (T.cells[i].id == id)
			c = &T.cells[i];
	if (!c) {
		answer(id, -ESRCH, "no such cell", 0);
		return;
	}
	struct sc_reuse *r = c->reuse;
	pid_t pid = c->pid;
	/* The sandbox's first cell was parked before the template's warm-up (template.c serve):
	 * reset, it would stay cold, and every later run in it would import what the warm-up
	 * has loaded for the cells forked since. */
	if (id == 0) {
		discard(pid, id, r, -EAGAIN, "it was parked before the template's warm-up", 0);
		return;
	}
	if (!r || r->state != PARKED) {
		char why[160];
		snprintf(why, sizeof(why), "the cell was not parked for reuse%s%s", r ? ": " : "",
			 r ? r->why : "");
		discard(pid, id, r, -ESRCH, why, 0);
		return;
	}
	if (ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_EXITKILL) < 0) {
		discard(pid, id, r, -errno, "PTRACE_SEIZE failed", 0);
		return;
	}
	int stopped = interrupt(c);
	if (stopped == 1) { /* reaped: c and r are gone */
		answer(id, -ESRCH, "the cell exited", 0);
		return;
	}
	uint64_t cpu_us = 0;
	const char *why = stopped < 0 ? "it did not stop cleanly (a signal pending, or not in time)"
				      : reset_stopped_kept(pid, id, r, &cpu_us);
	if (!why && cpu_limit_arm(pid, id, r, true) < 0)
		why = "its run's CPU timer could not be armed";
	if (!why && sc_counters_rebase(r->counters) < 0)
		why = "its counters could not be read";
	if (!why && ptrace(PTRACE_DETACH, pid, 0, 0) < 0)
		why = "PTRACE_DETACH failed";
	if (why) {
		discard(pid, id, r, -EAGAIN, why, cpu_us);
		return;
	}
	answer(id, 0, NULL, cpu_us);
}
