#define _GNU_SOURCE
/* Tools given for one run (snapcell_run_options.tools): added to the sandbox's for that run
 * only, checked against them before the run starts, and never a new template. */
#include "helpers.h"

#include <jansson.h>

static int multiply(void *user, const char *args, char **result)
{
	json_t *a = json_loads(args, 0, NULL);
	long long product = json_integer_value(json_object_get(a, "a")) *
			    json_integer_value(json_object_get(a, "b"));
	json_decref(a);
	return asprintf(result, "%lld", product) < 0;
}

static int named(void *user, const char *args, char **result)
{
	*result = strdup(user);
	return 0;
}

/* A sandbox with one tool of its own: add, answering "\"sandbox\"". */
static struct snapcell_sandbox *sandbox_with_add(void)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "add", "the sandbox's", NULL,
					      SNAPCELL_APPROVAL_NEVER, named, "\"sandbox\"", NULL),
		     0);
	cr_assert_eq(snapcell_config_add_tool(cfg, "docs.search", NULL, NULL,
					      SNAPCELL_APPROVAL_NEVER, named, "\"docs\"", NULL),
		     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

/* The run's tools: mul (a JSON Schema of two integers) and one more, named. */
static struct snapcell_config *run_tools(const char *extra)
{
	struct snapcell_config *t = snapcell_config_new();
	cr_assert_eq(snapcell_config_add_tool(
			     t, "mul", "multiplies",
			     "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},"
			     "\"b\":{\"type\":\"integer\"}},\"required\":[\"a\",\"b\"]}",
			     SNAPCELL_APPROVAL_NEVER, multiply, NULL, NULL),
		     0);
	if (extra)
		cr_assert_eq(snapcell_config_add_tool(t, extra, NULL, NULL, SNAPCELL_APPROVAL_NEVER,
						      named, "\"run\"", NULL),
			     0);
	return t;
}

static struct snapcell_result *run_with(struct snapcell_sandbox *sb, const char *code,
					const struct snapcell_config *tools)
{
	struct snapcell_run_options opts = {.size = sizeof(opts), .tools = tools};
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_sandbox_run(sb, code, SIZE_MAX, &opts, &res, &err), 0, "%s",
		     err.message);
	return res;
}

Test(run_tools, are_added_for_that_run_only_without_a_new_template)
{
	struct snapcell_sandbox *sb = sandbox_with_add();
	unsigned long long template = test_template_identity(sb);
	struct snapcell_config *tools = run_tools("report.send-v2");
	struct snapcell_result *res =
		run_with(sb,
			 "print(tools.mul(a=6, b=7), call_tool('mul', a=2, b=3), tools.add(),"
			 " tools.report.send_v2(), tools.docs.search())",
			 tools);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "42 6 sandbox run docs\n");
	cr_expect_eq(res->n_tool_calls, 5);
	snapcell_result_free(res);
	/* The run's tools are checked like the sandbox's. */
	res = run_with(sb, "tools.mul(a='6', b=7)", tools);
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	cr_expect(strstr(res->stderr_buf, "ToolError"), "%s", res->stderr_buf);
	snapcell_result_free(res);
	snapcell_config_free(tools); /* the run copied them */
	/* The next run has only the sandbox's. */
	res = test_run(sb, "print(hasattr(tools, 'mul'), hasattr(tools, 'report'))\n"
			   "try:\n    call_tool('mul', a=1, b=2)\n"
			   "except ToolError as e:\n    print(e)\n");
	expect_ok(res);
	cr_expect(strstr(res->stdout_buf, "False False\nunknown tool 'mul'"), "%s",
		  res->stdout_buf);
	snapcell_result_free(res);
	cr_expect_eq(test_template_identity(sb), template, "the same template");
	snapcell_sandbox_free(sb);
}

