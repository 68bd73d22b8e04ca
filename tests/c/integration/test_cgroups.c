/* Memory cgroups (src/isolate/cgroup.c, cgroup_cell.c): at level cgroups each cell is charged,
 * bounded and measured by a memory cgroup of its own, below the test process's own memory
 * cgroup, and nothing is left there afterwards, not even by a host that crashed. Without one
 * (an unprivileged caller) the level says so and requiring cgroups fails clearly. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "../helpers.h"

#define MIB (1024ull * 1024)

static void require_cgroups(void)
{
	struct snapcell_probe probe;
	cr_assert_eq(snapcell_probe_host(&probe, NULL), 0);
	if (probe.level == SNAPCELL_ISOLATION_CGROUPS)
		return;
	/* The v1 memory hierarchy is root's on these machines: an unprivileged run of this
	 * binary lacks no feature of the host (an_unprivileged_caller_... covers it). */
	if (geteuid() != 0)
		criterion_skip_test("%s", probe.mech[SNAPCELL_MECH_CGROUP_LIMITS].detail);
	else
		test_skip_or_fail(probe.mech[SNAPCELL_MECH_CGROUP_LIMITS].detail);
}

/* This process's directory in the cgroup v1 memory hierarchy. */
static void own_memory_cgroup(char *dir, size_t len)
{
	char line[4096], cg[2048] = "", root[2048] = "", mnt[2048] = "";
	FILE *f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%*d:memory:%2047s", cg) == 1)
			break;
	if (f)
		fclose(f);
	f = fopen("/proc/self/mountinfo", "re");
	while (f && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - cgroup ");
		if (sep && strstr(sep, "memory") &&
		    sscanf(line, "%*s %*s %*s %2047s %2047s", root, mnt) == 2)
			break;
	}
	if (f)
		fclose(f);
	cr_assert(cg[0] && mnt[0], "no cgroup v1 memory hierarchy");
	size_t skip = strcmp(root, "/") ? strlen(root) : 0;
	snprintf(dir, len, "%s%s", mnt, cg + skip);
}

/* Moves this process into a memory cgroup of its own below its current one (out with
 * leave_private_cgroup), so sandboxes that other tests make meanwhile, which reap what dead
 * hosts left beside them, never reach the cgroups this test watches. */
static void enter_private_cgroup(char *dir, size_t len, char *parent, size_t parent_len)
{
	own_memory_cgroup(parent, parent_len);
	int n = snprintf(dir, len, "%s/test-%d", parent, (int)getpid());
	cr_assert(n > 0 && (size_t)n < len, "a cgroup path too long");
	cr_assert(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", dir, strerror(errno));
	char path[4200];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	FILE *f = fopen(path, "we");
	cr_assert_not_null(f, "%s", path);
	fprintf(f, "%d\n", (int)getpid());
	cr_assert_eq(fclose(f), 0, "move into %s", dir);
}

static void leave_private_cgroup(const char *dir, const char *parent)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/cgroup.procs", parent);
	FILE *f = fopen(path, "we");
	if (f) {
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	rmdir(dir);
}

/* The sandbox cgroups of process pid below dir ("snapcell-<pid ns>-<pid>-..."): how many, and
 * the path of the last one found. */
static int sandbox_cgroups(const char *dir, pid_t pid, char *last, size_t len)
{
	struct stat ns;
	cr_assert_eq(stat("/proc/self/ns/pid", &ns), 0);
	char prefix[96];
	snprintf(prefix, sizeof(prefix), "snapcell-%llu-%d-", (unsigned long long)ns.st_ino,
		 (int)pid);
	DIR *d = opendir(dir);
	cr_assert_not_null(d, "%s", dir);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, prefix, strlen(prefix))) {
			n++;
			if (last)
				snprintf(last, len, "%s/%s", dir, e->d_name);
		}
	closedir(d);
	return n;
}

