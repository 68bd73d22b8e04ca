/* The config's programs on the host: command tools ("tools": argv and the variables they
 * inherit, run by the front-end library's runner) and downstream MCP servers ("mcp_servers",
 * "downstream_calls_per_run": their commands or URLs, headers and environment). It checks
 * and records them; downstream.c starts and talks to the servers. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/frontend.h"
#include "config.h"
#include "downstream.h"
#include "mcp.h"

static void free_argv(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

void mcp_options_clear(struct mcp_options *opts)
{
	for (size_t i = 0; i < opts->n_tool_commands; i++) {
		free_argv(opts->tool_commands[i]->argv);
		free_argv(opts->tool_commands[i]->inherit);
		free(opts->tool_commands[i]);
	}
	free(opts->tool_commands);
	opts->tool_commands = NULL;
	opts->n_tool_commands = 0;
	mcp_downstreams_free(opts->downstreams);
	opts->downstreams = NULL;
}

bool mcp_config_has_tool(const struct snapcell_config *cfg, const char *name)
{
	struct snapcell_tool_info info;
	for (size_t i = 0; i < snapcell_config_tool_count(cfg); i++)
		if (snapcell_config_tool_info(cfg, i, &info, NULL) == 0 && !strcmp(info.name, name))
			return true;
	return false;
}

/* A NULL-terminated copy of array v's strings (checked by the caller), or NULL. */
static char **copy_strings(json_t *v)
{
	size_t n = json_array_size(v);
	char **out = calloc(n + 1, sizeof(*out));
	for (size_t i = 0; out && i < n; i++)
		if (!(out[i] = strdup(json_string_value(json_array_get(v, i))))) {
			free_argv(out);
			return NULL;
		}
	return out;
}

/* A command tool, owned by opts (see struct mcp_options); inherit may be NULL (none). */
static struct fe_tool_command *copy_command(struct mcp_options *opts, json_t *argv, json_t *inherit)
{
	if (SC_ARRAY_ADD(opts->tool_commands, opts->n_tool_commands, SC_ARRAY_NO_CAP) < 0)
		return NULL;
	struct fe_tool_command *t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	opts->tool_commands[opts->n_tool_commands++] = t;
	t->argv = copy_strings(argv);
	t->inherit = copy_strings(inherit);
	return t->argv && t->inherit ? t : NULL;
}

/* "inherit_env": names of our variables a child also gets (child_env.c), never one that
 * holds the token or a header's credential. */
static int inherit_env_ok(const struct ctx *c, const char *at, json_t *v)
{
	size_t i;
	json_t *e;
	if (v && (!json_is_array(v) || json_array_size(v) > 256))
		return mcp_config_fail(
			c, at, "\"inherit_env\" must be an array of at most 256 variable names");
	json_array_foreach(v, i, e)
	{
		const char *name = json_string_value(e);
		if (!name || !*name || strchr(name, '='))
			return mcp_config_fail(c, at,
					       "\"inherit_env\" must hold variable names (no '=')");
		const char *why = fe_env_withheld(name);
		if (why) {
			char text[160];
			snprintf(text, sizeof(text), "\"inherit_env\": %s is never passed on: %s",
				 name, why);
			return mcp_config_fail(c, at, text);
		}
	}
	return 0;
}

