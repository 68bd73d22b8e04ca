#define _GNU_SOURCE
/* The config's warm-up (snapcell_config_set_warmup): what it leaves in the template reaches
 * every fresh cell, its namespace and output do not; a warm-up that raises, leaves a thread or
 * a descriptor behind, calls a tool or opens a network socket fails creation, saying why. */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "helpers.h"

/* Creation with this warm-up: 0, or the error code with err filled in. */
static int make(const char *warmup, struct snapcell_config *cfg, struct snapcell_sandbox **sb,
		struct snapcell_error *err)
{
	struct snapcell_config *own = cfg ? NULL : test_config_new();
	cfg = cfg ? cfg : own;
	cr_assert_eq(snapcell_config_set_warmup(cfg, warmup, err), 0, "%s", err->message);
	*sb = NULL;
	int rc = snapcell_sandbox_new(cfg, sb, err);
	snapcell_config_free(own);
	return rc;
}

/* Creation must fail with SNAPCELL_E_HELPER and a message containing want. */
static void expect_refused(const char *warmup, struct snapcell_config *cfg, const char *want)
{
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	int rc = make(warmup, cfg, &sb, &err);
	cr_expect_eq(rc, SNAPCELL_E_HELPER, "rc %d for %s", rc, warmup);
	cr_expect(strstr(err.message, want), "want '%s' in '%s'", want, err.message);
	if (rc == 0)
		snapcell_sandbox_free(sb);
}

Test(warmup, what_it_leaves_reaches_every_fresh_cell_but_not_its_namespace_or_output)
{
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	cr_assert_eq(make("import json, sys\n"
			  "json.primed = [n * 2 for n in range(3)]\n"
			  "leftover = 1\n"
			  "print('from the warm-up'); print('to stderr', file=sys.stderr)\n",
			  NULL, &sb, &err),
		     0, "%s", err.message);
	for (int i = 0; i < 3; i++) /* each run a fresh cell */
		expect_output(sb,
			      "import json\nprint(json.primed, 'leftover' in globals())\n"
			      "json.primed = None\n",
			      "[0, 2, 4] False\n");
	snapcell_sandbox_free(sb);
}

/* A stream kept from the warm-up (logging.basicConfig holds sys.stderr, then its sink) must
 * not hand a run what the warm-up printed: the caller's output, maybe the caller's secrets. */
Test(warmup, its_output_stays_out_of_reach_of_a_stream_it_kept)
{
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	cr_assert_eq(make("import logging, sys\n"
			  "logging.basicConfig()\n"
			  "logging.warning('warm-up secret')\n"
			  "print('printed secret')\n"
			  "sys.kept = (sys.stdout, sys.stderr)\n",
			  NULL, &sb, &err),
		     0, "%s", err.message);
	const char *probe = "import logging, sys\n"
			    "streams = [h.stream for h in logging.root.handlers]\n"
			    "streams += list(sys.kept)\n"
			    "got = ''.join(getattr(s, 'getvalue', lambda: '')() for s in streams)\n"
			    "print('secret' in got, repr(got)[:60])\n";
	for (int i = 0; i < 2; i++) /* the first cell (parked before the warm steps) and a later */
		expect_output(sb, probe, "False ''\n");
	snapcell_sandbox_free(sb);
}

/* Text the warm-up leaves in a buffer of the real stdout (Python's sys.__stdout__, C's stdio)
 * would be inherited by every cell and written to its output at its next flush. */
Test(warmup, its_buffered_output_reaches_no_cell)
{
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	cr_assert_eq(make("import ctypes, sys\n"
			  "sys.__stdout__.write('python secret\\n')\n"
			  "ctypes.CDLL(None).printf(b'C secret\\n')\n",
			  NULL, &sb, &err),
		     0, "%s", err.message);
	for (int i = 0; i < 2; i++) /* the first cell (parked before the warm steps) and a later */
		expect_output(sb,
			      "import ctypes, sys\nsys.__stdout__.flush()\n"
			      "ctypes.CDLL(None).fflush(None)\nprint('cell')\n",
			      "cell\n");
	snapcell_sandbox_free(sb);
}

