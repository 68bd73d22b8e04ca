/* A downstream server's tools as host tools: tools/list (every page) at startup, each tool
 * registered on the config as "server.tool" with its description and input schema (checked
 * by the library before the call leaves the host), and the callback that makes tools/call.
 * A schema the library's subset refuses fails startup naming server, tool and reason: a tool
 * is never offered with less checking than its schema says, nor silently dropped.
 * What the code gets: structuredContent as a value; otherwise the text items joined by "\n"
 * (a non-text item as a bracketed note); isError or a JSON-RPC error raises ToolError. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/frontend.h"
#include "downstream.h"
#include "mcp.h"

/* Bounds on what a server may list: pages, and tools in all. */
#define LIST_PAGES_MAX 100
#define TOOLS_MAX      1024

struct ds_tool {
	struct mcp_downstreams *all;
	struct mcp_downstream *conn;
	char *name;	/* the server's own name for it */
	char *fullname; /* server.tool */
};

struct mcp_downstreams {
	unsigned cap; /* nested calls a run may make (downstream_calls_per_run) */
	struct mcp_downstream **conns;
	size_t n_conns;
	struct ds_tool **tools;
	size_t n_tools;
};

static struct mcp_downstreams *ensure(struct mcp_downstreams **all)
{
	if (!*all && (*all = calloc(1, sizeof(**all))))
		(*all)->cap = MCP_DOWNSTREAM_CALLS_DEFAULT;
	return *all;
}

void mcp_downstreams_set_cap(struct mcp_downstreams **all, unsigned cap)
{
	if (ensure(all))
		(*all)->cap = cap;
}

/* Nested calls of the run on this thread. A run's callbacks run on the thread that runs it,
 * and each run has its own deadline, so (thread, deadline) names the run: the count starts
 * again when the deadline changes. */
static __thread uint64_t counted_run;
static __thread unsigned run_calls;

static bool over_cap(unsigned cap, uint64_t deadline_us)
{
	if (counted_run != deadline_us) {
		counted_run = deadline_us;
		run_calls = 0;
	}
	return ++run_calls > cap;
}

/* The text items joined by "\n"; other items as a note, so nothing vanishes silently. */
static char *joined_text(const json_t *content)
{
	char *out = NULL;
	size_t len = 0, i;
	FILE *f = open_memstream(&out, &len);
	json_t *item;
	if (!f)
		return NULL;
	json_array_foreach(content, i, item)
	{
		const char *type = json_string_value(json_object_get(item, "type"));
		const char *text = json_string_value(json_object_get(item, "text"));
		if (i)
			fputc('\n', f);
		if (type && !strcmp(type, "text") && text)
			fputs(text, f);
		else
			fprintf(f, "[%s content not shown]", type ? type : "unknown");
	}
	fclose(f);
	return out;
}

static char *message(const char *fmt, ...)
{
	char *out = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&out, fmt, ap) < 0)
		out = NULL;
	va_end(ap);
	return out;
}

/* A tools/call response as the callback's answer: 0 and JSON text, or 1 and a message. */
static int call_result(const struct ds_tool *t, json_t *response, char **result)
{
	json_t *res = json_object_get(response, "result");
	json_t *error = json_object_get(response, "error");
	if (error || !json_is_object(res)) {
		const char *text = json_string_value(json_object_get(error, "message"));
		*result = error ? message("%s: the server refused the call (%lld): %s", t->fullname,
					  (long long)json_integer_value(
						  json_object_get(error, "code")),
					  text ? text : "no message")
				: message("%s: the server's answer has no result", t->fullname);
		return 1;
	}
	json_t *content = json_object_get(res, "content");
	if (json_is_true(json_object_get(res, "isError"))) {
		char *text = joined_text(content);
		*result = message("%s: %s", t->fullname, text && *text ? text : "failed");
		free(text);
		return 1;
	}
	json_t *structured = json_object_get(res, "structuredContent");
	if (structured) {
		*result = json_dumps(structured, JSON_COMPACT | JSON_ENCODE_ANY);
		return *result ? 0 : 1;
	}
	char *text = joined_text(content);
	json_t *s = text ? json_string(text) : NULL;
	free(text);
	*result = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
	json_decref(s);
	if (!*result) {
		*result = message("%s: the server's text is not UTF-8", t->fullname);
		return 1;
	}
	return 0;
}

static int call_tool(void *user, const char *args_json, char **result)
{
	struct ds_tool *t = user;
	uint64_t deadline_us = snapcell_tool_deadline_us();
	if (over_cap(t->all->cap, deadline_us)) {
		*result = message("%s: this run already made %u calls to downstream MCP servers, "
				  "the limit (downstream_calls_per_run)",
				  t->fullname, t->all->cap);
		return 1;
	}
	json_t *args = json_loads(args_json, 0, NULL), *response = NULL;
	char why[512];
	json_t *params =
		json_pack("{s:s, s:o}", "name", t->name, "arguments", args ? args : json_object());
	if (mcp_downstream_request(t->conn, "tools/call", params, deadline_us,
				   snapcell_tool_cancel_fd(), &response, why, sizeof(why)) < 0) {
		*result = message("%s: %s", t->fullname, why);
		return 1;
	}
	int rc = call_result(t, response, result);
	json_decref(response);
	return rc;
}