Test(run_tools, a_clash_with_the_sandboxs_tools_is_refused_before_the_run)
{
	struct snapcell_sandbox *sb = sandbox_with_add();
	struct snapcell_error err = {0};
	struct snapcell_result *res = NULL;
	const char *clashing[] = {"add", "docs", "docs.search.deep"};
	const char *said[] = {"tool add is already one of the sandbox's tools",
			      "tools.docs, which clashes with the sandbox's tool docs.search",
			      "clashes with the sandbox's tool docs.search"};
	for (size_t i = 0; i < 3; i++) {
		struct snapcell_config *tools = run_tools(clashing[i]);
		struct snapcell_run_options opts = {.size = sizeof(opts), .tools = tools};
		cr_expect_eq(snapcell_sandbox_run(sb, "open('/tmp/ran', 'w')", SIZE_MAX, &opts,
						  &res, &err),
			     SNAPCELL_E_INVAL, "%s", clashing[i]);
		cr_expect(strstr(err.message, said[i]), "%s", err.message);
		snapcell_config_free(tools);
	}
	/* A run's own tool may sit beside a namespace of the sandbox's. */
	struct snapcell_config *tools = run_tools("docs.fetch");
	res = run_with(sb, "print(tools.docs.fetch(), tools.docs.search())", tools);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "run docs\n");
	snapcell_result_free(res);
	snapcell_config_free(tools);
	snapcell_sandbox_free(sb);
}

Test(run_tools, a_sandbox_without_tools_takes_them_too)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_config *tools = run_tools(NULL);
	struct snapcell_result *res = run_with(sb, "tools.mul(a=5, b=5)", tools);
	expect_ok(res);
	cr_expect_str_eq(res->value_json, "25");
	snapcell_result_free(res);
	snapcell_config_free(tools);
	snapcell_sandbox_free(sb);
}

/* Options from an older header end before tools: they run without any. */
Test(run_tools, options_of_the_first_size_have_none)
{
	struct snapcell_sandbox *sb = sandbox_with_add();
	struct snapcell_config *tools = run_tools(NULL);
	struct snapcell_run_options opts = {.size = offsetof(struct snapcell_run_options, tools),
					    .tools = tools};
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_sandbox_run(sb, "hasattr(tools, 'mul')", SIZE_MAX, &opts, &res, NULL),
		     0);
	cr_expect_str_eq(res->value_json, "false");
	snapcell_result_free(res);
	snapcell_config_free(tools);
	snapcell_sandbox_free(sb);
}

Test(run_tools, a_session_has_them_for_one_run)
{
	struct snapcell_error err = {0};
	struct snapcell_sandbox *sb = sandbox_with_add();
	struct snapcell_session *s;
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	struct snapcell_config *tools = run_tools("report.send");
	struct snapcell_run_options opts = {.size = sizeof(opts), .tools = tools};
	struct snapcell_result *res;
	cr_assert_eq(
		snapcell_session_run(s, "x = tools.mul(a=3, b=4)\nx", SIZE_MAX, &opts, &res, &err),
		0, "%s", err.message);
	cr_expect_str_eq(res->value_json, "12");
	snapcell_result_free(res);
	snapcell_config_free(tools);
	cr_assert_eq(snapcell_session_run(s,
					  "[x, hasattr(tools, 'mul'), hasattr(tools, 'report'),"
					  " tools.add()]",
					  SIZE_MAX, NULL, &res, &err),
		     0, "%s", err.message);
	cr_expect_str_eq(res->value_json, "[12, false, false, \"sandbox\"]");
	snapcell_result_free(res);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* A run's tool may need a decision: the paused run keeps its copy of the tools, and the
 * resume, which takes none, runs the tool. */
Test(run_tools, a_paused_run_keeps_its_tools_until_the_decision)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_config *tools = run_tools(NULL);
	cr_assert_eq(snapcell_config_set_tool_decision(tools, "mul", true, NULL), 0);
	struct snapcell_result *res = run_with(sb, "tools.mul(a=7, b=6)", tools);
	snapcell_config_free(tools);
	cr_assert_eq(res->status, SNAPCELL_STATUS_PAUSED, "%s", res->stderr_buf);
	cr_expect_eq(res->value_state, SNAPCELL_VALUE_NOT_EVALUATED);
	uint64_t id = res->pending->id;
	snapcell_result_free(res);
	struct snapcell_config *more = run_tools(NULL);
	struct snapcell_run_options opts = {.size = sizeof(opts), .tools = more};
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_sandbox_resume(sb, id, SNAPCELL_VERDICT_APPROVED, NULL, NULL, &opts,
					     &res, &err),
		     SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "given when it starts"), "%s", err.message);
	snapcell_config_free(more);
	cr_assert_eq(snapcell_sandbox_resume(sb, id, SNAPCELL_VERDICT_APPROVED, NULL, NULL, NULL,
					     &res, &err),
		     0, "%s", err.message);
	expect_ok(res);
	cr_expect_str_eq(res->value_json, "42");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}
