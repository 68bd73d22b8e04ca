/* The tool registry of a config, and serving one tool call from a cell: look the tool up,
 * check the arguments against its schema, call it on the caller's thread, frame the answer.
 * Everything here reads guest bytes, so every size and depth is capped before parsing. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "rpc/frame.h"
#include "util/buf.h"
#include "util/util.h"

#define MAX_ARG_DEPTH 64
/* Values (containers, keys, scalars) one call's arguments may hold. jansson spends ~150 bytes
 * of host memory per empty object: a 16 MiB frame of {} objects took the host from 48 MB to
 * 1.3 GB before any schema check. 2^18 values bound that to tens of MiB, and the schema check
 * (2^21 visits) could not have looked at many more anyway. */
#define MAX_ARG_NODES (1u << 18)

/* MCP-style names: 1 to SNAPCELL_TOOL_NAME_MAX bytes of [A-Za-z0-9_.-], so a downstream MCP
 * server's tool can keep its own name under a "server." prefix. */
static bool valid_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > SNAPCELL_TOOL_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i]))
			return false;
	return true;
}

static bool is_keyword(const char *s, size_t n)
{
	static const char *const keywords[] = {
		"False",  "None",   "True",    "and",	   "as",       "assert", "async",
		"await",  "break",  "class",   "continue", "def",      "del",	 "elif",
		"else",	  "except", "finally", "for",	   "from",     "global", "if",
		"import", "in",	    "is",      "lambda",   "nonlocal", "not",	 "or",
		"pass",	  "raise",  "return",  "try",	   "while",    "with",	 "yield",
	};
	for (size_t i = 0; i < SC_ARRAY_LEN(keywords); i++)
		if (strlen(keywords[i]) == n && !memcmp(keywords[i], s, n))
			return true;
	return false;
}

/* The name's attribute path under the guest's `tools` module: "docs.search-v2" is
 * tools.docs.search_v2. Each dot-separated segment becomes a Python identifier: any character
 * but [A-Za-z0-9_] turns into '_', a leading digit or an empty segment gets a '_' before it,
 * and a keyword a '_' after it. NULL when out of memory. */
static char *attr_path(const char *name)
{
	size_t n = strlen(name);
	char *out = malloc(2 * n + 2), *o = out; /* at most two extra bytes per segment */
	if (!out)
		return NULL;
	for (const char *seg = name;; seg++) {
		size_t len = strcspn(seg, ".");
		char *start = o;
		if (!len || isdigit((unsigned char)seg[0]))
			*o++ = '_';
		for (size_t i = 0; i < len; i++)
			*o++ = isalnum((unsigned char)seg[i]) ? seg[i] : '_';
		if (is_keyword(start, (size_t)(o - start)))
			*o++ = '_';
		seg += len;
		if (!*seg)
			break;
		*o++ = '.';
	}
	*o = 0;
	return out;
}

/* Whether the attribute paths a and b would need the same attribute: equal, or one a
 * namespace the other is a function inside ("a.b" and "a.b.c"). */
static bool attrs_clash(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), n = la < lb ? la : lb;
	return !memcmp(a, b, n) && (la == lb || (la < lb ? b[la] : a[lb]) == '.');
}

static void tool_clear(struct sc_tool *t)
{
	free(t->name);
	free(t->attr);
	free(t->description);
	free(t->schema_text);
	sc__schema_free(t->schema);
}

void sc__tools_free(struct snapcell_config *cfg)
{
	for (size_t i = 0; i < cfg->n_tools; i++)
		tool_clear(&cfg->tools[i]);
	free(cfg->tools);
	cfg->tools = NULL;
	cfg->n_tools = 0;
}

const struct sc_tool *sc__tool_find(const struct snapcell_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->n_tools; i++)
		if (!strcmp(cfg->tools[i].name, name))
			return &cfg->tools[i];
	return NULL;
}

/* Parses, checks and compiles a tool's schema text (NULL: any object): *root is the parsed
 * JSON, *out the compiled form. 0 or a code with err filled ("add_tool NAME: schema: ..."). */
