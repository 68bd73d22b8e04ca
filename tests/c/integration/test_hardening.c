/* Adversarial findings: code in a cell hurting the host or other sandboxes (core
 * dumps, per-user kernel quotas, host memory through tool calls, forged reports, tool names).
 * Each test failed before its fix. */
#define _GNU_SOURCE
#include "helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

/* Item 5: a crash must not stream the cell's memory to a pipe core_pattern handler (they
 * ignore RLIMIT_CORE=0); only a non-dumpable process is safe from them. */
Test(hardening, cells_are_not_dumpable)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb,
		      "import ctypes\n"
		      "libc = ctypes.CDLL(None, use_errno=True)\n"
		      "print(libc.prctl(3, 0, 0, 0, 0))\n" /* PR_GET_DUMPABLE */
		      "print(libc.prctl(4, 1, 0, 0, 0), ctypes.get_errno() != 0)\n" /* SET */
		      "print(libc.prctl(3, 0, 0, 0, 0))\n"
		      "import os\n"
		      "import sys; sys.stdout.flush()\n"
		      "if os.fork() == 0:\n"
		      "    print(libc.prctl(3, 0, 0, 0, 0), flush=True)\n"
		      "    os._exit(0)\n"
		      "os.wait()\n",
		      "0\n-1 True\n0\n0\n");
	snapcell_sandbox_free(sb);
}

/* Item 2: pending signals are counted per outside uid (through every user namespace level),
 * so a cell that queues real-time signals up to the host's RLIMIT_SIGPENDING made sigqueue
 * fail in the host user's processes and in other sandboxes' cells. The test lowers its own
 * limit first so the flood is quick; the cells inherited it before the fix. */
Test(hardening, queued_signals_in_a_cell_cannot_starve_the_host_or_other_sandboxes, .timeout = 60)
{
	struct rlimit rl = {4096, 4096};
	cr_assert_eq(setrlimit(RLIMIT_SIGPENDING, &rl), 0);
	sigset_t rt;
	sigemptyset(&rt);
	sigaddset(&rt, SIGRTMIN + 1);
	cr_assert_eq(pthread_sigmask(SIG_BLOCK, &rt, NULL), 0);

	struct test_gate g;
	struct snapcell_config *cfg = test_config_new();
	test_gate_add(cfg, &g, true);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_sandbox *other = test_sandbox(NULL);
	struct test_bg_run flood;
	test_bg_start(&flood, sb,
		      "import signal, os\n"
		      "sig = signal.SIGRTMIN + 1\n"
		      /* pid 1 of a namespace drops signals it has no handler for */
		      "signal.signal(sig, lambda *a: None)\n"
		      "signal.pthread_sigmask(signal.SIG_BLOCK, {sig})\n"
		      "for _ in range(10000):\n"
		      "    os.kill(os.getpid(), sig)\n" /* queued up to the limit, then dropped */
		      "call_tool('gate')\n"
		      "n = 0\n"
		      "while signal.sigtimedwait({sig}, 0) is not None:\n"
		      "    n += 1\n"
		      "print(n)\n");
	test_gate_wait(&g);

	/* The host user's own queue still works: sigqueue and a signalling timer. */
	union sigval v = {0};
	struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN + 1};
	timer_t timer;
	int made = timer_create(CLOCK_MONOTONIC, &sev, &timer);
	cr_expect_eq(made, 0, "the host's timer_create failed while a cell held its queue: %s",
		     strerror(errno));
	if (made == 0)
		timer_delete(timer);
	for (int i = 0; i < 16; i++)
		cr_expect_eq(sigqueue(getpid(), SIGRTMIN + 1, v), 0,
			     "the host's sigqueue failed while a cell held its queue: %s",
			     strerror(errno));
	struct timespec zero = {0, 0};
	while (sigtimedwait(&rt, NULL, &zero) > 0)
		;
	/* So does another sandbox's cell. */
	expect_output(other,
		      "import os, signal\n"
		      "sig = signal.SIGRTMIN + 1\n"
		      "signal.signal(sig, lambda *a: None)\n"
		      "signal.pthread_sigmask(signal.SIG_BLOCK, {sig})\n"
		      "for _ in range(16):\n"
		      "    os.kill(os.getpid(), sig)\n"
		      "n = 0\n"
		      "while signal.sigtimedwait({sig}, 0) is not None:\n"
		      "    n += 1\n"
		      "print(n)\n",
		      "16\n");
	sem_post(&g.open);
	struct snapcell_result *res = test_bg_join(&flood);
	expect_ok(res);
	long queued = strtol(res->stdout_buf, NULL, 10);
	cr_expect(queued > 0 && queued <= 1024, "a cell queued %ld signals", queued);
	snapcell_result_free(res);
	snapcell_sandbox_free(other);
	snapcell_sandbox_free(sb);
}

