/* The cell's python3 (sys.executable): what an exec'd interpreter keeps of the cell's policy,
 * and every other way to exec something, which must fail. Needs Landlock (without it cells
 * exec nothing and sys.executable is empty). */
#define _GNU_SOURCE
#include "helpers.h"

#include <limits.h>
#include <linux/landlock.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#define SC_TEST_LANDLOCK_ABI_UNIX 6 /* the scope that AF_UNIX listeners need */

static int landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	return abi > 0 ? (int)abi : 0;
}

static void require_landlock(int abi)
{
	if (landlock_abi() < abi) {
		char why[64];
		snprintf(why, sizeof(why), "needs Landlock ABI %d", abi);
		test_skip_or_fail(why);
	}
}

Test(exec, sys_executable_runs_a_python)
{
	require_landlock(1);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(
		sb,
		"import os, subprocess, sys\n"
		"r = subprocess.run([sys.executable, '-c', 'print(6*7)'], capture_output=True)\n"
		"print(os.path.realpath('/usr/bin/python3') == sys.executable, r.returncode,\n"
		"      r.stdout, r.stderr)\n",
		"True 0 b'42\\n' b''\n");
	snapcell_sandbox_free(sb);
}

Test(exec, nothing_else_can_be_executed)
{
	require_landlock(1);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(
		sb,
		"import glob, os, shutil, subprocess\n" PY_ATTEMPT
		"lib = glob.glob('/usr/lib/*/libc.so.6')[0]\n"
		"loader = glob.glob('/usr/lib/*/ld-linux*.so.*')[0]\n"
		"shutil.copy(lib, '/tmp/prog'); os.chmod('/tmp/prog', 0o755)\n"
		"shutil.copy(lib, '/output/prog'); os.chmod('/output/prog', 0o755)\n"
		"os.symlink(lib, '/tmp/link')\n"
		"attempt('shell', lambda: os.execv('/bin/sh', ['sh']))\n"
		"attempt('library', lambda: os.execv(lib, ['x']))\n"
		"attempt('lib-dir loader', lambda: os.execv(loader, ['ld.so', '--version']))\n"
		"attempt('tmp file', lambda: os.execv('/tmp/prog', ['x']))\n"
		"attempt('output file', lambda: os.execv('/output/prog', ['x']))\n"
		"attempt('link', lambda: os.execv('/tmp/link', ['x']))\n"
		"attempt('fd', lambda: os.execve(os.open(lib, os.O_RDONLY), ['x'], {}))\n"
		"attempt('O_PATH fd', lambda: os.execve(os.open(lib, os.O_PATH), ['x'], {}))\n"
		"attempt('proc exe', lambda: os.execv('/proc/self/exe', ['x']))\n"
		"attempt('memfd', lambda: os.memfd_create('x'))\n"
		"attempt('read loader', lambda: open('/lib64/ld-linux-x86-64.so.2', 'rb'))\n"
		"attempt('link python', lambda: os.link('/usr/bin/python3', '/tmp/py'))\n"
		"r = subprocess.run(['/lib64/ld-linux-x86-64.so.2', '/tmp/prog'], "
		"capture_output=True)\n"
		"print('loader runs tmp file', r.returncode == 0)\n",
		"shell FileNotFoundError ENOENT\nlibrary PermissionError EACCES\n"
		"lib-dir loader PermissionError EACCES\ntmp file PermissionError EACCES\n"
		"output file PermissionError EACCES\nlink PermissionError EACCES\n"
		"fd PermissionError EACCES\nO_PATH fd PermissionError EACCES\n"
		"proc exe FileNotFoundError ENOENT\nmemfd PermissionError EPERM\n"
		"read loader PermissionError EACCES\nlink python OSError EXDEV\n"
		"loader runs tmp file False\n");
	snapcell_sandbox_free(sb);
}

/* The host's fs.suid_dumpable, or -1. */
static int suid_dumpable(void)
{
	FILE *f = fopen("/proc/sys/fs/suid_dumpable", "r");
	int v = -1;
	if (f && fscanf(f, "%d", &v) != 1)
		v = -1;
	if (f)
		fclose(f);
	return v;
}

/* The root binds the host's executable read-only (no per-sandbox copy): a cell may read it,
 * but not change, replace or remove it, and a program it execs still starts non-dumpable
 * because the loader every exec goes through is an unreadable copy (the kernel's would_dump()
 * of the ELF interpreter): the exec'd process takes fs.suid_dumpable's value, as an exec of
 * an unreadable program does, where an exec of readable files would make it 1. */
