#define _GNU_SOURCE
/* Decisions: a tool that needs one pauses the run at its call; resume approves, rejects or
 * supplies a value; the wall clock stops while paused; the bound, the expiry, the sandbox's end;
 * the output and the audit every result carries; and code that tries to skip a decision. */
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>

#include "helpers.h"

static atomic_int refunds;

static int refund(void *user, const char *args, char **result)
{
	atomic_fetch_add(&refunds, 1);
	return asprintf(result, "{\"refunded\": %s}", args) < 0;
}

static int lookup(void *user, const char *args, char **result)
{
	*result = strdup("\"found\"");
	return 0;
}

static const char refund_schema[] =
	"{\"type\": \"object\", \"properties\": {\"order\": {\"type\": \"string\"},"
	" \"amount\": {\"type\": \"number\"}}, \"required\": [\"order\", \"amount\"],"
	" \"additionalProperties\": false}";

static struct snapcell_sandbox *decision_sandbox(uint64_t wall_ms, uint64_t pause_ms,
						 uint64_t paused_runs)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "refund", "Refunds an order.", refund_schema,
					      SNAPCELL_APPROVAL_NEVER, refund, NULL, NULL),
		     0);
	cr_assert_eq(snapcell_config_add_tool(cfg, "lookup", "Looks up.", NULL,
					      SNAPCELL_APPROVAL_NEVER, lookup, NULL, NULL),
		     0);
	cr_assert_eq(snapcell_config_set_tool_decision(cfg, "refund", true, NULL), 0);
	if (wall_ms)
		cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, wall_ms, NULL),
			     0);
	if (pause_ms)
		cr_assert_eq(
			snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_PAUSE_MS, pause_ms, NULL), 0);
	if (paused_runs)
		cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_PAUSED_RUNS, paused_runs,
						       NULL),
			     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

static const char refund_code[] = "print('before')\n"
				  "import sys; print('warn', file=sys.stderr)\n"
				  "print(lookup_result := call_tool('lookup'))\n"
				  "try:\n"
				  "    r = call_tool('refund', order='A-17', amount=12.5)\n"
				  "    print('got', r)\n"
				  "except ToolError as e:\n"
				  "    print('refused:', e)\n";

static struct snapcell_result *resume(struct snapcell_sandbox *sb, struct snapcell_result *res,
				      enum snapcell_verdict v, const char *text, const char *by)
{
	struct snapcell_error err = {0};
	struct snapcell_result *next = NULL;
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED);
	int rc = snapcell_sandbox_resume(sb, res->pending->id, v, text, by, NULL, &next, &err);
	cr_assert_eq(rc, 0, "resume: %s", err.message);
	return next;
}

Test(decisions, approve_runs_the_tool_once_and_keeps_all_output)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_result *res = test_run(sb, refund_code);
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "status %s: %s",
		     snapcell_status_name(res->status), res->stderr_buf);
	cr_assert_str_eq(snapcell_status_name(res->status), "paused");
	cr_assert_not_null(res->pending);
	cr_expect_str_eq(res->pending->name, "refund");
	cr_expect_str_eq(res->pending->arguments, "{\"order\": \"A-17\", \"amount\": 12.5}");
	cr_expect_str_eq(res->stdout_buf, "before\nfound\n");
	cr_expect_str_eq(res->stderr_buf, "warn\n");
	cr_expect_eq(res->n_tool_calls, 1);
	cr_expect_eq(atomic_load(&refunds), 0, "the tool ran before its decision");
	struct snapcell_result *fin = resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, "alice");
	expect_ok(fin);
	cr_expect_eq(atomic_load(&refunds), 1);
	cr_expect_str_eq(fin->stdout_buf, "before\nfound\ngot {'refunded': {'order': 'A-17', "
					  "'amount': 12.5}}\n");
	cr_expect_str_eq(fin->stderr_buf, "warn\n");
	cr_assert_eq(fin->n_tool_calls, 2);
	cr_expect_str_eq(fin->tool_calls[1].name, "refund");
	cr_expect(fin->tool_calls[1].ok);
	cr_assert_eq(fin->n_decisions, 1);
	const struct snapcell_decision *d = &fin->decisions[0];
	cr_expect_eq(d->verdict, SNAPCELL_VERDICT_APPROVED);
	cr_expect_str_eq(d->decided_by, "alice");
	cr_expect_str_eq(d->name, "refund");
	cr_expect_str_eq(d->arguments, res->pending->arguments);
	cr_expect_eq(d->pending_id, res->pending->id);
	cr_expect_eq(d->call_index, 1);
	cr_expect_gt(d->decided_at_ms, (uint64_t)time(NULL) * 1000 - 60000);
	/* A second resume of the same pending call: nothing waits with that id any more. */
	struct snapcell_result *again = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_sandbox_resume(sb, res->pending->id, SNAPCELL_VERDICT_APPROVED, NULL,
					     NULL, NULL, &again, &err),
		     -ENOENT);
	cr_expect_eq(atomic_load(&refunds), 1);
	snapcell_result_free(res);
	snapcell_result_free(fin);
	snapcell_sandbox_free(sb);
}