static int count_subdirs(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_type == DT_DIR && strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

/* Whether no process is left in dir's cgroup or its children's. */
static bool cgroup_tree_empty(const char *dir)
{
	char path[4200], buf[64];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	FILE *f = fopen(path, "re");
	bool empty = f && !fgets(buf, sizeof(buf), f);
	if (f)
		fclose(f);
	DIR *d = empty ? opendir(dir) : NULL;
	struct dirent *e;
	while (d && empty && (e = readdir(d)))
		if (e->d_type == DT_DIR && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
			empty = cgroup_tree_empty(path);
		}
	if (d)
		closedir(d);
	return empty;
}

static long page_tables_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/meminfo", "re");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "PageTables: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

struct sampler {
	atomic_bool stop;
	long max_kib;
};

static void *sample_page_tables(void *arg)
{
	struct sampler *s = arg;
	while (!atomic_load(&s->stop)) {
		long kib = page_tables_kib();
		if (kib > s->max_kib)
			s->max_kib = kib;
		test_pause_ms(2);
	}
	return NULL;
}

/* Page tables: one-page mappings 1 GiB apart cost about 8 KiB of page tables per 4 KiB
 * page, which RLIMIT_AS does not count: under a 512 MiB limit they took the host's page
 * tables from 1 MB to 963 MB while the result said 11 MiB. The cell's memory cgroup charges
 * the page tables, so the cell is killed at its limit, the host's page tables stay well below
 * what the mappings would need, and the reported peak is what was charged. */
Test(cgroups, sparse_one_page_mappings_are_stopped_at_the_memory_limit, .timeout = 120)
{
	require_cgroups();
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_MEMORY_BYTES, 512 * MIB, NULL),
		     0);
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 60000, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	static const char code[] =
		"import ctypes, sys\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"libc.mmap.restype = ctypes.c_void_p\n"
		"libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,\n"
		"                      ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
		"MAP_FIXED_NOREPLACE = 0x100000\n"
		"n = 0\n"
		"while True:\n"
		"    p = libc.mmap(0x100000000000 + (n << 30), 4096, 3,\n"
		"                  0x22 | MAP_FIXED_NOREPLACE, -1, 0)\n"
		"    if p is None or p == 2**64 - 1:\n"
		"        print('mmap failed', ctypes.get_errno(), 'after', n, flush=True)\n"
		"        break\n"
		"    ctypes.memset(p, 1, 1)\n"
		"    n += 1\n"
		"    if n % 1024 == 0:\n"
		"        print(n, flush=True)\n";
	struct sampler s = {.max_kib = page_tables_kib()};
	long before = s.max_kib;
	pthread_t thread;
	cr_assert_eq(pthread_create(&thread, NULL, sample_page_tables, &s), 0);
	struct snapcell_result *res = test_run(sb, code);
	atomic_store(&s.stop, true);
	pthread_join(thread, NULL);
	cr_expect_eq(res->status, SNAPCELL_STATUS_MEMORY, "status %s, stdout tail: %s",
		     snapcell_status_name(res->status),
		     res->stdout_len > 80 ? res->stdout_buf + res->stdout_len - 80
					  : res->stdout_buf);
	cr_expect(res->limits_hit & SNAPCELL_HIT_MEMORY);
	cr_expect_eq(res->term_signal, SIGKILL);
	cr_expect_null(strstr(res->stdout_buf, "mmap failed"), "%s", res->stdout_buf);
	/* The last count the code printed before it was killed. */
	long mapped = 0;
	for (char *line = res->stdout_buf; *line; line = strchr(line, '\n') + 1) {
		mapped = atol(line);
		if (!strchr(line, '\n'))
			break;
	}
	cr_expect_geq(mapped, 8192, "only %ld mappings before the kill", mapped);
	cr_expect_leq(res->peak_memory_bytes, 512 * MIB);
	/* Each mapping's page and its page-table page at least: twice what RSS sees. */
	cr_expect_geq(res->peak_memory_bytes, (uint64_t)mapped * 8192,
		      "charged %llu for %ld mappings", (unsigned long long)res->peak_memory_bytes,
		      mapped);
	cr_expect_lt(res->peak_rss_bytes, res->peak_memory_bytes);
	/* Page tables alone for vm.max_map_count (65,530) such mappings are ~512 MiB (measured
	 * without the cgroup: +513 MiB); the cgroup stops the cell with at most 2/3 of its
	 * 512 MiB in page tables (measured: +338 MiB). */
	long grew_mib = (s.max_kib - before) / 1024;
	cr_expect_lt(grew_mib, 450, "the host's page tables grew by %ld MiB", grew_mib);
	snapcell_result_free(res);
	expect_output(sb, "print(1)", "1\n");
	snapcell_sandbox_free(sb);
}

