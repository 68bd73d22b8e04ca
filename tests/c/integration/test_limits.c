/* Each limit ends (or hampers) a run with the status and flag that name it, close to the limit,
 * and leaves the sandbox and the host fit for the next run. */
#define _GNU_SOURCE
#include "helpers.h"

#include <dirent.h>
#include <malloc.h>
#include <signal.h>
#include <sys/wait.h>

#define MIB (1024ull * 1024)

struct limit {
	enum snapcell_limit which;
	uint64_t value;
};

#define SANDBOX_WITH(...)                                                                          \
	sandbox_with((const struct limit[]){__VA_ARGS__},                                          \
		     sizeof((const struct limit[]){__VA_ARGS__}) / sizeof(struct limit))

static struct snapcell_sandbox *sandbox_with(const struct limit *limits, size_t n)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_not_null(cfg);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(snapcell_config_set_limit(cfg, limits[i].which, limits[i].value, NULL),
			     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

static void expect_ended_by(const struct snapcell_result *res, enum snapcell_status status,
			    uint32_t flag)
{
	cr_expect_eq(res->status, status, "status %s, want %s; stderr: %.500s",
		     snapcell_status_name(res->status), snapcell_status_name(status),
		     res->stderr_buf);
	cr_expect_eq(res->limits_hit & flag, flag, "limits_hit %#x lacks %#x", res->limits_hit,
		     flag);
}

static void expect_in_stderr(const struct snapcell_result *res, const char *text)
{
	cr_expect(strstr(res->stderr_buf, text), "'%s' not in stderr: %.500s", text,
		  res->stderr_buf);
}

/* The next run on the same sandbox is ordinary again. */
static void expect_recovers(struct snapcell_sandbox *sb)
{
	struct snapcell_result *res = test_run(sb, "print(1)");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "1\n");
	cr_expect_eq(res->limits_hit, 0);
	snapcell_result_free(res);
}

static bool all_bytes_are(const char *buf, size_t len, char c)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != c)
			return false;
	return true;
}

Test(limits, wall_clock_ends_a_busy_loop)
{
	struct snapcell_sandbox *sb = SANDBOX_WITH({SNAPCELL_LIMIT_WALL_MS, 1000});
	struct snapcell_result *res = test_run(sb, "while True: pass");
	expect_ended_by(res, SNAPCELL_STATUS_TIMEOUT, SNAPCELL_HIT_WALL);
	cr_expect_eq(res->term_signal, SIGKILL);
	cr_expect_geq(res->wall_us, 1000000);
	/* Killed at the limit: below the limit plus the 1 s the run gives output to drain after a
	 * kill, which a cell left half alive would take; the rest is a slow machine's room. */
	cr_expect_lt(res->wall_us, 1900000, "wall %llu us", (unsigned long long)res->wall_us);
	snapcell_result_free(res);
	expect_recovers(sb);
	snapcell_sandbox_free(sb);
}

/* Every catchable signal ignored and blocked, a stopped child and a spinning child: only
 * SIGKILL to the cell's pid 1 ends it, and it must end all of it. */
static const char stubborn_code[] =
	"import os, signal, ctypes\n"
	"for s in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}:\n"
	"    try:\n"
	"        signal.signal(s, signal.SIG_IGN)\n"
	"    except (OSError, ValueError):\n"
	"        pass\n"
	"signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())\n"
	"if os.fork() == 0:\n"
	"    os.kill(os.getpid(), signal.SIGSTOP)\n"
	"if os.fork() == 0:\n"
	"    ctypes.CDLL(None).prctl(15, b'%s', 0, 0, 0)\n"
	"    while True: pass\n"
	"while True: pass\n";

Test(limits, wall_clock_kills_code_that_ignores_every_signal)
{
	struct snapcell_sandbox *sb = SANDBOX_WITH({SNAPCELL_LIMIT_WALL_MS, 1000});
	char name[16], code[1024];
	snprintf(name, sizeof(name), "scspin%d", (int)(getpid() % 1000000));
	snprintf(code, sizeof(code), stubborn_code, name);
	struct snapcell_result *res = test_run(sb, code);
	expect_ended_by(res, SNAPCELL_STATUS_TIMEOUT, SNAPCELL_HIT_WALL);
	cr_expect_eq(res->term_signal, SIGKILL);
	cr_expect_lt(res->wall_us, 1900000, "wall %llu us", (unsigned long long)res->wall_us);
	snapcell_result_free(res);
	cr_expect_eq(test_count_host_processes(name), 0, "a spinning child outlived its cell");
	expect_recovers(sb);
	snapcell_sandbox_free(sb);
}