Test(decisions, reject_raises_tool_error_with_the_reason)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_result *res = test_run(sb, refund_code);
	struct snapcell_result *fin =
		resume(sb, res, SNAPCELL_VERDICT_REJECTED, "over the limit", NULL);
	expect_ok(fin);
	cr_expect_eq(atomic_load(&refunds), 0);
	cr_expect(strstr(fin->stdout_buf, "refused: the call to tool 'refund' was rejected: over "
					  "the limit\n"),
		  "%s", fin->stdout_buf);
	cr_assert_eq(fin->n_decisions, 1);
	cr_expect_eq(fin->decisions[0].verdict, SNAPCELL_VERDICT_REJECTED);
	cr_expect_str_eq(fin->decisions[0].text, "over the limit");
	cr_expect_null(fin->decisions[0].decided_by);
	cr_expect_not(fin->tool_calls[1].ok);
	snapcell_result_free(res);
	snapcell_result_free(fin);
	snapcell_sandbox_free(sb);
}

Test(decisions, a_value_reaches_the_code_and_the_tool_never_runs)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_result *res = test_run(sb, refund_code);
	struct snapcell_result *next = NULL;
	struct snapcell_error err = {0};
	/* A value that is not JSON, or none, changes nothing. */
	cr_expect_eq(snapcell_sandbox_resume(sb, res->pending->id, SNAPCELL_VERDICT_VALUE, "{nope",
					     NULL, NULL, &next, &err),
		     SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_sandbox_resume(sb, res->pending->id, SNAPCELL_VERDICT_VALUE, NULL,
					     NULL, NULL, &next, &err),
		     SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_sandbox_resume(sb, res->pending->id, SNAPCELL_VERDICT_EXPIRED, NULL,
					     NULL, NULL, &next, &err),
		     SNAPCELL_E_INVAL);
	struct snapcell_result *fin =
		resume(sb, res, SNAPCELL_VERDICT_VALUE, "{\"refunded\": \"by hand\"}", "bob");
	expect_ok(fin);
	cr_expect_eq(atomic_load(&refunds), 0);
	cr_expect(strstr(fin->stdout_buf, "got {'refunded': 'by hand'}\n"), "%s", fin->stdout_buf);
	cr_expect_eq(fin->decisions[0].verdict, SNAPCELL_VERDICT_VALUE);
	cr_expect_str_eq(fin->decisions[0].text, "{\"refunded\": \"by hand\"}");
	snapcell_result_free(res);
	snapcell_result_free(fin);
	snapcell_sandbox_free(sb);
}

Test(decisions, many_pauses_in_one_run_and_threads_take_turns)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_result *res =
		test_run(sb, "import threading\n"
			     "out = []\n"
			     "def go(o):\n"
			     "    out.append(call_tool('refund', order=o, amount=1))\n"
			     "ts = [threading.Thread(target=go, args=(o,)) for o in 'ABC']\n"
			     "[t.start() for t in ts]; [t.join() for t in ts]\n"
			     "print(sorted(r['refunded']['order'] for r in out))\n");
	int pauses = 0;
	char seen[4] = {0};
	while (res->status == SNAPCELL_STATUS_PAUSED) {
		cr_assert_lt(pauses, 3);
		const char *o = strstr(res->pending->arguments, "\"order\": \"");
		cr_assert_not_null(o);
		seen[pauses++] = o[10];
		struct snapcell_result *next =
			resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
		cr_expect_eq(next->n_decisions, (size_t)pauses);
		snapcell_result_free(res);
		res = next;
	}
	expect_ok(res);
	cr_expect_eq(pauses, 3);
	cr_expect(strchr(seen, 'A') && strchr(seen, 'B') && strchr(seen, 'C'), "%s", seen);
	cr_expect_str_eq(res->stdout_buf, "['A', 'B', 'C']\n");
	cr_expect_eq(atomic_load(&refunds), 3);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(decisions, the_wall_clock_stops_while_paused)
{
	/* 0.5 s of sleeps, and 2 s for the call and a slow machine, under the limit. */
	struct snapcell_sandbox *sb = decision_sandbox(2500, 0, 0);
	struct snapcell_result *res = test_run(sb, "import time\n"
						   "time.sleep(0.25)\n"
						   "call_tool('refund', order='x', amount=1)\n"
						   "time.sleep(0.25)\n"
						   "print('done')\n");
	usleep(3000 * 1000); /* longer than the whole wall limit */
	struct snapcell_result *fin = resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
	expect_ok(fin);
	cr_expect_str_eq(fin->stdout_buf, "done\n");
	cr_expect_lt(fin->wall_us, 2500 * 1000);
	cr_expect_gt(fin->decisions[0].waited_us, 2900 * 1000);
	snapcell_result_free(res);
	snapcell_result_free(fin);
	snapcell_sandbox_free(sb);
}

