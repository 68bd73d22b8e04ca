/* The subset of JSON Schema that tool parameter schemas use (the shape model providers accept
 * for function calling): type, properties, required, additionalProperties, items, enum,
 * minimum, maximum, minLength, maxLength, minItems, maxItems. Keywords outside the subset are
 * rejected when a tool is registered, so a schema never silently checks less than it says. */
#define _GNU_SOURCE
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

static const char *const known_keywords[] = {
	"type",	       "properties", "required", "additionalProperties",
	"items",       "enum",	     "minimum",	 "maximum",
	"minLength",   "maxLength",  "minItems", "maxItems",
	"description", "title",	     "default",	 "examples",
	"$schema",     "format",
};
static const char *const type_names[] = {"object",  "array",   "string", "number",
					 "integer", "boolean", "null"};

static bool is_known(const char *key)
{
	for (size_t i = 0; i < sizeof(known_keywords) / sizeof(known_keywords[0]); i++)
		if (!strcmp(key, known_keywords[i]))
			return true;
	return false;
}

static bool valid_type_name(const json_t *t)
{
	const char *s = json_string_value(t);
	for (size_t i = 0; s && i < sizeof(type_names) / sizeof(type_names[0]); i++)
		if (!strcmp(s, type_names[i]))
			return true;
	return false;
}

static int fail(char *why, size_t why_len, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Where a subschema sits, for messages: "properties.a.items". */
static void sub_path(char *out, size_t len, const char *path, const char *step)
{
	snprintf(out, len, "%s%s%s", path, *path ? "." : "", step);
}

static int validate(const json_t *schema, unsigned depth, const char *path, char *why,
		    size_t why_len);

static int validate_type(const json_t *type, const char *path, char *why, size_t why_len)
{
	if (valid_type_name(type))
		return 0;
	size_t i;
	json_t *t;
	if (json_is_string(type))
		return fail(why, why_len, path, "unknown type '%.32s'", json_string_value(type));
	if (!json_is_array(type) || json_array_size(type) == 0)
		return fail(why, why_len, path, "'type' must be a type name or a non-empty list");
	json_array_foreach(type, i, t)
	{
		if (!valid_type_name(t))
			return fail(why, why_len, path, "'type' has an unknown type name");
	}
	return 0;
}

static int validate_children(const json_t *schema, unsigned depth, const char *path, char *why,
			     size_t why_len)
{
	char sub[256];
	const char *key;
	json_t *v;
	const json_t *props = json_object_get(schema, "properties");
	if (props && !json_is_object(props))
		return fail(why, why_len, path, "'properties' must be an object");
	json_object_foreach((json_t *)props, key, v)
	{
		char step[200];
		snprintf(step, sizeof(step), "properties.%s", key);
		sub_path(sub, sizeof(sub), path, step);
		if (validate(v, depth + 1, sub, why, why_len) < 0)
			return -1;
	}
	const json_t *add = json_object_get(schema, "additionalProperties");
	sub_path(sub, sizeof(sub), path, "additionalProperties");
	if (add && !json_is_boolean(add) && validate(add, depth + 1, sub, why, why_len) < 0)
		return -1;
	const json_t *items = json_object_get(schema, "items");
	sub_path(sub, sizeof(sub), path, "items");
	if (items && validate(items, depth + 1, sub, why, why_len) < 0)
		return -1;
	return 0;
}

static int validate(const json_t *schema, unsigned depth, const char *path, char *why,
		    size_t why_len)
{
	if (!json_is_object(schema))
		return fail(why, why_len, path, "a schema must be a JSON object");
	if (depth > 32)
		return fail(why, why_len, path, "nested deeper than 32 levels");
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)schema, key, v)
	{
		if (!is_known(key))
			return fail(why, why_len, path, "unknown keyword '%.64s'", key);
	}
	const json_t *type = json_object_get(schema, "type");
	if (type && validate_type(type, path, why, why_len) < 0)
		return -1;
	const json_t *req = json_object_get(schema, "required");
	if (req) {
		size_t i;
		json_t *r;
		if (!json_is_array(req))
			return fail(why, why_len, path, "'required' must be a list of names");
		json_array_foreach(req, i, r)
		{
			if (!json_is_string(r))
				return fail(why, why_len, path,
					    "'required' must be a list of names");
		}
	}
	const json_t *en = json_object_get(schema, "enum");
	if (en && !json_is_array(en))
		return fail(why, why_len, path, "'enum' must be a list");
	static const char *const numeric[] = {"minimum",   "maximum",  "minLength",
					      "maxLength", "minItems", "maxItems"};
	for (size_t i = 0; i < sizeof(numeric) / sizeof(numeric[0]); i++) {
		const json_t *n = json_object_get(schema, numeric[i]);
		if (n && !json_is_number(n))
			return fail(why, why_len, path, "'%s' must be a number", numeric[i]);
	}
	return validate_children(schema, depth, path, why, why_len);
}

