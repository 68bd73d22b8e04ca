/* A finished run as an MCP CallToolResult: stdout and stderr as text, /output files as images
 * or embedded resources, isError and the library's summary of its cause for a run that did
 * not end ok, the last expression's value as a last text item, and the run's record (status,
 * timings, limits, tool-call log) under _meta. No structuredContent unless asked: clients that
 * prefer it (Agent Framework's default) would then show the model nothing else.
 *
 * A binary file's base64 is never built in the tree: a marker string holds its place and
 * mcp_message_text() writes the base64 straight from the run's bytes into the message's text,
 * once (it used to be encoded into the tree, copied with the record, then copied into the
 * text: four times a file's size on top of the file). mcp_result_cost() is what a result
 * holds, for the server's budget. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "mcp.h"

#define META_KEY "snapcell/run"

/* "snapcell-artifact-<32 hex digits>-": a secret of this process, so no text the code writes
 * is taken for a marker; the artifact's index follows. (A forged one could only show the
 * code's own file of the same result: markers are expanded from the bound result alone.) */
static char marker[sizeof("snapcell-artifact--") + MCP_SECRET_HEX];
static size_t marker_len;
static pthread_once_t marker_once = PTHREAD_ONCE_INIT;
/* The result whose markers this thread's mcp_message_text() expands (mcp_result_bind). */
static _Thread_local const struct snapcell_result *bound;

static void marker_init(void)
{
	char secret[MCP_SECRET_HEX + 1];
	if (mcp_secret_new(secret) < 0)
		snprintf(secret, sizeof(secret), "%0*d", MCP_SECRET_HEX, 0);
	marker_len = (size_t)snprintf(marker, sizeof(marker), "snapcell-artifact-%s-", secret);
}

void mcp_result_bind(const struct snapcell_result *res)
{
	bound = res;
}

static size_t base64_len(size_t n)
{
	return (n + 2) / 3 * 4;
}

/* Bytes of s once escaped in a JSON string, at most (a control byte takes six). */
static size_t escaped_len(const char *s, size_t n)
{
	size_t out = 2;
	for (size_t i = 0; i < n; i++)
		out += (unsigned char)s[i] < 0x20 ? 6 : s[i] == '"' || s[i] == '\\' ? 2 : 1;
	return out;
}

static bool is_text_type(const char *type);

size_t mcp_result_cost(const struct snapcell_result *res)
{
	size_t cost = 65536 + 2 * escaped_len(res->stdout_buf, res->stdout_len) +
		      2 * escaped_len(res->stderr_buf, res->stderr_len);
	/* The value: its text item, and its tree and text in the record. */
	if (res->value_json)
		cost += 3 * escaped_len(res->value_json, strlen(res->value_json));
	for (size_t i = 0; i < res->n_artifacts; i++) {
		const struct snapcell_artifact *a = &res->artifacts[i];
		/* The file itself, its text twice (tree and message) or its base64 once. */
		cost += a->size + base64_len(a->size);
		if (is_text_type(a->media_type))
			cost += 2 * escaped_len((const char *)a->data, a->size);
	}
	return cost;
}

/* A marker for artifact i of the result being built. */
static json_t *artifact_marker(size_t i)
{
	pthread_once(&marker_once, marker_init);
	char text[sizeof(marker) + 24];
	snprintf(text, sizeof(text), "%s%zu", marker, i);
	return json_string(text);
}

/* The artifact a chunk of dumped text names, when it is exactly a marker of the bound result. */
static const struct snapcell_artifact *marked(const char *chunk, size_t n)
{
	if (!bound || !marker_len || n <= marker_len || n > marker_len + 20 ||
	    memcmp(chunk, marker, marker_len))
		return NULL;
	size_t i = 0;
	for (size_t k = marker_len; k < n; k++) {
		if (chunk[k] < '0' || chunk[k] > '9')
			return NULL;
		i = i * 10 + (size_t)(chunk[k] - '0');
	}
	return i < bound->n_artifacts ? &bound->artifacts[i] : NULL;
}

