/* Running code: output capture, exit statuses, tracebacks, fresh state per run. */
#include "helpers.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>

Test(run, captures_stdout_and_stderr_separately)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res =
		test_run(sb, "import sys\nprint('out')\nprint('err', file=sys.stderr)");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "out\n");
	cr_expect_str_eq(res->stderr_buf, "err\n");
	cr_expect_eq(res->exit_code, 0);
	cr_expect_eq(res->isolation, snapcell_sandbox_isolation(sb));
	cr_expect_geq(res->isolation, SNAPCELL_ISOLATION_NAMESPACES);
	cr_expect_gt(res->wall_us, 0);
	cr_expect_gt(res->peak_rss_bytes, 0);
	/* What the host was charged is known only where a memory cgroup measured it. */
	if (res->isolation == SNAPCELL_ISOLATION_CGROUPS)
		cr_expect_gt(res->peak_memory_bytes, 0);
	else
		cr_expect_eq(res->peak_memory_bytes, 0);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(run, uncaught_exception_is_error_with_traceback)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(sb, "def f():\n    return 1 / 0\nf()\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	cr_expect_eq(res->exit_code, 1);
	cr_expect(strstr(res->stderr_buf, "Traceback (most recent call last)"), "%s",
		  res->stderr_buf);
	cr_expect(strstr(res->stderr_buf, "ZeroDivisionError"));
	cr_expect(strstr(res->stderr_buf, "return 1 / 0"), "source line shown: %s",
		  res->stderr_buf);
	cr_expect_null(strstr(res->stderr_buf, "_snapcell"), "no snapcell frames: %s",
		       res->stderr_buf);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* Waits until the template has parked both spares, which it does once it has warmed up: the
 * cells parked from then on start from the warmed template. */
static void wait_for_warm_cells(struct snapcell_sandbox *sb)
{
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0);
	cr_assert_eq(st.parked_cells, 2);
}

/* The sandbox's first cell is parked before the template imports the common standard library
 * (guest/template.c, serve): a plain interpreter that imports what it uses. The cells parked
 * after the template's warm-up start with it loaded. */
Test(run, the_first_cell_imports_what_it_uses_and_later_cells_start_warmed)
{
	/* CPython 3.13 imports linecache itself at startup, before any of snapcell's code. */
	struct snapcell_python_info guest = test_guest_python();
	bool startup_linecache = guest.major == 3 && guest.minor >= 13;
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb, "import sys\nprint('json' in sys.modules, 'linecache' in sys.modules)",
		      startup_linecache ? "False True\n" : "False False\n");
	expect_output(sb, "import json\nprint(json.dumps({'a': [1]}))", "{\"a\": [1]}\n");
	wait_for_warm_cells(sb);
	expect_output(sb, "import sys\nprint('json' in sys.modules, 'linecache' in sys.modules)",
		      "True True\n");
	snapcell_sandbox_free(sb);
}

/* Tracebacks and warnings the code formats itself show its lines in every cell: in the first,
 * linecache is imported only when the code needs it, and its import picks up the code's lines
 * (guest/prelude.py, _LinecacheFinder). */
Test(run, tracebacks_and_warnings_show_the_code_lines_in_every_cell)
{
	static const char code[] = "import traceback, warnings\n"
				   "try:\n"
				   "    {}['missing_key']\n"
				   "except KeyError:\n"
				   "    traceback.print_exc()\n"
				   "warnings.warn('careful now')\n"
				   "import linecache\n"
				   "print(linecache.__loader__.__class__.__name__)\n";
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	for (int cell = 0; cell < 2; cell++) {
		if (cell == 1)
			wait_for_warm_cells(sb);
		struct snapcell_result *res = test_run(sb, code);
		expect_ok(res);
		cr_expect(strstr(res->stderr_buf, "File \"<cell>\", line 3"), "cell %d: %s", cell,
			  res->stderr_buf);
		cr_expect(strstr(res->stderr_buf, "    {}['missing_key']\n"), "cell %d: %s", cell,
			  res->stderr_buf);
		cr_expect(strstr(res->stderr_buf, "careful now\n  warnings.warn('careful now')\n"),
			  "cell %d: %s", cell, res->stderr_buf);
		/* The loader it was found with, not the wrapper that added the lines. */
		cr_expect_str_eq(res->stdout_buf, "SourceFileLoader\n", "cell %d", cell);
		snapcell_result_free(res);
	}
	snapcell_sandbox_free(sb);
}