Test(decisions, an_unanswered_run_expires_and_never_runs_the_tool)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 300, 0);
	char code[1024];
	snprintf(code, sizeof(code), "%s%s", TEST_NAME_CELL("sc-unanswered"), refund_code);
	struct snapcell_result *res = test_run(sb, code);
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "%s", res->stderr_buf);
	/* Expired: its cell is gone (the reaper ends a run when its pause is over). */
	cr_assert_eq(test_wait_host_processes_gone("sc-unanswered", 10000), 0);
	struct snapcell_result *fin = resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
	cr_expect_eq(fin->status, SNAPCELL_STATUS_EXPIRED, "%s", snapcell_status_name(fin->status));
	cr_expect_str_eq(snapcell_status_name(fin->status), "expired");
	cr_expect_eq(atomic_load(&refunds), 0);
	cr_expect_str_eq(fin->stdout_buf, "before\nfound\n");
	cr_assert_eq(fin->n_decisions, 1);
	cr_expect_eq(fin->decisions[0].verdict, SNAPCELL_VERDICT_EXPIRED);
	snapcell_result_free(res);
	snapcell_result_free(fin);

	/* Expired before another run goes: the sweep that ended it keeps its result. */
	res = test_run(sb, code);
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "%s", res->stderr_buf);
	cr_assert_eq(test_wait_host_processes_gone("sc-unanswered", 10000), 0);
	struct snapcell_result *other = test_run(sb, "print(1)");
	expect_ok(other);
	fin = resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
	cr_expect_eq(fin->status, SNAPCELL_STATUS_EXPIRED);
	cr_expect_eq(atomic_load(&refunds), 0);
	snapcell_result_free(other);
	snapcell_result_free(res);
	snapcell_result_free(fin);
	snapcell_sandbox_free(sb);
}

Test(decisions, an_expired_run_frees_its_cell_without_waiting_for_the_caller)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 300, 0);
	struct snapcell_result *res = test_run(sb, "__import__('ctypes').CDLL(None).prctl(15, "
						   "b'sc-expiring', 0, 0, 0)\n"
						   "call_tool('refund', order='x', amount=1)\n");
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "%s", res->stderr_buf);
	cr_expect_eq(test_count_host_processes("sc-expiring"), 1);
	/* Nothing is asked of the sandbox meanwhile: its reaper ends the run. */
	cr_expect_eq(test_wait_host_processes_gone("sc-expiring", 15000), 0);
	struct snapcell_result *fin = resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
	cr_expect_eq(fin->status, SNAPCELL_STATUS_EXPIRED);
	cr_expect_eq(atomic_load(&refunds), 0);
	snapcell_result_free(res);
	snapcell_result_free(fin);
	snapcell_sandbox_free(sb);
}

Test(decisions, past_the_bound_the_call_gets_tool_error_and_the_run_goes_on)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 1);
	struct snapcell_result *first = test_run(sb, refund_code);
	cr_assert_eq(first->status, SNAPCELL_STATUS_PAUSED);
	struct snapcell_result *second = test_run(sb, refund_code);
	expect_ok(second);
	cr_expect(strstr(second->stdout_buf, "paused_runs bound"), "%s", second->stdout_buf);
	struct snapcell_result *fin = resume(sb, first, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
	expect_ok(fin);
	/* The slot is free again. */
	struct snapcell_result *third = test_run(sb, refund_code);
	cr_expect_eq(third->status, SNAPCELL_STATUS_PAUSED);
	snapcell_result_free(first);
	snapcell_result_free(second);
	snapcell_result_free(fin);
	snapcell_result_free(third);
	snapcell_sandbox_free(sb); /* ends the third, paused */
}

Test(decisions, freeing_the_sandbox_ends_paused_runs)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_result *res = test_run(sb, "import os\n"
						   "__import__('ctypes').CDLL(None).prctl(15, "
						   "b'sc-paused-cell', 0, 0, 0)\n"
						   "call_tool('refund', order='x', amount=1)\n");
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "%s", res->stderr_buf);
	cr_expect_eq(test_count_host_processes("sc-paused-cell"), 1);
	snapcell_sandbox_free(sb);
	cr_expect_eq(test_wait_host_processes_gone("sc-paused-cell", 15000), 0);
	cr_expect_eq(atomic_load(&refunds), 0);
	snapcell_result_free(res);
}

