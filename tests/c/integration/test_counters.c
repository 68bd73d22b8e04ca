/* A run in a reset cell reads only its own counters (guest/counters.c,
 * src/isolate/seccomp_counters.c): the process's counters span every run the cell held, so
 * without the template's answers a run read how much CPU, how many faults, switches and how
 * large a peak the users before it had. Each way to read them is tried after a run that used
 * plenty of each, in the same cell; with reuse off, cells behave as before. */
#define _GNU_SOURCE
#include "helpers.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ~300 ms of CPU, 200 MiB faulted in, 200 sleeps. */
static const char burner[] = "import time\n"
			     "b = b'1' * (200 << 20)\n"
			     "del b\n"
			     "for _ in range(200):\n"
			     "    time.sleep(0.0002)\n"
			     "t0 = time.process_time()\n"
			     "while time.process_time() - t0 < 0.3:\n"
			     "    pass\n";

/* Every way a run reads its counters, one `name value` line each (seconds, counts, KiB). */
static const char prober[] =
	"import ctypes, os, resource, time\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"class TS(ctypes.Structure):\n"
	"    _fields_ = [('s', ctypes.c_long), ('ns', ctypes.c_long)]\n"
	"SYS_clock_gettime = 228\n"
	"def raw(clock):\n"
	"    ts = TS()\n"
	"    rc = libc.syscall(ctypes.c_long(SYS_clock_gettime), ctypes.c_long(clock),\n"
	"                      ctypes.byref(ts))\n"
	"    return ts.s + ts.ns / 1e9 if rc == 0 else -ctypes.get_errno()\n"
	"def pid_clock(pid, which, thread=False):\n"
	"    return (~pid << 3) | (4 if thread else 0) | which\n"
	"ru = resource.getrusage(resource.RUSAGE_SELF)\n"
	"th = resource.getrusage(resource.RUSAGE_THREAD)\n"
	"t = os.times()\n"
	"libc.clock.restype = ctypes.c_long\n"
	"r, w = os.pipe()\n"
	"pid = os.fork()\n"
	"if pid == 0:\n"
	"    os.write(w, repr(raw(pid_clock(1, 2))).encode())\n"
	"    os._exit(0)\n"
	"os.close(w)\n"
	"child = float(os.read(r, 64))\n"
	"os.waitpid(pid, 0)\n"
	"import threading\n"
	"other = {}\n"
	"def in_thread():\n"
	"    r = resource.getrusage(resource.RUSAGE_THREAD)\n"
	"    other['other_thread_cpu'] = r.ru_utime + r.ru_stime\n"
	"    other['other_thread_time'] = time.thread_time()\n"
	"    other['other_thread_process_time'] = time.process_time()\n"
	"    other['other_thread_pid1'] = raw(pid_clock(1, 2, True))\n"
	"other_thread = threading.Thread(target=in_thread)\n"
	"other_thread.start()\n"
	"other_thread.join()\n"
	"fig = {\n"
	"    'process_time': time.process_time(),\n"
	"    'thread_time': time.thread_time(),\n"
	"    'times': t.user + t.system,\n"
	"    'ru_cpu': ru.ru_utime + ru.ru_stime,\n"
	"    'ru_thread_cpu': th.ru_utime + th.ru_stime,\n"
	"    'clock': libc.clock() / 1e6,\n"
	"    'raw_process': raw(2),\n"
	"    'raw_thread': raw(3),\n"
	"    'raw_self_sched': raw(pid_clock(0, 2)),\n"
	"    'raw_self_prof': raw(pid_clock(0, 0)),\n"
	"    'raw_self_virt': raw(pid_clock(0, 1)),\n"
	"    'raw_pid1_sched': raw(pid_clock(1, 2)),\n"
	"    'raw_pid1_thread': raw(pid_clock(1, 2, True)),\n"
	"    'raw_self_thread': raw(pid_clock(0, 2, True)),\n"
	"    'child_pid1': child,\n"
	"    'minflt': ru.ru_minflt, 'majflt': ru.ru_majflt,\n"
	"    'thread_minflt': th.ru_minflt,\n"
	"    'nvcsw': ru.ru_nvcsw, 'nivcsw': ru.ru_nivcsw,\n"
	"    'maxrss': ru.ru_maxrss, 'thread_maxrss': th.ru_maxrss,\n"
	"}\n"
	"fig.update(other)\n"
	"for k, v in fig.items():\n"
	"    print(k, v)\n";

