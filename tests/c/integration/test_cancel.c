/* Cancellation: a token fired from another thread or a signal handler ends a run at once as
 * "cancelled"; a token fired before the run means it never starts; sessions survive the way
 * they do a timeout. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>

#include "helpers.h"

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct snapcell_cancel *new_token(void)
{
	struct snapcell_cancel *c = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_cancel_new(&c, &err), 0, "%s", err.message);
	return c;
}

/* Fires the token once the code has reached the gate: the run is in progress. */
struct firing {
	struct test_gate gate;
	struct snapcell_cancel *token;
};

static void *fire_at_gate(void *arg)
{
	struct firing *f = arg;
	test_gate_wait(&f->gate);
	snapcell_cancel_fire(f->token);
	return NULL;
}

static struct snapcell_sandbox *gated_sandbox(struct test_gate *g)
{
	struct snapcell_config *cfg = test_config_new();
	test_gate_add(cfg, g, false);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

static struct snapcell_result *run_with(struct snapcell_sandbox *sb, struct snapcell_session *s,
					const char *code, struct snapcell_cancel *c)
{
	struct snapcell_run_options opts = {.size = sizeof(opts), .cancel = c};
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	int rc = s ? snapcell_session_run(s, code, SIZE_MAX, &opts, &res, &err)
		   : snapcell_sandbox_run(sb, code, SIZE_MAX, &opts, &res, &err);
	cr_assert_eq(rc, 0, "run: %s", err.message);
	return res;
}

Test(cancel, fired_from_another_thread_ends_a_busy_loop_at_once)
{
	struct firing f;
	struct snapcell_sandbox *sb = gated_sandbox(&f.gate); /* wall clock: 30 s */
	struct snapcell_cancel *c = f.token = new_token();
	pthread_t t;
	uint64_t start = now_ms();
	pthread_create(&t, NULL, fire_at_gate, &f);
	struct snapcell_result *res = run_with(
		sb, NULL, "print('started', flush=True)\ncall_tool('gate')\nwhile True: pass", c);
	uint64_t took = now_ms() - start;
	pthread_join(t, NULL);
	cr_expect_eq(res->status, SNAPCELL_STATUS_CANCELLED, "%s: %s",
		     snapcell_status_name(res->status), res->stderr_buf);
	cr_expect_lt(took, 5000, "cancelled after %llu ms", (unsigned long long)took);
	cr_expect_str_eq(res->stdout_buf, "started\n", "output so far is kept");
	cr_expect_eq(res->limits_hit, 0);
	snapcell_result_free(res);
	/* The sandbox goes on: a later run (without the token) works. */
	expect_output(sb, "print(6 * 7)", "42\n");
	snapcell_cancel_free(c);
	snapcell_sandbox_free(sb);
}

Test(cancel, a_run_started_with_a_fired_token_never_runs)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_cancel *c = new_token();
	snapcell_cancel_fire(c);
	snapcell_cancel_fire(c); /* firing twice is fine */
	struct snapcell_result *res = run_with(sb, NULL, "print('ran')", c);
	cr_expect_eq(res->status, SNAPCELL_STATUS_CANCELLED);
	cr_expect_eq(res->stdout_len, 0);
	cr_expect_str_eq(res->stdout_buf, "");
	cr_expect_str_eq(res->stderr_buf, "");
	cr_expect_eq(res->wall_us, 0);
	snapcell_result_free(res);
	/* One-shot: it stays fired for every later run too. */
	res = run_with(sb, NULL, "print('ran')", c);
	cr_expect_eq(res->status, SNAPCELL_STATUS_CANCELLED);
	snapcell_result_free(res);
	res = run_with(sb, NULL, "print('ran')", NULL);
	expect_ok(res);
	snapcell_result_free(res);
	snapcell_cancel_free(c);
	snapcell_cancel_fire(NULL);
	snapcell_cancel_free(NULL);
	snapcell_sandbox_free(sb);
}

static struct snapcell_cancel *signal_token;

static void on_alarm(int sig)
{
	snapcell_cancel_fire(signal_token);
}

/* Arms the signal from inside the run (a tool callback runs on the run's thread), so it
 * arrives while the run waits on the cell, whatever the machine's speed. */
static int arm_alarm(void *user, const char *args, char **result)
{
	struct itimerval it = {.it_value = {0, 20000}};
	setitimer(ITIMER_REAL, &it, NULL);
	*result = strdup("null");
	return 0;
}