/* Each cell's cgroup goes once the cell is gone, and the sandbox's with the sandbox. */
Test(cgroups, cell_cgroups_are_removed_after_their_runs_and_the_sandboxs_with_it)
{
	require_cgroups();
	char dir[4096], mine[4096];
	own_memory_cgroup(dir, sizeof(dir));
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	cr_assert_eq(sandbox_cgroups(dir, getpid(), mine, sizeof(mine)), 1);
	for (int i = 0; i < 30; i++)
		expect_output(sb, "print(1)", "1\n");
	/* Two parked cells, the cell being parked, and the last runs' cells not yet swept. */
	int cells = count_subdirs(mine);
	cr_expect(cells >= 2 && cells <= 8, "%d cell cgroups after 30 runs", cells);
	snapcell_sandbox_free(sb);
	cr_expect_eq(sandbox_cgroups(dir, getpid(), NULL, 0), 0, "%s is left", mine);
}

/* The template moves itself into the sandbox's cgroup (the host passes it the tasks file)
 * before it sets up, so what it allocates is charged there, and holds that file no longer. */
Test(cgroups, the_template_is_in_the_sandboxs_cgroup_and_keeps_no_descriptor_of_it)
{
	require_cgroups();
	char dir[4096], mine[4096], path[4200], line[64];
	own_memory_cgroup(dir, sizeof(dir));
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0);
	cr_assert_eq(sandbox_cgroups(dir, getpid(), mine, sizeof(mine)), 1);
	snprintf(path, sizeof(path), "%s/cgroup.procs", mine);
	FILE *f = fopen(path, "re");
	cr_assert_not_null(f, "%s", path);
	bool found = false;
	while (fgets(line, sizeof(line), f))
		found |= atoi(line) == st.template_pid;
	fclose(f);
	cr_expect(found, "template %d is not in %s", st.template_pid, mine);
	/* Its descriptors: the sandbox cgroup's directory (for its cells'), no file to move
	 * into it. */
	snprintf(path, sizeof(path), "/proc/%d/fd", st.template_pid);
	DIR *d = opendir(path);
	cr_assert_not_null(d, "%s", path);
	struct dirent *e;
	while ((e = readdir(d))) {
		char target[4096];
		ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		cr_expect(!strstr(target, "/tasks") && !strstr(target, "/cgroup.procs"),
			  "the template holds fd %s -> %s", e->d_name, target);
	}
	closedir(d);
	expect_output(sb, "print(1)", "1\n");
	snapcell_sandbox_free(sb);
}

/* A host process that dies without freeing its sandbox leaves its cgroups (its template and
 * cells die with it); the next sandbox made below the same cgroup removes them. */