struct racer {
	struct snapcell_sandbox *sb;
	uint64_t id;
	int rc;
	struct snapcell_result *res;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	r->rc = snapcell_sandbox_resume(r->sb, r->id, SNAPCELL_VERDICT_APPROVED, NULL, NULL, NULL,
					&r->res, NULL);
	return NULL;
}

Test(decisions, racing_resumes_have_exactly_one_winner)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	for (int round = 0; round < 5; round++) {
		struct snapcell_result *res = test_run(sb, refund_code);
		cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED);
		struct racer r[4];
		pthread_t th[4];
		for (int i = 0; i < 4; i++) {
			r[i] = (struct racer){sb, res->pending->id, 0, NULL};
			pthread_create(&th[i], NULL, race, &r[i]);
		}
		int winners = 0;
		for (int i = 0; i < 4; i++) {
			pthread_join(th[i], NULL);
			if (r[i].rc == 0) {
				winners++;
				expect_ok(r[i].res);
				snapcell_result_free(r[i].res);
			} else {
				cr_expect_eq(r[i].rc, -ENOENT);
			}
		}
		cr_expect_eq(winners, 1);
		snapcell_result_free(res);
	}
	cr_expect_eq(atomic_load(&refunds), 5);
	snapcell_sandbox_free(sb);
}

Test(decisions, a_session_run_pauses_keeps_its_state_and_is_busy_meanwhile)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_session *s = NULL, *sibling = NULL;
	cr_assert_eq(snapcell_session_new(sb, &s, NULL), 0);
	struct snapcell_result *res = NULL, *other = NULL;
	cr_assert_eq(snapcell_session_run(s, "x = 41", SIZE_MAX, NULL, &res, NULL), 0);
	expect_ok(res);
	snapcell_result_free(res);
	cr_assert_eq(snapcell_session_run(s,
					  "print('x is', x)\n"
					  "r = call_tool('refund', order='s', amount=2)\n"
					  "x += 1\n",
					  SIZE_MAX, NULL, &res, NULL),
		     0);
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "%s", res->stderr_buf);
	cr_expect_str_eq(res->stdout_buf, "x is 41\n");
	/* The same session, and the rest of its family, are refused while it waits. */
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_session_run(s, "1", SIZE_MAX, NULL, &other, &err), -EBUSY);
	struct snapcell_snapshot *snap = NULL;
	cr_expect_eq(snapcell_session_snapshot(s, &snap, &err), -EBUSY);
	/* A session of another family runs meanwhile. */
	cr_assert_eq(snapcell_session_new(sb, &sibling, NULL), 0);
	cr_assert_eq(snapcell_session_run(sibling, "print(2)", SIZE_MAX, NULL, &other, NULL), 0);
	expect_ok(other);
	snapcell_result_free(other);
	struct snapcell_result *fin = resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
	expect_ok(fin);
	cr_expect_eq(atomic_load(&refunds), 1);
	snapcell_result_free(fin);
	snapcell_result_free(res);
	cr_assert_eq(snapcell_session_run(s, "print(x, r['refunded']['order'])", SIZE_MAX, NULL,
					  &other, NULL),
		     0);
	expect_ok(other);
	cr_expect_str_eq(other->stdout_buf, "42 s\n");
	snapcell_result_free(other);
	cr_assert_eq(snapcell_session_snapshot(s, &snap, NULL), 0);
	struct snapcell_session *branch = NULL;
	cr_assert_eq(snapcell_snapshot_new_session(snap, &branch, NULL), 0);
	/* A run of the branch pauses; freeing the branch ends it, and the family runs again. */
	cr_assert_eq(snapcell_session_run(branch, "call_tool('refund', order='b', amount=3)",
					  SIZE_MAX, NULL, &res, NULL),
		     0);
	cr_expect_eq(res->status, SNAPCELL_STATUS_PAUSED);
	snapcell_result_free(res);
	snapcell_session_free(branch); /* ends its paused run */
	cr_assert_eq(snapcell_session_run(s, "print(x)", SIZE_MAX, NULL, &other, NULL), 0);
	expect_ok(other);
	snapcell_result_free(other);
	snapcell_snapshot_free(snap);
	snapcell_session_free(sibling);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

