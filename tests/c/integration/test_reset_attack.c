/* Attacks on the reset in place (guest/reset.c): runs that try to leave state the checks do not
 * read for the next run of a reused cell, or to make the template misbehave. Each test fails
 * while its hole is open; docs/security.md, "Reset in place", says what each one closed. */
#define _GNU_SOURCE
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct snapcell_sandbox *reuse_sandbox_with(struct snapcell_config *cfg)
{
	cr_assert_eq(snapcell_config_set_reuse(cfg, true, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	if (snapcell_sandbox_isolation(sb) < SNAPCELL_ISOLATION_NAMESPACES)
		cr_skip_test("reset in place needs level namespaces");
	return sb;
}

static struct snapcell_config *with_ctypes(void)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "ctypes", NULL), 0);
	return cfg;
}

/* The cells runs ran in, by identity line. */
struct seen {
	char *ids[64];
	int n, reused;
};

static void seen_free(struct seen *s)
{
	for (int i = 0; i < s->n; i++)
		free(s->ids[i]);
}

/* Runs code then TEST_CELL_IDENTITY; returns the output before the identity (malloc'd). */
static char *run_seen(struct snapcell_sandbox *sb, struct seen *s, const char *code)
{
	char *out, *at;
	snapcell_result_free(test_run_identified(sb, code, TEST_CELL_IDENTITY, &out, &at));
	bool again = false;
	for (int i = 0; i < s->n && !again; i++)
		again = strcmp(s->ids[i], at) == 0;
	if (!again && s->n < (int)(sizeof(s->ids) / sizeof(s->ids[0])))
		s->ids[s->n++] = at;
	else
		free(at);
	s->reused += again;
	return out;
}

/* Runs code n times in sb, which it frees: each run must print want, and at least min_reused
 * of them must have run in a reset cell. */
static void expect_every_run(struct snapcell_sandbox *sb, const char *code, const char *want, int n,
			     int min_reused)
{
	struct seen s = {0};
	for (int i = 0; i < n; i++) {
		char *out = run_seen(sb, &s, code);
		cr_expect_str_eq(out, want, "run %d: %s", i, out);
		free(out);
	}
	cr_expect_geq(s.reused, min_reused, "only %d of %d runs were in a reset cell", s.reused, n);
	seen_free(&s);
	snapcell_sandbox_free(sb);
}

/* Runs that make the change alternate with runs that probe for it (their output must be
 * clean); at least min_reused probes are in a cell a change ran in (restored or not, none may
 * see it). A probe may fork: a cell that reaped a child is not reused after it. */
static void expect_never_seen(struct snapcell_config *cfg, const char *probe, const char *change,
			      const char *clean, int min_reused)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg); /* frees cfg */
	struct seen s = {0};
	for (int i = 0; i < 12; i++) {
		free(run_seen(sb, &s, change));
		char *out = run_seen(sb, &s, probe);
		cr_expect_str_eq(out, clean, "probe %d saw an earlier run's change: %s", i, out);
		free(out);
	}
	cr_expect_geq(s.reused, min_reused, "only %d of 24 runs were in a reset cell", s.reused);
	seen_free(&s);
	snapcell_sandbox_free(sb);
}

/* The kernel keeps a handler's address, flags and mask, of which /proc shows only which
 * signals are caught or ignored: a run that points SIGINT's handler at libc's _exit (still
 * caught) made the next run's KeyboardInterrupt an exit, and SA_NOCLDWAIT on SIGCHLD (still
 * SIG_DFL) made its children vanish unwaited. The cell puts every action back after its reset
 * (guest/cell.c, reuse_park). */
Test(reset_attack, signal_actions_a_run_changed_are_put_back)
{
	expect_never_seen(
		with_ctypes(),
		"import os, signal\n"
		"try:\n"
		"    signal.raise_signal(signal.SIGINT)\n"
		"    print('no interrupt')\n"
		"except KeyboardInterrupt:\n"
		"    print('interrupt')\n"
		"pid = os.fork()\n"
		"if pid == 0:\n"
		"    os._exit(7)\n"
		"try:\n"
		"    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
		"except ChildProcessError:\n"
		"    print('no child')\n",
		"import ctypes\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"libc.syscall.restype = ctypes.c_long\n"
		"exit_at = ctypes.cast(libc._exit, ctypes.c_void_p).value\n"
		"old = (ctypes.c_ulong * 4)()\n"
		"assert libc.syscall(13, 2, None, old, 8) == 0\n" /* rt_sigaction */
		"act = (ctypes.c_ulong * 4)(exit_at, old[1], old[2], 0)\n"
		"assert libc.syscall(13, 2, act, None, 8) == 0, ctypes.get_errno()\n"
		"nocldwait = (ctypes.c_ulong * 4)(0, 2, 0, 0)\n"
		"assert libc.syscall(13, 17, nocldwait, None, 8) == 0, ctypes.get_errno()\n",
		"interrupt\n7\n", 3);
}

/* madvise advice that sets flags of a whole mapping (fork, dump, THP, KSM, readahead): none
 * shows in /proc/PID/maps, and MADV_WIPEONFORK on the parked page made a child of the next run
 * see it zeroed. Cells armed for reuse are refused every advice but those that leave a
 * mapping's flags alone (src/isolate/seccomp.c). */
Test(reset_attack, mapping_flags_set_by_madvise_do_not_reach_the_next_run)
{
	expect_never_seen(test_config_own_page(),
			  "import json, os\n"
			  "pid = os.fork()\n"
			  "if pid == 0:\n"
			  "    os._exit(0 if json.M[4096:4101] == b'clean' else 3)\n"
			  "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n",
			  "import ctypes, json\n"
			  "libc = ctypes.CDLL(None, use_errno=True)\n"
			  "for advice in (18, 10, 14, 12, 16, 1):\n" /* WIPEONFORK DONTFORK HUGEPAGE
								      MERGEABLE DONTDUMP RANDOM */
			  "    libc.madvise(ctypes.c_void_p(json.PAGE), 4096, advice)\n",
			  "0\n", 3);
}

/* Advice that leaves the flags alone still works in a reuse cell. */
Test(reset_attack, harmless_madvise_still_works_with_reuse)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(test_config_own_page());
	expect_output(
		sb,
		"import ctypes, json\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"print([libc.madvise(ctypes.c_void_p(json.PAGE), 4096, a) for a in "
		"(0, 3, 4, 22, 23)])\n" /* NORMAL WILLNEED DONTNEED POPULATE_(READ|WRITE) */
		"print([libc.madvise(ctypes.c_void_p(json.PAGE), 4096, a) for a in (18, 14)], "
		"ctypes.get_errno())\n",
		"[0, 0, 0, 0, 0]\n[-1, -1] 22\n");
	snapcell_sandbox_free(sb);
}

/* A run whose main thread waits in vfork (a wait no stop request ends) while its child claims
 * the run's end (a DONE frame of its own) and sleeps: the template, asked to reset the cell,
 * waited for a stop that never came, and the sandbox had no cell for any later run. It now
 * waits a bounded time and discards the cell. */
Test(reset_attack, a_cell_that_cannot_stop_is_discarded_not_waited_for, .timeout = 120)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(with_ctypes());
	for (int i = 0; i < 3; i++) {
		struct snapcell_result *res =
			test_run(sb, "import ctypes, os, struct, time\n"
				     "libc = ctypes.CDLL(None)\n"
				     "if libc.vfork() == 0:\n"
				     "    os.write(3, struct.pack('<I', 33) + b'D' + bytes(32))\n"
				     "    time.sleep(3600)\n"
				     "    os._exit(0)\n");
		snapcell_result_free(res);
		expect_output(sb, "print('next')", "next\n");
	}
	snapcell_sandbox_free(sb);
}

/* A lock on the cell's own /dev/null (flock, an OFD or a POSIX lock on descriptor 0) stays
 * with the process after a reset, and /dev/null is one inode for everyone: the next run saw it
 * from a descriptor of its own. The reset reads the locks of the cell's descriptors
 * (/proc/PID/fdinfo) and discards a cell that holds one. (A discarded cell's lock goes when
 * it has died, which may be after the next run started: the probe waits up to 2 s. Any two
 * cells alive at once can signal each other this way, reset or not: docs/security.md.) */
