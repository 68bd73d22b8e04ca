/* Attacks on the reset in place (guest/reset.c): runs that try to leave state the checks do not
 * read for the next run of a reused cell, or to make the template misbehave. Each test fails
 * while its hole is open; docs/security.md, "Reset in place", says what each one closed. */
#define _GNU_SOURCE
#include "helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Which cell ran (as test_reset.c's IDENTITY): its /tmp and /output mounts and its frame
 * socket and output pipes, all made for one cell. */
#define IDENTITY                                                                                   \
	"import os as _os\n"                                                                       \
	"print('@', *[(s.st_dev, s.st_ino, s.st_ctime_ns) for s in "                               \
	"[_os.stat('/tmp'), _os.stat('/output')] + [_os.fstat(fd) for fd in (1, 2, 3)]])\n"

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

/* Runs code then IDENTITY; returns the output before the identity (malloc'd). */
static char *run_seen(struct snapcell_sandbox *sb, struct seen *s, const char *code)
{
	char *full = NULL;
	cr_assert_gt(asprintf(&full, "%s\n" IDENTITY, code), 0);
	struct snapcell_result *res = test_run(sb, full);
	free(full);
	cr_assert_eq(res->status, SNAPCELL_STATUS_OK, "status %s, exit %d, stdout %s, stderr %s",
		     snapcell_status_name(res->status), res->exit_code, res->stdout_buf,
		     res->stderr_buf);
	char *at = strstr(res->stdout_buf, "@ ");
	cr_assert(at, "no identity in %s", res->stdout_buf);
	bool again = false;
	for (int i = 0; i < s->n && !again; i++)
		again = strcmp(s->ids[i], at) == 0;
	if (!again && s->n < (int)(sizeof(s->ids) / sizeof(s->ids[0])))
		s->ids[s->n++] = strdup(at);
	s->reused += again;
	char *out = strndup(res->stdout_buf, (size_t)(at - res->stdout_buf));
	snapcell_result_free(res);
	return out;
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

/* A template whose parked memory has a page of its own (a writable page between two
 * inaccessible ones, so it is one mapping whatever lies around it) holding b'clean'. */
static struct snapcell_config *own_page(void)
{
	struct snapcell_config *cfg = with_ctypes();
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

/* madvise advice that sets flags of a whole mapping (fork, dump, THP, KSM, readahead): none
 * shows in /proc/PID/maps, and MADV_WIPEONFORK on the parked page made a child of the next run
 * see it zeroed. Cells armed for reuse are refused every advice but those that leave a
 * mapping's flags alone (src/isolate/seccomp.c). */
Test(reset_attack, mapping_flags_set_by_madvise_do_not_reach_the_next_run)
{
	expect_never_seen(own_page(),
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
	struct snapcell_sandbox *sb = reuse_sandbox_with(own_page());
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
		cr_assert_gt(asprintf(&code, IDENTITY "import sys\nsys.stdout.flush()\n%s", change),
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
	struct seen s = {0};
	for (int i = 0; i < 16; i++) {
		char *out = run_seen(sb, &s,
				     LIB_DATA_PAGE "print(pointers > 0)\n"
						   "libc.madvise(ctypes.c_void_p(start), 4096, 4)\n"
						   "x = words[0]\n");
		cr_expect_str_eq(out, "True\n", "run %d read unrelocated pointers: %s", i, out);
		free(out);
	}
	cr_expect_geq(s.reused, 8, "only %d of 16 runs were in a reset cell", s.reused);
	seen_free(&s);
	snapcell_sandbox_free(sb);
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
	struct seen s = {0};
	for (int i = 0; i < 16; i++) {
		char *out = run_seen(sb, &s, code);
		cr_expect_str_eq(out, "True\nTrue\nTrue\nTrue\n", "run %d: %s", i, out);
		free(out);
	}
	cr_expect_geq(s.reused, 8, "only %d of 16 runs were in a reset cell", s.reused);
	seen_free(&s);
	snapcell_sandbox_free(sb);
}
