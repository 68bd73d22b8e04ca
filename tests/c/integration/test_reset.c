/* Reset in place (snapcell_config_set_reuse, guest/reset.c): a fresh run's cell brought back to
 * its parked state and handed to the next fresh run, with nothing of the run before it left;
 * any state the reset does not restore discards the cell, and the next run gets a forked one. */
#define _GNU_SOURCE
#include "helpers.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static const char identity_code[] = TEST_CELL_IDENTITY;

static char *identity(struct snapcell_sandbox *sb)
{
	struct snapcell_result *res = test_run(sb, identity_code);
	cr_assert_eq(res->status, SNAPCELL_STATUS_OK, "status %s, stderr %s",
		     snapcell_status_name(res->status), res->stderr_buf);
	char *id = strdup(res->stdout_buf);
	snapcell_result_free(res);
	return id;
}

static struct snapcell_sandbox *reuse_sandbox_with(struct snapcell_config *cfg, bool on)
{
	cr_assert_eq(snapcell_config_set_reuse(cfg, on, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	if (on && snapcell_sandbox_isolation(sb) < SNAPCELL_ISOLATION_NAMESPACES)
		cr_skip_test("reset in place needs level namespaces");
	return sb;
}

static struct snapcell_sandbox *reuse_sandbox(bool on)
{
	return reuse_sandbox_with(test_config_new(), on);
}

/* Runs until a cell comes back: true when some run's cell is one an earlier run had (with
 * reuse, back-to-back runs take turns between the cells of the rotation: sandbox.c
 * await_reset_then). */
static bool some_cell_reused(struct snapcell_sandbox *sb, int rounds)
{
	char *seen[16] = {0};
	int n = 0;
	bool again = false;
	for (int i = 0; i < rounds && i < 16 && !again; i++) {
		char *now = identity(sb);
		for (int k = 0; k < n && !again; k++)
			again = strcmp(seen[k], now) == 0;
		seen[n++] = now;
	}
	for (int k = 0; k < n; k++)
		free(seen[k]);
	return again;
}

Test(reset, with_reuse_on_a_cell_runs_again)
{
	struct snapcell_sandbox *sb = reuse_sandbox(true);
	cr_expect(some_cell_reused(sb, 8), "no cell was reused in 8 runs");
	snapcell_sandbox_free(sb);
}

Test(reset, with_reuse_off_every_run_has_a_new_cell)
{
	struct snapcell_sandbox *sb = reuse_sandbox(false);
	cr_expect(!some_cell_reused(sb, 8), "a cell ran twice with reuse off");
	snapcell_sandbox_free(sb);
}

/* What a CPU-clock timer's creation returns in the run's cell: 0, or the errno (EINVAL where the
 * cell is armed for reuse: its counters filter refuses it, guest/counters.c). */
static int cpu_timer_errno(struct snapcell_sandbox *sb)
{
	struct snapcell_result *res = test_run(
		sb,
		"import ctypes\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"t = ctypes.c_int()\n"
		"rc = libc.syscall(ctypes.c_long(222), ctypes.c_long(2), None, ctypes.byref(t))\n"
		"print(0 if rc == 0 else ctypes.get_errno())\n");
	expect_ok(res);
	int n = atoi(res->stdout_buf);
	snapcell_result_free(res);
	return n;
}

/* The sandbox's first cell is never reset (it was parked before the template's warm-up), so
 * nothing of reuse is set up on the first run's path: no counters filter (nor the image and the
 * parked stop that come with it). The cells after it are armed. */
Test(reset, the_sandboxs_first_cell_is_not_armed_for_reuse)
{
	struct snapcell_sandbox *sb = reuse_sandbox(true);
	cr_expect_eq(cpu_timer_errno(sb), 0, "the first cell is armed for reuse");
	cr_expect_eq(cpu_timer_errno(sb), EINVAL, "a later cell is not armed for reuse");
	snapcell_sandbox_free(sb);
}

/* The cells a sandbox's runs ran in, by identity (identity_code's line). */
struct cells_seen {
	char *ids[128];
	int n;
	int reused; /* runs whose cell an earlier run had */
};

static void cells_seen_free(struct cells_seen *c)
{
	for (int i = 0; i < c->n; i++)
		free(c->ids[i]);
}

/* Runs code and then identity_code in the same run; the output before the identity goes to
 * *out (malloc'd), the cell's identity to *id (malloc'd), the result to *res_out; true when
 * the cell ran an earlier run. */
static bool run_seen_full(struct snapcell_sandbox *sb, struct cells_seen *c, const char *code,
			  char **out, char **id, struct snapcell_result **res_out)
{
	char *at;
	struct snapcell_result *res = test_run_identified(sb, code, TEST_CELL_IDENTITY, out, &at);
	bool again = false;
	for (int i = 0; i < c->n && !again; i++)
		again = strcmp(c->ids[i], at) == 0;
	if (!again && c->n < (int)(sizeof(c->ids) / sizeof(c->ids[0])))
		c->ids[c->n++] = strdup(at);
	c->reused += again;
	if (id)
		*id = at;
	else
		free(at);
	if (res_out)
		*res_out = res;
	else
		snapcell_result_free(res);
	return again;
}

static bool run_seen(struct snapcell_sandbox *sb, struct cells_seen *c, const char *code,
		     char **out)
{
	return run_seen_full(sb, c, code, out, NULL, NULL);
}

/* Module attributes, builtins, sys.modules, the environment (Python's and the C one): memory,
 * which a reset copies back; an interval timer, which the cell clears after its parked stop.
 * Each run looks for any earlier run's marks, then leaves its own. */
static const char leave_marks[] =
	"import builtins, json, os, signal, sys, types, ctypes\n"
	"libc = ctypes.CDLL(None)\n"
	"libc.getenv.restype = ctypes.c_char_p\n"
	"seen = [hasattr(json, 'leak'), hasattr(builtins, 'leak'), 'leakmod' in sys.modules,\n"
	"        'LEAK' in os.environ, os.getenv('LEAK') is not None,\n"
	"        libc.getenv(b'CLEAK') is not None,\n"
	"        signal.getitimer(signal.ITIMER_REAL)[0] > 0]\n"
	"print(seen)\n"
	"json.leak = builtins.leak = 1\n"
	"sys.modules['leakmod'] = types.ModuleType('leakmod')\n"
	"os.environ['LEAK'] = '1'\n"
	"libc.setenv(b'CLEAK', b'1', 1)\n"
	"signal.setitimer(signal.ITIMER_REAL, 100)\n";

Test(reset, a_reset_cell_keeps_nothing_of_the_runs_before)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "ctypes", NULL), 0);
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg, true); /* frees cfg */
	struct cells_seen c = {0};
	for (int i = 0; i < 16; i++) {
		char *out;
		run_seen(sb, &c, leave_marks, &out);
		cr_expect_str_eq(out, "[False, False, False, False, False, False, False]\n",
				 "run %d: %s", i, out);
		free(out);
	}
	cr_expect_geq(c.reused, 4, "only %d of 16 runs were in a reset cell", c.reused);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