Test(exec, exec_python_is_not_dumpable_though_its_executable_is_readable)
{
	require_landlock(1);
	int level = suid_dumpable();
	if (level != 0 && level != 2)
		test_skip_or_fail("fs.suid_dumpable is 1: every exec is dumpable, nothing to tell");
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	char want[512];
	snprintf(want, sizeof(want),
		 "readable True loader 0o111 False\n"
		 "write python refused\nreplace python refused\nremove python refused\n"
		 "write loader refused\npython %d\nthrough the loader %d\n",
		 level, level);
	/* Which refusal comes first depends on who owns the file (EACCES, else EROFS). */
	expect_output(
		sb,
		"import errno, os, stat, subprocess, sys\n"
		"def attempt(label, f):\n"
		"    try:\n"
		"        f()\n"
		"        print(label, 'ok')\n"
		"    except OSError as e:\n"
		"        no = (errno.EACCES, errno.EROFS, errno.EXDEV, errno.EBUSY)\n"
		"        print(label, 'refused' if e.errno in no else e)\n"
		"loader = '/lib64/ld-linux-x86-64.so.2'\n"
		"print('readable', len(open(sys.executable, 'rb').read(4)) == 4, 'loader',\n"
		"      oct(stat.S_IMODE(os.stat(loader).st_mode)), os.access(loader, os.R_OK))\n"
		"attempt('write python', lambda: open(sys.executable, 'r+b'))\n"
		"open('/tmp/py', 'w').close()\n"
		"attempt('replace python', lambda: os.rename('/tmp/py', sys.executable))\n"
		"attempt('remove python', lambda: os.unlink(sys.executable))\n"
		"attempt('write loader', lambda: open(loader, 'r+b'))\n"
		"code = 'import ctypes; print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))'\n"
		"for label, argv in (('python', [sys.executable]),\n"
		"                    ('through the loader', [loader, sys.executable])):\n"
		"    r = subprocess.run(argv + ['-c', code], capture_output=True, text=True)\n"
		"    print(label, r.stdout.strip() or r.stderr)\n",
		want);
	snapcell_sandbox_free(sb);
}

/* What the exec'd python prints about itself; the parent prints the same of its own. */
#define PY_SELF                                                                                    \
	"import ctypes, os, resource, socket\n"                                                    \
	"libc = ctypes.CDLL(None, use_errno=True)\n"                                               \
	"class H(ctypes.Structure):\n"                                                             \
	"    _fields_ = [('version', ctypes.c_uint32), ('pid', ctypes.c_int)]\n"                   \
	"d = (ctypes.c_uint32 * 6)()\n"                                                            \
	"libc.capget(ctypes.byref(H(0x20080522, 0)), d)\n"                                         \
	"def me():\n"                                                                              \
	"    return [libc.prctl(21, 0, 0, 0, 0), libc.prctl(39, 0, 0, 0, 0),\n"                    \
	"            libc.prctl(3, 0, 0, 0, 0), list(d)] + [resource.getrlimit(r) for r in\n"      \
	"            (resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_CPU,\n"           \
	"             resource.RLIMIT_NOFILE, resource.RLIMIT_FSIZE, resource.RLIMIT_CORE)]\n"

Test(exec, exec_python_keeps_the_cells_policy)
{
	require_landlock(1);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	/* Seccomp 2, no_new_privs 1, dumpable 0, no capabilities, the same limits; no network
	 * socket, no exec but python3 itself, one level down too. */
	expect_output(
		sb,
		"import subprocess, sys\n" PY_SELF "child = '''\n" PY_SELF PY_ATTEMPT
		"print(me())\n"
		"attempt('socket', lambda: socket.socket())\n"
		"attempt('exec', lambda: os.execv('/tmp/prog', ['x']))\n"
		"import subprocess, sys\n"
		"print(subprocess.run([sys.executable, '-c', 'print(6*7)'],\n"
		"                     capture_output=True).stdout)\n"
		"'''\n"
		"open('/tmp/prog', 'wb').write(b'#!/usr/bin/python3\\n'); os.chmod('/tmp/prog', "
		"0o755)\n"
		"r = subprocess.run([sys.executable, '-c', child], capture_output=True, "
		"text=True)\n"
		"lines = r.stdout.splitlines()\n"
		"print(lines[0] == str(me()), me()[:3], lines[1:], r.stderr)\n",
		"True [2, 1, 0] ['socket PermissionError EACCES', 'exec PermissionError EACCES', "
		"\"b'42\\\\n'\"] \n");
	snapcell_sandbox_free(sb);
}

