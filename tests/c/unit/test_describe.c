/* What the model is told: the execute_code description in both formats, the provider
 * instructions, and the approval execute_code needs. */
#include <jansson.h>

#include "helpers.h"

static int answer(void *user, const char *args, char **result)
{
	*result = strdup("null");
	return 0;
}

static const char compute_schema[] =
	"{\"type\":\"object\",\"properties\":{"
	"\"a\":{\"type\":\"integer\",\"description\":\"The first  addend.\\nAny integer.\"},"
	"\"b\":{\"type\":\"integer\",\"default\":2},"
	"\"unit\":{\"type\":\"string\",\"enum\":[\"km\",\"mi\"],\"default\":\"km\"},"
	"\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
	"\"when\":{\"type\":[\"string\",\"null\"],\"format\":\"date-time\"}},"
	"\"required\":[\"a\"]}";

static const char lookup_schema[] =
	"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
	"\"filter\":{\"type\":\"object\",\"properties\":{\"region\":{\"type\":\"string\"}}}},"
	"\"required\":[\"id\"]}";

static void add_tool(struct snapcell_config *cfg, const char *name, const char *desc,
		     const char *schema, enum snapcell_approval approval)
{
	cr_assert_eq(
		snapcell_config_add_tool(cfg, name, desc, schema, approval, answer, NULL, NULL), 0,
		"add_tool %s", name);
}

static char *describe(const struct snapcell_config *cfg, enum snapcell_describe_format f)
{
	char *text = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_describe(cfg, f, &text, &err), 0, "%s", err.message);
	cr_assert_not_null(text);
	return text;
}

#define expect_has(text, part) cr_expect(strstr(text, part), "missing '%s' in:\n%s", part, text)
#define expect_lacks(text, part)                                                                   \
	cr_expect(!strstr(text, part), "unexpected '%s' in:\n%s", part, text)

/* The whole text for one configuration, so a change of wording is a visible decision. */
Test(describe, example_config_compact)
{
	struct snapcell_config *cfg = test_config_new();
	add_tool(cfg, "compute", "Adds two integers.", compute_schema, SNAPCELL_APPROVAL_NEVER);
	add_tool(cfg, "lookup", "Finds a customer.\nReturns a dict.", lookup_schema,
		 SNAPCELL_APPROVAL_NEVER);
	cr_assert_eq(snapcell_config_add_mount(cfg, "/etc/hostname", "notes/host.txt", NULL), 0);
	const char *methods[] = {"post", "get"};
	cr_assert_eq(snapcell_config_allow(cfg, "https://api.example.com/v1", methods, 2, NULL), 0);
	cr_assert_eq(snapcell_config_allow(cfg, "127.0.0.1:8080", NULL, 0, NULL), 0);
	cr_assert_eq(snapcell_config_allow_header(cfg, "https://api.example.com/v1",
						  "Authorization", "Bearer s3cret-token", NULL),
		     0);
	/* The model is told the interpreter's X.Y: one that says it is 3.12. */
	char *dir = test_make_tree(),
	     *json = test_python_answer("cpython", 3, 12, 1, false, "/bin/sh");
	char *python = test_fake_python(dir, "python3", json);
	cr_assert_eq(snapcell_config_set_python(cfg, python, NULL), 0);
	free(python), free(json);
	char *text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	cr_expect_str_eq(
		text,
		"Runs Python 3.12 code in an isolated sandbox and returns what it printed (stdout, "
		"then stderr) and the value of its last line when that is an expression. The "
		"standard library is available; packages cannot be installed. A run is stopped "
		"after 30 s.\n"
		"\n"
		"Host tools: inside the code, `call_tool(name, **kwargs)` is available as a "
		"built-in: it calls the registered host tool `name` with keyword arguments only "
		"(a dict or any other positional argument after the name is a TypeError) and "
		"returns its result as Python values (dicts, lists, numbers, strings). `tools` is "
		"a built-in too (no import needed): `tools.<name>(**kwargs)` is the same call. A "
		"tool that fails or refuses its arguments raises ToolError with its message; "
		"catch it to recover.\n"
		"For example: `call_tool(\"compute\", a=1)` and `tools.compute(a=1)`.\n"
		"Inside a running event loop (code that uses `await` at the top level, or runs "
		"under `asyncio.run(...)`) the same calls return awaitables instead: write `await "
		"tools.<name>(...)`; calls awaited together with `asyncio.gather(...)` run at the "
		"same time.\n"
		"Prefer `execute_code` when you need to combine one or more `call_tool(...)` "
		"calls with Python control flow, loops, or post-processing.\n"
		"\n"
		"Tools:\n"
		"- compute: Adds two integers.\n"
		"    a (integer, required): The first addend. Any integer.\n"
		"    b (integer, optional, default 2)\n"
		"    unit (string, optional, default \"km\", one of \"km\", \"mi\")\n"
		"    tags (array of string, optional)\n"
		"    when (string (date-time) or null, optional)\n"
		"- lookup: Finds a customer.\n"
		"  Returns a dict.\n"
		"    parameters (JSON Schema): "
		"{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"filter\":{"
		"\"type\":\"object\",\"properties\":{\"region\":{\"type\":\"string\"}}}},"
		"\"required\":[\"id\"]}\n"
		"\n"
		"Files: enabled.\n"
		"- Read inputs under /input (read-only).\n"
		"- Mounted paths:\n"
		"  - /input/notes/host.txt\n"
		"- Write files meant for the user (reports, tables, images) under /output, e.g. "
		"/output/result.csv; they are returned with the result.\n"
		"- Where the host cannot show these at /input and /output, they are the "
		"directories os.environ['SNAPCELL_INPUT'] and os.environ['SNAPCELL_OUTPUT'] name "
		"(scratch files: tempfile's directory): build paths from those variables.\n"
		"\n"
		"Network: targets allowed by this configuration (HTTP methods):\n"
		"- 127.0.0.1:8080: all methods\n"
		"- https://api.example.com/v1: GET, POST (the host adds the Authorization "
		"header)\n"
		"Ordinary Python networking (urllib, http.client, socket, ssl, requests, httpx) "
		"reaches these targets and nothing else: other names do not resolve and other "
		"connections fail with a PermissionError naming the rule.\n");
	expect_lacks(text, "s3cret");
	char *again = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	cr_expect_str_eq(again, text, "deterministic");
	free(again);
	free(text);
	snapcell_config_free(cfg);
	test_remove_tree(dir);
	free(dir);
}