static int load_schema(const char *name, const char *text, json_t **root, struct sc_schema **out,
		       struct snapcell_error *err)
{
	json_error_t jerr;
	*root = text ? json_loads(text, JSON_REJECT_DUPLICATES, &jerr)
		     : json_pack("{s:s}", "type", "object");
	if (!*root)
		return text ? sc__err(err, SNAPCELL_E_INVAL,
				      "add_tool %s: schema: not JSON: %s (line %d, column %d)",
				      name, jerr.text, jerr.line, jerr.column)
			    : sc__err(err, -ENOMEM, "add_tool %s: schema", name);
	char why[192];
	int rc = sc__schema_compile(*root, out, why, sizeof(why));
	if (rc < 0) {
		json_decref(*root);
		*root = NULL;
		return rc == -ENOMEM ? sc__err(err, rc, "add_tool %s: schema", name)
				     : sc__err(err, SNAPCELL_E_INVAL, "add_tool %s: schema: %s",
					       name, why);
	}
	return 0;
}

int snapcell_config_add_tool(struct snapcell_config *cfg, const char *name, const char *description,
			     const char *params_schema, enum snapcell_approval approval,
			     snapcell_tool_fn fn, void *user_data, struct snapcell_error *err)
{
	if (!cfg || !name || !fn)
		return sc__err(err, SNAPCELL_E_INVAL, "add_tool: NULL argument");
	if (!valid_name(name))
		return sc__err(err, SNAPCELL_E_INVAL,
			       "add_tool %.*s: the name must be 1 to %d characters of "
			       "[A-Za-z0-9_.-]",
			       SNAPCELL_TOOL_NAME_MAX + 1, name, SNAPCELL_TOOL_NAME_MAX);
	if (approval != SNAPCELL_APPROVAL_NEVER && approval != SNAPCELL_APPROVAL_ALWAYS)
		return sc__err(err, SNAPCELL_E_INVAL, "add_tool %s: unknown approval %d", name,
			       (int)approval);
	json_t *root = NULL;
	struct sc_schema *schema = NULL;
	int rc = load_schema(name, params_schema, &root, &schema, err);
	if (rc < 0)
		return rc;
	struct sc_tool t = {.name = strdup(name),
			    .attr = attr_path(name),
			    .description = strdup(description ? description : ""),
			    .schema_text = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS),
			    .schema = schema,
			    .approval = approval,
			    .describe_format = -1,
			    .fn = fn,
			    .user = user_data};
	json_decref(root);
	if (!t.name || !t.attr || !t.description || !t.schema_text) {
		tool_clear(&t);
		return sc__err(err, -ENOMEM, "add_tool %s", name);
	}
	for (size_t i = 0; i < cfg->n_tools; i++) {
		if (strcmp(cfg->tools[i].name, name) && attrs_clash(cfg->tools[i].attr, t.attr)) {
			rc = sc__err(
				err, SNAPCELL_E_INVAL,
				"add_tool %s: the code would call it as tools.%s, which clashes "
				"with tool %s (tools.%s)",
				name, t.attr, cfg->tools[i].name, cfg->tools[i].attr);
			tool_clear(&t);
			return rc;
		}
	}
	for (size_t i = 0; i < cfg->n_tools; i++) {
		if (!strcmp(cfg->tools[i].name, name)) {
			t.needs_decision = cfg->tools[i].needs_decision;
			tool_clear(&cfg->tools[i]);
			cfg->tools[i] = t;
			return 0;
		}
	}
	if (SC_ARRAY_ADD(cfg->tools, cfg->n_tools, SC_ARRAY_NO_CAP) < 0) {
		tool_clear(&t);
		return sc__err(err, -ENOMEM, "add_tool %s", name);
	}
	cfg->tools[cfg->n_tools++] = t;
	return 0;
}

