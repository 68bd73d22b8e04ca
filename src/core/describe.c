/* What the model is told, built once from a config for every front end: the execute_code tool
 * description, the provider instructions, and the notice code gets when it tries the network.
 * Deterministic (registration order for tools and mounts, sorted targets) and capped. It
 * describes; it does not validate schemas (schema.c) or enforce anything. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "schema.h"
#include "util/buf.h"
#include "util/util.h"

#define DESCRIBE_MAX   (256u << 10)
#define ENUM_SHOWN_MAX 32 /* a longer enum is shown as JSON Schema */
#define TYPE_DEPTH_MAX 3  /* "array of array of integer" and no deeper */
#define PARAM_DESC_MAX 600

/* A text being written: the first failure sticks, and the puts after it do nothing. */
struct text {
	struct sc_buf b;
	int rc;
};

/* The text and its NUL within DESCRIBE_MAX. */
#define TEXT_INIT                                                                                  \
	{                                                                                          \
		.b = SC_BUF_INIT(DESCRIBE_MAX - 1)                                                 \
	}

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
	if (t->rc)
		return;
	va_list ap;
	va_start(ap, fmt);
	t->rc = sc__buf_vprintf(&t->b, fmt, ap);
	va_end(ap);
}

static void put_char(struct text *t, char c)
{
	if (!t->rc)
		t->rc = sc__buf_add(&t->b, &c, 1);
}

/* Text from a tool or schema, trimmed; with indent, continuation lines are indented under the
 * first, else all whitespace runs become one space (a parameter stays on its line). */
static void put_prose(struct text *t, const char *s, size_t max, const char *indent)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	size_t n = strlen(s);
	while (n > 0 && strchr(" \t\n\r", s[n - 1]))
		n--;
	bool cut = n > max;
	n = cut ? max : n;
	while (cut && n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
		n--; /* never half a UTF-8 character before the "..." */
	for (size_t i = 0; i < n && !t->rc; i++) {
		bool space = s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r';
		if (!indent && space) {
			while (i + 1 < n && strchr(" \t\n\r", s[i + 1]))
				i++;
			put_char(t, ' ');
		} else if (indent && s[i] == '\n') {
			put(t, "\n%s", indent);
		} else if (s[i] != '\r') {
			put_char(t, s[i]);
		}
	}
	if (cut)
		put(t, "...");
}

static void put_json(struct text *t, const json_t *v)
{
	char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!s) {
		t->rc = t->rc ? t->rc : -ENOMEM;
		return;
	}
	put(t, "%s", s);
	free(s);
}

static bool is_scalar_type(const char *s)
{
	return s && (!strcmp(s, "string") || !strcmp(s, "integer") || !strcmp(s, "number") ||
		     !strcmp(s, "boolean") || !strcmp(s, "null"));
}

/* The null branch of `X | null` as pydantic and MCP servers write it. */
static bool is_null_schema(const json_t *s)
{
	const char *type = json_string_value(json_object_get(s, "type"));
	return json_is_object(s) && type && !strcmp(type, "null") && json_object_size(s) <= 3;
}

static bool compact_type(struct text *t, const json_t *s, unsigned depth);

/* anyOf/oneOf of exactly X and null: "X or null". */
static bool compact_union(struct text *t, const json_t *u, unsigned depth)
{
	if (!json_is_array(u) || json_array_size(u) != 2)
		return false;
	const json_t *a = json_array_get(u, 0), *b = json_array_get(u, 1);
	const json_t *x = is_null_schema(b) ? a : is_null_schema(a) ? b : NULL;
	if (!x || !compact_type(t, x, depth + 1))
		return false;
	put(t, " or null");
	return true;
}

static bool scalar_list(const json_t *values)
{
	size_t i;
	json_t *v;
	if (!json_is_array(values) || json_array_size(values) > ENUM_SHOWN_MAX)
		return false;
	json_array_foreach(values, i, v)
	{
		if (json_is_object(v) || json_is_array(v))
			return false;
	}
	return true;
}

/* Writes the type of a scalar (or array of scalars) schema; false when the schema needs its
 * JSON Schema to be understood. Keywords it does not show are constraints that a refused
 * call explains (minimum, pattern, ...). */