/* The code compiles as builtins.compile compiles bytes, in every cell: a coding declaration
 * decides the source's encoding, and a NUL is refused. */
Test(run, coding_declarations_and_null_bytes_are_handled_as_python_does)
{
	static const char latin1[] = "# -*- coding: latin-1 -*-\nprint(len('\xe9'), ord('\xe9'))\n";
	static const char nul[] = "print(1)\0print(2)\n";
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	for (int cell = 0; cell < 2; cell++) {
		if (cell == 1)
			wait_for_warm_cells(sb);
		expect_output(sb, latin1, "1 233\n");
		struct snapcell_result *res;
		cr_assert_eq(snapcell_sandbox_run(sb, nul, sizeof(nul) - 1, NULL, &res, NULL), 0);
		cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
		cr_expect(strstr(res->stderr_buf, "source code string cannot contain null bytes"),
			  "cell %d: %s", cell, res->stderr_buf);
		snapcell_result_free(res);
	}
	snapcell_sandbox_free(sb);
}

Test(run, syntax_error_is_error)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(sb, "def f(:\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	cr_expect(strstr(res->stderr_buf, "SyntaxError"), "%s", res->stderr_buf);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(run, system_exit_code_is_the_exit_code)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(sb, "raise SystemExit(3)");
	cr_expect_eq(res->exit_code, 3);
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	snapcell_result_free(res);
	res = test_run(sb, "import sys\nsys.exit(0)");
	cr_expect_eq(res->exit_code, 0);
	cr_expect_eq(res->status, SNAPCELL_STATUS_OK);
	snapcell_result_free(res);
	res = test_run(sb, "import sys\nsys.exit('bye')");
	cr_expect_eq(res->exit_code, 1);
	cr_expect_str_eq(res->stderr_buf, "bye\n");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(run, no_state_survives_between_runs)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(
		sb, "import json, threading, time, os\nx = 41\njson.secret = 'kept?'\n"
		    "open('/tmp/left', 'w').write('x')\n"
		    "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
		    "if os.fork() == 0:\n    time.sleep(30)\n");
	expect_ok(res);
	snapcell_result_free(res);
	expect_output(sb,
		      "import json, os, threading\n"
		      "print('x' in globals(), hasattr(json, 'secret'), "
		      "os.path.exists('/tmp/left'), threading.active_count())",
		      "False False False 1\n");
	snapcell_sandbox_free(sb);
}

Test(run, random_state_differs_per_cell)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *a = test_run(sb, "import random; print(random.random())");
	struct snapcell_result *b = test_run(sb, "import random; print(random.random())");
	expect_ok(a);
	expect_ok(b);
	cr_expect_str_neq(a->stdout_buf, b->stdout_buf);
	snapcell_result_free(a);
	snapcell_result_free(b);
	snapcell_sandbox_free(sb);
}

