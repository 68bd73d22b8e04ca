/* Reset in place, a probe of the parts (docs/performance.md, "Reset in place: a probe of the
 * parts"): a started CPython, armed once with asynchronous userfaultfd write-protection, is put
 * back after each run by this process from outside (stop, find the written pages, copy the
 * parked ones back, re-protect, registers, a few checks, continue), timed step by step against
 * fork + the same writes + exit + wait of an equal-sized process in the same run. A measurement
 * for the design, not the feature: the child runs without isolation and the checks are the few
 * the design needs first. Run by hand; no test runs it. */
#define _GNU_SOURCE
#include "workloads.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The kernel's uapi <linux/fs.h> since 6.7; the build machine's headers may be older. */
#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t start, end, categories;
};
struct pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN	      _IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_WP_MATCHING   (1ULL << 0)
#define PM_SCAN_CHECK_WPASYNC (1ULL << 1)
#define PAGE_IS_WPALLOWED     (1ULL << 0)
#define PAGE_IS_WRITTEN	      (1ULL << 1)
#endif
/* The kernel's uapi <linux/fs.h> since 6.11. */
#ifndef PROCMAP_QUERY
struct procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define PROCMAP_QUERY			   _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#endif
/* The kernel's uapi <linux/userfaultfd.h> since 6.7. */
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1ULL << 15)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#define HEAP_PAGES  1024  /* the child's bytearray the `w` runs write into */
#define MAX_RANGES  1024  /* writable private mappings of the parked child */
#define MAX_REGIONS 8192  /* written extents one scan reports */
#define XSTATE_MAX  16384 /* NT_X86_XSTATE is 2.5-11 KiB */
#define TEXT_MAX    65536 /* /proc/PID/maps, fd table and status as text */
#define MAX_VMAS    4096  /* mappings PROCMAP_QUERY lists */
#define MAX_ROUNDS  100000

static long page_bytes;

/* The child: CPython itself, arming its own address space (userfaultfd registrations belong to
 * the mm of the process that makes them), handing the descriptor to this process and closing its
 * own, so code in a run can neither unregister nor re-protect pages to hide its writes. Then it
 * serves runs: `p` print(1), `j` the json/re/datetime workload of `snapcell bench`, `wN` one
 * byte into N pages of a 4 MiB heap, `o` a descriptor and a mapping left open (which only the
 * checks can see); it answers with its count of runs, which a reset puts back
 * to 0: every answer must be 1. */
static const char child_code[] =
	"import ctypes, mmap, os, socket, sys, time\n"
	"page, heap_pages, nr, flags, api_req, reg_req, api, features, mode = map(int, "
	"sys.argv[1:10])\n"
	"compute = compile(sys.argv[10], '<compute>', 'exec')\n"
	"hello = compile('print(1)', '<run>', 'exec')\n"
	"sys.stdout = open(os.devnull, 'w')\n"
	"heap = bytearray(page * heap_pages)\n"
	"leaks = []\n"
	"def run(kind, n):\n"
	"    if kind == 'p':\n"
	"        exec(hello, {})\n"
	"    elif kind == 'j':\n"
	"        exec(compute, {})\n"
	"    elif kind == 'o':\n"
	"        leaks.append((os.open(os.devnull, os.O_RDONLY), mmap.mmap(-1, 65536)))\n"
	"    else:\n"
	"        for i in range(n):\n"
	"            heap[i * heap_pages // n * page] = 1\n"
	"    sys.stdout.flush()\n"
	"for kind in 'pjw':\n"
	"    run(kind, heap_pages)\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"libc.syscall.restype = ctypes.c_long\n"
	"def fail(what):\n"
	"    sys.exit(f'reset probe child: {what}: {os.strerror(ctypes.get_errno())}')\n"
	"uffd = libc.syscall(nr, flags)\n"
	"if uffd < 0:\n"
	"    fail('userfaultfd')\n"
	"arg = (ctypes.c_uint64 * 3)(api, features, 0)\n"
	"if libc.ioctl(uffd, ctypes.c_ulong(api_req), arg) < 0:\n"
	"    fail('UFFDIO_API')\n"
	"with open('/proc/self/maps') as f:\n"
	"    lines = f.read().splitlines()\n"
	"t0 = time.perf_counter_ns()\n"
	"registered = 0\n"
	"for line in lines:\n"
	"    addrs, perms = line.split()[:2]\n"
	"    if perms[1] != 'w' or perms[3] != 'p':\n"
	"        continue\n"
	"    start, end = (int(a, 16) for a in addrs.split('-'))\n"
	"    reg = (ctypes.c_uint64 * 4)(start, end - start, mode, 0)\n"
	"    if libc.ioctl(uffd, ctypes.c_ulong(reg_req), reg) < 0:\n"
	"        fail(line)\n"
	"    registered += 1\n"
	"sock = socket.socket(fileno=3)\n"
	"arm_ns = time.perf_counter_ns() - t0\n"
	"socket.send_fds(sock, [b'%d %d' % (registered, arm_ns)], [uffd])\n"
	"os.close(uffd)\n"
	"runs = 0\n"
	"while True:\n"
	"    cmd = sock.recv(64)\n"
	"    if not cmd:\n"
	"        break\n"
	"    runs += 1\n"
	"    run(chr(cmd[0]), int(cmd[1:]))\n"
	"    sock.send(b'%d' % runs)\n";

struct range {
	uint64_t start, end;
	size_t image_off; /* where its parked bytes are in the image */
};