static bool compact_type(struct text *t, const json_t *s, unsigned depth)
{
	static const char *const structural[] = {
		"properties", "additionalProperties", "allOf", "$ref",
		"not",	      "patternProperties",    "if"};
	if (!json_is_object(s) || depth > TYPE_DEPTH_MAX)
		return false;
	for (size_t i = 0; i < SC_ARRAY_LEN(structural); i++)
		if (json_object_get(s, structural[i]))
			return false;
	const json_t *type = json_object_get(s, "type"), *u = json_object_get(s, "anyOf");
	u = u ? u : json_object_get(s, "oneOf");
	if (u)
		return !type && compact_union(t, u, depth);
	const json_t *en = json_object_get(s, "enum"), *con = json_object_get(s, "const");
	if ((en && !scalar_list(en)) || (con && (json_is_object(con) || json_is_array(con))))
		return false;
	const char *name = json_string_value(type);
	bool nullable = false, first = true;
	if (json_is_array(type)) {
		size_t i;
		json_t *v;
		json_array_foreach(type, i, v)
		{
			const char *one = json_string_value(v);
			if (!is_scalar_type(one))
				return false;
			nullable = nullable || !strcmp(one, "null");
			if (strcmp(one, "null"))
				put(t, "%s%s", first ? "" : " or ", one);
			first = first && !strcmp(one, "null");
		}
		if (first)
			put(t, "null");
		nullable = nullable && !first;
	} else if (name && !strcmp(name, "array")) {
		const json_t *items = json_object_get(s, "items");
		put(t, "array");
		if (items) {
			put(t, " of ");
			return compact_type(t, items, depth + 1);
		}
	} else if (is_scalar_type(name)) {
		put(t, "%s", name);
	} else if (!type) {
		put(t, "%s", en || con ? "value" : "any JSON value");
	} else {
		return false;
	}
	const char *format = json_string_value(json_object_get(s, "format"));
	if (format)
		put(t, " (%s)", format);
	if (nullable)
		put(t, " or null");
	return true;
}

/* "    name (integer, optional, default 2, one of 1, 2): what it is" */
static bool compact_param(struct text *t, const char *name, const json_t *s, bool required)
{
	put(t, "    %s (", name);
	if (!compact_type(t, s, 0))
		return false;
	put(t, ", %s", required ? "required" : "optional");
	const json_t *def = json_object_get(s, "default"), *en = json_object_get(s, "enum");
	const json_t *con = json_object_get(s, "const");
	if (def) {
		put(t, ", default ");
		put_json(t, def);
	}
	if (con) {
		put(t, ", always ");
		put_json(t, con);
	}
	size_t i;
	json_t *v;
	json_array_foreach(en, i, v)
	{
		put(t, i ? ", " : ", one of ");
		put_json(t, v);
	}
	put(t, ")");
	const char *desc = json_string_value(json_object_get(s, "description"));
	if (desc && *desc) {
		put(t, ": ");
		put_prose(t, desc, PARAM_DESC_MAX, NULL);
	}
	put(t, "\n");
	return true;
}

static bool is_required(const json_t *schema, const char *name)
{
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(schema, "required"), i, r)
	{
		const char *s = json_string_value(r);
		if (s && !strcmp(s, name))
			return true;
	}
	return false;
}

/* One line per parameter, or false (t rolled back by the caller) when one is not compact. */
static bool compact_params(struct text *t, const json_t *schema)
{
	static const char *const top_ok[] = {
		"type",	       "properties", "required", "additionalProperties", "title",
		"description", "$schema",    "$defs",	 "definitions"};
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)schema, key, v)
	{
		bool ok = false;
		for (size_t i = 0; i < SC_ARRAY_LEN(top_ok); i++)
			ok = ok || !strcmp(key, top_ok[i]);
		if (!ok)
			return false;
	}
	const char *type = json_string_value(json_object_get(schema, "type"));
	if (json_object_get(schema, "type") && (!type || strcmp(type, "object")))
		return false;
	const json_t *props = json_object_get(schema, "properties");
	if (json_object_size(props) == 0) {
		put(t, "    %s\n",
		    json_is_false(json_object_get(schema, "additionalProperties"))
			    ? "(no arguments)"
			    : "(any keyword arguments)");
		return true;
	}
	json_object_foreach((json_t *)props, key, v)
	{
		if (!compact_param(t, key, v, is_required(schema, key)))
			return false;
	}
	return true;
}

static void describe_tool(struct text *t, const struct sc_tool *tool,
			  enum snapcell_describe_format format)
{
	put(t, "- %s: ", tool->name);
	if (strcmp(tool->attr, tool->name))
		put(t, "(tools.%s) ", tool->attr);
	if (*tool->description)
		put_prose(t, tool->description, DESCRIBE_MAX, "  ");
	else
		put(t, "(no description)");
	put(t, "\n");
	if (tool->describe_format >= 0)
		format = (enum snapcell_describe_format)tool->describe_format;
	if (tool->needs_decision)
		put(t, "    Each call waits for a person's approval (minutes, possibly); a refusal "
		       "raises ToolError with their reason.\n");
	size_t mark = t->b.len;
	if (format == SNAPCELL_DESCRIBE_COMPACT && compact_params(t, tool->schema->root))
		return;
	if (!t->rc)
		sc__buf_truncate(&t->b, mark);
	put(t, "    parameters (JSON Schema): ");
	put_json(t, tool->schema->root);
	put(t, "\n");
}

