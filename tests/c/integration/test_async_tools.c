#define _GNU_SOURCE
/* Several tool calls in flight at once: calls from the cell's threads, calls awaited in an
 * event loop (asyncio.gather, top-level await), tools with an asynchronous face started on the
 * run's thread and answered from others, the per-run bound, and the end of a run with calls in
 * flight (cancelled, answered, nothing left running). */
#include <stdatomic.h>
#include <time.h>

#include "helpers.h"

#include <jansson.h>

static atomic_int sync_calls, started, running, most_running, cancels, threads_alive;
static unsigned delay_ms = 100;
static bool wait_for_cancel; /* a started call answers only once cancelled */
static int meet; /* a started call waits (10 s at most) until this many have run at once */

static long long sum_of(const char *args)
{
	json_t *a = json_loads(args, 0, NULL);
	long long sum = json_integer_value(json_object_get(a, "a")) +
			json_integer_value(json_object_get(a, "b"));
	json_decref(a);
	return sum;
}

static int add(void *user, const char *args, char **result)
{
	atomic_fetch_add(&sync_calls, 1);
	return asprintf(result, "%lld", sum_of(args)) < 0;
}

static int echo(void *user, const char *args, char **result)
{
	*result = strdup(args);
	return 0;
}

struct job {
	struct snapcell_call *call;
	long long sum;
	atomic_bool cancelled;
};

static void *answer_later(void *arg)
{
	struct job *job = arg;
	int now = atomic_fetch_add(&running, 1) + 1;
	for (int seen = atomic_load(&most_running); now > seen;)
		if (atomic_compare_exchange_weak(&most_running, &seen, now))
			break;
	/* Calls that should run together wait for each other, so that they overlap however
	 * slowly the host starts them; calls that cannot never meet and give up. */
	for (uint64_t give_up = test_now_ms() + 10000;
	     atomic_load(&most_running) < meet && test_now_ms() < give_up;)
		usleep(1000);
	for (unsigned waited = 0;
	     wait_for_cancel ? !atomic_load(&job->cancelled) : waited < delay_ms; waited++)
		usleep(1000);
	atomic_fetch_sub(&running, 1);
	char text[32];
	snprintf(text, sizeof(text), "%lld", job->sum);
	snapcell_call_answer(job->call, !atomic_load(&job->cancelled), text);
	free(job);
	atomic_fetch_sub(&threads_alive, 1);
	return NULL;
}

static void add_start(void *user, struct snapcell_call *call, const char *args)
{
	atomic_fetch_add(&started, 1);
	struct job *job = calloc(1, sizeof(*job));
	job->call = call;
	job->sum = sum_of(args);
	snapcell_call_set_data(call, job);
	pthread_t t;
	atomic_fetch_add(&threads_alive, 1);
	cr_assert_eq(pthread_create(&t, NULL, answer_later, job), 0);
	pthread_detach(t);
}

static void add_cancel(void *user, struct snapcell_call *call)
{
	atomic_fetch_add(&cancels, 1);
	struct job *job = snapcell_call_data(call);
	atomic_store(&job->cancelled, true);
}

static struct snapcell_sandbox *async_sandbox(unsigned bound, unsigned wall_ms)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "add", "Adds a and b.", NULL,
					      SNAPCELL_APPROVAL_NEVER, add, NULL, NULL),
		     0);
	cr_assert_eq(snapcell_config_set_tool_async(cfg, "add", add_start, add_cancel, NULL), 0);
	cr_assert_eq(snapcell_config_add_tool(cfg, "echo", "Returns its arguments.", NULL,
					      SNAPCELL_APPROVAL_NEVER, echo, NULL, NULL),
		     0);
	if (bound)
		cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_TOOL_CALLS, bound, NULL),
			     0);
	if (wall_ms)
		cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, wall_ms, NULL),
			     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

static const char gather8[] =
	"import asyncio\n"
	"async def main():\n"
	"    return await asyncio.gather(*(tools.add(a=i, b=1) for i in range(8)))\n"
	"print(asyncio.run(main()))\n";

