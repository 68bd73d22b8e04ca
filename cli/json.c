/* Result serialisation shared by `run --json` and the tests' expectations. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static size_t utf8_seq_len(const unsigned char *s, size_t left)
{
	unsigned char c = s[0];
	size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
	if (n == 0 || n > left || (n == 2 && c < 0xc2))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if (n == 3) {
		unsigned cp = (c & 0x0fu) << 12 | (s[1] & 0x3fu) << 6 | (s[2] & 0x3fu);
		if (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
	} else if (n == 4) {
		unsigned cp = (c & 0x07u) << 18 | (s[1] & 0x3fu) << 12;
		if (cp < 0x10000 || cp > 0x10ffff)
			return 0;
	}
	return n;
}

/* NUL bytes stay (jansson escapes them); invalid sequences become U+FFFD. */
static json_t *lossy_string(const char *buf, size_t len)
{
	char *clean = malloc(len * 3 + 1);
	if (!clean)
		return json_null();
	size_t o = 0;
	for (size_t i = 0; i < len;) {
		size_t n = utf8_seq_len((const unsigned char *)buf + i, len - i);
		if (n == 0) {
			memcpy(clean + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		} else {
			memcpy(clean + o, buf + i, n);
			o += n;
			i += n;
		}
	}
	json_t *s = json_stringn(clean, o);
	free(clean);
	return s ? s : json_null();
}

static json_t *base64(const uint8_t *data, uint64_t len)
{
	static const char digits[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *out = malloc((len + 2) / 3 * 4 + 1);
	if (!out)
		return json_null();
	size_t o = 0;
	for (uint64_t i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)data[i] << 16;
		if (i + 1 < len)
			v |= (uint32_t)data[i + 1] << 8;
		if (i + 2 < len)
			v |= data[i + 2];
		out[o++] = digits[v >> 18 & 63];
		out[o++] = digits[v >> 12 & 63];
		out[o++] = i + 1 < len ? digits[v >> 6 & 63] : '=';
		out[o++] = i + 2 < len ? digits[v & 63] : '=';
	}
	json_t *s = json_stringn(out, o);
	free(out);
	return s;
}

/* The artifacts (with their bytes in base64 when with_base64), skipped entries and tool calls
 * of a result. */
static json_t *files_json(const struct snapcell_result *res, bool with_base64)
{
	json_t *artifacts = json_array(), *skipped = json_array(), *calls = json_array();
	for (size_t i = 0; i < res->n_artifacts; i++) {
		const struct snapcell_artifact *a = &res->artifacts[i];
		char *path = NULL;
		json_t *p = asprintf(&path, "/output/%s", a->path) < 0
				    ? json_null()
				    : lossy_string(path, strlen(path));
		free(path);
		json_t *o = json_pack("{s:o, s:s, s:I}", "path", p, "media_type", a->media_type,
				      "size", (json_int_t)a->size);
		if (with_base64)
			json_object_set_new(o, "base64", base64(a->data, a->size));
		json_array_append_new(artifacts, o);
	}
	for (size_t i = 0; i < res->n_skipped_listed; i++)
		json_array_append_new(skipped, json_pack("{s:o, s:s}", "path",
							 lossy_string(res->skipped[i].path,
								      strlen(res->skipped[i].path)),
							 "reason", res->skipped[i].reason));
	for (size_t i = 0; i < res->n_tool_calls; i++) {
		const struct snapcell_tool_call *c = &res->tool_calls[i];
		json_array_append_new(calls, json_pack("{s:s, s:I, s:I, s:b}", "name", c->name,
						       "args_bytes", (json_int_t)c->args_bytes,
						       "duration_us", (json_int_t)c->duration_us,
						       "ok", c->ok));
	}
	return json_pack("{s:o, s:o, s:I, s:b, s:o}", "artifacts", artifacts, "skipped", skipped,
			 "skipped_count", (json_int_t)res->n_skipped, "output_caps_hit",
			 res->output_limits_hit != 0, "tool_calls", calls);
}

static json_t *opt_string(const char *s)
{
	return s ? lossy_string(s, strlen(s)) : json_null();
}

/* The run's network attempts, as the egress gate recorded them. */
static json_t *network_json(const struct snapcell_result *res)
{
	static const char *const kinds[] = {"resolve", "connect", "request"};
	static const struct {
		unsigned flag;
		const char *name;
	} hits[] = {{SNAPCELL_NET_HIT_CONNECTIONS, "connections"},
		    {SNAPCELL_NET_HIT_BYTES, "bytes"},
		    {SNAPCELL_NET_HIT_NAMES, "names"},
		    {SNAPCELL_NET_HIT_EVENTS, "events"}};
	json_t *events = json_array(), *limits = json_array();
	for (size_t i = 0; i < res->n_net_events; i++) {
		const struct snapcell_net_event *e = &res->net_events[i];
		json_t *o = json_pack(
			"{s:s, s:b, s:o, s:o, s:i, s:o, s:o, s:i, s:b, s:o, s:I, s:I, s:I, s:I, "
			"s:b, "
			"s:I}",
			"kind", (unsigned)e->kind < 3 ? kinds[e->kind] : "?", "allowed", e->allowed,
			"target", opt_string(e->target), "address", opt_string(e->address), "port",
			e->port, "method", opt_string(e->method), "path", opt_string(e->path),
			"http_status", e->http_status, "header_added", e->header_added, "rule",
			opt_string(e->rule), "bytes_out", (json_int_t)e->bytes_out, "bytes_in",
			(json_int_t)e->bytes_in, "started_us", (json_int_t)e->started_us,
			"duration_us", (json_int_t)e->duration_us, "upstream_tls", e->upstream_tls,
			"count", (json_int_t)e->count);
		json_array_append_new(events, o);
	}
	for (size_t i = 0; i < sizeof(hits) / sizeof(hits[0]); i++)
		if (res->net_limits_hit & hits[i].flag)
			json_array_append_new(limits, json_string(hits[i].name));
	return json_pack("{s:o, s:I, s:o}", "network_events", events, "network_events_dropped",
			 (json_int_t)res->n_net_events_dropped, "network_limits_hit", limits);
}

/* Each decision on a call that needed one: the audit of who decided what, when. */
static json_t *decisions_json(const struct snapcell_result *res)
{
	json_t *list = json_array();
	for (size_t i = 0; i < res->n_decisions; i++) {
		const struct snapcell_decision *d = &res->decisions[i];
		json_t *args = json_loads(d->arguments, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
		json_t *o = json_pack(
			"{s:I, s:s, s:o, s:s, s:o, s:I, s:I}", "id", (json_int_t)d->pending_id,
			"name", d->name, "arguments", args ? args : json_null(), "verdict",
			snapcell_verdict_name(d->verdict), "decided_by", opt_string(d->decided_by),
			"decided_at_ms", (json_int_t)d->decided_at_ms, "waited_us",
			(json_int_t)d->waited_us);
		if (d->verdict == SNAPCELL_VERDICT_REJECTED)
			json_object_set_new(o, "reason", opt_string(d->text));
		if (d->verdict == SNAPCELL_VERDICT_VALUE)
			json_object_set_new(o, "value", json_loads(d->text, JSON_DECODE_ANY, NULL));
		json_object_set_new(o, "call_index",
				    d->call_index == SIZE_MAX
					    ? json_null()
					    : json_integer((json_int_t)d->call_index));
		json_array_append_new(list, o);
	}
	return list;
}

json_t *cli_result_json(const struct snapcell_result *res)
{
	return cli_result_record(res, true);
}

/* "value": the last expression's value (the library checked its JSON), else null, and
 * "value_absent": why it is null ("no_expression", "none", "not_json", "too_large",
 * "not_evaluated"), null when there is a value. */
static void value_json(json_t *j, const struct snapcell_result *res)
{
	const char *text = snapcell_result_value_json(res);
	/* Integers past int64 are JSON too: jansson reads those as reals. */
	json_t *v = text ? json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL) : NULL;
	if (text && !v)
		v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL,
			       NULL);
	json_object_set_new(j, "value", v ? v : json_null());
	json_object_set_new(j, "value_absent",
			    text ? json_null()
				 : json_string(snapcell_value_state_name(res->value_state)));
}