Test(decisions, a_paused_session_run_refuses_its_family)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_session *s = NULL, *branch = NULL;
	struct snapcell_snapshot *snap = NULL;
	cr_assert_eq(snapcell_session_new(sb, &s, NULL), 0);
	cr_assert_eq(snapcell_session_snapshot(s, &snap, NULL), 0);
	cr_assert_eq(snapcell_snapshot_new_session(snap, &branch, NULL), 0);
	struct snapcell_result *res = NULL, *other = NULL;
	cr_assert_eq(snapcell_session_run(s,
					  "call_tool('refund', order='f', amount=1)\nprint('on')",
					  SIZE_MAX, NULL, &res, NULL),
		     0);
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED);
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_session_run(branch, "1", SIZE_MAX, NULL, &other, &err), -EBUSY);
	cr_expect(strstr(err.message, "waits for a decision"), "%s", err.message);
	struct snapcell_result *fin = resume(sb, res, SNAPCELL_VERDICT_REJECTED, "no", "carol");
	cr_expect_eq(fin->status, SNAPCELL_STATUS_ERROR); /* the ToolError was not caught */
	cr_expect(strstr(fin->stderr_buf, "ToolError"), "%s", fin->stderr_buf);
	cr_assert_eq(snapcell_session_run(branch, "print(3)", SIZE_MAX, NULL, &other, NULL), 0);
	expect_ok(other);
	snapcell_result_free(other);
	snapcell_result_free(fin);
	snapcell_result_free(res);
	/* Freed while paused: the sandbox's end ends the run too. */
	cr_assert_eq(snapcell_session_run(s, "call_tool('refund', order='g', amount=1)", SIZE_MAX,
					  NULL, &res, NULL),
		     0);
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED);
	snapcell_sandbox_free(sb);
	cr_expect_eq(snapcell_session_run(s, "1", SIZE_MAX, NULL, &other, &err),
		     SNAPCELL_E_TEMPLATE);
	cr_expect_eq(atomic_load(&refunds), 0);
	snapcell_result_free(res);
	snapcell_session_free(branch);
	snapcell_session_free(s);
	snapcell_snapshot_free(snap);
}

Test(decisions, the_mark_needs_a_registered_tool_and_is_not_program_approval)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "refund", "", NULL, SNAPCELL_APPROVAL_NEVER,
					      refund, NULL, NULL),
		     0);
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_set_tool_decision(cfg, "nope", true, &err), -ENOENT);
	cr_expect(strstr(err.message, "nope"));
	cr_assert_eq(snapcell_config_set_tool_decision(cfg, "refund", true, NULL), 0);
	cr_expect(snapcell_config_tool_needs_decision(cfg, "refund"));
	cr_expect_eq(snapcell_config_approval(cfg, SNAPCELL_APPROVAL_NEVER),
		     SNAPCELL_APPROVAL_NEVER);
	/* Registering it again keeps the mark. */
	cr_assert_eq(snapcell_config_add_tool(cfg, "refund", "again", NULL, SNAPCELL_APPROVAL_NEVER,
					      refund, NULL, NULL),
		     0);
	cr_expect(snapcell_config_tool_needs_decision(cfg, "refund"));
	cr_assert_eq(snapcell_config_set_tool_decision(cfg, "refund", false, NULL), 0);
	cr_expect_not(snapcell_config_tool_needs_decision(cfg, "refund"));
	char *text = NULL;
	cr_assert_eq(snapcell_config_describe(cfg, SNAPCELL_DESCRIBE_COMPACT, &text, NULL), 0);
	cr_expect_null(strstr(text, "approval"), "%s", text);
	free(text);
	cr_assert_eq(snapcell_config_set_tool_decision(cfg, "refund", true, NULL), 0);
	cr_assert_eq(snapcell_config_describe(cfg, SNAPCELL_DESCRIBE_COMPACT, &text, NULL), 0);
	cr_expect(strstr(text, "- refund: again\n    Each call waits for a person's approval"),
		  "%s", text);
	free(text);
	cr_expect_str_eq(snapcell_verdict_name(SNAPCELL_VERDICT_VALUE), "value");
	cr_expect_null(snapcell_verdict_name((enum snapcell_verdict)99));
	snapcell_config_free(cfg);
}

/* Calls wait in the order they were made: calls already written when the run pauses (awaited
 * calls, sent at once) are each decided in turn, in call order, before the main thread's next
 * call. (Threads cannot join the queue during a pause: the cell is stopped.) */