Test(warmup, an_exception_fails_creation_with_its_line)
{
	expect_refused(
		"x = 1\ndef f():\n    return x / 0\nf()\n", NULL,
		"warm-up: ZeroDivisionError: division by zero (at <warmup>:3 `return x / 0`)");
	expect_refused("import json\njson.loads('{')\n", NULL,
		       "warm-up: JSONDecodeError: Expecting property name enclosed in double "
		       "quotes: line 1 column 2 (char 1) (at <warmup>:2 `json.loads('{')`, in ");
	expect_refused("def (", NULL, "warm-up: SyntaxError: invalid syntax (<warmup>, line 1)");
	expect_refused("raise SystemExit(0)", NULL, "warm-up: SystemExit: 0");
}

Test(warmup, a_thread_left_running_is_refused)
{
	expect_refused("import threading, time\n"
		       "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n",
		       NULL, "warm-up: leaves threads running");
}

Test(warmup, a_descriptor_left_open_is_refused)
{
	expect_refused("import os, sys\nsys.kept = open(os.__file__)\n", NULL,
		       "warm-up: leaves descriptor ");
	expect_refused("import os\nos.pipe()\n", NULL, "warm-up: leaves descriptor ");
	/* poll() cannot see an O_PATH descriptor; the check asks those again. */
	expect_refused("import os\nos.open('/', os.O_PATH)\n", NULL, "warm-up: leaves descriptor ");
	/* Closing one of the template's own (not fd 3, its control socket, which would end the
	 * template before it could say why) is refused too. */
	expect_refused("import os\n"
		       "for fd in range(4, 64):\n"
		       "    try:\n"
		       "        os.fstat(fd)\n"
		       "    except OSError:\n"
		       "        continue\n"
		       "    os.close(fd)\n"
		       "    break\n",
		       NULL, "which the template needs");
	/* One it drops is closed by the collector before the check: allowed. */
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	cr_assert_eq(make("import os\nf = open(os.__file__)\n", NULL, &sb, &err), 0, "%s",
		     err.message);
	expect_output(sb, "print(2)", "2\n");
	snapcell_sandbox_free(sb);
}

static int called;

static int count_call(void *user, const char *args, char **result)
{
	called++;
	*result = strdup("1");
	return 0;
}

/* The template's fd 3 is its control socket: a call there would break the sandbox. */
Test(warmup, a_tool_call_is_refused_and_reaches_no_tool)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "count", "Counts.", NULL,
					      SNAPCELL_APPROVAL_NEVER, count_call, NULL, NULL),
		     0);
	called = 0;
	expect_refused("call_tool('count')", cfg,
		       "warm-up: RuntimeError: call_tool is not available in the warm-up");
	expect_refused("import _snapcell\n_snapcell.call('count', b'{}')", cfg,
		       "call_tool is not available in the warm-up");
	cr_expect_eq(called, 0);
	snapcell_config_free(cfg);
}

Test(warmup, a_network_socket_or_lookup_is_refused)
{
	expect_refused("import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=1)\n",
		       NULL, "warm-up: PermissionError: [Errno 13] no network in the warm-up");
	expect_refused("import socket\nsocket.getaddrinfo('example.com', 443)\n", NULL,
		       "no network in the warm-up");
	expect_refused("import _socket\n_socket.socket(_socket.AF_INET6, _socket.SOCK_DGRAM)\n",
		       NULL, "no network in the warm-up");
}

/* A config with reuse on or off (the template reads its maps in a procfs the helper makes for
 * reuse and for this check alike). */
static struct snapcell_config *config_reuse(bool reuse)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_reuse(cfg, reuse, NULL), 0);
	return cfg;
}

/* libc's mmap through ctypes: a mapping that keeps no descriptor open, as a C extension's. */
#define PY_LIBC_MMAP                                                                               \
	"import ctypes, os, sys\n"                                                                 \
	"libc = ctypes.CDLL(None, use_errno=True)\n"                                               \
	"libc.mmap.restype = ctypes.c_void_p\n"                                                    \
	"libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,\n"    \
	"                      ctypes.c_int, ctypes.c_long]\n"