struct text {
	char buf[TEXT_MAX];
	size_t len;
};

/* One mapping as PROCMAP_QUERY reports it (its name only through the inode). */
struct vma {
	uint64_t start, end, flags, offset, inode;
	uint32_t dev_major, dev_minor;
};

/* What the child was when parked: what each reset puts back and checks against. */
struct parked {
	struct range ranges[MAX_RANGES];
	size_t n_ranges;
	uint64_t span_start, span_end; /* lowest and highest registered address */
	char *image;
	size_t image_len;
	struct user_regs_struct regs;
	unsigned char xstate[XSTATE_MAX];
	size_t xstate_len;
	struct text maps, fds, status;
	struct vma vmas[MAX_VMAS]; /* the same mappings through PROCMAP_QUERY */
	size_t n_vmas;
	uint64_t protect_ns, image_ns, park_ns; /* the first protection, the copy, all */
};

struct cell {
	pid_t pid;
	int sock;
	int uffd; /* held only: the registrations last while it is open */
	int pagemap_fd, mem_fd, maps_fd, status_fd, fd_dir_fd, syscall_fd;
	unsigned registered; /* mappings the child registered */
	uint64_t arm_ns;     /* its registration of them, timed by itself */
};

enum step {
	STEP_SETTLE,	   /* until the child sleeps in its recv again (not part of the reset) */
	STEP_STOP,	   /* PTRACE_INTERRUPT and its wait */
	STEP_FIND,	   /* PAGEMAP_SCAN for written pages */
	STEP_COPY_VM,	   /* process_vm_writev of the parked pages (even rounds) */
	STEP_COPY_MEM,	   /* pwrite on /proc/PID/mem (odd rounds) */
	STEP_REPROTECT,	   /* PAGEMAP_SCAN with PM_SCAN_WP_MATCHING over the span */
	STEP_REGS,	   /* PTRACE_GETREGS, the check it is parked, PTRACE_SETREGS */
	STEP_FPU,	   /* PTRACE_SETREGSET NT_X86_XSTATE */
	STEP_CHECK_MAPS,   /* /proc/PID/maps equal */
	STEP_CHECK_QUERY,  /* the same through PROCMAP_QUERY (timed, not in the reset) */
	STEP_CHECK_FDS,	   /* /proc/PID/fd names and targets equal */
	STEP_CHECK_STATUS, /* signal, thread and seccomp lines of /proc/PID/status equal */
	STEP_CONT,	   /* PTRACE_CONT */
	STEP_RESET_VM,	   /* the whole reset, copying with process_vm_writev */
	STEP_RESET_MEM,	   /* the whole reset, copying through /proc/PID/mem */
	STEP_FORK,	   /* the baseline: fork + the same writes + exit + wait */
	STEP_WRITTEN,	   /* pages found written (a count, not a time) */
	N_STEPS,
};

static const char *const step_names[N_STEPS] = {
	"settle", "stop",     "find",	    "copy_vm",	   "copy_mem",	    "reprotect",
	"regs",	  "fpu",      "check_maps", "check_query", "check_fds",	    "check_status",
	"cont",	  "reset_vm", "reset_mem",  "fork",	   "written_pages",
};

struct series {
	uint64_t *v[N_STEPS];
	size_t n[N_STEPS];
};

static uint64_t clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void fail(const char *what, int err)
{
	fprintf(stderr, "reset probe: %s: %s\n", what, err ? strerror(err) : "failed");
	exit(1);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile (sorts the samples). */
static uint64_t percentile(uint64_t *v, size_t n, unsigned pct)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	size_t rank = (n * pct + 99) / 100;
	return n ? v[rank ? rank - 1 : 0] : 0;
}

static int read_text(int fd, struct text *t)
{
	t->len = 0;
	for (;;) {
		if (t->len == sizeof(t->buf))
			return -E2BIG;
		ssize_t r = pread(fd, t->buf + t->len, sizeof(t->buf) - t->len, (off_t)t->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return 0;
		t->len += (size_t)r;
	}
}

/* ---- the child ---- */

static int recv_fd(int sock, char *msg, size_t msg_len)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} ctl;
	struct iovec iov = {msg, msg_len - 1};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = &ctl,
			    .msg_controllen = sizeof(ctl)};
	ssize_t n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return n < 0 ? -errno : -EPROTO;
	msg[n] = 0;
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof(fd));
	return fd;
}

static int open_proc(pid_t pid, const char *name, int flags)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	int fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		fail(path, errno);
	return fd;
}