/* Example arguments for a required parameter: a value of its type, or false when it has none
 * that is obvious (an object, an array, a union). */
static bool example_value(struct text *t, const json_t *s)
{
	const json_t *en = json_object_get(s, "enum");
	const char *type = json_string_value(json_object_get(s, "type"));
	if (json_array_size(en) > 0 && !json_is_object(json_array_get(en, 0)) &&
	    !json_is_array(json_array_get(en, 0))) {
		const json_t *v = json_array_get(en, 0);
		if (json_is_string(v))
			put(t, "\"%s\"",
			    json_string_value(v)); /* JSON's quoting is Python's here */
		else if (json_is_boolean(v))
			put(t, "%s", json_is_true(v) ? "True" : "False");
		else if (json_is_null(v))
			put(t, "None");
		else
			put_json(t, v);
		return !json_is_string(v) || !strpbrk(json_string_value(v), "\"\\`\n");
	}
	if (!type)
		return false;
	if (!strcmp(type, "integer") || !strcmp(type, "number"))
		put(t, "1");
	else if (!strcmp(type, "string"))
		put(t, "\"text\"");
	else if (!strcmp(type, "boolean"))
		put(t, "True");
	else
		return false;
	return true;
}

/* A name that can be a keyword argument: an identifier that is no Python keyword. */
static bool is_python_name(const char *s)
{
	static const char *const keywords[] = {
		"False",  "None",   "True",    "and",	   "as",       "assert", "async",
		"await",  "break",  "class",   "continue", "def",      "del",	 "elif",
		"else",	  "except", "finally", "for",	   "from",     "global", "if",
		"import", "in",	    "is",      "lambda",   "nonlocal", "not",	 "or",
		"pass",	  "raise",  "return",  "try",	   "while",    "with",	 "yield"};
	for (const char *c = s; *c; c++)
		if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (c > s && *c >= '0' && *c <= '9')))
			return false;
	for (size_t i = 0; i < SC_ARRAY_LEN(keywords); i++)
		if (!strcmp(s, keywords[i]))
			return false;
	return *s != 0;
}

/* "a=1, b=1": the required parameters with example values; false when one has none. */
static bool example_args(struct text *t, const json_t *schema)
{
	const char *key;
	json_t *v;
	bool first = true;
	json_object_foreach((json_t *)json_object_get(schema, "properties"), key, v)
	{
		if (!is_required(schema, key))
			continue;
		if (!is_python_name(key))
			return false;
		put(t, "%s%s=", first ? "" : ", ", key);
		first = false;
		if (!example_value(t, v))
			return false;
	}
	return true;
}

/* One concrete call of the first tool whose required arguments have obvious example values,
 * both ways: the model sees the form the text describes, and tests run it. */
static void describe_example(struct text *t, const struct snapcell_config *cfg)
{
	for (size_t i = 0; i < cfg->n_tools && !t->rc; i++) {
		const struct sc_tool *tool = &cfg->tools[i];
		if (strpbrk(tool->name, "\"\\`"))
			continue;
		size_t mark = t->b.len;
		put(t, "For example: `call_tool(\"%s\"", tool->name);
		size_t args = t->b.len;
		put(t, ", ");
		size_t inner = t->b.len;
		if (!example_args(t, tool->schema->root)) {
			if (!t->rc)
				sc__buf_truncate(&t->b, mark);
			continue;
		}
		if (t->b.len == inner)
			sc__buf_truncate(&t->b,
					 args); /* no required arguments: call_tool("name") */
		char *shown = strndup(t->b.data + inner, t->b.len - inner);
		if (!shown) {
			t->rc = -ENOMEM;
			return;
		}
		put(t, ")` and `tools.%s(%s)`.\n", tool->attr, shown);
		free(shown);
		return;
	}
}