Test(reset_attack, a_lock_left_on_a_parked_descriptor_discards_the_cell)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "fcntl", NULL), 0); /* no new mapping */
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg);
	struct seen s = {0};
	static const char *const locks[] = {
		"fcntl.flock(0, fcntl.LOCK_SH)\n", "fcntl.lockf(0, fcntl.LOCK_SH)\n",
		"fcntl.fcntl(0, 37, struct.pack('hhqqi4x', fcntl.F_RDLCK, 0, 0, 0, 0))\n", /* OFD */
	};
	for (int i = 0; i < 9; i++) {
		char *code = NULL;
		cr_assert_gt(asprintf(&code,
				      "import fcntl, os, struct, time\n"
				      "fd = os.open('/dev/null', os.O_RDONLY)\n"
				      "for _ in range(40):\n"
				      "    try:\n"
				      "        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
				      "        print('free')\n"
				      "        break\n"
				      "    except OSError:\n"
				      "        time.sleep(0.05)\n"
				      "else:\n"
				      "    print('locked')\n"
				      "os.close(fd)\n"
				      "%s",
				      locks[i % 3]),
			     0);
		char *out = run_seen(sb, &s, code);
		cr_expect_str_eq(out, "free\n", "run %d saw an earlier run's lock: %s", i, out);
		free(out);
		free(code);
	}
	cr_expect_eq(s.reused, 0, "%d runs were in a cell an earlier run left a lock in", s.reused);
	int before = s.reused;
	for (int i = 0; i < 12 && s.reused == before; i++)
		free(run_seen(sb, &s, "pass"));
	cr_expect_gt(s.reused, before, "no cell was reused after the runs with locks");
	seen_free(&s);
	snapcell_sandbox_free(sb);
}

/* The frame socket's shutdown state belongs to the socket, not to memory: a run that shut a
 * direction of descriptor 3 (through a duplicate) made the next run in its cell hang until its
 * time limit, or fail. (A run that claims its end first may be stopped and reset before it
 * shuts anything: then its cell is rightly reused.) */
static void expect_next_runs_fine_after(const char *change)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(with_ctypes());
	struct seen s = {0};
	for (int i = 0; i < 4; i++) {
		char *code = NULL;
		cr_assert_gt(asprintf(&code,
				      TEST_CELL_IDENTITY "import sys\nsys.stdout.flush()\n%s",
				      change),
			     0);
		struct snapcell_result *res = test_run(sb, code);
		free(code);
		char *at = strstr(res->stdout_buf, "@ ");
		char *changed = at ? strdup(at) : NULL;
		snapcell_result_free(res);
		for (int k = 0; k < 2; k++) {
			struct seen one = {0};
			if (changed)
				one.ids[one.n++] = strdup(changed);
			char *out = run_seen(sb, &one, "print('next')");
			cr_expect_str_eq(out, "next\n", "after '%s': %s", change, out);
			s.reused += one.reused;
			free(out);
			seen_free(&one);
		}
		free(changed);
	}
	seen_free(&s);
	snapcell_sandbox_free(sb);
}

/* A receive timeout, low-water mark and SO_PASSCRED set on the frame socket (through a
 * duplicate): the next run read them back. The reset compares the socket's options. */
Test(reset_attack, frame_socket_options_do_not_reach_the_next_run)
{
	expect_never_seen(
		with_ctypes(),
		"import ctypes, struct\n"
		"libc = ctypes.CDLL(None)\n"
		"def get(name, size):\n"
		"    v, n = ctypes.create_string_buffer(size), ctypes.c_uint(size)\n"
		"    libc.getsockopt(3, 1, name, v, ctypes.byref(n))\n"
		"    return v.raw[:n.value]\n"
		"print(get(20, 16) == struct.pack('qq', 0, 7), "
		"get(18, 4) == struct.pack('i', 12345), get(16, 4) == struct.pack('i', 1))\n",
		"import ctypes, os, struct\n"
		"libc = ctypes.CDLL(None)\n"
		"fd = os.dup(3)\n"
		"for name, v in ((20, struct.pack('qq', 0, 7)), (18, struct.pack('i', 12345)),\n"
		"                (16, struct.pack('i', 1))):\n"
		"    assert libc.setsockopt(fd, 1, name, v, len(v)) == 0\n"
		"os.close(fd)\n",
		"False False False\n", 0);
}

Test(reset_attack, a_shut_frame_socket_does_not_reach_the_next_run, .timeout = 120)
{
	expect_next_runs_fine_after("import ctypes, os, struct, sys\n"
				    "sys.stdout.flush()\n"
				    "os.write(3, struct.pack('<I', 33) + b'D' + bytes(32))\n"
				    "fd = os.dup(3)\n"
				    "ctypes.CDLL(None).shutdown(fd, 1)\n"
				    "os.close(fd)\n");
}

Test(reset_attack, a_frame_socket_shut_for_reading_does_not_reach_the_next_run, .timeout = 120)
{
	expect_next_runs_fine_after("import ctypes, os\n"
				    "fd = os.dup(3)\n"
				    "ctypes.CDLL(None).shutdown(fd, 0)\n"
				    "os.close(fd)\n");
}

/* The kernel adds a reaped child's peak resident size and CPU time to its parent's
 * RUSAGE_CHILDREN for good: a run that forked a child which touched 200 MiB left the next run
 * of its cell a ru_maxrss of 200 MiB to read (any number the run chose). A cell that reaped a
 * child in its run is discarded (the children's fields of /proc/PID/stat). */
Test(reset_attack, a_reaped_childs_usage_does_not_reach_the_next_run)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "resource", NULL), 0); /* no new mapping */
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg);
	struct seen s = {0};
	for (int i = 0; i < 8; i++) {
		char *out = run_seen(sb, &s,
				     "import os, resource\n"
				     "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
				     "print(r.ru_maxrss > 100000, r.ru_utime + r.ru_stime > 0.15)\n"
				     "pid = os.fork()\n"
				     "if pid == 0:\n"
				     "    x = bytearray(200 << 20)\n"
				     "    for k in range(0, len(x), 4096):\n"
				     "        x[k] = 1\n"
				     "    os._exit(0)\n"
				     "os.waitpid(pid, 0)\n");
		cr_expect_str_eq(out, "False False\n", "run %d saw an earlier run's child: %s", i,
				 out);
		free(out);
	}
	seen_free(&s);
	snapcell_sandbox_free(sb);
}

/* Close-on-exec belongs to the descriptor, not to the file a duplicate shares: a run that set
 * it on its stdout left the next run a bit to read. The reset compares fdinfo's flags. */
Test(reset_attack, close_on_exec_of_a_parked_descriptor_does_not_reach_the_next_run)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_preload(cfg, "fcntl", NULL), 0); /* no new mapping */
	expect_never_seen(
		cfg, "import fcntl\nprint([fcntl.fcntl(fd, fcntl.F_GETFD) for fd in (0, 1, 2, 3)])",
		"import fcntl\nfor fd in (0, 1, 2, 3):\n"
		"    fcntl.fcntl(fd, fcntl.F_SETFD, fcntl.FD_CLOEXEC)\n",
		"[0, 0, 0, 0]\n", 0);
}

/* A read-only mapping's pages that are the process's own (a library's relocations, made
 * read-only after the loader wrote them: RELRO) go back to the file's bytes when dropped with
 * MADV_DONTNEED, and a dropped page is no written one: the reset found nothing, and the next
 * run called through _socket's unrelocated GOT. _socket where it is a shared library (built
 * into Debian's python3), else _json, which both preload. */
Test(reset_attack, a_dropped_page_of_a_read_only_mapping_does_not_reach_the_next_run)
{
	struct snapcell_config *cfg = with_ctypes();
	cr_assert_eq(snapcell_config_add_preload(cfg, "json", NULL), 0);
	expect_never_seen(
		cfg,
		"import _socket, json\n"
		"print(bool(_socket.gethostname()), json.dumps({'a': [1, 'x']}) == '{\"a\": [1, "
		"\"x\"]}')\n",
		"import _socket, _json, ctypes\n"
		"lib = _socket if hasattr(_socket, '__file__') else _json\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"libc.dlopen.restype = ctypes.c_void_p\n"
		"h = libc.dlopen(lib.__file__.encode(), 2 | 4)\n" /* NOW | NOLOAD */
		"base = ctypes.c_uint64.from_address(h).value\n"
		"phoff = ctypes.c_uint64.from_address(base + 32).value\n"
		"phnum = ctypes.c_uint16.from_address(base + 56).value\n"
		"for k in range(phnum):\n"
		"    ph = base + phoff + 56 * k\n"
		"    if ctypes.c_uint32.from_address(ph).value == 0x6474e552:\n"
		"        start = base + ctypes.c_uint64.from_address(ph + 16).value\n"
		"        end = start + ctypes.c_uint64.from_address(ph + 40).value\n"
		"        start &= ~4095\n"
		"        end = (end + 4095) & ~4095\n"
		"        assert libc.madvise(ctypes.c_void_p(start), end - start, 4) == 0\n",
		"True True\n", 3);
}

/* The main thread exits alone (SYS_exit) while another thread claims the run's end and goes on:
 * a group whose leader is a zombie cannot be seized or stopped, so the reset gives up on it
 * (EPERM from the seize, or the bounded wait for the stop) and discards the cell. */