static int echo_tool(void *user, const char *args, char **result)
{
	(void)user;
	*result = strdup(args);
	return 0;
}

static long max_rss_kib(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

/* Item 3: parsing a tool call's arguments must not cost the host more than the frame: one
 * 14 MB call of {} objects took the host to 1.3 GB and seconds of CPU in jansson before any
 * schema check. */
Test(hardening, a_call_of_millions_of_empty_objects_is_refused_cheaply, .timeout = 60)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "echo", "", NULL, SNAPCELL_APPROVAL_NEVER,
					      echo_tool, NULL, NULL),
		     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	expect_output(sb, "print(call_tool('echo', a=[{}] * 3))", "{'a': [{}, {}, {}]}\n");
	long before = max_rss_kib();
	uint64_t start = test_now_ms();
	expect_output(sb,
		      "try:\n"
		      "    call_tool('echo', a=[{}] * 3_500_000)\n"
		      "except ToolError as e:\n"
		      "    print(e)\n",
		      "invalid arguments for tool 'echo': more than 262144 values\n");
	uint64_t took = test_now_ms() - start;
	long grew_mib = (max_rss_kib() - before) / 1024;
	/* The frame itself (14 MB) is read into the host; nothing near 1 GB may follow it. */
	cr_expect_lt(grew_mib, 100, "the host grew by %ld MiB", grew_mib);
	/* The bound on memory above is what shows the values were counted, not built; this one
	 * only catches a refusal as slow as the run's whole wall limit. */
	cr_expect_lt(took, 20000, "the refused call took %llu ms", (unsigned long long)took);
	/* Just under the bound still parses. */
	expect_output(sb, "print(len(call_tool('echo', a=[0] * 200_000)['a']))", "200000\n");
	snapcell_sandbox_free(sb);
}

/* Item 9: code that writes a DONE frame itself on its frame socket (fd 3) must not make the
 * host report setup-failure (the code did not run) with zero CPU and memory: a setup failure
 * is the template's word, and a cell that exits is measured by the template. */
Test(hardening, a_forged_setup_failure_report_is_not_believed)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	static const char forge[] =
		"import os, struct, time\n"
		"t = time.process_time()\n"
		"x = bytearray(32 << 20)\n"
		"while time.process_time() - t < 0.05:\n"
		"    pass\n"
		/* status 6 = setup-failure, no flags, exit 0, no CPU, no memory */
		"payload = struct.pack('<B3xIiIQQ', 6, 0, 0, 0, 0, 0)\n"
		"os.write(3, struct.pack('<I', 1 + len(payload)) + b'D' + payload)\n"
		"%s\n";
	char code[sizeof(forge) + 64];
	const char *endings[] = {"os._exit(125)", "os._exit(0)", "time.sleep(0.3)"};
	for (size_t i = 0; i < sizeof(endings) / sizeof(endings[0]); i++) {
		snprintf(code, sizeof(code), forge, endings[i]);
		struct snapcell_result *res = test_run(sb, code);
		cr_expect_neq(res->status, SNAPCELL_STATUS_SETUP_FAILURE,
			      "%s: a forged DONE made the host report setup-failure", endings[i]);
		/* Going on after it, the cell's own DONE is a frame after DONE: killed. */
		cr_expect_eq(res->status, i < 2 ? SNAPCELL_STATUS_ERROR : SNAPCELL_STATUS_KILLED,
			     "%s: status %s", endings[i], snapcell_status_name(res->status));
		cr_expect_gt(res->cpu_us, 20000, "%s: cpu %llu us", endings[i],
			     (unsigned long long)res->cpu_us);
		cr_expect_gt(res->peak_rss_bytes, 32u << 20, "%s: peak %llu", endings[i],
			     (unsigned long long)res->peak_rss_bytes);
		if (res->isolation == SNAPCELL_ISOLATION_CGROUPS)
			cr_expect_gt(res->peak_memory_bytes, 32u << 20, "%s: charged %llu",
				     endings[i], (unsigned long long)res->peak_memory_bytes);
		snapcell_result_free(res);
	}
	expect_output(sb, "print(1)", "1\n");
	snapcell_sandbox_free(sb);
}

