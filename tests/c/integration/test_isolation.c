/* Escape attempts from inside a cell that must fail: host files, writes, network, signals,
 * ptrace, namespaces, tripwires, capabilities, other cells, leftovers between runs, stray fds. */
#define _GNU_SOURCE
#include "helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>

/* ctypes access to raw system calls; sc(nr, ...) returns "<result> <errno name>". */
#define PY_SYSCALL                                                                                 \
	"import ctypes, errno\n"                                                                   \
	"libc = ctypes.CDLL(None, use_errno=True)\n"                                               \
	"libc.syscall.restype = ctypes.c_long\n"                                                   \
	"def sc(nr, *args):\n"                                                                     \
	"    ctypes.set_errno(0)\n"                                                                \
	"    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])\n"             \
	"    e = ctypes.get_errno()\n"                                                             \
	"    return f'{r} {errno.errorcode.get(e, e)}'\n"

static void require_x86_64(void)
{
#ifndef __x86_64__
	criterion_skip_test("the system call numbers in this test are x86_64's");
#endif
}

/* After an attack the same sandbox must still run ordinary code. */
static void expect_healthy(struct snapcell_sandbox *sb)
{
	expect_output(sb, "print(1)", "1\n");
}

Test(isolation, host_paths_are_absent)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(
		sb,
		"import os, sys\n" PY_ATTEMPT "for p in ['/etc/shadow', '/home', '/proc',\n"
		"          '/proc/1/environ', '/sys', '/var', '/boot', '/run']:\n"
		"    attempt(p, lambda: os.stat(p))\n"
		/* /root only where the interpreter lives (a pyenv build), and only it. */
		"top = sys.base_prefix.split('/')[1:3]\n"
		"print('/root', 'ok' if not os.path.exists('/root') or (top[0] == 'root' and\n"
		"      os.listdir('/root') == [top[1]]) else os.listdir('/root'))\n",
		"/etc/shadow FileNotFoundError ENOENT\n"
		"/home FileNotFoundError ENOENT\n/proc FileNotFoundError ENOENT\n"
		"/proc/1/environ FileNotFoundError ENOENT\n/sys FileNotFoundError ENOENT\n"
		"/var FileNotFoundError ENOENT\n/boot FileNotFoundError ENOENT\n"
		"/run FileNotFoundError ENOENT\n/root ok\n");
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

/* A host directory holding a secret: the test's cwd and TMPDIR, so the sandbox's own host
 * work directory is made inside it too. */
struct secret {
	char dir[64];
	char path[512];
	char marker[64];
	char workdir[512];
};