static void cell_start(struct cell *c, const char *python)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		fail("socketpair", errno);
	/* The numbers the child's ctypes calls need, from this build's headers. */
	enum { N_NUMS = 9 };
	const unsigned long long nums[N_NUMS] = {(unsigned long long)page_bytes,
						 HEAP_PAGES,
						 SYS_userfaultfd,
						 O_CLOEXEC | UFFD_USER_MODE_ONLY,
						 UFFDIO_API,
						 UFFDIO_REGISTER,
						 UFFD_API,
						 UFFD_FEATURE_WP_ASYNC,
						 UFFDIO_REGISTER_MODE_WP};
	char a[N_NUMS][24];
	char *argv[N_NUMS + 6] = {(char *)python, (char *)"-I", (char *)"-c", (char *)child_code};
	for (int i = 0; i < N_NUMS; i++) {
		snprintf(a[i], sizeof(a[i]), "%llu", nums[i]);
		argv[4 + i] = a[i];
	}
	argv[4 + N_NUMS] = (char *)BENCH_COMPUTE_CODE;
	c->pid = fork();
	if (c->pid < 0)
		fail("fork", errno);
	if (c->pid == 0) {
		if (dup2(sv[1], 3) == 3)
			execv(python, argv);
		static const char msg[] = "reset probe: the interpreter did not start\n";
		if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
			_exit(126);
		_exit(127);
	}
	close(sv[1]);
	c->sock = sv[0];
	char msg[32];
	c->uffd = recv_fd(c->sock, msg, sizeof(msg));
	if (c->uffd < 0)
		fail("the child's descriptor (its own error is above)", -c->uffd);
	char *end;
	c->registered = (unsigned)strtoul(msg, &end, 10);
	c->arm_ns = strtoull(end, NULL, 10);
	if (ptrace(PTRACE_SEIZE, c->pid, 0, PTRACE_O_EXITKILL) < 0)
		fail("PTRACE_SEIZE", errno);
	c->pagemap_fd = open_proc(c->pid, "pagemap", O_RDONLY);
	c->mem_fd = open_proc(c->pid, "mem", O_RDWR);
	c->maps_fd = open_proc(c->pid, "maps", O_RDONLY);
	c->status_fd = open_proc(c->pid, "status", O_RDONLY);
	c->fd_dir_fd = open_proc(c->pid, "fd", O_RDONLY | O_DIRECTORY);
	c->syscall_fd = open_proc(c->pid, "syscall", O_RDONLY);
}

/* Waits until the child sleeps in the system call it was parked in: after its answer it still
 * runs a few hundred instructions of its loop, and a stop there would not be the parked state.
 * /proc/PID/syscall says "running" until the task is off the CPU, else its call's number
 * (parked_nr -1: any call). */