/* State a reset does not put back: the cell is discarded, so no later run is in it, and no
 * later run sees the change; the sandbox goes on reusing cells after harmless runs. */
static void expect_discarded_with(struct snapcell_config *cfg, const char *change,
				  const char *probe, const char *clean)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg, true); /* frees cfg */
	struct cells_seen c = {0};
	for (int i = 0; i < 6; i++) {
		char *code = NULL, *out = NULL;
		cr_assert_gt(asprintf(&code, "%s\n%s\n", probe, change), 0);
		bool again = run_seen(sb, &c, code, &out);
		cr_expect(!again, "run %d of '%s' ran in a cell an earlier one changed", i, change);
		cr_expect_str_eq(out, clean, "run %d of '%s' saw an earlier run's change", i,
				 change);
		free(code);
		free(out);
	}
	int before = c.reused;
	for (int i = 0; i < 12 && c.reused == before; i++)
		run_seen(sb, &c, "pass", NULL);
	cr_expect_gt(c.reused, before, "no cell was reused after '%s'", change);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

static void expect_discarded_after(const char *change, const char *probe, const char *clean)
{
	expect_discarded_with(test_config_new(), change, probe, clean);
}

Test(reset, a_file_left_in_tmp_discards_the_cell)
{
	expect_discarded_after("open('/tmp/leak', 'w').write('x')",
			       "import os\nprint(os.listdir('/tmp'))", "[]\n");
}

/* A run's /output is collected after the cell is killed (run_fresh.c): never reset. */
Test(reset, a_file_left_in_output_discards_the_cell)
{
	expect_discarded_after("open('/output/leak', 'w').write('x')",
			       "import os\nprint(os.listdir('/output'))", "[]\n");
}

Test(reset, a_changed_working_directory_discards_the_cell)
{
	expect_discarded_after("os.chdir('/output')", "import os\nprint(os.getcwd())", "/tmp\n");
}

Test(reset, a_signal_handler_discards_the_cell)
{
	expect_discarded_after(
		"signal.signal(signal.SIGUSR1, lambda *a: None)",
		"import signal\nprint(signal.getsignal(signal.SIGUSR1) == signal.SIG_DFL)",
		"True\n");
}

Test(reset, a_thread_left_running_discards_the_cell)
{
	expect_discarded_after(
		"threading.Thread(target=time.sleep, args=(30,), daemon=True).start()",
		"import threading, time\nprint(threading.active_count())", "1\n");
}