/* The limit is the soft RLIMIT_CPU; the hard one a second later is only a backstop, so the
 * cell must not get much more than the configured CPU time. */
Test(limits, cpu_time_ends_a_busy_loop, .timeout = 60)
{
	struct snapcell_sandbox *sb =
		SANDBOX_WITH({SNAPCELL_LIMIT_CPU_MS, 1000}, {SNAPCELL_LIMIT_WALL_MS, 10000});
	struct snapcell_result *res = test_run(sb, "while True: pass");
	expect_ended_by(res, SNAPCELL_STATUS_TIMEOUT, SNAPCELL_HIT_CPU);
	cr_expect_eq(res->limits_hit & SNAPCELL_HIT_WALL, 0);
	/* RLIMIT_CPU counts the cell's warm-up too (before the code's own CPU time starts),
	 * which takes a few hundred ms on a loaded machine. */
	cr_expect_geq(res->cpu_us, 500000, "cpu %llu us", (unsigned long long)res->cpu_us);
	cr_expect_lt(res->cpu_us, 1500000, "a 1 s CPU limit ended the cell after %llu us of CPU",
		     (unsigned long long)res->cpu_us);
	/* Ended by its CPU limit, not the 10 s wall limit (above): how long 1 s of CPU takes on
	 * a shared machine is its load's figure. */
	snapcell_result_free(res);
	expect_recovers(sb);
	snapcell_sandbox_free(sb);
}

Test(limits, huge_allocation_is_a_memory_error)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(sb, "x = bytearray(20 * 2**30)");
	expect_ended_by(res, SNAPCELL_STATUS_MEMORY, SNAPCELL_HIT_MEMORY);
	expect_in_stderr(res, "MemoryError");
	cr_expect_eq(res->term_signal, 0);
	snapcell_result_free(res);
	expect_recovers(sb);
	snapcell_sandbox_free(sb);
}

Test(limits, gradual_growth_is_a_memory_error, .timeout = 60)
{
	struct snapcell_sandbox *sb = SANDBOX_WITH({SNAPCELL_LIMIT_MEMORY_BYTES, 256 * MIB});
	struct snapcell_result *res =
		test_run(sb, "chunks = []\nwhile True:\n    chunks.append(bytearray(2**20))\n");
	expect_ended_by(res, SNAPCELL_STATUS_MEMORY, SNAPCELL_HIT_MEMORY);
	expect_in_stderr(res, "MemoryError");
	cr_expect_leq(res->peak_rss_bytes, 256 * MIB, "peak %llu",
		      (unsigned long long)res->peak_rss_bytes);
	cr_expect_gt(res->peak_rss_bytes, 128 * MIB, "the chunks were really touched");
	if (res->isolation == SNAPCELL_ISOLATION_CGROUPS)
		cr_expect(res->peak_memory_bytes > 128 * MIB && res->peak_memory_bytes <= 256 * MIB,
			  "charged %llu", (unsigned long long)res->peak_memory_bytes);
	snapcell_result_free(res);
	expect_recovers(sb);
	snapcell_sandbox_free(sb);
}

/* The host itself can still make processes. */
static void expect_host_can_fork(void)
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0, "host fork: %s", strerror(errno));
	if (pid == 0)
		_exit(7);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 7);
}

static void expect_processes_limit(const char *code)
{
	struct snapcell_sandbox *sb = SANDBOX_WITH({SNAPCELL_LIMIT_WALL_MS, 10000});
	struct snapcell_result *res = test_run(sb, code);
	cr_expect(res->status == SNAPCELL_STATUS_ERROR || res->status == SNAPCELL_STATUS_KILLED,
		  "status %s", snapcell_status_name(res->status));
	cr_expect(res->limits_hit & SNAPCELL_HIT_PROCESSES, "limits_hit %#x", res->limits_hit);
	/* Ended well before the 10 s wall limit (a timeout would not be either status above). */
	cr_expect_lt(res->wall_us, 9000000, "wall %llu us", (unsigned long long)res->wall_us);
	snapcell_result_free(res);
	expect_recovers(sb);
	expect_host_can_fork();
	struct snapcell_sandbox *other = test_sandbox(NULL);
	expect_recovers(other);
	snapcell_sandbox_free(other);
	snapcell_sandbox_free(sb);
}

Test(limits, fork_bomb_hits_the_processes_limit, .timeout = 60)
{
	expect_processes_limit("import os\nwhile True: os.fork()\n");
}

Test(limits, thread_bomb_hits_the_processes_limit, .timeout = 60)
{
	expect_processes_limit(
		"import threading, time\n"
		"while True:\n"
		"    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n");
}