/* Item 10: tool names from the cell. A name past the limit is a ToolError, not a dead cell,
 * with a sane limit in the message; the log shows the whole name a frame carried, escaped, so
 * "echo\0forged" is not logged as echo and a name that is not UTF-8 is not lost. */
Test(hardening, hostile_tool_names_raise_and_are_logged_as_sent, .timeout = 60)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "echo", "", NULL, SNAPCELL_APPROVAL_NEVER,
					      echo_tool, NULL, NULL),
		     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	expect_output(sb,
		      "for n in ('a' * 129, 'a' * (16 << 20), 'echo\\0forged'):\n"
		      "    try:\n"
		      "        call_tool(n)\n"
		      "    except ToolError as e:\n"
		      "        m = str(e)\n"
		      "        print(len(m) < 300, m.split(': ', 1)[1])\n"
		      "print(call_tool('echo', x=1))\n",
		      "True a tool name of 129 bytes; the limit is 128\n"
		      "True a tool name of 16777216 bytes; the limit is 128\n"
		      "True a NUL byte in the tool name\n"
		      "{'x': 1}\n");
	/* Frames written by hand, past the bridge's checks. */
	struct snapcell_result *res = test_run(
		sb, "import os, struct\n"
		    "def call(payload):\n"
		    "    payload = struct.pack('<IB', 7, 0) + payload\n"
		    "    os.write(3, struct.pack('<I', 1 + len(payload)) + b'C' + payload)\n"
		    "    n = struct.unpack('<I', os.read(3, 4))[0]\n"
		    "    got = b''\n"
		    "    while len(got) < n:\n"
		    "        got += os.read(3, n - len(got))\n"
		    "    print(got[5], got[6:].decode('utf-8', 'replace'))\n"
		    "call(b'echo\\0forged\\0{}')\n"
		    "call(b'\\xff\\xfeecho\\0{}')\n"
		    "call(b'a' * 129 + b'\\0{}')\n");
	expect_ok(res);
	cr_expect(strstr(res->stdout_buf, "0 unknown tool 'echo\\x00forged'"), "%s",
		  res->stdout_buf);
	cr_expect(strstr(res->stdout_buf, "0 unknown tool 'aaaa"), "%s", res->stdout_buf);
	cr_expect(strstr(res->stdout_buf, "a name of 129 bytes; the limit is 128"), "%s",
		  res->stdout_buf);
	cr_assert_eq(res->n_tool_calls, 3);
	cr_expect_str_eq(res->tool_calls[0].name, "echo\\x00forged");
	cr_expect_str_eq(res->tool_calls[1].name, "\\xff\\xfeecho");
	cr_expect(!res->tool_calls[0].ok && !res->tool_calls[1].ok && !res->tool_calls[2].ok);
	cr_expect_eq(strlen(res->tool_calls[2].name), SNAPCELL_TOOL_NAME_MAX);
	cr_expect(strstr(res->tool_calls[2].name, "..."), "%s", res->tool_calls[2].name);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

static int count_workdirs(const char *parent)
{
	DIR *d = opendir(parent);
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)))
		n += !strncmp(e->d_name, "snapcell-", 9);
	if (d)
		closedir(d);
	return n;
}

/* Item 1 (second half): a host process that dies without freeing its sandbox leaves its work
 * directory, staged inputs included, in /dev/shm. The next sandbox made with the same parent
 * directory removes it; a live sandbox's directory and one without a lock are left alone. */
