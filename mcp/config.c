/* `snapcell mcp --config FILE`: a JSON file declaring what every run gets (limits, files,
 * Python paths, network entries, environment, command tools) and how the server behaves.
 * `snapcell run --config FILE` reads the same file, refusing the server's own keys.
 * Every key is checked; an unknown one is refused with its path, so a typo never silently
 * means a default. It does not watch the file: changes need a restart. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/frontend.h"
#include "downstream.h"
#include "mcp.h"

#include "config.h"

int mcp_config_fail(const struct ctx *c, const char *path, const char *why)
{
	fprintf(stderr, "snapcell %s: --config %s: %s: %s\n", c->command, c->file, path, why);
	return -1;
}

int mcp_config_lib_fail(const struct ctx *c, const char *path, const struct snapcell_error *err)
{
	return mcp_config_fail(c, path, err->message);
}

/* Applies one to each member of the object v (path.key in messages); shape says what the
 * object must hold when v is not one. */
int mcp_config_each_member(const struct ctx *c, const char *path, json_t *v, const char *shape,
			   int (*one)(const struct ctx *, const char *, const char *, json_t *))
{
	const char *key;
	json_t *val;
	char at[256];
	if (!json_is_object(v))
		return mcp_config_fail(c, path, shape);
	json_object_foreach(v, key, val)
	{
		snprintf(at, sizeof(at), "%s.%s", path, key);
		if (one(c, at, key, val) < 0)
			return -1;
	}
	return 0;
}

static int one_limit(const struct ctx *c, const char *at, const char *key, json_t *val)
{
	enum snapcell_limit limit;
	if (snapcell_limit_from_name(key, &limit, NULL) < 0)
		return mcp_config_fail(c, at, "unknown key");
	if (!json_is_integer(val) || json_integer_value(val) <= 0)
		return mcp_config_fail(c, at, "must be a positive integer");
	struct snapcell_error err = {0};
	if (snapcell_config_set_limit(c->cfg, limit, (uint64_t)json_integer_value(val), &err) < 0)
		return mcp_config_lib_fail(c, at, &err);
	return 0;
}

static int limits(const struct ctx *c, const char *path, json_t *v)
{
	return mcp_config_each_member(c, path, v, "must be an object", one_limit);
}

static int workspace(const struct ctx *c, const char *path, json_t *v)
{
	struct snapcell_error err = {0};
	if (!json_is_string(v))
		return mcp_config_fail(c, path, "must be a string (a directory)");
	return snapcell_config_set_workspace(c->cfg, json_string_value(v), &err) < 0
		       ? mcp_config_lib_fail(c, path, &err)
		       : 0;
}

/* Checks that object v has only the keys in allowed (NULL-terminated). */
int mcp_config_only_keys(const struct ctx *c, const char *path, json_t *v,
			 const char *const *allowed)
{
	const char *key;
	json_t *val;
	char at[256];
	if (!json_is_object(v))
		return mcp_config_fail(c, path, "must be an object");
	json_object_foreach(v, key, val)
	{
		const char *const *a = allowed;
		while (*a && strcmp(*a, key))
			a++;
		snprintf(at, sizeof(at), "%s.%s", path, key);
		if (!*a)
			return mcp_config_fail(c, at, "unknown key");
	}
	return 0;
}

/* Applies one to each element of the array v (path[i] in messages); shape says what the
 * array must hold when v is not one. */
int mcp_config_each(const struct ctx *c, const char *path, json_t *v, const char *shape,
		    int (*one)(const struct ctx *, const char *, json_t *))
{
	size_t i;
	json_t *e;
	char at[256];
	if (!json_is_array(v))
		return mcp_config_fail(c, path, shape);
	json_array_foreach(v, i, e)
	{
		snprintf(at, sizeof(at), "%s[%zu]", path, i);
		if (one(c, at, e) < 0)
			return -1;
	}
	return 0;
}