int snapcell_config_remove_tool(struct snapcell_config *cfg, const char *name,
				struct snapcell_error *err)
{
	if (!cfg || !name)
		return sc__err(err, SNAPCELL_E_INVAL, "remove_tool: NULL argument");
	for (size_t i = 0; i < cfg->n_tools; i++) {
		if (!strcmp(cfg->tools[i].name, name)) {
			tool_clear(&cfg->tools[i]);
			memmove(&cfg->tools[i], &cfg->tools[i + 1],
				(cfg->n_tools - i - 1) * sizeof(cfg->tools[0]));
			cfg->n_tools--;
			return 0;
		}
	}
	return sc__err(err, -ENOENT, "remove_tool %s", name);
}

int snapcell_config_set_tool_decision(struct snapcell_config *cfg, const char *name, bool needed,
				      struct snapcell_error *err)
{
	if (!cfg || !name)
		return sc__err(err, SNAPCELL_E_INVAL, "set_tool_decision: NULL argument");
	for (size_t i = 0; i < cfg->n_tools; i++) {
		if (!strcmp(cfg->tools[i].name, name)) {
			cfg->tools[i].needs_decision = needed;
			return 0;
		}
	}
	return sc__err(err, -ENOENT, "set_tool_decision %s: no tool has that name", name);
}

int snapcell_config_set_tool_async(struct snapcell_config *cfg, const char *name,
				   snapcell_tool_start_fn start, snapcell_tool_cancel_fn cancel,
				   struct snapcell_error *err)
{
	if (!cfg || !name)
		return sc__err(err, SNAPCELL_E_INVAL, "set_tool_async: NULL argument");
	for (size_t i = 0; i < cfg->n_tools; i++) {
		if (!strcmp(cfg->tools[i].name, name)) {
			cfg->tools[i].start = start;
			cfg->tools[i].cancel = start ? cancel : NULL;
			return 0;
		}
	}
	return sc__err(err, -ENOENT, "set_tool_async %s: no tool has that name", name);
}

bool snapcell_config_tool_needs_decision(const struct snapcell_config *cfg, const char *name)
{
	const struct sc_tool *t = cfg && name ? sc__tool_find(cfg, name) : NULL;
	return t && t->needs_decision;
}

size_t snapcell_config_tool_count(const struct snapcell_config *cfg)
{
	return cfg ? cfg->n_tools : 0;
}

int snapcell_config_tool_info(const struct snapcell_config *cfg, size_t index,
			      struct snapcell_tool_info *out, struct snapcell_error *err)
{
	if (!cfg || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "tool_info: NULL argument");
	if (index >= cfg->n_tools)
		return sc__err(err, SNAPCELL_E_INVAL, "tool_info: no tool %zu (there are %zu)",
			       index, cfg->n_tools);
	const struct sc_tool *t = &cfg->tools[index];
	*out = (struct snapcell_tool_info){.name = t->name,
					   .description = t->description,
					   .params_schema = t->schema_text,
					   .approval = t->approval};
	return 0;
}

int sc__tools_copy(const struct snapcell_config *src, struct snapcell_config *dst)
{
	for (size_t i = 0; i < src->n_tools; i++) {
		const struct sc_tool *t = &src->tools[i];
		int rc = snapcell_config_add_tool(dst, t->name, t->description, t->schema_text,
						  t->approval, t->fn, t->user, NULL);
		if (rc < 0)
			return rc;
		dst->tools[dst->n_tools - 1].needs_decision = t->needs_decision;
		dst->tools[dst->n_tools - 1].describe_format = t->describe_format;
		dst->tools[dst->n_tools - 1].start = t->start;
		dst->tools[dst->n_tools - 1].cancel = t->cancel;
	}
	return 0;
}

int snapcell_config_set_tool_describe_format(struct snapcell_config *cfg, const char *name,
					     enum snapcell_describe_format format,
					     struct snapcell_error *err)
{
	if (!cfg || !name)
		return sc__err(err, SNAPCELL_E_INVAL, "set_tool_describe_format: NULL argument");
	if (format != SNAPCELL_DESCRIBE_COMPACT && format != SNAPCELL_DESCRIBE_JSON)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "set_tool_describe_format %s: unknown format %d", name, (int)format);
	for (size_t i = 0; i < cfg->n_tools; i++) {
		if (!strcmp(cfg->tools[i].name, name)) {
			cfg->tools[i].describe_format = (int)format;
			return 0;
		}
	}
	return sc__err(err, -ENOENT, "set_tool_describe_format %s", name);
}