Test(run, environment_is_exactly_the_configured_variables)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_env(cfg, "GREETING", "hi there", NULL), 0);
	cr_assert_eq(snapcell_config_set_env(cfg, "GREETING", "hello", NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	expect_output(
		sb, "import os; print(dict(os.environ))",
		"{'GREETING': 'hello', 'SSL_CERT_FILE': '/etc/ssl/certs/ca-certificates.crt', "
		"'REQUESTS_CA_BUNDLE': '/etc/ssl/certs/ca-certificates.crt', 'MPLBACKEND': "
		"'Agg', 'SNAPCELL_INPUT': '/input', 'SNAPCELL_OUTPUT': '/output', 'SNAPCELL_TMP': "
		"'/tmp'}\n");
	snapcell_sandbox_free(sb);
}

Test(run, configured_variables_override_the_defaults)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_env(cfg, "MPLBACKEND", "svg", NULL), 0);
	cr_assert_eq(snapcell_config_set_env(cfg, "SSL_CERT_FILE", "/input/ca.pem", NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	expect_output(sb, "import os; print(dict(os.environ))",
		      "{'MPLBACKEND': 'svg', 'SSL_CERT_FILE': '/input/ca.pem', "
		      "'REQUESTS_CA_BUNDLE': '/input/ca.pem', 'SNAPCELL_INPUT': '/input', "
		      "'SNAPCELL_OUTPUT': '/output', 'SNAPCELL_TMP': '/tmp'}\n");
	snapcell_sandbox_free(sb);
}

/* The template sets the environment before it imports os (guest/python.c sc_py_setenv): the
 * process's own (what libc and an exec'd program read) must say what os.environ says, in the
 * sandbox's first cell (parked before os is imported) and in a later one (after). */
Test(run, the_process_environment_is_os_environ_in_the_first_and_later_cells)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_env(cfg, "GREETING", "hello", NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	static const char code[] = "import ctypes, os\n"
				   "libc = ctypes.CDLL(None)\n"
				   "libc.getenv.restype = ctypes.c_char_p\n"
				   "names = ['SNAPCELL_GUEST', 'LC_CTYPE', 'GREETING', "
				   "'MPLBACKEND', 'SNAPCELL_INPUT']\n"
				   "got = [libc.getenv(n.encode()) for n in names]\n"
				   "print(got == [None if v is None else v.encode() for v in "
				   "map(os.environ.get, names)],"
				   " got)\n";
	const char *want = "True [None, None, b'hello', b'Agg', b'/input']\n";
	expect_output(sb, code, want);
	expect_output(sb, code, want);
	snapcell_sandbox_free(sb);
}

Test(run, standard_library_works)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(
		sb,
		"import asyncio, threading, shutil, sqlite3, zipfile, io, concurrent.futures\n"
		"async def f():\n    await asyncio.sleep(0)\n    return 1\n"
		"t = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
		"with concurrent.futures.ThreadPoolExecutor(4) as ex:\n"
		"    s = sum(ex.map(abs, range(-10, 0)))\n"
		"open('/tmp/a', 'w').write('a'); shutil.copy2('/tmp/a', '/tmp/b')\n"
		"db = sqlite3.connect('/tmp/db'); db.execute('create table t(x)')\n"
		"z = zipfile.ZipFile(io.BytesIO(), 'w'); z.writestr('a', 'b')\n"
		"print(asyncio.run(f()), s, open('/tmp/b').read())\n",
		"thread\n1 55 a\n");
	snapcell_sandbox_free(sb);
}