/* A run that makes a thread and a child (each a clone the template records: counters.c) gets
 * them as without reuse; its cell is discarded after, as any cell whose run made a task. */
Test(reset, a_run_that_makes_threads_and_children_works_and_its_cell_is_discarded)
{
	struct snapcell_sandbox *sb = reuse_sandbox(true);
	struct cells_seen c = {0};
	for (int i = 0; i < 4; i++) {
		char *out;
		struct snapcell_result *res;
		bool again = run_seen_full(
			sb, &c,
			"import subprocess, sys, threading\n"
			"got = []\n"
			"ts = [threading.Thread(target=got.append, args=(n,)) for n in range(4)]\n"
			"for t in ts:\n"
			"    t.start()\n"
			"for t in ts:\n"
			"    t.join()\n"
			"p = subprocess.run([sys.executable, '-c', 'print(6 * 7)'],\n"
			"                   capture_output=True, text=True)\n"
			"print(sorted(got), p.stdout.strip())\n",
			&out, NULL, &res);
		cr_expect_eq(res->status, SNAPCELL_STATUS_OK, "run %d: status %s, stderr %s", i,
			     snapcell_status_name(res->status), res->stderr_buf);
		cr_expect_str_eq(out, "[0, 1, 2, 3] 42\n", "run %d", i);
		cr_expect(!again, "run %d was in a cell an earlier run made tasks in", i);
		snapcell_result_free(res);
		free(out);
	}
	int before = c.reused;
	for (int i = 0; i < 12 && c.reused == before; i++)
		run_seen(sb, &c, "pass", NULL);
	cr_expect_gt(c.reused, before, "no cell was reused after runs that made tasks");
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

Test(reset, a_descriptor_left_open_discards_the_cell)
{
	expect_discarded_after("os.dup2(os.open('/dev/null', os.O_RDONLY), 9)",
			       "import os\ntry:\n    os.fstat(9)\n    print('open')\n"
			       "except OSError:\n    print('closed')",
			       "closed\n");
}

/* A mapping a run added (and kept) is unmapped before the next run in the cell: that run finds
 * nothing at its address (madvise answers ENOMEM there). */
Test(reset, a_mapping_a_run_added_is_gone_in_the_next_run)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "ctypes", NULL), 0);
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg, true); /* frees cfg */
	struct cells_seen c = {0};
	char prev[64] = "0";
	char *prev_cell = NULL;
	for (int i = 0; i < 12; i++) {
		char *code = NULL, *out = NULL, *cell = NULL;
		cr_assert_gt(asprintf(&code,
				      "import builtins, ctypes, mmap\n"
				      "libc = ctypes.CDLL(None, use_errno=True)\n"
				      "prev = %s\n"
				      "gone = not prev or libc.madvise(ctypes.c_void_p(prev), "
				      "4096, 0) != 0\n"
				      "m = mmap.mmap(-1, 1 << 20, flags=mmap.MAP_PRIVATE | "
				      "mmap.MAP_ANONYMOUS)\n"
				      "m[:5] = b'leak!'\n"
				      "builtins.kept = m\n"
				      "print(gone, ctypes.addressof(ctypes.c_char.from_buffer(m)))",
				      prev),
			     0);
		run_seen_full(sb, &c, code, &out, &cell, NULL);
		/* Only where the last run ran: another cell (the sandbox's first, parked before the
		 * template's warm-up, is never reset) may have its own mapping there. */
		if (prev_cell && strcmp(cell, prev_cell) == 0)
			cr_expect_eq(strncmp(out, "True ", 5), 0,
				     "run %d found the last run's mapping: %s", i, out);
		free(prev_cell);
		prev_cell = cell;
		snprintf(prev, sizeof(prev), "%s", strchr(out, ' ') ? strchr(out, ' ') + 1 : "0");
		prev[strcspn(prev, "\n")] = 0;
		free(code);
		free(out);
	}
	free(prev_cell);
	cr_expect_geq(c.reused, 3, "only %d of 12 runs were in a reset cell", c.reused);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

/* A run that grows the heap (glibc's brk) and keeps it full: the next run in the cell gets the
 * parked heap back, and memory calloc takes as fresh from the kernel is zero again. */