Test(describe, json_format_gives_every_schema)
{
	struct snapcell_config *cfg = test_config_new();
	add_tool(cfg, "compute", "Adds two integers.", compute_schema, SNAPCELL_APPROVAL_NEVER);
	char *text = describe(cfg, SNAPCELL_DESCRIBE_JSON);
	expect_has(text, "- compute: Adds two integers.\n    parameters (JSON Schema): "
			 "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"");
	expect_lacks(text, "(integer, required)");
	free(text);
	char *out = NULL;
	cr_expect_eq(snapcell_config_describe(cfg, 7, &out, NULL), SNAPCELL_E_INVAL);
	cr_expect_null(out);
	snapcell_config_free(cfg);
}

Test(describe, tools_without_parameters_or_schema)
{
	struct snapcell_config *cfg = test_config_new();
	add_tool(cfg, "now", "", "{\"type\":\"object\",\"additionalProperties\":false}",
		 SNAPCELL_APPROVAL_NEVER);
	add_tool(cfg, "anything", "  Takes what it gets.  ", NULL, SNAPCELL_APPROVAL_NEVER);
	add_tool(cfg, "rows", "Rows.",
		 "{\"type\":\"object\",\"properties\":{\"rows\":{\"type\":\"array\",\"items\":"
		 "{\"type\":\"object\"}}}}",
		 SNAPCELL_APPROVAL_NEVER);
	char *text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "- now: (no description)\n    (no arguments)\n");
	expect_has(text, "- anything: Takes what it gets.\n    (any keyword arguments)\n");
	expect_has(text, "- rows: Rows.\n    parameters (JSON Schema): {\"type\":\"object\","
			 "\"properties\":{\"rows\":{\"type\":\"array\",\"items\":{\"type\":"
			 "\"object\"}}}}\n");
	free(text);
	snapcell_config_free(cfg);
}

/* Needs the schema branch (anyOf and $ref in tool schemas); skipped until it is merged. */
Test(describe, nullable_scalars_stay_compact_and_refs_fall_back)
{
	struct snapcell_config *cfg = test_config_new();
	int rc = snapcell_config_add_tool(
		cfg, "find", "Finds.",
		"{\"type\":\"object\",\"$defs\":{\"R\":{\"type\":\"string\"}},\"properties\":{"
		"\"limit\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}],\"default\":"
		"null},"
		"\"region\":{\"$ref\":\"#/$defs/R\"}}}",
		SNAPCELL_APPROVAL_NEVER, answer, NULL, NULL);
	if (rc == SNAPCELL_E_INVAL) {
		snapcell_config_free(cfg);
		cr_skip_test(
			"tool schemas with anyOf/$ref are refused until the schema work lands");
	}
	cr_assert_eq(rc, 0);
	char *text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "    parameters (JSON Schema): ");
	free(text);
	cr_assert_eq(snapcell_config_add_tool(
			     cfg, "find", "Finds.",
			     "{\"type\":\"object\",\"properties\":{\"limit\":{\"anyOf\":[{\"type\":"
			     "\"integer\"},{\"type\":\"null\"}],\"default\":null}}}",
			     SNAPCELL_APPROVAL_NEVER, answer, NULL, NULL),
		     0);
	text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "    limit (integer or null, optional, default null)\n");
	free(text);
	snapcell_config_free(cfg);
}