Test(run, debian_numpy_imports_from_an_exposed_python_path)
{
	const char *dist = "/usr/lib/python3/dist-packages";
	if (access("/usr/lib/python3/dist-packages/numpy", F_OK) != 0)
		test_skip_or_fail("python3-numpy is not installed");
	test_skip_unless_guest_runs_debian_packages();
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_python_path(cfg, dist, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res =
		test_run(sb, "import numpy as np\nprint(int(np.arange(10).sum()))");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "45\n");
	snapcell_result_free(res);
	res = test_run(sb, "import numpy");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	/* Without the path numpy is not importable: nothing of the host leaks in. */
	sb = test_sandbox(NULL);
	res = test_run(sb, "import numpy");
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	cr_expect(strstr(res->stderr_buf, "ModuleNotFoundError"), "%s", res->stderr_buf);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

struct par {
	struct snapcell_sandbox *sb;
	int index;
	char out[128];
	int status;
};

static void *par_run(void *arg)
{
	struct par *p = arg;
	char code[192];
	/* The wall clock is the host's in every cell: when the code started and ended. */
	snprintf(code, sizeof(code),
		 "import time, os\nt0 = time.time_ns()\ntime.sleep(1.5)\n"
		 "print(%d, os.getpid(), t0, time.time_ns())",
		 p->index);
	struct snapcell_result *res = NULL;
	struct snapcell_error err;
	if (snapcell_sandbox_run(p->sb, code, SIZE_MAX, NULL, &res, &err) == 0) {
		p->status = res->status;
		snprintf(p->out, sizeof(p->out), "%s", res->stdout_buf);
		snapcell_result_free(res);
	} else {
		p->status = -1;
	}
	return NULL;
}

/* Four runs at once: each in its own cell (pid 1 of its own namespace), and all four running
 * at the same time (every run starts before any ends), which runs taken one after the other
 * would not. */
Test(run, concurrent_runs_are_separate_cells, .timeout = 30)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct par p[4];
	pthread_t t[4];
	for (int i = 0; i < 4; i++) {
		p[i] = (struct par){.sb = sb, .index = i};
		pthread_create(&t[i], NULL, par_run, &p[i]);
	}
	long long last_start = 0, first_end = LLONG_MAX;
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		int index = -1, pid = 0;
		long long start = 0, end = 0;
		cr_expect_eq(p[i].status, SNAPCELL_STATUS_OK);
		cr_assert_eq(sscanf(p[i].out, "%d %d %lld %lld", &index, &pid, &start, &end), 4,
			     "%s", p[i].out);
		cr_expect_eq(index, i);
		cr_expect_eq(pid, 1, "run %d: pid %d", i, pid);
		last_start = start > last_start ? start : last_start;
		first_end = end < first_end ? end : first_end;
	}
	cr_expect_lt(last_start, first_end,
		     "the runs did not overlap: the last started %lld ms after the first ended",
		     (last_start - first_end) / 1000000);
	snapcell_sandbox_free(sb);
}

/* A thread that needs a cell from the template (a run, or stats, which waits for both spares). */
struct waiter {
	struct snapcell_sandbox *sb;
	bool stats;
	_Atomic int tid;
	_Atomic bool done;
	int rc;
	struct snapcell_result *res;
	struct snapcell_sandbox_stats st;
	pthread_t thread;
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	w->tid = (int)syscall(SYS_gettid);
	w->rc = w->stats ? snapcell_sandbox_stats(w->sb, &w->st, NULL)
			 : snapcell_sandbox_run(w->sb, "print('a')", SIZE_MAX, NULL, &w->res, NULL);
	w->done = true;
	return NULL;
}

static void waiter_start(struct waiter *w)
{
	cr_assert_eq(pthread_create(&w->thread, NULL, waiter_main, w), 0);
	uint64_t give_up = test_now_ms() + 10000;
	while (!(w->tid && test_thread_asleep(w->tid)) && !w->done && test_now_ms() < give_up)
		test_pause_ms(2);
	cr_assert(!w->done, "the %s did not wait for the stopped template",
		  w->stats ? "stats" : "run");
	cr_assert(test_thread_asleep(w->tid), "the %s never blocked", w->stats ? "stats" : "run");
}

/* The sandbox's lock is never held while a thread waits for the template: with the template
 * stopped and no cell parked, a run and a stats call wait for one, and a run that already has
 * its cell ends (and retires the cell) meanwhile instead of queueing behind them. */
Test(run, a_run_ends_while_other_threads_wait_for_a_slow_template, .timeout = 120)
{
	struct snapcell_config *cfg = test_config_new();
	struct test_gate g;
	test_gate_add(cfg, &g, true);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0); /* both spares parked */
	cr_assert_eq(st.parked_cells, 2);
	test_wait_cells_parked(st.template_pid); /* with reuse on, at their parked stops */
	cr_assert_eq(kill(st.template_pid, SIGSTOP), 0);
	struct test_bg_run b;
	test_bg_start(&b, sb, "tools.gate()\nprint('b')");
	test_gate_wait(&g);		      /* b has the first parked cell */
	expect_output(sb, "print(2)", "2\n"); /* and this run the second */
	struct waiter run = {.sb = sb}, stats = {.sb = sb, .stats = true};
	waiter_start(&run);
	waiter_start(&stats);
	uint64_t released = test_now_ms();
	sem_post(&g.open);
	struct snapcell_result *res = test_bg_join(&b);
	uint64_t took = test_now_ms() - released;
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "b\n");
	snapcell_result_free(res);
	/* Not behind them: they wait 20 s for a cell before they give up. */
	cr_expect_lt(took, 15000, "the run took %llu ms to end behind the waiting threads",
		     (unsigned long long)took);
	cr_expect(!run.done && !stats.done, "a cell came from a stopped template");
	cr_assert_eq(kill(st.template_pid, SIGCONT), 0);
	pthread_join(run.thread, NULL);
	pthread_join(stats.thread, NULL);
	cr_assert_eq(run.rc, 0);
	expect_ok(run.res);
	cr_expect_str_eq(run.res->stdout_buf, "a\n");
	snapcell_result_free(run.res);
	cr_expect_eq(stats.rc, 0);
	cr_expect_eq(stats.st.parked_cells, 2);
	snapcell_sandbox_free(sb);
}