json_t *cli_result_record(const struct snapcell_result *res, bool with_base64)
{
	static const struct {
		unsigned flag;
		const char *name;
	} hits[] = {
		{SNAPCELL_HIT_WALL, "wall"},	       {SNAPCELL_HIT_CPU, "cpu"},
		{SNAPCELL_HIT_MEMORY, "memory"},       {SNAPCELL_HIT_PROCESSES, "processes"},
		{SNAPCELL_HIT_FILE_SIZE, "file_size"}, {SNAPCELL_HIT_TMP, "tmp"},
		{SNAPCELL_HIT_STDOUT, "stdout"},       {SNAPCELL_HIT_STDERR, "stderr"},
	};
	json_t *limits = json_array();
	for (size_t i = 0; i < sizeof(hits) / sizeof(hits[0]); i++)
		if (res->limits_hit & hits[i].flag)
			json_array_append_new(limits, json_string(hits[i].name));
	json_t *j = json_pack("{s:s, s:i, s:i, s:o, s:o, s:b, s:o, s:b, s:I, s:I, s:I, s:s}",
			      "status", snapcell_status_name(res->status), "exit_code",
			      res->exit_code, "signal", res->term_signal, "limits_hit", limits,
			      "stdout", lossy_string(res->stdout_buf, res->stdout_len),
			      "stdout_truncated", res->stdout_truncated, "stderr",
			      lossy_string(res->stderr_buf, res->stderr_len), "stderr_truncated",
			      res->stderr_truncated, "wall_us", (json_int_t)res->wall_us, "cpu_us",
			      (json_int_t)res->cpu_us, "peak_memory_bytes",
			      (json_int_t)res->peak_memory_bytes, "isolation",
			      snapcell_isolation_name(res->isolation));
	/* Resident peak of one process, not what the host was charged (peak_memory_bytes). */
	json_object_set_new(j, "peak_rss_bytes", json_integer((json_int_t)res->peak_rss_bytes));
	json_object_set_new(j, "decisions", decisions_json(res));
	value_json(j, res);
	json_t *files = files_json(res, with_base64), *net = network_json(res);
	json_object_update(j, files);
	json_object_update(j, net);
	json_decref(files);
	json_decref(net);
	return j;
}
