#define _GNU_SOURCE
#include "helpers.h"

#include <dirent.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <time.h>

const char *test_build_path(const char *relative)
{
	static _Thread_local char path[4096]; /* threads of a test make configs at once */
	char exe[4000];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	cr_assert(n > 0, "readlink /proc/self/exe: %s", strerror(errno));
	exe[n] = 0;
	*strrchr(exe, '/') = 0;
	snprintf(path, sizeof(path), "%s/%s", exe, relative);
	return path;
}

struct snapcell_config *test_config_new(void)
{
	struct snapcell_config *cfg = snapcell_config_new();
	struct snapcell_error err = {0};
	cr_assert_not_null(cfg);
	cr_assert_eq(snapcell_config_set_helper(cfg, test_helper_path(), &err), 0, "%s",
		     err.message);
	/* SNAPCELL_TEST_REUSE=0 runs the whole suite with a forked cell for each run
	 * (scripts/test's pass with reuse off), =1 with cells reset in place; unset, the library's
	 * default (on). A test that sets reuse itself decides for its own sandboxes. */
	const char *reuse = getenv("SNAPCELL_TEST_REUSE");
	if (reuse && *reuse) {
		cr_assert(strcmp(reuse, "0") == 0 || strcmp(reuse, "1") == 0,
			  "SNAPCELL_TEST_REUSE is 0 or 1, not '%s'", reuse);
		cr_assert_eq(snapcell_config_set_reuse(cfg, *reuse == '1', &err), 0, "%s",
			     err.message);
	}
	return cfg;
}

struct snapcell_sandbox *test_sandbox(struct snapcell_config *cfg)
{
	struct snapcell_config *own = cfg ? NULL : test_config_new();
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_sandbox_new(cfg ? cfg : own, &sb, &err);
	snapcell_config_free(own);
	cr_assert_eq(rc, 0, "sandbox_new: %s", err.message);
	return sb;
}

struct snapcell_result *test_run(struct snapcell_sandbox *sb, const char *code)
{
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_sandbox_run(sb, code, SIZE_MAX, NULL, &res, &err);
	cr_assert_eq(rc, 0, "run: %s", err.message);
	return res;
}

struct snapcell_result *test_run_identified(struct snapcell_sandbox *sb, const char *code,
					    const char *identity, char **out, char **id)
{
	char *full = NULL;
	cr_assert_gt(asprintf(&full, "%s\n%s", code, identity), 0);
	struct snapcell_result *res = test_run(sb, full);
	free(full);
	cr_assert_eq(res->status, SNAPCELL_STATUS_OK, "status %s, exit %d, stdout %s, stderr %s",
		     snapcell_status_name(res->status), res->exit_code, res->stdout_buf,
		     res->stderr_buf);
	char *at = strstr(res->stdout_buf, "@ ");
	cr_assert(at, "no identity in %s", res->stdout_buf);
	if (out)
		*out = strndup(res->stdout_buf, (size_t)(at - res->stdout_buf));
	*id = strdup(at);
	return res;
}

void expect_output(struct snapcell_sandbox *sb, const char *code, const char *want)
{
	struct snapcell_result *res = test_run(sb, code);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, want, "stdout:\n%s\nwanted:\n%s\nstderr: %s",
			 res->stdout_buf, want, res->stderr_buf);
	snapcell_result_free(res);
}

static void *bg_main(void *arg)
{
	struct test_bg_run *b = arg;
	if (snapcell_sandbox_run(b->sb, b->code, SIZE_MAX, NULL, &b->res, NULL) < 0)
		b->res = NULL;
	return NULL;
}

void test_bg_start(struct test_bg_run *b, struct snapcell_sandbox *sb, const char *code)
{
	*b = (struct test_bg_run){.sb = sb, .code = code};
	cr_assert_eq(pthread_create(&b->thread, NULL, bg_main, b), 0);
}

struct snapcell_result *test_bg_join(struct test_bg_run *b)
{
	pthread_join(b->thread, NULL);
	cr_assert_not_null(b->res, "background run failed in the library");
	return b->res;
}

void test_skip_or_fail(const char *reason)
{
	const char *strict = getenv("SNAPCELL_REQUIRE_ALL");
	if (strict && strcmp(strict, "1") == 0)
		cr_assert_fail("required feature missing: %s", reason);
	criterion_skip_test("%s", reason);
}

struct snapcell_python_info test_guest_python(void)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
	snapcell_config_free(cfg);
	return info;
}

