/* The reset probe's cell: CPython started as a child that arms its own address space with
 * asynchronous userfaultfd write-protection, and the steps that park it and reset it in place
 * from this process (stop, find the written pages, copy them back, re-protect, registers,
 * checks, continue). The measuring and the baseline are in reset_probe.c. */
#define _GNU_SOURCE
#include "reset_cell.h"

#include "../src/util/pagemap_scan.h"
#include "workloads.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
	"def probe_fail(what):\n"
	"    sys.exit(f'reset probe child: {what}: {os.strerror(ctypes.get_errno())}')\n"
	"uffd = libc.syscall(nr, flags)\n"
	"if uffd < 0:\n"
	"    probe_fail('userfaultfd')\n"
	"arg = (ctypes.c_uint64 * 3)(api, features, 0)\n"
	"if libc.ioctl(uffd, ctypes.c_ulong(api_req), arg) < 0:\n"
	"    probe_fail('UFFDIO_API')\n"
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
	"        probe_fail(line)\n"
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

uint64_t probe_clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void probe_fail(const char *what, int err)
{
	fprintf(stderr, "reset probe: %s: %s\n", what, err ? strerror(err) : "failed");
	exit(1);
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
		probe_fail(path, errno);
	return fd;
}

void probe_cell_start(struct cell *c, const char *python)
{
	page_bytes = sysconf(_SC_PAGESIZE);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		probe_fail("socketpair", errno);
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
		probe_fail("fork", errno);
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
		probe_fail("the child's descriptor (its own error is above)", -c->uffd);
	char *end;
	c->registered = (unsigned)strtoul(msg, &end, 10);
	c->arm_ns = strtoull(end, NULL, 10);
	if (ptrace(PTRACE_SEIZE, c->pid, 0, PTRACE_O_EXITKILL) < 0)
		probe_fail("PTRACE_SEIZE", errno);
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
void probe_cell_settle(struct cell *c, long parked_nr)
{
	for (;;) {
		char buf[128];
		ssize_t n = pread(c->syscall_fd, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			probe_fail("/proc/PID/syscall", errno);
		buf[n] = 0;
		char *end;
		long nr = strtol(buf, &end, 10);
		if (end != buf && (nr == parked_nr || (parked_nr < 0 && nr >= 0)))
			return;
		sched_yield();
	}
}

/* One run: the command, then the child's count of runs. */
long probe_cell_run(struct cell *c, const char *cmd)
{
	if (send(c->sock, cmd, strlen(cmd), MSG_NOSIGNAL) < 0)
		probe_fail("send a run", errno);
	char reply[32];
	ssize_t n;
	while ((n = recv(c->sock, reply, sizeof(reply) - 1, 0)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		probe_fail("the child's answer", n < 0 ? errno : EPIPE);
	reply[n] = 0;
	return strtol(reply, NULL, 10);
}

int probe_cell_stop(struct cell *c)
{
	if (ptrace(PTRACE_INTERRUPT, c->pid, 0, 0) < 0)
		return -errno;
	int st;
	while (waitpid(c->pid, &st, __WALL) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFSTOPPED(st) && st >> 16 == PTRACE_EVENT_STOP ? 0 : -EPROTO;
}

int probe_cell_cont(struct cell *c)
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
void probe_park(struct cell *c, struct parked *p)
{
	probe_cell_settle(c, SYS_recvfrom);
	uint64_t t0 = probe_clock_ns();
	int rc = probe_cell_stop(c);
	if (rc < 0)
		probe_fail("stop the child to park it", -rc);
	if (ptrace(PTRACE_GETREGS, c->pid, 0, &p->regs) < 0)
		probe_fail("PTRACE_GETREGS", errno);
	if ((rc = get_xstate(c->pid, p->xstate, &p->xstate_len)) < 0)
		probe_fail("PTRACE_GETREGSET NT_X86_XSTATE", -rc);
	if ((rc = read_text(c->maps_fd, &p->maps)) < 0)
		probe_fail("/proc/PID/maps", -rc);
	p->n_ranges = 0;
	p->image_len = 0;
	for (char *line = p->maps.buf; line < p->maps.buf + p->maps.len;) {
		unsigned long long start, end;
		char perms[5];
		if (sscanf(line, "%llx-%llx %4s", &start, &end, perms) == 3 && perms[1] == 'w' &&
		    perms[3] == 'p') {
			if (p->n_ranges == MAX_RANGES)
				probe_fail("too many writable mappings", E2BIG);
			p->ranges[p->n_ranges++] = (struct range){start, end, p->image_len};
			p->image_len += end - start;
		}
		char *nl = memchr(line, '\n', (size_t)(p->maps.buf + p->maps.len - line));
		line = nl ? nl + 1 : p->maps.buf + p->maps.len;
	}
	if (!p->n_ranges)
		probe_fail("no writable mapping in the child", EPROTO);
	p->span_start = p->ranges[0].start;
	p->span_end = p->ranges[p->n_ranges - 1].end;
	/* Everything written so far becomes the parked state: protected, then copied. */
	uint64_t t1 = probe_clock_ns();
	if ((rc = (int)scan(c->pagemap_fd, p->span_start, p->span_end, PM_SCAN_WP_MATCHING,
			    PAGE_IS_WRITTEN, NULL, 0, NULL)) < 0)
		probe_fail("PAGEMAP_SCAN with PM_SCAN_WP_MATCHING", -rc);
	uint64_t t2 = probe_clock_ns();
	p->protect_ns = t2 - t1;
	p->image = malloc(p->image_len);
	if (!p->image)
		probe_fail("the parked image", ENOMEM);
	for (size_t i = 0; i < p->n_ranges; i++) {
		const struct range *r = &p->ranges[i];
		struct iovec local = {p->image + r->image_off, r->end - r->start};
		struct iovec remote = {(void *)(uintptr_t)r->start, r->end - r->start};
		if (process_vm_readv(c->pid, &local, 1, &remote, 1, 0) != (ssize_t)local.iov_len)
			probe_fail("process_vm_readv of a parked mapping", errno);
	}
	p->image_ns = probe_clock_ns() - t2;
	if ((rc = read_fds(c, &p->fds)) < 0 || (rc = read_status(c, &p->status)) < 0)
		probe_fail("the parked fd table or status", -rc);
	long n_vmas = query_vmas(c, p->vmas);
	p->n_vmas = n_vmas > 0 ? (size_t)n_vmas : 0;
	if (n_vmas <= 0)
		fprintf(stderr, "reset probe: no PROCMAP_QUERY: %s\n", strerror((int)-n_vmas));
	p->park_ns = probe_clock_ns() - t0;
	if ((rc = probe_cell_cont(c)) < 0)
		probe_fail("PTRACE_CONT", -rc);
}

/* ---- one reset ---- */

static void mark(uint64_t *t, enum step s, uint64_t *at)
{
	uint64_t now = probe_clock_ns();
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
	t[STEP_REGS] += probe_clock_ns() - *at;
	*at = probe_clock_ns();
	struct iovec iov = {(void *)p->xstate, p->xstate_len};
	if (ptrace(PTRACE_SETREGSET, c->pid, (void *)NT_X86_XSTATE, &iov) < 0)
		return -errno;
	mark(t, STEP_FPU, at);
	int differs = check_state(c, p, t, at);
	if (differs < 0)
		return differs;
	int rc = probe_cell_cont(c);
	mark(t, STEP_CONT, at);
	return rc ? rc : differs ? RESET_DIFFERS : RESET_DONE;
}

/* One reset, each step timed into t (ns); a reset_outcome or -errno. The child is running
 * again afterwards in every outcome but an error. */
int probe_reset(struct cell *c, const struct parked *p, bool through_mem, uint64_t *t)
{
	static struct page_region vec[MAX_REGIONS];
	uint64_t at = probe_clock_ns();
	probe_cell_settle(c, (long)p->regs.orig_rax);
	mark(t, STEP_SETTLE, &at);
	uint64_t start = at;
	int rc = probe_cell_stop(c);
	mark(t, STEP_STOP, &at);
	if (rc < 0)
		return rc;
	/* Stopped anywhere but in the parked call (it answered and had not reached its next
	 * recv yet): the parked registers would not fit the kernel's side of the call. */
	struct user_regs_struct regs;
	if (ptrace(PTRACE_GETREGS, c->pid, 0, &regs) < 0)
		return -errno;
	if (regs.rip != p->regs.rip || regs.orig_rax != p->regs.orig_rax)
		return probe_cell_cont(c) < 0 ? -errno : RESET_NOT_PARKED;
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
	t[through_mem ? STEP_RESET_MEM : STEP_RESET_VM] =
		probe_clock_ns() - start - t[STEP_CHECK_QUERY];
	return rc;
}

/* Pages found written with the child stopped right after a reset: 0 when the re-protection
 * covered every page the copy wrote. */
size_t probe_left_written(struct cell *c, const struct parked *p)
{
	static struct page_region vec[MAX_REGIONS];
	if (probe_cell_stop(c) < 0)
		probe_fail("stop after a reset", errno);
	long n = find_written(c, p, vec);
	if (n < 0 || probe_cell_cont(c) < 0)
		probe_fail("scan after a reset", n < 0 ? (int)-n : errno);
	if (getenv("RESET_PROBE_DEBUG"))
		for (long i = 0; i < n; i++)
			fprintf(stderr, "left written: %llx-%llx (fs_base %llx)\n",
				(unsigned long long)vec[i].start, (unsigned long long)vec[i].end,
				(unsigned long long)p->regs.fs_base);
	return pages_of(vec, (size_t)n);
}