Test(describe, no_tools_no_files_no_network)
{
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 1500, NULL);
	char *text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "A run is stopped after 1.5 s.");
	expect_has(text, "\nHost tools: none in this sandbox.\n");
	expect_lacks(text, "call_tool");
	expect_has(text, "\nFiles: not enabled. No input files are provided.\n");
	expect_lacks(text, "/output");
	expect_has(text, "\nNetwork: no access. The code cannot open connections or resolve "
			 "host names.\n");
	free(text);
	snapcell_config_free(cfg);
}

Test(describe, workspace_and_mounts_are_listed_in_order)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_set_workspace(cfg, "/etc", NULL), 0);
	cr_assert_eq(snapcell_config_add_mount(cfg, "/etc/hostname", "zz.txt", NULL), 0);
	cr_assert_eq(snapcell_config_add_mount(cfg, "/etc", "/input/aa", NULL), 0);
	char *text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "Files: enabled.\n- Read inputs under /input (read-only). The "
			 "workspace's files are directly in /input.\n- Mounted paths:\n"
			 "  - /input/zz.txt\n  - /input/aa\n- Write files");
	free(text);
	cr_assert_eq(snapcell_config_remove_mount(cfg, "zz.txt", NULL), 0);
	cr_assert_eq(snapcell_config_remove_mount(cfg, "aa", NULL), 0);
	text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "directly in /input.\n- Write files");
	expect_lacks(text, "Mounted");
	free(text);
	snapcell_config_free(cfg);
}

Test(describe, size_is_capped)
{
	struct snapcell_config *cfg = test_config_new();
	char *big = malloc(300 << 10);
	memset(big, 'x', (300 << 10) - 1);
	big[(300 << 10) - 1] = 0;
	add_tool(cfg, "big", big, NULL, SNAPCELL_APPROVAL_NEVER);
	free(big);
	char *text = NULL;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_describe(cfg, SNAPCELL_DESCRIBE_COMPACT, &text, &err),
		     SNAPCELL_E_TOO_BIG);
	cr_expect_null(text);
	cr_expect(strstr(err.message, "256 KiB"), "%s", err.message);
	snapcell_config_free(cfg);
}

/* A long parameter description is cut at 600 bytes: at a character, so the text stays UTF-8
 * (a JSON encoder, or a provider, refuses half a character). */
Test(describe, a_cut_description_stays_utf8)
{
	struct snapcell_config *cfg = test_config_new();
	char schema[2048] = "{\"type\":\"object\",\"properties\":{\"p\":{\"type\":\"string\","
			    "\"description\":\"x";
	for (int i = 0; i < 400; i++)
		strcat(schema, "\xc3\xa9"); /* e-acute: the 600-byte cut falls inside one */
	strcat(schema, "\"}}}");
	add_tool(cfg, "t", "A tool.", schema, SNAPCELL_APPROVAL_NEVER);
	char *text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "\xc3\xa9...");
	expect_lacks(text, "\xc3...");
	json_t *s = json_string(text);
	cr_expect_not_null(s, "the description is valid UTF-8");
	json_decref(s);
	free(text);
	snapcell_config_free(cfg);
}

static char *instructions(const struct snapcell_config *cfg)
{
	char *text = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_instructions(cfg, &text, &err), 0, "%s", err.message);
	return text;
}

Test(describe, instructions_name_no_tool_and_skip_the_description)
{
	struct snapcell_config *cfg = test_config_new();
	add_tool(cfg, "compute", "Adds two integers.", compute_schema, SNAPCELL_APPROVAL_NEVER);
	add_tool(cfg, "lookup", "Finds a customer.", lookup_schema, SNAPCELL_APPROVAL_NEVER);
	char *text = instructions(cfg);
	expect_has(text, "execute_code as your primary tool");
	expect_has(text, "print(...)");
	expect_has(text, "the value of its last line when that is an expression");
	const char *absent[] = {"compute", "lookup",  "call_tool", "tools.",
				"/input",  "/output", "Network",   "Mounted"};
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		expect_lacks(text, absent[i]);
	free(text);
	cr_assert_eq(snapcell_config_add_mount(cfg, "/etc/hostname", "h", NULL), 0);
	text = instructions(cfg);
	expect_has(text, "/output/<file>");
	expect_lacks(text, "/input");
	expect_lacks(text, "compute");
	free(text);
	snapcell_config_free(cfg);
}