Test(reset_attack, a_cell_whose_main_thread_exited_is_discarded, .timeout = 120)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(with_ctypes());
	for (int i = 0; i < 3; i++) {
		struct snapcell_result *res =
			test_run(sb, "import ctypes, os, struct, threading, time\n"
				     "def on():\n"
				     "    time.sleep(0.05)\n"
				     "    os.write(3, struct.pack('<I', 33) + b'D' + bytes(32))\n"
				     "    while True:\n"
				     "        time.sleep(1)\n"
				     "threading.Thread(target=on).start()\n"
				     "ctypes.CDLL(None).syscall(60, 0)\n");
		snapcell_result_free(res);
		expect_output(sb, "print('next')", "next\n");
	}
	snapcell_sandbox_free(sb);
}

/* What the template reads from a used cell stays in its memory, which every cell forked after
 * it inherits: the names of the files a run left in /tmp, read (and freed, not zeroed) by the
 * check that /tmp is empty, were in later cells' heap for any run to find. */
Test(reset_attack, names_a_run_left_in_tmp_do_not_reach_later_cells)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(with_ctypes());
	/* 'SCLEAKMARK_' and a tail, spelled in hex so no code holds them. */
	static const char plant[] =
		"import os\n"
		"tag = bytes.fromhex('53434c45414b4d41524b5f').decode() + '%d'\n"
		"for k in range(40):\n"
		"    open('/tmp/pad%%03d' %% k, 'w').close()\n"
		"open('/tmp/' + tag + 'x' * 40, 'w').close()\n"
		"for k in range(40, 80):\n"
		"    open('/tmp/pad%%03d' %% k, 'w').close()\n";
	static const char scan[] = "import ctypes\n"
				   "libc = ctypes.CDLL(None)\n"
				   "class MI(ctypes.Structure):\n"
				   "    _fields_ = [(n, ctypes.c_size_t) for n in 'ab cd ef gh ij "
				   "kl mn op qr st'.split()]\n"
				   "libc.mallinfo2.restype = MI\n"
				   "libc.sbrk.restype = ctypes.c_void_p\n"
				   "arena = libc.mallinfo2().ab\n"
				   "heap = ctypes.string_at(libc.sbrk(0) - arena, arena)\n"
				   "print(bytes.fromhex('53434c45414b4d41524b5f') in heap)\n";
	int found = 0;
	for (int i = 0; i < 6; i++) {
		char *code = NULL;
		cr_assert_gt(asprintf(&code, plant, i), 0);
		struct snapcell_result *res = test_run(sb, code);
		free(code);
		snapcell_result_free(res);
		for (int k = 0; k < 3; k++) {
			res = test_run(sb, scan);
			cr_expect_eq(res->status, SNAPCELL_STATUS_OK, "%s", res->stderr_buf);
			found += strcmp(res->stdout_buf, "True\n") == 0;
			snapcell_result_free(res);
		}
	}
	cr_expect_eq(found, 0, "%d runs found names an earlier run left in /tmp", found);
	snapcell_sandbox_free(sb);
}

/* A second pass. Some attacks below found holes (docs/security.md, "Reset in place", says
 * which); the others found none and stay as guards. Which cell ran, by what a run cannot
 * change of it: the device of its /tmp and /output mounts and the inodes of its pipes and
 * frame socket (no times: some attacks below change them). */
#define CELL_ID                                                                                    \
	"import os as _os\n"                                                                       \
	"print('@', *[(s.st_dev, s.st_ino) for s in "                                              \
	"[_os.stat('/tmp'), _os.stat('/output')] + [_os.fstat(fd) for fd in (1, 2, 3)]])\n"

/* Runs code then CELL_ID; the output before the identity (malloc'd); *again when the cell ran
 * the run before (whose identity was *last, updated). */
static char *run_in(struct snapcell_sandbox *sb, const char *code, char **last, bool *again)
{
	char *out, *at;
	snapcell_result_free(test_run_identified(sb, code, CELL_ID, &out, &at));
	*again = *last && strcmp(*last, at) == 0;
	free(*last);
	*last = at;
	return out;
}

/* A plant, then two looks (with reuse, back-to-back runs take turns between two cells, so one
 * of the two is usually in the plant's cell): each look must print clean. At least min_reused
 * looks must have been in a cell a plant ran in (0: the plant discards). */
static void plant_then_look(struct snapcell_config *cfg, const char *plant, const char *look,
			    const char *clean, int min_reused)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg); /* frees cfg */
	char *last = NULL, *planted[10] = {0};
	int reused = 0;
	for (int i = 0; i < 10; i++) {
		bool again;
		free(run_in(sb, plant, &last, &again));
		planted[i] = strdup(last);
		for (int k = 0; k < 2; k++) {
			char *out = run_in(sb, look, &last, &again);
			bool in_plant_cell = false;
			for (int j = 0; j <= i; j++)
				in_plant_cell |= strcmp(planted[j], last) == 0;
			cr_expect_str_eq(out, clean, "look %d.%d (%s) saw the plant: %s", i, k,
					 in_plant_cell ? "a plant's cell" : "another cell", out);
			reused += in_plant_cell;
			free(out);
		}
	}
	cr_expect_geq(reused, min_reused, "only %d of 20 looks were in a cell a plant ran in",
		      reused);
	for (int i = 0; i < 10; i++)
		free(planted[i]);
	free(last);
	snapcell_sandbox_free(sb);
}

/* The mode and times of the cell's /tmp and /output (its mount points, which the cell owns):
 * a run could leave any mode, and any 64-bit times, for the next run to read. The reset
 * discards a cell whose /tmp or /output changed in any way (their change time cannot be put
 * back). */
Test(reset_attack, modes_and_times_of_tmp_and_output_do_not_reach_the_next_run)
{
	plant_then_look(test_config_new(),
			"import os\n"
			"for d in ('/tmp', '/output'):\n"
			"    fd = os.open(d, os.O_RDONLY)\n"
			"    os.utime(fd, ns=(1234567891, 1987654321))\n"
			"    os.close(fd)\n",
			"import os\n"
			"print([int(os.stat(d).st_mtime_ns == 1987654321 or "
			"os.stat(d).st_atime_ns == 1234567891) for d in ('/tmp', '/output')])\n",
			"[0, 0]\n", 0);
	plant_then_look(test_config_new(),
			"import os\n"
			"fd = os.open('/tmp', os.O_RDONLY)\n"
			"os.fchmod(fd, 0o1770)\n"
			"os.close(fd)\n"
			"os.chmod('/output', 0o700)\n",
			"import os\n"
			"print(oct(os.stat('/tmp').st_mode), oct(os.stat('/output').st_mode))\n",
			"0o41777 0o40755\n", 0);
}

/* A file left in the cell's /dev/shm. */
Test(reset_attack, a_file_in_dev_shm_does_not_reach_the_next_run)
{
	plant_then_look(test_config_new(), "open('/dev/shm/planted', 'w').write('x')\n",
			"import os\nprint(os.listdir('/dev/shm'))\n", "[]\n", 0);
}

/* A child made with CLONE_VM that does nothing but exit takes no fault and, most often, no
 * clock tick: the reaped-children figures of /proc/PID/stat stay as they were. It leaves the
 * cell's peak resident size (its memory's) in RUSAGE_CHILDREN for the next run to read, and
 * each one moves the pid namespace's counter on, which the next run's children's pids show. */
static const char clone_vm_children[] =
	"import ctypes, os\n"
	"x = b'\\1' * (200 << 20)\n"
	"del x\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"stack = ctypes.create_string_buffer(65536)\n"
	"top = ctypes.c_void_p(ctypes.addressof(stack) + 65536 - 64)\n"
	"fn = ctypes.cast(libc._exit, ctypes.c_void_p)\n"
	"libc.clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]\n"
	"for _ in range(20):\n"
	"    pid = libc.clone(fn, top, 0x100 | 0x4000 | 17, None)\n" /* VM VFORK SIGCHLD */
	"    assert pid > 0, ctypes.get_errno()\n"
	"    os.waitpid(pid, 0)\n";

Test(reset_attack, a_reaped_child_that_took_no_fault_does_not_reach_the_next_run)
{
	struct snapcell_config *cfg = with_ctypes();
	cr_assert_eq(snapcell_config_add_preload(cfg, "resource", NULL), 0);
	plant_then_look(cfg, clone_vm_children,
			"import os, resource\n"
			"print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss > 100000)\n"
			"pid = os.fork()\n"
			"if pid == 0:\n"
			"    os._exit(0)\n"
			"os.waitpid(pid, 0)\n"
			"print(pid)\n",
			"False\n2\n", 0);
}

/* Threads a run started and joined move the pid namespace's counter on too: the next run's
 * threads' ids would count them. */
