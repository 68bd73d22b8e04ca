/* The public contract where a sandbox fills it: the ABI room in library-filled structs, and
 * run options checked by size. */
#include "helpers.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static int no_tool(void *user, const char *args, char **result)
{
	*result = strdup("null");
	return 0;
}

Test(contract, library_filled_structs_have_their_reserved_words_zeroed)
{
	struct snapcell_config *cfg = snapcell_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "t", "d", NULL, SNAPCELL_APPROVAL_NEVER, no_tool,
					      NULL, NULL),
		     0);
	struct snapcell_tool_info info;
	memset(&info, 0xa5, sizeof(info));
	cr_assert_eq(snapcell_config_tool_info(cfg, 0, &info, NULL), 0);
	cr_expect_str_eq(info.name, "t");
	for (size_t i = 0; i < sizeof(info.reserved) / sizeof(info.reserved[0]); i++)
		cr_expect_eq(info.reserved[i], 0);
	snapcell_config_free(cfg);

	static struct snapcell_probe p;
	memset(&p, 0xa5, sizeof(p));
	cr_assert_eq(snapcell_probe_host(&p, NULL), 0);
	for (int m = 0; m < SNAPCELL_MECH_SLOTS; m++) {
		cr_expect_eq(p.mech[m].name == NULL, m >= SNAPCELL_MECH__COUNT, "slot %d", m);
		cr_expect_eq(p.mech[m].reserved[0] | p.mech[m].reserved[1], 0);
	}
	for (size_t i = 0; i < sizeof(p.reserved) / sizeof(p.reserved[0]); i++)
		cr_expect_eq(p.reserved[i], 0);
}

Test(contract, sandbox_stats_reserved_words_are_zeroed)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_sandbox_stats st;
	struct snapcell_error err = {0};
	memset(&st, 0xa5, sizeof(st));
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, &err), 0, "%s", err.message);
	for (size_t i = 0; i < sizeof(st.reserved) / sizeof(st.reserved[0]); i++)
		cr_expect_eq(st.reserved[i], 0);
	cr_expect_eq(snapcell_sandbox_stats(sb, NULL, &err), SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, "stats: NULL argument");
	snapcell_sandbox_free(sb);
}

/* Run options from a newer header: larger, with fields this library does not know. */
struct newer_run_options {
	struct snapcell_run_options v1;
	uint64_t future_field;
};

Test(contract, run_options_are_checked_by_size)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	struct snapcell_run_options unsized = {0};
	cr_expect_eq(snapcell_sandbox_run(sb, "print(1)", SIZE_MAX, &unsized, &res, &err),
		     SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "sizeof(struct snapcell_run_options)"), "%s", err.message);
	struct newer_run_options newer = {{.size = sizeof(newer)}, 7};
	cr_expect_eq(snapcell_sandbox_run(sb, "print(1)", SIZE_MAX, &newer.v1, &res, &err),
		     SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "does not know"), "%s", err.message);
	newer.future_field = 0; /* unset fields of a newer header are fine */
	cr_assert_eq(snapcell_sandbox_run(sb, "print(1)", SIZE_MAX, &newer.v1, &res, &err), 0, "%s",
		     err.message);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "1\n");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* The template is the caller's child. A caller that ignores SIGCHLD (children reaped by the
 * kernel, waitpid then fails with ECHILD) keeps a working sandbox, sessions included, and
 * freeing it returns. */
Test(contract, a_caller_that_ignores_sigchld_keeps_working, .timeout = 60)
{
	signal(SIGCHLD, SIG_IGN);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb, "print(6 * 7)", "42\n");
	struct snapcell_session *s = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_session_run(s, "x = 1", SIZE_MAX, NULL, &res, &err), 0, "%s",
		     err.message);
	expect_ok(res);
	snapcell_result_free(res);
	snapcell_session_free(s);
	uint64_t start = test_now_ms();
	snapcell_sandbox_free(sb);
	cr_expect_lt(test_now_ms() - start, 5000);
	/* A helper that dies is still reported with its words; how it ended went to the kernel. */
	struct snapcell_config *cfg = snapcell_config_new();
	cr_assert_eq(snapcell_config_set_helper(cfg, test_build_path("dying-helper-loader"), &err),
		     0, "%s", err.message);
	cr_expect_eq(snapcell_sandbox_new(cfg, &sb, &err), SNAPCELL_E_HELPER);
	cr_expect(strstr(err.message,
			 " ended (status unknown: SIGCHLD ignored or reaped) before its "
			 "greeting: "),
		  "%s", err.message);
	cr_expect(strstr(err.message, "libpython3.11.so.1.0: cannot open shared object file"), "%s",
		  err.message);
	snapcell_config_free(cfg);
}

/* The helper's spawn child shares the caller's memory until its exec (src/isolate/spawn.c),
 * so it runs with every signal blocked and the helper starts from an empty mask: the template
 * holds none of the signals the caller's thread blocks, and the caller's mask is as it was;
 * so is its dumpable flag, which the child's switch to the sandbox's uid clears in the memory
 * it shares when the caller is root. */