struct probe {
	const char *name;
	double max; /* what a run that used none of the burner's figures stays below */
};

static const struct probe probes[] = {
	{"process_time", 0.15},
	{"thread_time", 0.15},
	{"times", 0.15},
	{"ru_cpu", 0.15},
	{"ru_thread_cpu", 0.15},
	{"clock", 0.15},
	{"raw_process", 0.15},
	{"raw_thread", 0.15},
	{"raw_self_sched", 0.15},
	{"raw_self_prof", 0.15},
	{"raw_self_virt", 0.15},
	{"raw_pid1_sched", 0.15},
	{"raw_pid1_thread", 0.15},
	{"raw_self_thread", 0.15},
	{"child_pid1", 0.15},
	{"minflt", 20000},
	{"thread_minflt", 20000},
	{"majflt", 1000},
	{"nvcsw", 120},
	{"nivcsw", 120},
	{"maxrss", 100 << 10},
	{"thread_maxrss", 100 << 10},
	{"other_thread_cpu", 0.15},
	{"other_thread_time", 0.15},
	{"other_thread_process_time", 0.15},
	{"other_thread_pid1", 0.15},
};

/* The value of `name` in the prober's output; fails the test when it is missing. */
static double figure(const char *out, const char *name)
{
	char key[64];
	snprintf(key, sizeof(key), "%s ", name);
	for (const char *line = out; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
		if (strncmp(line, key, strlen(key)) == 0)
			return strtod(line + strlen(key), NULL);
	cr_assert_fail("no %s in %s", name, out);
	return 0;
}

static struct snapcell_sandbox *sandbox(bool reuse)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "ctypes", NULL), 0);
	cr_assert_eq(snapcell_config_set_reuse(cfg, reuse, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	if (reuse && snapcell_sandbox_isolation(sb) < SNAPCELL_ISOLATION_NAMESPACES)
		cr_skip_test("reset in place needs level namespaces");
	return sb;
}

/* Runs code with the cell's identity after it: its output before the identity to *out, the
 * identity to *id (both malloc'd). */
static void run_id(struct snapcell_sandbox *sb, const char *code, char **out, char **id)
{
	snapcell_result_free(test_run_identified(sb, code, TEST_CELL_IDENTITY, out, id));
}

/* Burner, then two probers, until `want` probers ran in a cell a burner ran in before; check
 * gets each such prober's output. Returns how many probers ran after a burner in their
 * cell. */
static int after_burners(struct snapcell_sandbox *sb, const char *probe_code, int want,
			 void (*check)(const char *out))
{
	char *burned[16] = {0};
	int n_burned = 0, checked = 0;
	for (int round = 0; round < 16 && checked < want; round++) {
		run_id(sb, burner, NULL, &burned[n_burned++]);
		/* Back-to-back reused runs take turns between two cells: of two probers, one
		 * usually runs in the burner's. */
		for (int k = 0; k < 2 && checked < want; k++) {
			char *out, *id;
			run_id(sb, probe_code, &out, &id);
			bool same = false;
			for (int i = 0; i < n_burned && !same; i++)
				same = strcmp(burned[i], id) == 0;
			if (same) {
				checked++;
				check(out);
			}
			free(out);
			free(id);
		}
	}
	for (int i = 0; i < n_burned; i++)
		free(burned[i]);
	return checked;
}

/* Every figure the prober printed below its bound: the ones that are not, named in one
 * message. */
static void expect_own_figures(const char *out)
{
	char over[1024] = "";
	for (size_t i = 0; i < sizeof(probes) / sizeof(probes[0]); i++) {
		double v = figure(out, probes[i].name);
		if (v < 0 || v >= probes[i].max)
			snprintf(over + strlen(over), sizeof(over) - strlen(over), " %s=%g",
				 probes[i].name, v);
	}
	cr_expect_str_empty(over, "figures not the run's own:%s, in\n%s", over, out);
	/* this run's own use, not nothing */
	cr_expect_gt(figure(out, "process_time"), 0, "%s", out);
	cr_expect_gt(figure(out, "minflt"), 0, "%s", out);
	cr_expect_gt(figure(out, "maxrss"), 1000, "%s", out);
}

Test(counters, a_run_in_a_reset_cell_reads_only_its_own)
{
	struct snapcell_sandbox *sb = sandbox(true);
	cr_expect_geq(after_burners(sb, prober, 2, expect_own_figures), 2,
		      "no prober ran twice after a burner in its cell");
	snapcell_sandbox_free(sb);
}

Test(counters, with_reuse_off_a_run_reads_its_own_as_before)
{
	struct snapcell_sandbox *sb = sandbox(false);
	char *out, *id;
	run_id(sb, burner, NULL, &id);
	free(id);
	run_id(sb, prober, &out, &id);
	expect_own_figures(out);
	free(out);
	free(id);
	snapcell_sandbox_free(sb);
}

/* What no answer can make per run: a timer on a CPU clock (an absolute setting and
 * timer_gettime read the whole count; glibc names the caller's clocks by pid, which the policy
 * refuses everywhere: the raw call names them as the kernel's own ids), an absolute sleep on one (a
 * relative one counts from now), RLIMIT_CPU lowered (its signals come at whole-life seconds).
 * Refused in reuse cells, and only there. */
static const char refusals[] =
	"import ctypes, errno, resource\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"class TS(ctypes.Structure):\n"
	"    _fields_ = [('s', ctypes.c_long), ('ns', ctypes.c_long)]\n"
	"timer = ctypes.c_int()\n"
	"SYS_timer_create = 222\n"
	"rc = libc.syscall(ctypes.c_long(SYS_timer_create), ctypes.c_long(2), None,\n"
	"                  ctypes.byref(timer))\n"
	"print('timer_create', 0 if rc == 0 else ctypes.get_errno())\n"
	"print('abs_sleep', libc.clock_nanosleep(2, 1, ctypes.byref(TS(0, 1)), None))\n"
	"soft, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
	"try:\n"
	"    resource.setrlimit(resource.RLIMIT_CPU, (1, hard))\n"
	"    print('rlimit_cpu', 0)\n"
	"except (OSError, ValueError) as e:\n" /* EPERM is a ValueError there */
	"    print('rlimit_cpu', 1, e)\n";

static void expect_refused(const char *out)
{
	cr_expect_eq(figure(out, "timer_create"), 22 /* EINVAL */, "%s", out);
	cr_expect_eq(figure(out, "abs_sleep"), 22, "%s", out);
	cr_expect_eq(figure(out, "rlimit_cpu"), 1 /* EPERM */, "%s", out);
}

Test(counters, what_cannot_be_per_run_is_refused_in_a_reset_cell)
{
	struct snapcell_sandbox *sb = sandbox(true);
	cr_expect_geq(after_burners(sb, refusals, 1, expect_refused), 1,
		      "no refusal probe ran after a burner in its cell");
	snapcell_sandbox_free(sb);
}

Test(counters, with_reuse_off_cpu_timers_sleeps_and_rlimit_cpu_work)
{
	struct snapcell_sandbox *sb = sandbox(false);
	char *out, *id;
	run_id(sb, refusals, &out, &id);
	cr_expect_eq(figure(out, "timer_create"), 0, "%s", out);
	cr_expect_eq(figure(out, "abs_sleep"), 0, "%s", out);
	cr_expect_eq(figure(out, "rlimit_cpu"), 0, "%s", out);
	free(out);
	free(id);
	snapcell_sandbox_free(sb);
}

/* The template answers every cell of its sandbox on one thread: a cell that floods it with
 * calls must not hold up other runs (their cells' parking, resets and answers). */
static const char flooder[] = "import resource, threading, time\n"
			      "end = time.monotonic() + 2\n"
			      "n = [0] * 8\n"
			      "def spin(i):\n"
			      "    while time.monotonic() < end:\n"
			      "        resource.getrusage(resource.RUSAGE_SELF)\n"
			      "        n[i] += 1\n"
			      "ts = [threading.Thread(target=spin, args=(i,)) for i in range(8)]\n"
			      "for t in ts:\n"
			      "    t.start()\n"
			      "for t in ts:\n"
			      "    t.join()\n"
			      "print(sum(n))\n";

struct flood {
	struct snapcell_sandbox *sb;
	const char *code;
	struct snapcell_result *res;
	int rc;
};

static void *flood_main(void *arg)
{
	struct flood *f = arg;
	f->rc = snapcell_sandbox_run(f->sb, f->code, SIZE_MAX, NULL, &f->res, NULL);
	return NULL;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Runs code (which prints how many calls it made) in one cell while 10 probes run beside it:
 * it must end ok having made more than 100, and no probe may take 1.5 s. */
static void expect_no_hold_up(const char *code, const char *what)
{
	struct snapcell_sandbox *sb = sandbox(true);
	struct flood f = {sb, code, NULL, -1};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, flood_main, &f), 0);
	usleep(300 * 1000);
	uint64_t slowest = 0;
	for (int i = 0; i < 10; i++) {
		char *out, *id;
		uint64_t t0 = now_ms();
		run_id(sb, prober, &out, &id);
		uint64_t took = now_ms() - t0;
		slowest = took > slowest ? took : slowest;
		free(out);
		free(id);
	}
	pthread_join(t, NULL);
	cr_assert_eq(f.rc, 0);
	cr_expect_eq(f.res->status, SNAPCELL_STATUS_OK, "%s", f.res->stderr_buf);
	cr_expect_gt(atol(f.res->stdout_buf), 100, "the %s made %s calls", what, f.res->stdout_buf);
	snapcell_result_free(f.res);
	cr_expect_lt(slowest, 1500, "a run beside the %s took %llu ms", what,
		     (unsigned long long)slowest);
	snapcell_sandbox_free(sb);
}