void test_skip_unless_guest_runs_debian_packages(void)
{
	struct snapcell_python_info guest = test_guest_python(), debian;
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	if (snapcell_config_set_python(cfg, "/usr/bin/python3", &err) < 0 ||
	    snapcell_config_python_info(cfg, &debian, &err) < 0) {
		snapcell_config_free(cfg);
		criterion_skip_test("no Debian /usr/bin/python3: %s", err.message);
	}
	snapcell_config_free(cfg);
	if (guest.major != debian.major || guest.minor != debian.minor)
		criterion_skip_test("the guest Python %s cannot load Debian's packages, built for "
				    "Debian's Python %s",
				    guest.version, debian.version);
}

struct snapcell_config *test_config_own_page(void)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "ctypes", NULL), 0);
	cr_assert_eq(snapcell_config_set_warmup(
			     cfg,
			     "import ctypes, json, mmap\n"
			     "m = mmap.mmap(-1, 3 * 4096, flags=mmap.MAP_PRIVATE | "
			     "mmap.MAP_ANONYMOUS)\n"
			     "m[4096:4101] = b'clean'\n"
			     "base = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
			     "libc = ctypes.CDLL(None)\n"
			     "assert libc.mprotect(ctypes.c_void_p(base), 4096, 0) == 0\n"
			     "assert libc.mprotect(ctypes.c_void_p(base + 8192), 4096, 0) == 0\n"
			     "json.M, json.PAGE = m, base + 4096\n",
			     NULL),
		     0);
	return cfg;
}

int test_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	cr_assert_not_null(d, "open /proc/self/fd");
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n - 3; /* ".", ".." and the directory's own */
}

/* How many host processes carry this name (a cell sets it with PR_SET_NAME). */
int test_count_host_processes(const char *name)
{
	DIR *d = opendir("/proc");
	cr_assert_not_null(d, "open host /proc");
	size_t len = strlen(name);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		char path[300], comm[32] = "";
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		FILE *f = fopen(path, "re");
		if (f && fgets(comm, sizeof(comm), f) && strncmp(comm, name, len) == 0 &&
		    comm[len] == '\n')
			n++;
		if (f)
			fclose(f);
	}
	closedir(d);
	return n;
}

int test_wait_host_processes_gone(const char *name, unsigned timeout_ms)
{
	uint64_t deadline = test_now_ms() + timeout_ms;
	int left;
	while ((left = test_count_host_processes(name)) > 0 && test_now_ms() < deadline)
		test_pause_ms(20);
	return left;
}

static int gate(void *user, const char *args, char **result)
{
	struct test_gate *g = user;
	sem_post(&g->reached);
	if (g->hold)
		while (sem_wait(&g->open) < 0 && errno == EINTR)
			;
	*result = strdup("null");
	return 0;
}

void test_gate_add(struct snapcell_config *cfg, struct test_gate *g, bool hold)
{
	struct snapcell_error err = {0};
	cr_assert_eq(sem_init(&g->reached, 0, 0), 0);
	cr_assert_eq(sem_init(&g->open, 0, 0), 0);
	g->hold = hold;
	cr_assert_eq(snapcell_config_add_tool(cfg, "gate", "", NULL, SNAPCELL_APPROVAL_NEVER, gate,
					      g, &err),
		     0, "%s", err.message);
}

void test_gate_wait(struct test_gate *g)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 30;
	int rc;
	while ((rc = sem_timedwait(&g->reached, &until)) < 0 && errno == EINTR)
		;
	cr_assert_eq(rc, 0, "the code never reached the gate: %s", strerror(errno));
}

uint64_t test_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int test_pause_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return 0;
}

char *test_make_tree(void)
{
	char *dir = strdup("/tmp/sc-files-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	chmod(dir, 0755);
	return dir;
}

void test_write_file(const char *dir, const char *rel, const char *content)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	char *slash = strrchr(path, '/');
	*slash = 0;
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", path);
	cr_assert_eq(system(cmd), 0);
	*slash = '/';
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(content, f);
	fclose(f);
}