Test(decisions, waiting_calls_are_decided_in_call_order)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_result *res =
		test_run(sb, "import asyncio\n"
			     "async def main():\n"
			     "    await asyncio.gather(*[call_tool('refund', order=o, amount=1)\n"
			     "                           for o in ('main1', 't1', 't2')])\n"
			     "asyncio.run(main())\n"
			     "call_tool('refund', order='main2', amount=1)\n");
	const char *want[] = {"main1", "t1", "t2", "main2"};
	for (size_t i = 0; i < 4; i++) {
		cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "call %zu: %s", i,
			     res->stderr_buf);
		char needle[32];
		snprintf(needle, sizeof(needle), "\"order\": \"%s\"", want[i]);
		cr_expect(strstr(res->pending->arguments, needle), "call %zu: %s, want %s", i,
			  res->pending->arguments, want[i]);
		struct snapcell_result *next =
			resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
		snapcell_result_free(res);
		res = next;
	}
	expect_ok(res);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* Attacks: code cannot skip, forge or replay a decision. */

Test(decisions, the_bridge_itself_still_waits_for_the_decision)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_result *res = test_run(
		sb, "import _snapcell\n"
		    "print(_snapcell.call('refund', b'{\"order\": \"x\", \"amount\": 1}'))\n");
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "%s", res->stderr_buf);
	cr_expect_eq(atomic_load(&refunds), 0);
	struct snapcell_result *fin = resume(sb, res, SNAPCELL_VERDICT_REJECTED, NULL, NULL);
	cr_expect_eq(atomic_load(&refunds), 0);
	cr_expect(strstr(fin->stdout_buf, "(False, b\"the call to tool 'refund' was rejected\")"),
		  "%s", fin->stdout_buf);
	snapcell_result_free(res);
	snapcell_result_free(fin);
	snapcell_sandbox_free(sb);
}

/* A call written while another waits for its decision (a thread going around the bridge) is
 * not lost and does not run early: it is served after the decision, and waits for its own. */
Test(decisions, a_call_written_while_a_call_waits_is_served_after_it)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_result *res =
		test_run(sb, "import os, struct, threading, time\n"
			     "def forge():\n"
			     "    time.sleep(0.3)\n"
			     "    p = struct.pack('<IB', 999, 0)\n"
			     "    p += b'refund\\0{\"order\": \"forged\", \"amount\": 9}'\n"
			     "    os.write(3, struct.pack('<I', 1 + len(p)) + b'C' + p)\n"
			     "threading.Thread(target=forge).start()\n"
			     "call_tool('refund', order='real', amount=1)\n"
			     "print('approved')\n"
			     "time.sleep(0.5)\n");
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "%s", res->stderr_buf);
	/* The cell stands still while the call waits: the forging thread writes its frame after
	 * the resume, while the main thread sleeps on. */
	struct snapcell_result *next = resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
	cr_assert_eq(next->status, SNAPCELL_STATUS_PAUSED, "%s",
		     snapcell_status_name(next->status));
	cr_expect(strstr(next->pending->arguments, "forged"), "%s", next->pending->arguments);
	cr_expect_eq(atomic_load(&refunds), 1);
	struct snapcell_result *fin = resume(sb, next, SNAPCELL_VERDICT_REJECTED, NULL, NULL);
	cr_expect_eq(fin->status, SNAPCELL_STATUS_OK, "%s", fin->stderr_buf);
	cr_expect(strstr(fin->stdout_buf, "approved"), "%s", fin->stdout_buf);
	cr_expect_eq(atomic_load(&refunds), 1, "the rejected call ran");
	snapcell_result_free(res);
	snapcell_result_free(next);
	snapcell_result_free(fin);
	expect_output(sb, "print(1)", "1\n");
	snapcell_sandbox_free(sb);
}

/* The same call again (same tool, same arguments) is a new decision: an approval is for one
 * call, and the old pending id is spent. */
Test(decisions, an_approval_is_for_one_call_and_its_id_is_spent)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_result *res = test_run(
		sb, "for _ in range(2):\n"
		    "    print(call_tool('refund', order='same', amount=1)['refunded'])\n");
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED);
	uint64_t first = res->pending->id;
	struct snapcell_result *second = resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
	cr_assert_eq(second->status, SNAPCELL_STATUS_PAUSED, "%s", second->stderr_buf);
	cr_expect_neq(second->pending->id, first);
	cr_expect_eq(atomic_load(&refunds), 1);
	struct snapcell_result *none = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_sandbox_resume(sb, first, SNAPCELL_VERDICT_APPROVED, NULL, NULL, NULL,
					     &none, &err),
		     -ENOENT);
	cr_expect_eq(atomic_load(&refunds), 1);
	struct snapcell_result *fin = resume(sb, second, SNAPCELL_VERDICT_REJECTED, NULL, NULL);
	cr_expect_eq(fin->status, SNAPCELL_STATUS_ERROR);
	cr_expect_eq(atomic_load(&refunds), 1);
	cr_expect_eq(fin->n_decisions, 2);
	snapcell_result_free(res);
	snapcell_result_free(second);
	snapcell_result_free(fin);
	snapcell_sandbox_free(sb);
}

