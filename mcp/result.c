/* A finished run as an MCP CallToolResult: stdout and stderr as text, /output files as images
 * or embedded resources, isError and the library's summary of its cause for a run that did
 * not end ok, and the run's record (status, timings, limits, tool-call log) under _meta. No
 * structuredContent unless asked: clients that prefer it (Agent Framework's default) would
 * then show the model nothing else. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "mcp.h"

#define META_KEY "snapcell/run"

/* Set once at startup (--code-errors-as-results), before the threads that read it. */
static bool code_errors_as_results;

void mcp_result_set_code_errors_as_results(bool on)
{
	code_errors_as_results = on;
}

/* Whether the run failed through what its code did, rather than around it (a cell that
 * could not be set up, a cancellation): those stay errors whatever the option. */
static bool failed_by_code(enum snapcell_status status)
{
	return status == SNAPCELL_STATUS_ERROR || status == SNAPCELL_STATUS_TIMEOUT ||
	       status == SNAPCELL_STATUS_MEMORY || status == SNAPCELL_STATUS_OUTPUT_LIMIT ||
	       status == SNAPCELL_STATUS_KILLED;
}

static void add_text(json_t *content, const char *text)
{
	json_array_append_new(content, json_pack("{s:s, s:s}", "type", "text", "text", text));
}

/* "file:///output/<path>" with everything but unreserved bytes and '/' percent-encoded, so
 * any name the code chose is a valid URI. */
static char *output_uri(const char *path)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(path);
	char *uri = malloc(sizeof("file:///output/") + n * 3);
	if (!uri)
		return NULL;
	char *o = stpcpy(uri, "file:///output/");
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9') || strchr("-._~/", *p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = hex[*p >> 4];
			*o++ = hex[*p & 15];
		}
	}
	*o = 0;
	return uri;
}

static bool is_text_type(const char *type)
{
	return !strncmp(type, "text/", 5) || !strcmp(type, "application/json") ||
	       !strcmp(type, "application/xml");
}

/* One artifact; the base64 text comes from the run's JSON record (cli/json.c). */
static json_t *artifact_content(const struct snapcell_artifact *a, json_t *record)
{
	json_t *b64 = json_object_get(record, "base64");
	if (!strncmp(a->media_type, "image/", 6))
		return json_pack("{s:s, s:O, s:s}", "type", "image", "data", b64, "mimeType",
				 a->media_type);
	char *uri = output_uri(a->path);
	json_t *resource = json_pack("{s:s, s:s}", "uri", uri ? uri : "file:///output/", "mimeType",
				     a->media_type);
	free(uri);
	json_t *text = is_text_type(a->media_type) && memchr(a->data, 0, a->size) == NULL
			       ? json_stringn((const char *)a->data, a->size)
			       : NULL;
	if (text)
		json_object_set_new(resource, "text", text);
	else
		json_object_set(resource, "blob", b64);
	return json_pack("{s:s, s:o}", "type", "resource", "resource", resource);
}

json_t *mcp_call_result(const struct snapcell_result *res, bool structured)
{
	json_t *record = cli_result_json(res);
	json_t *content = json_array();
	json_t *stdout_text = json_object_get(record, "stdout");
	json_t *stderr_text = json_object_get(record, "stderr");
	if (json_string_length(stdout_text))
		json_array_append_new(content,
				      json_pack("{s:s, s:O}", "type", "text", "text", stdout_text));
	if (json_string_length(stderr_text)) {
		char *text = NULL;
		if (asprintf(&text, "stderr:\n%s", json_string_value(stderr_text)) >= 0)
			add_text(content, text);
		free(text);
	}
	/* After a failed run, the status and its cause in the library's words: a client that
	 * shows only text (or only some items) still tells the model why. */
	char *why = NULL;
	if (res->status != SNAPCELL_STATUS_OK && snapcell_result_summary(res, &why, NULL) == 0)
		add_text(content, why);
	free(why);
	json_t *files = json_object_get(record, "artifacts");
	for (size_t i = 0; i < res->n_artifacts; i++)
		json_array_append_new(
			content, artifact_content(&res->artifacts[i], json_array_get(files, i)));
	if (!json_array_size(content))
		add_text(content, "(no output)");
	json_t *meta = json_deep_copy(record);
	json_object_del(meta, "stdout");
	json_object_del(meta, "stderr");
	json_t *a;
	size_t i;
	json_array_foreach(json_object_get(meta, "artifacts"), i, a) json_object_del(a, "base64");
	bool is_error = res->status != SNAPCELL_STATUS_OK &&
			!(code_errors_as_results && failed_by_code(res->status));
	json_t *result = json_pack("{s:o, s:b, s:{s:o}}", "content", content, "isError", is_error,
				   "_meta", META_KEY, meta);
	if (structured) {
		json_array_foreach(json_object_get(record, "artifacts"), i, a)
			json_object_del(a, "base64");
		json_object_set(result, "structuredContent", record);
	}
	json_decref(record);
	return result;
}

json_t *mcp_error_result(const char *status, const char *text)
{
	return json_pack("{s:[{s:s, s:s}], s:b, s:{s:{s:s}}}", "content", "type", "text", "text",
			 text, "isError", 1, "_meta", META_KEY, "status", status);
}