void test_remove_tree(const char *dir)
{
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

char *test_fake_python(const char *dir, const char *name, const char *json)
{
	char *path, body[2048];
	cr_assert(asprintf(&path, "%s/%s", dir, name) > 0);
	snprintf(body, sizeof(body), "#!/bin/sh\necho run >> '%s/runs'\ncat <<'EOF'\n%s\nEOF\n",
		 dir, json);
	test_write_file(dir, name, body);
	cr_assert_eq(chmod(path, 0755), 0);
	return path;
}

char *test_python_answer(const char *impl, int major, int minor, int micro, bool free_threaded,
			 const char *exe)
{
	char *json;
	cr_assert(asprintf(&json,
			   "{\"implementation\": \"%s\", \"version\": [%d, %d, %d], "
			   "\"executable\": \"%s\", \"base_prefix\": \"/usr\", \"stdlib\": "
			   "\"/usr/lib\", "
			   "\"platstdlib\": \"/usr/lib\", \"dynload\": \"\", \"gil_disabled\": %s, "
			   "\"shared\": false, \"libdir\": \"\", \"libs\": [], "
			   "\"loader_env\": false}",
			   impl, major, minor, micro, exe, free_threaded ? "true" : "false") > 0);
	return json;
}

unsigned long long test_template_identity(struct snapcell_sandbox *sb)
{
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0);
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", st.template_pid);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	unsigned long long start = 0;
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	cr_assert(p && sscanf(p + 1, "%llu", &start) == 1);
	return (unsigned long long)st.template_pid << 40 ^ start;
}

bool test_thread_asleep(int tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	const char *end = strrchr(buf, ')'); /* the name may hold spaces */
	return end && end[1] == ' ' && end[2] == 'S';
}

static int answer_empty(void *user, const char *args, char **result)
{
	(void)user, (void)args;
	*result = strdup("{}");
	return *result ? 0 : -1;
}

void test_add_decision_tool(struct snapcell_config *cfg, const char *name)
{
	cr_assert_eq(snapcell_config_add_tool(cfg, name, "Needs a decision.", NULL,
					      SNAPCELL_APPROVAL_NEVER, answer_empty, NULL, NULL),
		     0);
	cr_assert_eq(snapcell_config_set_tool_decision(cfg, name, true, NULL), 0);
}

/* Each spinner notes the longest time between two of its turns: about the pause when it was
 * stopped for it, a few milliseconds of scheduling when it ran on. The child writes its figure
 * to memory it shares with the parent. */
static const char spin_code[] =
	"import mmap, os, struct, threading, time\n"
	"sh = mmap.mmap(-1, 64)\n"
	"pid = os.fork()\n"
	"if pid == 0:\n"
	"    last, gap = time.monotonic(), 0.0\n"
	"    while sh[63] == 0:\n"
	"        now = time.monotonic(); gap = max(gap, now - last); last = now\n"
	"        struct.pack_into('d', sh, 0, gap)\n"
	"    os._exit(0)\n"
	"gaps, done = [0.0, 0.0], False\n"
	"def spin(i):\n"
	"    last = time.monotonic()\n"
	"    while not done:\n"
	"        now = time.monotonic(); gaps[i] = max(gaps[i], now - last); last = now\n"
	"ts = [threading.Thread(target=spin, args=(i,)) for i in range(2)]\n"
	"for t in ts: t.start()\n"
	"time.sleep(0.3)\n"
	"call_tool('%s')\n"
	"time.sleep(0.3)\n"
	"done = True\n"
	"for t in ts: t.join()\n"
	"sh[63] = 1\n"
	"os.waitpid(pid, 0)\n"
	"print('%%.3f %%.3f %%.3f' %% (gaps[0], gaps[1], struct.unpack_from('d', sh, 0)[0]))\n";

/* The paused run res approved after pause_ms (res freed): the run's end, expected ok. */
static struct snapcell_result *approve_after(struct snapcell_sandbox *sb,
					     struct snapcell_result *res, unsigned pause_ms)
{
	struct snapcell_result *fin = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "status %s: %s",
		     snapcell_status_name(res->status), res->stderr_buf);
	usleep(pause_ms * 1000u);
	cr_assert_eq(snapcell_sandbox_resume(sb, res->pending->id, SNAPCELL_VERDICT_APPROVED, NULL,
					     NULL, NULL, &fin, &err),
		     0, "resume: %s", err.message);
	snapcell_result_free(res);
	expect_ok(fin);
	return fin;
}