Test(contract, the_template_has_a_signal_mask_of_its_own_and_the_callers_is_kept, .timeout = 60)
{
	sigset_t mine, now;
	sigemptyset(&mine);
	sigaddset(&mine, SIGUSR2);
	sigaddset(&mine, SIGTERM);
	cr_assert_eq(pthread_sigmask(SIG_BLOCK, &mine, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	cr_assert_eq(pthread_sigmask(SIG_BLOCK, NULL, &now), 0);
	cr_expect(sigismember(&now, SIGUSR2) && sigismember(&now, SIGTERM) &&
		  !sigismember(&now, SIGUSR1) && !sigismember(&now, SIGINT));
	cr_expect_eq(prctl(PR_GET_DUMPABLE), 1, "the caller is no longer dumpable");
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0);
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", st.template_pid);
	FILE *f = fopen(path, "re");
	cr_assert_not_null(f);
	unsigned long long blocked = ~0ull;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigBlk: %llx", &blocked) == 1)
			break;
	fclose(f);
	cr_expect_eq(blocked & (1ull << (SIGUSR2 - 1) | 1ull << (SIGTERM - 1)), 0,
		     "the template blocks %llx", blocked);
	expect_output(sb, "print(1)", "1\n");
	snapcell_sandbox_free(sb);
}

static _Atomic int reaped_template, template_pid;

static void reap_all(int sig)
{
	(void)sig;
	int saved = errno;
	pid_t pid;
	while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
		if (pid == template_pid)
			reaped_template = 1;
	errno = saved;
}

/* A SIGCHLD handler that reaps every child with waitpid(-1) takes the template's status when
 * it ends, which the library does not need (it waits by pidfd): a run then fails clearly, and
 * freeing the sandbox returns. */
Test(contract, a_sigchld_handler_that_reaps_every_child_takes_nothing_the_sandbox_needs,
     .timeout = 60)
{
	struct sigaction sa = {.sa_handler = reap_all, .sa_flags = SA_RESTART};
	sigemptyset(&sa.sa_mask);
	cr_assert_eq(sigaction(SIGCHLD, &sa, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_output(sb, "print(6 * 7)", "42\n");
	struct snapcell_sandbox_stats st;
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, NULL), 0);
	template_pid = st.template_pid;
	cr_assert_eq(kill(st.template_pid, SIGKILL), 0);
	uint64_t give_up = test_now_ms() + 10000;
	while (!reaped_template && test_now_ms() < give_up)
		test_pause_ms(5);
	cr_assert(reaped_template, "the handler never reaped the template");
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_sandbox_run(sb, "print(1)", SIZE_MAX, NULL, &res, &err),
		     SNAPCELL_E_TEMPLATE);
	cr_expect_str_eq(err.message, "the template exited");
	uint64_t start = test_now_ms();
	snapcell_sandbox_free(sb);
	cr_expect_lt(test_now_ms() - start, 5000);
}

/* How many threads of this process, other than the caller's and those in old (a list ending
 * with 0), and how many of them leave sig unblocked (/proc/self/task/TID/status's SigBlk);
 * their ids in tids when it is not NULL (room for 64). */
static int new_threads(const int *old, int sig, int *unblocked, int *tids)
{
	char path[64], line[256];
	int self = (int)syscall(SYS_gettid), n = 0;
	*unblocked = 0;
	DIR *d = opendir("/proc/self/task");
	cr_assert_not_null(d);
	struct dirent *e;
	while ((e = readdir(d))) {
		int tid = atoi(e->d_name), known = tid <= 0 || tid == self;
		for (const int *o = old; o && *o && !known; o++)
			known = *o == tid;
		if (known || n >= 64)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
		FILE *f = fopen(path, "re");
		unsigned long long blocked = ~0ull;
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "SigBlk: %llx", &blocked) == 1)
				break;
		if (f)
			fclose(f);
		if (tids)
			tids[n] = tid;
		n++;
		*unblocked += !(blocked & 1ull << (sig - 1));
	}
	closedir(d);
	if (tids)
		tids[n] = 0;
	return n;
}

/* The threads the library starts (here a paused run's reaper and the pre-fault learner) block
 * every signal: a signal sent to the process reaches the caller's threads only. */
Test(contract, threads_the_library_starts_block_every_signal, .timeout = 60)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "t", "d", NULL, SNAPCELL_APPROVAL_NEVER, no_tool,
					      NULL, NULL),
		     0);
	cr_assert_eq(snapcell_config_set_tool_decision(cfg, "t", true, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	int unblocked, before[65];
	new_threads(NULL, SIGINT, &unblocked, before); /* the test runner's own, if any */
	for (int i = 0; i < 3; i++)		       /* the learner reads the second cell's run */
		expect_output(sb, "print(1)", "1\n");
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_sandbox_run(sb, "tools.t()", SIZE_MAX, NULL, &res, &err), 0, "%s",
		     err.message);
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED);
	int threads = new_threads(before, SIGINT, &unblocked, NULL);
	/* No run of a sandbox that resets its cells is learned from (prefault.c): no learner. */
	if (snapcell_sandbox_reuse(sb))
		cr_expect_eq(threads, 1, "the reaper");
	else
		cr_expect_eq(threads, 2, "the reaper and the learner");
	cr_expect_eq(unblocked, 0, "%d of %d threads take SIGINT", unblocked, threads);
	new_threads(before, SIGTERM, &unblocked, NULL);
	cr_expect_eq(unblocked, 0, "%d of %d threads take SIGTERM", unblocked, threads);
	struct snapcell_result *next = NULL;
	cr_expect_eq(snapcell_sandbox_resume(sb, res->pending->id, SNAPCELL_VERDICT_REJECTED, NULL,
					     NULL, NULL, &next, &err),
		     0, "%s", err.message);
	snapcell_result_free(next);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}