static void cell_settle(struct cell *c, long parked_nr)
{
	for (;;) {
		char buf[128];
		ssize_t n = pread(c->syscall_fd, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			fail("/proc/PID/syscall", errno);
		buf[n] = 0;
		char *end;
		long nr = strtol(buf, &end, 10);
		if (end != buf && (nr == parked_nr || (parked_nr < 0 && nr >= 0)))
			return;
		sched_yield();
	}
}

/* One run: the command, then the child's count of runs. */
static long cell_run(struct cell *c, const char *cmd)
{
	if (send(c->sock, cmd, strlen(cmd), MSG_NOSIGNAL) < 0)
		fail("send a run", errno);
	char reply[32];
	ssize_t n;
	while ((n = recv(c->sock, reply, sizeof(reply) - 1, 0)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		fail("the child's answer", n < 0 ? errno : EPIPE);
	reply[n] = 0;
	return strtol(reply, NULL, 10);
}

static int cell_stop(struct cell *c)
{
	if (ptrace(PTRACE_INTERRUPT, c->pid, 0, 0) < 0)
		return -errno;
	int st;
	while (waitpid(c->pid, &st, __WALL) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFSTOPPED(st) && st >> 16 == PTRACE_EVENT_STOP ? 0 : -EPROTO;
}

static int cell_cont(struct cell *c)
{
	return ptrace(PTRACE_CONT, c->pid, 0, 0) < 0 ? -errno : 0;
}

/* ---- the pages ---- */

/* Regions of [start, end) that are registered for write-protection and in every category of
 * mask (PAGE_IS_WRITTEN: written since their last protection); with PM_SCAN_WP_MATCHING they are
 * protected again in the same walk. Ranges not registered are skipped through PAGE_IS_WPALLOWED in
 * the mask, so one walk covers the whole span (PM_SCAN_CHECK_WPASYNC would fail it on the first
 * mapping not registered). */
static long scan(int pagemap_fd, uint64_t start, uint64_t end, uint64_t flags, uint64_t mask,
		 struct page_region *vec, size_t vec_len, uint64_t *walk_end)
{
	struct pm_scan_arg a = {
		.size = sizeof(a),
		.flags = flags,
		.start = start,
		.end = end,
		.vec = (uintptr_t)vec,
		.vec_len = vec_len,
		.category_mask = PAGE_IS_WPALLOWED | mask,
		.return_mask = PAGE_IS_WPALLOWED | mask,
	};
	long n = ioctl(pagemap_fd, PAGEMAP_SCAN, &a);
	if (walk_end)
		*walk_end = a.walk_end;
	return n < 0 ? -errno : n;
}

/* All written regions of the span into vec (sorted); their count or -errno. */
static long find_written(const struct cell *c, const struct parked *p, struct page_region *vec)
{
	size_t n = 0;
	for (uint64_t at = p->span_start; at < p->span_end && n < MAX_REGIONS;) {
		uint64_t walk_end = p->span_end;
		long got = scan(c->pagemap_fd, at, p->span_end, 0, PAGE_IS_WRITTEN, vec + n,
				MAX_REGIONS - n, &walk_end);
		if (got < 0)
			return got;
		n += (size_t)got;
		if (walk_end <= at)
			return -EPROTO;
		at = walk_end;
	}
	return n < MAX_REGIONS ? (long)n : -E2BIG;
}

static const struct range *range_of(const struct parked *p, uint64_t addr)
{
	size_t lo = 0, hi = p->n_ranges;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (addr < p->ranges[mid].start)
			hi = mid;
		else if (addr >= p->ranges[mid].end)
			lo = mid + 1;
		else
			return &p->ranges[mid];
	}
	return NULL;
}

/* The parked bytes of [start, end) back into the child, through process_vm_writev (batched
 * vectors) or pwrite on /proc/PID/mem (one call per extent of one mapping). */
static int copy_back(const struct cell *c, const struct parked *p, const struct page_region *vec,
		     size_t n, bool through_mem)
{
	enum { BATCH = 1024 };
	struct iovec local[BATCH], remote[BATCH];
	size_t k = 0, bytes = 0;
	for (size_t i = 0; i <= n; i++) {
		for (uint64_t at = i < n ? vec[i].start : 0; i < n && at < vec[i].end;) {
			const struct range *r = range_of(p, at);
			if (!r)
				return -EFAULT; /* written outside what was parked */
			uint64_t to = vec[i].end < r->end ? vec[i].end : r->end;
			char *src = p->image + r->image_off + (at - r->start);
			if (through_mem) {
				if (pwrite(c->mem_fd, src, to - at, (off_t)at) !=
				    (ssize_t)(to - at))
					return -EIO;
			} else {
				local[k] = (struct iovec){src, to - at};
				remote[k++] = (struct iovec){(void *)(uintptr_t)at, to - at};
				bytes += to - at;
			}
			at = to;
			if (k < BATCH)
				continue;
			if (process_vm_writev(c->pid, local, k, remote, k, 0) != (ssize_t)bytes)
				return -EIO;
			k = bytes = 0;
		}
	}
	if (k && process_vm_writev(c->pid, local, k, remote, k, 0) != (ssize_t)bytes)
		return -EIO;
	return 0;
}

static size_t pages_of(const struct page_region *vec, size_t n)
{
	size_t pages = 0;
	for (size_t i = 0; i < n; i++)
		pages += (vec[i].end - vec[i].start) / (uint64_t)page_bytes;
	return pages;
}

/* ---- registers and checks ---- */

static int get_xstate(pid_t pid, unsigned char *buf, size_t *len)
{
	struct iovec iov = {buf, XSTATE_MAX};
	if (ptrace(PTRACE_GETREGSET, pid, (void *)NT_X86_XSTATE, &iov) < 0)
		return -errno;
	*len = iov.iov_len;
	return 0;
}

/* The fd table as text: each descriptor's number and what it points to. */
static int read_fds(const struct cell *c, struct text *t)
{
	int dfd = dup(c->fd_dir_fd);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return -errno;
	}
	rewinddir(d);
	t->len = 0;
	int rc = 0;
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		char target[256];
		ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
		if (n < 0)
			n = 0;
		target[n] = 0;
		int w = snprintf(t->buf + t->len, sizeof(t->buf) - t->len, "%s %s\n", e->d_name,
				 target);
		if (w < 0 || (size_t)w >= sizeof(t->buf) - t->len)
			rc = -E2BIG;
		else
			t->len += (size_t)w;
	}
	closedir(d);
	return rc;
}

/* The mappings one PROCMAP_QUERY at a time on the maps descriptor: no text, one call each. */
static long query_vmas(const struct cell *c, struct vma *v)
{
	size_t n = 0;
	for (uint64_t at = 0; n < MAX_VMAS; n++) {
		struct procmap_query q = {.size = sizeof(q),
					  .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
					  .query_addr = at};
		if (ioctl(c->maps_fd, PROCMAP_QUERY, &q) < 0)
			return errno == ENOENT ? (long)n : -errno;
		v[n] = (struct vma){q.vma_start, q.vma_end,   q.vma_flags, q.vma_offset,
				    q.inode,	 q.dev_major, q.dev_minor};
		at = q.vma_end;
	}
	return -E2BIG;
}

/* The lines of /proc/PID/status a run could change and a reset does not restore. */
static int read_status(const struct cell *c, struct text *t)
{
	/* Not SigQ: it counts the signals queued to the whole real uid, not to this process. */
	static const char *const keep[] = {"SigPnd", "ShdPnd",	"SigBlk",     "SigIgn",
					   "SigCgt", "Threads", "NoNewPrivs", "Seccomp",
					   "Cap",    "Uid",	"Gid"};
	struct text all;
	int rc = read_text(c->status_fd, &all);
	t->len = 0;
	for (char *line = all.buf; rc == 0 && line < all.buf + all.len;) {
		char *nl = memchr(line, '\n', (size_t)(all.buf + all.len - line));
		size_t len = nl ? (size_t)(nl - line) + 1 : (size_t)(all.buf + all.len - line);
		for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
			if (strncmp(line, keep[i], strlen(keep[i])) == 0) {
				memcpy(t->buf + t->len, line, len);
				t->len += len;
				break;
			}
		}
		line += len;
	}
	return rc;
}

/* Says on stderr what differs the first few times (the probe goes on: it times the checks). */
static bool text_equal(const struct text *a, const struct text *b, const char *what)
{
	static unsigned told;
	bool same = a->len == b->len && memcmp(a->buf, b->buf, a->len) == 0;
	if (!same && told++ < 3)
		fprintf(stderr, "reset probe: %s differs from the parked one:\n%.*s---\n%.*s", what,
			(int)b->len, b->buf, (int)a->len, a->buf);
	return same;
}

/* ---- parking ---- */