/* While the main thread waits for its decision, another thread's call (even of a tool that
 * needs none) is not served: calls take turns, so nothing slips past the one waiting. */
Test(decisions, a_thread_calling_while_the_main_thread_waits_is_not_served)
{
	struct snapcell_sandbox *sb = decision_sandbox(0, 0, 0);
	struct snapcell_result *res = test_run(sb, "import threading, time\n"
						   "seen = []\n"
						   "def other():\n"
						   "    time.sleep(0.2)\n"
						   "    seen.append(call_tool('lookup'))\n"
						   "    seen.append(time.monotonic())\n"
						   "t = threading.Thread(target=other); t.start()\n"
						   "call_tool('refund', order='m', amount=1)\n"
						   "back = time.monotonic()\n"
						   "t.join()\n"
						   "print(seen[0], seen[1] >= back - 0.05)\n");
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED);
	usleep(600 * 1000);
	struct snapcell_result *again = NULL;
	cr_expect_eq(res->n_tool_calls, 0);
	struct snapcell_result *fin = resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
	expect_ok(fin);
	cr_expect_str_eq(fin->stdout_buf, "found True\n");
	cr_assert_eq(fin->n_tool_calls, 2);
	cr_expect_str_eq(fin->tool_calls[0].name, "refund");
	cr_expect_str_eq(fin->tool_calls[1].name, "lookup");
	(void)again;
	snapcell_result_free(res);
	snapcell_result_free(fin);
	snapcell_sandbox_free(sb);
}

/* A paused run's cell is stopped for the pause (docs/approval.md): code that did not wait in
 * its call (other threads, a forked child, code fighting the stop) makes no progress while the
 * run waits, and the wall limit bounds all the work the code does around a pause. */

static struct snapcell_sandbox *hold_sandbox(uint64_t wall_ms)
{
	struct snapcell_config *cfg = test_config_new();
	test_add_decision_tool(cfg, "hold");
	if (wall_ms)
		cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, wall_ms, NULL),
			     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

Test(decisions, threads_and_children_stand_still_while_paused)
{
	struct snapcell_sandbox *sb = hold_sandbox(0);
	test_expect_pause_stops_cell(sb, NULL, "hold", 1500);
	expect_output(sb, "print(1)", "1\n");
	snapcell_sandbox_free(sb);
}

/* A session's worker hangs from its family's anchor, which stays running (it kills the
 * worker at the pause's expiry); the family's runs go on after the pause. */
Test(decisions, a_session_runs_processes_stand_still_while_paused)
{
	struct snapcell_sandbox *sb = hold_sandbox(0);
	struct snapcell_session *s = NULL;
	cr_assert_eq(snapcell_session_new(sb, &s, NULL), 0);
	test_expect_pause_stops_cell(sb, s, "hold", 1500);
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_session_run(s, "print(len(gaps))", SIZE_MAX, NULL, &res, NULL), 0);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "2\n");
	snapcell_result_free(res);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

Test(decisions, code_that_fights_the_stop_is_stopped)
{
	struct snapcell_sandbox *sb = hold_sandbox(0);
	test_expect_pause_stops_forkers(sb, "hold", 1500);
	snapcell_sandbox_free(sb);
}

/* Timers of the code's that would continue a stopped process (tests/c/helpers.c). */
Test(decisions, a_timer_of_the_codes_does_not_wake_a_paused_cell)
{
	struct snapcell_sandbox *sb = hold_sandbox(0);
	test_expect_pause_survives_timers(sb, "hold", 2000);
	snapcell_sandbox_free(sb);
}

/* The attack the stop closes: a thread that needs 2.5 s of CPU under a 1.5 s wall limit,
 * around a 4 s pause. Not stopped, it finished during the pause and the run ended ok. */
Test(decisions, work_around_a_pause_stays_within_the_wall_limit)
{
	struct snapcell_sandbox *sb = hold_sandbox(1500);
	struct snapcell_result *res = test_run(sb, "import threading, time\n"
						   "def work():\n"
						   "    while time.thread_time() < 2.5: pass\n"
						   "t = threading.Thread(target=work); t.start()\n"
						   "call_tool('hold')\n"
						   "t.join()\n"
						   "print('finished')\n");
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "%s", res->stderr_buf);
	usleep(4000 * 1000);
	struct snapcell_result *fin = resume(sb, res, SNAPCELL_VERDICT_APPROVED, NULL, NULL);
	cr_expect_eq(fin->status, SNAPCELL_STATUS_TIMEOUT, "status %s, stdout %s",
		     snapcell_status_name(fin->status), fin->stdout_buf);
	cr_expect(fin->limits_hit & SNAPCELL_HIT_WALL);
	cr_expect_geq(fin->wall_us, 1400 * 1000ull);
	cr_expect_lt(fin->wall_us, 2500 * 1000ull, "wall_us %llu",
		     (unsigned long long)fin->wall_us);
	cr_expect_lt(fin->cpu_us, 2500 * 1000ull, "cpu_us %llu", (unsigned long long)fin->cpu_us);
	snapcell_result_free(res);
	snapcell_result_free(fin);
	snapcell_sandbox_free(sb);
}