Test(reset, a_grown_heap_is_given_back)
{
	struct snapcell_sandbox *sb = reuse_sandbox(true);
	struct cells_seen c = {0};
	for (int i = 0; i < 12; i++) {
		char *out;
		run_seen(sb, &c,
			 "import builtins\n"
			 "print(all(bytearray(60000).count(0) == 60000 for _ in range(300)))\n"
			 "builtins.kept = [b'\\xff' * 60000 for _ in range(300)]",
			 &out);
		cr_expect_str_eq(out, "True\n", "run %d: %s", i, out);
		free(out);
	}
	cr_expect_geq(c.reused, 3, "only %d of 12 runs were in a reset cell", c.reused);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

/* A parked mapping changed whole, so that only one field of its line in /proc/PID/maps differs
 * (its name; its permissions), discards the cell: no page of it was written, so only the
 * comparison of the mappings sees it. The same with the text of /proc/PID/maps, the
 * comparison of kernels without PROCMAP_QUERY (SNAPCELL_RESET_MAPS_TEXT: guest/reset.c). */
static const char rename_own_mapping[] =
	"import ctypes, json\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, "
	"ctypes.c_char_p]\n"
	"print(libc.prctl(0x53564d41, 0, json.PAGE, 4096, b'run'))"; /* PR_SET_VMA_ANON_NAME */

/* The next run finds the inaccessible page before json.PAGE unreadable (a write from it fails)
 * where the run before made it readable: a change no page shows, as none of it is present. */
static const char probe_guard_unreadable[] =
	"import ctypes, json, os\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"r, w = os.pipe()\n"
	"print(libc.write(w, ctypes.c_void_p(json.PAGE - 4096), 1))\n"
	"os.close(r)\n"
	"os.close(w)";
static const char unguard_own_mapping[] =
	"print(libc.mprotect(ctypes.c_void_p(json.PAGE - 4096), 4096, 1))"; /* PROT_READ */

/* Skips the test where the kernel names no anonymous mapping (CONFIG_ANON_VMA_NAME unset:
 * PR_SET_VMA answers EINVAL, and no run can rename a mapping). */
static void skip_without_anon_names(void)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(
		sb, "import ctypes, mmap\n"
		    "libc = ctypes.CDLL(None, use_errno=True)\n"
		    "m = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
		    "at = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
		    "named = libc.prctl(0x53564d41, 0, ctypes.c_ulong(at), 4096, b'x') == 0\n"
		    "print(named or ctypes.get_errno())");
	cr_assert_eq(res->status, SNAPCELL_STATUS_OK, "stderr %s", res->stderr_buf);
	bool unnamed = strcmp(res->stdout_buf, "22\n") == 0;
	cr_assert(unnamed || strcmp(res->stdout_buf, "True\n") == 0, "%s", res->stdout_buf);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	if (unnamed)
		cr_skip_test("this kernel names no anonymous mapping (CONFIG_ANON_VMA_NAME)");
}

Test(reset, a_parked_mapping_renamed_discards_the_cell)
{
	skip_without_anon_names();
	expect_discarded_with(test_config_own_page(), rename_own_mapping, "", "0\n");
}

Test(reset, a_parked_mapping_made_readable_discards_the_cell)
{
	expect_discarded_with(test_config_own_page(), unguard_own_mapping, probe_guard_unreadable,
			      "-1\n0\n");
}

Test(reset, a_parked_mapping_renamed_discards_the_cell_through_the_text)
{
	skip_without_anon_names();
	cr_assert_eq(setenv("SNAPCELL_RESET_MAPS_TEXT", "1", 1), 0);
	expect_discarded_with(test_config_own_page(), rename_own_mapping, "", "0\n");
}

Test(reset, a_parked_mapping_made_readable_discards_the_cell_through_the_text)
{
	cr_assert_eq(setenv("SNAPCELL_RESET_MAPS_TEXT", "1", 1), 0);
	expect_discarded_with(test_config_own_page(), unguard_own_mapping, probe_guard_unreadable,
			      "-1\n0\n");
}

Test(reset, a_lowered_rlimit_discards_the_cell)
{
	expect_discarded_after(
		"resource.setrlimit(resource.RLIMIT_NOFILE, (20, resource.getrlimit("
		"resource.RLIMIT_NOFILE)[1]))",
		"import resource\nprint(resource.getrlimit(resource.RLIMIT_NOFILE)[0] > 20)",
		"True\n");
}

Test(reset, a_changed_umask_discards_the_cell)
{
	expect_discarded_after("os.umask(0o077)",
			       "import os\nu = os.umask(0o022); os.umask(u); print(oct(u))",
			       "0o22\n");
}

/* Runs code n times (n <= 16) in sb, which it frees: no two runs may print the same, and at
 * least min_reused of them must have run in a reset cell. */