static void expect_stream_capped(enum snapcell_limit limit, uint32_t flag, const char *code,
				 char fill)
{
	const size_t cap = 100000; /* not a multiple of the writer's chunk */
	struct snapcell_sandbox *sb = SANDBOX_WITH({limit, cap}, {SNAPCELL_LIMIT_WALL_MS, 10000});
	struct snapcell_result *res = test_run(sb, code);
	expect_ended_by(res, SNAPCELL_STATUS_OUTPUT_LIMIT, flag);
	bool is_out = limit == SNAPCELL_LIMIT_STDOUT_BYTES;
	const char *kept = is_out ? res->stdout_buf : res->stderr_buf;
	size_t kept_len = is_out ? res->stdout_len : res->stderr_len;
	cr_expect(is_out ? res->stdout_truncated : res->stderr_truncated);
	cr_expect(!(is_out ? res->stderr_truncated : res->stdout_truncated));
	cr_expect_eq(kept_len, cap);
	cr_expect(all_bytes_are(kept, kept_len, fill), "the kept bytes are the code's output");
	cr_expect_lt(res->wall_us, 9000000, "wall %llu us: not ended at the cap",
		     (unsigned long long)res->wall_us);
	snapcell_result_free(res);
	expect_recovers(sb);
	snapcell_sandbox_free(sb);
}

Test(limits, stdout_flood_stops_at_the_cap)
{
	expect_stream_capped(SNAPCELL_LIMIT_STDOUT_BYTES, SNAPCELL_HIT_STDOUT,
			     "import sys\nchunk = b'x' * 65536\n"
			     "for _ in range(16384):\n    sys.stdout.buffer.write(chunk)\n",
			     'x');
}

Test(limits, stderr_flood_stops_at_the_cap)
{
	expect_stream_capped(SNAPCELL_LIMIT_STDERR_BYTES, SNAPCELL_HIT_STDERR,
			     "import sys\nchunk = b'e' * 65536\n"
			     "for _ in range(16384):\n    sys.stderr.buffer.write(chunk)\n",
			     'e');
}

Test(limits, one_line_without_newline_stops_at_the_cap)
{
	expect_stream_capped(SNAPCELL_LIMIT_STDOUT_BYTES, SNAPCELL_HIT_STDOUT,
			     "import sys\nsys.stdout.write('y' * (32 << 20))\n", 'y');
}

/* The streams grow as output comes: a run under the largest limits that prints a line holds
 * a small block for each, not the limit (a block of the limit's size was taken up front
 * before, and handed over as the result's buffer). */
Test(limits, a_large_output_limit_costs_nothing_until_output_comes)
{
	const uint64_t max = 1024 * MIB; /* the limits' largest value */
	struct snapcell_sandbox *sb = SANDBOX_WITH({SNAPCELL_LIMIT_STDOUT_BYTES, max},
						   {SNAPCELL_LIMIT_STDERR_BYTES, max});
	struct snapcell_result *res =
		test_run(sb, "import sys\nprint('small')\nprint('err', file=sys.stderr)\n");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "small\n");
	cr_expect_str_eq(res->stderr_buf, "err\n");
	cr_expect(!res->stdout_truncated && !res->stderr_truncated);
	size_t out_block = malloc_usable_size(res->stdout_buf);
	size_t err_block = malloc_usable_size(res->stderr_buf);
	cr_expect_lt(out_block, 64 * 1024, "stdout holds %zu bytes for 6", out_block);
	cr_expect_lt(err_block, 64 * 1024, "stderr holds %zu bytes for 4", err_block);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* Output of exactly the limit is kept whole and is not cut; one byte more is cut to it. */