static void plant_secret(struct secret *s)
{
	unsigned char rnd[8];
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	cr_assert(fd >= 0 && read(fd, rnd, sizeof(rnd)) == (ssize_t)sizeof(rnd));
	close(fd);
	snprintf(s->marker, sizeof(s->marker), "sc-secret-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0],
		 rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	snprintf(s->dir, sizeof(s->dir), "/tmp/sc-host-XXXXXX");
	cr_assert_not_null(mkdtemp(s->dir));
	/* Readable by anyone, the sandbox uid included: only the mount layout may hide it. */
	cr_assert_eq(chmod(s->dir, 0755), 0);
	snprintf(s->path, sizeof(s->path), "%s/%s", s->dir, s->marker);
	FILE *f = fopen(s->path, "we");
	cr_assert_not_null(f);
	fprintf(f, "%s\n", s->marker);
	fclose(f);
	cr_assert_eq(chmod(s->path, 0644), 0);
	cr_assert_eq(chdir(s->dir), 0);
	cr_assert_eq(setenv("TMPDIR", s->dir, 1), 0);
}

static void find_workdir(struct secret *s)
{
	DIR *d = opendir(s->dir);
	cr_assert_not_null(d);
	struct dirent *e;
	s->workdir[0] = 0;
	while ((e = readdir(d)))
		if (strncmp(e->d_name, "snapcell-", 9) == 0)
			snprintf(s->workdir, sizeof(s->workdir), "%s/%s", s->dir, e->d_name);
	closedir(d);
	cr_assert(s->workdir[0], "the sandbox made no work directory in %s", s->dir);
}

static void remove_secret(struct secret *s)
{
	unlink(s->path);
	cr_expect_eq(rmdir(s->dir), 0, "%s not empty after sandbox_free", s->dir);
}

/* Searches every readable file of the cell (names and first MiB) for the marker; a canary
 * written to /tmp first proves the search would find it. */
static const char walk_code[] =
	"import os, stat\n"
	"marker = '%s'[::-1]\n"
	"for p in ['%s', '%s', '%s', '%s/out', '%s/root']:\n"
	"    try:\n"
	"        os.stat(p)\n"
	"        print('visible', p)\n"
	"    except FileNotFoundError:\n"
	"        pass\n"
	"    except OSError as e:\n"
	"        print('reachable', p, e)\n"
	"open('/tmp/canary', 'w').write(marker)\n"
	"hits, scanned = [], 0\n"
	"for root, dirs, files in os.walk('/'):\n"
	"    if root == '/':\n"
	"        dirs.remove('dev')\n"
	"    hits += [os.path.join(root, n) for n in dirs + files if marker in n]\n"
	"    for name in files:\n"
	"        if scanned >= 50000:\n"
	"            break\n"
	"        try:\n"
	"            fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NONBLOCK)\n"
	"        except OSError:\n"
	"            continue\n"
	"        if stat.S_ISREG(os.fstat(fd).st_mode):\n"
	"            scanned += 1\n"
	"            if marker.encode() in os.read(fd, 1 << 20):\n"
	"                hits.append(os.path.join(root, name))\n"
	"        os.close(fd)\n"
	"print(hits, scanned > 1000)\n";

Test(isolation, host_secret_is_unreachable, .timeout = 60)
{
	struct secret s;
	plant_secret(&s);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	find_workdir(&s);
	char reversed[64], code[4096];
	size_t n = strlen(s.marker);
	for (size_t i = 0; i < n; i++)
		reversed[i] = s.marker[n - 1 - i];
	reversed[n] = 0;
	snprintf(code, sizeof(code), walk_code, reversed, s.path, s.dir, s.workdir, s.workdir,
		 s.workdir);
	expect_output(sb, code, "['/tmp/canary'] True\n");
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
	remove_secret(&s);
}

Test(isolation, writes_outside_output_and_tmp_fail)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(
		sb,
		"import os, glob, errno\n"
		"lib = os.__file__\n"
		"def attempt(label, f):\n"
		"    try:\n"
		"        f()\n"
		"        print(label, 'WRITTEN')\n"
		"    except OSError as e:\n"
		"        if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.EXDEV):\n"
		"            print(label, e)\n"
		"for d in ['/', '/usr/', '/etc/', '/input/', '/dev/', '/usr/lib/']:\n"
		"    attempt('create in ' + d, lambda: open(d + 'x', 'w'))\n"
		"    attempt('mkdir in ' + d, lambda: os.mkdir(d + 'd'))\n"
		"    attempt('symlink in ' + d, lambda: os.symlink('/tmp', d + 'l'))\n"
		"attempt('append /etc/passwd', lambda: open('/etc/passwd', 'a'))\n"
		"attempt('chmod os.py', lambda: os.chmod(lib, 0o777))\n"
		"attempt('chown os.py', lambda: os.chown(lib, 0, 0))\n"
		"attempt('utime os.py', lambda: os.utime(lib))\n"
		"attempt('truncate os.py', lambda: os.truncate(lib, 0))\n"
		"attempt('unlink os.py', lambda: os.unlink(lib))\n"
		"attempt('rename os.py', lambda: os.rename(lib, '/tmp/os.py'))\n"
		"attempt('link os.py', lambda: os.link(lib, '/tmp/os.py'))\n"
		"attempt('chmod /usr', lambda: os.chmod('/usr', 0o777))\n"
		"print('denied all')\n"
		"for p in ['/dev/null', '/tmp/ok', '/output/ok', '/dev/shm/ok']:\n"
		"    open(p, 'w').write('x')\n"
		"os.mkfifo('/tmp/fifo')\n"
		"print('wrote', os.listdir('/output'))\n",
		"denied all\nwrote ['ok']\n");
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

Test(isolation, device_nodes_cannot_be_created)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(
		sb,
		"import os\n" PY_ATTEMPT
		"attempt('chr /dev', lambda: os.mknod('/dev/mem2', 0o20666, os.makedev(1, 1)))\n"
		"attempt('chr /tmp', lambda: os.mknod('/tmp/null2', 0o20666, os.makedev(1, 3)))\n"
		"attempt('blk /tmp', lambda: os.mknod('/tmp/sda', 0o60666, os.makedev(8, 0)))\n"
		"attempt('fifo /tmp', lambda: os.mknod('/tmp/fifo', 0o10666))\n",
		"chr /dev PermissionError EPERM\nchr /tmp PermissionError EPERM\n"
		"blk /tmp PermissionError EPERM\nfifo /tmp ok\n");
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

/* Cells without network may listen on AF_UNIX sockets where Landlock can scope them. */
static bool unix_sockets_allowed(void)
{
	return syscall(SYS_landlock_create_ruleset, NULL, 0, 1UL /* VERSION */) >= 6;
}

Test(isolation, no_network_sockets)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	char want[1024];
	snprintf(want, sizeof(want),
		 "AF_INET NetworkUnavailableError EACCES\nAF_INET NetworkUnavailableError EACCES\n"
		 "AF_INET6 NetworkUnavailableError EACCES\n%s"
		 "AF_NETLINK NetworkUnavailableError EACCES\nAF_PACKET NetworkUnavailableError "
		 "EACCES\n"
		 "AF_VSOCK NetworkUnavailableError EACCES\nAF_ALG NetworkUnavailableError EACCES\n"
		 "socketpair AF_INET OSError EAFNOSUPPORT\nsocketpair AF_UNIX b'ping'\n"
		 "raw AF_INET PermissionError EACCES\n",
		 unix_sockets_allowed() ? "AF_UNIX ok\n" : "AF_UNIX PermissionError EACCES\n");
	expect_output(
		sb,
		"import socket\n" PY_ATTEMPT "S = lambda name: getattr(socket, name)\n"
		"for fam, kind in [('AF_INET', 'SOCK_STREAM'), ('AF_INET', 'SOCK_DGRAM'),\n"
		"                  ('AF_INET6', 'SOCK_STREAM'), ('AF_UNIX', 'SOCK_STREAM'),\n"
		"                  ('AF_NETLINK', 'SOCK_RAW'), ('AF_PACKET', 'SOCK_RAW'),\n"
		"                  ('AF_VSOCK', 'SOCK_STREAM'), ('AF_ALG', 'SOCK_SEQPACKET')]:\n"
		"    attempt(fam, lambda: socket.socket(S(fam), S(kind)))\n"
		"attempt('socketpair AF_INET', lambda: socket.socketpair(socket.AF_INET))\n"
		"a, b = socket.socketpair(socket.AF_UNIX)\n"
		"a.sendall(b'ping')\n"
		"print('socketpair AF_UNIX', b.recv(4))\n"
		"raw = socket.socket.__mro__[-2]  # the C type, beneath the prelude's wording\n"
		"attempt('raw AF_INET', lambda: raw(socket.AF_INET, socket.SOCK_STREAM))\n",
		want);
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

static volatile sig_atomic_t host_signals;

static void note_signal(int sig)
{
	host_signals |= 1 << sig;
}

static void catch_signals(void)
{
	static const int sigs[] = {SIGTERM, SIGUSR1, SIGUSR2, SIGHUP, SIGINT};
	struct sigaction sa = {.sa_handler = note_signal};
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		cr_assert_eq(sigaction(sigs[i], &sa, NULL), 0);
}

Test(isolation, cannot_signal_the_host)
{
	catch_signals();
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	char code[2048];
	snprintf(code, sizeof(code),
		 "import os, signal\n" PY_ATTEMPT
		 "for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP):\n"
		 "    signal.signal(s, signal.SIG_IGN)\n"
		 "attempt('kill(-1)', lambda: os.kill(-1, signal.SIGTERM))\n"
		 "attempt('kill(0)', lambda: os.kill(0, signal.SIGUSR1))\n"
		 "attempt('kill(host)', lambda: os.kill(%d, signal.SIGTERM))\n"
		 "attempt('killpg(host)', lambda: os.killpg(%d, signal.SIGUSR2))\n"
		 "if os.fork() == 0:\n"
		 "    for p in (-1, 0, os.getppid()):\n"
		 "        try:\n"
		 "            os.kill(p, signal.SIGUSR1)\n"
		 "        except OSError:\n"
		 "            pass\n"
		 "    os._exit(0)\n"
		 "os.wait()\n",
		 (int)getpid(), (int)getpgrp());
	expect_output(
		sb, code,
		"kill(-1) ProcessLookupError ESRCH\nkill(0) ok\n"
		"kill(host) ProcessLookupError ESRCH\nkillpg(host) ProcessLookupError ESRCH\n");
	/* A signal the cell managed to send would be pending before its DONE frame was written,
	 * so it has been delivered by now (at our return from the reads that took DONE). */
	cr_expect_eq(host_signals, 0, "the host received signals (mask %#x)", host_signals);
	kill(getpid(), SIGUSR1); /* the handler works: the check above could fail */
	cr_expect_eq(host_signals, 1 << SIGUSR1);
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

Test(isolation, host_processes_are_invisible)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	char code[1024];
	snprintf(code, sizeof(code),
		 "import os\n"
		 "seen = []\n"
		 "for p in list(range(1, 1 << 16)) + [%d, %d]:\n"
		 "    try:\n"
		 "        os.kill(p, 0)\n"
		 "        seen.append(p)\n"
		 "    except ProcessLookupError:\n"
		 "        pass\n"
		 "print(seen, os.getpid(), os.getppid())\n",
		 (int)getpid(), (int)getppid());
	expect_output(sb, code, "[1] 1 0\n");
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

Test(isolation, ptrace_is_denied)
{
	require_x86_64();
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	char code[2048];
	snprintf(code, sizeof(code),
		 PY_SYSCALL "libc.ptrace.restype = ctypes.c_long\n"
			    "ctypes.set_errno(0)\n"
			    "r = libc.ptrace(ctypes.c_long(0), ctypes.c_long(0), None, None)\n"
			    "print('PTRACE_TRACEME', r, errno.errorcode[ctypes.get_errno()])\n"
			    "print('PTRACE_ATTACH', sc(101, 16, 1, 0, 0))\n"
			    "print('PTRACE_SEIZE host', sc(101, 0x4206, %d, 0, 0))\n"
			    "print('process_vm_readv', sc(310, 1, 0, 0, 0, 0, 0))\n"
			    "print('process_vm_writev', sc(311, 1, 0, 0, 0, 0, 0))\n"
			    "print('kcmp', sc(312, 1, 1, 0, 0, 0))\n",
		 (int)getpid());
	expect_output(
		sb, code,
		"PTRACE_TRACEME -1 EPERM\nPTRACE_ATTACH -1 EPERM\nPTRACE_SEIZE host -1 EPERM\n"
		"process_vm_readv -1 EPERM\nprocess_vm_writev -1 EPERM\nkcmp -1 EPERM\n");
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

Test(isolation, namespace_and_mount_calls_are_denied)
{
	require_x86_64();
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(
		sb,
		PY_SYSCALL "import os\n"
			   "NEWNS, NEWUSER = 0x20000, 0x10000000\n"
			   "NEWPID, NEWNET = 0x20000000, 0x40000000\n"
			   "print('unshare(NEWUSER)', sc(272, NEWUSER))\n"
			   "print('unshare(NEWNS)', sc(272, NEWNS))\n"
			   "print('unshare(NEWNET)', sc(272, NEWNET))\n"
			   "print('setns', sc(308, 0, 0))\n"
			   "print('mount', sc(165, 0, 0, 0, 0, 0))\n"
			   "print('umount2', sc(166, 0, 0))\n"
			   "print('pivot_root', sc(155, 0, 0))\n"
			   "print('chroot', sc(161, 0))\n"
			   "print('clone(NEWUSER)', sc(56, NEWUSER | 17, 0, 0, 0, 0))\n"
			   "print('clone(NEWPID)', sc(56, NEWPID | 17, 0, 0, 0, 0))\n"
			   "print('clone(NEWNET)', sc(56, NEWNET | 17, 0, 0, 0, 0))\n"
			   "print('clone(NEWNS)', sc(56, NEWNS | 17, 0, 0, 0, 0))\n"
			   "print('clone(PARENT)', sc(56, 0x8000 | 17, 0, 0, 0, 0))\n"
			   "try:\n"
			   "    os.chroot('/tmp')\n"
			   "except PermissionError as e:\n"
			   "    print('os.chroot', errno.errorcode[e.errno])\n",
		"unshare(NEWUSER) -1 EPERM\nunshare(NEWNS) -1 EPERM\nunshare(NEWNET) -1 EPERM\n"
		"setns -1 EPERM\nmount -1 EPERM\numount2 -1 EPERM\npivot_root -1 EPERM\n"
		"chroot -1 EPERM\nclone(NEWUSER) -1 EPERM\nclone(NEWPID) -1 EPERM\n"
		"clone(NEWNET) -1 EPERM\nclone(NEWNS) -1 EPERM\nclone(PARENT) -1 EPERM\n"
		"os.chroot EPERM\n");
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

/* The KILL_PROCESS tier of src/isolate/seccomp.c: exploit-only calls end the cell. */
static const struct {
	const char *name;
	int nr;
} tripwires[] = {
	{"kexec_load", 246},	  {"kexec_file_load", 320}, {"init_module", 175},
	{"finit_module", 313},	  {"delete_module", 176},   {"iopl", 172},
	{"ioperm", 173},	  {"modify_ldt", 154},	    {"bpf", 321},
	{"perf_event_open", 298}, {"userfaultfd", 323},	    {"keyctl", 250},
	{"add_key", 248},	  {"request_key", 249},	    {"open_by_handle_at", 304},
	{"lookup_dcookie", 212},
};

Test(isolation, tripwire_calls_kill_the_cell, .timeout = 60)
{
	require_x86_64();
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	for (size_t i = 0; i < sizeof(tripwires) / sizeof(tripwires[0]); i++) {
		char code[1024];
		snprintf(code, sizeof(code),
			 PY_SYSCALL "print('armed', flush=True)\n"
				    "sc(%d, 0, 0, 0, 0, 0)\n"
				    "print('survived')\n",
			 tripwires[i].nr);
		struct snapcell_result *res = test_run(sb, code);
		cr_expect_eq(res->status, SNAPCELL_STATUS_KILLED, "%s: status %s",
			     tripwires[i].name, snapcell_status_name(res->status));
		cr_expect_eq(res->term_signal, SIGSYS, "%s: signal %d", tripwires[i].name,
			     res->term_signal);
		cr_expect_str_eq(res->stdout_buf, "armed\n", "%s", tripwires[i].name);
		snapcell_result_free(res);
	}
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

/* The errno tiers: "feature absent" (ENOSYS, libc falls back), no xattrs (EOPNOTSUPP, shutil
 * copes), policy denials (EPERM), each checked on the exact errno. */
Test(isolation, denied_calls_answer_their_tier_errno)
{
	require_x86_64();
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	/* With Landlock, execve and execveat are allowed (Landlock confines them: test_exec.c),
	 * and from ABI 6 the AF_UNIX listener calls (scoped). */
	bool exec = syscall(SYS_landlock_create_ruleset, NULL, 0, 1UL /* VERSION */) >= 1;
	bool unix_ok = unix_sockets_allowed();
	char code[4096], want[32];
	snprintf(want, sizeof(want), "checked %d\n", 68 - (exec ? 2 : 0) - (unix_ok ? 4 : 0));
	snprintf(code, sizeof(code),
		 PY_SYSCALL
		 "calls = {\n"
		 "    'ENOSYS': 'pidfd_send_signal:424 io_uring_setup:425 io_uring_enter:426 '\n"
		 "        'io_uring_register:427 open_tree:428 move_mount:429 fsopen:430 '\n"
		 "        'fsconfig:431 fsmount:432 fspick:433 pidfd_open:434 clone3:435 '\n"
		 "        'openat2:437 pidfd_getfd:438 process_madvise:440 mount_setattr:442 '\n"
		 "        'landlock_create_ruleset:444 landlock_add_rule:445 '\n"
		 "        'landlock_restrict_self:446 memfd_secret:447 future:500 future:511',\n"
		 "    'EOPNOTSUPP': 'setxattr:188 lsetxattr:189 fsetxattr:190 getxattr:191 '\n"
		 "        'lgetxattr:192 fgetxattr:193 listxattr:194 llistxattr:195 '\n"
		 "        'flistxattr:196 removexattr:197 lremovexattr:198 fremovexattr:199',\n"
		 "    'EPERM': 'splice:275 tee:276 vmsplice:278 memfd_create:319 seccomp:317 '\n"
		 "        'setuid:105 setresuid:117 setgroups:116 capset:126 sethostname:170 '\n"
		 "        'settimeofday:164 mlock:149 mlockall:151 sched_setaffinity:203 '\n"
		 "        'setpriority:141 inotify_init1:294 fanotify_init:300 syslog:103 '\n"
		 "        'reboot:169 swapon:167 acct:163 quotactl:179 name_to_handle_at:303 '\n"
		 "        '%s%s'\n"
		 "        'msgget:68 shmget:29 mq_open:240 ioprio_set:251 mbind:237',\n"
		 "}\n"
		 "n = 0\n"
		 "for want, entries in calls.items():\n"
		 "    for name, nr in (e.split(':') for e in entries.split()):\n"
		 "        n += 1\n"
		 "        got = sc(int(nr), 0, 0, 0, 0, 0)\n"
		 "        if got != '-1 ' + errno.errorcode[getattr(errno, want)]:\n"
		 "            print(name, got, 'want', want)\n"
		 "print('checked', n)\n",
		 unix_ok ? "" : "connect:42 bind:49 listen:50 accept4:288 ",
		 exec ? "" : "execve:59 execveat:322 ");
	expect_output(sb, code, want);
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

/* ioctl, fcntl, prctl, prlimit64, personality, arch_prctl and socketpair are allowed only
 * for harmless arguments. */
Test(isolation, argument_checked_calls_deny_the_rest)
{
	require_x86_64();
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb,
		      PY_SYSCALL "print('ioctl TIOCSTI', sc(16, 0, 0x5412, 0))\n"
				 "print('fcntl F_SETOWN', sc(72, 1, 8, 1))\n"
				 "print('fcntl F_SETSIG', sc(72, 1, 10, 1))\n"
				 "print('fcntl F_SETLEASE', sc(72, 1, 1024, 0))\n"
				 "print('fcntl F_SETPIPE_SZ', sc(72, 1, 1031, 1 << 20))\n"
				 "print('prctl PR_SET_DUMPABLE', sc(157, 4, 1))\n"
				 "print('prctl PR_SET_CHILD_SUBREAPER', sc(157, 36, 1))\n"
				 "print('prctl PR_SET_PDEATHSIG', sc(157, 1, 9))\n"
				 "print('prlimit64 other', sc(302, 1, 7, 0, 0))\n"
				 "print('personality', sc(135, 8))\n"
				 "print('arch_prctl ARCH_GET_GS', sc(158, 0x1004, 0))\n"
				 "print('socketpair AF_INET', sc(53, 2, 1, 0, 0))\n"
				 "print('socket AF_NETLINK', sc(41, 16, 3, 0))\n",
		      "ioctl TIOCSTI -1 EPERM\nfcntl F_SETOWN -1 EPERM\nfcntl F_SETSIG -1 EPERM\n"
		      "fcntl F_SETLEASE -1 EPERM\nfcntl F_SETPIPE_SZ -1 EPERM\n"
		      "prctl PR_SET_DUMPABLE -1 EPERM\nprctl PR_SET_CHILD_SUBREAPER -1 EPERM\n"
		      "prctl PR_SET_PDEATHSIG -1 EPERM\nprlimit64 other -1 EPERM\n"
		      "personality -1 EPERM\narch_prctl ARCH_GET_GS -1 EPERM\n"
		      "socketpair AF_INET -1 EAFNOSUPPORT\nsocket AF_NETLINK -1 EACCES\n");
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

Test(isolation, no_capabilities_in_the_cell)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb,
		      "import ctypes, os\n" PY_ATTEMPT "libc = ctypes.CDLL(None, use_errno=True)\n"
		      "class Header(ctypes.Structure):\n"
		      "    _fields_ = [('version', ctypes.c_uint32), ('pid', ctypes.c_int)]\n"
		      "class Data(ctypes.Structure):\n"
		      "    _fields_ = [(n, ctypes.c_uint32) for n in ('eff', 'perm', 'inh')]\n"
		      "h, d = Header(0x20080522, 0), (Data * 2)()\n"
		      "print('capget', libc.capget(ctypes.byref(h), d),\n"
		      "      [(x.eff, x.perm, x.inh) for x in d])\n"
		      "print('bounding', libc.prctl(23, 0, 0, 0, 0),\n"
		      "      [c for c in range(64) if libc.prctl(23, c, 0, 0, 0) == 1])\n"
		      "print('no_new_privs', libc.prctl(39, 0, 0, 0, 0),\n"
		      "      'seccomp', libc.prctl(21, 0, 0, 0, 0))\n"
		      "print('uid', os.getuid(), os.geteuid())\n"
		      "attempt('setuid', lambda: os.setuid(1))\n"
		      "attempt('setgid', lambda: os.setgid(1))\n"
		      "attempt('setgroups', lambda: os.setgroups([]))\n",
		      "capget 0 [(0, 0, 0), (0, 0, 0)]\nbounding 0 []\n"
		      "no_new_privs 1 seccomp 2\nuid 0 0\n"
		      "setuid PermissionError EPERM\nsetgid PermissionError EPERM\n"
		      "setgroups PermissionError EPERM\n");
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

Test(isolation, etc_is_minimal_and_hostname_is_the_cells)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb,
		      "import pwd, grp, os, socket\n"
		      "print(sorted(p.pw_name for p in pwd.getpwall()),\n"
		      "      sorted(g.gr_name for g in grp.getgrall()))\n"
		      "print('shadow' in os.listdir('/etc'), socket.gethostname())\n",
		      "['nobody', 'root'] ['nogroup', 'root']\nFalse snapcell\n");
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

Test(isolation, concurrent_cells_cannot_reach_each_other, .timeout = 60)
{
	/* Cell a writes its files and waits at the gate while cell b looks for them. */
	struct test_gate g;
	struct snapcell_config *cfg = test_config_new();
	test_gate_add(cfg, &g, true);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct test_bg_run a;
	test_bg_start(&a, sb,
		      "import os\n"
		      "open('/tmp/mine', 'w').write('a')\n"
		      "open('/output/mine', 'w').write('a')\n"
		      "call_tool('gate')\n"
		      "print('alive', os.listdir('/tmp'), os.listdir('/output'))\n");
	test_gate_wait(&g);
	expect_output(sb,
		      "import os\n"
		      "try:\n"
		      "    os.kill(-1, 9)\n"
		      "except ProcessLookupError:\n"
		      "    pass\n"
		      "seen = []\n"
		      "for p in range(1, 201):\n"
		      "    try:\n"
		      "        os.kill(p, 0)\n"
		      "        seen.append(p)\n"
		      "    except ProcessLookupError:\n"
		      "        pass\n"
		      "print(seen, os.listdir('/output'), os.listdir('/tmp'))\n",
		      "[1] [] []\n");
	sem_post(&g.open);
	struct snapcell_result *res = test_bg_join(&a);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "alive ['mine'] ['mine']\n");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(isolation, concurrent_cells_cannot_reach_each_others_unix_sockets, .timeout = 60)
{
	/* Cells without network share one network namespace: cell a listens on an abstract and a
	 * path socket and waits at the gate while cell b tries both (Landlock's scope refuses the
	 * abstract one; the path is in a's own /tmp). */
	if (!unix_sockets_allowed())
		test_skip_or_fail("AF_UNIX listeners need Landlock ABI 6");
	struct test_gate g;
	struct snapcell_config *cfg = test_config_new();
	test_gate_add(cfg, &g, true);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct test_bg_run a;
	test_bg_start(&a, sb,
		      "import socket\n"
		      "s = socket.socket(socket.AF_UNIX); s.bind('\\0snapcell-cross'); s.listen()\n"
		      "t = socket.socket(socket.AF_UNIX); t.bind('/tmp/sock'); t.listen()\n"
		      "c = socket.socket(socket.AF_UNIX); c.connect('\\0snapcell-cross')\n"
		      "call_tool('gate')\n"
		      "print('own', s.accept()[0] is not None)\n");
	test_gate_wait(&g);
	expect_output(
		sb,
		"import socket\n" PY_ATTEMPT
		"attempt('abstract', lambda: socket.socket(socket.AF_UNIX).connect("
		"'\\0snapcell-cross'))\n"
		"attempt('path', lambda: socket.socket(socket.AF_UNIX).connect('/tmp/sock'))\n",
		"abstract PermissionError EPERM\npath FileNotFoundError ENOENT\n");
	sem_post(&g.open);
	struct snapcell_result *res = test_bg_join(&a);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "own True\n");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* Run one plants everything it can: module state, files, a thread, a child and a daemonised
 * grandchild (double fork + setsid) named so the host can look for it. */
static const char plant_code[] =
	"import os, time, ctypes, json, threading\n"
	"json.x = 1\n"
	"open('/tmp/left', 'w').write('x')\n"
	"open('/output/left', 'w').write('x')\n"
	"threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
	"if os.fork() == 0:\n"
	"    time.sleep(30)\n"
	"    os._exit(0)\n"
	"r, w = os.pipe()\n"
	"if os.fork() == 0:\n"
	"    os.setsid()\n"
	"    if os.fork() == 0:\n"
	"        ctypes.CDLL(None).prctl(15, b'%s', 0, 0, 0)\n"
	"        os.write(w, b'x')\n"
	"        time.sleep(30)\n"
	"    os._exit(0)\n"
	"os.read(r, 1)\n"
	"time.sleep(3)\n" /* while the host looks for the grandchild */
	"print('planted')\n";

Test(isolation, nothing_survives_into_the_next_run, .timeout = 60)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	char name[16], code[2048];
	snprintf(name, sizeof(name), "scghost%d", (int)(getpid() % 1000000));
	snprintf(code, sizeof(code), plant_code, name);
	struct test_bg_run plant;
	test_bg_start(&plant, sb, code);
	int seen = 0;
	for (uint64_t give_up = test_now_ms() + 20000; !seen && test_now_ms() < give_up;
	     test_pause_ms(20))
		seen = test_count_host_processes(name);
	cr_expect_eq(seen, 1, "the host sees the running grandchild (the check below can fail)");
	struct snapcell_result *res = test_bg_join(&plant);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "planted\n");
	snapcell_result_free(res);
	/* The run returns at the cell's report; the kill that follows is asynchronous. */
	cr_expect_eq(test_wait_host_processes_gone(name, 10000), 0,
		     "the grandchild outlived its cell by more than 10 s (it sleeps 30 s)");
	expect_output(sb,
		      "import json, os, threading\n"
		      "seen = []\n"
		      "for p in range(1, 201):\n"
		      "    try:\n"
		      "        os.kill(p, 0)\n"
		      "        seen.append(p)\n"
		      "    except ProcessLookupError:\n"
		      "        pass\n"
		      "print(hasattr(json, 'x'), os.listdir('/tmp'), os.listdir('/output'),\n"
		      "      threading.active_count(), seen)\n",
		      "False [] [] 1 [1]\n");
	snapcell_sandbox_free(sb);
}

/* Lists a cell's open descriptors and their kinds; FOUR_FDS is what a cell holds. */
static const char list_fds[] =
	"import os, stat\n"
	"fds = []\n"
	"for fd in range(1 << 16):\n"
	"    try:\n"
	"        m = os.fstat(fd).st_mode\n"
	"    except OSError:\n"
	"        continue\n"
	"    kind = [k for k in ('CHR', 'FIFO', 'SOCK', 'DIR', 'REG', 'LNK', 'BLK')\n"
	"            if getattr(stat, 'S_IS' + k)(m)]\n"
	"    fds.append((fd, kind[0] if kind else oct(m)))\n"
	"print(fds)\n";
#define FOUR_FDS "[(0, 'CHR'), (1, 'FIFO'), (2, 'FIFO'), (3, 'SOCK')]\n"

Test(isolation, cell_holds_only_its_four_fds)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb, list_fds, FOUR_FDS);
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}

