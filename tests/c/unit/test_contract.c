/* The public contract without a sandbox: versions, error names, and messages with their
 * context. */
#include "helpers.h"

Test(contract, header_library_and_build_agree_on_the_version)
{
	char composed[32];
	snprintf(composed, sizeof(composed), "%d.%d.%d", SNAPCELL_VERSION_MAJOR,
		 SNAPCELL_VERSION_MINOR, SNAPCELL_VERSION_PATCH);
	cr_expect_str_eq(composed, SNAPCELL_VERSION);
	cr_expect_str_eq(snapcell_version(), SNAPCELL_VERSION, "loaded library vs header");
	cr_expect_str_eq(SC_PROJECT_VERSION, SNAPCELL_VERSION, "meson.build vs header");
}

Test(contract, error_names_and_descriptions_come_from_one_table)
{
	static const struct {
		int code;
		const char *name;
	} want[] = {
		{0, "OK"},
		{SNAPCELL_E_INVAL, "SNAPCELL_E_INVAL"},
		{SNAPCELL_E_ISOLATION, "SNAPCELL_E_ISOLATION"},
		{SNAPCELL_E_HELPER, "SNAPCELL_E_HELPER"},
		{SNAPCELL_E_TEMPLATE, "SNAPCELL_E_TEMPLATE"},
		{SNAPCELL_E_PROTOCOL, "SNAPCELL_E_PROTOCOL"},
		{SNAPCELL_E_TOO_BIG, "SNAPCELL_E_TOO_BIG"},
		{SNAPCELL_E_EXHAUSTED, "SNAPCELL_E_EXHAUSTED"},
		{-ENOENT, "ENOENT"},
		{-EPERM, "EPERM"},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		cr_expect_str_eq(snapcell_error_name(want[i].code), want[i].name);
		cr_expect_str_neq(snapcell_strerror(want[i].code), "unknown error", "%s",
				  want[i].name);
	}
	cr_expect_str_eq(snapcell_error_name(-4999), "UNKNOWN");
	cr_expect_str_eq(snapcell_error_name(7), "UNKNOWN");
	cr_expect_str_eq(snapcell_strerror(-4999), "unknown error");
	cr_expect_str_eq(snapcell_status_name(SNAPCELL_STATUS_CANCELLED), "cancelled");
}

static int no_tool(void *user, const char *args, char **result)
{
	*result = strdup("null");
	return 0;
}

/* add_tool's message, which must equal want. */
static void expect_add_tool_error(const char *name, const char *schema, const char *want)
{
	struct snapcell_config *cfg = snapcell_config_new();
	struct snapcell_error err = {0};
	int rc = snapcell_config_add_tool(cfg, name, "", schema, SNAPCELL_APPROVAL_NEVER, no_tool,
					  NULL, &err);
	cr_expect_eq(rc, SNAPCELL_E_INVAL, "%s", schema);
	cr_expect_eq(err.code, SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, want);
	cr_expect_eq(snapcell_config_tool_count(cfg), 0);
	snapcell_config_free(cfg);
}

Test(contract, a_rejected_schema_says_which_tool_where_and_why)
{
	expect_add_tool_error(
		"compute", "{\"properties\": {\"a\": {\"$ref\": \"#/x\"}}}",
		"add_tool compute: schema: properties.a: '$ref' '#/x' points to nothing");
	expect_add_tool_error("compute", "{\"type\": \"object\", \"if\": {}}",
			      "add_tool compute: schema: unknown keyword 'if'");
	expect_add_tool_error(
		"t", "{\"properties\": {\"xs\": {\"items\": {\"minimum\": \"1\"}}}}",
		"add_tool t: schema: properties.xs.items: 'minimum' must be a number");
	expect_add_tool_error("t", "{\"type\": \"objet\"}",
			      "add_tool t: schema: 'type' has an unknown type name 'objet'");
	expect_add_tool_error("t", "{\"type\": ",
			      "add_tool t: schema: not JSON: unexpected token near end of file "
			      "(line 1, column 9)");
	expect_add_tool_error("not an identifier", NULL,
			      "add_tool not an identifier: the name must be 1 to 128 characters "
			      "of [A-Za-z0-9_.-]");
}

Test(contract, config_setters_name_what_they_refused)
{
	struct snapcell_config *cfg = snapcell_config_new();
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 0, &err),
		     SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, "set_limit wall_ms: 0 is outside [1, 86400000]");
	cr_expect_eq(snapcell_config_set_env(cfg, "X", "\xff", &err), SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, "set_env X: the value is not UTF-8");
	cr_expect_eq(snapcell_config_add_python_path(cfg, "rel", &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "add_python_path rel: "), "%s", err.message);
	cr_expect_eq(snapcell_config_remove_tool(cfg, "nope", &err), -ENOENT);
	cr_expect_str_eq(err.message, "remove_tool nope: No such file or directory");
	cr_expect_eq(snapcell_config_remove_mount(cfg, "/input/x", &err), -ENOENT);
	cr_expect_str_eq(err.message, "remove_mount /input/x: No such file or directory");
	cr_expect_eq(snapcell_config_remove_mount(cfg, "../x", &err), SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, "remove_mount: mount path '../x' contains '..'");
	cr_expect_eq(snapcell_config_add_mount(cfg, "/tmp", "..", &err), SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, "mount /tmp: mount path '..' contains '..'");
	cr_expect_eq(snapcell_config_mount_info(cfg, 0, NULL, NULL, &err), SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, "mount_info: no mount 0 (there are 0)");
	cr_expect_eq(snapcell_config_require_isolation(cfg, 9, &err), SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, "require_isolation: unknown level 9");
	struct snapcell_tool_info info;
	cr_expect_eq(snapcell_config_tool_info(cfg, 3, &info, &err), SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, "tool_info: no tool 3 (there are 0)");
	/* NULL err is allowed everywhere. */
	cr_expect_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 0, NULL),
		     SNAPCELL_E_INVAL);
	snapcell_config_free(cfg);
}

/* Run options from a newer header: larger, with fields this library does not know. */
struct newer_run_options {
	struct snapcell_run_options v1;
	uint64_t future_field;
};