/* A thread held in a vfork (posix_spawn's child waits on a FIFO), so in 'D': the cell cannot
 * be stopped. */
#define UNSTOPPABLE_CODE                                                                           \
	"import ctypes, os, time\n"                                                                \
	"os.mkfifo('/tmp/f')\n"                                                                    \
	"libc = ctypes.CDLL(None)\n"                                                               \
	"fa = ctypes.create_string_buffer(256)\n"                                                  \
	"libc.posix_spawn_file_actions_init(fa)\n"                                                 \
	"libc.posix_spawn_file_actions_addopen(fa, 0, b'/tmp/f', os.O_RDONLY, 0)\n"                \
	"argv = (ctypes.c_char_p * 2)(b'true', None)\n"                                            \
	"def spawner():\n"                                                                         \
	"    pid = ctypes.c_int()\n"                                                               \
	"    libc.posix_spawn(ctypes.byref(pid), b'/bin/true', fa, None, argv, None)\n"            \
	"threading.Thread(target=spawner, daemon=True).start()\n"                                  \
	"time.sleep(0.2)\n"

/* A cell that cannot be stopped on purpose: a thread held in a vfork (posix_spawn's child
 * waits on a FIFO, so the thread stays in 'D') makes each pause fail after 1 s. The call is
 * refused, the tool does not run, the run's wall clock counts that second, and the host's
 * thread naps meanwhile: with 50 us naps throughout it spent 0.78 s of CPU on three. */
Test(decisions, a_cell_that_cannot_be_stopped_gets_tool_error_cheaply)
{
	struct snapcell_sandbox *sb = hold_sandbox(0);
	struct rusage before, after;
	getrusage(RUSAGE_THREAD, &before);
	struct snapcell_result *res = test_run(
		sb, "import threading\n" UNSTOPPABLE_CODE "for i in range(3):\n"
		    "    try: call_tool('hold'); print('paused')\n"
		    "    except ToolError as e: print('could not all be stopped to wait for it "
		    "(some did not stop in time); the call was not made' in str(e))\n"
		    "for i in range(1000):\n" /* the child, continued, opens the FIFO again */
		    "    try: os.open('/tmp/f', os.O_WRONLY | os.O_NONBLOCK); break\n"
		    "    except OSError: time.sleep(0.01)\n"
		    "print(i < 999)\n");
	getrusage(RUSAGE_THREAD, &after);
	double cpu = (double)(after.ru_utime.tv_sec - before.ru_utime.tv_sec) +
		     (double)(after.ru_stime.tv_sec - before.ru_stime.tv_sec) +
		     (double)(after.ru_utime.tv_usec - before.ru_utime.tv_usec +
			      after.ru_stime.tv_usec - before.ru_stime.tv_usec) /
			     1e6;
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "True\nTrue\nTrue\nTrue\n");
	for (size_t i = 0; i < res->n_tool_calls; i++)
		cr_expect(!res->tool_calls[i].ok, "a refused call was made");
	cr_expect_geq(res->wall_us, 3000000, "wall_us %llu left out the tries",
		      (unsigned long long)res->wall_us);
	cr_expect_leq(cpu, 0.25, "the host's thread spent %.3f s of CPU on three tries", cpu);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* Tries at a pause that cannot be had end at the wall limit: each took 1 s whatever the time
 * left, so such a run under a 1.5 s limit ended 0.7 s past it. */
Test(decisions, a_cell_that_cannot_be_stopped_ends_at_its_wall_limit)
{
	struct snapcell_sandbox *sb = hold_sandbox(1500);
	struct snapcell_result *res =
		test_run(sb, "import threading\n" UNSTOPPABLE_CODE "while True:\n"
			     "    try: call_tool('hold')\n"
			     "    except ToolError: pass\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_TIMEOUT, "status %s: %s",
		     snapcell_status_name(res->status), res->stderr_buf);
	/* Tries of 1 s each from 0.2 s on ended the run at 2.2 s at the earliest. */
	cr_expect_leq(res->wall_us, 1500000 + 500000, "wall_us %llu under a 1.5 s limit",
		      (unsigned long long)res->wall_us);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}