/* One sandbox takes a series of attacks, each ending its own cell in its own way; afterwards
 * it still serves ordinary runs, including concurrent ones. */
Test(isolation, sandbox_survives_a_series_of_attacks, .timeout = 60)
{
	require_x86_64();
	static const struct {
		const char *code;
		enum snapcell_status status;
	} attacks[] = {
		{PY_SYSCALL "sc(321, 0, 0, 0)", SNAPCELL_STATUS_KILLED},
		{"import os\nwhile True: os.fork()", SNAPCELL_STATUS_ERROR},
		{"import os\nos.write(3, b'\\xff' * 64)\nimport time\ntime.sleep(5)",
		 SNAPCELL_STATUS_KILLED},
		{"import os\nos.closerange(0, 4)", SNAPCELL_STATUS_OK},
		{"import sys\nwhile True: sys.stdout.write('x' * 65536)",
		 SNAPCELL_STATUS_OUTPUT_LIMIT},
		{"x = bytearray(1 << 40)", SNAPCELL_STATUS_MEMORY},
	};
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++) {
		struct snapcell_result *res = test_run(sb, attacks[i].code);
		cr_expect_eq(res->status, attacks[i].status, "attack %zu: status %s, stderr %.300s",
			     i, snapcell_status_name(res->status), res->stderr_buf);
		snapcell_result_free(res);
	}
	struct test_bg_run par[3];
	for (int i = 0; i < 3; i++)
		test_bg_start(&par[i], sb, "print(1)");
	for (int i = 0; i < 3; i++) {
		struct snapcell_result *res = test_bg_join(&par[i]);
		expect_ok(res);
		cr_expect_str_eq(res->stdout_buf, "1\n");
		snapcell_result_free(res);
	}
	snapcell_sandbox_free(sb);
}