/* With the template stopped and no cell parked, a thread reading the control socket and one
 * waiting for its read each give up after 20 s of their own, not one after the other. */
Test(run, threads_waiting_for_a_stopped_template_each_give_up_after_20_s, .timeout = 120)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0); /* both spares parked */
	test_wait_cells_parked(st.template_pid); /* with reuse on, at their parked stops */
	cr_assert_eq(kill(st.template_pid, SIGSTOP), 0);
	expect_output(sb, "print(1)", "1\n");
	expect_output(sb, "print(2)", "2\n");
	uint64_t start = test_now_ms();
	struct waiter run = {.sb = sb}, stats = {.sb = sb, .stats = true};
	waiter_start(&run);
	waiter_start(&stats);
	pthread_join(run.thread, NULL);
	pthread_join(stats.thread, NULL);
	uint64_t took = test_now_ms() - start;
	cr_expect_eq(run.rc, SNAPCELL_E_TEMPLATE);
	cr_expect_eq(stats.rc, SNAPCELL_E_TEMPLATE);
	cr_expect_geq(took, 19000);
	cr_expect_lt(took, 30000, "the two gave up after %llu ms", (unsigned long long)took);
	cr_assert_eq(kill(st.template_pid, SIGCONT), 0);
	expect_output(sb, "print(3)", "3\n"); /* the sandbox works again */
	snapcell_sandbox_free(sb);
}

Test(run, rejects_bad_arguments)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_sandbox_run(sb, NULL, 0, NULL, &res, &err), SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_sandbox_run(NULL, "x", 1, NULL, &res, &err), SNAPCELL_E_INVAL);
	size_t big = (16u << 20) + 1;
	char *code = malloc(big);
	memset(code, '#', big);
	cr_expect_eq(snapcell_sandbox_run(sb, code, big, NULL, &res, &err), SNAPCELL_E_TOO_BIG);
	cr_expect(strstr(err.message, "cap"), "%s", err.message);
	free(code);
	snapcell_sandbox_free(sb);
}

Test(run, stats_report_the_template_and_its_parked_cells)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_sandbox_stats st;
	/* The template parks its cells after READY, so a new sandbox may report fewer at first:
	 * wait (bounded) for the two it keeps. */
	uint64_t give_up = test_now_ms() + 10000;
	do
		cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0);
	while (st.parked_cells < 2 && test_now_ms() < give_up && test_pause_ms(5) == 0);
	cr_expect_gt(st.template_pid, 1);
	cr_expect_gt(st.template_private_bytes, 0);
	cr_expect_eq(st.parked_cells, 2);
	cr_expect_gt(st.parked_cell_private_bytes, 0);
	/* Cells share the template's pages copy-on-write, so the template's own private share
	 * can be tiny right after a fork: no ratio holds. A parked cell's private memory is a
	 * few MiB (docs/performance.md); a copy of the interpreter's heap would be tens. */
	cr_expect_lt(st.parked_cell_private_bytes, 32ull << 20);
	cr_expect_eq(snapcell_sandbox_stats(NULL, &st, NULL), SNAPCELL_E_INVAL);
	snapcell_sandbox_free(sb);
}