static void base64_into(char *out, const uint8_t *data, size_t len)
{
	static const char digits[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	for (size_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)data[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)data[i + 1] << 8;
		if (i + 2 < len)
			v |= data[i + 2];
		*out++ = digits[v >> 18 & 63];
		*out++ = digits[v >> 12 & 63];
		*out++ = i + 1 < len ? digits[v >> 6 & 63] : '=';
		*out++ = i + 2 < len ? digits[v & 63] : '=';
	}
}

/* Where the text goes: counted first (buf NULL), then written into a buffer of that size. */
struct text {
	char *buf;
	size_t len;
};

static int put(const char *chunk, size_t n, void *data)
{
	struct text *t = data;
	const struct snapcell_artifact *a = marked(chunk, n);
	size_t want = a ? base64_len(a->size) : n;
	if (t->buf) {
		if (a)
			base64_into(t->buf + t->len, a->data, a->size);
		else
			memcpy(t->buf + t->len, chunk, n);
	}
	t->len += want;
	return 0;
}

char *mcp_message_text(const json_t *msg, const char *prefix, const char *suffix, size_t *len)
{
	size_t pre = prefix ? strlen(prefix) : 0, post = suffix ? strlen(suffix) : 0;
	struct text t = {NULL, 0};
	/* Compact output escapes every newline inside strings: one message, one line. */
	if (json_dump_callback(msg, put, &t, JSON_COMPACT) < 0)
		return NULL;
	size_t body = t.len;
	if (!(t.buf = malloc(pre + body + post + 1)))
		return NULL;
	memcpy(t.buf, prefix ? prefix : "", pre);
	t.len = pre;
	if (json_dump_callback(msg, put, &t, JSON_COMPACT) < 0 || t.len != pre + body) {
		free(t.buf);
		return NULL;
	}
	memcpy(t.buf + t.len, suffix ? suffix : "", post + 1);
	*len = pre + body + post;
	return t.buf;
}

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

/* Artifact i: an image, a text resource, or a blob resource (its data a marker). */
static json_t *artifact_content(const struct snapcell_artifact *a, size_t i)
{
	if (!strncmp(a->media_type, "image/", 6))
		return json_pack("{s:s, s:o, s:s}", "type", "image", "data", artifact_marker(i),
				 "mimeType", a->media_type);
	char *uri = output_uri(a->path);
	json_t *resource = json_pack("{s:s, s:s}", "uri", uri ? uri : "file:///output/", "mimeType",
				     a->media_type);
	free(uri);
	json_t *text = is_text_type(a->media_type) && memchr(a->data, 0, a->size) == NULL
			       ? json_stringn((const char *)a->data, a->size)
			       : NULL;
	json_object_set_new(resource, text ? "text" : "blob", text ? text : artifact_marker(i));
	return json_pack("{s:s, s:o}", "type", "resource", "resource", resource);
}

json_t *mcp_call_result(const struct snapcell_result *res, bool structured)
{
	json_t *record = cli_result_record(res, false);
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
	for (size_t i = 0; i < res->n_artifacts; i++)
		json_array_append_new(content, artifact_content(&res->artifacts[i], i));
	/* The last expression's value (or why it is not shown) after everything else, in the
	 * library's words; a run with nothing else to show does not say "(no output)" then. */
	char *value = NULL;
	if (snapcell_result_value_text(res, &value, NULL) == 0 && value)
		add_text(content, value);
	if (!json_array_size(content))
		add_text(content, "(no output)");
	free(value);
	/* A shallow copy: the record's members are shared, not copied. */
	json_t *meta = json_copy(record);
	json_object_del(meta, "stdout");
	json_object_del(meta, "stderr");
	bool is_error = res->status != SNAPCELL_STATUS_OK &&
			!(code_errors_as_results && failed_by_code(res->status));
	json_t *result = json_pack("{s:o, s:b, s:{s:o}}", "content", content, "isError", is_error,
				   "_meta", META_KEY, meta);
	if (structured)
		json_object_set(result, "structuredContent", record);
	json_decref(record);
	return result;
}

json_t *mcp_error_result(const char *status, const char *text)
{
	return json_pack("{s:[{s:s, s:s}], s:b, s:{s:{s:s}}}", "content", "type", "text", "text",
			 text, "isError", 1, "_meta", META_KEY, "status", status);
}