static void describe_tools(struct text *t, const struct snapcell_config *cfg,
			   enum snapcell_describe_format format)
{
	if (cfg->n_tools == 0) {
		put(t, "Host tools: none in this sandbox.\n");
		return;
	}
	put(t, "Host tools: inside the code, `call_tool(name, **kwargs)` is available as a "
	       "built-in: it calls the registered host tool `name` with keyword arguments only (a "
	       "dict or any other positional argument after the name is a TypeError) and returns "
	       "its result as Python values (dicts, lists, numbers, strings). `tools` is a "
	       "built-in too (no import needed): `tools.<name>(**kwargs)` is the same call. A "
	       "tool that fails or refuses its arguments raises ToolError with its message; catch "
	       "it to recover.\n");
	describe_example(t, cfg);
	put(t, "Inside a running event loop (code that uses `await` at the top level, or runs "
	       "under `asyncio.run(...)`) the same calls return awaitables instead: write `await "
	       "tools.<name>(...)`; calls awaited together with `asyncio.gather(...)` run at the "
	       "same time.\n");
	put(t, "Prefer `execute_code` when you need to combine one or more `call_tool(...)` calls "
	       "with Python control flow, loops, or post-processing.\n");
	bool dotted = false;
	for (size_t i = 0; i < cfg->n_tools; i++)
		dotted |= strchr(cfg->tools[i].name, '.') != NULL;
	if (dotted)
		put(t, "A dotted name is a path in tools: call_tool(\"server.tool\", ...) is "
		       "tools.server.tool(...); where the path differs from the name (characters "
		       "other than letters, digits and _ become _), it is given in parentheses.\n");
	put(t, "\nTools:\n");
	for (size_t i = 0; i < cfg->n_tools && !t->rc; i++)
		describe_tool(t, &cfg->tools[i], format);
}

static void describe_files(struct text *t, const struct snapcell_config *cfg)
{
	if (!cfg->workspace && cfg->n_mounts == 0) {
		put(t, "Files: not enabled. No input files are provided.\n");
		return;
	}
	put(t, "Files: enabled.\n- Read inputs under /input (read-only).");
	if (cfg->workspace)
		put(t, " The workspace's files are directly in /input.");
	put(t, "\n");
	if (cfg->n_mounts)
		put(t, "- Mounted paths:\n");
	for (size_t i = 0; i < cfg->n_mounts; i++)
		put(t, "  - %s\n", cfg->mounts[i].mount_path);
	put(t, "- Write files meant for the user (reports, tables, images) under /output, e.g. "
	       "/output/result.csv; they are returned with the result.\n");
	/* The rlimits level has no root of its own to show them at those paths; the text stays
	 * a function of the config, so it says this whatever the host. */
	put(t, "- Where the host cannot show these at /input and /output, they are the "
	       "directories os.environ['SNAPCELL_INPUT'] and os.environ['SNAPCELL_OUTPUT'] name "
	       "(scratch files: tempfile's directory): build paths from those variables.\n");
}

static void put_methods(struct text *t, const struct sc_net_entry *e)
{
	if (!e->methods)
		put(t, "all methods");
	for (size_t i = 0; i < e->n_methods; i++)
		put(t, "%s%s", i ? ", " : "", e->methods[i]);
}

/* Names only: a header's value (a credential, typically) never reaches the model. */
static void put_headers(struct text *t, const struct sc_net_entry *e)
{
	for (size_t i = 0; i < e->n_headers; i++)
		put(t, "%s%s",
		    i == 0		   ? " (the host adds the "
		    : i + 1 < e->n_headers ? ", "
					   : " and ",
		    e->headers[i].name);
	if (e->n_headers)
		put(t, " header%s)", e->n_headers > 1 ? "s" : "");
}

static void describe_network(struct text *t, const struct snapcell_config *cfg)
{
	if (cfg->allowed.n == 0) {
		put(t, "Network: no access. The code cannot open connections or resolve host "
		       "names.\n");
		return;
	}
	put(t, "Network: targets allowed by this configuration (HTTP methods):\n");
	for (size_t i = 0; i < cfg->allowed.n; i++) {
		put(t, "- %s: ", cfg->allowed.entries[i].target);
		put_methods(t, &cfg->allowed.entries[i]);
		put_headers(t, &cfg->allowed.entries[i]);
		put(t, "\n");
	}
	put(t, "Ordinary Python networking (urllib, http.client, socket, ssl, requests, httpx) "
	       "reaches these targets and nothing else: other names do not resolve and other "
	       "connections fail with a PermissionError naming the rule.\n");
}

static int finish(struct text *t, char **out, struct snapcell_error *err, const char *what)
{
	if (!t->rc && !(*out = sc__buf_take(&t->b, NULL)))
		t->rc = -ENOMEM;
	if (t->rc) {
		sc__buf_free(&t->b);
		return t->rc == SNAPCELL_E_TOO_BIG ? sc__err(err, t->rc,
							     "%s: longer than %u KiB; shorten tool "
							     "descriptions or schemas",
							     what, DESCRIBE_MAX >> 10)
						   : sc__err(err, t->rc, "%s", what);
	}
	return 0;
}