Test(hardening, stale_work_directories_of_dead_owners_are_reaped, .timeout = 60)
{
	char parent[] = "/tmp/snapcell-reap-test-XXXXXX";
	cr_assert_not_null(mkdtemp(parent));
	cr_assert_eq(chmod(parent, 0711), 0); /* the sandbox uid walks to its root */
	cr_assert_eq(setenv("TMPDIR", parent, 1), 0);
	char input[PATH_MAX];
	snprintf(input, sizeof(input), "%s.input", parent);
	cr_assert_eq(mkdir(input, 0755), 0);
	char file[PATH_MAX + 16];
	snprintf(file, sizeof(file), "%s/big", input);
	FILE *f = fopen(file, "w");
	cr_assert_not_null(f);
	cr_assert_eq(ftruncate(fileno(f), 1 << 20), 0);
	fclose(f);

	struct snapcell_sandbox *live = test_sandbox(NULL); /* lives through the reaping */
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct snapcell_config *cfg = test_config_new();
		struct snapcell_sandbox *sb;
		if (snapcell_config_set_workspace(cfg, input, NULL) < 0 ||
		    snapcell_sandbox_new(cfg, &sb, NULL) < 0)
			_exit(1);
		_exit(0); /* dies owning it */
	}
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	char legacy[PATH_MAX + 32];
	snprintf(legacy, sizeof(legacy), "%s/snapcell-legacy", parent); /* 15 bytes, no lock */
	cr_assert_eq(mkdir(legacy, 0700), 0);
	cr_assert_eq(count_workdirs(parent), 3, "the dead owner's directory is there");

	struct snapcell_sandbox *next = test_sandbox(NULL);
	cr_expect_eq(count_workdirs(parent), 3, "live, legacy and the new one; the stale one gone");
	expect_output(live, "print(1)", "1\n");
	expect_output(next, "print(2)", "2\n");
	snapcell_sandbox_free(next);
	snapcell_sandbox_free(live);
	cr_expect_eq(count_workdirs(parent), 1, "only the legacy directory is left");
	rmdir(legacy);
	unlink(file);
	rmdir(input);
	cr_expect_eq(rmdir(parent), 0, "%s", strerror(errno));
}

/* ---- faults injected: each ends in a clear error, and the next run or sandbox works ---- */

/* Waits until a process has exited: a zombie or gone. The template is the init of its cells'
 * pid namespace, and the kernel makes it a zombie only once every cell of it is gone too. */
static void wait_exited(pid_t pid)
{
	for (int i = 0; i < 1000; i++, test_pause_ms(5)) {
		char path[64], line[512];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
		FILE *f = fopen(path, "re");
		if (!f)
			return;
		char *end = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
		fclose(f);
		if (end && (end[2] == 'Z' || end[2] == 'X'))
			return;
	}
	cr_assert_fail("process %d has not exited in 5 s", (int)pid);
}

Test(faults, the_template_killed_mid_run_is_a_clear_error_and_a_new_sandbox_works, .timeout = 60)
{
	struct test_gate g;
	struct snapcell_config *cfg = test_config_new();
	test_gate_add(cfg, &g, true);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0);
	struct test_bg_run run;
	test_bg_start(&run, sb, "call_tool('gate')\nprint('after')\n");
	test_gate_wait(&g);
	cr_assert_eq(kill(st.template_pid, SIGKILL), 0);
	wait_exited(st.template_pid); /* and its cells with it, before the tool answers */
	sem_post(&g.open);
	pthread_join(run.thread, NULL);
	/* The cell died with its template (it is in the template's pid namespace): killed, with
	 * a note saying why; before, the missing exit record read as exit status 0, "ok". */
	cr_assert_not_null(run.res);
	cr_expect_eq(run.res->status, SNAPCELL_STATUS_KILLED, "status %s",
		     snapcell_status_name(run.res->status));
	cr_expect_null(strstr(run.res->stdout_buf, "after"));
	cr_expect(strstr(run.res->stderr_buf, "template exited during the run"), "%s",
		  run.res->stderr_buf);
	snapcell_result_free(run.res);
	/* The sandbox says its template is gone, at once. */
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	uint64_t start = test_now_ms();
	int rc = snapcell_sandbox_run(sb, "print(1)", SIZE_MAX, NULL, &res, &err);
	cr_expect_eq(rc, SNAPCELL_E_TEMPLATE, "rc %d (%s)", rc, err.message);
	cr_expect(strstr(err.message, "template"), "%s", err.message);
	cr_expect_lt(test_now_ms() - start, 5000);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	struct snapcell_sandbox *next = test_sandbox(NULL);
	expect_output(next, "print(2)", "2\n");
	snapcell_sandbox_free(next);
}