static int one_mount(const struct ctx *c, const char *at, json_t *m)
{
	static const char *const keys[] = {"host", "path", NULL};
	if (mcp_config_only_keys(c, at, m, keys) < 0)
		return -1;
	const char *host = json_string_value(json_object_get(m, "host"));
	const char *mount = json_string_value(json_object_get(m, "path"));
	if (!host)
		return mcp_config_fail(c, at, "needs \"host\" (a string)");
	struct snapcell_error err = {0};
	if (snapcell_config_add_mount(c->cfg, host, mount ? mount : host, &err) < 0)
		return mcp_config_lib_fail(c, at, &err);
	return 0;
}

static int mounts(const struct ctx *c, const char *path, json_t *v)
{
	return mcp_config_each(c, path, v, "must be an array of {\"host\", \"path\"}", one_mount);
}

static int one_python_path(const struct ctx *c, const char *at, json_t *p)
{
	struct snapcell_error err = {0};
	if (!json_is_string(p))
		return mcp_config_fail(c, at, "must be a string");
	if (snapcell_config_add_python_path(c->cfg, json_string_value(p), &err) < 0)
		return mcp_config_lib_fail(c, at, &err);
	return 0;
}

static int python_paths(const struct ctx *c, const char *path, json_t *v)
{
	return mcp_config_each(c, path, v, "must be an array of directories", one_python_path);
}

/* "headers": {"Name": "value"}: each added after the entry, the value expanded by the
 * library (${env:NAME}, ${file:PATH}, $$) and never repeated in a message. */
static int allow_headers(const struct ctx *c, const char *at, const char *target, json_t *headers)
{
	const char *name;
	json_t *value;
	if (!json_is_object(headers) || json_object_size(headers) > 16)
		return mcp_config_fail(
			c, at, "\"headers\" must be an object of at most 16 names to strings");
	json_object_foreach(headers, name, value)
	{
		struct snapcell_error err = {0};
		if (!json_is_string(value))
			return mcp_config_fail(c, at, "\"headers\" values must be strings");
		if (snapcell_config_allow_header(c->cfg, target, name, json_string_value(value),
						 &err) < 0)
			return mcp_config_lib_fail(c, at, &err);
	}
	return 0;
}

static int one_allow(const struct ctx *c, const char *at, json_t *e)
{
	static const char *const keys[] = {"target", "methods", "headers", NULL};
	if (mcp_config_only_keys(c, at, e, keys) < 0)
		return -1;
	const char *target = json_string_value(json_object_get(e, "target"));
	json_t *methods = json_object_get(e, "methods");
	json_t *headers = json_object_get(e, "headers");
	const char *list[32];
	size_t n = 0, i;
	json_t *m;
	if (!target)
		return mcp_config_fail(c, at, "needs \"target\" (a string)");
	if (methods && (!json_is_array(methods) || json_array_size(methods) > 32))
		return mcp_config_fail(c, at, "\"methods\" must be an array of at most 32 strings");
	json_array_foreach(methods, i, m)
	{
		if (!json_is_string(m))
			return mcp_config_fail(c, at, "\"methods\" must hold strings");
		list[n++] = json_string_value(m);
	}
	struct snapcell_error err = {0};
	if (snapcell_config_allow(c->cfg, target, methods ? list : NULL, n, &err) < 0)
		return mcp_config_lib_fail(c, at, &err);
	return headers ? allow_headers(c, at, target, headers) : 0;
}

static int allow(const struct ctx *c, const char *path, json_t *v)
{
	return mcp_config_each(c, path, v,
			       "must be an array of {\"target\", \"methods\", \"headers\"}",
			       one_allow);
}

static int one_map(const struct ctx *c, const char *at, const char *key, json_t *val)
{
	struct snapcell_error err = {0};
	if (!json_is_string(val))
		return mcp_config_fail(c, at, "must be a string (an IP address)");
	if (snapcell_config_map_host(c->cfg, key, json_string_value(val), &err) < 0)
		return mcp_config_lib_fail(c, at, &err);
	return 0;
}

/* "host_map": {"name": "address"}: lookups that skip DNS (tests, private names). */
static int host_map(const struct ctx *c, const char *path, json_t *v)
{
	return mcp_config_each_member(c, path, v, "must be an object of names to addresses",
				      one_map);
}