Test(reset_attack, threads_a_run_joined_do_not_reach_the_next_run)
{
	plant_then_look(
		test_config_new(),
		"import threading\n"
		"for _ in range(20):\n"
		"    t = threading.Thread(target=lambda: None)\n"
		"    t.start()\n"
		"    t.join()\n",
		"import threading\n"
		"ids = []\n"
		"t = threading.Thread(target=lambda: ids.append(threading.get_native_id()))\n"
		"t.start()\n"
		"t.join()\n"
		"print(ids)\n",
		"[2]\n", 0);
}

/* After a DONE it forged, a run goes on writing to its stdout and stderr and frames: none of it
 * may reach the next run's result. */
Test(reset_attack, output_after_a_forged_done_does_not_reach_the_next_run, .timeout = 120)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(with_ctypes());
	for (int i = 0; i < 6; i++) {
		struct snapcell_result *res =
			test_run(sb, "import os, struct, time\n"
				     "os.write(3, struct.pack('<I', 33) + b'D' + bytes(32))\n"
				     "end = time.monotonic() + 0.3\n"
				     "while time.monotonic() < end:\n"
				     "    os.write(1, b'LEAK1\\n')\n"
				     "    os.write(2, b'LEAK2\\n')\n"
				     "    os.write(3, struct.pack('<I', 7) + b'V' + b'LEAK3\\n')\n"
				     "    time.sleep(0.001)\n");
		snapcell_result_free(res);
		for (int k = 0; k < 2; k++) {
			res = test_run(sb, "print('next')");
			cr_expect_eq(res->status, SNAPCELL_STATUS_OK, "%s", res->stderr_buf);
			cr_expect_str_eq(res->stdout_buf, "next\n");
			cr_expect_str_eq(res->stderr_buf, "");
			snapcell_result_free(res);
		}
	}
	snapcell_sandbox_free(sb);
}

/* Descriptors at the numbers the fd check leaves out (SC_CELL_TMP_FD, SC_CELL_UFFD_FD: the
 * parked cell closes them before code runs): closed before the next run all the same. */
Test(reset_attack, descriptors_at_the_numbers_a_cell_closes_do_not_reach_the_next_run)
{
	plant_then_look(test_config_new(),
			"import os\n"
			"r, w = os.pipe()\n"
			"os.write(w, b'planted')\n"
			"os.dup2(r, 5)\n"
			"os.dup2(r, 6)\n"
			"os.close(r)\n"
			"os.close(w)\n",
			"import os\n"
			"seen = []\n"
			"for fd in (5, 6):\n"
			"    try:\n"
			"        seen.append(os.read(fd, 7))\n"
			"    except OSError as e:\n"
			"        seen.append(e.errno)\n"
			"print(seen)\n",
			"[9, 9]\n", 3);
}

/* Files a run makes in /output after the DONE it forged, once the host has found /output empty
 * (and so has no output to collect, which would retire the cell) and before the template stops
 * the cell: they were the next run's, for its code to read and its result to carry. The delay
 * before the files moves on each time to meet that window. */
Test(reset_attack, files_made_in_output_after_a_forged_done_do_not_reach_the_next_run,
     .timeout = 120)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(test_config_new());
	char *last = NULL;
	for (int i = 0; i < 24; i++) {
		char *code = NULL;
		cr_assert_gt(asprintf(&code,
				      CELL_ID
				      "import os, struct, sys, time\n"
				      "sys.stdout.flush()\n"
				      "os.write(3, struct.pack('<I', 33) + b'D' + bytes(32))\n"
				      "time.sleep(%d / 10000)\n"
				      "for k in range(200):\n"
				      "    open('/output/left%%d' %% k, 'w').write('x')\n"
				      "    time.sleep(0.0005)\n",
				      i),
			     0);
		struct snapcell_result *res = test_run(sb, code);
		free(code);
		char *at = strstr(res->stdout_buf, "@ ");
		free(last);
		last = at ? strdup(at) : NULL;
		snapcell_result_free(res);
		bool again;
		char *out = run_in(sb, "import os\nprint(os.listdir('/output'))\n", &last, &again);
		cr_expect_str_eq(out, "[]\n", "run %d saw files an earlier run left: %s", i, out);
		free(out);
	}
	free(last);
	snapcell_sandbox_free(sb);
}

/* Threads made without the C library (clone with CLONE_THREAD, each exiting at once) change
 * nothing /proc/PID/status shows once they are gone (pthread_create sets a handler, which is
 * shown), but move the pid namespace's counter on: the next run's thread ids would count them. */
Test(reset_attack, raw_threads_a_run_made_do_not_reach_the_next_run)
{
	plant_then_look(
		with_ctypes(),
		"import ctypes, time\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"stacks = [ctypes.create_string_buffer(65536) for _ in range(20)]\n"
		"fn = ctypes.cast(libc.syscall, ctypes.c_void_p)\n"
		"libc.clone.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, "
		"ctypes.c_void_p]\n"
		"flags = 0x100 | 0x200 | 0x400 | 0x800 | 0x10000\n" /* VM FS FILES SIGHAND
								       THREAD */
		"for s in stacks:\n"
		"    top = ctypes.c_void_p(ctypes.addressof(s) + 65536 - 64)\n"
		"    assert libc.clone(fn, top, flags, ctypes.c_void_p(60)) > 0\n"
		"time.sleep(0.02)\n",
		"import threading\n"
		"ids = []\n"
		"t = threading.Thread(target=lambda: ids.append(threading.get_native_id()))\n"
		"t.start()\n"
		"t.join()\n"
		"print(ids)\n",
		"[2]\n", 0);
}

/* A parked page moved away with mremap(MREMAP_DONTUNMAP), which leaves its mapping in place,
 * registered but empty, and its bytes in a new mapping of the run's: the page reads as zeros
 * until the reset copies it back, and the new mapping is the run's to be unmapped. */
Test(reset_attack, a_page_moved_out_of_its_mapping_is_put_back)
{
	plant_then_look(test_config_own_page(),
			"import ctypes, json\n"
			"libc = ctypes.CDLL(None, use_errno=True)\n"
			"libc.mremap.restype = ctypes.c_void_p\n"
			"at = libc.mremap(ctypes.c_void_p(json.PAGE), 4096, 4096, 1 | 4, None)\n"
			"assert at not in (None, 2**64 - 1), ctypes.get_errno()\n" /* MAYMOVE
										      DONTUNMAP */
			"assert ctypes.string_at(json.PAGE, 5) == bytes(5)\n"
			"ctypes.memmove(at, b'dirty', 5)\n",
			"import ctypes, json\n"
			"print(ctypes.string_at(json.PAGE, 5))\n",
			"b'clean'\n", 3);
}

/* A run that replaces its process's program (execve of the interpreter, which Landlock lets a
 * cell run) after forging its DONE: the new program has other mappings, so the cell is
 * discarded, and the next run works. (A cell stopped before its execve is rightly reset.) */
Test(reset_attack, a_cell_that_ran_another_program_is_discarded, .timeout = 120)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(test_config_new());
	char *last = NULL;
	for (int i = 0; i < 4; i++) {
		struct snapcell_result *res = test_run(
			sb, CELL_ID "import os, struct, sys\n"
				    "sys.stdout.flush()\n"
				    "os.write(3, struct.pack('<I', 33) + b'D' + bytes(32))\n"
				    "try:\n"
				    "    os.execv(sys.executable, [sys.executable, '-c', "
				    "'import time; time.sleep(3600)'])\n"
				    "except OSError:\n"
				    "    pass\n");
		char *at = strstr(res->stdout_buf, "@ ");
		free(last);
		last = at ? strdup(at) : NULL;
		snapcell_result_free(res);
		bool again;
		char *out = run_in(sb, "print('next')", &last, &again);
		cr_expect_str_eq(out, "next\n", "run %d (%s): %s", i,
				 again ? "same cell" : "another cell", out);
		free(out);
	}
	free(last);
	snapcell_sandbox_free(sb);
}
/* Kernel objects and process settings that would outlive a reset and that the checks do not
 * read (or read only in part): SysV and POSIX IPC, inotify, fanotify, memfd, membarrier, the
 * scheduler's attributes and affinity, I/O priority, nice, memory locks and policy, protection
 * keys, ptrace, queued signals with data, and the prctl settings (child subreaper, THP,
 * timer slack, parent-death signal, machine-check policy, tagged addresses, speculation),
 * personality flags. A reuse cell must be refused each (the reset leaves them to seccomp:
 * docs/security.md); keyctl and its kin kill the cell (isolation's tests). */
