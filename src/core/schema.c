/* Registering a tool's parameter schema: refuse anything outside the supported subset of JSON
 * Schema (with the path and the reason), resolve every local $ref and compile every pattern
 * once. Checking values against the result is schema_check.c. Unknown keywords are refused
 * rather than ignored, so a schema never silently checks less than it says; what is accepted
 * but not checked (annotations, format) is listed in snapcell.h. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "schema.h"
#include "util/buf.h"

#define MAX_SCHEMA_DEPTH   64
#define MAX_REF_BYTES	   1024
#define MAX_PATTERN_BYTES  4096
#define MAX_PATTERN_PARENS 64

static const struct keyword {
	const char *name;
	enum sc_kw_kind kind;
} keywords[] = {
	{"type", KW_TYPE},
	{"enum", KW_ARRAY},
	{"const", KW_ANY},
	{"properties", KW_SCHEMA_MAP},
	{"patternProperties", KW_PATTERN_MAP},
	{"additionalProperties", KW_SCHEMA},
	{"propertyNames", KW_SCHEMA},
	{"required", KW_STRING_ARRAY},
	{"minProperties", KW_COUNT},
	{"maxProperties", KW_COUNT},
	{"items", KW_ITEMS},
	{"prefixItems", KW_SCHEMA_ARRAY},
	{"additionalItems", KW_SCHEMA},
	{"contains", KW_SCHEMA},
	{"minItems", KW_COUNT},
	{"maxItems", KW_COUNT},
	{"uniqueItems", KW_BOOL},
	{"minLength", KW_COUNT},
	{"maxLength", KW_COUNT},
	{"pattern", KW_PATTERN},
	{"minimum", KW_NUMBER},
	{"maximum", KW_NUMBER},
	{"exclusiveMinimum", KW_NUMBER_OR_BOOL},
	{"exclusiveMaximum", KW_NUMBER_OR_BOOL},
	{"multipleOf", KW_POSITIVE},
	{"anyOf", KW_SCHEMA_ARRAY},
	{"oneOf", KW_SCHEMA_ARRAY},
	{"allOf", KW_SCHEMA_ARRAY},
	{"not", KW_SCHEMA},
	{"$ref", KW_REF},
	{"$defs", KW_SCHEMA_MAP},
	{"definitions", KW_SCHEMA_MAP},
	/* Annotations: accepted, never checked. */
	{"title", KW_STRING},
	{"description", KW_STRING},
	{"format", KW_STRING},
	{"$comment", KW_STRING},
	{"$schema", KW_STRING},
	{"$id", KW_ID},
	{"default", KW_ANY},
	{"examples", KW_ANY},
	{"discriminator", KW_ANY},
	{"deprecated", KW_BOOL},
	{"readOnly", KW_BOOL},
	{"writeOnly", KW_BOOL},
	{"contentEncoding", KW_STRING},
	{"contentMediaType", KW_STRING},
};

static const char *const type_names[] = {"object",  "array",   "string", "number",
					 "integer", "boolean", "null"};

int sc__schema_keyword(const char *name)
{
	for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++)
		if (!strcmp(name, keywords[i].name))
			return (int)keywords[i].kind;
	return -1;
}

struct build {
	struct sc_schema *s;
	size_t cap;
	pcre2_compile_context *cctx;
	char *why;
	size_t why_len;
};

