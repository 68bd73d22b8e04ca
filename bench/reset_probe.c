/* Reset in place, a probe of the parts (docs/performance.md, "Reset in place: a probe of the
 * parts"): a started CPython, armed once with asynchronous userfaultfd write-protection, is put
 * back after each run by this process from outside (reset_cell.c), timed step by step against
 * fork + the same writes + exit + wait of an equal-sized process in the same run. A measurement
 * for the design, not the feature: the child runs without isolation and the checks are the few
 * the design needs first. Run by hand; no test runs it. */
#define _GNU_SOURCE
#include "reset_cell.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_ROUNDS 100000

static long page_bytes;

static const char *const step_names[N_STEPS] = {
	"settle", "stop",     "find",	    "copy_vm",	   "copy_mem",	    "reprotect",
	"regs",	  "fpu",      "check_maps", "check_query", "check_fds",	    "check_status",
	"cont",	  "reset_vm", "reset_mem",  "fork",	   "written_pages",
};

struct series {
	uint64_t *v[N_STEPS];
	size_t n[N_STEPS];
};

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
		uint64_t t0 = probe_clock_ns();
		pid_t pid = fork();
		if (pid == 0) {
			for (uint32_t i = 0; i < n; i++)
				mem[(size_t)i * pages / n * (size_t)page_bytes] = 2;
			_exit(0);
		}
		int status = 1;
		while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		uint64_t ns = status == 0 ? probe_clock_ns() - t0 : 0;
		if (write(out, &ns, sizeof(ns)) != (ssize_t)sizeof(ns))
			_exit(1);
	}
	_exit(0);
}

static void forker_start(struct forker *f, size_t bytes)
{
	int to[2], from[2];
	if (pipe2(to, O_CLOEXEC) < 0 || pipe2(from, O_CLOEXEC) < 0)
		probe_fail("pipe", errno);
	f->pid = fork();
	if (f->pid < 0)
		probe_fail("fork", errno);
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
		probe_fail("the baseline's fork", errno);
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
		probe_fail(path, errno);
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
	if (probe_cell_run(c, r->cmd) != 1)
		k->bad_answers++;
	uint64_t t[N_STEPS];
	int rc;
	do {
		memset(t, 0, sizeof(t));
		rc = probe_reset(c, p, through_mem, t);
		k->not_parked += rc == RESET_NOT_PARKED;
	} while (rc == RESET_NOT_PARKED);
	if (rc < 0)
		probe_fail("a reset", -rc);
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
	k.left_written = probe_left_written(c, p);
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
		probe_cell_settle(c, -1);
		uint64_t t0 = probe_clock_ns();
		rc = write_file(path, "1");
		rc = rc ? rc : wait_frozen(events_fd, '1');
		uint64_t t1 = probe_clock_ns();
		rc = rc ? rc : write_file(path, "0");
		rc = rc ? rc : wait_frozen(events_fd, '0');
		freeze[i] = t1 - t0;
		thaw[i] = probe_clock_ns() - t1;
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
		probe_cell_settle(c, parked_nr);
		uint64_t t0 = probe_clock_ns();
		int rc = probe_cell_stop(c);
		uint64_t t1 = probe_clock_ns();
		rc = rc ? rc : probe_cell_cont(c);
		if (rc < 0)
			probe_fail("stop and continue", -rc);
		a[i] = t1 - t0;
		b[i] = probe_clock_ns() - t1;
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
	probe_cell_start(&c, python);
	size_t child_bytes = writable_rss(c.pid);
	struct forker f;
	forker_start(&f, child_bytes);
	static struct parked p;
	probe_park(&c, &p);
	struct series s;
	for (int i = 0; i < N_STEPS; i++)
		if (!(s.v[i] = calloc(rounds + 11, sizeof(uint64_t))))
			probe_fail("samples", ENOMEM);
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