Test(reset_attack, state_no_check_reads_cannot_be_made)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(with_ctypes());
	expect_output(
		sb,
		"import ctypes\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"libc.syscall.restype = ctypes.c_long\n"
		"calls = {'shmget': (29, 0, 4096, 0o1600), 'semget': (64, 0, 1, 0o1600),\n"
		"         'msgget': (68, 0, 0o1600), 'mq_open': (240, b'x', 0o100, 0o600, 0),\n"
		"         'inotify_init1': (294, 0), 'fanotify_init': (300, 0, 0),\n"
		"         'memfd_create': (319, b'x', 0), 'membarrier': (324, 0, 0, 0),\n"
		"         'sched_setattr': (314, 0, 0, 0), 'sched_setaffinity': (203, 0, 8, 0),\n"
		"         'ioprio_set': (251, 1, 0, 0), 'setpriority': (141, 0, 0, 1),\n"
		"         'mlock': (149, 0, 4096), 'mlockall': (151, 1), 'set_mempolicy': (238, 0, "
		"0, "
		"0),\n"
		"         'pkey_alloc': (330, 0, 0), 'ptrace': (101, 16, 1),\n"
		"         'rt_sigqueueinfo': (129, 1, 10, 0), 'subreaper': (157, 36, 1),\n"
		"         'thp': (157, 41, 1), 'timerslack': (157, 29, 1000), 'pdeathsig': (157, "
		"1, "
		"9),\n"
		"         'mce': (157, 33, 0), 'tagged': (157, 55, 0), 'spec': (157, 53, 0, 0, "
		"0),\n"
		"         'personality': (135, 0x0040000)}\n"
		"made = []\n"
		"for name, args in calls.items():\n"
		"    args = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]\n"
		"    if libc.syscall(*args) != -1:\n"
		"        made.append(name)\n"
		"print(made)\n",
		"[]\n");
	snapcell_sandbox_free(sb);
}

/* A signal left pending (blocked, raised: a real-time one with its queue) and an alternate
 * signal stack pointing into memory of the run's: the next run must neither take the signal
 * when it unblocks it nor find the stack. */
Test(reset_attack, pending_signals_and_the_signal_stack_do_not_reach_the_next_run)
{
	static const char look[] = "import ctypes, signal\n"
				   "got = []\n"
				   "for s in (signal.SIGUSR1, signal.SIGRTMIN + 3):\n"
				   "    signal.signal(s, lambda n, f: got.append(n))\n"
				   "signal.pthread_sigmask(signal.SIG_SETMASK, [])\n"
				   "old = (ctypes.c_uint64 * 3)()\n"
				   "ctypes.CDLL(None).sigaltstack(None, old)\n"
				   "print(got, old[1] & 2 == 2)\n"; /* SS_DISABLE */
	plant_then_look(
		with_ctypes(),
		"import os, signal\n"
		"signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1, signal.SIGRTMIN + 3])\n"
		"os.kill(os.getpid(), signal.SIGUSR1)\n"
		"for _ in range(3):\n"
		"    os.kill(os.getpid(), signal.SIGRTMIN + 3)\n",
		look, "[] True\n", 0);
	plant_then_look(with_ctypes(),
			"import ctypes\n"
			"buf = ctypes.create_string_buffer(65536)\n"
			"ss = (ctypes.c_uint64 * 3)(ctypes.addressof(buf), 0, 65536)\n"
			"assert ctypes.CDLL(None).sigaltstack(ss, None) == 0\n",
			look, "[] True\n", 3);
}

/* /tmp is a tmpfs of the cell's, which numbers its files in order: files a run made and removed
 * there (by name, or with no name through O_TMPFILE) moved the count on, and the next run's
 * first file's inode number told how many there were (3, 4, 5 in three runs of one cell).
 * Made by name, they change /tmp, which discards the cell; O_TMPFILE is refused in a reuse
 * cell (EOPNOTSUPP, on which tempfile falls back to a name). */
Test(reset_attack, files_a_run_made_and_removed_in_tmp_do_not_reach_the_next_run)
{
	static const char look[] =
		"import os\n"
		"print(os.stat(os.open('/tmp/f', os.O_CREAT | os.O_RDWR)).st_ino)\n"
		"os.unlink('/tmp/f')\n";
	struct snapcell_sandbox *sb = reuse_sandbox_with(test_config_new());
	struct snapcell_result *res = test_run(sb, look);
	char *fresh = strdup(res->stdout_buf); /* a fresh cell's first file */
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	plant_then_look(test_config_new(),
			"import os\n"
			"for k in range(5):\n"
			"    open('/tmp/f%d' % k, 'w').close()\n"
			"    os.unlink('/tmp/f%d' % k)\n",
			look, fresh, 0);
	plant_then_look(test_config_new(),
			"import errno, os\n"
			"try:\n"
			"    os.close(os.open('/tmp', os.O_TMPFILE | os.O_RDWR))\n"
			"except OSError as e:\n"
			"    assert e.errno == errno.EOPNOTSUPP, e\n",
			look, fresh, 3);
	free(fresh);
	sb = reuse_sandbox_with(test_config_new()); /* tempfile falls back to a name */
	expect_output(sb,
		      "import tempfile\n"
		      "with tempfile.TemporaryFile() as f:\n"
		      "    f.write(b'x')\n"
		      "    f.seek(0)\n"
		      "    print(f.read())\n",
		      "b'x'\n");
	snapcell_sandbox_free(sb);
}

/* The first page of a library's writable mapping of its file (_socket where it is a shared
 * library, else _json), as start: the loader relocated the pointers in it, so that page is
 * the process's own, no longer the file's. */
#define LIB_DATA_PAGE                                                                              \
	"import _socket, _json, ctypes\n"                                                          \
	"lib = _socket if hasattr(_socket, '__file__') else _json\n"                               \
	"libc = ctypes.CDLL(None, use_errno=True)\n"                                               \
	"libc.dlopen.restype = ctypes.c_void_p\n"                                                  \
	"h = libc.dlopen(lib.__file__.encode(), 2 | 4)\n" /* NOW | NOLOAD */                       \
	"base = ctypes.c_uint64.from_address(h).value\n"                                           \
	"phoff = ctypes.c_uint64.from_address(base + 32).value\n"                                  \
	"phnum = ctypes.c_uint16.from_address(base + 56).value\n"                                  \
	"ph = [base + phoff + 56 * k for k in range(phnum)]\n"                                     \
	"u32 = lambda a: ctypes.c_uint32.from_address(a).value\n"                                  \
	"u64 = lambda a: ctypes.c_uint64.from_address(a).value\n"                                  \
	"load = [p for p in ph if u32(p) == 1]\n"                                                  \
	"rw = [p for p in load if u32(p + 4) & 2][0]\n"                                            \
	"relro = [u64(p + 16) + u64(p + 40) for p in ph if u32(p) == 0x6474e552]\n"                \
	"start = base + (relro[0] + 4095 & ~4095 if relro else u64(rw + 16) & ~4095)\n"            \
	"assert start < base + u64(rw + 16) + u64(rw + 32), 'no page of the file left'\n"          \
	"high = base + max(u64(p + 16) + u64(p + 40) for p in load)\n"                             \
	"words = (ctypes.c_uint64 * 512).from_address(start)\n"                                    \
	"pointers = sum(base <= w < high for w in words)\n"

/* A page of a writable mapping of a file that was the process's own (relocated pointers),
 * dropped with MADV_DONTNEED while protected, reads as the file's bytes again, which a
 * protection marker may keep protected: present, not written, the reset would find nothing to
 * copy and the next run read the library's unrelocated pointers. Every run first checks that
 * it sees them relocated, then drops the page and reads it back. */
Test(reset_attack, a_dropped_then_read_page_of_a_writable_file_mapping_does_not_reach_the_next_run)
{
	struct snapcell_config *cfg = with_ctypes();
	cr_assert_eq(snapcell_config_add_preload(cfg, "json", NULL), 0);
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg); /* frees cfg */
	/* a run that read unrelocated pointers prints False */
	expect_every_run(sb,
			 LIB_DATA_PAGE "print(pointers > 0)\n"
				       "libc.madvise(ctypes.c_void_p(start), 4096, 4)\n"
				       "x = words[0]\n",
			 "True\n", 16, 8);
}

/* What a run can do to the pages of the hot set (guest/reset.c reset_hot: left unprotected
 * after a reset, copied back all the same) to keep a change past the reset: drop a page and
 * read it back (the zero page, or the file's page), make a page read-only and writable again
 * (a split and a merge of the mapping), collapse the region into a huge page, page it out.
 * Every run first checks that it sees the parked bytes (7s, not the zero page's), then
 * writes every page (so they are hot) and plants. */