static int refuse(struct build *b, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int refuse(struct build *b, const char *path, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sc__schema_reason(b->why, b->why_len, path, msg);
	return -EINVAL;
}

static int add_node(struct build *b, const void *key, enum sc_schema_node_kind kind,
		    const json_t *target, pcre2_code *code)
{
	struct sc_schema *s = b->s;
	if (SC_ARRAY_RESERVE(s->nodes, b->cap, s->n_nodes + 1, SC_ARRAY_NO_CAP) < 0) {
		pcre2_code_free(code);
		return -ENOMEM;
	}
	s->nodes[s->n_nodes++] = (struct sc_schema_node){key, kind, target, code};
	return 0;
}

/* Compiled the way JSON Schema means patterns (ECMA-262): unanchored, UTF-8, `$` only at the
 * very end, \uXXXX and \u{X...} escapes. Every item is a callout, which is how the checker
 * counts steps across all the matches of one call (see schema_check.c). No automatic
 * possessification: a repeat made possessive consumes its whole run between two callouts, so
 * an unanchored "[a-z]+@" against a long run of letters costs n^2 characters on n steps;
 * given back one at a time, each character is a callout. (A possessive repeat or atomic group
 * the schema writes itself, and a backreference's comparison, still consume unseen.) */
static int compile_pattern(struct build *b, const char *path, const char *pattern, size_t len,
			   const void *key)
{
	int code;
	PCRE2_SIZE offset;
	pcre2_code *re =
		pcre2_compile((PCRE2_SPTR)pattern, len,
			      PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C |
				      PCRE2_ALT_BSUX | PCRE2_AUTO_CALLOUT | PCRE2_NO_AUTO_POSSESS,
			      &code, &offset, b->cctx);
	if (!re) {
		PCRE2_UCHAR msg[120];
		pcre2_get_error_message(code, msg, sizeof(msg));
		if (code == PCRE2_ERROR_NOMEMORY)
			return -ENOMEM;
		return refuse(b, path, "bad pattern '%.40s' at offset %zu: %s", pattern,
			      (size_t)offset, (const char *)msg);
	}
	return add_node(b, key, SC_NODE_PATTERN, NULL, re);
}

static bool valid_type_name(const json_t *t)
{
	const char *s = json_string_value(t);
	for (size_t i = 0; s && i < sizeof(type_names) / sizeof(type_names[0]); i++)
		if (!strcmp(s, type_names[i]))
			return true;
	return false;
}

static int check_type_keyword(struct build *b, const char *path, const json_t *type)
{
	if (valid_type_name(type))
		return 0;
	if (json_is_string(type))
		return refuse(b, path, "'type' has an unknown type name '%.40s'",
			      json_string_value(type));
	if (!json_is_array(type) || json_array_size(type) == 0)
		return refuse(b, path, "'type' must be a type name or a non-empty array of them");
	size_t i, j;
	json_t *t;
	json_array_foreach(type, i, t)
	{
		if (!valid_type_name(t))
			return refuse(b, path, "'type' has an unknown type name");
		for (j = 0; j < i; j++)
			if (json_equal(t, json_array_get(type, j)))
				return refuse(b, path, "'type' names '%s' twice",
					      json_string_value(t));
	}
	return 0;
}

/* A JSON pointer segment, unescaped (~1 is '/', ~0 is '~'). NULL when malformed. */
static char *pointer_segment(const char *start, size_t len)
{
	char *seg = malloc(len + 1), *o = seg;
	for (size_t i = 0; seg && i < len; i++) {
		if (start[i] != '~') {
			*o++ = start[i];
			continue;
		}
		if (i + 1 == len || (start[i + 1] != '0' && start[i + 1] != '1')) {
			free(seg);
			return NULL;
		}
		*o++ = start[++i] == '1' ? '/' : '~';
	}
	if (seg)
		*o = 0;
	return seg;
}

/* A fragment's percent-escapes decoded into out; false when malformed or it holds a NUL. */
static bool percent_decode(const char *in, char *out, size_t out_len)
{
	size_t o = 0;
	for (size_t i = 0; in[i]; i++) {
		unsigned c = (unsigned char)in[i];
		if (c == '%') {
			char hex[3] = {in[i + 1], in[i + 1] ? in[i + 2] : 0, 0};
			char *end;
			c = (unsigned)strtoul(hex, &end, 16);
			if (!hex[0] || !hex[1] || *end || c == 0)
				return false;
			i += 2;
		}
		if (o + 1 >= out_len)
			return false;
		out[o++] = (char)c;
	}
	out[o] = 0;
	return true;
}

/* Where a pointer into the document is as it walks: a schema, or the value of a keyword. */
enum place { AT_SCHEMA, AT_SCHEMA_ARRAY, AT_SCHEMA_MAP, AT_OTHER };

static enum place place_of(const json_t *schema, const char *keyword, const json_t *value)
{
	int kind = json_is_object(schema) ? sc__schema_keyword(keyword) : -1;
	switch (kind) {
	case KW_SCHEMA:
		return AT_SCHEMA;
	case KW_ITEMS:
		return json_is_array(value) ? AT_SCHEMA_ARRAY : AT_SCHEMA;
	case KW_SCHEMA_ARRAY:
		return AT_SCHEMA_ARRAY;
	case KW_SCHEMA_MAP:
	case KW_PATTERN_MAP:
		return AT_SCHEMA_MAP;
	default:
		return AT_OTHER;
	}
}

/* Resolves a local reference against the root; the target must be a place where a schema
 * stands (not, say, inside a "default"), so registration has validated it. */
static int resolve_ref(struct build *b, const char *path, const char *ref, const json_t **out)
{
	char frag[MAX_REF_BYTES];
	if (ref[0] != '#')
		return refuse(b, path,
			      "'$ref' '%.60s': only local references ('#/...') are "
			      "supported",
			      ref);
	if (!percent_decode(ref + 1, frag, sizeof(frag)) || (frag[0] && frag[0] != '/'))
		return refuse(b, path, "'$ref' '%.60s' is not a JSON pointer ('#/...')", ref);
	const json_t *at = b->s->root;
	enum place place = AT_SCHEMA;
	for (const char *p = frag; *p == '/';) {
		const char *start = p + 1, *end = strchrnul(start, '/');
		char *seg = pointer_segment(start, (size_t)(end - start));
		if (!seg)
			return refuse(b, path, "'$ref' '%.60s' has a bad '~' escape", ref);
		const json_t *next = NULL;
		enum place next_place = AT_OTHER;
		char *num_end;
		unsigned long idx = strtoul(seg, &num_end, 10);
		if (json_is_object(at)) {
			next = json_object_get(at, seg);
			next_place = place == AT_SCHEMA	      ? place_of(at, seg, next)
				     : place == AT_SCHEMA_MAP ? AT_SCHEMA
							      : AT_OTHER;
		} else if (json_is_array(at) && *seg && !*num_end && isdigit((unsigned char)*seg)) {
			next = json_array_get(at, idx);
			next_place = place == AT_SCHEMA_ARRAY ? AT_SCHEMA : AT_OTHER;
		}
		free(seg);
		if (!next)
			return refuse(b, path, "'$ref' '%.60s' points to nothing", ref);
		at = next;
		place = next_place;
		p = end;
	}
	if (place != AT_SCHEMA || (!json_is_object(at) && !json_is_boolean(at)))
		return refuse(b, path, "'$ref' '%.60s' does not point to a schema", ref);
	*out = at;
	return 0;
}

void sc__schema_reason(char *why, size_t why_len, const char *path, const char *msg)
{
	size_t room = why_len > strlen(msg) + 6 ? why_len - strlen(msg) - 6 : 0;
	size_t n = strlen(path);
	if (!why_len)
		return;
	if (n > room) /* the end of a long path says more than its start */
		snprintf(why, why_len, "...%s: %s", path + n - room, msg);
	else
		snprintf(why, why_len, "%s%s%s", path, n ? ": " : "", msg);
}

void sc__schema_path(char *out, size_t len, const char *path, const char *name)
{
	if (snprintf(out, len, "%s%s%s", path, *path ? "." : "", name) >= (int)len && len > 4)
		strcpy(out + len - 4, "...");
}

static int walk(struct build *b, const json_t *schema, const char *path, unsigned depth);

static int walk_named(struct build *b, const json_t *schema, const char *path, const char *name,
		      unsigned depth)
{
	char sub[256];
	sc__schema_path(sub, sizeof(sub), path, name);
	return walk(b, schema, sub, depth + 1);
}

static int walk_array(struct build *b, const json_t *v, const char *path, const char *key,
		      unsigned depth)
{
	char sub[256], item[280];
	if (!json_is_array(v) || json_array_size(v) == 0)
		return refuse(b, path, "'%s' must be a non-empty array of schemas", key);
	sc__schema_path(sub, sizeof(sub), path, key);
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		snprintf(item, sizeof(item), "%s[%zu]", sub, i);
		int rc = walk(b, e, item, depth + 1);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int walk_map(struct build *b, const json_t *v, const char *path, const char *key,
		    bool keys_are_patterns, unsigned depth)
{
	char sub[256];
	if (!json_is_object(v))
		return refuse(b, path, "'%s' must be an object", key);
	sc__schema_path(sub, sizeof(sub), path, key);
	const char *k;
	json_t *e;
	json_object_foreach((json_t *)v, k, e)
	{
		/* The key's address is stable while the schema is unmodified (it lives in the
		 * object's entry), so it names the compiled pattern. */
		int rc = keys_are_patterns ? compile_pattern(b, sub, k, strlen(k), k) : 0;
		if (rc == 0)
			rc = walk_named(b, e, sub, k, depth);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static bool is_count(const json_t *v)
{
	double d = json_number_value(v);
	return (json_is_integer(v) && json_integer_value(v) >= 0) ||
	       (json_is_real(v) && d >= 0 && d <= 9007199254740992.0 && d == (double)(long long)d);
}

/* One keyword's value; kind from the table. */
static int walk_keyword(struct build *b, const json_t *schema, const char *path, const char *key,
			const json_t *v, int kind, unsigned depth)
{
	switch ((enum sc_kw_kind)kind) {
	case KW_ANY:
		return 0;
	case KW_STRING:
		return json_is_string(v) ? 0 : refuse(b, path, "'%s' must be a string", key);
	case KW_ID:
		if (depth > 0)
			return refuse(b, path,
				      "'$id' is only supported at the root (it would change "
				      "what '$ref' resolves against)");
		return json_is_string(v) ? 0 : refuse(b, path, "'$id' must be a string");
	case KW_BOOL:
		return json_is_boolean(v) ? 0 : refuse(b, path, "'%s' must be true or false", key);
	case KW_COUNT:
		return is_count(v) ? 0
				   : refuse(b, path, "'%s' must be a non-negative integer", key);
	case KW_NUMBER:
		return json_is_number(v) ? 0 : refuse(b, path, "'%s' must be a number", key);
	case KW_NUMBER_OR_BOOL:
		return json_is_number(v) || json_is_boolean(v)
			       ? 0
			       : refuse(b, path, "'%s' must be a number", key);
	case KW_POSITIVE:
		return json_is_number(v) && json_number_value(v) > 0
			       ? 0
			       : refuse(b, path, "'%s' must be a number above 0", key);
	case KW_TYPE:
		return check_type_keyword(b, path, v);
	case KW_ITEMS:
		if (json_is_array(v))
			return walk_array(b, v, path, key, depth);
		/* fall through */
	case KW_SCHEMA:
		return walk_named(b, v, path, key, depth);
	case KW_SCHEMA_ARRAY:
		return walk_array(b, v, path, key, depth);
	case KW_SCHEMA_MAP:
	case KW_PATTERN_MAP:
		return walk_map(b, v, path, key, kind == KW_PATTERN_MAP, depth);
	case KW_STRING_ARRAY: {
		size_t i;
		json_t *e;
		if (!json_is_array(v))
			return refuse(b, path, "'%s' must be an array of strings", key);
		json_array_foreach(v, i, e) if (!json_is_string(e)) return refuse(
			b, path, "'%s' must be an array of strings", key);
		return 0;
	}
	case KW_ARRAY:
		return json_is_array(v) ? 0 : refuse(b, path, "'%s' must be an array", key);
	case KW_PATTERN:
		if (!json_is_string(v))
			return refuse(b, path, "'pattern' must be a string");
		return compile_pattern(b, path, json_string_value(v), json_string_length(v), v);
	case KW_REF: {
		const json_t *target;
		if (!json_is_string(v))
			return refuse(b, path, "'$ref' must be a string");
		int rc = resolve_ref(b, path, json_string_value(v), &target);
		return rc < 0 ? rc : add_node(b, v, SC_NODE_REF, target, NULL);
	}
	}
	return refuse(b, path, "unknown keyword '%s'", key);
}

static int walk(struct build *b, const json_t *schema, const char *path, unsigned depth)
{
	if (json_is_boolean(schema))
		return 0;
	if (!json_is_object(schema))
		return refuse(b, path, "a schema must be an object or a boolean");
	if (depth > MAX_SCHEMA_DEPTH)
		return refuse(b, path, "nested deeper than %d levels", MAX_SCHEMA_DEPTH);
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)schema, key, v)
	{
		int kind = sc__schema_keyword(key);
		if (kind < 0)
			return refuse(b, path, "unknown keyword '%s'", key);
		int rc = walk_keyword(b, schema, path, key, v, kind, depth);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int node_cmp(const void *pa, const void *pb)
{
	const struct sc_schema_node *a = pa, *b = pb;
	if (a->key != b->key)
		return (uintptr_t)a->key < (uintptr_t)b->key ? -1 : 1;
	return (int)a->kind - (int)b->kind;
}

const struct sc_schema_node *sc__schema_node(const struct sc_schema *s, const void *key,
					     enum sc_schema_node_kind kind)
{
	struct sc_schema_node probe = {.key = key, .kind = kind};
	if (!s->n_nodes)
		return NULL;
	return bsearch(&probe, s->nodes, s->n_nodes, sizeof(probe), node_cmp);
}

void sc__schema_free(struct sc_schema *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_nodes; i++)
		pcre2_code_free(s->nodes[i].code);
	free(s->nodes);
	json_decref(s->root);
	free(s);
}

/* A node reached twice (only possible in a tree built with shared parts) is kept once. */
static void sort_nodes(struct sc_schema *s)
{
	if (!s->n_nodes)
		return;
	qsort(s->nodes, s->n_nodes, sizeof(s->nodes[0]), node_cmp);
	size_t kept = 0;
	for (size_t i = 0; i < s->n_nodes; i++) {
		if (kept && !node_cmp(&s->nodes[kept - 1], &s->nodes[i]))
			pcre2_code_free(s->nodes[i].code);
		else
			s->nodes[kept++] = s->nodes[i];
	}
	s->n_nodes = kept;
}

int sc__schema_compile(json_t *schema, struct sc_schema **out, char *why, size_t why_len)
{
	*out = NULL;
	if (why_len)
		why[0] = 0;
	struct sc_schema *s = calloc(1, sizeof(*s));
	struct build b = {.s = s, .why = why, .why_len = why_len};
	if (!s || !(b.cctx = pcre2_compile_context_create(NULL))) {
		free(s);
		return -ENOMEM;
	}
	s->root = json_incref(schema);
	pcre2_set_max_pattern_length(b.cctx, MAX_PATTERN_BYTES);
	pcre2_set_parens_nest_limit(b.cctx, MAX_PATTERN_PARENS);
	pcre2_set_compile_extra_options(b.cctx, PCRE2_EXTRA_ALT_BSUX);
	int rc = json_is_object(schema) ? walk(&b, schema, "", 0)
					: refuse(&b, "", "the parameter schema must be an object");
	pcre2_compile_context_free(b.cctx);
	if (rc < 0) {
		if (rc == -ENOMEM && why_len)
			snprintf(why, why_len, "out of memory");
		sc__schema_free(s);
		return rc;
	}
	sort_nodes(s);
	*out = s;
	return 0;
}

int sc__schema_validate(const json_t *schema, char *why, size_t why_len)
{
	struct sc_schema *s;
	/* compile only takes a reference; it never modifies the schema. */
	int rc = sc__schema_compile((json_t *)schema, &s, why, why_len);
	sc__schema_free(s);
	return rc < 0 ? -1 : 0;
}