Test(cgroups, a_crashed_hosts_cgroups_are_reaped_by_the_next_sandbox)
{
	require_cgroups();
	char dir[4096], parent[4096], stale[4096];
	enter_private_cgroup(dir, sizeof(dir), parent, sizeof(parent));
	int ready[2];
	cr_assert_eq(pipe(ready), 0);
	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		struct snapcell_config *cfg = test_config_new();
		struct snapcell_sandbox *sb = NULL;
		struct snapcell_result *res = NULL;
		struct snapcell_sandbox_stats st;
		/* stats waits for both spares: the template parks them once it has warmed up. */
		char ok = snapcell_sandbox_new(cfg, &sb, NULL) == 0 &&
			  snapcell_sandbox_run(sb, "print(1)", SIZE_MAX, NULL, &res, NULL) == 0 &&
			  snapcell_sandbox_stats(sb, &st, NULL) == 0;
		(void)!write(ready[1], &ok, 1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	char ok = 0;
	cr_assert_eq(read(ready[0], &ok, 1), 1);
	close(ready[0]);
	cr_assert(ok, "the child could not make its sandbox");
	cr_assert_eq(sandbox_cgroups(dir, child, stale, sizeof(stale)), 1);
	cr_expect_geq(count_subdirs(stale), 2, "the parked cells' cgroups");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	/* The orphaned template exits when it sees EOF, its cells after it. */
	bool empty = false;
	for (int i = 0; i < 1000 && !(empty = cgroup_tree_empty(stale)); i++)
		test_pause_ms(10);
	cr_assert(empty, "the dead host's template or cells are still in %s", stale);
	cr_expect_eq(sandbox_cgroups(dir, child, NULL, 0), 1, "left until a sandbox is made");
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	cr_expect_eq(sandbox_cgroups(dir, child, NULL, 0), 0, "%s was not reaped", stale);
	cr_expect_eq(sandbox_cgroups(dir, getpid(), NULL, 0), 1, "the new sandbox's own");
	snapcell_sandbox_free(sb);
	leave_private_cgroup(dir, parent);
}

/* What an unprivileged caller gets (the v1 hierarchy is root's): level namespaces in the
 * probe, the sandbox and its results, no charged figure (peak_memory_bytes 0; the resident
 * peak is reported apart), and a config requiring cgroups fails naming the reason. Run in a
 * child that drops to uid 65534 when the test runs as root. */
static void unprivileged_checks(int out)
{
	char report[512] = "";
#define FAIL(...)                                                                                  \
	do {                                                                                       \
		snprintf(report, sizeof(report), __VA_ARGS__);                                     \
		goto done;                                                                         \
	} while (0)
	struct snapcell_probe probe;
	struct snapcell_error err = {0};
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_result *res = NULL;
	struct snapcell_config *cfg = test_config_new();
	if (snapcell_probe_host(&probe, &err) < 0)
		FAIL("probe: %s", err.message);
	if (probe.level != SNAPCELL_ISOLATION_NAMESPACES)
		FAIL("probe level %s", snapcell_isolation_name(probe.level));
	const struct snapcell_mechanism_report *m = &probe.mech[SNAPCELL_MECH_CGROUP_LIMITS];
	if (m->available || m->used || !strstr(m->detail, "not writable"))
		FAIL("cgroup limits: available %d used %d: %s", m->available, m->used, m->detail);
	if (snapcell_sandbox_new(cfg, &sb, &err) < 0)
		FAIL("sandbox: %s", err.message);
	if (snapcell_sandbox_isolation(sb) != SNAPCELL_ISOLATION_NAMESPACES)
		FAIL("sandbox level %s", snapcell_isolation_name(snapcell_sandbox_isolation(sb)));
	if (snapcell_sandbox_run(sb, "x = bytearray(16 << 20)", SIZE_MAX, NULL, &res, &err) < 0)
		FAIL("run: %s", err.message);
	if (res->status != SNAPCELL_STATUS_OK || res->isolation != SNAPCELL_ISOLATION_NAMESPACES ||
	    res->peak_memory_bytes != 0 || res->peak_rss_bytes < (16u << 20))
		FAIL("run: status %s, level %s, peak %llu, rss %llu",
		     snapcell_status_name(res->status), snapcell_isolation_name(res->isolation),
		     (unsigned long long)res->peak_memory_bytes,
		     (unsigned long long)res->peak_rss_bytes);
	snapcell_sandbox_free(sb);
	sb = NULL;
	snapcell_config_require_isolation(cfg, SNAPCELL_ISOLATION_CGROUPS, NULL);
	int rc = snapcell_sandbox_new(cfg, &sb, &err);
	if (rc != SNAPCELL_E_ISOLATION || !strstr(err.message, "'cgroups' required") ||
	    !strstr(err.message, "not writable"))
		FAIL("requiring cgroups: %d %s", rc, err.message);
	snprintf(report, sizeof(report), "ok");
done:
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	snapcell_config_free(cfg);
	(void)!write(out, report, strlen(report));
#undef FAIL
}

Test(cgroups, an_unprivileged_caller_runs_at_namespaces_and_cannot_require_cgroups)
{
	if (geteuid() != 0) {
		int p[2];
		cr_assert_eq(pipe(p), 0);
		unprivileged_checks(p[1]);
		close(p[1]);
		char report[512] = "";
		(void)!read(p[0], report, sizeof(report) - 1);
		cr_expect_str_eq(report, "ok");
		return;
	}
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t child = fork();
	cr_assert_geq(child, 0);
	if (child == 0) {
		close(p[0]);
		if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0) {
			(void)!write(p[1], "could not drop to uid 65534", 27);
			_exit(1);
		}
		/* Dropping from root made it non-dumpable, unlike a process started as the user:
		 * its /proc files would stay root's and its children's id maps unwritable. */
		prctl(PR_SET_DUMPABLE, 1);
		unprivileged_checks(p[1]);
		_exit(0);
	}
	close(p[1]);
	char report[512] = "";
	size_t got = 0;
	for (ssize_t n; (n = read(p[0], report + got, sizeof(report) - 1 - got)) > 0;)
		got += (size_t)n;
	close(p[0]);
	waitpid(child, NULL, 0);
	cr_expect_str_eq(report, "ok");
}

