#define _GNU_SOURCE
/* The tool registry without a sandbox: add, replace, remove, list. */
#include "helpers.h"

static int echo(void *user, const char *args, char **result)
{
	*result = strdup(args);
	return 0;
}

static const char compute_schema[] =
	"{\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"integer\"},"
	" \"b\": {\"type\": \"integer\"}}, \"required\": [\"a\", \"b\"],"
	" \"additionalProperties\": false}";

Test(tools, registry_add_replace_remove_list)
{
	struct snapcell_config *cfg = test_config_new();
	cr_expect_eq(snapcell_config_add_tool(cfg, "has space", "", NULL, 0, echo, NULL, NULL),
		     SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_add_tool(cfg, "x", "", "{\"type\": \"objekt\"}", 0, echo, NULL,
					      NULL),
		     SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_add_tool(cfg, "x", "", "{\"if\": {}}", 0, echo, NULL, NULL),
		     SNAPCELL_E_INVAL, "unsupported keywords are refused, not ignored");
	cr_assert_eq(snapcell_config_add_tool(cfg, "a", "first", NULL, 0, echo, NULL, NULL), 0);
	cr_assert_eq(snapcell_config_add_tool(cfg, "b", "second", NULL, 1, echo, NULL, NULL), 0);
	cr_assert_eq(
		snapcell_config_add_tool(cfg, "a", "replaced", compute_schema, 0, echo, NULL, NULL),
		0);
	cr_assert_eq(snapcell_config_tool_count(cfg), 2);
	struct snapcell_tool_info info;
	cr_assert_eq(snapcell_config_tool_info(cfg, 0, &info, NULL), 0);
	cr_expect_str_eq(info.name, "a");
	cr_expect_str_eq(info.description, "replaced");
	cr_expect(strstr(info.params_schema, "\"required\""));
	cr_assert_eq(snapcell_config_tool_info(cfg, 1, &info, NULL), 0);
	cr_expect_eq(info.approval, SNAPCELL_APPROVAL_ALWAYS);
	cr_expect_eq(snapcell_config_remove_tool(cfg, "a", NULL), 0);
	cr_expect_eq(snapcell_config_remove_tool(cfg, "a", NULL), -ENOENT);
	cr_expect_eq(snapcell_config_tool_count(cfg), 1);
	snapcell_config_free(cfg);
}

/* MCP-style names (1-128 of [A-Za-z0-9_.-]), so a downstream server's tools keep their
 * names under "server."; everything else is refused with the rule in the message. */
Test(tools, names_are_mcp_style)
{
	struct snapcell_config *cfg = test_config_new();
	char longest[SNAPCELL_TOOL_NAME_MAX + 2];
	memset(longest, 'a', SNAPCELL_TOOL_NAME_MAX + 1);
	longest[SNAPCELL_TOOL_NAME_MAX + 1] = 0;
	const char *bad[] = {"",     "has space", "sl/ash", "\xc3\xa9t\xc3\xa9",
			     "a\nb", "a:b",	  longest};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct snapcell_error err = {0};
		cr_expect_eq(snapcell_config_add_tool(cfg, bad[i], "", NULL, 0, echo, NULL, &err),
			     SNAPCELL_E_INVAL, "%s", bad[i]);
		cr_expect(strstr(err.message, "1 to 128 characters of [A-Za-z0-9_.-]"), "%s",
			  err.message);
	}
	longest[SNAPCELL_TOOL_NAME_MAX] = 0; /* exactly at the limit */
	const char *good[] = {"1abc", "has-dash", "docs.search-v2", "x.class", "-", longest};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_expect_eq(snapcell_config_add_tool(cfg, good[i], "", NULL, 0, echo, NULL, NULL),
			     0, "%s", good[i]);
	cr_expect_eq(snapcell_config_tool_count(cfg), 6);
	snapcell_config_free(cfg);
}

static void expect_clash(const char *first, const char *second, const char *want)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_add_tool(cfg, first, "", NULL, 0, echo, NULL, NULL), 0);
	cr_expect_eq(snapcell_config_add_tool(cfg, second, "", NULL, 0, echo, NULL, &err),
		     SNAPCELL_E_INVAL, "%s after %s", second, first);
	cr_expect_str_eq(err.message, want);
	cr_expect_eq(snapcell_config_tool_count(cfg), 1);
	snapcell_config_free(cfg);
}

/* Two names the code would reach through the same tools.<attribute> are refused, naming
 * both, instead of one silently hiding the other. */
Test(tools, attribute_clashes_are_refused_naming_both)
{
	expect_clash("docs.search-v2", "docs.search_v2",
		     "add_tool docs.search_v2: the code would call it as tools.docs.search_v2, "
		     "which clashes with tool docs.search-v2 (tools.docs.search_v2)");
	expect_clash("a.b", "a.b.c",
		     "add_tool a.b.c: the code would call it as tools.a.b.c, which clashes with "
		     "tool a.b (tools.a.b)");
	expect_clash("a.b.c", "a",
		     "add_tool a: the code would call it as tools.a, which clashes with tool "
		     "a.b.c (tools.a.b.c)");
	expect_clash("x.class", "x.class_",
		     "add_tool x.class_: the code would call it as tools.x.class_, which clashes "
		     "with tool x.class (tools.x.class_)");
	expect_clash("s.1y", "s._1y",
		     "add_tool s._1y: the code would call it as tools.s._1y, which clashes with "
		     "tool s.1y (tools.s._1y)");
	expect_clash("s..t", "s._.t",
		     "add_tool s._.t: the code would call it as tools.s._.t, which clashes with "
		     "tool s..t (tools.s._.t)");
}