static void expect_every_draw_differs(struct snapcell_sandbox *sb, const char *code, int n,
				      int min_reused)
{
	struct cells_seen c = {0};
	char *outs[16] = {0};
	for (int i = 0; i < n && i < 16; i++) {
		run_seen(sb, &c, code, &outs[i]);
		for (int j = 0; j < i; j++)
			cr_expect_str_neq(outs[i], outs[j], "runs %d and %d drew the same numbers",
					  j, i);
	}
	cr_expect_geq(c.reused, min_reused, "only %d of %d runs were in a reset cell", c.reused, n);
	for (int i = 0; i < n && i < 16; i++)
		free(outs[i]);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

/* No at-fork hook runs on a reset: the cell renews its generators itself (prelude.reseed). */
Test(reset, random_generators_differ_in_each_run_of_a_reset_cell)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "ssl", NULL), 0);
	expect_every_draw_differs(
		reuse_sandbox_with(cfg, true), /* frees cfg */
		"import random, ssl\nprint(random.random(), ssl.RAND_bytes(16).hex())", 16, 4);
}

/* random's global generator alone (prelude.reseed seeds it through _random's own seed, not
 * random.seed), and its normal deviates, with a warm-up that drew some. */
Test(reset, random_alone_differs_in_each_run_of_a_reset_cell)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_warmup(cfg, "import random\nrandom.gauss(0, 1)", NULL), 0);
	expect_every_draw_differs(reuse_sandbox_with(cfg, true), /* frees cfg */
				  "import random\nprint(random.gauss(0, 1))", 12, 3);
}

/* A run's CPU time is its own, in a reset cell too, and the CPU limit still ends a runaway. */
Test(reset, cpu_time_is_per_run_and_the_limit_still_holds)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_CPU_MS, 1000, NULL), 0);
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg, true); /* frees cfg */
	struct cells_seen c = {0};
	for (int i = 0; i < 12; i++)
		run_seen(sb, &c,
			 "import time\nt = time.process_time()\n"
			 "while time.process_time() - t < 0.05: pass",
			 NULL);
	cr_expect_geq(c.reused, 3, "only %d of 12 runs were in a reset cell", c.reused);
	int runaways_reused = 0;
	for (int i = 0; i < 4; i++) {
		struct snapcell_result *res;
		run_seen_full(sb, &c,
			      "import time\nt = time.process_time()\n"
			      "while time.process_time() - t < 0.05: pass",
			      NULL, NULL, &res);
		cr_expect_lt(res->cpu_us, 400000, "a 50 ms run reports %llu us",
			     (unsigned long long)res->cpu_us);
		snapcell_result_free(res);
		/* Says which cell it is in before it spins. */
		res = test_run(sb, TEST_CELL_IDENTITY
			       "import sys\nsys.stdout.flush()\nwhile True: pass");
		cr_expect_eq(res->status, SNAPCELL_STATUS_TIMEOUT, "status %s",
			     snapcell_status_name(res->status));
		cr_expect(res->limits_hit & SNAPCELL_HIT_CPU, "limits hit %#x", res->limits_hit);
		/* The limit of its own run, not of the cell's life (the RLIMIT_CPU of an armed
		 * cell has a second more, for the resets): at most what a fresh cell gets. */
		cr_expect_lt(res->cpu_us, 1500000, "a 1 s CPU limit let the runaway run %llu us",
			     (unsigned long long)res->cpu_us);
		cr_expect_geq(res->cpu_us, 500000, "the runaway ran %llu us",
			      (unsigned long long)res->cpu_us);
		const char *at = strstr(res->stdout_buf, "@ ");
		for (int j = 0; at && j < c.n; j++)
			runaways_reused += strcmp(c.ids[j], at) == 0;
		snapcell_result_free(res);
	}
	cr_expect_geq(runaways_reused, 1, "no runaway ran in a reset cell");
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

/* The host keeps what each run of a cell reads (its /proc status, its memory cgroup's figures)
 * open from the cell's first run; they go with the cell: reused cells hold theirs, and cells
 * discarded (a file left in /tmp) and the sandbox's end close them all. */
Test(reset, the_files_kept_for_a_cells_runs_are_closed_with_it)
{
	int before = test_open_fds();
	struct snapcell_sandbox *sb = reuse_sandbox(true);
	struct cells_seen c = {0};
	for (int i = 0; i < 36; i++)
		run_seen(sb, &c, i % 3 ? "pass" : "open('/tmp/left', 'w').close()", NULL);
	int during = test_open_fds() - before;
	cr_expect_gt(c.reused, 0, "no cell was reused");
	cr_expect_geq(c.n, 12, "only %d cells for 12 discarded runs", c.n);
	/* The template's socket and its cells' (six descriptors and three kept each): a few
	 * cells, not every one the runs had. */
	cr_expect_lt(during, 40, "%d descriptors held for %d cells", during, c.n);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
	cr_expect_eq(test_open_fds(), before, "descriptors left after the sandbox's end");
}

/* The peaks a run reports are its own: a small run in a cell where a big one ran reports a
 * small peak (the resident peak, and at level cgroups its memory cgroup's). */