Test(async_tools, gathered_calls_run_at_once_on_the_async_face, .timeout = 60)
{
	meet = 8;
	struct snapcell_sandbox *sb = async_sandbox(0, 0);
	struct snapcell_result *res = test_run(sb, gather8);
	expect_ok(res);
	cr_expect(!strncmp(res->stdout_buf, "[1, 2, 3, 4, 5, 6, 7, 8]\n", 25), "%s",
		  res->stdout_buf);
	cr_expect_eq(atomic_load(&started), 8);
	cr_expect_eq(atomic_load(&sync_calls), 0, "an awaited call went to the sync face");
	cr_expect_eq(atomic_load(&most_running), 8);
	cr_expect_eq(res->n_tool_calls, 8);
	for (size_t i = 0; i < res->n_tool_calls; i++)
		cr_expect(res->tool_calls[i].ok && res->tool_calls[i].duration_us >= 90000);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(async_tools, the_per_run_bound_holds_later_calls_back_in_order, .timeout = 60)
{
	meet = 2;
	struct snapcell_sandbox *sb = async_sandbox(2, 0);
	struct snapcell_result *res = test_run(sb, gather8);
	expect_ok(res);
	cr_expect(!strncmp(res->stdout_buf, "[1, 2, 3, 4, 5, 6, 7, 8]\n", 25), "%s",
		  res->stdout_buf);
	cr_expect_eq(atomic_load(&most_running), 2);
	cr_expect_eq(atomic_load(&started), 8);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(async_tools, sync_code_and_top_level_await)
{
	struct snapcell_sandbox *sb = async_sandbox(0, 0);
	expect_output(sb, "print(tools.add(a=1, b=2), call_tool('add', a=2, b=2))\n", "3 4\n");
	cr_expect_eq(atomic_load(&sync_calls), 2);
	cr_expect_eq(atomic_load(&started), 0);
	expect_output(sb,
		      "r = await tools.add(a=1, b=1)\n"
		      "e = await call_tool('echo', x=[1])\n"
		      "print(r, e)\n",
		      "2 {'x': [1]}\n");
	cr_expect_eq(atomic_load(&started), 1);
	/* With top-level await the last expression's value is awaited when it awaits. */
	struct snapcell_result *res = test_run(sb, "import asyncio\n"
						   "x = await tools.add(a=1, b=1)\n"
						   "await tools.add(a=x, b=40)\n");
	expect_ok(res);
	cr_expect_eq(res->value_state, SNAPCELL_VALUE_PRESENT, "%s",
		     snapcell_value_state_name(res->value_state));
	cr_expect_str_eq(res->value_json ? res->value_json : "(null)", "42");
	snapcell_result_free(res);
	res = test_run(sb, "x = await tools.add(a=1, b=1)\ny = x\n");
	expect_ok(res);
	cr_expect_eq(res->value_state, SNAPCELL_VALUE_NO_EXPRESSION);
	snapcell_result_free(res);
	/* A tool without an asynchronous face answers awaited calls on the run's thread. */
	expect_output(sb,
		      "import asyncio\n"
		      "async def main():\n"
		      "    return await asyncio.gather(*(tools.echo(i=i) for i in range(50)))\n"
		      "print([d['i'] for d in asyncio.run(main())] == list(range(50)))\n",
		      "True\n");
	snapcell_sandbox_free(sb);
}

Test(async_tools, errors_reach_the_awaiting_code)
{
	struct snapcell_sandbox *sb = async_sandbox(0, 0);
	expect_output(
		sb,
		"import asyncio\n"
		"async def main():\n"
		"    return await asyncio.gather(tools.add(a=1, b=1), call_tool('nope'),\n"
		"                                tools.echo(x=object()), return_exceptions=True)\n"
		"for r in asyncio.run(main()):\n"
		"    print(type(r).__name__, str(r)[:22])\n",
		"int 2\n"
		"ToolError unknown tool 'nope'; r\n"
		"ToolError arguments for tool 'ec\n");
	snapcell_sandbox_free(sb);
}

/* Threads of the cell have calls in flight at once; every answer reaches its own caller. */
Test(async_tools, calls_from_threads_get_their_own_answers, .timeout = 60)
{
	struct snapcell_sandbox *sb = async_sandbox(0, 0);
	expect_output(sb,
		      "import threading\n"
		      "bad = []\n"
		      "def work(k):\n"
		      "    for i in range(300):\n"
		      "        if tools.echo(k=k, i=i) != {'k': k, 'i': i}:\n"
		      "            bad.append((k, i))\n"
		      "ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]\n"
		      "[t.start() for t in ts]\n"
		      "[t.join() for t in ts]\n"
		      "print(len(bad))\n",
		      "0\n");
	/* Threads and an event loop together. */
	expect_output(sb,
		      "import asyncio, threading\n"
		      "out = []\n"
		      "def work():\n"
		      "    out.append(sum(tools.echo(i=i)['i'] for i in range(200)))\n"
		      "async def main():\n"
		      "    t = threading.Thread(target=work)\n"
		      "    t.start()\n"
		      "    r = await asyncio.gather(*(tools.add(a=i, b=0) for i in range(20)))\n"
		      "    await asyncio.to_thread(t.join)\n"
		      "    return sum(r)\n"
		      "print(asyncio.run(main()), out)\n",
		      "190 [19900]\n");
	/* An event loop in each of four threads: a loop may read another's answers, and hands
	 * them over. */
	expect_output(sb,
		      "import asyncio, threading\n"
		      "out = {}\n"
		      "async def many(k):\n"
		      "    rs = await asyncio.gather(*(tools.echo(k=k, i=i) for i in range(100)))\n"
		      "    return all(r == {'k': k, 'i': i} for i, r in enumerate(rs))\n"
		      "def work(k):\n"
		      "    out[k] = all(asyncio.run(many(k)) for _ in range(5))\n"
		      "ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]\n"
		      "[t.start() for t in ts]\n"
		      "[t.join() for t in ts]\n"
		      "print(sorted(out.items()))\n",
		      "[(0, True), (1, True), (2, True), (3, True)]\n");
	snapcell_sandbox_free(sb);
}

/* A run that times out with calls in flight asks each to end and returns once every one was
 * answered: no tool thread outlives it. */
Test(async_tools, a_timeout_cancels_calls_in_flight_and_waits_for_them, .timeout = 60)
{
	wait_for_cancel = true;
	struct snapcell_sandbox *sb = async_sandbox(0, 1000);
	struct snapcell_result *res =
		test_run(sb, "import asyncio\n"
			     "async def main():\n"
			     "    await asyncio.gather(*(tools.add(a=i, b=1) for i in range(3)))\n"
			     "asyncio.run(main())\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_TIMEOUT, "%s", snapcell_status_name(res->status));
	cr_expect_eq(atomic_load(&started), 3);
	cr_expect_eq(atomic_load(&cancels), 3);
	cr_expect_eq(atomic_load(&running), 0, "a tool still runs after the run returned");
	cr_expect_eq(res->n_tool_calls, 3);
	snapcell_result_free(res);
	/* Code that ends without waiting for its calls: they are cancelled the same way. */
	res = test_run(sb, "import asyncio\n"
			   "async def main():\n"
			   "    tools.add(a=1, b=1)\n"
			   "    await asyncio.sleep(0.05)\n"
			   "asyncio.run(main())\nprint('done')\n");
	expect_ok(res);
	cr_expect_eq(atomic_load(&cancels), 4);
	cr_expect_eq(atomic_load(&running), 0);
	snapcell_result_free(res);
	for (int i = 0; i < 1000 && atomic_load(&threads_alive); i++)
		usleep(1000);
	cr_expect_eq(atomic_load(&threads_alive), 0);
	snapcell_sandbox_free(sb);
}

/* A session's run that leaves answers unread (its code did not wait for them) leaves the
 * session working: the next run starts on a clean socket. */
Test(async_tools, a_session_goes_on_after_calls_left_in_flight, .timeout = 60)
{
	delay_ms = 0;
	struct snapcell_sandbox *sb = async_sandbox(0, 0);
	struct snapcell_session *s = NULL;
	cr_assert_eq(snapcell_session_new(sb, &s, NULL), 0);
	for (int i = 0; i < 5; i++) {
		struct snapcell_result *res = NULL;
		const char *code =
			"import asyncio\n"
			"async def main():\n"
			"    tools.add(a=1, b=1)\n"
			"    call_tool('echo', big='x' * 300000)\n"
			"    await asyncio.sleep(0.02)\n"
			"asyncio.run(main())\n"
			"print(tools.add(a=2, b=2), len(tools.echo(big='y' * 300000)['big']))\n";
		cr_assert_eq(snapcell_session_run(s, code, SIZE_MAX, NULL, &res, NULL), 0);
		expect_ok(res);
		cr_expect_str_eq(res->stdout_buf, "4 300000\n");
		snapcell_result_free(res);
	}
	/* More calls left behind over the session's runs than a cell may have in flight: each
	 * run's are forgotten at its end. */
	delay_ms = 100;
	for (int i = 0; i < 5; i++) {
		struct snapcell_result *res = NULL;
		const char *code = "import asyncio\n"
				   "async def main():\n"
				   "    for i in range(300):\n"
				   "        tools.add(a=i, b=0)\n"
				   "asyncio.run(main())\n"
				   "print('left')\n";
		cr_assert_eq(snapcell_session_run(s, i < 4 ? code : "print(tools.add(a=2, b=2))",
						  SIZE_MAX, NULL, &res, NULL),
			     0);
		expect_ok(res);
		cr_expect_str_eq(res->stdout_buf, i < 4 ? "left\n" : "4\n");
		snapcell_result_free(res);
	}
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}