void test_expect_pause_stops_cell(struct snapcell_sandbox *sb, struct snapcell_session *s,
				  const char *tool, unsigned pause_ms)
{
	char code[2048];
	snprintf(code, sizeof(code), spin_code, tool);
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	uint64_t start_ms = test_now_ms();
	int rc = s ? snapcell_session_run(s, code, SIZE_MAX, NULL, &res, &err)
		   : snapcell_sandbox_run(sb, code, SIZE_MAX, NULL, &res, &err);
	cr_assert_eq(rc, 0, "run: %s", err.message);
	struct snapcell_result *fin = approve_after(sb, res, pause_ms);
	uint64_t elapsed_us = (test_now_ms() - start_ms + 1) * 1000;
	double gaps[3];
	cr_assert_eq(sscanf(fin->stdout_buf, "%lf %lf %lf", &gaps[0], &gaps[1], &gaps[2]), 3, "%s",
		     fin->stdout_buf);
	const char *who[] = {"thread 1", "thread 2", "the forked child"};
	for (int i = 0; i < 3; i++)
		cr_expect_geq(gaps[i] * 1000, pause_ms * 0.8,
			      "%s ran during the pause: its longest stop was %.3f s of %.3f s",
			      who[i], gaps[i], pause_ms / 1000.0);
	/* The running time only: the whole time, less the pause. */
	cr_assert_eq(fin->n_decisions, 1);
	uint64_t waited = fin->decisions[0].waited_us;
	cr_expect_geq(waited, pause_ms * 1000ull);
	cr_expect_leq(fin->wall_us + waited, elapsed_us + 50000,
		      "wall_us %llu, waited %llu of %llu", (unsigned long long)fin->wall_us,
		      (unsigned long long)waited, (unsigned long long)elapsed_us);
	/* Three spinners and the main thread, at most, for the running time. */
	cr_expect_leq(fin->cpu_us, 3 * fin->wall_us + 300000, "cpu_us %llu of wall_us %llu",
		      (unsigned long long)fin->cpu_us, (unsigned long long)fin->wall_us);
	snapcell_result_free(fin);
}

/* Slot 0: the fork chain, slot 1: the SIGCONT sender; each notes its last turn and its
 * longest time between turns in shared memory. A thread reaps the chain's orphans, which
 * come back to the cell. */
static const char forkers_code[] =
	"import mmap, os, signal, struct, threading, time\n"
	"sh = mmap.mmap(-1, 64)\n"
	"def mark(slot):\n"
	"    now = time.monotonic()\n"
	"    last, gap = struct.unpack_from('dd', sh, slot * 16)\n"
	"    struct.pack_into('dd', sh, slot * 16, now, max(gap, now - last) if last else 0.0)\n"
	"if os.fork() == 0:\n"
	"    while sh[63] == 0:\n"
	"        mark(0)\n"
	"        try:\n"
	"            if os.fork() != 0: os._exit(0)\n"
	"        except OSError: pass\n"
	"    os._exit(0)\n"
	"if os.fork() == 0:\n"
	"    while sh[63] == 0:\n"
	"        mark(1)\n"
	"        for target in (0, -1):\n"
	"            try: os.kill(target, signal.SIGCONT)\n"
	"            except OSError: pass\n"
	"    os._exit(0)\n"
	"def reap():\n"
	"    while True:\n"
	"        try: os.wait()\n"
	"        except ChildProcessError: time.sleep(0.01)\n"
	"threading.Thread(target=reap, daemon=True).start()\n"
	"time.sleep(0.3)\n"
	"call_tool('%s')\n"
	"time.sleep(0.3)\n"
	"sh[63] = 1\n"
	"time.sleep(0.2)\n"
	"print('%%.3f %%.3f' %% (struct.unpack_from('d', sh, 8)[0], "
	"struct.unpack_from('d', sh, 24)[0]))\n";

void test_expect_pause_stops_forkers(struct snapcell_sandbox *sb, const char *tool,
				     unsigned pause_ms)
{
	char code[2048];
	snprintf(code, sizeof(code), forkers_code, tool);
	struct snapcell_result *fin = approve_after(sb, test_run(sb, code), pause_ms);
	double chain, sender;
	cr_assert_eq(sscanf(fin->stdout_buf, "%lf %lf", &chain, &sender), 2, "%s", fin->stdout_buf);
	cr_expect_geq(chain * 1000, pause_ms * 0.8,
		      "the fork chain ran during the pause: its longest stop was %.3f s", chain);
	cr_expect_geq(sender * 1000, pause_ms * 0.8,
		      "the SIGCONT sender ran during the pause: its longest stop was %.3f s",
		      sender);
	snapcell_result_free(fin);
}