/* Every value but the first of a container follows a ',' and every key a ':', so containers +
 * commas + colons + 1 bounds the values from above for any text jansson would accept (its own
 * depth limit is 2048 and recursive; it has no count limit). Strings are skipped so brackets
 * inside them do not count. */
void snapcell_json_measure(const char *text, size_t len, unsigned *depth_out, size_t *values_out)
{
	unsigned depth = 0, deepest = 0;
	size_t values = 1;
	bool in_string = false;
	for (size_t i = 0; i < len; i++) {
		char c = text[i];
		if (in_string) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		} else if (c == '"') {
			in_string = true;
		} else if (c == '[' || c == '{') {
			values++;
			if (++depth > deepest)
				deepest = depth;
		} else if ((c == ']' || c == '}') && depth > 0) {
			depth--;
		} else if (c == ',' || c == ':') {
			values++;
		}
	}
	*depth_out = deepest;
	*values_out = values;
}

/* What a run's tools may tell the cell (names, paths, descriptions): well within a frame. */
#define RUN_TOOLS_MAX_BYTES (4u << 20)

int sc__tools_check_run(const struct snapcell_config *cfg, const struct snapcell_config *run_tools,
			struct snapcell_error *err)
{
	size_t bytes = 0;
	for (size_t i = 0; run_tools && i < run_tools->n_tools; i++) {
		const struct sc_tool *t = &run_tools->tools[i];
		bytes += 2 * strlen(t->name) + 2 * strlen(t->description) + 16;
		if (bytes > RUN_TOOLS_MAX_BYTES)
			return sc__err(err, SNAPCELL_E_TOO_BIG,
				       "run: its tools' names and descriptions are over %u bytes",
				       RUN_TOOLS_MAX_BYTES);
		for (size_t k = 0; k < cfg->n_tools; k++) {
			const struct sc_tool *own = &cfg->tools[k];
			if (!strcmp(own->name, t->name))
				return sc__err(
					err, SNAPCELL_E_INVAL,
					"run: tool %s is already one of the sandbox's tools; "
					"a run's own tools add to them, never replace one",
					t->name);
			if (attrs_clash(own->attr, t->attr))
				return sc__err(
					err, SNAPCELL_E_INVAL,
					"run: tool %s: the code would call it as tools.%s, "
					"which clashes with the sandbox's tool %s (tools.%s)",
					t->name, t->attr, own->name, own->attr);
		}
	}
	return 0;
}

struct snapcell_config *sc__tools_dup(const struct snapcell_config *cfg)
{
	struct snapcell_config *c = calloc(1, sizeof(*c));
	if (c && sc__tools_copy(cfg, c) < 0) {
		sc__tools_free(c);
		free(c);
		c = NULL;
	}
	return c;
}

char *sc__tools_guest_json(const struct snapcell_config *cfg)
{
	json_t *list = json_array();
	for (size_t i = 0; list && i < cfg->n_tools; i++) {
		const struct sc_tool *t = &cfg->tools[i];
		if (json_array_append_new(
			    list, json_pack("[sss]", t->name, t->attr, t->description)) < 0) {
			json_decref(list);
			list = NULL;
		}
	}
	char *text = list ? json_dumps(list, JSON_COMPACT) : NULL;
	json_decref(list);
	return text;
}

static char *known_tools(const struct snapcell_config *cfg, const struct snapcell_config *run_tools)
{
	size_t n_run = run_tools ? run_tools->n_tools : 0;
	if (cfg->n_tools + n_run == 0)
		return strdup("no tools are registered");
	size_t len = 32;
	for (size_t i = 0; i < cfg->n_tools; i++)
		len += strlen(cfg->tools[i].name) + 2;
	for (size_t i = 0; i < n_run; i++)
		len += strlen(run_tools->tools[i].name) + 2;
	char *s = malloc(len);
	if (!s)
		return NULL;
	strcpy(s, "registered tools: ");
	for (size_t i = 0; i < cfg->n_tools + n_run; i++) {
		strcat(s, i < cfg->n_tools ? cfg->tools[i].name
					   : run_tools->tools[i - cfg->n_tools].name);
		if (i + 1 < cfg->n_tools + n_run)
			strcat(s, ", ");
	}
	return s;
}