Test(isolation, out_of_band_data_is_refused)
{
	/* MSG_OOB on AF_UNIX sockets is the primitive of CVE-2025-38236; ordinary sends and
	 * asyncio's self-pipe still work. */
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb,
		      "import asyncio, errno, socket\n"
		      "a, b = socket.socketpair()\n"
		      "a.send(b'x')\n"
		      "for step in (lambda: a.send(b'y', socket.MSG_OOB),\n"
		      "             lambda: b.recv(1, socket.MSG_OOB),\n"
		      "             lambda: a.sendmsg([b'z'], [], socket.MSG_OOB)):\n"
		      "    try:\n"
		      "        step()\n"
		      "        print('passed')\n"
		      "    except OSError as e:\n"
		      "        print(errno.errorcode[e.errno])\n"
		      "print(b.recv(1), asyncio.run(asyncio.sleep(0, 'ok')))\n",
		      "ENOTSUP\nENOTSUP\nENOTSUP\nb'x' ok\n"); /* EOPNOTSUPP == ENOTSUP */
	snapcell_sandbox_free(sb);
}

/* The cell scans its heap and stack (mapped pages around sbrk(0) and argv[0], probed with
 * msync, since a cell has no /proc) and prints how often each marker occurs. */
#define PY_SCAN_MEMORY                                                                             \
	"import ctypes\n"                                                                          \
	"libc = ctypes.CDLL(None, use_errno=True)\n"                                               \
	"libc.sbrk.restype = ctypes.c_void_p\n"                                                    \
	"libc.sbrk.argtypes = [ctypes.c_long]\n"                                                   \
	"libc.msync.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]\n"                 \
	"libc.strdup.restype = ctypes.c_void_p\n"                                                  \
	"P = 4096\n"                                                                               \
	"def mapped(a):\n"                                                                         \
	"    return a > 0 and libc.msync(ctypes.c_void_p(a), P, 1) == 0\n"                         \
	"def region(addr):\n"                                                                      \
	"    lo = hi = addr & ~(P - 1)\n"                                                          \
	"    while mapped(lo - P):\n"                                                              \
	"        lo -= P\n"                                                                        \
	"    while mapped(hi):\n"                                                                  \
	"        hi += P\n"                                                                        \
	"    return ctypes.string_at(lo, hi - lo)\n"                                               \
	"def scan(*markers):\n"                                                                    \
	"    stack = ctypes.c_void_p.in_dll(libc, 'program_invocation_name').value\n"              \
	"    mem = region(libc.sbrk(0) - 1) + region(stack)\n"                                     \
	"    print(*(mem.count(m) for m in markers))\n"