Test(describe, approval_is_always_when_the_base_or_any_tool_needs_it)
{
	struct snapcell_config *cfg = test_config_new();
	cr_expect_eq(snapcell_config_approval(cfg, SNAPCELL_APPROVAL_NEVER),
		     SNAPCELL_APPROVAL_NEVER);
	cr_expect_eq(snapcell_config_approval(cfg, SNAPCELL_APPROVAL_ALWAYS),
		     SNAPCELL_APPROVAL_ALWAYS);
	add_tool(cfg, "safe", "", NULL, SNAPCELL_APPROVAL_NEVER);
	cr_expect_eq(snapcell_config_approval(cfg, SNAPCELL_APPROVAL_NEVER),
		     SNAPCELL_APPROVAL_NEVER);
	add_tool(cfg, "pay", "", NULL, SNAPCELL_APPROVAL_ALWAYS);
	cr_expect_eq(snapcell_config_approval(cfg, SNAPCELL_APPROVAL_NEVER),
		     SNAPCELL_APPROVAL_ALWAYS);
	/* replacing the tool recomputes it */
	add_tool(cfg, "pay", "", NULL, SNAPCELL_APPROVAL_NEVER);
	cr_expect_eq(snapcell_config_approval(cfg, SNAPCELL_APPROVAL_NEVER),
		     SNAPCELL_APPROVAL_NEVER);
	add_tool(cfg, "pay", "", NULL, SNAPCELL_APPROVAL_ALWAYS);
	cr_assert_eq(snapcell_config_remove_tool(cfg, "pay", NULL), 0);
	cr_expect_eq(snapcell_config_approval(cfg, SNAPCELL_APPROVAL_NEVER),
		     SNAPCELL_APPROVAL_NEVER);
	cr_expect_eq(snapcell_config_approval(cfg, (enum snapcell_approval)9),
		     SNAPCELL_APPROVAL_ALWAYS, "an unknown base fails closed");
	snapcell_config_free(cfg);
	cr_expect_eq(snapcell_config_approval(NULL, SNAPCELL_APPROVAL_NEVER),
		     SNAPCELL_APPROVAL_NEVER);
}

/* The example call: the first tool whose required arguments have obvious values, both ways. */
Test(describe, example_call_and_stateful_and_packages)
{
	struct snapcell_config *cfg = test_config_new();
	add_tool(cfg, "lookup", "Finds a customer.", lookup_schema, SNAPCELL_APPROVAL_NEVER);
	add_tool(cfg, "kw", "",
		 "{\"type\":\"object\",\"properties\":{\"from\":{\"type\":\"string\"}},"
		 "\"required\":[\"from\"]}",
		 SNAPCELL_APPROVAL_NEVER);
	char *text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "For example: `call_tool(\"lookup\", id=1)` and `tools.lookup(id=1)`.\n");
	expect_lacks(text, "State persists");
	expect_has(text, "The standard library is available;");
	free(text);
	snapcell_config_remove_tool(cfg, "lookup", NULL);
	add_tool(cfg, "docs.pick", "",
		 "{\"type\":\"object\",\"properties\":{\"mode\":{\"enum\":["
		 "\"fast\",\"slow\"]},\"n\":{\"type\":\"number\"},"
		 "\"on\":{\"type\":\"boolean\"}},\"required\":[\"mode\",\"n\",\"on\"]}",
		 SNAPCELL_APPROVAL_NEVER);
	cr_assert_eq(snapcell_config_add_python_path(cfg, "/usr/lib/python3/dist-packages", NULL),
		     0);
	text = describe(cfg, SNAPCELL_DESCRIBE_JSON | SNAPCELL_DESCRIBE_STATEFUL);
	expect_has(text, "`call_tool(\"docs.pick\", mode=\"fast\", n=1, on=True)` and "
			 "`tools.docs.pick(mode=\"fast\", n=1, on=True)`");
	expect_has(text, "State persists between calls");
	expect_has(text, "the host's Python packages are available;");
	free(text);
	struct snapcell_config *bare = test_config_new();
	add_tool(bare, "ping", "", "{\"type\":\"object\",\"properties\":{}}",
		 SNAPCELL_APPROVAL_NEVER);
	text = describe(bare, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "For example: `call_tool(\"ping\")` and `tools.ping()`.\n");
	free(text);
	snapcell_config_free(bare);
	snapcell_config_free(cfg);
}