static int one_tool(const struct ctx *c, const char *at, json_t *t)
{
	static const char *const keys[] = {"name",   "argv",	    "description",
					   "schema", "inherit_env", NULL};
	if (mcp_config_only_keys(c, at, t, keys) < 0 ||
	    inherit_env_ok(c, at, json_object_get(t, "inherit_env")) < 0)
		return -1;
	const char *name = json_string_value(json_object_get(t, "name"));
	const char *description = json_string_value(json_object_get(t, "description"));
	json_t *argv = json_object_get(t, "argv"), *schema = json_object_get(t, "schema"), *a;
	size_t i;
	if (!name)
		return mcp_config_fail(c, at, "needs \"name\" (a string)");
	if (!json_is_array(argv) || !json_array_size(argv))
		return mcp_config_fail(c, at, "needs \"argv\" (a non-empty array of strings)");
	json_array_foreach(argv, i, a)
	{
		if (!json_is_string(a) || !json_string_length(a))
			return mcp_config_fail(c, at, "\"argv\" must hold non-empty strings");
	}
	if (json_object_get(t, "description") && !description)
		return mcp_config_fail(c, at, "\"description\" must be a string");
	if (schema && !json_is_object(schema))
		return mcp_config_fail(c, at, "\"schema\" must be a JSON Schema object");
	if (mcp_config_has_tool(c->cfg, name))
		return mcp_config_fail(c, at, "a tool of that name is already declared");
	char *schema_text = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
	struct fe_tool_command *args =
		copy_command(c->opts, argv, json_object_get(t, "inherit_env"));
	struct snapcell_error err = {0};
	int rc = args ? snapcell_config_add_tool(c->cfg, name, description, schema_text,
						 SNAPCELL_APPROVAL_NEVER, fe_argv_tool, args, &err)
		      : -1;
	if (rc == 0)
		rc = snapcell_config_set_tool_async(c->cfg, name, fe_argv_tool_start,
						    fe_command_tool_cancel, &err);
	free(schema_text);
	if (rc < 0)
		return args ? mcp_config_lib_fail(c, at, &err)
			    : mcp_config_fail(c, at, "out of memory");
	return 0;
}

int mcp_config_tools(const struct ctx *c, const char *path, json_t *v)
{
	return mcp_config_each(c, path, v, "must be an array of {\"name\", \"argv\", ...}",
			       one_tool);
}

/* A NULL-terminated copy of the strings of array v, or of an object's members as
 * "NAME<sep>VALUE"; *bad names the first member that is not a string. */
static char **strv_of(json_t *v, const char *sep, const char **bad)
{
	size_t n = json_is_array(v) ? json_array_size(v) : json_object_size(v), k = 0, i;
	char **out = calloc(n + 1, sizeof(*out));
	const char *key;
	json_t *e;
	*bad = NULL;
	if (!out)
		return NULL;
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
		{
			if (!json_is_string(e) || !(out[k++] = strdup(json_string_value(e)))) {
				*bad = "an element";
				break;
			}
		}
	} else {
		json_object_foreach(v, key, e)
		{
			char *line = NULL;
			if (!json_is_string(e) ||
			    asprintf(&line, "%s%s%s", key, sep, json_string_value(e)) < 0) {
				*bad = key;
				break;
			}
			out[k++] = line;
		}
	}
	if (*bad)
		free_argv(out), out = NULL;
	return out;
}

/* Header lines for an HTTP downstream: names a token, values without control characters
 * (a newline would start another header). */
static bool header_ok(const char *name, const char *value)
{
	if (!*name || strspn(name, "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
				   "abcdefghijklmnopqrstuvwxyz") != strlen(name))
		return false;
	for (const unsigned char *p = (const unsigned char *)value; *p; p++)
		if ((*p < ' ' && *p != '\t') || *p == 0x7f)
			return false;
	return true;
}

static bool server_name_ok(const char *name)
{
	size_t n = strlen(name);
	return n && n <= MCP_DOWNSTREAM_NAME_MAX &&
	       strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") ==
		       n;
}

/* One entry of "mcp_servers": {"command", "args", "env", "cwd"} or {"url", "headers"}, both
 * with "timeout_ms". It is connected and its tools registered here, so a server that does not
 * start, answer or list its tools stops snapcell mcp before it serves. */