/* The spawn moves the host's descriptors for the helper (its control socket, the helper
 * binary, the cgroup's tasks file) to fixed numbers in the child, parking some at 512-577 on
 * the way; a host with hundreds of descriptors open hands it ones in that range, which a
 * careless move clobbers (the tasks file at 576 became a copy of the helper binary, and the
 * sandbox failed to start). A hole in the host's descriptors is moved along that range. */
Test(cgroups, a_host_with_hundreds_of_descriptors_open_still_starts_sandboxes, .timeout = 120)
{
	require_cgroups();
	enum { TOP = 640, HOLE = 24 };
	static bool mine[TOP];
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(null, 0);
	for (int fd = 10; fd < TOP; fd++)
		if (fcntl(fd, F_GETFD) < 0)
			mine[fd] = dup3(null, fd, O_CLOEXEC) == fd;
	for (int at = 576 - 20; at <= 577; at++) {
		for (int fd = at; fd < at + HOLE; fd++)
			if (mine[fd])
				close(fd);
		struct snapcell_config *cfg = test_config_new();
		struct snapcell_sandbox *sb = NULL;
		struct snapcell_error err = {0};
		int rc = snapcell_sandbox_new(cfg, &sb, &err);
		snapcell_config_free(cfg);
		cr_expect_eq(rc, 0, "free descriptors from %d: %s", at, err.message);
		if (rc == 0) {
			expect_output(sb, "print(1)", "1\n");
			snapcell_sandbox_free(sb);
		}
		for (int fd = at; fd < at + HOLE; fd++)
			if (mine[fd])
				cr_assert_eq(dup3(null, fd, O_CLOEXEC), fd);
	}
	for (int fd = 10; fd < TOP; fd++)
		if (mine[fd])
			close(fd);
	close(null);
}
