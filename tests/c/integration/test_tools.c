#define _GNU_SOURCE
/* Host tools: call_tool and the tools module, results as native values, errors raised in the
 * guest, schema checks on the host, hostile arguments, the call log. */
#include <sys/resource.h>
#include <time.h>

#include "helpers.h"
#include "schemas.h"

#include <jansson.h>

static int compute(void *user, const char *args, char **result)
{
	json_t *a = json_loads(args, 0, NULL);
	long long sum = json_integer_value(json_object_get(a, "a")) +
			json_integer_value(json_object_get(a, "b"));
	json_decref(a);
	return asprintf(result, "%lld", sum) < 0;
}

static int echo(void *user, const char *args, char **result)
{
	*result = strdup(args);
	return 0;
}

static int constant(void *user, const char *args, char **result)
{
	*result = strdup(user);
	return 0;
}

static int failing(void *user, const char *args, char **result)
{
	*result = strdup("the database is down");
	return 1;
}

static int calls_seen;
static int counting(void *user, const char *args, char **result)
{
	calls_seen++;
	*result = strdup("null");
	return 0;
}

static const char compute_schema[] =
	"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"},"
	" \"b\": {\"type\": \"integer\"}}, \"required\": [\"a\", \"b\"],"
	" \"additionalProperties\": false}";

