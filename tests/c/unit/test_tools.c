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
	cr_expect_eq(snapcell_config_add_tool(cfg, "1bad", "", NULL, 0, echo, NULL, NULL),
		     SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_add_tool(cfg, "has-dash", "", NULL, 0, echo, NULL, NULL),
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