Test(counters, a_cell_flooding_the_template_does_not_hold_up_other_runs, .timeout = 60)
{
	expect_no_hold_up(flooder, "flooder");
}

/* Threads made in a loop: each clone goes to the template (which records that the run made a
 * task, counters.c), from 4 threads at once, for 2 s. */
static const char thread_maker[] =
	"import threading, time\n"
	"end = time.monotonic() + 2\n"
	"n = [0] * 4\n"
	"def make(i):\n"
	"    while time.monotonic() < end:\n"
	"        t = threading.Thread(target=int)\n"
	"        t.start()\n"
	"        t.join()\n"
	"        n[i] += 1\n"
	"ts = [threading.Thread(target=make, args=(i,)) for i in range(4)]\n"
	"for t in ts:\n"
	"    t.start()\n"
	"for t in ts:\n"
	"    t.join()\n"
	"print(sum(n))\n";

Test(counters, a_cell_making_threads_in_a_loop_does_not_hold_up_other_runs, .timeout = 60)
{
	expect_no_hold_up(thread_maker, "thread maker");
}

/* A cell that ends while its threads wait for answers leaves the template serving the
 * others: later runs still read their own figures. */
static const char dies_waiting[] = "import os, resource, threading, time\n"
				   "def spin():\n"
				   "    while True:\n"
				   "        resource.getrusage(resource.RUSAGE_SELF)\n"
				   "for _ in range(4):\n"
				   "    threading.Thread(target=spin, daemon=True).start()\n"
				   "time.sleep(0.2)\n"
				   "os._exit(3)\n";

