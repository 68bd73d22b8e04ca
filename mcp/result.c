/* A finished run as an MCP CallToolResult: stdout and stderr as text, /output files as images
 * or embedded resources (each named in its _meta, all in one text), isError and the library's
 * summary of its cause for a run that did not end ok, the last expression's value as a last
 * text item, and the run's record (status, timings, limits, tool-call log) under _meta. No
 * structuredContent unless asked: clients that prefer it (Agent Framework's default) would
 * then show the model nothing else. An answer that must fit one SSE event has its largest
 * items replaced by resource links (mcp_result_link); mcp_result_item gives resources/read
 * what a link names. Where links are kept: links.c.
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

#include "mcp.h"

#define META_KEY "snapcell/run"
/* Each file's item names it (images too, whose content has no URI): its path under /output. */
#define PATH_KEY "snapcell/path"

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

/* prefix and path with everything but unreserved bytes and '/' percent-encoded, so any name
 * the code chose makes a valid URI. */
static char *encoded_uri(const char *prefix, const char *path)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(path);
	char *uri = malloc(strlen(prefix) + 1 + n * 3);
	if (!uri)
		return NULL;
	char *o = stpcpy(uri, prefix);
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

/* "file:///output/<path>": where an embedded file says it came from. */
static char *output_uri(const char *path)
{
	return encoded_uri("file:///output/", path);
}

static bool is_text_type(const char *type)
{
	return !strncmp(type, "text/", 5) || !strcmp(type, "application/json") ||
	       !strcmp(type, "application/xml");
}

/* A file's path as a JSON string: as it is, or percent-encoded when it is not UTF-8. */
static json_t *path_string(const char *path)
{
	json_t *s = json_string(path);
	if (s)
		return s;
	char *enc = encoded_uri("", path);
	s = json_string(enc ? enc : "?");
	free(enc);
	return s;
}

/* Artifact i: an image, a text resource, or a blob resource (its data a marker). */
static json_t *artifact_content(const struct snapcell_artifact *a, size_t i)
{
	if (!strncmp(a->media_type, "image/", 6))
		return json_pack("{s:s, s:o, s:s, s:{s:o}}", "type", "image", "data",
				 artifact_marker(i), "mimeType", a->media_type, "_meta", PATH_KEY,
				 path_string(a->path));
	char *uri = output_uri(a->path);
	json_t *resource = json_pack("{s:s, s:s}", "uri", uri ? uri : "file:///output/", "mimeType",
				     a->media_type);
	free(uri);
	json_t *text = is_text_type(a->media_type) && memchr(a->data, 0, a->size) == NULL
			       ? json_stringn((const char *)a->data, a->size)
			       : NULL;
	json_object_set_new(resource, text ? "text" : "blob", text ? text : artifact_marker(i));
	return json_pack("{s:s, s:o, s:{s:o}}", "type", "resource", "resource", resource, "_meta",
			 PATH_KEY, path_string(a->path));
}

/* The run's record (snapcell_result_to_json, without the files' bytes) as a tree; an empty
 * object when out of memory. */
static json_t *run_record(const struct snapcell_result *res)
{
	char *text = NULL;
	json_t *record = snapcell_result_to_json(res, 0, &text, NULL) == 0
				 ? json_loads(text, JSON_ALLOW_NUL, NULL)
				 : NULL;
	free(text);
	return record ? record : json_object();
}

/* Most files the names item lists one by one. */
#define NAMES_MAX 64

/* One text naming the files, before their items: a client that shows a file's text or image
 * without its URI (Agent Framework shows a text resource as bare text) still tells the model
 * which file is which. */
static void add_file_names(json_t *content, const struct snapcell_result *res)
{
	if (!res->n_artifacts)
		return;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return;
	fputs("files in /output:", f);
	for (size_t i = 0; i < res->n_artifacts && i < NAMES_MAX; i++) {
		json_t *name = path_string(res->artifacts[i].path);
		fprintf(f, "%s %s (%zu bytes, %s)", i ? "," : "", json_string_value(name),
			res->artifacts[i].size, res->artifacts[i].media_type);
		json_decref(name);
	}
	if (res->n_artifacts > NAMES_MAX)
		fprintf(f, " and %zu more", res->n_artifacts - NAMES_MAX);
	if (fclose(f) == 0)
		add_text(content, text);
	free(text);
}