Test(reset_attack, changes_to_hot_pages_do_not_reach_the_next_run, .timeout = 120)
{
	struct snapcell_config *cfg = with_ctypes();
	cr_assert_eq(snapcell_config_set_warmup(
			     cfg, "import json\njson.HOT = bytearray(b'\\7') * (6 << 20)", NULL),
		     0);
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg); /* frees cfg */
	static const char code[] =
		"import ctypes, json\n"
		"b = json.HOT\n"
		"print(b.count(7) == len(b))\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"base = ctypes.addressof((ctypes.c_char * len(b)).from_buffer(b))\n"
		"first = base + 4095 & ~4095\n"
		"huge = base + (2 << 20) - 1 & ~((2 << 20) - 1)\n"
		"for i in range(first - base, len(b), 4096):\n"
		"    b[i] = 1\n"
		"def advise(at, n, how):\n"
		"    return libc.madvise(ctypes.c_void_p(at), n, how) == 0 or ctypes.get_errno()\n"
		"print(advise(first + 4096, 4096, 4))\n" /* MADV_DONTNEED, then read back */
		"x = b[first - base + 4096]\n"
		"print(libc.mprotect(ctypes.c_void_p(first + 8192), 4096, 1) == 0)\n"
		"print(libc.mprotect(ctypes.c_void_p(first + 8192), 4096, 3) == 0)\n"
		"b[first - base + 8192] = 2\n"
		"advise(huge, 2 << 20, 25)\n" /* MADV_COLLAPSE: where THP is on */
		"b[huge - base + 12345] = 3\n"
		"advise(huge + (2 << 20), 1 << 20, 21)\n" /* MADV_PAGEOUT */
		"b[huge - base + (2 << 20) + 4096] = 4\n";
	expect_every_run(sb, code, "True\nTrue\nTrue\nTrue\n", 16, 8);
}

/* MADV_FREE leaves a page present to be zeroed at the kernel's leisure, after a reset whose
 * copy-back may not see it: the reset checks smaps_rollup's LazyFree only when the cell parks
 * (guest/reset.c, lazy_free_shut), as a reuse cell's filter refuses every way to ask for it.
 * Each way a run can ask in its own thread, in runs of reset cells too: madvise by its
 * number, with the advice's high bits set (the kernel reads an int), process_madvise on
 * itself with a vector of ranges (PIDFD_SELF_THREAD and _GROUP), io_uring (its setup, for
 * IORING_OP_MADVISE). A cell has no /proc/self/smaps_rollup to count LazyFree itself: each
 * call must be refused. */
Test(reset_attack, no_way_to_free_lazily_in_one_process_works_with_reuse)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(with_ctypes());
	static const char code[] =
		"import ctypes, mmap\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"l = ctypes.c_long\n"
		"def call(*a):\n"
		"    rc = libc.syscall(*map(l, a))\n"
		"    return ctypes.get_errno() if rc == -1 else rc\n"
		"m = mmap.mmap(-1, 8192, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)\n"
		"m[0] = m[4096] = 1\n"
		"p = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
		"r = [call(28, p, 8192, advice) for advice in (8, 1 << 32 | 8, -1 << 32 | 8)]\n"
		"iov = (ctypes.c_size_t * 4)(p, 4096, p + 4096, 4096)\n"
		"for pidfd in (-10000, -20000):\n"
		"    r.append(call(440, pidfd, ctypes.addressof(iov), 2, 8, 0))\n"
		"params = ctypes.create_string_buffer(120)\n"
		"r.append(call(425, 8, ctypes.addressof(params)))\n"
		"print(*r, m[0], m[4096])\n";
	expect_every_run(sb, code, "22 22 22 38 38 38 1 1\n", 6, 3);
}

/* The same from children that share the run's memory (clone with CLONE_VM, outside any
 * thread group): a filter is inherited by every child, so madvise(MADV_FREE) is refused there
 * too; by the x32 number (0x40000000 | 28) and by int 0x80 (i386's 219, on a page below 4 GiB)
 * the child is killed (SIGSYS: an architecture the filter does not allow); a thread and a
 * forked child are refused as well. A run that made a thread or a child is not reset after
 * it, but its cell parked under the same filter. */
Test(reset_attack, no_child_that_shares_memory_frees_lazily_with_reuse)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(with_ctypes());
	static const char code[] =
		"import ctypes, mmap, os, struct, threading\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"low = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | 0x40\n" /* MAP_32BIT */
		"m = mmap.mmap(-1, 8192, flags=low)\n"
		"m[0] = m[4096] = 1\n"
		"p = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
		"assert p < 1 << 32\n"
		"text = mmap.mmap(-1, 4096, flags=low,\n"
		"                 prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
		/* mov eax, nr; mov ebx, p; mov rdi, rbx; mov esi, 8192; mov ecx, esi; mov edx, 8
		 * (MADV_FREE); the trap; then exit(-eax) */
		"def child(nr, trap):\n"
		"    args = b'\\x48\\x89\\xdf' + b'\\xbe\\x00\\x20\\x00\\x00\\x89\\xf1'\n"
		"    args += b'\\xba\\x08\\x00\\x00\\x00'\n"
		"    end = b'\\x89\\xc7\\xf7\\xdf\\xb8\\x3c\\x00\\x00\\x00\\x0f\\x05'\n"
		"    return (b'\\xb8' + struct.pack('<I', nr) + b'\\xbb' + struct.pack('<I', p) +\n"
		"            args + trap + end)\n"
		"stack = ctypes.create_string_buffer(1 << 16)\n"
		"fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)\n"
		"r = []\n"
		"for nr, trap in ((28, b'\\x0f\\x05'), (0x40000000 | 28, b'\\x0f\\x05'),\n"
		"                 (219, b'\\xcd\\x80')):\n"
		"    code = child(nr, trap)\n"
		"    text[:len(code)] = code\n"
		"    top = ctypes.c_void_p(ctypes.addressof(stack) + len(stack) - 64)\n"
		"    pid = libc.clone(fn(ctypes.addressof(ctypes.c_char.from_buffer(text))), top,\n"
		"                     0x100 | 17, None)\n" /* CLONE_VM | SIGCHLD */
		"    r.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
		"t = threading.Thread(target=lambda: r.append(\n"
		"    libc.madvise(ctypes.c_void_p(p), 8192, 8) and ctypes.get_errno()))\n"
		"t.start()\n"
		"t.join()\n"
		"pid = os.fork()\n"
		"if pid == 0:\n"
		"    libc.madvise(ctypes.c_void_p(p), 8192, 8)\n"
		"    os._exit(ctypes.get_errno())\n"
		"r.append(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n"
		"print(*r, m[0], m[4096])\n";
	for (int i = 0; i < 2; i++) {
		struct snapcell_result *res = NULL;
		char *out = NULL, *at = NULL;
		res = test_run_identified(sb, code, TEST_CELL_IDENTITY, &out, &at);
		cr_expect_str_eq(out, "22 -31 -31 22 22 1 1\n", "run %d: %s (%s)", i, out,
				 res->stderr_buf);
		snapcell_result_free(res);
		free(out);
		free(at);
	}
	snapcell_sandbox_free(sb);
}

/* The reset no longer reads the cell's namespaces (guest/reset.c read_misc): that rests on the
 * cell's filter refusing every way into another, in a cell reset before as in a new one. */
Test(reset_attack, a_reset_cell_cannot_enter_other_namespaces)
{
	struct snapcell_sandbox *sb = reuse_sandbox_with(with_ctypes());
	static const char code[] =
		"import ctypes, errno, os\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"def err(rc):\n"
		"    return errno.errorcode.get(ctypes.get_errno(), '?') if rc < 0 else 'done'\n"
		"flags = (0x20000, 0x10000000, 0x20000000, 0x40000000, 0x8000000, 0x4000000,\n"
		"         0x2000000, 0x80)\n"
		"print([err(libc.unshare(f)) for f in flags])\n"
		"print([err(libc.syscall(56, f | 17, 0, 0, 0, 0)) for f in flags])\n"
		"args = (ctypes.c_uint64 * 11)(0x10000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0)\n"
		"print(err(libc.syscall(435, args, 88)))\n"
		"fd = os.open('/dev/null', os.O_RDONLY)\n"
		"print(err(libc.setns(fd, 0)), err(libc.setns(-1, 0)))\n"
		"os.close(fd)\n";
	static const char expected[] = "['EPERM', 'EPERM', 'EPERM', 'EPERM', 'EPERM', 'EPERM', "
				       "'EPERM', 'EPERM']\n"
				       "['EPERM', 'EPERM', 'EPERM', 'EPERM', 'EPERM', 'EPERM', "
				       "'EPERM', 'EPERM']\n"
				       "ENOSYS\n"
				       "EPERM EPERM\n";
	expect_every_run(sb, code, expected, 8, 3);
}

/* A classic BPF filter attached to the frame socket (SO_ATTACH_FILTER, which the policy lets
 * any cell set) outlives a reset, and any run reads it back whole (SO_GET_FILTER): up to 4096
 * instructions of the run's choosing, 16 KiB of them free, for the next user. The reset
 * compared the option with a 32-byte buffer, which SO_GET_FILTER takes as a count of
 * 8-byte instructions: a longer filter answered EINVAL, as no filter does (unseen), and one
 * of 5 to 32 instructions was copied whole past the template's buffer. The look prints the
 * count of the filter's instructions its frame socket has (0: none). */