Test(counters, a_cell_that_dies_waiting_for_answers_wedges_nothing, .timeout = 60)
{
	struct snapcell_sandbox *sb = sandbox(true);
	for (int i = 0; i < 3; i++) {
		struct snapcell_result *res = test_run(sb, dies_waiting);
		cr_expect_eq(res->exit_code, 3, "exit %d, status %s, stderr %s", res->exit_code,
			     snapcell_status_name(res->status), res->stderr_buf);
		snapcell_result_free(res);
	}
	cr_expect_geq(after_burners(sb, prober, 1, expect_own_figures), 1,
		      "no prober ran after a burner in its cell");
	snapcell_sandbox_free(sb);
}

/* Other ways to the counters, each tried after a burner in the same cell: a thread naming the
 * process clock by its own id (the kernel takes a thread's id for its process there, the
 * template took only the main thread's), ids and `who` values with high bits the kernel
 * drops, /proc. Each prints a figure the run used (below 0.15), or a negative errno. */
static const char other_ways[] =
	"import ctypes, os, threading\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"libc.syscall.restype = ctypes.c_long\n"
	"class TS(ctypes.Structure):\n"
	"    _fields_ = [('s', ctypes.c_long), ('ns', ctypes.c_long)]\n"
	"class RU(ctypes.Structure):\n"
	"    _fields_ = [('u', ctypes.c_long * 2), ('s', ctypes.c_long * 2),\n"
	"                ('rest', ctypes.c_long * 14)]\n"
	"def call(nr, a, b):\n"
	"    rc = libc.syscall(ctypes.c_long(nr), ctypes.c_long(a), b)\n"
	"    return rc if rc >= 0 else -ctypes.get_errno()\n"
	"def raw(clock):\n"
	"    ts = TS()\n"
	"    rc = call(228, clock, ctypes.byref(ts))\n"
	"    return ts.s + ts.ns / 1e9 if rc == 0 else rc\n"
	"def pid_clock(pid, which):\n"
	"    return (~pid << 3) | which\n"
	"fig = {}\n"
	"def in_thread():\n"
	"    tid = threading.get_native_id()\n"
	"    for which, name in enumerate(('prof', 'virt', 'sched')):\n"
	"        fig['own_tid_' + name] = raw(pid_clock(tid, which))\n"
	"    fig['own_tid_high_bits'] = raw(1 << 32 | pid_clock(tid, 2) & 0xffffffff)\n"
	"t = threading.Thread(target=in_thread)\n"
	"t.start()\n"
	"t.join()\n"
	"fig['process_high_bits'] = raw(1 << 32 | 2)\n"
	"for who, name in ((1 << 32, 'self'), (1 << 32 | 1, 'thread')):\n"
	"    r = RU()\n"
	"    rc = call(98, who, ctypes.byref(r))\n"
	"    fig['getrusage_high_' + name] = (r.u[0] + r.u[1] / 1e6 + r.s[0] + r.s[1] / 1e6\n"
	"                                     if rc == 0 else rc)\n"
	"fig['proc'] = 1 if os.path.exists('/proc/self/stat') else 0\n"
	"for k, v in fig.items():\n"
	"    print(k, v)\n";