/* Shared memory the warm-up leaves (mmap.mmap(-1, n) is MAP_SHARED) would be the same pages in
 * every cell forked from the template: what one run writes, another user's run reads. Read-only
 * is no better when a run can mprotect it writable (anonymous memory, a memfd). */
Test(warmup, shared_memory_it_leaves_mapped_is_refused)
{
	static const char *const maps[] = {
		"import mmap, sys\nsys.m = mmap.mmap(-1, 4096)\n",
		"import mmap, sys\nsys.m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ)\n",
		PY_LIBC_MMAP "fd = os.memfd_create('x')\nos.ftruncate(fd, 4096)\n"
			     "sys.m = libc.mmap(None, 4096, 1, 1, fd, 0)\nos.close(fd)\n",
	};
	for (int reuse = 0; reuse < 2; reuse++)
		for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
			struct snapcell_config *cfg = config_reuse(reuse);
			expect_refused(maps[i], cfg,
				       "warm-up: leaves shared memory mapped, which every cell "
				       "would share (map it MAP_PRIVATE): 4096 bytes at 0x");
			snapcell_config_free(cfg);
		}
}

/* The same from a preload, named in the error. */
Test(warmup, shared_memory_a_preload_leaves_mapped_is_refused)
{
	char *pp = test_make_tree();
	test_write_file(pp, "shm_preload.py", "import mmap\nM = mmap.mmap(-1, 4096)\n");
	for (int reuse = 0; reuse < 2; reuse++) {
		struct snapcell_config *cfg = config_reuse(reuse);
		cr_assert_eq(snapcell_config_add_python_path(cfg, pp, NULL), 0);
		cr_assert_eq(snapcell_config_add_preload(cfg, "shm_preload", NULL), 0);
		struct snapcell_sandbox *sb = NULL;
		struct snapcell_error err = {0};
		int rc = snapcell_sandbox_new(cfg, &sb, &err);
		snapcell_config_free(cfg);
		cr_expect_eq(rc, SNAPCELL_E_HELPER, "reuse %d: rc %d", reuse, rc);
		cr_expect(strstr(err.message,
				 "preload shm_preload: leaves shared memory mapped, which every "
				 "cell would share (map it MAP_PRIVATE): 4096 bytes at 0x"),
			  "reuse %d: %s", reuse, err.message);
		if (rc == 0)
			snapcell_sandbox_free(sb);
	}
	test_remove_tree(pp);
	free(pp);
}

/* What no run can write stays, and so does private memory (each cell its own copy): a file
 * opened read-only and mapped shared (as glibc maps its gconv cache), and mmap's private
 * mapping. */
Test(warmup, private_memory_and_read_only_files_mapped_shared_are_kept)
{
	for (int reuse = 0; reuse < 2; reuse++) {
		struct snapcell_sandbox *sb;
		struct snapcell_error err = {0};
		struct snapcell_config *cfg = config_reuse(reuse);
		cr_assert_eq(make(PY_LIBC_MMAP
				  "fd = os.open(os.__file__, os.O_RDONLY)\n"
				  "sys.ro = libc.mmap(None, 4096, 1, 1, fd, 0)\n"
				  "os.close(fd)\n"
				  "import mmap\n"
				  "sys.priv = mmap.mmap(-1, 4096, flags=mmap.MAP_PRIVATE)\n",
				  cfg, &sb, &err),
			     0, "reuse %d: %s", reuse, err.message);
		snapcell_config_free(cfg);
		for (int i = 0; i < 3; i++)
			expect_output(sb,
				      "import ctypes, sys\n"
				      "print(ctypes.string_at(sys.ro, 1) != b'', sys.priv[0])\n"
				      "sys.priv[0] = 65\n",
				      "True 0\n");
		snapcell_sandbox_free(sb);
	}
}

/* Code the warm-up leaves may map shared memory after the checks, in the template: an at-fork
 * hook runs before each cell's fork. The cells do not get that mapping (touching it faults),
 * so no run writes what another reads. */