/* Stops the child where it waits for a run and takes what each reset puts back. */
static void park(struct cell *c, struct parked *p)
{
	cell_settle(c, SYS_recvfrom);
	uint64_t t0 = clock_ns();
	int rc = cell_stop(c);
	if (rc < 0)
		fail("stop the child to park it", -rc);
	if (ptrace(PTRACE_GETREGS, c->pid, 0, &p->regs) < 0)
		fail("PTRACE_GETREGS", errno);
	if ((rc = get_xstate(c->pid, p->xstate, &p->xstate_len)) < 0)
		fail("PTRACE_GETREGSET NT_X86_XSTATE", -rc);
	if ((rc = read_text(c->maps_fd, &p->maps)) < 0)
		fail("/proc/PID/maps", -rc);
	p->n_ranges = 0;
	p->image_len = 0;
	for (char *line = p->maps.buf; line < p->maps.buf + p->maps.len;) {
		unsigned long long start, end;
		char perms[5];
		if (sscanf(line, "%llx-%llx %4s", &start, &end, perms) == 3 && perms[1] == 'w' &&
		    perms[3] == 'p') {
			if (p->n_ranges == MAX_RANGES)
				fail("too many writable mappings", E2BIG);
			p->ranges[p->n_ranges++] = (struct range){start, end, p->image_len};
			p->image_len += end - start;
		}
		char *nl = memchr(line, '\n', (size_t)(p->maps.buf + p->maps.len - line));
		line = nl ? nl + 1 : p->maps.buf + p->maps.len;
	}
	if (!p->n_ranges)
		fail("no writable mapping in the child", EPROTO);
	p->span_start = p->ranges[0].start;
	p->span_end = p->ranges[p->n_ranges - 1].end;
	/* Everything written so far becomes the parked state: protected, then copied. */
	uint64_t t1 = clock_ns();
	if ((rc = (int)scan(c->pagemap_fd, p->span_start, p->span_end, PM_SCAN_WP_MATCHING,
			    PAGE_IS_WRITTEN, NULL, 0, NULL)) < 0)
		fail("PAGEMAP_SCAN with PM_SCAN_WP_MATCHING", -rc);
	uint64_t t2 = clock_ns();
	p->protect_ns = t2 - t1;
	p->image = malloc(p->image_len);
	if (!p->image)
		fail("the parked image", ENOMEM);
	for (size_t i = 0; i < p->n_ranges; i++) {
		const struct range *r = &p->ranges[i];
		struct iovec local = {p->image + r->image_off, r->end - r->start};
		struct iovec remote = {(void *)(uintptr_t)r->start, r->end - r->start};
		if (process_vm_readv(c->pid, &local, 1, &remote, 1, 0) != (ssize_t)local.iov_len)
			fail("process_vm_readv of a parked mapping", errno);
	}
	p->image_ns = clock_ns() - t2;
	if ((rc = read_fds(c, &p->fds)) < 0 || (rc = read_status(c, &p->status)) < 0)
		fail("the parked fd table or status", -rc);
	long n_vmas = query_vmas(c, p->vmas);
	p->n_vmas = n_vmas > 0 ? (size_t)n_vmas : 0;
	if (n_vmas <= 0)
		fprintf(stderr, "reset probe: no PROCMAP_QUERY: %s\n", strerror((int)-n_vmas));
	p->park_ns = clock_ns() - t0;
	if ((rc = cell_cont(c)) < 0)
		fail("PTRACE_CONT", -rc);
}

/* ---- one reset ---- */

enum reset_outcome { RESET_DONE, RESET_NOT_PARKED, RESET_DIFFERS };

static void mark(uint64_t *t, enum step s, uint64_t *at)
{
	uint64_t now = clock_ns();
	t[s] = now - *at;
	*at = now;
}

/* The checks against the parked texts, each timed: 0 when all are equal, 1 when one differs,
 * or -errno. The PROCMAP_QUERY list is compared too when this kernel has it. */
static int check_state(struct cell *c, const struct parked *p, uint64_t *t, uint64_t *at)
{
	static struct text now;
	static struct vma vmas[MAX_VMAS];
	int rc = read_text(c->maps_fd, &now);
	bool same = rc == 0 && text_equal(&now, &p->maps, "/proc/PID/maps");
	mark(t, STEP_CHECK_MAPS, at);
	if (rc == 0 && p->n_vmas) {
		long n = query_vmas(c, vmas);
		rc = n < 0 ? (int)n : 0;
		same = same && (size_t)n == p->n_vmas &&
		       memcmp(vmas, p->vmas, p->n_vmas * sizeof(*vmas)) == 0;
	}
	mark(t, STEP_CHECK_QUERY, at);
	rc = rc ? rc : read_fds(c, &now);
	same = same && rc == 0 && text_equal(&now, &p->fds, "the fd table");
	mark(t, STEP_CHECK_FDS, at);
	rc = rc ? rc : read_status(c, &now);
	same = same && rc == 0 && text_equal(&now, &p->status, "/proc/PID/status");
	mark(t, STEP_CHECK_STATUS, at);
	return rc ? rc : !same;
}

/* The steps after the pages: registers, the checks, continuing. */
static int reset_rest(struct cell *c, const struct parked *p, uint64_t *t, uint64_t *at)
{
	if (ptrace(PTRACE_SETREGS, c->pid, 0, &p->regs) < 0)
		return -errno;
	t[STEP_REGS] += clock_ns() - *at;
	*at = clock_ns();
	struct iovec iov = {(void *)p->xstate, p->xstate_len};
	if (ptrace(PTRACE_SETREGSET, c->pid, (void *)NT_X86_XSTATE, &iov) < 0)
		return -errno;
	mark(t, STEP_FPU, at);
	int differs = check_state(c, p, t, at);
	if (differs < 0)
		return differs;
	int rc = cell_cont(c);
	mark(t, STEP_CONT, at);
	return rc ? rc : differs ? RESET_DIFFERS : RESET_DONE;
}