static void expect_no_other_way(const char *out)
{
	static const char *const names[] = {"own_tid_prof",	    "own_tid_virt",
					    "own_tid_sched",	    "own_tid_high_bits",
					    "process_high_bits",    "getrusage_high_self",
					    "getrusage_high_thread"};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		cr_expect_lt(figure(out, names[i]), 0.15, "%s: %s", names[i], out);
	cr_expect_eq(figure(out, "proc"), 0, "%s", out);
}

Test(counters, no_other_way_reads_the_earlier_runs)
{
	struct snapcell_sandbox *sb = sandbox(true);
	cr_expect_geq(after_burners(sb, other_ways, 2, expect_no_other_way), 2,
		      "no probe ran after a burner in its cell");
	snapcell_sandbox_free(sb);
}

/* The template writes a reuse cell's answers into its memory: where the kernel could not
 * (a read-only page, nothing mapped, a buffer running into a guard page) the call fails with
 * EFAULT and a read-only page keeps its bytes, as without reuse. */
static const char bad_pointers[] =
	"import ctypes, threading\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"libc.syscall.restype = ctypes.c_long\n"
	"libc.mmap.restype = ctypes.c_void_p\n"
	"libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,\n"
	"                      ctypes.c_int, ctypes.c_long]\n"
	"libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]\n"
	"def call(nr, a, b):\n"
	"    rc = libc.syscall(ctypes.c_long(nr), ctypes.c_long(a), ctypes.c_void_p(b))\n"
	"    return rc if rc >= 0 else -ctypes.get_errno()\n"
	"page = libc.mmap(None, 8192, 3, 0x22, -1, 0)\n"
	"ctypes.memset(page, 0x5a, 8192)\n"
	"libc.mprotect(page + 4096, 4096, 1)\n"
	"for name, nr, a in (('getrusage', 98, 0), ('thread_rusage', 98, 1), ('times', 100, 0),\n"
	"                    ('clock', 228, 2), ('thread_clock', 228, 3)):\n"
	"    args = (a, page + 4096) if nr != 100 else (page + 4096, 0)\n"
	"    print(name + '_readonly', call(nr, *args))\n"
	"    args = (a, page + 4096 - 8) if nr != 100 else (page + 4096 - 8, 0)\n"
	"    print(name + '_straddle', call(nr, *args))\n"
	"    print(name + '_unmapped', call(nr, *((a, 8) if nr != 100 else (8, 0))))\n"
	"print('kept', int(ctypes.string_at(page + 4096, 4096) == b'\\x5a' * 4096))\n";