static int add_tool(struct mcp_downstreams *all, struct snapcell_config *cfg,
		    struct mcp_downstream *conn, json_t *tool, char *why, size_t size)
{
	const char *server = mcp_downstream_name(conn);
	const char *name = json_string_value(json_object_get(tool, "name"));
	json_t *description = json_object_get(tool, "description");
	json_t *schema = json_object_get(tool, "inputSchema");
	if (!name)
		return mcp_say(why, size, "server '%s' listed a tool without a name", server);
	if (description && !json_is_string(description))
		return mcp_say(why, size, "server '%s': tool '%s': the description is not a string",
			       server, name);
	if (schema && !json_is_object(schema))
		return mcp_say(why, size, "server '%s': tool '%s': inputSchema is not an object",
			       server, name);
	if (all->n_tools == TOOLS_MAX)
		return mcp_say(why, size, "server '%s' lists more than %d tools", server,
			       TOOLS_MAX);
	struct ds_tool *t = calloc(1, sizeof(*t));
	if (!t || SC_ARRAY_ADD(all->tools, all->n_tools, TOOLS_MAX) < 0 ||
	    !(t->name = strdup(name)) || asprintf(&t->fullname, "%s.%s", server, name) < 0) {
		free(t ? t->name : NULL);
		free(t);
		return mcp_say(why, size, "out of memory");
	}
	t->all = all;
	t->conn = conn;
	all->tools[all->n_tools++] = t;
	if (mcp_config_has_tool(cfg, t->fullname))
		return mcp_say(why, size, "server '%s': tool '%s': %s is already a tool", server,
			       name, t->fullname);
	char *schema_text = schema ? json_dumps(schema, JSON_COMPACT) : NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_add_tool(cfg, t->fullname, json_string_value(description),
					  schema_text, SNAPCELL_APPROVAL_NEVER, call_tool, t, &err);
	free(schema_text);
	return rc < 0 ? mcp_say(why, size, "server '%s': tool '%s': %s", server, name, err.message)
		      : 0;
}

static int list_tools(struct mcp_downstreams *all, struct snapcell_config *cfg,
		      struct mcp_downstream *conn, char *why, size_t size)
{
	const char *server = mcp_downstream_name(conn);
	char *cursor = NULL;
	for (int page = 0; page < LIST_PAGES_MAX; page++) {
		json_t *params = cursor ? json_pack("{s:s}", "cursor", cursor) : NULL;
		json_t *response = NULL;
		char inner[512];
		free(cursor);
		cursor = NULL;
		if (mcp_downstream_request(conn, "tools/list", params, 0, -1, &response, inner,
					   sizeof(inner)) < 0)
			return mcp_say(why, size, "server '%s': tools/list: %s", server, inner);
		json_t *result = json_object_get(response, "result");
		json_t *tools = json_object_get(result, "tools"), *tool;
		size_t i;
		if (!json_is_array(tools)) {
			json_t *error = json_object_get(response, "error");
			const char *text = json_string_value(json_object_get(error, "message"));
			json_decref(response);
			return mcp_say(why, size, "server '%s': tools/list: %s", server,
				       error ? (text ? text : "refused")
					     : "the answer has no tools array");
		}
		json_array_foreach(tools, i, tool)
		{
			if (add_tool(all, cfg, conn, tool, why, size) < 0) {
				json_decref(response);
				return -1;
			}
		}
		const char *next = json_string_value(json_object_get(result, "nextCursor"));
		cursor = next ? strdup(next) : NULL;
		json_decref(response);
		if (!cursor)
			return 0;
	}
	free(cursor);
	return mcp_say(why, size, "server '%s': tools/list: more than %d pages", server,
		       LIST_PAGES_MAX);
}

int mcp_downstreams_add(struct mcp_downstreams **allp, struct snapcell_config *cfg,
			const struct mcp_downstream_spec *spec, char *why, size_t size)
{
	struct mcp_downstreams *all = ensure(allp);
	if (!all || SC_ARRAY_ADD(all->conns, all->n_conns, SC_ARRAY_NO_CAP) < 0)
		return mcp_say(why, size, "out of memory");
	static bool curl_ready;
	if (spec->url && !curl_ready) {
		if (mcp_downstream_http_init() < 0)
			return mcp_say(why, size, "server '%s': libcurl did not initialise",
				       spec->name);
		curl_ready = true;
	}
	struct mcp_downstream *conn;
	char inner[512];
	if (mcp_downstream_open(spec, &conn, inner, sizeof(inner)) < 0)
		return mcp_say(why, size, "server '%s': %s", spec->name, inner);
	all->conns[all->n_conns++] = conn;
	return list_tools(all, cfg, conn, why, size);
}

void mcp_downstreams_free(struct mcp_downstreams *all)
{
	if (!all)
		return;
	for (size_t i = 0; i < all->n_conns; i++)
		mcp_downstream_close(all->conns[i]);
	for (size_t i = 0; i < all->n_tools; i++) {
		free(all->tools[i]->name);
		free(all->tools[i]->fullname);
		free(all->tools[i]);
	}
	free(all->conns);
	free(all->tools);
	free(all);
}