Test(exec, exec_python_is_never_a_template)
{
	require_landlock(1);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	/* Given what the template starts with (argv[0] snapcell-cell, a socket at fd 3), under
	 * any name, the copy runs as Python: it greets no one and reads stdin (/dev/null). */
	expect_output(sb,
		      "import os, socket\n"
		      "os.symlink('/usr/bin/python3', '/tmp/snapcell-cell')\n"
		      "for path in ('/usr/bin/python3', '/tmp/snapcell-cell'):\n"
		      "    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
		      "    pid = os.fork()\n"
		      "    if pid == 0:\n"
		      "        os.dup2(b.fileno(), 3)\n"
		      "        os.execv(path, ['snapcell-cell'])\n"
		      "    b.close()\n"
		      "    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])\n"
		      "    a.setblocking(False)\n"
		      "    print(path, status, a.recv(64))\n",
		      "/usr/bin/python3 0 b''\n/tmp/snapcell-cell 0 b''\n");
	expect_output(sb, "print(1)", "1\n"); /* the cell's own fd 3 was left alone */
	snapcell_sandbox_free(sb);
}

Test(exec, multiprocessing_spawn_and_forkserver, .timeout = 60)
{
	require_landlock(SC_TEST_LANDLOCK_ABI_UNIX);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb,
		      "import math, multiprocessing\n"
		      "for method in ('spawn', 'forkserver'):\n"
		      "    with multiprocessing.get_context(method).Pool(2) as p:\n"
		      "        print(method, p.map(math.factorial, range(6)))\n",
		      "spawn [1, 1, 2, 6, 24, 120]\nforkserver [1, 1, 2, 6, 24, 120]\n");
	snapcell_sandbox_free(sb);
}

/* A listening socket of the host's own in a host directory the root binds read-only (a Python
 * path or venv: the caller's directories, alive while the sandbox runs). A read-only mount
 * does not stop a connect (write permission is checked on the socket, and EROFS only covers
 * files, directories and links), and a non-root caller's cells are the caller's own uid
 * outside, so anything the caller listens on there would answer. */
static int host_listener(const char *dir, char *path, size_t path_len)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(path, path_len, "%s/agent.sock", dir);
	cr_assert_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	cr_assert_geq(s, 0);
	cr_assert_eq(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s: %m", path);
	cr_assert_eq(chmod(path, 0777), 0); /* whatever uid the sandbox runs as */
	cr_assert_eq(listen(s, 4), 0);
	return s;
}

Test(exec, host_sockets_in_bound_directories_are_unreachable)
{
	char *dir = test_make_tree(), path[PATH_MAX];
	int s = host_listener(dir, path, sizeof(path));
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_python_path(cfg, dir, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	/* Refused at socket() where AF_UNIX listeners are off, at connect where Landlock can
	 * keep pathname sockets to the cell's own (ABI 9): EACCES either way. */
	expect_output(
		sb,
		"import socket, sys\n" PY_ATTEMPT "path = sys.path[-1] + '/agent.sock'\n"
		"attempt('host socket', lambda: socket.socket(socket.AF_UNIX).connect(path))\n",
		"host socket PermissionError EACCES\n");
	cr_expect_eq(accept(s, NULL, NULL), -1, "the cell reached the host's socket");
	snapcell_sandbox_free(sb);
	close(s);
	test_remove_tree(dir);
	free(dir);
}

Test(exec, sessions_and_their_branches_exec_python, .timeout = 60)
{
	require_landlock(1);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = NULL, *branch = NULL;
	struct snapcell_snapshot *snap = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	static const char code[] =
		"import subprocess, sys\n"
		"print(subprocess.run([sys.executable, '-c', 'print(6*7)'], capture_output=True,\n"
		"                     text=True).stdout, end='')\n";
	struct snapcell_result *res[2] = {0};
	cr_assert_eq(snapcell_session_run(s, code, SIZE_MAX, NULL, &res[0], &err), 0);
	cr_assert_eq(snapcell_session_snapshot(s, &snap, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_snapshot_new_session(snap, &branch, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_session_run(branch, code, SIZE_MAX, NULL, &res[1], &err), 0);
	for (int i = 0; i < 2; i++) {
		cr_expect_str_eq(res[i]->stdout_buf, "42\n", "run %d: %s", i, res[i]->stderr_buf);
		snapcell_result_free(res[i]);
	}
	snapcell_session_free(branch);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}