Test(faults, a_missing_helper_is_a_clear_error_and_the_next_sandbox_works)
{
	char copy[] = "/tmp/snapcell-helper-XXXXXX";
	int fd = mkstemp(copy);
	cr_assert_geq(fd, 0);
	FILE *src = fopen(test_helper_path(), "rb");
	cr_assert_not_null(src);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), src)) > 0)
		cr_assert_eq(write(fd, buf, n), (ssize_t)n);
	fclose(src);
	fchmod(fd, 0755);
	close(fd);
	struct snapcell_config *cfg = snapcell_config_new();
	cr_assert_eq(snapcell_config_set_helper(cfg, copy, NULL), 0);
	unlink(copy); /* gone between configuration and start */
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_error err = {0};
	int fds = test_open_fds();
	int rc = snapcell_sandbox_new(cfg, &sb, &err);
	cr_expect_eq(rc, -ENOENT, "rc %d: %s", rc, err.message);
	cr_expect(strstr(err.message, copy), "%s", err.message);
	cr_expect_null(sb);
	cr_expect_eq(test_open_fds(), fds, "descriptors leaked");
	snapcell_config_free(cfg);
	struct snapcell_sandbox *next = test_sandbox(NULL);
	expect_output(next, "print(3)", "3\n");
	snapcell_sandbox_free(next);
}

Test(faults, host_descriptor_exhaustion_is_a_clear_error_and_leaks_nothing, .timeout = 60)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb, "print(0)", "0\n");
	struct rlimit saved;
	cr_assert_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
	int before = test_open_fds();
	/* No descriptor to spare: a run and a new sandbox must fail cleanly. */
	int highest = 0;
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (atoi(e->d_name) > highest)
			highest = atoi(e->d_name);
	closedir(d);
	struct rlimit tight = {(rlim_t)highest + 1, saved.rlim_max};
	/* Fill every free slot below the limit. */
	int fillers[4096], n_fill = 0;
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &tight), 0);
	int f;
	while (n_fill < 4096 && (f = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		fillers[n_fill++] = f;
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_sandbox_run(sb, "print(1)", SIZE_MAX, NULL, &res, &err);
	if (rc == 0) {
		/* The run may have had what it needed already (a parked cell's fds); then it ran.
		 */
		expect_ok(res);
		snapcell_result_free(res);
	} else {
		cr_expect(rc == -EMFILE || rc == SNAPCELL_E_TEMPLATE, "rc %d: %s", rc, err.message);
		cr_expect_neq(err.message[0], 0);
	}
	struct snapcell_sandbox *other = NULL;
	struct snapcell_config *cfg = test_config_new();
	rc = snapcell_sandbox_new(cfg, &other, &err);
	snapcell_config_free(cfg);
	cr_expect_eq(rc, -EMFILE, "rc %d: %s", rc, err.message);
	cr_expect(strstr(err.message, "Too many open files"), "%s", err.message);
	for (int i = 0; i < n_fill; i++)
		close(fillers[i]);
	cr_assert_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
	/* Back to normal: the sandbox works and nothing leaked. */
	for (int i = 0; i < 3; i++)
		expect_output(sb, "print(2)", "2\n");
	snapcell_sandbox_free(sb);
	struct snapcell_sandbox *next = test_sandbox(NULL);
	expect_output(next, "print(4)", "4\n");
	snapcell_sandbox_free(next);
	cr_expect_leq(test_open_fds(), before, "descriptors leaked: %d, was %d", test_open_fds(),
		      before);
}

static int raising_tool(void *user, const char *args, char **result)
{
	(void)args;
	*result = user ? strdup("the tool broke: disk on fire") : NULL;
	return -1;
}

Test(faults, a_tool_that_fails_raises_tool_error_and_the_cell_goes_on)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "broken", "", NULL, SNAPCELL_APPROVAL_NEVER,
					      raising_tool, (void *)1, NULL),
		     0);
	cr_assert_eq(snapcell_config_add_tool(cfg, "mute", "", NULL, SNAPCELL_APPROVAL_NEVER,
					      raising_tool, NULL, NULL),
		     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	expect_output(sb,
		      "for n in ('broken', 'mute'):\n"
		      "    try:\n"
		      "        call_tool(n, x=1)\n"
		      "    except ToolError as e:\n"
		      "        print(e)\n"
		      "print('on')\n",
		      "the tool broke: disk on fire\n"
		      "tool 'mute' returned no message\n"
		      "on\n");
	expect_output(sb, "print(5)", "5\n");
	snapcell_sandbox_free(sb);
}

/* The work directory's filesystem full: a 2 MiB tmpfs of 64 inodes the test mounts in a
 * directory of its own and names with $TMPDIR (where the library makes work directories),
 * never the machine's /tmp or /dev/shm; in a mount namespace of the test's own, so a failed
 * assertion cannot leave it mounted. Out of blocks, a new sandbox cannot stage its workspace;
 * out of inodes, it cannot make its work directory: each a clear error naming what failed,
 * leaving nothing behind. A live sandbox keeps running (its cells need no room there: each
 * /output is a tmpfs of its own), and once space is freed new sandboxes work again. */