static int upstream_ca(const struct ctx *c, const char *path, json_t *v)
{
	struct snapcell_error err = {0};
	if (!json_is_string(v))
		return mcp_config_fail(c, path, "must be a string (a CA bundle file)");
	return snapcell_config_set_upstream_ca(c->cfg, json_string_value(v), &err) < 0
		       ? mcp_config_lib_fail(c, path, &err)
		       : 0;
}

static int venv(const struct ctx *c, const char *path, json_t *v)
{
	struct snapcell_error err = {0};
	if (!json_is_string(v))
		return mcp_config_fail(c, path, "must be a string (a virtual environment)");
	fe_python_venv(c->cfg);
	return snapcell_config_set_venv(c->cfg, json_string_value(v), &err) < 0
		       ? mcp_config_lib_fail(c, path, &err)
		       : 0;
}

/* "python": the interpreter that runs the cells (asked what it is now: a refusal stops the
 * server before it starts). */
static int python(const struct ctx *c, const char *path, json_t *v)
{
	struct snapcell_error err = {0};
	if (!json_is_string(v))
		return mcp_config_fail(
			c, path, "must be a string (an interpreter: a path or a name on PATH)");
	fe_python_chosen();
	return snapcell_config_set_python(c->cfg, json_string_value(v), &err) < 0
		       ? mcp_config_lib_fail(c, path, &err)
		       : 0;
}

static int one_preload(const struct ctx *c, const char *at, json_t *m)
{
	struct snapcell_error err = {0};
	if (!json_is_string(m))
		return mcp_config_fail(c, at, "must be a string (a module name)");
	if (snapcell_config_add_preload(c->cfg, json_string_value(m), &err) < 0)
		return mcp_config_lib_fail(c, at, &err);
	return 0;
}

static int preload(const struct ctx *c, const char *path, json_t *v)
{
	return mcp_config_each(c, path, v, "must be an array of module names", one_preload);
}

/* "warmup": Python code, as one string or an array of lines (JSON has no multi-line strings). */
static int warmup(const struct ctx *c, const char *path, json_t *v)
{
	struct snapcell_error err = {0};
	const char *why = "must be a string or an array of strings (lines of Python)";
	char *code = NULL;
	size_t len = 0, i;
	json_t *line;
	if (json_is_string(v) && strlen(json_string_value(v)) != json_string_length(v)) {
		return mcp_config_fail(c, path, "must not contain a NUL character");
	} else if (json_is_string(v)) {
		code = strdup(json_string_value(v));
	} else if (json_is_array(v)) {
		FILE *f = open_memstream(&code, &len);
		json_array_foreach(v, i, line)
		{
			if (!json_is_string(line) ||
			    strlen(json_string_value(line)) != json_string_length(line)) {
				why = "must be an array of strings (lines of Python, no NUL)";
				break;
			}
			if (f)
				fprintf(f, "%s\n", json_string_value(line));
		}
		if (f)
			fclose(f);
		if (i < json_array_size(v)) {
			free(code);
			return mcp_config_fail(c, path, why);
		}
	} else {
		return mcp_config_fail(c, path, why);
	}
	if (!code)
		return mcp_config_fail(c, path, "out of memory");
	int rc = snapcell_config_set_warmup(c->cfg, code, &err) < 0
			 ? mcp_config_lib_fail(c, path, &err)
			 : 0;
	free(code);
	return rc;
}

static int one_env(const struct ctx *c, const char *at, const char *key, json_t *val)
{
	struct snapcell_error err = {0};
	if (!json_is_string(val))
		return mcp_config_fail(c, at, "must be a string");
	if (snapcell_config_set_env(c->cfg, key, json_string_value(val), &err) < 0)
		return mcp_config_lib_fail(c, at, &err);
	return 0;
}

static int env(const struct ctx *c, const char *path, json_t *v)
{
	return mcp_config_each_member(c, path, v, "must be an object of strings", one_env);
}

static int max_runs(const struct ctx *c, const char *path, json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4096)
		return mcp_config_fail(c, path, "must be an integer from 1 to 4096");
	c->opts->max_runs = (unsigned)json_integer_value(v);
	return 0;
}

static int max_queued(const struct ctx *c, const char *path, json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > MCP_QUEUED_MAX)
		return mcp_config_fail(c, path, "must be an integer from 0 to 16384");
	c->opts->max_queued = (unsigned)json_integer_value(v);
	c->opts->max_queued_set = true;
	return 0;
}