char *sc__message(const char *fmt, ...)
{
	char *s = NULL;
	va_list ap;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

/* Why the arguments are not acceptable, or NULL when they are and *exact holds the text the
 * callback gets: the arguments with each non-integer number spelt as exactly the double that
 * was checked (the cell's "0.99999999999999999" was checked as 1.0, so the tool gets 1.0). */
static char *check_args(const struct sc_tool *t, const char *args, size_t len, char **exact)
{
	/* The callback gets a C string: a raw NUL would cut what it sees short of what was
	 * checked (JSON itself can only carry one escaped). */
	if (memchr(args, 0, len))
		return sc__message("invalid arguments for tool '%s': a NUL byte in the JSON text",
				   t->name);
	unsigned depth;
	size_t values;
	snapcell_json_measure(args, len, &depth, &values);
	if (depth > MAX_ARG_DEPTH)
		return sc__message("invalid arguments for tool '%s': nested deeper than %d levels",
				   t->name, MAX_ARG_DEPTH);
	if (values > MAX_ARG_NODES)
		return sc__message("invalid arguments for tool '%s': more than %u values", t->name,
				   MAX_ARG_NODES);
	json_error_t jerr;
	json_t *v = json_loadb(args, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
	if (!v)
		return sc__message("invalid arguments for tool '%s': %s", t->name,
				   strstr(jerr.text, "too big integer")
					   ? "integers must fit in 64 bits"
					   : jerr.text);
	char why[256];
	char *err = NULL;
	if (!json_is_object(v))
		err = sc__message("invalid arguments for tool '%s': not a JSON object", t->name);
	else if (sc__schema_check(t->schema, v, why, sizeof(why)) < 0)
		err = sc__message("invalid arguments for tool '%s': %s", t->name, why);
	else if (!(*exact = sc__json_exact_numbers(args, len)))
		err = sc__message("tool '%s': out of memory", t->name);
	json_decref(v);
	return err;
}

/* The deadline and cancellation token (its eventfd) of the run whose tool callback this
 * thread is in; 0 and -1 outside one. */
static _Thread_local uint64_t callback_deadline_us;
static _Thread_local int callback_cancel_fd = -1;

uint64_t snapcell_tool_deadline_us(void)
{
	return callback_deadline_us;
}

int snapcell_tool_cancel_fd(void)
{
	return callback_cancel_fd;
}

/* A name from the cell as printable ASCII: bytes outside '!'..'~' and the backslash as \xNN,
 * cut with "..." to fit out (at least 8 bytes). The call log and messages carry this, so a
 * NUL cannot hide the rest of a name ("echo\x00forged", not "echo") and a name that is not
 * UTF-8 still fits in JSON. */
static void escape_name(const char *name, size_t len, char *out, size_t size)
{
	size_t o = 0;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		bool plain = c > ' ' && c <= '~' && c != '\\';
		size_t need = plain ? 1 : 4;
		if (o + need + (i + 1 < len ? 3 : 0) >= size) {
			snprintf(out + o, size - o, "...");
			return;
		}
		if (plain)
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
	}
	out[o] = 0;
}

/* Runs t's callback with the checked arguments and frames its answer into out. */
static void invoke(const struct sc_tool *t, const char *exact, size_t result_cap,
		   uint64_t deadline_us, int cancel_fd, struct sc_call_outcome *out)
{
	char *text = NULL;
	uint64_t outer = callback_deadline_us; /* a callback may run code itself */
	int outer_fd = callback_cancel_fd;
	callback_deadline_us = deadline_us;
	callback_cancel_fd = cancel_fd;
	int rc = t->fn(t->user, exact, &text);
	callback_deadline_us = outer;
	callback_cancel_fd = outer_fd;
	out->log.ok = rc == 0 && text;
	if (!text)
		text = sc__message("tool '%s' returned no %s", t->name,
				   rc == 0 ? "result" : "message");
	else if (strlen(text) > result_cap) { /* a message too: any answer is one frame */
		size_t n = strlen(text);
		free(text);
		out->log.ok = false;
		text = sc__message("tool '%s' %s %zu bytes; the limit is %zu", t->name,
				   rc == 0 ? "returned" : "failed with a message of", n,
				   result_cap);
	}
	out->text = text;
}

int sc__tool_serve(const struct snapcell_config *cfg, const struct snapcell_config *run_tools,
		   uint8_t *payload, size_t len, size_t result_cap, uint64_t deadline_us,
		   int cancel_fd, bool awaited, struct sc_call_outcome *out)
{
	/* name, NUL, arguments: the arguments may hold no raw NUL (they are refused), so the
	 * last NUL ends the name and "echo\0forged" is one (unknown) name, not echo. */
	const char *nul = memrchr(payload, 0, len);
	if (!nul)
		return -EPROTO;
	const char *name = (const char *)payload;
	size_t name_len = (size_t)(nul - name);
	const char *args = nul + 1;
	size_t args_len = len - (size_t)(args - name);
	memset(out, 0, sizeof(*out));
	escape_name(name, name_len, out->log.name, sizeof(out->log.name));
	out->log.args_bytes = args_len;
	uint64_t start = sc__now_us();
	const struct sc_tool *t = name_len <= SNAPCELL_TOOL_NAME_MAX && !memchr(name, 0, name_len)
					  ? sc__tool_find(cfg, name)
					  : NULL;
	if (!t && run_tools && name_len <= SNAPCELL_TOOL_NAME_MAX && !memchr(name, 0, name_len))
		t = sc__tool_find(run_tools, name);
	char *exact = NULL;
	if (name_len > SNAPCELL_TOOL_NAME_MAX) {
		out->text = sc__message("unknown tool '%s': a name of %zu bytes; the limit is %d",
					out->log.name, name_len, SNAPCELL_TOOL_NAME_MAX);
	} else if (!t) {
		char *known = known_tools(cfg, run_tools);
		out->text = sc__message("unknown tool '%s'; %s", out->log.name, known ? known : "");
		free(known);
	} else if (!(out->text = check_args(t, args, args_len, &exact))) {
		if (t->needs_decision) {
			/* Held for a decision: the caller pauses, or answers with
			 * sc__tool_decided. */
			out->held = t;
			out->held_args = exact;
			return 0;
		}
		if (awaited && t->start) {
			/* Started by the caller (calls.c), answered later from any thread. */
			out->held = t;
			out->held_args = exact;
			out->start = true;
			return 0;
		}
		invoke(t, exact, result_cap, deadline_us, cancel_fd, out);
		free(exact);
	}
	out->log.duration_us = sc__now_us() - start;
	out->ok = out->log.ok;
	return out->text ? 0 : -ENOMEM;
}

int sc__tool_decided(const struct sc_tool *t, const char *args, enum snapcell_verdict verdict,
		     const char *text, size_t result_cap, uint64_t deadline_us, int cancel_fd,
		     struct sc_call_outcome *out)
{
	uint64_t start = sc__now_us();
	out->text = NULL;
	out->log.ok = false;
	if (verdict == SNAPCELL_VERDICT_APPROVED) {
		invoke(t, args, result_cap, deadline_us, cancel_fd, out);
	} else if (verdict == SNAPCELL_VERDICT_VALUE) {
		out->log.ok = true;
		out->text = strdup(text);
	} else if (verdict == SNAPCELL_VERDICT_REJECTED) {
		out->text = sc__message("the call to tool '%s' was rejected%s%s", t->name,
					text ? ": " : "", text ? text : "");
	} else {
		out->text = sc__message("the call to tool '%s' got no decision in time", t->name);
	}
	out->log.duration_us = sc__now_us() - start;
	out->ok = out->log.ok;
	return out->text ? 0 : -ENOMEM;
}