/* One reset, each step timed into t (ns); a reset_outcome or -errno. The child is running
 * again afterwards in every outcome but an error. */
static int reset(struct cell *c, const struct parked *p, struct page_region *vec, bool through_mem,
		 uint64_t *t)
{
	uint64_t at = clock_ns();
	cell_settle(c, (long)p->regs.orig_rax);
	mark(t, STEP_SETTLE, &at);
	uint64_t start = at;
	int rc = cell_stop(c);
	mark(t, STEP_STOP, &at);
	if (rc < 0)
		return rc;
	/* Stopped anywhere but in the parked call (it answered and had not reached its next
	 * recv yet): the parked registers would not fit the kernel's side of the call. */
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, c->pid, 0, &regs) < 0)
		return -errno;
	if (regs.rip != p->regs.rip || regs.orig_rax != p->regs.orig_rax)
		return cell_cont(c) < 0 ? -errno : RESET_NOT_PARKED;
	mark(t, STEP_REGS, &at);
	long n = find_written(c, p, vec);
	if (n < 0)
		return (int)n;
	mark(t, STEP_FIND, &at);
	t[STEP_WRITTEN] = pages_of(vec, (size_t)n);
	if ((rc = copy_back(c, p, vec, (size_t)n, through_mem)) < 0)
		return rc;
	mark(t, through_mem ? STEP_COPY_MEM : STEP_COPY_VM, &at);
	long wp = scan(c->pagemap_fd, p->span_start, p->span_end, PM_SCAN_WP_MATCHING,
		       PAGE_IS_WRITTEN, NULL, 0, NULL);
	if (wp < 0)
		return (int)wp;
	mark(t, STEP_REPROTECT, &at);
	rc = reset_rest(c, p, t, &at);
	/* The PROCMAP_QUERY check is a variant of the maps check, not one more step. */
	t[through_mem ? STEP_RESET_MEM : STEP_RESET_VM] = clock_ns() - start - t[STEP_CHECK_QUERY];
	return rc;
}

/* ---- the baseline ---- */

/* A process holding as much written private memory as the child, forking a child per request
 * that writes the requested pages and exits, waited for: the floor of today's design for the
 * same run, without CPython's own at-fork work. */
struct forker {
	pid_t pid;
	int to, from;
};

static void forker_serve(int in, int out, size_t bytes)
{
	char *mem = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		_exit(1);
	size_t pages = bytes / (size_t)page_bytes;
	for (size_t i = 0; i < pages; i++)
		mem[i * (size_t)page_bytes] = 1;
	uint32_t n;
	while (read(in, &n, sizeof(n)) == (ssize_t)sizeof(n)) {
		n = n > pages ? (uint32_t)pages : n;
		uint64_t t0 = clock_ns();
		pid_t pid = fork();
		if (pid == 0) {
			for (uint32_t i = 0; i < n; i++)
				mem[(size_t)i * pages / n * (size_t)page_bytes] = 2;
			_exit(0);
		}
		int status = 1;
		while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		uint64_t ns = status == 0 ? clock_ns() - t0 : 0;
		if (write(out, &ns, sizeof(ns)) != (ssize_t)sizeof(ns))
			_exit(1);
	}
	_exit(0);
}

static void forker_start(struct forker *f, size_t bytes)
{
	int to[2], from[2];
	if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0)
		fail("pipe", errno);
	f->pid = fork();
	if (f->pid < 0)
		fail("fork", errno);
	if (f->pid == 0) {
		close(to[1]); /* or its reads never see the end */
		close(from[0]);
		forker_serve(to[0], from[1], bytes);
	}
	close(to[0]);
	close(from[1]);
	f->to = to[1];
	f->from = from[0];
}

static uint64_t forker_one(struct forker *f, uint32_t pages)
{
	uint64_t ns = 0;
	if (write(f->to, &pages, sizeof(pages)) != (ssize_t)sizeof(pages) ||
	    read(f->from, &ns, sizeof(ns)) != (ssize_t)sizeof(ns) || ns == 0)
		fail("the baseline's fork", errno);
	return ns;
}

static void forker_stop(struct forker *f)
{
	close(f->to);
	close(f->from);
	while (waitpid(f->pid, NULL, 0) < 0 && errno == EINTR)
		;
}

/* Resident bytes of the child's writable private mappings: what a fork copies the entries of. */
static size_t writable_rss(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		fail(path, errno);
	char line[512], perms[5] = "";
	size_t kib = 0, rss;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long a, b;
		if (sscanf(line, "%llx-%llx %4s", &a, &b, perms) == 3)
			continue;
		if (sscanf(line, "Rss: %zu kB", &rss) == 1 && perms[1] == 'w' && perms[3] == 'p')
			kib += rss;
	}
	fclose(f);
	return kib * 1024;
}

/* ---- rows ---- */

/* A run the child is sent: print(1), the compute workload, or N pages of its heap written. */
struct row {
	const char *name, *cmd;
};

static const struct row rows[] = {
	{"print", "p0"},  {"compute", "j0"},  {"w10", "w10"},	 {"w100", "w100"},
	{"w300", "w300"}, {"w1000", "w1000"}, {"planted", "o0"}, /* last: every reset from its first
								    on must differ */
};

struct tally {
	unsigned not_parked, differs, bad_answers;
	size_t left_written; /* pages found written right after the first reset */
};