int sc__schema_validate(const json_t *schema, char *why, size_t why_len)
{
	return validate(schema, 0, "", why, why_len);
}

static int fail(char *why, size_t why_len, const char *path, const char *fmt, ...)
{
	char msg[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(why, why_len, "%s%s%s", *path ? path : "", *path ? ": " : "", msg);
	return -1;
}

static bool has_type(const json_t *value, const char *type)
{
	if (!strcmp(type, "integer"))
		return json_is_integer(value) ||
		       (json_is_real(value) &&
			floor(json_real_value(value)) == json_real_value(value));
	if (!strcmp(type, "number"))
		return json_is_number(value);
	if (!strcmp(type, "string"))
		return json_is_string(value);
	if (!strcmp(type, "boolean"))
		return json_is_boolean(value);
	if (!strcmp(type, "null"))
		return json_is_null(value);
	if (!strcmp(type, "array"))
		return json_is_array(value);
	return json_is_object(value);
}

static const char *type_of(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "integer";
	case JSON_REAL:
		return "number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "boolean";
	default:
		return "null";
	}
}

static int check_type(const json_t *s, const json_t *v, char *why, size_t n, const char *path)
{
	const json_t *type = json_object_get(s, "type");
	if (!type)
		return 0;
	if (json_is_string(type))
		return has_type(v, json_string_value(type))
			       ? 0
			       : fail(why, n, path, "expected %s, got %s", json_string_value(type),
				      type_of(v));
	size_t i;
	json_t *t;
	json_array_foreach(type, i, t) if (has_type(v, json_string_value(t))) return 0;
	return fail(why, n, path, "got %s, which the schema does not allow", type_of(v));
}

static int check_bounds(const json_t *s, const json_t *v, char *why, size_t n, const char *path)
{
	const json_t *lo = json_object_get(s, "minimum"), *hi = json_object_get(s, "maximum");
	if (json_is_number(v) && lo && json_number_value(v) < json_number_value(lo))
		return fail(why, n, path, "must be >= %g", json_number_value(lo));
	if (json_is_number(v) && hi && json_number_value(v) > json_number_value(hi))
		return fail(why, n, path, "must be <= %g", json_number_value(hi));
	size_t len = json_is_string(v)	? json_string_length(v)
		     : json_is_array(v) ? json_array_size(v)
					: 0;
	const char *lo_key = json_is_string(v) ? "minLength" : "minItems";
	const char *hi_key = json_is_string(v) ? "maxLength" : "maxItems";
	if (!json_is_string(v) && !json_is_array(v))
		return 0;
	lo = json_object_get(s, lo_key);
	hi = json_object_get(s, hi_key);
	if (lo && (double)len < json_number_value(lo))
		return fail(why, n, path, "shorter than %s %g", lo_key, json_number_value(lo));
	if (hi && (double)len > json_number_value(hi))
		return fail(why, n, path, "longer than %s %g", hi_key, json_number_value(hi));
	return 0;
}

static int check(const json_t *s, const json_t *v, char *why, size_t n, const char *path);

static int check_object(const json_t *s, const json_t *v, char *why, size_t n, const char *path)
{
	char sub[256];
	const json_t *props = json_object_get(s, "properties");
	const json_t *add = json_object_get(s, "additionalProperties");
	size_t i;
	json_t *r;
	json_array_foreach(json_object_get(s, "required"), i, r)
	{
		if (!json_object_get(v, json_string_value(r)))
			return fail(why, n, path, "'%s' is required", json_string_value(r));
	}
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)v, key, val)
	{
		const json_t *ps = props ? json_object_get(props, key) : NULL;
		snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", key);
		if (!ps && json_is_false(add))
			return fail(why, n, path, "unexpected argument '%s'", key);
		if (!ps && json_is_object(add))
			ps = add;
		if (ps && check(ps, val, why, n, sub) < 0)
			return -1;
	}
	return 0;
}

static int check(const json_t *s, const json_t *v, char *why, size_t n, const char *path)
{
	if (check_type(s, v, why, n, path) < 0 || check_bounds(s, v, why, n, path) < 0)
		return -1;
	const json_t *en = json_object_get(s, "enum");
	if (en) {
		size_t i;
		json_t *e;
		bool found = false;
		json_array_foreach(en, i, e) found = found || json_equal(e, (json_t *)v);
		if (!found)
			return fail(why, n, path, "not one of the allowed values");
	}
	if (json_is_object(v))
		return check_object(s, v, why, n, path);
	const json_t *items = json_object_get(s, "items");
	if (json_is_array(v) && items) {
		char sub[256];
		size_t i;
		json_t *e;
		json_array_foreach(v, i, e)
		{
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			if (check(items, e, why, n, sub) < 0)
				return -1;
		}
	}
	return 0;
}

int sc__schema_check(const json_t *schema, const json_t *value, char *why, size_t why_len)
{
	return schema ? check(schema, value, why, why_len, "") : 0;
}