Test(reset, peak_memory_is_per_run)
{
	struct snapcell_sandbox *sb = reuse_sandbox(true);
	struct cells_seen c = {0};
	char *big_ids[12] = {0};
	int checked = 0;
	const uint64_t big = 150u << 20;
	for (int i = 0; i < 12 && checked < 2; i++) {
		struct snapcell_result *res;
		run_seen_full(sb, &c, "x = bytearray(b'1') * (150 << 20)\ndel x", NULL, &big_ids[i],
			      &res);
		cr_expect_geq(res->peak_rss_bytes, big, "a 150 MiB run's resident peak: %llu",
			      (unsigned long long)res->peak_rss_bytes);
		snapcell_result_free(res);
		for (int k = 0; k < 3; k++) {
			char *id;
			run_seen_full(sb, &c, "pass", NULL, &id, &res);
			bool after_big = false;
			for (int j = 0; j <= i && !after_big; j++)
				after_big = strcmp(big_ids[j], id) == 0;
			if (after_big) {
				checked++;
				cr_expect_lt(
					res->peak_rss_bytes, big / 2,
					"a small run after a big one in its cell: rss peak %llu",
					(unsigned long long)res->peak_rss_bytes);
				cr_expect_lt(res->peak_memory_bytes, big / 2,
					     "a small run after a big one in its cell: peak %llu",
					     (unsigned long long)res->peak_memory_bytes);
			}
			free(id);
			snapcell_result_free(res);
		}
	}
	cr_expect_geq(checked, 1, "no small run came after a big one in the same cell");
	for (int i = 0; i < 12; i++)
		free(big_ids[i]);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

/* numpy where the cells' interpreter can import it: its own, or Debian's python3-numpy for
 * Debian's interpreter (test_skip_unless_guest_runs_debian_packages). */
static struct snapcell_config *numpy_config(void)
{
	struct snapcell_sandbox *probe = reuse_sandbox_with(test_config_new(), false);
	struct snapcell_result *res = test_run(probe, "import numpy.random");
	bool own = res->status == SNAPCELL_STATUS_OK;
	snapcell_result_free(res);
	snapcell_sandbox_free(probe);
	if (own)
		return test_config_new();
	if (access("/usr/lib/python3/dist-packages/numpy", F_OK) != 0)
		cr_skip_test("numpy is not importable by the cells' interpreter");
	test_skip_unless_guest_runs_debian_packages(); /* before the config: a skip leaks nothing */
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_python_path(cfg, "/usr/lib/python3/dist-packages", NULL),
		     0);
	return cfg;
}

Test(reset, numpy_generator_differs_in_each_run_of_a_reset_cell)
{
	struct snapcell_config *cfg = numpy_config();
	cr_assert_eq(snapcell_config_add_preload(cfg, "numpy.random", NULL), 0);
	expect_every_draw_differs(reuse_sandbox_with(cfg, true), /* frees cfg */
				  "import numpy.random\nprint(numpy.random.rand())", 12, 3);
}

/* The kernel writes into a thread's rseq area on every resume: a run that moved it into memory
 * the next run uses would corrupt that run, so the cell is discarded. */
Test(reset, a_moved_rseq_area_discards_the_cell)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "ctypes", NULL), 0);
	expect_discarded_with(cfg,
			      "libc = ctypes.CDLL(None, use_errno=True)\n"
			      "libc.syscall.restype = ctypes.c_long\n"
			      "libc.pthread_self.restype = ctypes.c_void_p\n"
			      "off = ctypes.c_long.in_dll(libc, '__rseq_offset').value\n"
			      "area = libc.pthread_self() + off\n"
			      "sig = ctypes.c_uint(0x53053053)\n"
			      "assert libc.syscall(334, ctypes.c_void_p(area), 32, 1, sig) == 0, "
			      "ctypes.get_errno()\n"
			      "buf = ctypes.create_string_buffer(64)\n"
			      "new = (ctypes.addressof(buf) + 31) & ~31\n"
			      "assert libc.syscall(334, ctypes.c_void_p(new), 32, 0, sig) == 0, "
			      "ctypes.get_errno()\n"
			      "builtins.kept = buf\n",
			      "import ctypes, builtins\nprint(hasattr(builtins, 'kept'))",
			      "False\n");
}

/* A config whose template leaves 100,000 bytes in json.BIG, so a page of it is parked state. */
static struct snapcell_config *big_parked_string(void)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "ctypes", NULL), 0);
	cr_assert_eq(snapcell_config_set_warmup(cfg, "import json\njson.BIG = 'x' * 100000", NULL),
		     0);
	return cfg;
}

/* Drops the pages of json.BIG's middle with madvise(advice). */
#define ZAP(advice)                                                                                \
	"import ctypes, json\n"                                                                    \
	"page = (id(json.BIG) + 50000) & ~4095\n"                                                  \
	"libc = ctypes.CDLL(None, use_errno=True)\n"                                               \
	"assert libc.madvise(ctypes.c_void_p(page), 8192, " advice ") == 0, ctypes.get_errno()\n"