#define ATTACH_FILTER(n)                                                                           \
	"import ctypes\n"                                                                          \
	"libc = ctypes.CDLL(None, use_errno=True)\n"                                               \
	"class Insn(ctypes.Structure):\n"                                                          \
	"    _fields_ = [('code', ctypes.c_uint16), ('jt', ctypes.c_uint8),\n"                     \
	"                ('jf', ctypes.c_uint8), ('k', ctypes.c_uint32)]\n"                        \
	"class Prog(ctypes.Structure):\n"                                                          \
	"    _fields_ = [('len', ctypes.c_uint16), ('filter', ctypes.POINTER(Insn))]\n"            \
	"insns = (Insn * " #n ")(*[Insn(0, 0, 0, 0x5ec7e7) for _ in range(" #n " - 1)],\n"         \
	"                        Insn(6, 0, 0, 0xffffffff))\n" /* ld #k...; ret #-1 */             \
	"prog = Prog(" #n ", insns)\n"                                                             \
	"assert libc.setsockopt(3, 1, 26, ctypes.byref(prog), ctypes.sizeof(prog)) == 0, \\\n"     \
	"    ctypes.get_errno()\n"

static const char filter_count[] = "import ctypes\n"
				   "libc = ctypes.CDLL(None)\n"
				   "n = ctypes.c_uint(0)\n"
				   "libc.getsockopt(3, 1, 26, None, ctypes.byref(n))\n"
				   "print(n.value)\n";

Test(reset_attack, a_filter_on_the_frame_socket_does_not_reach_the_next_run, .timeout = 120)
{
	plant_then_look(with_ctypes(), ATTACH_FILTER(40), filter_count, "0\n", 0);
	plant_then_look(with_ctypes(), ATTACH_FILTER(16), filter_count, "0\n", 0);
	plant_then_look(with_ctypes(), ATTACH_FILTER(2), filter_count, "0\n", 0);
}

/* A clone that fails after the kernel took its pid number (CLONE_PIDFD, the pidfd's address
 * unwritable: EFAULT) leaves no child, no thread and no CPU time, yet moves the pid
 * namespace's counter on, which the next run's first thread's id would show (2 in a fresh
 * cell). */
Test(reset_attack, pids_taken_by_failed_clones_do_not_reach_the_next_run)
{
	plant_then_look(
		with_ctypes(),
		"import ctypes\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"l = ctypes.c_long\n"
		"r = {libc.syscall(l(56), l(0x1000 | 17), l(0), l(8), l(0), l(0)) == -1 and\n"
		"     ctypes.get_errno() for _ in range(20)}\n" /* CLONE_PIDFD */
		"print(r)\n",
		"import threading\n"
		"ids = []\n"
		"t = threading.Thread(target=lambda: ids.append(threading.get_native_id()))\n"
		"t.start()\n"
		"t.join()\n"
		"print(ids)\n",
		"[2]\n", 0);
}

/* A POSIX timer made and deleted leaves nothing in /proc/PID/timers, yet the process's count
 * of timers made goes on: the next run's first timer had the id the earlier runs' count gave
 * it (0 in a fresh cell). A reuse cell's filter refuses timer_create (EINVAL): the look finds
 * a fresh cell's id or that refusal. */
Test(reset_attack, ids_of_timers_a_run_made_do_not_reach_the_next_run)
{
	static const char make[] = "import ctypes\n"
				   "libc = ctypes.CDLL(None, use_errno=True)\n"
				   "l = ctypes.c_long\n"
				   "def make():\n"
				   "    t = ctypes.c_int(-1)\n"
				   "    if libc.syscall(l(222), l(1), None, ctypes.byref(t)) < 0:\n"
				   "        return 'E%d' % ctypes.get_errno()\n"
				   "    libc.syscall(l(226), l(t.value))\n"
				   "    return t.value\n";
	char plant[512], look[512];
	snprintf(plant, sizeof(plant), "%sfor _ in range(20):\n    make()\n", make);
	snprintf(look, sizeof(look), "%sr = make()\nprint('fresh' if r in (0, 'E22') else r)\n",
		 make);
	plant_then_look(with_ctypes(), plant, look, "fresh\n", 0);
}

/* Pages of a parked read-only anonymous mapping that no one touched: a run that reads one maps
 * the zero page there, which is no write, and mincore showed the next run which pages the run
 * before it had read. */
Test(reset_attack, pages_a_run_read_in_a_read_only_mapping_do_not_reach_the_next_run)
{
	struct snapcell_config *cfg = with_ctypes();
	cr_assert_eq(
		snapcell_config_set_warmup(
			cfg,
			"import ctypes, json\n"
			"libc = ctypes.CDLL(None)\n"
			"libc.mmap.restype = ctypes.c_void_p\n"
			"json.PAGE = libc.mmap(None, 16 * 4096, 1, 0x22, -1, 0)\n" /* READ;
											  PRIVATE
											  | ANON */
			"assert json.PAGE not in (None, 2**64 - 1)\n",
			NULL),
		0);
	plant_then_look(
		cfg,
		"import ctypes, json\n"
		"for k in (1, 3, 5):\n"
		"    ctypes.string_at(json.PAGE + k * 4096, 1)\n",
		"import ctypes, json\n"
		"v = ctypes.create_string_buffer(16)\n"
		"assert ctypes.CDLL(None).mincore(ctypes.c_void_p(json.PAGE), 16 * 4096, v) == 0\n"
		"print(sum(b & 1 for b in v.raw))\n",
		"0\n", 0);
}

/* Children the kernel reaps by itself (SIGCHLD ignored, or SA_NOCLDWAIT) add nothing to their
 * parent's RUSAGE_CHILDREN nor to its /proc/PID/stat, yet each took a pid number. */
Test(reset_attack, children_reaped_by_the_kernel_do_not_reach_the_next_run)
{
	plant_then_look(
		test_config_new(),
		"import os, signal, time\n"
		"signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
		"for _ in range(20):\n"
		"    if os.fork() == 0:\n"
		"        os._exit(0)\n"
		"time.sleep(0.05)\n"
		"signal.signal(signal.SIGCHLD, signal.SIG_DFL)\n",
		"import threading\n"
		"ids = []\n"
		"t = threading.Thread(target=lambda: ids.append(threading.get_native_id()))\n"
		"t.start()\n"
		"t.join()\n"
		"print(ids)\n",
		"[2]\n", 0);
}

/* The reset asks the kernel for a file's pages only in ranges that map a file (reset.c
 * restore_memory): a file's page moved over a parked anonymous page (mremap with
 * MREMAP_FIXED, the bytes of a library's file) makes its mapping a file's in
 * /proc/PID/maps, which discards the cell. */
Test(reset_attack, a_files_page_moved_into_an_anonymous_mapping_does_not_reach_the_next_run)
{
	plant_then_look(test_config_own_page(),
			"import ctypes, json, os\n"
			"libc = ctypes.CDLL(None, use_errno=True)\n"
			"libc.mmap.restype = libc.mremap.restype = ctypes.c_void_p\n"
			"fd = os.open(os.__file__, os.O_RDONLY)\n"
			"m = libc.mmap(None, 4096, 3, 2, fd, 0)\n" /* RW, MAP_PRIVATE */
			"os.close(fd)\n"
			"at = libc.mremap(ctypes.c_void_p(m), 4096, 4096, 1 | 2,\n"
			"                 ctypes.c_void_p(json.PAGE))\n" /* MAYMOVE | FIXED */
			"assert at == json.PAGE, ctypes.get_errno()\n",
			"import ctypes, json\n"
			"print(ctypes.string_at(json.PAGE, 5))\n",
			"b'clean'\n", 0);
}

/* random's global generator is reseeded through _random's own seed before each run of a reset
 * cell (prelude.reseed); what a run replaces or patches of it is memory, which the reset puts
 * back: a generator of a known seed put in random._inst, random.seed made a no-op, the C
 * type's seed called with a constant. The look's draw must not be the known seed's. */
Test(reset_attack, a_generator_a_run_planted_in_random_does_not_reach_the_next_run)
{
	plant_then_look(test_config_new(),
			"import random, _random\n"
			"random.seed = lambda *a, **k: None\n"
			"random._inst.seed(1)\n"
			"random._inst = random.Random(1)\n"
			"random.random = random._inst.random\n"
			"random._inst.gauss_next = 0.5\n",
			"import random\n"
			"print(random.random() == random.Random(1).random(), random.gauss(0, 1) == "
			"0.5)\n",
			"False False\n", 3);
}