Test(warmup, shared_memory_mapped_at_a_fork_is_not_in_the_cells)
{
	for (int reuse = 0; reuse < 2; reuse++) {
		struct snapcell_sandbox *sb;
		struct snapcell_error err = {0};
		struct snapcell_config *cfg = config_reuse(reuse);
		cr_assert_eq(
			make("import mmap, os, sys\n"
			     "def late():\n"
			     "    sys.late = getattr(sys, 'late', None) or mmap.mmap(-1, 4096)\n"
			     "os.register_at_fork(before=late)\n",
			     cfg, &sb, &err),
			0, "reuse %d: %s", reuse, err.message);
		snapcell_config_free(cfg);
		for (int i = 0; i < 3; i++)
			expect_output(sb,
				      "import mmap, sys\n"
				      "try:\n"
				      "    sys.late.madvise(mmap.MADV_NORMAL)\n"
				      "    sys.late[0] = 65\n"
				      "    print('mapped')\n"
				      "except OSError as e:\n"
				      "    print('not mapped', e.errno)\n",
				      "not mapped 12\n");
		snapcell_sandbox_free(sb);
	}
}

/* The check before each fork is the template's alone: a session's worker and its snapshots,
 * forks of a cell (which has no procfs), fork as without a warm-up. */
Test(warmup, a_session_forks_its_snapshots_with_a_warm_up)
{
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	cr_assert_eq(make("import json\n", NULL, &sb, &err), 0, "%s", err.message);
	struct snapcell_session *s = NULL, *b = NULL;
	struct snapcell_snapshot *snap = NULL;
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_session_run(s, "x = 7", SIZE_MAX, NULL, &res, &err), 0, "%s",
		     err.message);
	snapcell_result_free(res);
	cr_assert_eq(snapcell_session_snapshot(s, &snap, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_snapshot_new_session(snap, &b, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_session_run(b, "print(x * 6)", SIZE_MAX, NULL, &res, &err), 0, "%s",
		     err.message);
	cr_expect_eq(res->status, SNAPCELL_STATUS_OK, "%s", res->stderr_buf);
	cr_expect_str_eq(res->stdout_buf, "42\n");
	snapcell_result_free(res);
	snapcell_session_free(b);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* A container's /proc with masked paths (Docker binds /dev/null over /proc/keys, /proc/kcore and
 * others): the kernel then refuses a new procfs in the sandbox's namespaces (the one reset in place
 * and this check read). A sandbox with a warm-up must still start, and still refuse the warm-up's
 * shared memory: the template reads its maps through its own /proc directory, kept from before
 * the helper's pivot. Root only (the masking mount); in a mount namespace of this test's own. */
Test(warmup, with_a_masked_proc_a_warm_up_runs_and_shared_memory_is_still_refused)
{
	if (geteuid() != 0)
		cr_skip_test("masking /proc needs root");
	cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare: %s", strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	cr_assert_eq(mount("/dev/null", "/proc/keys", NULL, MS_BIND, NULL), 0, "bind: %s",
		     strerror(errno));
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	struct snapcell_config *cfg = test_config_new();
	/* And nothing the warm-up holds leads to the host's procfs (this process's pid in it). */
	char warmup[512];
	snprintf(warmup, sizeof(warmup),
		 "import os, sys\n"
		 "sys.host = []\n"
		 "for fd in range(3, 256):\n"
		 "    try:\n"
		 "        up = os.open('..', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)\n"
		 "    except OSError:\n"
		 "        continue\n"
		 "    if '%d' in os.listdir(up):\n"
		 "        sys.host.append(fd)\n"
		 "    os.close(up)\n",
		 (int)getpid());
	cr_assert_eq(make(warmup, cfg, &sb, &err), 0, "%s", err.message);
	expect_output(sb, "import sys\nprint(sys.host)", "[]\n");
	snapcell_sandbox_free(sb);
	expect_refused("import mmap, sys\nsys.m = mmap.mmap(-1, 4096)\n", cfg,
		       "warm-up: leaves shared memory mapped, which every cell would share (map it "
		       "MAP_PRIVATE): 4096 bytes at 0x");
	snapcell_config_free(cfg);
}

/* The set-up bytes' mapping, the one shared mapping the check passes, is found by its address
 * alone: a warm-up that maps a larger shared region over it (same start) would pass, and each
 * cell, which unmaps only the set-up bytes' length, would keep the rest, shared with every
 * other cell. */