Test(cancel, can_be_fired_from_a_signal_handler)
{
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_add_tool(cfg, "arm", "", NULL, SNAPCELL_APPROVAL_NEVER, arm_alarm, NULL,
				 NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	signal_token = new_token();
	struct sigaction sa = {.sa_handler = on_alarm};
	sigaction(SIGALRM, &sa, NULL);
	uint64_t start = now_ms();
	struct snapcell_result *res =
		run_with(sb, NULL, "import time\ncall_tool('arm')\ntime.sleep(60)", signal_token);
	cr_expect_eq(res->status, SNAPCELL_STATUS_CANCELLED, "%s",
		     snapcell_status_name(res->status));
	cr_expect_lt(now_ms() - start, 5000);
	snapcell_result_free(res);
	snapcell_cancel_free(signal_token);
	snapcell_sandbox_free(sb);
}

Test(cancel, a_cancelled_session_run_ends_the_session_which_a_snapshot_revives)
{
	struct firing f;
	struct snapcell_sandbox *sb = gated_sandbox(&f.gate);
	struct snapcell_session *s = NULL;
	struct snapcell_snapshot *snap = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	struct snapcell_result *res = run_with(NULL, s, "x = 41", NULL);
	expect_ok(res);
	snapcell_result_free(res);
	cr_assert_eq(snapcell_session_snapshot(s, &snap, &err), 0, "%s", err.message);

	/* Fired before the run: the session is untouched and keeps its state. */
	struct snapcell_cancel *fired = new_token();
	snapcell_cancel_fire(fired);
	res = run_with(NULL, s, "x = 0", fired);
	cr_expect_eq(res->status, SNAPCELL_STATUS_CANCELLED);
	snapcell_result_free(res);
	res = run_with(NULL, s, "print(x)", NULL);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "41\n");
	snapcell_result_free(res);

	/* Fired during the run: the worker is killed, as at a timeout. */
	struct snapcell_cancel *c = f.token = new_token();
	pthread_t t;
	pthread_create(&t, NULL, fire_at_gate, &f);
	uint64_t start = now_ms();
	res = run_with(NULL, s, "call_tool('gate')\nwhile True: pass", c);
	pthread_join(t, NULL);
	cr_expect_eq(res->status, SNAPCELL_STATUS_CANCELLED, "%s",
		     snapcell_status_name(res->status));
	cr_expect_lt(now_ms() - start, 5000);
	snapcell_result_free(res);
	res = NULL;
	cr_expect_eq(snapcell_session_run(s, "print(x)", SIZE_MAX, NULL, &res, &err),
		     SNAPCELL_E_TEMPLATE);
	cr_assert_eq(snapcell_session_restore(s, snap, &err), 0, "%s", err.message);
	res = run_with(NULL, s, "print(x + 1)", NULL);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "42\n");
	snapcell_result_free(res);

	snapcell_cancel_free(c);
	snapcell_cancel_free(fired);
	snapcell_snapshot_free(snap);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* A plain tool that blocks until its run is cancelled (snapcell_tool_cancel_fd), as a command
 * tool waits on its command: the token fires from another thread while it waits. */
struct blocking {
	struct snapcell_cancel *token;
	int fd_seen;	  /* snapcell_tool_cancel_fd() inside the callback */
	bool woke;	  /* the fd became readable before the callback gave up (5 s) */
	uint64_t woke_ms; /* how long it waited */
};

static void *fire_soon(void *arg)
{
	struct timespec ts = {0, 50 * 1000 * 1000};
	nanosleep(&ts, NULL);
	snapcell_cancel_fire(arg);
	return NULL;
}

static int block_until_cancelled(void *user, const char *args, char **result)
{
	struct blocking *b = user;
	b->fd_seen = snapcell_tool_cancel_fd();
	pthread_t t;
	pthread_create(&t, NULL, fire_soon, b->token);
	uint64_t start = now_ms();
	struct pollfd pf = {b->fd_seen, POLLIN, 0};
	b->woke = poll(&pf, 1, 5000) == 1;
	b->woke_ms = now_ms() - start;
	pthread_join(t, NULL);
	*result = strdup("\"late answer\"");
	return 0;
}

static int report_cancel_fd(void *user, const char *args, char **result)
{
	*(int *)user = snapcell_tool_cancel_fd();
	*result = strdup("null");
	return 0;
}

Test(cancel, a_plain_tool_callback_sees_its_run_cancelled_and_its_answer_is_dropped)
{
	struct blocking b = {.token = new_token(), .fd_seen = -2};
	int fd_without_token = -2;
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_add_tool(cfg, "block", "", NULL, SNAPCELL_APPROVAL_NEVER,
				 block_until_cancelled, &b, NULL);
	snapcell_config_add_tool(cfg, "report", "", NULL, SNAPCELL_APPROVAL_NEVER, report_cancel_fd,
				 &fd_without_token, NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	cr_expect_eq(snapcell_tool_cancel_fd(), -1, "outside a callback: none");

	uint64_t start = now_ms();
	struct snapcell_result *res =
		run_with(sb, NULL,
			 "print('started', flush=True)\n"
			 "try:\n    r = call_tool('block')\nexcept Exception as e:\n    r = e\n"
			 "print('got', r, flush=True)\n",
			 b.token);
	cr_expect_geq(b.fd_seen, 0, "inside a callback of a run with a token: its fd");
	cr_expect(b.woke, "the fd became readable when the token fired");
	cr_expect_lt(b.woke_ms, 4000);
	cr_expect_eq(res->status, SNAPCELL_STATUS_CANCELLED, "%s: %s",
		     snapcell_status_name(res->status), res->stderr_buf);
	cr_expect_str_eq(res->stdout_buf, "started\n", "the late answer never reached the code");
	cr_expect_eq(res->n_tool_calls, 1, "the call is logged");
	cr_expect_lt(now_ms() - start, 5000);
	snapcell_result_free(res);
	cr_expect_eq(snapcell_tool_cancel_fd(), -1, "after the callback: none again");

	/* A run without a token: its callbacks get -1. */
	res = run_with(sb, NULL, "call_tool('report')", NULL);
	expect_ok(res);
	cr_expect_eq(fd_without_token, -1);
	snapcell_result_free(res);
	snapcell_cancel_free(b.token);
	snapcell_sandbox_free(sb);
}