/* The mappings are compared without a private file mapping's path (reset.c map_query_named):
 * its device, inode and offset name its pages. The same file mapped again over a parked
 * mapping of it, at the same place, offset and permissions, has every compared field as
 * parked, but its pages are the file's again: over a library's relocated read-only pages
 * (RELRO: here _json's (a library in every interpreter of the matrix, which the template's warm-up
 * loads), whose .dynamic the loader relocated), the next run would read unrelocated pointers. Only
 * the page scans see it, each alone enough (the test fails with all three off): the new mapping is
 * not registered for write-protection (PM_SCAN_CHECK_WPASYNC), the pages that were the process's
 * own are the file's again, and a page of it read since shows as written. The cell is discarded. */
Test(reset_attack, a_librarys_file_mapped_again_in_place_does_not_reach_the_next_run)
{
	static const char dynamic[] =
		"import ctypes, struct, _json\n"
		"class LinkMap(ctypes.Structure):\n"
		"    _fields_ = [('addr', ctypes.c_size_t), ('name', ctypes.c_char_p),\n"
		"                ('ld', ctypes.c_size_t)]\n"
		"lm = ctypes.cast(ctypes.CDLL(_json.__file__)._handle,\n"
		"                 ctypes.POINTER(LinkMap))[0]\n";
	char plant[2048], look[1024];
	snprintf(
		plant, sizeof(plant),
		"%s"
		"import os\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"libc.mmap.restype = ctypes.c_void_p\n"
		"libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,\n"
		"                      ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
		"elf = open(_json.__file__, 'rb').read()\n"
		"phoff, = struct.unpack_from('<Q', elf, 0x20)\n"
		"size, n = struct.unpack_from('<HH', elf, 0x36)\n"
		"for i in range(n):\n"
		"    kind, _, off, va, _, _, mem, _ = struct.unpack_from('<IIQQQQQQ', elf,\n"
		"                                                      phoff + i * size)\n"
		"    if kind == 0x6474e552:\n" /* PT_GNU_RELRO */
		"        start, end = va & ~4095, (va + mem) & ~4095\n"
		"        offset = off & ~4095\n"
		"fd = os.open(_json.__file__, os.O_RDONLY)\n"
		"at = libc.mmap(lm.addr + start, end - start, 1, 0x12, fd, offset)\n" /* PRIVATE|FIXED
										       */
		"os.close(fd)\n"
		"assert at == lm.addr + start, ctypes.get_errno()\n",
		dynamic);
	/* the .dynamic entry DT_STRTAB: an address in the library where relocated */
	snprintf(look, sizeof(look),
		 "%s"
		 "at = lm.ld\n"
		 "while struct.unpack('<q', ctypes.string_at(at, 8))[0] not in (0, 5):\n"
		 "    at += 16\n"
		 "tag, value = struct.unpack('<qQ', ctypes.string_at(at, 16))\n"
		 "print(tag == 5 and value > lm.addr)\n",
		 dynamic);
	plant_then_look(with_ctypes(), plant, look, "True\n", 0);
}

/* A parked page moved away whole (mremap) and back to its place: its mapping is as parked in
 * every field the reset compares (range, permissions, no name), but a move drops the
 * mapping's registration for write-protection (the template's userfaultfd has no remap
 * events) and the page's protection. The reset's scan refuses a mapping no longer registered
 * (PM_SCAN_CHECK_WPASYNC): the cell is discarded. Without that, the page, unprotected, is one
 * the scan reports written, and is copied back (checked: the cells are then reused, clean). */
Test(reset_attack, a_parked_page_moved_away_and_back_does_not_reach_the_next_run)
{
	plant_then_look(test_config_own_page(),
			"import ctypes, json\n"
			"libc = ctypes.CDLL(None, use_errno=True)\n"
			"libc.mmap.restype = libc.mremap.restype = ctypes.c_void_p\n"
			"libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,\n"
			"                      ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
			"away = libc.mmap(None, 4096, 0, 0x22, -1, 0)\n" /* PRIVATE|ANONYMOUS */
			"for src, dst in ((json.PAGE, away), (away, json.PAGE)):\n"
			"    at = libc.mremap(ctypes.c_void_p(src), 4096, 4096, 1 | 2,\n"
			"                     ctypes.c_void_p(dst))\n" /* MAYMOVE | FIXED */
			"    assert at == dst, ctypes.get_errno()\n"
			"ctypes.memmove(json.PAGE, b'dirty', 5)\n",
			"import ctypes, json\n"
			"print(ctypes.string_at(json.PAGE, 5))\n",
			"b'clean'\n", 0);
}

/* Mappings a run adds at an address of its own, of chosen sizes (mappings_a_run_added_*). */
static const char add_mappings_at_marker[] =
	"import ctypes\n"
	"libc = ctypes.CDLL(None, use_errno=True)\n"
	"libc.mmap.restype = ctypes.c_void_p\n"
	"libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,\n"
	"                      ctypes.c_int, ctypes.c_int, ctypes.c_long]\n"
	"for k in range(4):\n"
	"    want = 0x3ca1ab1e0000 + k * 0x100000\n"
	/* PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE */
	"    at = libc.mmap(want, 4096 * (k + 1), 0, 0x22 | 0x100000, -1, 0)\n"
	"    assert at == want, ctypes.get_errno()\n";

/* Whether the marker address is anywhere in the guest module's data (its writable segments,
 * found from its ELF headers in memory). */
static const char marker_in_guest_data[] =
	"import ctypes, struct\n"
	"class LinkMap(ctypes.Structure):\n"
	"    pass\n"
	"LinkMap._fields_ = [('addr', ctypes.c_size_t), ('name', ctypes.c_char_p),\n"
	"                    ('ld', ctypes.c_size_t), ('next', ctypes.POINTER(LinkMap))]\n"
	"lm = ctypes.cast(ctypes.CDLL(None)._handle, ctypes.POINTER(LinkMap))\n"
	"while b'_snapcell_guest' not in (lm[0].name or b''):\n"
	"    lm = lm[0].next\n"
	"base = lm[0].addr\n"
	"phoff, = struct.unpack('<Q', ctypes.string_at(base + 0x20, 8))\n"
	"size, n = struct.unpack('<HH', ctypes.string_at(base + 0x36, 4))\n"
	"found = False\n"
	"for i in range(n):\n"
	"    kind, flags, _, va, _, _, mem, _ = struct.unpack(\n"
	"        '<IIQQQQQQ', ctypes.string_at(base + phoff + i * size, 56))\n"
	"    if kind == 1 and flags & 2:\n" /* PT_LOAD, PF_W */
	"        data = ctypes.string_at(base + va, mem)\n"
	"        found |= any(struct.pack('<Q', 0x3ca1ab1e0000 + k * 0x100000) in data\n"
	"                     for k in range(4))\n"
	"print(found)\n";

/* The mappings a run added, listed by the template for the cell to unmap (reset.c,
 * sc_reuse_unmaps): where they were and how large, which the run chooses. The cell unmapped
 * them and left the list in its memory, where the next run read it. */
Test(reset_attack, mappings_a_run_added_are_not_listed_to_the_next_run)
{
	plant_then_look(with_ctypes(), add_mappings_at_marker, marker_in_guest_data, "False\n", 3);
}

/* The template's copy of the list stayed in its memory, from which every cell forked after
 * the reset was made; a cell discarded after the list was made (here for a lowered resource
 * limit, which is checked after the mappings) left it there too. */
Test(reset_attack, mappings_a_run_added_are_not_listed_to_later_cells)
{
	char plant[1024];
	snprintf(plant, sizeof(plant),
		 "%simport resource\n"
		 "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
		 "resource.setrlimit(resource.RLIMIT_NOFILE, (soft - 1, hard))\n",
		 add_mappings_at_marker);
	plant_then_look(with_ctypes(), plant, marker_in_guest_data, "False\n", 0);
}

/* The host keeps, for each cell of a sandbox that resets them, its /proc status and its memory
 * cgroup's files from its first run on (src/core/run.c keep_cell), closed with the cell: on
 * every way a run ends that retires its cell (an exit, a fatal signal, the wall limit, an
 * exit after a forged DONE), as at a reset. */
Test(reset_attack, the_files_kept_for_a_cell_are_closed_however_its_run_ends, .timeout = 120)
{
	int before = test_open_fds();
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 400, NULL), 0);
	struct snapcell_sandbox *sb = reuse_sandbox_with(cfg);
	static const char *const ends[] = {
		"pass",
		"import os\nos._exit(3)",
		"import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
		"while True: pass",
		"import os, struct, sys\n"
		"sys.stdout.flush()\n"
		"os.write(3, struct.pack('<I', 33) + b'D' + bytes(32))\n" /* a DONE */
		"os._exit(0)",
		"pass",
	};
	for (int round = 0; round < 3; round++)
		for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
			snapcell_result_free(test_run(sb, ends[i]));
	cr_expect_lt(test_open_fds() - before, 40, "descriptors held during the runs");
	snapcell_sandbox_free(sb);
	cr_expect_eq(test_open_fds(), before, "descriptors left after the sandbox's end");
}