static struct snapcell_sandbox *tool_sandbox(void)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "compute", "Adds a and b.", compute_schema,
					      SNAPCELL_APPROVAL_NEVER, compute, NULL, NULL),
		     0);
	cr_assert_eq(snapcell_config_add_tool(cfg, "echo", "Returns its arguments.", NULL,
					      SNAPCELL_APPROVAL_NEVER, echo, NULL, NULL),
		     0);
	cr_assert_eq(snapcell_config_add_tool(cfg, "fail", "Always fails.", NULL,
					      SNAPCELL_APPROVAL_ALWAYS, failing, NULL, NULL),
		     0);
	cr_assert_eq(snapcell_config_add_tool(
			     cfg, "big", "A huge integer and text.", NULL, SNAPCELL_APPROVAL_NEVER,
			     constant, "[123456789012345678901234567890, \"\\u00fc\\u20ac\"]",
			     NULL),
		     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

Test(tools, call_tool_prints_42_and_is_logged)
{
	struct snapcell_sandbox *sb = tool_sandbox();
	struct snapcell_result *res =
		test_run(sb, "total = call_tool('compute', a=20, b=22)\nprint(total)");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "42\n");
	cr_assert_eq(res->n_tool_calls, 1);
	cr_expect_str_eq(res->tool_calls[0].name, "compute");
	cr_expect(res->tool_calls[0].ok);
	cr_expect_eq(res->tool_calls[0].args_bytes, strlen("{\"a\": 20, \"b\": 22}"));
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(tools, tools_module_and_native_values)
{
	struct snapcell_sandbox *sb = tool_sandbox();
	struct snapcell_result *res =
		test_run(sb, "import tools\n"
			     "d = {'k': [1, 2.5, 'ü€𝄞', None, True], 'n': {'deep': {}}}\n"
			     "back = tools.echo(d=d)\n"
			     "print(back == {'d': d}, type(back).__name__)\n"
			     "n, s = call_tool('big')\n"
			     "print(n == 123456789012345678901234567890, s == 'ü€')\n"
			     "print(tools.compute(a=1, b=2), tools.compute.__doc__)");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "True dict\nTrue True\n3 Adds a and b.\n");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(tools, tool_error_raises_in_the_guest_with_its_message)
{
	struct snapcell_sandbox *sb = tool_sandbox();
	struct snapcell_result *res = test_run(
		sb, "try:\n    call_tool('fail')\nexcept ToolError as e:\n    print('caught', e)\n"
		    "call_tool('fail')\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	cr_expect_str_eq(res->stdout_buf, "caught the database is down\n");
	cr_expect(strstr(res->stderr_buf, "ToolError: the database is down"), "%s",
		  res->stderr_buf);
	cr_expect_null(strstr(res->stderr_buf, "<snapcell>"), "%s", res->stderr_buf);
	cr_assert_eq(res->n_tool_calls, 2);
	cr_expect_not(res->tool_calls[1].ok);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* call_tool decodes an answer as json.loads does with bytes (its fast path takes plain UTF-8,
 * anything else goes the long way): a BOM, a one-byte value, a non-ASCII start, invalid JSON. */
Test(tools, answers_decode_as_json_loads_would)
{
	struct snapcell_config *cfg = test_config_new();
	static const char *const answers[][2] = {{"bom", "\xef\xbb\xbf{\"a\": 1}"},
						 {"one", "7"},
						 {"wide", "\"\xc3\xbc\xe2\x82\xac\""},
						 {"bad", "{\"a\": "}};
	for (size_t i = 0; i < 4; i++)
		cr_assert_eq(snapcell_config_add_tool(cfg, answers[i][0], "A constant.", NULL,
						      SNAPCELL_APPROVAL_NEVER, constant,
						      (void *)answers[i][1], NULL),
			     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res = test_run(
		sb, "print(call_tool('bom'), call_tool('one'), call_tool('wide') == 'ü€')\n"
		    "try:\n    call_tool('bad')\nexcept ToolError as e:\n    print(e)\n");
	expect_ok(res);
	const char want[] = "{'a': 1} 7 True\ntool 'bad' returned invalid JSON: ";
	cr_expect(!strncmp(res->stdout_buf, want, strlen(want)), "%s", res->stdout_buf);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

static void expect_tool_error(struct snapcell_sandbox *sb, const char *call, const char *message)
{
	char code[512];
	snprintf(code, sizeof(code),
		 "try:\n    %s\nexcept (ToolError, TypeError) as e:\n    print(type(e).__name__, "
		 "e)\n",
		 call);
	struct snapcell_result *res = test_run(sb, code);
	expect_ok(res);
	cr_expect(strstr(res->stdout_buf, message), "%s -> %s", call, res->stdout_buf);
	snapcell_result_free(res);
}

Test(tools, bad_calls_give_clear_errors_and_the_next_run_is_healthy, .timeout = 60)
{
	struct snapcell_sandbox *sb = tool_sandbox();
	expect_tool_error(sb, "call_tool('nope')",
			  "unknown tool 'nope'; registered tools: compute, echo, fail, big");
	expect_tool_error(sb, "call_tool('compute', 1, 2)", "TypeError call_tool() takes keyword");
	expect_tool_error(sb, "call_tool('compute', a=1)", "'b' is required");
	expect_tool_error(sb, "call_tool('compute', a='1', b=2)",
			  "a: expected integer, got string");
	expect_tool_error(sb, "call_tool('compute', a=1, b=2, c=3)", "unexpected argument 'c'");
	expect_tool_error(sb, "call_tool('echo', v=float('nan'))", "not JSON");
	expect_tool_error(sb, "call_tool('echo', v=object())", "not JSON");
	expect_tool_error(sb, "call_tool('echo', v='x' * (20 << 20))", "the limit is");
	expect_tool_error(sb,
			  "x = []\n    for i in range(10000): x = [x]\n    call_tool('echo', v=x)",
			  "nested too deeply");
	expect_tool_error(sb,
			  "x = []\n    for i in range(500): x = [x]\n    call_tool('echo', v=x)",
			  "nested deeper than 64 levels");
	expect_output(sb, "print(call_tool('compute', a=40, b=2))", "42\n");
	snapcell_sandbox_free(sb);
}

#define ORDER	   "customer='ann', items=[{'sku': 'ABC-1234', 'qty': 2, 'note': None}]"
#define ORDER_DICT "'customer': 'bob', 'items': [{'sku': 'XYZ-0001', 'qty': 1}]"

Test(tools, a_pydantic_schema_is_callable_and_bad_arguments_name_their_path, .timeout = 60)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "order", "Places an order.",
					      pydantic_order_schema, SNAPCELL_APPROVAL_NEVER, echo,
					      NULL, NULL),
		     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	expect_output(
		sb,
		"import tools\nr = tools.order(" ORDER ", priority='high', discount=None,"
		" pet={'kind': 'dog'}, where=[1.5, 2], parent={" ORDER_DICT "})\n"
		"print(r['priority'], r['items'][0]['qty'], r['pet'], r['parent']['customer'])",
		"high 2 {'kind': 'dog'} bob\n");
	expect_tool_error(
		sb, "call_tool('order', customer='ann', items=[{'sku': 'ABC-1234', 'qty': 0}])",
		"ToolError invalid arguments for tool 'order': items[0].qty: must be >= 1");
	expect_tool_error(sb, "call_tool('order', " ORDER ", priority='urgent')",
			  "priority: must be one of [\"low\",\"high\"]");
	expect_tool_error(sb, "call_tool('order', " ORDER ", pet={'kind': 'dog', 'good': 'yes'})",
			  "pet: matches no alternative of anyOf");
	expect_tool_error(sb,
			  "call_tool('order', " ORDER ", parent={'customer': 'bob', 'items':"
			  " [{'sku': 'nope', 'qty': 1}]})",
			  "parent.items[0].sku: does not match the pattern '^[A-Z]{3}-\\d{4}$'");
	expect_tool_error(sb, "call_tool('order', customer='üüüüüüüüü', items=[])",
			  "customer: must be at most 8 characters long");
	/* The raw text 0.99999999999999999 passes "integer, minimum 1" as the double 1.0; the
	 * tool must get 1.0 too, not a number below its minimum. */
	expect_output(sb,
		      "import _snapcell\n"
		      "print(_snapcell.call('order', b'{\"customer\": \"ann\", \"items\":"
		      " [{\"sku\": \"ABC-1234\", \"qty\": 0.99999999999999999}]}'))",
		      "(True, b'{\"customer\": \"ann\", \"items\": [{\"sku\": \"ABC-1234\","
		      " \"qty\": 1.0}]}')\n");
	snapcell_sandbox_free(sb);
}

Test(tools, garbage_on_the_socket_kills_the_cell_and_spares_the_host)
{
	struct snapcell_sandbox *sb = tool_sandbox();
	struct snapcell_result *res = test_run(
		sb, "import os\nos.write(3, b'\\xff\\xff\\xff\\x7fgarbage' * 100)\nimport time\n"
		    "time.sleep(5)\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_KILLED);
	cr_expect(strstr(res->stderr_buf, "broke the frame protocol"), "%s", res->stderr_buf);
	snapcell_result_free(res);
	res = test_run(sb, "import os\nos.write(3, b'\\x10\\x00\\x00\\x00Xwhatever-this-is')\n"
			   "import time\ntime.sleep(5)\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_KILLED);
	cr_expect(strstr(res->stderr_buf, "unexpected frame"), "%s", res->stderr_buf);
	snapcell_result_free(res);
	expect_output(sb, "print(call_tool('compute', a=2, b=40))", "42\n");
	snapcell_sandbox_free(sb);
}

Test(tools, forked_child_cannot_call)
{
	struct snapcell_sandbox *sb = tool_sandbox();
	struct snapcell_result *res =
		test_run(sb, "import os\nr, w = os.pipe()\nif os.fork() == 0:\n"
			     "    try:\n        call_tool('compute', a=1, b=1)\n"
			     "    except RuntimeError as e:\n        os.write(w, str(e).encode())\n"
			     "    os._exit(0)\nos.wait()\nprint(os.read(r, 200).decode())\n");
	expect_ok(res);
	cr_expect(strstr(res->stdout_buf, "only available in the process running the code"), "%s",
		  res->stdout_buf);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* A sandbox with the tool "count" (counting), its count at 0. */
static struct snapcell_sandbox *counting_sandbox(void)
{
	calls_seen = 0;
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_add_tool(cfg, "count", "", NULL, SNAPCELL_APPROVAL_NEVER, counting, NULL,
				 NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

Test(tools, calls_from_threads_are_serialised)
{
	struct snapcell_sandbox *sb = counting_sandbox();
	struct snapcell_result *res =
		test_run(sb, "from concurrent.futures import ThreadPoolExecutor\n"
			     "with ThreadPoolExecutor(8) as ex:\n"
			     "    out = list(ex.map(lambda i: call_tool('count'), range(200)))\n"
			     "print(out == [None] * 200)\n");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "True\n");
	cr_expect_eq(calls_seen, 200); /* the callback ran in this (the caller's) process */
	cr_expect_eq(res->n_tool_calls, 200);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* Each parked cell of a warmed template walks a tool call's path with a stand-in for the
 * exchange (prelude._warm_tool_path): none of it may reach the host's tools or their log. */
Test(tools, the_warmed_call_path_of_parked_cells_reaches_no_tool)
{
	struct snapcell_sandbox *sb = counting_sandbox();
	for (int i = 0; i < 6; i++) {
		struct snapcell_result *res =
			test_run(sb, "import sys\np = sys.modules['_snapcell_prelude']\n"
				     "print(p._tools_configured)\n");
		expect_ok(res);
		cr_expect_str_eq(res->stdout_buf, "True\n");
		cr_expect_eq(res->n_tool_calls, 0, "run %d logged %zu calls", i,
			     (size_t)res->n_tool_calls);
		snapcell_result_free(res);
	}
	cr_expect_eq(calls_seen, 0);
	expect_output(sb,
		      "import sys\nprint(sys.modules['_snapcell_prelude']._encode is not None)\n"
		      "print(call_tool('count'))\n",
		      "True\nNone\n");
	cr_expect_eq(calls_seen, 1);
	snapcell_sandbox_free(sb);
}

Test(tools, no_tools_registered)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(sb, "call_tool('x')");
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	cr_expect(strstr(res->stderr_buf, "ToolError: unknown tool 'x'; no tools are registered"),
		  "%s", res->stderr_buf);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* Blocks for *(unsigned *)user milliseconds, as a callback ignoring the deadline would. */
static int slow(void *user, const char *args, char **result)
{
	usleep(*(unsigned *)user * 1000);
	*result = strdup("\"late\"");
	return 0;
}

static unsigned slow_ms = 1500;

Test(tools, a_callback_blocking_past_the_deadline_ends_the_run_as_timeout)
{
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 1000, NULL);
	snapcell_config_add_tool(cfg, "slow", "", NULL, SNAPCELL_APPROVAL_NEVER, slow, &slow_ms,
				 NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res = test_run(sb, "r = call_tool('slow')\nprint(r)");
	cr_expect_eq(res->status, SNAPCELL_STATUS_TIMEOUT);
	cr_expect(res->limits_hit & SNAPCELL_HIT_WALL);
	cr_expect_str_eq(res->stdout_buf, "", "the late result never reached the code");
	/* Ended when the 1.5 s callback returned, not a drain grace of 1 s after it. */
	cr_expect_lt(res->wall_us, 2400000, "wall %llu us", (unsigned long long)res->wall_us);
	snapcell_result_free(res);
	res = test_run(sb, "print(1)");
	expect_ok(res);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* Blocked past the deadline and the template's grace after it (5 s): the run is still a
 * timeout, not "the template did not report the cell's exit" (the grace counts from the
 * kill, which the callback delayed). */
Test(tools, a_callback_blocking_long_past_the_deadline_is_still_a_timeout, .timeout = 60)
{
	static unsigned long_ms = 5800;
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 300, NULL);
	snapcell_config_add_tool(cfg, "slow", "", NULL, SNAPCELL_APPROVAL_NEVER, slow, &long_ms,
				 NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res = test_run(sb, "call_tool('slow')\nprint('after')");
	cr_expect_eq(res->status, SNAPCELL_STATUS_TIMEOUT);
	cr_expect(res->limits_hit & SNAPCELL_HIT_WALL);
	cr_expect_str_eq(res->stdout_buf, "");
	snapcell_result_free(res);
	expect_output(sb, "print(1)", "1\n");
	snapcell_sandbox_free(sb);
}

static int deadline_probe(void *user, const char *args, char **result)
{
	*(uint64_t *)user = snapcell_tool_deadline_us();
	*result = strdup("null");
	return 0;
}

static uint64_t monotonic_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

Test(tools, a_callback_can_ask_for_the_runs_deadline)
{
	uint64_t seen = 0;
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 3000, NULL);
	snapcell_config_add_tool(cfg, "deadline", "", NULL, SNAPCELL_APPROVAL_NEVER, deadline_probe,
				 &seen, NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	cr_expect_eq(snapcell_tool_deadline_us(), 0, "outside a callback");
	uint64_t before = monotonic_us();
	struct snapcell_result *res = test_run(sb, "call_tool('deadline')");
	uint64_t after = monotonic_us();
	expect_ok(res);
	cr_expect(seen >= before + 3000000 && seen <= after + 3000000,
		  "deadline %llu not 3 s after the run's start (%llu..%llu)",
		  (unsigned long long)seen, (unsigned long long)before, (unsigned long long)after);
	cr_expect_eq(snapcell_tool_deadline_us(), 0, "after the callback");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

static uint64_t thread_cpu_us(void)
{
	struct rusage ru;
	cr_assert_eq(getrusage(RUSAGE_THREAD, &ru), 0);
	return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
	       (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* Both ends spin only briefly before they sleep (rpc/frame.h): a cell waiting 300 ms for a
 * slow tool, and a host waiting 300 ms for code that makes no more calls, each use far less
 * CPU than that while they wait, whatever the calls before did. */
Test(tools, waits_for_a_slow_tool_or_slow_code_do_not_spin, .timeout = 60)
{
	static unsigned ms = 300;
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "slow", "Sleeps.", NULL, SNAPCELL_APPROVAL_NEVER,
					      slow, &ms, NULL),
		     0);
	cr_assert_eq(snapcell_config_add_tool(cfg, "echo", "Echoes.", NULL, SNAPCELL_APPROVAL_NEVER,
					      echo, NULL, NULL),
		     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res = test_run(
		sb, "for _ in range(200):\n    call_tool('echo')\nprint(call_tool('slow'))\n");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "late\n");
	cr_expect_lt(res->cpu_us, 200000, "the cell used %llu us of CPU",
		     (unsigned long long)res->cpu_us);
	snapcell_result_free(res);
	uint64_t before = thread_cpu_us();
	res = test_run(sb, "import time\nfor _ in range(200):\n    call_tool('echo')\n"
			   "time.sleep(0.3)\nprint('done')\n");
	uint64_t host_us = thread_cpu_us() - before;
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "done\n");
	cr_expect_lt(host_us, 200000, "the host used %llu us of CPU", (unsigned long long)host_us);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* Code that sends calls and never reads the answers stops being read once the answers not
 * yet sent pass the backlog cap: it blocks in its own write and times out, and the host holds
 * a bounded amount of it. */
Test(tools, a_flood_of_calls_that_never_reads_answers_is_held_back, .timeout = 60)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "echo", "Echoes.", NULL, SNAPCELL_APPROVAL_NEVER,
					      echo, NULL, NULL),
		     0);
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 4000, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res =
		test_run(sb, "import os, struct\n"
			     "p = struct.pack('<IB', 1, 0) + b'echo\\0{\"x\": \"' + b'y' * 4000 + "
			     "b'\"}'\n"
			     "frame = struct.pack('<I', 1 + len(p)) + b'C' + p\n"
			     "while True:\n    os.write(3, frame * 100)\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_TIMEOUT, "%s", snapcell_status_name(res->status));
	cr_expect_lt(res->n_tool_calls + res->n_tool_calls_dropped, 40000,
		     "the host served %zu calls", res->n_tool_calls);
	snapcell_result_free(res);
	expect_output(sb, "print(1)", "1\n");
	snapcell_sandbox_free(sb);
}