/* MADV_DONTNEED drops an anonymous page and its write-protection with it: the reset finds it
 * gone and puts the parked bytes back. */
Test(reset, a_page_dropped_by_madvise_is_put_back)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(big_parked_string(), true);
	struct cells_seen c = {0};
	for (int i = 0; i < 12; i++) {
		char *out;
		run_seen(sb, &c, "import json\nprint(json.BIG.count('x'))\n" ZAP("4"), &out);
		cr_expect_str_eq(out, "100000\n", "run %d: %s", i, out);
		free(out);
	}
	cr_expect_geq(c.reused, 3, "only %d of 12 runs were in a reset cell", c.reused);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

/* Dropped and then read, an anonymous page is the zero page again, present and still marked
 * protected (the fault keeps the marker's protection): neither written nor missing. The reset
 * must put the parked bytes back all the same. */
Test(reset, a_page_dropped_and_read_again_is_put_back)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(big_parked_string(), true);
	struct cells_seen c = {0};
	for (int i = 0; i < 12; i++) {
		char *out;
		run_seen(sb, &c,
			 "import json\nprint(json.BIG.count('x'))\n" ZAP(
				 "4") "ctypes.string_at(page, "
				      "8192)\n",
			 &out);
		cr_expect_str_eq(out, "100000\n", "run %d: %s", i, out);
		free(out);
	}
	cr_expect_geq(c.reused, 3, "only %d of 12 runs were in a reset cell", c.reused);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

/* The pages every run writes are left unprotected after the first reset (guest/reset.c,
 * the hot set): later runs write them without a fault, and the reset still finds them (a
 * page without its protection reads as written) and puts back the parked bytes, also of one
 * dropped with MADV_DONTNEED. */
Test(reset, pages_every_run_writes_take_no_fault_and_are_still_put_back)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "ctypes", NULL), 0);
	cr_assert_eq(snapcell_config_set_warmup(cfg, "import json\njson.HOT = bytearray(64 * 4096)",
						NULL),
		     0);
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg, true); /* frees cfg */
	static const char code[] =
		"import ctypes, json, resource\n"
		"b = json.HOT\n"
		"print(b.count(0) == len(b))\n"
		"before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
		"for i in range(0, len(b), 4096):\n"
		"    b[i] = 1\n"
		"print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before < 16)\n"
		"page = ctypes.addressof((ctypes.c_char * len(b)).from_buffer(b)) + 8191 & ~4095\n"
		"assert ctypes.CDLL(None).madvise(ctypes.c_void_p(page), 4096, 4) == 0\n";
	struct cells_seen c = {0};
	int without_faults = 0;
	for (int i = 0; i < 24; i++) {
		char *out;
		run_seen(sb, &c, code, &out);
		cr_expect(!strncmp(out, "True\n", 5), "run %d saw an earlier run's writes: %s", i,
			  out);
		without_faults += !strcmp(out, "True\nTrue\n");
		free(out);
	}
	cr_expect_geq(c.reused, 12, "only %d of 24 runs were in a reset cell", c.reused);
	cr_expect_geq(without_faults, 12, "only %d of 24 runs wrote without faults",
		      without_faults);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

/* MADV_FREE leaves a page of the cell's own to be zeroed later, which no scan shows, and the
 * reset relies on the filter alone (guest/reset.c lazy_free_shut): cells armed for reuse are
 * refused it by madvise, in a child too (EINVAL, as an older kernel would), while others are
 * not; process_madvise (which takes any advice for the caller itself since 6.13) and io_uring
 * (IORING_OP_MADVISE) are refused to every cell. */
Test(reset, lazy_freeing_is_refused_only_with_reuse)
{
	static const char code[] =
		"import ctypes, mmap, os\n"
		"m = mmap.mmap(-1, 8192, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
		"m[0] = 1\n"
		"page = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"def call(rc):\n"
		"    return (rc, ctypes.get_errno() if rc == -1 else 0)\n"
		"free = call(libc.madvise(ctypes.c_void_p(page), 8192, 8))\n"
		"pid = os.fork()\n"
		"if pid == 0:\n"
		"    os._exit(call(libc.madvise(ctypes.c_void_p(page), 8192, 8))[1])\n"
		"child = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n"
		"iov = (ctypes.c_size_t * 2)(page, 8192)\n"
		"l = ctypes.c_long\n"
		"remote = call(libc.syscall(l(440), l(-1), iov, l(1), l(8), l(0)))\n"
		"params = ctypes.create_string_buffer(120)\n"
		"ring = call(libc.syscall(l(425), l(1), params))\n"
		"print(*free, child, remote[1], ring[1])\n";
	for (int on = 0; on < 2; on++) {
		struct snapcell_config *cfg = test_config_new();
		cr_assert_eq(snapcell_config_add_preload(cfg, "ctypes", NULL), 0);
		struct snapcell_sandbox *sb = reuse_sandbox_with(cfg, on);
		expect_output(sb, code, on ? "-1 22 22 38 38\n" : "0 0 0 38 38\n");
		snapcell_sandbox_free(sb);
	}
}