/* Item 11: the host's work-directory path (here under a $TMPDIR named for the test) reached
 * the template in its setup message and stayed in the memory of every cell forked from it.
 * So did the memory cgroup's path (at level cgroups), and the helper's. */
Test(isolation, cell_memory_does_not_hold_the_host_work_directory_path, .timeout = 60)
{
	char parent[] = "/tmp/sc-leakmark-XXXXXX";
	cr_assert_not_null(mkdtemp(parent));
	chmod(parent, 0755);
	cr_assert_eq(setenv("TMPDIR", parent, 1), 0);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	/* The control: a C string the cell puts on its own heap is found. */
	const char *helper =
		getenv("SNAPCELL_HELPER") ? getenv("SNAPCELL_HELPER") : SC_TEST_DEFAULT_HELPER;
	const char *tail = helper + strlen(helper) / 2;
	char code[8192];
	snprintf(code, sizeof(code),
		 PY_SCAN_MEMORY
		 "control = libc.strdup(b'sc-control' + b'mark')\n"
		 "cgroup = b''.join([b'/sys/fs/', b'cgroup/'])\n"
		 "helper = b''.join([b'%.*s', b'%s'])\n"
		 "scan(b'sc-leak' + b'mark-', cgroup, helper, b'sc-control' + b'mark')\n",
		 (int)(tail - helper), helper, tail);
	expect_output(sb, code, "0 0 0 1\n");
	snapcell_sandbox_free(sb);
	unsetenv("TMPDIR");
	cr_expect_eq(rmdir(parent), 0, "%s", strerror(errno));
}