#define PY_REPLACE_SET_UP                                                                          \
	PY_LIBC_MMAP                                                                               \
	"try:\n"                                                                                   \
	"    fd = os.open('self/maps', os.O_RDONLY, dir_fd=10)\n"                                  \
	"except OSError:\n"                                                                        \
	"    fd = os.open('/proc/self/maps', os.O_RDONLY)\n"                                       \
	"maps = b''\n"                                                                             \
	"while chunk := os.read(fd, 65536):\n"                                                     \
	"    maps += chunk\n"                                                                      \
	"os.close(fd)\n"                                                                           \
	"lines = [l.split() for l in maps.decode().splitlines()]\n"                                \
	"for i, f in enumerate(lines):\n"                                                          \
	"    start, end = (int(x, 16) for x in f[0].split('-'))\n"                                 \
	"    if f[1] == 'rw-s' and end - start == 4096:\n"                                         \
	"        break\n"                                                                          \
	"# over the set-up page and the next mapping (glibc's gconv cache, unused here)\n"         \
	"end = int(lines[i + 1][0].split('-')[1], 16)\n"                                           \
	"got = libc.mmap(start, end - start, 3, 0x31, -1, 0)\n"                                    \
	"assert got == start, (got, start)\n"                                                      \
	"sys.tail = start + 4096\n"

Test(warmup, shared_memory_mapped_over_the_set_up_bytes_is_refused)
{
	for (int reuse = 0; reuse < 2; reuse++) {
		struct snapcell_config *cfg = config_reuse(reuse);
		expect_refused(PY_REPLACE_SET_UP, cfg,
			       "warm-up: leaves shared memory mapped, which every cell "
			       "would share "
			       "(map it MAP_PRIVATE): ");
		snapcell_config_free(cfg);
	}
}

/* A run may mprotect writable what the template mapped shared without write: the check asks
 * the kernel the same way, which with exec asks for write and exec at once. Where the
 * template refused itself W+X (prctl PR_SET_MDWE, inherited by each cell), the cells could
 * still ask for write alone, dropping exec. */
Test(warmup, shared_executable_memory_is_refused_where_w_and_x_are_not_allowed_together)
{
	for (int reuse = 0; reuse < 2; reuse++) {
		struct snapcell_config *cfg = config_reuse(reuse);
		expect_refused(PY_LIBC_MMAP "sys.m = libc.mmap(None, 4096, 5, 0x21, -1, 0)\n"
					    "assert libc.prctl(65, 1, 0, 0, 0) == 0\n",
			       cfg,
			       "warm-up: leaves shared memory mapped, which every cell "
			       "would share "
			       "(map it MAP_PRIVATE): 4096 bytes at 0x");
		snapcell_config_free(cfg);
	}
}

/* A process the warm-up forks and leaves running keeps the template's capabilities and has
 * no seccomp filter: it could open every cell's /proc/<pid>/mem (the template's procfs is
 * at its descriptor 10) and write one run's data into another's. Creation fails instead,
 * for a child and for a double fork's orphan alike. */
Test(warmup, a_process_it_leaves_running_is_refused)
{
	static const char *const forks[] = {
		"import os, time\n"
		"if os.fork() == 0:\n"
		"    time.sleep(30)\n"
		"    os._exit(0)\n",
		"import os, time\n"
		"pid = os.fork()\n"
		"if pid == 0:\n"
		"    if os.fork() == 0:\n"
		"        time.sleep(30)\n"
		"    os._exit(0)\n"
		"os.waitpid(pid, 0)\n",
	};
	for (size_t i = 0; i < sizeof(forks) / sizeof(forks[0]); i++)
		expect_refused(forks[i], NULL,
			       "the preloads or the warm-up leave a process running, which could "
			       "reach every cell");
}

/* A child it waited for is no process left. */
Test(warmup, a_process_that_ended_is_not_refused)
{
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	cr_assert_eq(make("import os\n"
			  "pid = os.fork()\n"
			  "if pid == 0:\n"
			  "    os._exit(0)\n"
			  "os.waitpid(pid, 0)\n",
			  NULL, &sb, &err),
		     0, "%s", err.message);
	expect_output(sb, "print(1)\n", "1\n");
	snapcell_sandbox_free(sb);
}