static void expect_faults(const char *out)
{
	static const char *const calls[] = {"getrusage", "thread_rusage", "times", "clock",
					    "thread_clock"};
	static const char *const kinds[] = {"readonly", "straddle", "unmapped"};
	for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
		for (size_t j = 0; j < sizeof(kinds) / sizeof(kinds[0]); j++) {
			char name[64];
			snprintf(name, sizeof(name), "%s_%s", calls[i], kinds[j]);
			cr_expect_eq(figure(out, name), -14 /* EFAULT */, "%s: %s", name, out);
		}
	cr_expect_eq(figure(out, "kept"), 1, "%s", out);
}

Test(counters, answers_fault_where_the_kernel_would)
{
	for (int reuse = 1; reuse >= 0; reuse--) {
		struct snapcell_sandbox *sb = sandbox(reuse);
		for (int i = 0; i < 2; i++) { /* a fresh cell's run, then a reset one's */
			char *out, *id;
			run_id(sb, bad_pointers, &out, &id);
			expect_faults(out);
			free(out);
			free(id);
		}
		snapcell_sandbox_free(sb);
	}
}

/* Calls near the counters that must read none of the earlier runs': resolution, setting and
 * adjusting a CPU clock, a timerfd on one, ITIMER_PROF and ITIMER_VIRTUAL (the run before
 * leaves them unarmed; armed, they count from now). Each prints below 0.15 s or a negative
 * errno. */