/* The sandbox's memory cgroup directory (a host path, naming the host's own cgroup: a
 * container's id) reached the template in its setup message and stayed in the memory of
 * every cell forked from it; the template needs only the descriptor the helper opened. */
Test(isolation, cell_memory_does_not_hold_the_host_cgroup_path, .timeout = 60)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(sb, "pass");
	bool cgroups = res->isolation == SNAPCELL_ISOLATION_CGROUPS;
	snapcell_result_free(res);
	if (cgroups)
		expect_output(sb,
			      PY_SCAN_MEMORY
			      "control = libc.strdup(b'sc-control' + b'mark')\n"
			      "scan(b'/sys/fs/' + b'cgroup/', b'sc-control' + b'mark')\n",
			      "0 1\n");
	snapcell_sandbox_free(sb);
}

/* Item 11: a session branched from a snapshot holds what a fresh cell holds, no descriptor
 * of the host's (a pidfd of the host process, once). */
Test(isolation, branched_session_workers_hold_only_their_four_fds, .timeout = 60)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = NULL, *branch = NULL;
	struct snapcell_snapshot *snap = NULL;
	struct snapcell_error err = {0};
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_session_run(s, "x = 1", SIZE_MAX, NULL, &res, &err), 0, "%s",
		     err.message);
	snapcell_result_free(res);
	cr_assert_eq(snapcell_session_snapshot(s, &snap, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_snapshot_new_session(snap, &branch, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_session_restore(s, snap, &err), 0, "%s", err.message);
	struct snapcell_session *both[] = {branch, s};
	for (size_t i = 0; i < 2; i++) {
		res = NULL;
		cr_assert_eq(snapcell_session_run(both[i], list_fds, SIZE_MAX, NULL, &res, &err), 0,
			     "%s", err.message);
		expect_ok(res);
		cr_expect_str_eq(res->stdout_buf, FOUR_FDS, "%s", i ? "restored" : "branch");
		snapcell_result_free(res);
	}
	snapcell_session_free(branch);
	snapcell_session_free(s);
	snapcell_snapshot_free(snap);
	snapcell_sandbox_free(sb);
}

/* A cell's statvfs figures of one path, and whether the host's statvfs of host_path gives
 * the same: blocks or filesystem id alike fail the test. */
static void expect_not_host_figures(const char *name, unsigned long long blocks,
				    unsigned long long bfree, unsigned long long fsid,
				    const char *host_path)
{
	struct statvfs hv;
	cr_assert_eq(statvfs(host_path, &hv), 0, "statvfs %s", host_path);
	unsigned long long host_fsid = hv.f_fsid;
	cr_expect_neq(blocks, (unsigned long long)hv.f_blocks, "%s: f_blocks %llu is %s's", name,
		      blocks, host_path);
	cr_expect(fsid != host_fsid || fsid == 0, "%s: f_fsid %llx is %s's", name, fsid, host_path);
	cr_expect(blocks != hv.f_blocks || bfree != hv.f_bfree || fsid != host_fsid,
		  "%s: the figures are %s's", name, host_path);
}

/* statfs of the root's read-only binds (the standard library, a Python path,
 * /input, the loader's cache) gave the host disk's size, free space and id. The directories
 * are overlays topped by the root tmpfs, the small files copies in it: no figure of the host's
 * is seen, the binds stay read-only, and /tmp still reports its own size. */
Test(isolation, statvfs_reports_no_host_disk)
{
	char *ws = test_make_tree(), *pp = test_make_tree();
	test_write_file(ws, "data.txt", "1\n");
	test_write_file(pp, "mod_statvfs.py", "X = 1\n");
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_workspace(cfg, ws, NULL), 0);
	cr_assert_eq(snapcell_config_add_python_path(cfg, pp, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res = test_run(
		sb, "import os, shutil, mod_statvfs\n"
		    "stdlib = os.path.dirname(os.__file__)\n"
		    "paths = [('input', '/input'), ('stdlib', stdlib),\n"
		    "         ('pypath', os.path.dirname(mod_statvfs.__file__)), ('root', '/'),\n"
		    "         ('ldcache', '/etc/ld.so.cache'), ('input_file', '/input/data.txt')]\n"
		    "for name, p in paths:\n"
		    "    v = os.statvfs(p)\n"
		    "    ro = bool(v.f_flag & os.ST_RDONLY)\n"
		    "    print(name, v.f_blocks, v.f_bfree, v.f_fsid & (2**64 - 1), int(ro))\n"
		    "for p in ['/input/new.txt', stdlib + '/new.py', '/input/data.txt']:\n"
		    "    try:\n"
		    "        open(p, 'a').close()\n"
		    "        print('wrote', p)\n"
		    "    except OSError as e:\n"
		    "        print('write', e.errno == 30)\n"
		    "print('tmp', shutil.disk_usage('/tmp').total)\n"
		    "print('stdlib_dir', stdlib)\n");
	expect_ok(res);
	char name[32], stdlib[512] = "";
	unsigned long long blocks, bfree, fsid, tmp_total = 0;
	int ro, n_figures = 0, n_refused = 0;
	for (char *line = res->stdout_buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (sscanf(line, "write %31s", name) == 1) {
			cr_expect_str_eq(name, "True", "a write to a read-only bind: %s", line);
			n_refused++;
		} else if (sscanf(line, "tmp %llu", &tmp_total) == 1 ||
			   sscanf(line, "stdlib_dir %511s", stdlib) == 1) {
			continue;
		} else if (sscanf(line, "%31s %llu %llu %llu %d", name, &blocks, &bfree, &fsid,
				  &ro) == 5) {
			n_figures++;
			cr_expect_eq(ro, 1, "%s is not read-only", name);
			expect_not_host_figures(name, blocks, bfree, fsid, "/");
			expect_not_host_figures(name, blocks, bfree, fsid, "/tmp");
			expect_not_host_figures(name, blocks, bfree, fsid, "/dev/shm");
			expect_not_host_figures(name, blocks, bfree, fsid, ws);
			expect_not_host_figures(name, blocks, bfree, fsid, pp);
			expect_not_host_figures(name, blocks, bfree, fsid, "/etc/ld.so.cache");
		} else {
			cr_assert_fail("unexpected line: %s", line);
		}
	}
	cr_assert_eq(n_figures, 6, "%s", res->stdout_buf);
	cr_assert_eq(n_refused, 3, "%s", res->stdout_buf);
	cr_assert_str_neq(stdlib, "");
	struct statvfs hv;
	cr_assert_eq(statvfs(stdlib, &hv), 0, "the host has no %s", stdlib);
	snapcell_result_free(res);
	/* The stdlib's own host filesystem too (a pyenv build may live on another disk). */
	res = test_run(sb, "import os\n"
			   "v = os.statvfs(os.path.dirname(os.__file__))\n"
			   "print(v.f_blocks, v.f_bfree, v.f_fsid & (2**64 - 1))\n");
	expect_ok(res);
	cr_assert_eq(sscanf(res->stdout_buf, "%llu %llu %llu", &blocks, &bfree, &fsid), 3);
	expect_not_host_figures("stdlib", blocks, bfree, fsid, stdlib);
	snapcell_result_free(res);
	cr_expect_eq(tmp_total, 64ULL << 20, "/tmp is not the default 64 MiB tmpfs");
	snapcell_sandbox_free(sb);
	test_remove_tree(ws);
	test_remove_tree(pp);
	free(ws);
	free(pp);
}

/* The root tmpfs had tmpfs's default inode cap, half the host's
 * pages, so statfs of the root and of every overlay it tops told a cell the host's RAM to the
 * page (3,085,473 inodes: 23.5 GiB). Its cap is fixed now. (/dev's nodes are the host's:
 * docs/security.md.) */
Test(isolation, statfs_of_the_root_tells_not_the_host_ram)
{
	long pages = sysconf(_SC_PHYS_PAGES);
	cr_assert_gt(pages, 0);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res =
		test_run(sb, "import os\n"
			     "for p in ('/', os.path.dirname(os.__file__), '/etc/ld.so.cache'):\n"
			     "    print(os.statvfs(p).f_files)\n");
	expect_ok(res);
	unsigned long long files[3] = {0};
	cr_assert_eq(sscanf(res->stdout_buf, "%llu\n%llu\n%llu", &files[0], &files[1], &files[2]),
		     3, "%s", res->stdout_buf);
	for (int i = 0; i < 3; i++) {
		cr_expect_neq(files[i], (unsigned long long)pages / 2, "path %d: %llu inodes", i,
			      files[i]);
		cr_expect_leq(files[i], 4096, "path %d: %llu inodes", i, files[i]);
	}
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* The host's side of locks_on_the_stdlib_stay_in_its_overlay: whether the host may lock the
 * file the call names ({"path": "/..."}) while the cell holds it locked. */
static int try_host_lock(void *user, const char *args, char **result)
{
	(void)user;
	char path[1024] = "";
	const char *at = strstr(args, "\"path\"");
	at = at ? strchr(at + 6, '/') : NULL;
	size_t len = at ? strcspn(at, "\"") : 0;
	if (len == 0 || len >= sizeof(path)) {
		*result = strdup("bad arguments");
		return -1;
	}
	memcpy(path, at, len);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool free_ = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
	if (fd >= 0)
		close(fd);
	*result = strdup(fd < 0 ? "\"unopened\"" : free_ ? "\"free\"" : "\"held\"");
	return 0;
}

/* A cell's flock on a file of the stdlib (the host's, bound read-only) kept
 * the host's processes from locking it for the run's length. The stdlib is an overlay now, and
 * a lock taken through it belongs to the overlay's inode: the host, asked while the cell holds
 * the lock, takes it at once. */
Test(isolation, locks_on_the_stdlib_stay_in_its_overlay)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "host_lock", "Locks a host file.", NULL,
					      SNAPCELL_APPROVAL_NEVER, try_host_lock, NULL, NULL),
		     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	expect_output(sb,
		      "import fcntl, json, os\n"
		      "path = json.__file__\n"
		      "fd = os.open(path, os.O_RDONLY)\n"
		      "fcntl.flock(fd, fcntl.LOCK_EX)\n"
		      "print(call_tool('host_lock', path=path))\n",
		      "free\n");
	snapcell_sandbox_free(sb);
}

/* CLOCK_BOOTTIME and CLOCK_MONOTONIC counted from the host's boot, so a cell read
 * the host's uptime (14,160 s). Each sandbox's cells have a time namespace whose clocks start
 * near 0 at its creation; the wall clock stays the host's. */
Test(isolation, clocks_count_from_the_sandbox_not_the_host_boot)
{
	struct timespec boot;
	cr_assert_eq(clock_gettime(CLOCK_BOOTTIME, &boot), 0);
	if (boot.tv_sec < 600)
		criterion_skip_test("the host booted less than 10 minutes ago: its uptime and the "
				    "sandbox's cannot be told apart");
	if (access("/proc/self/timens_offsets", F_OK) != 0)
		criterion_skip_test(
			"this kernel has no time namespaces (Linux 5.6, CONFIG_TIME_NS)");
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(
		sb, "import os, time\n"
		    "print(int(time.monotonic()), int(time.clock_gettime(time.CLOCK_BOOTTIME)))\n"
		    "try:\n"
		    "    print(int(float(open('/proc/uptime').read().split()[0])))\n"
		    "except OSError:\n"
		    "    print(0)\n"
		    "print(int(time.time()))\n");
	expect_ok(res);
	long long mono = -1, booted = -1, uptime = -1, wall = 0;
	cr_assert_eq(
		sscanf(res->stdout_buf, "%lld %lld\n%lld\n%lld", &mono, &booted, &uptime, &wall), 4,
		"%s", res->stdout_buf);
	cr_expect(mono >= 0 && mono < 600, "monotonic %lld (host boot time %lld)", mono,
		  (long long)boot.tv_sec);
	cr_expect(booted >= 0 && booted < 600, "boottime %lld", booted);
	cr_expect(uptime >= 0 && uptime < 600, "/proc/uptime %lld", uptime);
	cr_expect(llabs(wall - (long long)time(NULL)) < 60, "wall clock %lld", wall);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* A cell cannot give itself other clocks. A time namespace of its own (unshare, setns, clone3),
 * its namespace's offsets (/proc/self/timens_offsets: no /proc) and setting or steering the
 * clocks are all refused. */
Test(isolation, a_cell_cannot_set_its_clocks)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(
		sb,
		"import ctypes, errno, os\n"
		"libc = ctypes.CDLL(None, use_errno=True)\n"
		"def err(rc):\n"
		"    return errno.errorcode.get(ctypes.get_errno(), '?') if rc < 0 else 'done'\n"
		"print(err(libc.unshare(0x80)), err(libc.setns(-1, 0x80)))\n"
		"args = (ctypes.c_uint64 * 11)(0x80, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0)\n"
		"print(err(libc.syscall(435, args, 88)))\n"
		"print(os.path.exists('/proc/self/timens_offsets'))\n"
		"ts = (ctypes.c_long * 2)(0, 0)\n"
		"print([err(libc.clock_settime(c, ts)) for c in (0, 1, 7)])\n"
		"tx = ctypes.create_string_buffer(512)\n"
		"print(err(libc.adjtimex(tx)), err(libc.syscall(305, 1, tx)))\n",
		"EPERM EPERM\n"
		"ENOSYS\n"
		"False\n"
		"['EPERM', 'EPERM', 'EPERM']\n"
		"EPERM EPERM\n");
	snapcell_sandbox_free(sb);
}

/* sysinfo(2) told a cell the host's task count, load, uptime and RAM. It is
 * refused as absent (ENOSYS), and what calls it through libc goes on. */
Test(isolation, sysinfo_reports_nothing_of_the_host)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb,
		      "import ctypes, os\n"
		      "libc = ctypes.CDLL(None, use_errno=True)\n"
		      "buf = ctypes.create_string_buffer(b'\\xaa' * 256, 256)\n"
		      "rc = libc.sysinfo(buf)\n"
		      "print(rc, ctypes.get_errno() == 38, set(buf.raw) == {0xaa})\n"
		      "os.sysconf('SC_PHYS_PAGES')\n"
		      "print(sorted([3, 1, 2]))\n",
		      "-1 True True\n[1, 2, 3]\n");
	snapcell_sandbox_free(sb);
}

/* The host's root, which the helper's pivot leaves at the root's /tmp, and the guest module's
 * bind are detached (by the helper's child, off the template's path) before the template
 * parks a cell: its mount namespace, which every cell's copies, holds the root's mounts
 * alone (/proc/<pid>/mountinfo names them from the template's root). */
Test(isolation, the_templates_mounts_are_the_roots_alone)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0);
	char path[64], line[8192];
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", st.template_pid);
	FILE *f = fopen(path, "re");
	cr_assert_not_null(f, "%s", path);
	int n = 0;
	while (fgets(line, sizeof(line), f)) {
		char point[4096];
		cr_assert_eq(sscanf(line, "%*s %*s %*s %*s %4095s", point), 1, "%s", line);
		cr_expect(strcmp(point, "/tmp") != 0 && strncmp(point, "/tmp/", 5) != 0 &&
				  strcmp(point, "/proc") != 0 && strcmp(point, "/sys") != 0 &&
				  strncmp(point, "/.snapcell/guest", 16) != 0,
			  "the template still has %s mounted: %s", point, line);
		n++;
	}
	fclose(f);
	cr_expect(n > 0);
	expect_healthy(sb);
	snapcell_sandbox_free(sb);
}