static void print_row(const char *name, struct series *s, const struct tally *k)
{
	uint64_t p50[N_STEPS], p99[N_STEPS];
	for (int i = 0; i < N_STEPS; i++) {
		p50[i] = percentile(s->v[i], s->n[i], 50);
		p99[i] = percentile(s->v[i], s->n[i], 99);
		if (i == STEP_WRITTEN)
			printf("%s_written_pages_p50=%llu\n%s_written_pages_p99=%llu\n", name,
			       (unsigned long long)p50[i], name, (unsigned long long)p99[i]);
		else
			printf("%s_%s_p50_us=%.1f\n%s_%s_p99_us=%.1f\n", name, step_names[i],
			       (double)p50[i] / 1e3, name, step_names[i], (double)p99[i] / 1e3);
	}
	printf("%s_reset_vm_over_fork_p50=%.2f\n%s_reset_vm_over_fork_p99=%.2f\n", name,
	       (double)p50[STEP_RESET_VM] / (double)p50[STEP_FORK], name,
	       (double)p99[STEP_RESET_VM] / (double)p99[STEP_FORK]);
	printf("%s_not_parked=%u\n%s_differs=%u\n%s_bad_answers=%u\n%s_left_written_pages=%zu\n",
	       name, k->not_parked, name, k->differs, name, k->bad_answers, name, k->left_written);
	fflush(stdout);
}

static void push(struct series *s, enum step i, uint64_t v)
{
	s->v[i][s->n[i]++] = v;
}

/* One round: a run, its reset (retried if the child was stopped anywhere but in its recv), and
 * one baseline fork. */
static void round_one(struct cell *c, const struct parked *p, struct forker *f, const struct row *r,
		      uint32_t fork_pages, bool through_mem, struct series *s, struct tally *k)
{
	static struct page_region vec[MAX_REGIONS];
	if (cell_run(c, r->cmd) != 1)
		k->bad_answers++;
	uint64_t t[N_STEPS];
	int rc;
	do {
		memset(t, 0, sizeof(t));
		rc = reset(c, p, vec, through_mem, t);
		k->not_parked += rc == RESET_NOT_PARKED;
	} while (rc == RESET_NOT_PARKED);
	if (rc < 0)
		fail("a reset", -rc);
	k->differs += rc == RESET_DIFFERS;
	uint64_t fork_ns = forker_one(f, fork_pages);
	for (int i = 0; i < STEP_RESET_VM; i++)
		if (i != (through_mem ? STEP_COPY_VM : STEP_COPY_MEM))
			push(s, (enum step)i, t[i]);
	push(s, through_mem ? STEP_RESET_MEM : STEP_RESET_VM,
	     t[through_mem ? STEP_RESET_MEM : STEP_RESET_VM]);
	push(s, STEP_FORK, fork_ns);
	push(s, STEP_WRITTEN, t[STEP_WRITTEN]);
}

/* Pages found written with the child stopped right after a reset: 0 when the re-protection
 * covered every page the copy wrote. */
static size_t left_written(struct cell *c, const struct parked *p)
{
	static struct page_region vec[MAX_REGIONS];
	if (cell_stop(c) < 0)
		fail("stop after a reset", errno);
	long n = find_written(c, p, vec);
	if (n < 0 || cell_cont(c) < 0)
		fail("scan after a reset", n < 0 ? (int)-n : errno);
	if (getenv("RESET_PROBE_DEBUG"))
		for (long i = 0; i < n; i++)
			fprintf(stderr, "left written: %llx-%llx (fs_base %llx)\n",
				(unsigned long long)vec[i].start, (unsigned long long)vec[i].end,
				(unsigned long long)p->regs.fs_base);
	return pages_of(vec, (size_t)n);
}

/* Warm-up rounds first, unrecorded; the baseline then writes as many pages as the median of
 * their resets found: the run's own writes plus the interpreter's, which a forked cell writes
 * too. */
static void measure_row(struct cell *c, const struct parked *p, struct forker *f,
			const struct row *r, unsigned rounds, struct series *s)
{
	enum { WARM = 11 };
	struct tally k = {0};
	fprintf(stderr, "reset probe: %s (%u rounds)\n", r->name, rounds);
	for (int i = 0; i < N_STEPS; i++)
		s->n[i] = 0;
	for (int i = 0; i < WARM; i++)
		round_one(c, p, f, r, 1, i & 1, s, &k);
	uint32_t fork_pages = (uint32_t)percentile(s->v[STEP_WRITTEN], s->n[STEP_WRITTEN], 50);
	k.left_written = left_written(c, p);
	for (int i = 0; i < N_STEPS; i++)
		s->n[i] = 0;
	for (unsigned i = 0; i < rounds; i++)
		round_one(c, p, f, r, fork_pages, i & 1, s, &k);
	print_row(r->name, s, &k);
}

/* ---- ways to stop ---- */

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, text, strlen(text));
	int rc = n == (ssize_t)strlen(text) ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return rc;
}

