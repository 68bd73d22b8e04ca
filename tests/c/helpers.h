/* Shared helpers for the C tests: one sandbox per test process (Criterion forks per test),
 * and a run helper that fails the test on library errors. */
#ifndef SC_TEST_HELPERS_H
#define SC_TEST_HELPERS_H

#include <criterion/criterion.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "snapcell.h"

/* The build tree's snapcell-cell (beside the tests' directory), or another executable built
 * there ("snapcell-cell-protocol-999" in tests/); static storage. Found from the test binary's
 * own path, so a copy of the build directory works too. */
const char *test_build_path(const char *relative);
#define test_helper_path() test_build_path("../snapcell-cell")

/* A new config pointing at the build tree's helper (the library's default is the installed
 * one); fails the test on error. */
struct snapcell_config *test_config_new(void);

/* Makes a sandbox from cfg (NULL for test_config_new()); fails the test on error. */
struct snapcell_sandbox *test_sandbox(struct snapcell_config *cfg);

/* Runs code and returns the result; fails the test when the library itself fails. */
struct snapcell_result *test_run(struct snapcell_sandbox *sb, const char *code);

/* Which cell a run ran in, for the reuse tests: code that prints, last, "@ " and what names the
 * cell: its /tmp and /output (tmpfs mounts made for it: a device number, reused once a cell is
 * gone, and a creation time) and the inodes of its output pipes and frame socket, made for it
 * by the template; what a run could change of them discards the cell. */
#define TEST_CELL_IDENTITY                                                                         \
	"import os as _os\n"                                                                       \
	"print('@', *[(s.st_dev, s.st_ino, s.st_ctime_ns) for s in "                               \
	"[_os.stat('/tmp'), _os.stat('/output')] + [_os.fstat(fd) for fd in (1, 2, 3)]])\n"

/* Runs code and then identity (code printing "@ " and what names the cell, last, as
 * TEST_CELL_IDENTITY) in the same run, which must end ok; *out (when out is not NULL) gets what
 * the run printed before the identity, *id the identity (both malloc'd). Returns the result,
 * which the caller frees. */
struct snapcell_result *test_run_identified(struct snapcell_sandbox *sb, const char *code,
					    const char *identity, char **out, char **id);

/* Runs code and asserts status ok, returning stdout (owned by the result). */
#define expect_ok(res)                                                                             \
	cr_assert_eq((res)->status, SNAPCELL_STATUS_OK, "status %s, stderr: %s",                   \
		     snapcell_status_name((res)->status), (res)->stderr_buf)

/* A fresh directory under /tmp (mode 0755, so the sandbox uid can read it); malloc'd path. */
char *test_make_tree(void);
/* Writes content to dir/rel, making rel's parent directories. */
void test_write_file(const char *dir, const char *rel, const char *content);
void test_remove_tree(const char *dir);

/* An interpreter that cannot be installed here, simulated: writes dir/name, a script that
 * prints json (what such an interpreter answers snapcell's probe) and appends a line to
 * dir/runs each time it runs; returns its malloc'd path. */
char *test_fake_python(const char *dir, const char *name, const char *json);
/* Such an answer: implementation ("cpython", "pypy"), version, whether free-threaded, and the
 * executable it reports (it must exist: an ordinary program such as /bin/sh stands in);
 * malloc'd. */
char *test_python_answer(const char *impl, int major, int minor, int micro, bool free_threaded,
			 const char *exe);

/* The interpreter test_config_new()'s sandboxes run: the library's default, `python3` on PATH,
 * then /usr/bin/python3 (scripts/test's guest matrix puts each interpreter first on PATH). */
struct snapcell_python_info test_guest_python(void);
/* Whether cells can load Debian's python3-* packages: the guest is of /usr/bin/python3's X.Y
 * (their extension modules are built for it). Otherwise skips the test with the reason, under
 * SNAPCELL_REQUIRE_ALL=1 too: a guest of another version is a choice, not a missing feature. */
void test_skip_unless_guest_runs_debian_packages(void);

/* Names the cell's process (its comm, at most 15 bytes), so the host finds it in /proc. */
#define TEST_NAME_CELL(name) "__import__('ctypes').CDLL(None).prctl(15, b'" name "', 0, 0, 0)\n"
/* How many host processes carry this name (a cell sets it with PR_SET_NAME). */
int test_count_host_processes(const char *name);
/* Waits up to timeout_ms for no such process to be left; how many are left. */
int test_wait_host_processes_gone(const char *name, unsigned timeout_ms);

