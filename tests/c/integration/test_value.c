/* The value of the code's last expression: what comes back, why it is absent, and that the
 * code cannot make the host take a value it did not check. */
#include "helpers.h"

/* Runs code and checks its value's state and JSON (NULL: none). */
static void expect_value(struct snapcell_sandbox *sb, const char *code, enum snapcell_status status,
			 enum snapcell_value_state state, const char *json)
{
	struct snapcell_result *res = test_run(sb, code);
	cr_expect_eq(res->status, status, "%s: status %s, stderr: %s", code,
		     snapcell_status_name(res->status), res->stderr_buf);
	cr_expect_eq(res->value_state, state, "%s: value %s, not %s", code,
		     snapcell_value_state_name(res->value_state), snapcell_value_state_name(state));
	if (json)
		cr_expect_str_eq(res->value_json ? res->value_json : "(null)", json, "%s", code);
	else
		cr_expect_null(res->value_json, "%s: %s", code, res->value_json);
	cr_expect_eq(snapcell_result_value_json(res), res->value_json);
	snapcell_result_free(res);
}

Test(value, the_last_expression_comes_back_as_json_and_is_not_printed)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(sb, "1+1");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "");
	cr_expect_eq(res->value_state, SNAPCELL_VALUE_PRESENT);
	cr_assert_not_null(res->value_json);
	cr_expect_str_eq(res->value_json, "2");
	char *text = NULL;
	cr_assert_eq(snapcell_result_value_text(res, &text, NULL), 0);
	cr_expect_str_eq(text, "value: 2");
	free(text);
	snapcell_result_free(res);
	/* print's output is unchanged, and its value (None) is no value. */
	res = test_run(sb, "print('hi')\n[1, (2, 3), {'a': None, 'b': 'é'}]\n");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "hi\n");
	cr_expect_str_eq(res->value_json, "[1, [2, 3], {\"a\": null, \"b\": \"é\"}]");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(value, says_why_there_is_none)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_value(sb, "x = 3", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NO_EXPRESSION, NULL);
	expect_value(sb, "x = 3\nif x:\n    x\n", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NO_EXPRESSION,
		     NULL);
	expect_value(sb, "None", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NONE, NULL);
	expect_value(sb, "print('x')", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NONE, NULL);
	expect_value(sb, "object()", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NOT_JSON, NULL);
	expect_value(sb, "float('nan')", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NOT_JSON, NULL);
	expect_value(sb, "x = []\nx.append(x)\nx", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NOT_JSON,
		     NULL);
	/* Python writes {1: 2, "1": 3} with the key "1" twice: the host refuses it. */
	expect_value(sb, "{1: 2, '1': 3}", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NOT_JSON, NULL);
	expect_value(sb, "'\\ud800'", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NOT_JSON, NULL);
	/* Deeper than the host takes (64 levels). */
	expect_value(sb, "import json\njson.loads('[' * 70 + ']' * 70)", SNAPCELL_STATUS_OK,
		     SNAPCELL_VALUE_NOT_JSON, NULL);
	expect_value(sb, "list(range(100000))", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_TOO_LARGE, NULL);
	/* Just under the cap: the JSON string's two quotes and the text. */
	char code[64];
	snprintf(code, sizeof(code), "'x' * %d", SNAPCELL_VALUE_MAX_BYTES - 2);
	struct snapcell_result *res = test_run(sb, code);
	cr_expect_eq(res->value_state, SNAPCELL_VALUE_PRESENT);
	cr_expect_eq(res->value_json ? strlen(res->value_json) : 0, SNAPCELL_VALUE_MAX_BYTES);
	snapcell_result_free(res);
	snprintf(code, sizeof(code), "'x' * %d", SNAPCELL_VALUE_MAX_BYTES - 1);
	expect_value(sb, code, SNAPCELL_STATUS_OK, SNAPCELL_VALUE_TOO_LARGE, NULL);
	/* A run that fails has no value, however far it got. */
	expect_value(sb, "1/0", SNAPCELL_STATUS_ERROR, SNAPCELL_VALUE_NOT_EVALUATED, NULL);
	expect_value(sb, "import sys\nsys.exit(0)", SNAPCELL_STATUS_OK,
		     SNAPCELL_VALUE_NOT_EVALUATED, NULL);
	expect_value(sb, "import sys\nsys.exit(3)", SNAPCELL_STATUS_ERROR,
		     SNAPCELL_VALUE_NOT_EVALUATED, NULL);
	expect_value(sb, "1 +", SNAPCELL_STATUS_ERROR, SNAPCELL_VALUE_NOT_EVALUATED, NULL);
	cr_expect_str_eq(snapcell_value_state_name(SNAPCELL_VALUE_NO_EXPRESSION), "no_expression");
	cr_expect_str_eq(snapcell_value_state_name(SNAPCELL_VALUE_TOO_LARGE), "too_large");
	cr_expect_null(snapcell_value_state_name((enum snapcell_value_state)99));
	snapcell_sandbox_free(sb);
}