static int max_per_client(const struct ctx *c, const char *path, json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > MCP_QUEUED_MAX + 4096)
		return mcp_config_fail(c, path, "must be an integer from 1 to 20480");
	c->opts->max_per_client = (unsigned)json_integer_value(v);
	return 0;
}

static int queue_wait(const struct ctx *c, const char *path, json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > MCP_QUEUE_WAIT_S_MAX)
		return mcp_config_fail(c, path, "must be an integer from 0 to 600");
	c->opts->queue_wait_s = (unsigned)json_integer_value(v);
	c->opts->queue_wait_set = true;
	return 0;
}

static int result_memory(const struct ctx *c, const char *path, json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)MCP_RESULT_MEMORY_MIN ||
	    json_integer_value(v) > (json_int_t)MCP_RESULT_MEMORY_MAX)
		return mcp_config_fail(c, path,
				       "must be an integer from 16777216 to 1099511627776");
	c->opts->result_memory = (uint64_t)json_integer_value(v);
	return 0;
}

static int link_ttl(const struct ctx *c, const char *path, json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 ||
	    json_integer_value(v) > MCP_LINK_TTL_S_MAX)
		return mcp_config_fail(c, path, "must be an integer from 1 to 86400");
	c->opts->link_ttl_s = (unsigned)json_integer_value(v);
	return 0;
}

static int structured(const struct ctx *c, const char *path, json_t *v)
{
	if (!json_is_boolean(v))
		return mcp_config_fail(c, path, "must be true or false");
	c->opts->structured_content = json_is_true(v);
	return 0;
}

static int code_errors(const struct ctx *c, const char *path, json_t *v)
{
	if (!json_is_boolean(v))
		return mcp_config_fail(c, path, "must be true or false");
	c->opts->code_errors_as_results = json_is_true(v);
	return 0;
}

/* "reuse": snapcell_config_set_reuse, a fresh run's cell reset in place for a later run. */
static int reuse(const struct ctx *c, const char *path, json_t *v)
{
	if (!json_is_boolean(v))
		return mcp_config_fail(c, path, "must be true or false");
	struct snapcell_error err = {0};
	if (snapcell_config_set_reuse(c->cfg, json_is_true(v), &err) < 0)
		return mcp_config_lib_fail(c, path, &err);
	return 0;
}

static int isolation(const struct ctx *c, const char *path, json_t *v)
{
	enum snapcell_isolation level;
	if (!json_is_string(v) || snapcell_isolation_from_name(json_string_value(v), &level) < 0 ||
	    level == SNAPCELL_ISOLATION_NONE) {
		char why[128];
		snprintf(why, sizeof(why), "must be \"%s\", \"%s\" or \"%s\"",
			 snapcell_isolation_name(SNAPCELL_ISOLATION_RLIMITS),
			 snapcell_isolation_name(SNAPCELL_ISOLATION_NAMESPACES),
			 snapcell_isolation_name(SNAPCELL_ISOLATION_CGROUPS));
		return mcp_config_fail(c, path, why);
	}
	struct snapcell_error err = {0};
	return snapcell_config_require_isolation(c->cfg, level, &err) < 0
		       ? mcp_config_lib_fail(c, path, &err)
		       : 0;
}

/* "uid_range": [first, count], as snapcell run --uid-range FIRST:COUNT. */
static int uid_range(const struct ctx *c, const char *path, json_t *v)
{
	json_t *first = json_array_get(v, 0), *count = json_array_get(v, 1);
	if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(first) ||
	    !json_is_integer(count) || json_integer_value(first) < 0 ||
	    json_integer_value(first) > UINT32_MAX || json_integer_value(count) < 0 ||
	    json_integer_value(count) > UINT32_MAX)
		return mcp_config_fail(c, path,
				       "must be [first, count], two integers from 0 to 4294967295");
	struct snapcell_error err = {0};
	return snapcell_config_set_uid_range(c->cfg, (uint32_t)json_integer_value(first),
					     (uint32_t)json_integer_value(count), &err) < 0
		       ? mcp_config_lib_fail(c, path, &err)
		       : 0;
}