Test(limits, output_of_exactly_the_limit_is_not_truncated)
{
	const size_t cap = 100000;
	struct snapcell_sandbox *sb = SANDBOX_WITH({SNAPCELL_LIMIT_STDOUT_BYTES, cap},
						   {SNAPCELL_LIMIT_STDERR_BYTES, cap});
	struct snapcell_result *res = test_run(sb, "import sys\n"
						   "for _ in range(100000 // 8):\n"
						   "    sys.stdout.buffer.write(b'o' * 8)\n"
						   "sys.stderr.buffer.write(b'e' * 100000)\n");
	expect_ok(res);
	cr_expect_eq(res->stdout_len, cap);
	cr_expect_eq(res->stderr_len, cap);
	cr_expect(!res->stdout_truncated && !res->stderr_truncated);
	cr_expect_eq(res->limits_hit, 0, "limits hit: %#x", (unsigned)res->limits_hit);
	cr_expect(all_bytes_are(res->stdout_buf, res->stdout_len, 'o'));
	cr_expect(all_bytes_are(res->stderr_buf, res->stderr_len, 'e'));
	cr_expect_eq(res->stdout_buf[cap], 0);
	snapcell_result_free(res);
	res = test_run(sb, "import sys\nsys.stdout.buffer.write(b'p' * 100001)\n");
	expect_ended_by(res, SNAPCELL_STATUS_OUTPUT_LIMIT, SNAPCELL_HIT_STDOUT);
	cr_expect(res->stdout_truncated);
	cr_expect_eq(res->stdout_len, cap);
	cr_expect(all_bytes_are(res->stdout_buf, res->stdout_len, 'p'));
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(limits, file_size_limit_fails_the_write)
{
	struct snapcell_sandbox *sb = SANDBOX_WITH({SNAPCELL_LIMIT_FILE_BYTES, 1 * MIB});
	struct snapcell_result *res =
		test_run(sb, "open('/tmp/fits', 'wb').write(b'x' * 2**20)\n"
			     "print('fits')\n"
			     "open('/tmp/x', 'wb').write(b'x' * 2 * 2**20)\n");
	expect_ended_by(res, SNAPCELL_STATUS_ERROR, SNAPCELL_HIT_FILE_SIZE);
	expect_in_stderr(res, "File too large");
	cr_expect_str_eq(res->stdout_buf, "fits\n");
	cr_expect_eq(res->term_signal, 0, "SIGXFSZ must not kill the cell");
	snapcell_result_free(res);
	res = test_run(sb, "open('/output/x', 'wb').write(b'x' * 2 * 2**20)\n");
	expect_ended_by(res, SNAPCELL_STATUS_ERROR, SNAPCELL_HIT_FILE_SIZE);
	expect_in_stderr(res, "File too large");
	snapcell_result_free(res);
	expect_recovers(sb);
	snapcell_sandbox_free(sb);
}

Test(limits, full_tmp_is_no_space_left)
{
	struct snapcell_sandbox *sb = SANDBOX_WITH({SNAPCELL_LIMIT_TMP_BYTES, 1 * MIB},
						   {SNAPCELL_LIMIT_FILE_BYTES, 8 * MIB});
	static const char *const attacks[] = {
		"open('/tmp/x', 'wb').write(b'x' * 2 * 2**20)\n",
		/* /dev/shm is the same tmpfs: one budget */
		"open('/tmp/a', 'wb').write(b'x' * 600 * 1024)\n"
		"open('/dev/shm/b', 'wb').write(b'x' * 600 * 1024)\n",
		/* inodes run out before bytes do */
		"for i in range(100000):\n    open(f'/tmp/{i}', 'w').close()\n",
	};
	for (size_t i = 0; i < sizeof(attacks) / sizeof(attacks[0]); i++) {
		struct snapcell_result *res = test_run(sb, attacks[i]);
		expect_ended_by(res, SNAPCELL_STATUS_ERROR, SNAPCELL_HIT_TMP);
		expect_in_stderr(res, "No space left");
		snapcell_result_free(res);
		expect_recovers(sb);
	}
	snapcell_sandbox_free(sb);
}

Test(limits, open_files_limit_is_too_many_open_files)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res =
		test_run(sb, "files = [open('/dev/null') for _ in range(10000)]\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	expect_in_stderr(res, "OSError: [Errno 24] Too many open files");
	snapcell_result_free(res);
	expect_recovers(sb);
	snapcell_sandbox_free(sb);
	/* The configured number is the cell's: fds 0-3 are taken, so 60 more fit in 64. */
	sb = SANDBOX_WITH({SNAPCELL_LIMIT_OPEN_FILES, 64});
	expect_output(sb,
		      "files = []\n"
		      "try:\n"
		      "    while True:\n"
		      "        files.append(open('/dev/null'))\n"
		      "except OSError as e:\n"
		      "    print(len(files), e.errno)\n",
		      "60 24\n");
	expect_recovers(sb);
	snapcell_sandbox_free(sb);
}

Test(limits, runaway_recursion_is_an_ordinary_error)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(sb, "def f():\n    f()\nf()\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR, "status %s",
		     snapcell_status_name(res->status));
	cr_expect_eq(res->term_signal, 0);
	cr_expect_eq(res->exit_code, 1);
	expect_in_stderr(res, "RecursionError: maximum recursion depth exceeded");
	snapcell_result_free(res);
	expect_recovers(sb);
	snapcell_sandbox_free(sb);
}