/* "Python 3.12": the X.Y of the interpreter cells run, so the model writes code for it; just
 * "Python 3" when it cannot be resolved now (creating a sandbox says why). */
static void python_name(const struct snapcell_config *cfg, char *out, size_t len)
{
	struct sc_python py;
	if (sc__python_resolve(cfg, &py, NULL) < 0) {
		snprintf(out, len, "Python 3");
		return;
	}
	snprintf(out, len, "Python %u.%u", py.major, py.minor);
	sc__python_clear(&py);
}

int snapcell_config_describe(const struct snapcell_config *cfg,
			     enum snapcell_describe_format format, char **out,
			     struct snapcell_error *err)
{
	if (!cfg || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "describe: NULL argument");
	bool stateful = (unsigned)format & SNAPCELL_DESCRIBE_STATEFUL;
	format = (enum snapcell_describe_format)((unsigned)format & ~SNAPCELL_DESCRIBE_STATEFUL);
	if (format != SNAPCELL_DESCRIBE_COMPACT && format != SNAPCELL_DESCRIBE_JSON)
		return sc__err(err, SNAPCELL_E_INVAL, "describe: unknown format %d", (int)format);
	struct text t = TEXT_INIT;
	uint64_t wall_ms = cfg->limits[SNAPCELL_LIMIT_WALL_MS];
	bool packages = cfg->n_python_paths || cfg->venv;
	char python[32];
	python_name(cfg, python, sizeof(python));
	put(&t,
	    "Runs %s code in an isolated sandbox and returns what it printed (stdout, "
	    "then stderr) and the value of its last line when that is an expression. The "
	    "standard library%s %s available; packages cannot be installed. "
	    "A run is stopped after %g s.\n",
	    python, packages ? " and the host's Python packages" : "", packages ? "are" : "is",
	    (double)wall_ms / 1000.0);
	if (stateful)
		put(&t, "State persists between calls: each call runs in the same interpreter as "
			"the calls before it, so variables, functions, imports and files in /tmp "
			"from earlier calls are still there.\n");
	put(&t, "\n");
	describe_tools(&t, cfg, format);
	put(&t, "\n");
	describe_files(&t, cfg);
	put(&t, "\n");
	describe_network(&t, cfg);
	return finish(&t, out, err, "describe");
}

int snapcell_config_instructions(const struct snapcell_config *cfg, char **out,
				 struct snapcell_error *err)
{
	return snapcell_config_instructions_with(cfg, 0, out, err);
}

int snapcell_config_instructions_with(const struct snapcell_config *cfg, unsigned flags, char **out,
				      struct snapcell_error *err)
{
	if (!cfg || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "instructions: NULL argument");
	if (flags & ~(unsigned)SNAPCELL_INSTRUCTIONS_TOOLS_VISIBLE)
		return sc__err(err, SNAPCELL_E_INVAL, "instructions: unknown flags %#x", flags);
	struct text t = TEXT_INIT;
	char python[32];
	python_name(cfg, python, sizeof(python));
	put(&t,
	    "Use execute_code as your primary tool for multi-step work: write one %s "
	    "program that does the whole job (the calls, loops and arithmetic) instead of "
	    "many small steps, and rely on its description for what the sandbox offers.\n",
	    python);
	put(&t, "What the code prints comes back, and so does the value of its last line when that "
		"is an expression (as JSON, like a notebook cell's): end the code with the answer "
		"or with print(...) of it.\n");
	if (cfg->workspace || cfg->n_mounts)
		put(&t,
		    "Write large results (tables, reports, data) to a file, /output/<file>, and "
		    "print a short summary instead of the whole content.\n");
	if (cfg->n_tools && (flags & SNAPCELL_INSTRUCTIONS_TOOLS_VISIBLE))
		put(&t,
		    "Some of the sandbox's tools may also be offered to you directly, but prefer "
		    "execute_code whenever you need to combine their calls with Python control "
		    "flow.\n");
	else if (cfg->n_tools)
		put(&t, "The sandbox's tools are not offered to you separately: call them from the "
			"code you give execute_code.\n");
	return finish(&t, out, err, "instructions");
}

char *sc__network_notice(const struct snapcell_config *cfg)
{
	struct text t = TEXT_INIT;
	put(&t, "network access is not available in this sandbox: its configuration allows no "
		"network target");
	if (t.rc) {
		sc__buf_free(&t.b);
		return NULL;
	}
	return sc__buf_take(&t.b, NULL);
}