Test(value, the_model_is_told_why_a_value_is_not_shown)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	const char *codes[] = {"object()", "list(range(100000))", "x = 1", "None", "1/0"};
	const char *said[] = {"not representable as JSON", "over 262144 bytes", NULL, NULL, NULL};
	for (size_t i = 0; i < 5; i++) {
		struct snapcell_result *res = test_run(sb, codes[i]);
		char *text = (char *)"unset";
		cr_assert_eq(snapcell_result_value_text(res, &text, NULL), 0);
		if (said[i])
			cr_expect(text && strstr(text, said[i]), "%s: %s", codes[i], text);
		else
			cr_expect_null(text, "%s: %s", codes[i], text);
		free(text);
		snapcell_result_free(res);
	}
	snapcell_sandbox_free(sb);
}

/* The last statement is found however it is laid out, and it keeps its line numbers. */
Test(value, the_last_statement_is_found_in_any_layout)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_value(sb, "f = lambda *a: a\nf(1,\n2,\n3)\n", SNAPCELL_STATUS_OK,
		     SNAPCELL_VALUE_PRESENT, "[1, 2, 3]");
	expect_value(sb, "x = 1; x + 1", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_PRESENT, "2");
	expect_value(sb, "x = 1; y = 2", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NO_EXPRESSION, NULL);
	expect_value(sb, "s = '''\n1\n'''\ns\n# the end\n\n", SNAPCELL_STATUS_OK,
		     SNAPCELL_VALUE_PRESENT, "\"\\n1\\n\"");
	expect_value(sb, "s = '''\n1\n'''", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_NO_EXPRESSION, NULL);
	expect_value(sb, "def f():\n    return 5\nf()", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_PRESENT,
		     "5");
	expect_value(sb, "x = [\n1,\n2]\nx[1]", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_PRESENT, "2");
	expect_value(sb, "a = 1\na \\\n+ 1", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_PRESENT, "2");
	/* A last expression spanning more lines at column 0 than the quick split tries. */
	expect_value(
		sb,
		"x = (\n1\n,\n2\n,\n3\n,\n4\n,\n5\n,\n6\n)\n(\nx\n[\n0\n]\n+\nx\n[\n5\n]\n+\n1\n)",
		SNAPCELL_STATUS_OK, SNAPCELL_VALUE_PRESENT, "8");
	expect_value(sb, "# -*- coding: utf-8 -*-\nx = 'é'\nx", SNAPCELL_STATUS_OK,
		     SNAPCELL_VALUE_PRESENT, "\"é\"");
	expect_value(sb,
		     "from __future__ import annotations\ndef f(x: Undefined): pass\nf.__name__",
		     SNAPCELL_STATUS_OK, SNAPCELL_VALUE_PRESENT, "\"f\"");
	struct snapcell_result *res = test_run(sb, "x = 1\ny = 0\n\nx / y\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	cr_expect(strstr(res->stderr_buf, "line 4, in <module>\n    x / y"), "%s", res->stderr_buf);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

static size_t count(const char *s, const char *what)
{
	size_t n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* Finding the last statement compiles parts of the code on trial: a warning the compiler
 * gives (a SyntaxWarning for `is` with a literal; from 3.12 one for an invalid escape too,
 * raised while reading the text) still shows once. */
Test(value, a_compile_warning_shows_once)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	const char *codes[] = {
		"x = 1\ny = x is 1\nz = '\\d'\n",     "x = 1\ny = x is 1\nz = '\\d'\nlen(z)\n",
		"x = 1\nd = {}\nd['\\d'] = x is 1",   "x = '\\d'; x is 1",
		"z = '\\d'\nif z:\n    y = z is 1\n",
	};
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		struct snapcell_result *res = test_run(sb, codes[i]);
		expect_ok(res);
		cr_expect_eq(count(res->stderr_buf, "\"is\" with"), 1, "%s: %s", codes[i],
			     res->stderr_buf);
		cr_expect_leq(count(res->stderr_buf, "invalid escape sequence"), 1, "%s: %s",
			      codes[i], res->stderr_buf);
		snapcell_result_free(res);
	}
	snapcell_sandbox_free(sb);
}

/* The sandbox's first cell is parked before the template's warm-up (its AST types, its JSON
 * encoder): its value comes back the same. */