json_t *mcp_call_result(const struct snapcell_result *res, bool structured)
{
	json_t *record = run_record(res);
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
	add_file_names(content, res);
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

size_t mcp_message_size(const json_t *msg)
{
	struct text t = {NULL, 0};
	return json_dump_callback(msg, put, &t, JSON_COMPACT) < 0 ? 0 : t.len;
}

size_t mcp_result_held(const struct snapcell_result *res)
{
	size_t held = 4096 + res->stdout_len + res->stderr_len;
	for (size_t i = 0; i < res->n_artifacts; i++)
		held += res->artifacts[i].size;
	return held;
}

/* What an item of a result is: stdout, stderr, file i, or none a link can replace. */
enum item_kind { ITEM_NONE, ITEM_STDOUT, ITEM_STDERR, ITEM_FILE };

/* Whether s is prefix followed by the string text (stdout or stderr as the record has them:
 * bytes that are not UTF-8 replaced). */
static bool string_is(const json_t *s, const char *prefix, const json_t *text)
{
	size_t pre = strlen(prefix), n = json_string_length(text);
	return n && json_is_string(s) && json_string_length(s) == pre + n &&
	       !memcmp(json_string_value(s), prefix, pre) &&
	       !memcmp(json_string_value(s) + pre, json_string_value(text), n);
}

/* Which of res's items a content item of its CallToolResult is (mcp_call_result's shapes);
 * record is the run's (run_record), whose stdout and stderr the text items carry. */
static enum item_kind item_of(const json_t *item, const struct snapcell_result *res,
			      const json_t *record, size_t *file)
{
	const char *type = json_string_value(json_object_get(item, "type"));
	json_t *resource = json_object_get(item, "resource");
	const char *path =
		json_string_value(json_object_get(json_object_get(item, "_meta"), PATH_KEY));
	if (!type)
		return ITEM_NONE;
	if (!strcmp(type, "text")) {
		json_t *text = json_object_get(item, "text");
		if (string_is(text, "", json_object_get(record, "stdout")))
			return ITEM_STDOUT;
		if (string_is(text, "stderr:\n", json_object_get(record, "stderr")))
			return ITEM_STDERR;
		return ITEM_NONE;
	}
	if (!path || (strcmp(type, "image") && (strcmp(type, "resource") || !resource)))
		return ITEM_NONE;
	for (size_t i = 0; i < res->n_artifacts; i++) {
		json_t *name = path_string(res->artifacts[i].path);
		bool same = !strcmp(json_string_value(name), path);
		json_decref(name);
		if (same) {
			*file = i;
			return ITEM_FILE;
		}
	}
	return ITEM_NONE;
}

/* A resource_link to an item: its name (the file's path, or "stdout"), type and size, and
 * where resources/read finds it. */
static json_t *link_item(const struct snapcell_result *res, enum item_kind kind, size_t file,
			 const char *base)
{
	const struct snapcell_artifact *a = kind == ITEM_FILE ? &res->artifacts[file] : NULL;
	json_t *path = a ? path_string(a->path) : NULL;
	const char *name = a ? json_string_value(path) : kind == ITEM_STDOUT ? "stdout" : "stderr";
	size_t size = a ? a->size : kind == ITEM_STDOUT ? res->stdout_len : res->stderr_len;
	char *uri = NULL, *prefix = NULL;
	if (asprintf(&prefix, "%s%s", base, a ? "output/" : "") < 0) {
		json_decref(path);
		return NULL;
	}
	uri = encoded_uri(prefix, a ? a->path : name);
	free(prefix);
	char description[200];
	snprintf(description, sizeof(description),
		 "%s%s (%zu bytes), too large to send with the result: read it with resources/read",
		 a ? "/output/" : "the run's ", name, size);
	json_t *link =
		json_pack("{s:s, s:s, s:s, s:s, s:s, s:I}", "type", "resource_link", "uri",
			  uri ? uri : base, "name", name, "description", description, "mimeType",
			  a ? a->media_type : "text/plain", "size", (json_int_t)size);
	if (a)
		json_object_set_new(link, "_meta", json_pack("{s:O}", PATH_KEY, path));
	json_decref(path);
	free(uri);
	return link;
}

struct candidate {
	size_t index, size, file;
	enum item_kind kind;
};

static int larger_first(const void *a, const void *b)
{
	size_t x = ((const struct candidate *)a)->size, y = ((const struct candidate *)b)->size;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* structuredContent repeats stdout and stderr: a linked one leaves it, its URI in its place
 * ("stdout_uri"). */
static void unstructure(json_t *result, const char *key, const json_t *link)
{
	json_t *record = json_object_get(result, "structuredContent");
	if (!json_is_object(record) || !json_object_get(record, key))
		return;
	json_t *copy = json_copy(record);
	char uri_key[16];
	snprintf(uri_key, sizeof(uri_key), "%s_uri", key);
	json_object_del(copy, key);
	json_object_set(copy, uri_key, json_object_get(link, "uri"));
	json_object_set_new(result, "structuredContent", copy);
}

bool mcp_result_link(json_t *result, const struct snapcell_result *res, const char *base,
		     size_t max)
{
	json_t *content = json_object_get(result, "content");
	size_t n = json_array_size(content), n_cand = 0, total = mcp_message_size(result);
	struct candidate *cand = n ? calloc(n, sizeof(*cand)) : NULL;
	if (total <= max || !cand) {
		free(cand);
		return total <= max;
	}
	json_t *record = run_record(res);
	for (size_t i = 0; i < n; i++) {
		struct candidate *c = &cand[n_cand];
		c->kind = item_of(json_array_get(content, i), res, record, &c->file);
		if (c->kind == ITEM_NONE)
			continue;
		c->index = i;
		c->size = mcp_message_size(json_array_get(content, i));
		n_cand++;
	}
	qsort(cand, n_cand, sizeof(*cand), larger_first);
	for (size_t k = 0; k < n_cand && total > max; k++) {
		json_t *link = link_item(res, cand[k].kind, cand[k].file, base);
		if (!link)
			break;
		if (cand[k].kind != ITEM_FILE)
			unstructure(result, cand[k].kind == ITEM_STDOUT ? "stdout" : "stderr",
				    link);
		json_array_set_new(content, cand[k].index, link);
		total = mcp_message_size(result);
	}
	json_decref(record);
	free(cand);
	return total <= max;
}

/* The file an item's name (percent-encoded, as link_item wrote it) names, or NULL. */
static const struct snapcell_artifact *named_file(const struct snapcell_result *res,
						  const char *name)
{
	for (size_t i = 0; i < res->n_artifacts; i++) {
		char *enc = encoded_uri("", res->artifacts[i].path);
		bool same = enc && !strcmp(enc, name);
		free(enc);
		if (same)
			return &res->artifacts[i];
	}
	return NULL;
}

json_t *mcp_result_item(const struct snapcell_result *res, const char *item, const char *uri,
			size_t *cost)
{
	if (!strcmp(item, "stdout") || !strcmp(item, "stderr")) {
		/* As the answer had it: the record's text, bytes that are not UTF-8 replaced. */
		json_t *record = run_record(res);
		json_t *text = json_object_get(record, item);
		json_t *entry = json_string_length(text)
					? json_pack("{s:s, s:s, s:O}", "uri", uri, "mimeType",
						    "text/plain", "text", text)
					: NULL;
		size_t n = json_string_length(text);
		/* The record's copy, the message's tree and its escaped text. */
		*cost = 65536 + n + 2 * escaped_len(json_string_value(text), n);
		json_decref(record);
		return entry;
	}
	const struct snapcell_artifact *a =
		!strncmp(item, "output/", 7) ? named_file(res, item + 7) : NULL;
	if (!a)
		return NULL;
	json_t *entry = json_pack("{s:s, s:s}", "uri", uri, "mimeType", a->media_type);
	bool as_text = is_text_type(a->media_type) && memchr(a->data, 0, a->size) == NULL;
	*cost = 65536 +
		(as_text ? 2 * escaped_len((const char *)a->data, a->size) : base64_len(a->size));
	json_object_set_new(entry, as_text ? "text" : "blob",
			    as_text ? json_stringn((const char *)a->data, a->size)
				    : artifact_marker((size_t)(a - res->artifacts)));
	return entry;
}