/* A process's own timer continues it: the kernel sends a timer's signal to a stopped process
 * too, and SIGCONT continues it whatever its mask. A child arms one every millisecond (on the
 * wall clock, or killing a grandchild whose group the kernel then continues as orphaned)
 * and spins, noting its longest stop; the answers of timer_create come first. */
static const char timer_code[] =
	"import ctypes, mmap, os, signal, struct, time\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"sh = mmap.mmap(-1, 64)\n"
	"def timer(clock, signo, first, every):\n"
	"    ev = (ctypes.c_int * 16)(0, 0, signo, 0)\n"
	"    t = ctypes.c_void_p()\n"
	"    if libc.timer_create(clock, ev, ctypes.byref(t)) != 0: return ctypes.get_errno()\n"
	"    libc.timer_settime(t, 0, (ctypes.c_long * 4)(0, every, first // 10**9, first %% "
	"10**9), None)\n"
	"    return 0\n"
	"def spin(slot):\n"
	"    last, gap = time.monotonic(), 0.0\n"
	"    while sh[63] == 0:\n"
	"        now = time.monotonic(); gap = max(gap, now - last); last = now\n"
	"        struct.pack_into('d', sh, slot * 8, gap)\n"
	"    os._exit(0)\n"
	"if os.fork() == 0:\n"
	"    struct.pack_into('i', sh, 40, timer(1, signal.SIGCONT, 1000000, 1000000))\n"
	"    spin(0)\n"
	"if os.fork() == 0:\n"
	"    os.setsid()\n"
	"    if os.fork() == 0:\n"
	"        os.setpgid(0, 0)\n"
	"        signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
	"        spin(1)\n"
	"    time.sleep(0.1)\n"
	"    struct.pack_into('i', sh, 44, timer(1, signal.SIGKILL, 10**9, 0))\n"
	"    time.sleep(60)\n"
	"time.sleep(0.3)\n"
	"call_tool('%s')\n"
	"time.sleep(0.3)\n"
	"sh[63] = 1\n"
	"time.sleep(0.2)\n"
	"print('%%.3f %%.3f %%d %%d' %% (struct.unpack_from('dd', sh, 0) + "
	"struct.unpack_from('ii', sh, "
	"40)))\n";

void test_expect_pause_survives_timers(struct snapcell_sandbox *sb, const char *tool,
				       unsigned pause_ms)
{
	char code[4096];
	snprintf(code, sizeof(code), timer_code, tool);
	struct snapcell_result *fin = approve_after(sb, test_run(sb, code), pause_ms);
	double gap[2] = {0};
	int made[2] = {-1, -1};
	cr_assert_eq(sscanf(fin->stdout_buf, "%lf %lf %d %d", &gap[0], &gap[1], &made[0], &made[1]),
		     4, "%s", fin->stdout_buf);
	cr_expect_geq(
		gap[0] * 1000, pause_ms * 0.8,
		"a SIGCONT timer ran its process during the pause: its longest stop was %.3f s",
		gap[0]);
	cr_expect_geq(gap[1] * 1000, pause_ms * 0.8,
		      "an orphaned group ran during the pause: its longest stop was %.3f s",
		      gap[1]);
	cr_expect_eq(made[0], EPERM, "timer_create on the wall clock: errno %d", made[0]);
	cr_expect_eq(made[1], EPERM, "timer_create on the wall clock: errno %d", made[1]);
	snapcell_result_free(fin);
}

/* Whether every child of the template is untraced (TracerPid 0), and how many there are. */
static bool cells_untraced(int template_pid)
{
	char path[96], line[128];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", template_pid, template_pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return true;
	bool untraced = true;
	int pid;
	while (untraced && fscanf(f, "%d", &pid) == 1) {
		snprintf(path, sizeof(path), "/proc/%d/status", pid);
		FILE *st = fopen(path, "r");
		int tracer = 0;
		while (st && fgets(line, sizeof(line), st))
			if (sscanf(line, "TracerPid: %d", &tracer) == 1)
				break;
		if (st)
			fclose(st);
		untraced = tracer == 0;
	}
	fclose(f);
	return untraced;
}

void test_wait_cells_parked(int template_pid)
{
	for (uint64_t give_up = test_now_ms() + 10000;
	     !cells_untraced(template_pid) && test_now_ms() < give_up; test_pause_ms(10))
		;
	cr_assert(cells_untraced(template_pid), "a parked cell is still traced after 10 s");
}