static const char near_calls[] =
	"import ctypes, resource, signal\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"libc.syscall.restype = ctypes.c_long\n"
	"class TS(ctypes.Structure):\n"
	"    _fields_ = [('s', ctypes.c_long), ('ns', ctypes.c_long)]\n"
	"def call(nr, *a):\n"
	"    rc = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) if isinstance(x, int)\n"
	"                                          else x for x in a])\n"
	"    return rc if rc >= 0 else -ctypes.get_errno()\n"
	"def secs(rc, ts):\n"
	"    return ts.s + ts.ns / 1e9 if rc == 0 else rc\n"
	"fig = {}\n"
	"for clock, name in ((2, 'process'), (3, 'thread'), (~1 << 3 | 2, 'pid1')):\n"
	"    ts = TS()\n"
	"    fig['getres_' + name] = secs(call(229, clock, ctypes.byref(ts)), ts)\n"
	"    fig['settime_' + name] = call(227, clock, ctypes.byref(TS(0, 0)))\n"
	"    fig['adjtime_' + name] = call(305, clock, "
	"ctypes.byref(ctypes.create_string_buffer(256)))\n"
	"    fig['timerfd_' + name] = call(283, clock, 0)\n"
	"for which, name in ((signal.ITIMER_PROF, 'prof'), (signal.ITIMER_VIRTUAL, 'virt')):\n"
	"    fig['itimer_' + name] = sum(signal.getitimer(which))\n"
	"for k, v in fig.items():\n"
	"    print(k, v)\n";

static void expect_nothing_near(const char *out)
{
	for (const char *line = out; line && *line;
	     line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		const char *space = strchr(line, ' ');
		cr_assert(space, "%s", out);
		double v = strtod(space + 1, NULL);
		cr_expect(v < 0.15, "%.*s: %s", (int)(space - line), line, out);
	}
}

Test(counters, calls_near_the_counters_read_none_of_the_earlier_runs)
{
	struct snapcell_sandbox *sb = sandbox(true);
	cr_expect_geq(after_burners(sb, near_calls, 1, expect_nothing_near), 1,
		      "no probe ran after a burner in its cell");
	snapcell_sandbox_free(sb);
}

/* What the policy kills in every cell: clock_gettime by the x32 numbering and by int 0x80 (the
 * i386 ABI, whose calls the counters' filter leaves to the policy), perf_event_open; and the
 * calls that make a task, which the counters' filter records only by the native numbering: fork
 * and clone by the x32 numbering, fork by int 0x80. */
#define INT80(nr)                                                                                  \
	"import ctypes, mmap\n"                                                                    \
	"libc = ctypes.CDLL(None)\n"                                                               \
	"libc.mmap.restype = ctypes.c_void_p\n"                                                    \
	"libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,\n"    \
	"                      ctypes.c_int, ctypes.c_long]\n"                                     \
	"code = b'\\xb8' + (" nr ").to_bytes(4, 'little') + b'\\xcd\\x80\\xc3'\n"                  \
	"text = libc.mmap(None, 4096, 3, 0x22, -1, 0)\n"                                           \
	"ctypes.memmove(text, code, len(code))\n"                                                  \
	"libc.mprotect(ctypes.c_void_p(text), ctypes.c_size_t(4096), 5)\n"                         \
	"print(ctypes.CFUNCTYPE(ctypes.c_int)(text)())\n"