static int one_server(const struct ctx *c, const char *at, const char *name, json_t *s)
{
	static const char *const keys[] = {"command", "args",	 "env",	       "inherit_env", "cwd",
					   "url",     "headers", "timeout_ms", NULL};
	json_t *inherit = json_object_get(s, "inherit_env");
	if (mcp_config_only_keys(c, at, s, keys) < 0 || inherit_env_ok(c, at, inherit) < 0)
		return -1;
	if (!server_name_ok(name))
		return mcp_config_fail(c, at,
				       "a server name is 1 to 64 characters of [A-Za-z0-9_-]");
	json_t *command = json_object_get(s, "command"), *args = json_object_get(s, "args");
	json_t *env = json_object_get(s, "env"), *cwd = json_object_get(s, "cwd");
	json_t *url = json_object_get(s, "url"), *headers = json_object_get(s, "headers");
	json_t *timeout = json_object_get(s, "timeout_ms");
	if (!command == !url)
		return mcp_config_fail(c, at, "needs either \"command\" (stdio) or \"url\" (HTTP)");
	if (command && (!json_is_string(command) || !json_string_length(command)))
		return mcp_config_fail(c, at, "\"command\" must be a non-empty string");
	const char *u = json_string_value(url);
	if (url && (!u || (strncmp(u, "http://", 7) && strncmp(u, "https://", 8))))
		return mcp_config_fail(c, at, "\"url\" must be an http:// or https:// URL");
	if (url && (args || env || inherit || cwd))
		return mcp_config_fail(
			c, at,
			"\"args\", \"env\", \"inherit_env\" and \"cwd\" are for \"command\" "
			"servers");
	if (command && headers)
		return mcp_config_fail(c, at, "\"headers\" are for \"url\" servers");
	if (args && !json_is_array(args))
		return mcp_config_fail(c, at, "\"args\" must be an array of strings");
	if ((env && !json_is_object(env)) || (headers && !json_is_object(headers)))
		return mcp_config_fail(c, at, "\"env\" and \"headers\" must be objects of strings");
	if (cwd && !json_is_string(cwd))
		return mcp_config_fail(c, at, "\"cwd\" must be a string (a directory)");
	if (timeout && (!json_is_integer(timeout) || json_integer_value(timeout) < 1 ||
			json_integer_value(timeout) > 600000))
		return mcp_config_fail(c, at, "\"timeout_ms\" must be an integer from 1 to 600000");
	const char *key;
	json_t *v;
	json_object_foreach(env, key, v)
	{
		if (!*key || strchr(key, '='))
			return mcp_config_fail(c, at,
					       "\"env\" names must be non-empty and hold no '='");
	}
	json_object_foreach(headers, key, v)
	{
		if (!json_is_string(v) || !header_ok(key, json_string_value(v)))
			return mcp_config_fail(
				c, at,
				"\"headers\" must map header names to values without "
				"control characters");
	}
	struct mcp_downstream_spec spec = {
		.name = name,
		.cwd = json_string_value(cwd),
		.url = json_string_value(url),
		.timeout_ms = timeout ? (uint64_t)json_integer_value(timeout) : 30000,
	};
	const char *bad = NULL;
	char **argv = NULL, **envv = NULL, **hdrs = NULL, **inherited = NULL;
	json_t *full = NULL;
	if (command) {
		inherited = copy_strings(inherit);
		full = json_array();
		json_array_append(full, command);
		if (args)
			json_array_extend(full, args);
		argv = strv_of(full, "", &bad);
		envv = env ? strv_of(env, "=", &bad) : calloc(1, sizeof(char *));
	} else {
		hdrs = headers ? strv_of(headers, ": ", &bad) : calloc(1, sizeof(char *));
	}
	json_decref(full);
	spec.argv = argv;
	spec.env = envv;
	spec.inherit = inherited;
	spec.headers = hdrs;
	int rc = 0;
	char why[768];
	if (bad)
		rc = mcp_config_fail(c, at, "\"args\" and \"env\" must hold strings");
	else if (command ? !argv || !envv || !inherited : !hdrs)
		rc = mcp_config_fail(c, at, "out of memory");
	else if (mcp_downstreams_add(&c->opts->downstreams, c->cfg, &spec, why, sizeof(why)) < 0)
		rc = mcp_config_fail(c, at, why);
	free_argv(argv);
	free_argv(envv);
	free_argv(inherited);
	free_argv(hdrs);
	return rc;
}

int mcp_config_servers(const struct ctx *c, const char *path, json_t *v)
{
	return mcp_config_each_member(c, path, v, "must be an object of server names to servers",
				      one_server);
}

int mcp_config_downstream_calls(const struct ctx *c, const char *path, json_t *v)
{
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 1000000)
		return mcp_config_fail(c, path, "must be an integer from 1 to 1000000");
	mcp_downstreams_set_cap(&c->opts->downstreams, (unsigned)json_integer_value(v));
	return 0;
}