/* A positive integer member of "sessions", at most max. */
static int session_count(const struct ctx *c, const char *at, json_t *val, unsigned max,
			 unsigned *out)
{
	if (!json_is_integer(val) || json_integer_value(val) < 1 ||
	    json_integer_value(val) > (json_int_t)max) {
		char why[64];
		snprintf(why, sizeof(why), "must be an integer from 1 to %u", max);
		return mcp_config_fail(c, at, why);
	}
	*out = (unsigned)json_integer_value(val);
	return 0;
}

static int one_session_key(const struct ctx *c, const char *at, const char *key, json_t *val)
{
	struct mcp_session_options *o = &c->opts->sessions;
	if (!strcmp(key, "enabled")) {
		if (!json_is_boolean(val))
			return mcp_config_fail(c, at, "must be true or false");
		o->enabled = json_is_true(val);
		return 0;
	}
	if (!strcmp(key, "max"))
		return session_count(c, at, val, 4096, &o->max);
	if (!strcmp(key, "idle_timeout_s"))
		return session_count(c, at, val, 7 * 86400, &o->idle_timeout_s);
	if (!strcmp(key, "max_snapshots"))
		return session_count(c, at, val, 1024, &o->max_snapshots);
	return mcp_config_fail(c, at, "unknown key");
}

/* "sessions": {"enabled", "max", "idle_timeout_s", "max_snapshots"} (sessions.c). */
static int sessions(const struct ctx *c, const char *path, json_t *v)
{
	return mcp_config_each_member(c, path, v, "must be an object", one_session_key);
}

static int replica(const struct ctx *c, const char *path, json_t *v)
{
	const char *name = json_string_value(v);
	if (!name || !mcp_replica_valid(name))
		return mcp_config_fail(c, path,
				       "must be 1 to 63 of the characters A-Z a-z 0-9 . _ -");
	snprintf(c->opts->replica, sizeof(c->opts->replica), "%s", name);
	return 0;
}

/* "approve": names of tools (command tools, downstream servers' "server.tool") that need a
 * decision on each call the code makes, asked of the MCP client (docs/approval.md), as
 * `snapcell run --approve NAME`. Checked here, applied once every tool is registered. */
static int approve_names(const struct ctx *c, const char *path, json_t *v)
{
	size_t i;
	json_t *e;
	if (!json_is_array(v))
		return mcp_config_fail(c, path, "must be an array of tool names");
	json_array_foreach(v, i, e)
	{
		if (!json_is_string(e)) {
			char at[64];
			snprintf(at, sizeof(at), "%s[%zu]", path, i);
			return mcp_config_fail(c, at, "must be a tool name (a string)");
		}
	}
	return 0;
}

static int approve_apply(const struct ctx *c, json_t *v)
{
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		char at[64];
		snprintf(at, sizeof(at), "approve[%zu]", i);
		struct snapcell_error err = {0};
		int rc =
			snapcell_config_set_tool_decision(c->cfg, json_string_value(e), true, &err);
		if (rc == -ENOENT)
			return mcp_config_fail(
				c, at,
				"no such tool: name one of \"tools\" or a downstream server's "
				"\"server.tool\"");
		if (rc < 0)
			return mcp_config_lib_fail(c, at, &err);
	}
	return 0;
}

/* The file's sections; the server's own (mcp_only) mean nothing to `snapcell run`, which
 * refuses them rather than ignore them. */
static const struct {
	const char *key;
	int (*load)(const struct ctx *c, const char *path, json_t *v);
	bool mcp_only;
} sections[] = {
	{"limits", limits, false},
	{"workspace", workspace, false},
	{"mounts", mounts, false},
	{"python_paths", python_paths, false},
	{"allow", allow, false},
	{"host_map", host_map, false},
	{"upstream_ca", upstream_ca, false},
	{"venv", venv, false},
	{"python", python, false},
	{"preload", preload, false},
	{"warmup", warmup, false},
	{"env", env, false},
	{"tools", mcp_config_tools, false},
	{"mcp_servers", mcp_config_servers, true},
	{"downstream_calls_per_run", mcp_config_downstream_calls, true},
	{"max_concurrent_runs", max_runs, true},
	{"max_queued_calls", max_queued, true},
	{"max_calls_per_client", max_per_client, true},
	{"queue_wait_s", queue_wait, true},
	{"result_memory_bytes", result_memory, true},
	{"result_link_ttl_s", link_ttl, true},
	{"structured_content", structured, true},
	{"code_errors_as_results", code_errors, true},
	{"require_isolation", isolation, false},
	{"uid_range", uid_range, false},
	{"sessions", sessions, true},
	{"replica", replica, true},
	{"approve", approve_names, false},
	{"reuse", reuse, false},
};