Test(value, the_first_cell_gives_it_too)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	expect_value(sb, "x = 20; x + 22", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_PRESENT, "42");
	snapcell_sandbox_free(sb);
	sb = test_sandbox(NULL);
	expect_value(sb, "{'k': [True, 1.5]}", SNAPCELL_STATUS_OK, SNAPCELL_VALUE_PRESENT,
		     "{\"k\": [true, 1.5]}");
	snapcell_sandbox_free(sb);
}

Test(value, each_session_run_has_its_own)
{
	struct snapcell_error err;
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s;
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	const char *codes[] = {"x = 40", "x + 2", "x = x + 1", "1/0", "x"};
	const char *values[] = {NULL, "42", NULL, NULL, "41"};
	for (size_t i = 0; i < 5; i++) {
		struct snapcell_result *res;
		cr_assert_eq(snapcell_session_run(s, codes[i], SIZE_MAX, NULL, &res, &err), 0, "%s",
			     err.message);
		if (values[i])
			cr_expect_str_eq(res->value_json ? res->value_json : "(null)", values[i]);
		else
			cr_expect_null(res->value_json, "%s: %s", codes[i], res->value_json);
		snapcell_result_free(res);
	}
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* The code can write frames on fd 3 itself: a value it forges is its own result's (like its
 * stdout), never a second one, never one the host did not check. */
#define FRAME_FN                                                                                   \
	"import os, struct\n"                                                                      \
	"def frame(payload):\n"                                                                    \
	"    os.write(3, struct.pack('<I', 1 + len(payload)) + b'V' + payload)\n"

Test(value, a_forged_value_frame_is_checked_and_never_taken_twice)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	/* A second value (the forged one, then the real one) breaks the protocol. */
	struct snapcell_result *res = test_run(sb, FRAME_FN "frame(b'\\x01[1]')\n5\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_KILLED, "%s", snapcell_status_name(res->status));
	cr_expect_null(res->value_json);
	cr_expect(strstr(res->stderr_buf, "frame protocol"), "%s", res->stderr_buf);
	snapcell_result_free(res);
	/* A state no cell sends. */
	res = test_run(sb, FRAME_FN "frame(b'\\x09')\nimport time\ntime.sleep(5)\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_KILLED, "%s", snapcell_status_name(res->status));
	snapcell_result_free(res);
	/* Text that is not JSON, over the cap, or a state other than present with text. */
	res = test_run(sb, FRAME_FN "frame(b'\\x01[1,')\nimport os\nos._exit(0)\n");
	cr_expect_null(res->value_json, "no DONE, no value: %s", res->value_json);
	cr_expect_eq(res->value_state, SNAPCELL_VALUE_NOT_EVALUATED);
	snapcell_result_free(res);
	res = test_run(sb, FRAME_FN "frame(b'\\x03[1]')\nimport time\ntime.sleep(5)\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_KILLED, "%s", snapcell_status_name(res->status));
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* A value that is not JSON, forged by the code and followed by its own DONE, is refused by
 * the host's check, not passed on. */
Test(value, the_host_checks_the_json_itself)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res =
		test_run(sb, FRAME_FN "frame(b'\\x01[1,')\n"
				      "os.write(3, struct.pack('<I', 33) + b'D' + bytes(32))\n"
				      "import time\ntime.sleep(5)\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_OK, "%s: %s", snapcell_status_name(res->status),
		     res->stderr_buf);
	cr_expect_null(res->value_json, "%s", res->value_json);
	cr_expect_eq(res->value_state, SNAPCELL_VALUE_NOT_JSON);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

/* A value of the full size (256 KiB of JSON) and DONE can still wait in the socket when the
 * cell's exit and its pipes' ends are seen, and the host reads 64 KiB at a time: the run
 * ends only once they are read. Two threads' runs at once make that moment likelier; every
 * run must bring its value. */
static void *full_size_values(void *arg)
{
	struct snapcell_sandbox *sb = arg;
	for (int i = 0; i < 20; i++) {
		struct snapcell_result *res = test_run(sb, "'x' * (256 * 1024 - 2)");
		cr_expect_eq(res->value_state, SNAPCELL_VALUE_PRESENT, "run %d: %s", i,
			     snapcell_value_state_name(res->value_state));
		cr_expect_eq(res->value_json ? strlen(res->value_json) : 0, 256 * 1024);
		snapcell_result_free(res);
	}
	return NULL;
}

Test(value, a_full_size_value_arrives_though_the_cell_is_gone_first, .timeout = 120)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, full_size_values, sb), 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	snapcell_sandbox_free(sb);
}