/* Sessions take cells that never ran, and are never reset: their state persists between
 * their runs, and their CPU limit is the configured one, without a reset cell's slack. */
Test(reset, sessions_keep_their_state_and_their_cpu_limit)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_CPU_MS, 2000, NULL), 0);
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg, true); /* frees cfg */
	static const char limit[] =
		"import resource\nprint(resource.getrlimit(resource.RLIMIT_CPU))";
	expect_output(sb, limit, "(2, 2)\n"); /* the first cell, never reset: 2 s */
	expect_output(sb, limit, "(3, 3)\n"); /* a later one: 2 s and the reset slack */
	struct snapcell_error err = {0};
	struct snapcell_session *s = NULL;
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	const char *codes[] = {"x = 41", "x += 1\nprint(x)", limit};
	const char *want[] = {"", "42\n", "(2, 2)\n"};
	for (int i = 0; i < 3; i++) {
		struct snapcell_result *res = NULL;
		cr_assert_eq(snapcell_session_run(s, codes[i], SIZE_MAX, NULL, &res, &err), 0, "%s",
			     err.message);
		cr_expect_str_eq(res->stdout_buf, want[i], "session run %d: %s %s", i,
				 res->stdout_buf, res->stderr_buf);
		snapcell_result_free(res);
	}
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* Code that writes a DONE of its own (the frame format is no secret) and goes on changing
 * state: the host takes the run as ended and asks for the reset, which stops the cell where it
 * is and puts everything back; no later run sees what it went on doing. */
Test(reset, a_run_that_claims_its_end_early_is_stopped_and_reset)
{
	struct snapcell_sandbox *sb = reuse_sandbox(true);
	struct cells_seen c = {0};
	for (int i = 0; i < 10; i++) {
		char *out;
		run_seen(sb, &c,
			 "import json, os, struct, sys, time\n"
			 "print(hasattr(json, 'leak'))\n" TEST_CELL_IDENTITY "sys.stdout.flush()\n"
			 "json.leak = 0\n"
			 "os.write(3, struct.pack('<I', 33) + b'D' + bytes(32))\n"
			 "t = time.monotonic()\n"
			 "while time.monotonic() - t < 0.3:\n"
			 "    json.leak += 1\n",
			 &out);
		cr_expect_str_eq(out, "False\n", "run %d: %s", i, out);
		free(out);
	}
	cr_expect_geq(c.reused, 2, "only %d of 10 runs were in a reset cell", c.reused);
	cells_seen_free(&c);
	snapcell_sandbox_free(sb);
}

/* A reusable cell dies by its run's CPU timer alone (guest/reset.c cpu_limit_arm): the
 * template's signal for it, with a cell id for value, may also come from any process of its
 * uid (sigqueue, or rt_sigqueueinfo with the timer's own code). Such a signal kills no cell. */
Test(reset, a_forged_cpu_timer_signal_kills_no_cell)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_CPU_MS, 5000, NULL), 0);
	cr_assert_eq(snapcell_config_set_reuse(cfg, true, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_error err = {0};
	struct snapcell_session *s = NULL;
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_session_run(s, "x = 41", SIZE_MAX, NULL, &res, &err), 0, "%s",
		     err.message);
	snapcell_result_free(res);
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, &err), 0, "%s", err.message);
	for (int id = 0; id < 64; id++) { /* the ids of this sandbox's cells so far */
		cr_assert_eq(
			sigqueue(st.template_pid, SIGRTMIN + 1, (union sigval){.sival_int = id}),
			0);
		siginfo_t si = {
			.si_signo = SIGRTMIN + 1, .si_code = SI_TIMER, .si_value.sival_int = id};
		cr_assert_eq(syscall(SYS_rt_sigqueueinfo, st.template_pid, SIGRTMIN + 1, &si), 0);
	}
	usleep(300000);
	cr_assert_eq(snapcell_session_run(s, "x += 1\nprint(x)", SIZE_MAX, NULL, &res, &err), 0,
		     "%s", err.message);
	cr_expect_eq(res->status, SNAPCELL_STATUS_OK, "status %s, stderr %s",
		     snapcell_status_name(res->status), res->stderr_buf);
	cr_expect_str_eq(res->stdout_buf, "42\n", "the session's cell: %s", res->stderr_buf);
	snapcell_result_free(res);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}