/* Whether the model also sees the tools directly changes one sentence; an unknown flag fails. */
Test(describe, instructions_say_whether_tools_are_offered_directly)
{
	struct snapcell_config *cfg = test_config_new();
	char *text = NULL;
	cr_assert_eq(snapcell_config_instructions_with(cfg, SNAPCELL_INSTRUCTIONS_TOOLS_VISIBLE,
						       &text, NULL),
		     0);
	expect_lacks(text, "offered");
	free(text);
	add_tool(cfg, "compute", "Adds two integers.", compute_schema, SNAPCELL_APPROVAL_NEVER);
	cr_assert_eq(snapcell_config_instructions_with(cfg, SNAPCELL_INSTRUCTIONS_TOOLS_VISIBLE,
						       &text, NULL),
		     0);
	expect_has(text, "may also be offered to you directly, but prefer execute_code");
	free(text);
	cr_assert_eq(snapcell_config_instructions_with(cfg, 0, &text, NULL), 0);
	expect_has(text, "not offered to you separately");
	char *plain = instructions(cfg);
	cr_expect_str_eq(plain, text);
	free(plain);
	free(text);
	cr_expect_eq(snapcell_config_instructions_with(cfg, 1u << 5, &text, NULL),
		     SNAPCELL_E_INVAL);
	snapcell_config_free(cfg);
}

/* A tool's own format wins over the one describe is given. */
Test(describe, per_tool_format)
{
	struct snapcell_config *cfg = test_config_new();
	add_tool(cfg, "compute", "Adds two integers.", compute_schema, SNAPCELL_APPROVAL_NEVER);
	add_tool(cfg, "other", "", compute_schema, SNAPCELL_APPROVAL_NEVER);
	cr_assert_eq(snapcell_config_set_tool_describe_format(cfg, "compute",
							      SNAPCELL_DESCRIBE_JSON, NULL),
		     0);
	char *text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "- compute: Adds two integers.\n    parameters (JSON Schema): ");
	expect_has(text, "- other: (no description)\n    a (integer, required)");
	free(text);
	cr_expect_eq(snapcell_config_set_tool_describe_format(cfg, "missing",
							      SNAPCELL_DESCRIBE_JSON, NULL),
		     -ENOENT);
	cr_expect_eq(snapcell_config_set_tool_describe_format(cfg, "compute", 7, NULL),
		     SNAPCELL_E_INVAL);
	snapcell_config_free(cfg);
}

Test(describe, the_model_is_told_the_interpreters_version)
{
	struct snapcell_config *cfg = test_config_new();
	char *dir = test_make_tree(),
	     *json = test_python_answer("cpython", 3, 13, 0, false, "/bin/sh");
	char *python = test_fake_python(dir, "python3.13", json);
	cr_assert_eq(snapcell_config_set_python(cfg, python, NULL), 0);
	char *text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "Runs Python 3.13 code");
	free(text);
	text = instructions(cfg);
	expect_has(text, "write one Python 3.13 program");
	free(text);
	/* The default interpreter's, whatever this machine has. */
	struct snapcell_python_info info;
	char want[64];
	cr_assert_eq(snapcell_config_set_python(cfg, NULL, NULL), 0);
	if (snapcell_config_python_info(cfg, &info, NULL) == 0) {
		snprintf(want, sizeof(want), "Runs Python 3.%u code", info.minor);
		text = describe(cfg, SNAPCELL_DESCRIBE_JSON);
		expect_has(text, want);
		free(text);
	}
	/* None resolvable now (a venv whose interpreter went away): just "Python 3". */
	char cfg_text[1200], rel[64];
	snprintf(cfg_text, sizeof(cfg_text), "home = /nowhere\nversion = 3.13.0\nexecutable = %s\n",
		 python);
	test_write_file(dir, "venv/pyvenv.cfg", cfg_text);
	snprintf(rel, sizeof(rel), "venv/lib/python3.13/site-packages/.keep");
	test_write_file(dir, rel, "");
	char venv[600];
	snprintf(venv, sizeof(venv), "%s/venv", dir);
	cr_assert_eq(snapcell_config_set_venv(cfg, venv, NULL), 0);
	cr_assert_eq(unlink(python), 0);
	text = describe(cfg, SNAPCELL_DESCRIBE_COMPACT);
	expect_has(text, "Runs Python 3 code");
	free(text);
	snapcell_config_free(cfg);
	free(python), free(json);
	test_remove_tree(dir);
	free(dir);
}