#define FULL_FS_OPTIONS "size=2m,nr_inodes=64"

/* Fills dir with files of bytes_each until the filesystem refuses; returns how many. */
static int fill(const char *dir, size_t bytes_each)
{
	static char block[4096];
	for (int i = 0;; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/filler-%d", dir, i);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			cr_assert_eq(errno, ENOSPC, "filling %s: %s", dir, strerror(errno));
			return i;
		}
		ssize_t n = 1;
		for (size_t done = 0; done < bytes_each && n > 0; done += (size_t)n)
			n = write(fd, block, sizeof(block));
		close(fd);
		if (n < 0) {
			cr_assert_eq(errno, ENOSPC, "filling %s: %s", dir, strerror(errno));
			return i + 1;
		}
	}
}

static void unfill(const char *dir, int n)
{
	for (int i = 0; i < n; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/filler-%d", dir, i);
		cr_assert_eq(unlink(path), 0, "%s: %s", path, strerror(errno));
	}
}

static int new_sandbox(struct snapcell_config *cfg, struct snapcell_error *err)
{
	struct snapcell_sandbox *sb = NULL;
	int rc = snapcell_sandbox_new(cfg, &sb, err);
	cr_expect_null(sb);
	snapcell_sandbox_free(sb);
	return rc;
}

static const char write_output[] = "import os\n"
				   "with open('/output/big.bin', 'wb') as f:\n"
				   "    f.write(os.urandom(512 * 1024))\n"
				   "print('written')\n";