#define N_SECTIONS (sizeof(sections) / sizeof(sections[0]))

static size_t section_index(const char *key)
{
	size_t i = 0;
	while (i < N_SECTIONS && strcmp(sections[i].key, key))
		i++;
	return i;
}

/* For `snapcell run`: -1 after one message naming every key of root only the server reads. */
static int refuse_server_keys(const struct ctx *c, json_t *root)
{
	char names[512] = "";
	size_t off = 0, n = 0;
	const char *key;
	json_t *val;
	json_object_foreach(root, key, val)
	{
		size_t i = section_index(key);
		if (i == N_SECTIONS || !sections[i].mcp_only || off >= sizeof(names))
			continue;
		off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", n++ ? ", " : "",
					key);
	}
	if (n == 0)
		return 0;
	fprintf(stderr,
		"snapcell run: --config %s: %s: %s `snapcell mcp` only; leave %s out for `run`\n",
		c->file, names, n == 1 ? "this key is for" : "these keys are for",
		n == 1 ? "it" : "them");
	return -1;
}

/* Notes the variables the allow-list headers read before anything starts a child: a
 * downstream server listed before "allow" must not get them either. */
static int note_header_secrets(json_t *root)
{
	size_t i;
	json_t *entry, *value;
	const char *name;
	json_array_foreach(json_object_get(root, "allow"), i, entry)
	{
		json_object_foreach(json_object_get(entry, "headers"), name, value)
		{
			if (json_is_string(value) &&
			    fe_env_note_secrets(json_string_value(value)) < 0)
				return -1;
		}
	}
	return 0;
}

static int apply(const struct ctx *c, json_t *root)
{
	int rc = json_is_object(root) ? 0 : mcp_config_fail(c, "(top level)", "must be an object");
	if (rc == 0 && note_header_secrets(root) < 0)
		rc = mcp_config_fail(c, "allow", "out of memory");
	if (rc == 0 && !strcmp(c->command, "run"))
		rc = refuse_server_keys(c, root);
	const char *key;
	json_t *val;
	json_object_foreach(root, key, val)
	{
		size_t i = section_index(key);
		if (rc == 0)
			rc = i == N_SECTIONS ? mcp_config_fail(c, key, "unknown key")
					     : sections[i].load(c, key, val);
	}
	json_t *approve = json_object_get(root, "approve");
	if (rc == 0 && approve)
		rc = approve_apply(c, approve);
	return rc;
}

int mcp_config_apply(const char *file, json_t *root, struct snapcell_config *cfg,
		     struct mcp_options *opts)
{
	struct ctx c = {file, cfg, opts, "mcp"};
	return apply(&c, root);
}

static int load(const struct ctx *c)
{
	json_error_t jerr;
	json_t *root = json_load_file(c->file, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		fprintf(stderr, "snapcell %s: --config %s: line %d: %s\n", c->command, c->file,
			jerr.line, jerr.text);
		return -1;
	}
	int rc = apply(c, root);
	json_decref(root);
	return rc;
}

int mcp_config_load(const char *file, struct snapcell_config *cfg, struct mcp_options *opts)
{
	struct ctx c = {file, cfg, opts, "mcp"};
	return load(&c);
}

/* What `snapcell run --config` loaded last: its command tools must outlive the sandbox, which
 * lives until the process ends; a new parse (cli_run_parse) starts it over. */
static struct mcp_options run_opts;

int mcp_run_config_load(const char *file, struct snapcell_config *cfg)
{
	mcp_options_clear(&run_opts);
	struct ctx c = {file, cfg, &run_opts, "run"};
	return load(&c);
}