static const char *const killed_calls[] = {
	"import ctypes\n"
	"libc = ctypes.CDLL(None)\n"
	"print(libc.syscall(ctypes.c_long(57 | 0x40000000)))\n", /* fork */
	"import ctypes\n"
	"libc = ctypes.CDLL(None)\n"
	"print(libc.syscall(ctypes.c_long(56 | 0x40000000), ctypes.c_long(17), None, None, None,\n"
	"                   None))\n", /* clone(SIGCHLD) */
	INT80("2"),		       /* i386's fork: mov eax, 2; int 0x80; ret */
	"import ctypes\n"
	"libc = ctypes.CDLL(None)\n"
	"print(libc.syscall(ctypes.c_long(228 | 0x40000000), ctypes.c_long(2),\n"
	"                   ctypes.byref(ctypes.create_string_buffer(16))))\n",
	"import ctypes, mmap\n"
	"libc = ctypes.CDLL(None)\n"
	"libc.mmap.restype = ctypes.c_void_p\n"
	"libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,\n"
	"                      ctypes.c_int, ctypes.c_long]\n"
	"low = libc.mmap(None, 4096, 3, 0x22 | 0x40, -1, 0)\n" /* MAP_32BIT */
	/* mov eax, 265 (clock_gettime); mov ebx, 2; mov ecx, low; int 0x80; ret */
	"code = (b'\\xb8' + (265).to_bytes(4, 'little') + b'\\xbb' + (2).to_bytes(4, 'little') +\n"
	"        b'\\xb9' + low.to_bytes(4, 'little') + b'\\xcd\\x80\\xc3')\n"
	"text = libc.mmap(None, 4096, 7, 0x22, -1, 0)\n"
	"if text in (None, 2**64 - 1):\n"
	"    text = libc.mmap(None, 4096, 3, 0x22, -1, 0)\n"
	"    ctypes.memmove(text, code, len(code))\n"
	"    libc.mprotect(ctypes.c_void_p(text), ctypes.c_size_t(4096), 5)\n"
	"else:\n"
	"    ctypes.memmove(text, code, len(code))\n"
	"print(ctypes.CFUNCTYPE(ctypes.c_int)(text)(), ctypes.string_at(low, 8).hex())\n",
	"import ctypes\n"
	"libc = ctypes.CDLL(None)\n"
	"attr = ctypes.create_string_buffer(128)\n"
	"print(libc.syscall(ctypes.c_long(298), attr, 0, -1, -1, 0))\n",
};

Test(counters, other_abis_and_perf_events_are_killed)
{
	struct snapcell_sandbox *sb = sandbox(true);
	for (size_t i = 0; i < sizeof(killed_calls) / sizeof(killed_calls[0]); i++) {
		struct snapcell_result *res = test_run(sb, killed_calls[i]);
		cr_expect_eq(res->status, SNAPCELL_STATUS_KILLED, "%zu: status %s, out %s, err %s",
			     i, snapcell_status_name(res->status), res->stdout_buf,
			     res->stderr_buf);
		cr_expect_eq(res->term_signal, SIGSYS, "%zu: signal %d", i, res->term_signal);
		snapcell_result_free(res);
	}
	snapcell_sandbox_free(sb);
}

/* getrusage's `who` is an int to the kernel: RUSAGE_THREAD with high bits set is still the
 * calling thread's, not its process's (here the main thread burnt 0.3 s first). */
static const char thread_who[] =
	"import ctypes, threading, time\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"libc.syscall.restype = ctypes.c_long\n"
	"class RU(ctypes.Structure):\n"
	"    _fields_ = [('u', ctypes.c_long * 2), ('s', ctypes.c_long * 2),\n"
	"                ('rest', ctypes.c_long * 14)]\n"
	"t0 = time.process_time()\n"
	"while time.process_time() - t0 < 0.3:\n"
	"    pass\n"
	"fig = {}\n"
	"def in_thread():\n"
	"    r = RU()\n"
	"    rc = libc.syscall(ctypes.c_long(98), ctypes.c_long(1 << 32 | 1), ctypes.byref(r))\n"
	"    fig['thread'] = r.u[0] + r.u[1] / 1e6 + r.s[0] + r.s[1] / 1e6 if rc == 0 else -1\n"
	"t = threading.Thread(target=in_thread)\n"
	"t.start()\n"
	"t.join()\n"
	"print('thread', fig['thread'])\n";

Test(counters, rusage_thread_with_high_bits_is_the_thread_s)
{
	for (int reuse = 1; reuse >= 0; reuse--) {
		struct snapcell_sandbox *sb = sandbox(reuse);
		for (int i = 0; i < 2; i++) {
			char *out, *id;
			run_id(sb, thread_who, &out, &id);
			double v = figure(out, "thread");
			cr_expect(v >= 0 && v < 0.15, "reuse %d: %s", reuse, out);
			free(out);
			free(id);
		}
		snapcell_sandbox_free(sb);
	}
}