Test(faults, a_full_work_directory_filesystem_is_a_clear_error_and_freeing_it_recovers,
     .timeout = 120)
{
	if (geteuid() != 0)
		criterion_skip_test("mounting the small tmpfs needs root");
	char mnt[] = "/tmp/snapcell-fullfs-XXXXXX";
	cr_assert_not_null(mkdtemp(mnt));
	cr_assert_eq(unshare(CLONE_NEWNS), 0, "%s", strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
	cr_assert_eq(mount("tmpfs", mnt, "tmpfs", MS_NOSUID | MS_NODEV, FULL_FS_OPTIONS), 0,
		     "mount a tmpfs on %s: %s", mnt, strerror(errno));
	cr_assert_eq(setenv("TMPDIR", mnt, 1), 0);
	char *ws = test_make_tree();
	char *data = malloc(256 * 1024 + 1);
	cr_assert_not_null(data);
	memset(data, 'x', 256 * 1024);
	data[256 * 1024] = 0;
	test_write_file(ws, "data.bin", data);
	free(data);
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_workspace(cfg, ws, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb, "print(1)", "1\n");
	cr_expect_eq(count_workdirs(mnt), 1, "the work directory is on the small tmpfs");

	/* Out of blocks. */
	int n = fill(mnt, SIZE_MAX);
	struct snapcell_error err = {0};
	int rc = new_sandbox(cfg, &err);
	cr_expect_eq(rc, -ENOSPC, "rc %d: %s", rc, err.message);
	cr_expect(strstr(err.message, "No space left on device"), "%s", err.message);
	cr_expect(strstr(err.message, "data.bin"), "the message names the file: %s", err.message);
	cr_expect_eq(count_workdirs(mnt), 1, "the failed sandbox's work directory is gone");
	expect_output(sb, write_output, "written\n");
	unfill(mnt, n);

	/* Out of inodes. */
	n = fill(mnt, 0);
	memset(&err, 0, sizeof(err));
	rc = new_sandbox(cfg, &err);
	cr_expect_eq(rc, -ENOSPC, "rc %d: %s", rc, err.message);
	cr_expect(strstr(err.message, "work directory"), "%s", err.message);
	cr_expect(strstr(err.message, mnt), "the message names where: %s", err.message);
	cr_expect(strstr(err.message, "No space left on device"), "%s", err.message);
	expect_output(sb, "print(2)", "2\n");
	unfill(mnt, n);
	cr_expect_eq(count_workdirs(mnt), 1, "the failed sandbox's work directory is gone");

	/* Space freed: a new sandbox stages its files, the old one goes on. */
	struct snapcell_sandbox *other = test_sandbox(cfg);
	snapcell_config_free(cfg);
	expect_output(other, "import os\nprint(os.path.getsize('/input/data.bin'))", "262144\n");
	snapcell_sandbox_free(other);
	struct snapcell_result *res = test_run(sb, write_output);
	expect_ok(res);
	cr_expect_eq(res->n_artifacts, 1);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	cr_expect_eq(count_workdirs(mnt), 0);
	unsetenv("TMPDIR");
	test_remove_tree(ws);
	free(ws);
	cr_expect_eq(umount2(mnt, MNT_DETACH), 0, "%s", strerror(errno));
	cr_expect_eq(rmdir(mnt), 0, "%s", strerror(errno));
}

/* Item 1: a session's /output was collected while its processes lived. A child that keeps
 * renaming a big directory onto names the walker has listed but not yet opened made it walk
 * the same files again and again: one collection lasted an hour at full CPU. The walk now
 * reads a family whose every process but the anchor is stopped, so it sees the tree once, as
 * it was: every file exactly once, no walk bound hit (20,000 names times 1,000 files would
 * be 20 million visits). */
Test(hardening, a_live_writer_cannot_make_session_collection_hang, .timeout = 120)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_PROCESSES, 16, NULL), 0);
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_OUTPUT_DEPTH, 2, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_session *s;
	cr_assert_eq(snapcell_session_new(sb, &s, NULL), 0);
	uint64_t start = test_now_ms();
	struct snapcell_result *res;
	struct snapcell_error err;
	cr_assert_eq(
		snapcell_session_run(s,
				     "import os\n"
				     "N = 20000\n"
				     "for k in range(N):\n"
				     "    os.mkdir(f'/output/d{k:05}')\n"
				     "for i in range(1000):\n"
				     "    open(f'/output/d00000/f{i:04}', 'w').close()\n"
				     /* B moves one name on each time the walker lists it (readdir
				      * updates its atime after a rename changed its ctime): the
				      * walker finds it again at the next name it opens. */
				     "r, w = os.pipe()\n"
				     "if os.fork() == 0:\n"
				     "    name = lambda k: f'/output/d{k:05}'\n"
				     "    def seen(k):\n" /* a placeholder the walker opened:
							     readdir set its atime */
				     "        st = os.stat(name(k))\n"
				     "        return st.st_atime_ns > st.st_ctime_ns\n"
				     "    k = 0\n"
				     "    a = os.stat(name(0)).st_atime_ns\n"
				     "    os.write(w, b'1')\n" /* ready: the run may end */
				     "    while True:\n"
				     "        j = k + 1\n"
				     "        while j < N and seen(j):\n"
				     "            j += 1\n"
				     "        if j + 3 >= N:\n"
				     "            os._exit(0)\n"
				     "        if j > k + 1 or os.stat(name(k)).st_atime_ns != a:\n"
				     "            t = j if j == k + 1 else j + 3\n"
				     "            os.rename(name(k), name(t))\n"
				     "            k, a = t, os.stat(name(t)).st_atime_ns\n"
				     "os.read(r, 1)\n"
				     "import time\n"
				     "print(time.monotonic())\n",
				     SIZE_MAX, NULL, &res, &err),
		0, "%s", err.message);
	uint64_t took = test_now_ms() - start;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	double collect_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - atof(res->stdout_buf);
	cr_log_info("collection: %.2f s; ", collect_s);
	cr_log_info("collection with a live renamer: %llu ms, %zu artifacts, %zu skipped, "
		    "flags %#x",
		    (unsigned long long)took, res->n_artifacts, res->n_skipped,
		    res->output_limits_hit);
	/* Before, the walk visited the 1,000 files at each of 20,000 names until its budget ran
	 * out, and collected some of them several times under different names. */
	cr_expect_eq(res->output_limits_hit, 0, "flags %#x", res->output_limits_hit);
	cr_expect_eq(res->n_skipped, 0);
	cr_assert_eq(res->n_artifacts, 1000);
	const char *dir = res->artifacts[0].path;
	size_t dir_len = strcspn(dir, "/");
	for (size_t i = 0; i < res->n_artifacts; i++) {
		char want[32];
		snprintf(want, sizeof(want), "%.*s/f%04zu", (int)dir_len, dir, i);
		cr_expect_str_eq(res->artifacts[i].path, want, "one directory, each file once");
	}
	snapcell_result_free(res);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}