/* A config whose template's parked memory has a page of its own, json.PAGE (a writable page
 * between two inaccessible ones, so it is one mapping whatever lies around it), holding
 * b'clean'; json.M is its mmap, ctypes preloaded. */
struct snapcell_config *test_config_own_page(void);

/* This process's open descriptors. */
int test_open_fds(void);

/* Runs code, expects status ok and exactly this stdout. */
void expect_output(struct snapcell_sandbox *sb, const char *code, const char *want);

/* Python for attack tests: attempt(label, f) prints "label ok", or the exception's class and
 * errno name (errno and os are imported). */
#define PY_ATTEMPT                                                                                 \
	"import errno, os\n"                                                                       \
	"def attempt(label, f):\n"                                                                 \
	"    try:\n"                                                                               \
	"        f()\n"                                                                            \
	"        print(label, 'ok')\n"                                                             \
	"    except OSError as e:\n"                                                               \
	"        print(label, type(e).__name__, errno.errorcode.get(e.errno, e.errno))\n"

/* A run on another thread, so the test can act while it is in progress. */
struct test_bg_run {
	struct snapcell_sandbox *sb;
	const char *code;
	struct snapcell_result *res; /* NULL when the library failed the run */
	pthread_t thread;
};
void test_bg_start(struct test_bg_run *b, struct snapcell_sandbox *sb, const char *code);
/* Waits for the run; fails the test when the library failed it. The result is b->res. */
struct snapcell_result *test_bg_join(struct test_bg_run *b);

/* Synchronisation with running code, instead of sleeping: code calls the tool "gate"
 * (test_gate_add registers it), whose callback posts `reached` and then waits for `open`
 * before answering. The test waits for reached (the code is running, past that point) and
 * posts open to let it go on. */
struct test_gate {
	sem_t reached, open;
	bool hold; /* false: answer at once, after posting reached */
};
void test_gate_add(struct snapcell_config *cfg, struct test_gate *g, bool hold);
/* Waits at most 30 s for the code to reach the gate; fails the test otherwise. */
void test_gate_wait(struct test_gate *g);

/* Waits (at most 10 s) until no child of the template is traced: with reuse on, a cell the
 * host has received may not have reached its parked stop yet, and needs the template then
 * (guest/reset.c). A test that stops the template lets its parked cells get there first. */
void test_wait_cells_parked(int template_pid);

/* CLOCK_MONOTONIC milliseconds, and a pause for polling loops that wait (bounded) for a state
 * the library reaches asynchronously; never a stand-in for synchronising with code. */
uint64_t test_now_ms(void);
int test_pause_ms(long ms);

/* A test that needs a kernel feature skips with a reason; SNAPCELL_REQUIRE_ALL=1 (set by CI on
 * machines known to have every feature) turns the skip into a failure. */
void test_skip_or_fail(const char *reason);

/* The sandbox's template as one number: its pid and its start time (/proc/PID/stat's 22nd
 * field), so a test sees whether a run started a new template. */
unsigned long long test_template_identity(struct snapcell_sandbox *sb);
/* Whether thread tid of this process is asleep (state S): blocked, here in the library. */
bool test_thread_asleep(int tid);

/* A paused run's cell is stopped (docs/approval.md). test_add_decision_tool registers a tool
 * `name` that needs a decision (its callback answers {}). test_expect_pause_stops_cell runs
 * code (in session s, or a fresh cell when s is NULL) that spins two threads and a forked child
 * around a call to that tool, keeps the run paused for pause_ms, approves it, and expects each
 * spinner to have gone (nearly) the whole pause without running, and the run's wall_us and
 * cpu_us to leave the pause out. */
void test_add_decision_tool(struct snapcell_config *cfg, const char *name);
void test_expect_pause_stops_cell(struct snapcell_sandbox *sb, struct snapcell_session *s,
				  const char *tool, unsigned pause_ms);

/* The same against code that fights the stop: a chain of processes each forking the next and
 * exiting (thousands a second), and a process sending SIGCONT to its process group and to
 * every process it may signal (kill(-1)), both running as the pause starts. */
void test_expect_pause_stops_forkers(struct snapcell_sandbox *sb, const char *tool,
				     unsigned pause_ms);
/* The same against timers of the code's (on the wall clock: SIGCONT to its process, SIGKILL
 * orphaning a stopped group, which the kernel continues): EPERM, and nothing runs. */
void test_expect_pause_survives_timers(struct snapcell_sandbox *sb, const char *tool,
				       unsigned pause_ms);

#endif