/* Spins until cgroup.events says `frozen` is want. */
static int wait_frozen(int events_fd, char want)
{
	for (;;) {
		char buf[256];
		ssize_t n = pread(events_fd, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			return -errno;
		buf[n] = 0;
		const char *f = strstr(buf, "frozen ");
		if (f && f[7] == want)
			return 0;
		sched_yield();
	}
}

/* The cgroup v2 freezer as the stop instead of PTRACE_INTERRUPT: the child moved into a cgroup
 * of its own under the unified hierarchy, frozen (until cgroup.events says so) and thawed. It
 * cannot replace the ptrace stop (registers are set only in a ptrace stop) but says what a
 * design that freezes first would pay. 0, or -errno when the hierarchy is not writable here. */
static int measure_freeze(struct cell *c, unsigned rounds, uint64_t *freeze, uint64_t *thaw)
{
	char dir[128], path[192], pid[16];
	snprintf(dir, sizeof(dir), "/sys/fs/cgroup/unified/snapcell-reset-probe-%d", (int)getpid());
	snprintf(pid, sizeof(pid), "%d", (int)c->pid);
	if (mkdir(dir, 0700) < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	int rc = write_file(path, pid);
	snprintf(path, sizeof(path), "%s/cgroup.events", dir);
	int events_fd = rc ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	rc = rc ? rc : events_fd < 0 ? -errno : 0;
	snprintf(path, sizeof(path), "%s/cgroup.freeze", dir);
	for (unsigned i = 0; i < rounds && rc == 0; i++) {
		cell_settle(c, -1);
		uint64_t t0 = clock_ns();
		rc = write_file(path, "1");
		rc = rc ? rc : wait_frozen(events_fd, '1');
		uint64_t t1 = clock_ns();
		rc = rc ? rc : write_file(path, "0");
		rc = rc ? rc : wait_frozen(events_fd, '0');
		freeze[i] = t1 - t0;
		thaw[i] = clock_ns() - t1;
	}
	if (events_fd >= 0)
		close(events_fd);
	write_file("/sys/fs/cgroup/unified/cgroup.procs", pid);
	rmdir(dir);
	return rc;
}

/* The stops alone, on the parked child sleeping in its recv: PTRACE_INTERRUPT with its wait
 * and PTRACE_CONT, and the freezer. */
static void measure_stops(struct cell *c, long parked_nr, unsigned rounds, uint64_t *a, uint64_t *b)
{
	for (unsigned i = 0; i < rounds; i++) {
		cell_settle(c, parked_nr);
		uint64_t t0 = clock_ns();
		int rc = cell_stop(c);
		uint64_t t1 = clock_ns();
		rc = rc ? rc : cell_cont(c);
		if (rc < 0)
			fail("stop and continue", -rc);
		a[i] = t1 - t0;
		b[i] = clock_ns() - t1;
	}
	printf("interrupt_p50_us=%.1f\ninterrupt_p99_us=%.1f\n",
	       (double)percentile(a, rounds, 50) / 1e3, (double)percentile(a, rounds, 99) / 1e3);
	printf("interrupt_cont_p50_us=%.1f\n", (double)percentile(b, rounds, 50) / 1e3);
	int rc = measure_freeze(c, rounds, a, b);
	if (rc < 0) {
		printf("freeze=unavailable\n");
		fprintf(stderr, "reset probe: no cgroup v2 freezer here: %s\n", strerror(-rc));
		return;
	}
	printf("freeze_p50_us=%.1f\nfreeze_p99_us=%.1f\n", (double)percentile(a, rounds, 50) / 1e3,
	       (double)percentile(a, rounds, 99) / 1e3);
	printf("thaw_p50_us=%.1f\n", (double)percentile(b, rounds, 50) / 1e3);
}

static void print_load(const char *key)
{
	char buf[64] = "";
	FILE *f = fopen("/proc/loadavg", "re");
	if (f && fgets(buf, sizeof(buf), f))
		buf[strcspn(buf, " ")] = 0;
	if (f)
		fclose(f);
	printf("%s=%s\n", key, buf);
}

int main(int argc, char **argv)
{
	const char *python = "/usr/bin/python3";
	unsigned rounds = 300;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--python") == 0 && i + 1 < argc)
			python = argv[++i];
		else if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
			rounds = (unsigned)strtoul(argv[++i], NULL, 10);
		else {
			fprintf(stderr, "usage: %s [--python PATH] [--rounds N (1-%d)]\n", argv[0],
				MAX_ROUNDS);
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "reset probe: --rounds takes 1 to %d\n", MAX_ROUNDS);
		return 2;
	}
	page_bytes = sysconf(_SC_PAGESIZE);
	static struct cell c;
	cell_start(&c, python);
	size_t child_bytes = writable_rss(c.pid);
	struct forker f;
	forker_start(&f, child_bytes);
	static struct parked p;
	park(&c, &p);
	struct series s;
	for (int i = 0; i < N_STEPS; i++)
		if (!(s.v[i] = calloc(rounds + 11, sizeof(uint64_t))))
			fail("samples", ENOMEM);
	printf("python=%s\nrounds=%u\n", python, rounds);
	print_load("load_before");
	printf("child_writable_rss_kib=%zu\nparked_image_kib=%zu\n", child_bytes / 1024,
	       p.image_len / 1024);
	printf("registered_mappings=%u\nwritable_mappings=%zu\nmappings=%zu\nxstate_bytes=%zu\n",
	       c.registered, p.n_ranges, p.n_vmas, p.xstate_len);
	printf("arm_us=%.1f\npark_protect_us=%.1f\npark_image_us=%.1f\npark_us=%.1f\n",
	       (double)c.arm_ns / 1e3, (double)p.protect_ns / 1e3, (double)p.image_ns / 1e3,
	       (double)p.park_ns / 1e3);
	measure_stops(&c, (long)p.regs.orig_rax, rounds, s.v[0], s.v[1]);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
		measure_row(&c, &p, &f, &rows[i], rounds, &s);
	print_load("load_after");
	forker_stop(&f);
	close(c.sock);
	kill(c.pid, SIGKILL);
	while (waitpid(c.pid, NULL, __WALL) < 0 && errno == EINTR)
		;
	return 0;
}
