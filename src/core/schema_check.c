/* Checking a tool call's arguments against a registered schema (schema.c built it), and the
 * text the callback then receives. The arguments come from the cell, so every check is
 * bounded: schema recursion depth, visits per call, and pattern steps per call (counted by
 * callouts across all matches, so many small strings cannot add up to an unbounded cost).
 * Any limit hit refuses the value, never accepts it. */
#define _GNU_SOURCE
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "schema.h"
#include "util/buf.h"

#define MAX_CHECK_DEPTH	    128	      /* value nesting plus $ref/anyOf/... nesting */
#define MAX_CHECK_VISITS    (1 << 21) /* (schema, value) pairs per call */
#define MAX_PATTERN_STEPS   (4 << 20) /* pattern items tried per call, all matches together */
#define PATTERN_HEAP_KIB    4096
#define PATTERN_DEPTH	    100000
#define MULTIPLE_OF_EPSILON 1e-9

struct ctx {
	const struct sc_schema *s;
	char *why;
	size_t why_len;
	unsigned long visits;
	unsigned long pattern_steps;
	unsigned fail_depth; /* value depth of the last failure (which alternative got furthest) */
	bool hard;	     /* a limit was hit: refuse, even under "not" or "anyOf" */
	pcre2_match_data *md;
	pcre2_match_context *mctx;
};

static int check(struct ctx *c, const json_t *s, const json_t *v, const char *path, unsigned vdepth,
		 unsigned sdepth);

static int fail(struct ctx *c, const char *path, unsigned vdepth, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(struct ctx *c, const char *path, unsigned vdepth, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	sc__schema_reason(c->why, c->why_len, path, msg);
	c->fail_depth = vdepth;
	return -1;
}

#define hard_fail(c, path, ...) ((c)->hard = true, fail(c, path, 0, __VA_ARGS__))

static locale_t c_numeric;

static void c_numeric_init(void)
{
	c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* The C locale's numbers on this thread until the matching numbers_end: JSON spells a real
 * with '.', whatever LC_NUMERIC the host process chose (jansson parses it so; in a locale
 * with a decimal comma, strtod would stop at the '.' and printf write a ','). NULL when the
 * locale cannot be made. */
static locale_t numbers_begin(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, c_numeric_init);
	return c_numeric ? uselocale(c_numeric) : (locale_t)0;
}

static void numbers_end(locale_t saved)
{
	if (saved)
		uselocale(saved);
}

/* Shortest "%.Ng" that reads back as exactly d (15 digits always suffice for fewer); called
 * between numbers_begin and numbers_end. */
static void real_text(double d, char *buf, size_t len)
{
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, d);
		if (strtod(buf, NULL) == d)
			break;
	}
	if (!strpbrk(buf, ".eEni"))
		strncat(buf, ".0", len - strlen(buf) - 1);
}

static void number_text(const json_t *n, char *buf, size_t len)
{
	if (json_is_integer(n)) {
		snprintf(buf, len, "%" JSON_INTEGER_FORMAT, json_integer_value(n));
	} else {
		locale_t saved = numbers_begin();
		real_text(json_real_value(n), buf, len);
		numbers_end(saved);
	}
}

/* i against d exactly: as doubles, 2^53 + 1 would equal 2^53. */
static int cmp_int_real(json_int_t i, double d)
{
	if (d >= 9223372036854775808.0)
		return -1;
	if (d < -9223372036854775808.0)
		return 1;
	double fl = floor(d);
	json_int_t f = (json_int_t)fl;
	if (i != f)
		return i < f ? -1 : 1;
	return d > fl ? -1 : 0;
}

static int cmp_num(const json_t *a, const json_t *b)
{
	if (json_is_integer(a) && json_is_integer(b))
		return (json_integer_value(a) > json_integer_value(b)) -
		       (json_integer_value(a) < json_integer_value(b));
	if (json_is_integer(a))
		return cmp_int_real(json_integer_value(a), json_real_value(b));
	if (json_is_integer(b))
		return -cmp_int_real(json_integer_value(b), json_real_value(a));
	return (json_real_value(a) > json_real_value(b)) -
	       (json_real_value(a) < json_real_value(b));
}

/* JSON Schema equality: numbers by value (1 equals 1.0), objects regardless of order. Adds
 * the values it compares to *work (the call's visits). */
static bool values_equal(const json_t *a, const json_t *b, unsigned long *work)
{
	++*work;
	if (json_is_number(a) && json_is_number(b))
		return cmp_num(a, b) == 0;
	if (json_typeof(a) != json_typeof(b))
		return false;
	if (json_is_string(a))
		return json_string_length(a) == json_string_length(b) &&
		       !memcmp(json_string_value(a), json_string_value(b), json_string_length(a));
	if (json_is_array(a)) {
		if (json_array_size(a) != json_array_size(b))
			return false;
		for (size_t i = 0; i < json_array_size(a); i++)
			if (!values_equal(json_array_get(a, i), json_array_get(b, i), work))
				return false;
		return true;
	}
	if (json_is_object(a)) {
		const char *key;
		json_t *va;
		if (json_object_size(a) != json_object_size(b))
			return false;
		json_object_foreach((json_t *)a, key, va)
		{
			const json_t *vb = json_object_get(b, key);
			if (!vb || !values_equal(va, vb, work))
				return false;
		}
	}
	return true; /* true, false, null */
}

static bool is_int64(double d)
{
	return floor(d) == d && d >= -9223372036854775808.0 && d < 9223372036854775808.0;
}

static uint64_t mix(uint64_t h)
{
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ULL;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebULL;
	return h ^ (h >> 31);
}

static uint64_t bytes_hash(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ULL;
	return h;
}

/* Equal values (values_equal) hash alike: numbers by value, objects order-free. */
static uint64_t value_hash(const json_t *v)
{
	uint64_t h = json_typeof(v), bits;
	switch (json_typeof(v)) {
	case JSON_INTEGER:
	case JSON_REAL: {
		/* An integer by its exact value (2^62 and 2^62 + 1 are one double but unequal,
		 * and a run of equal hashes is compared pairwise), a real with an integral value
		 * as that integer (1.0 equals 1), any other real by its bits. */
		double d = json_number_value(v);
		if (json_is_integer(v) || is_int64(d)) {
			json_int_t i = json_is_integer(v) ? json_integer_value(v) : (json_int_t)d;
			return mix((uint64_t)i ^ 0x9e3779b97f4a7c15ULL);
		}
		memcpy(&bits, &d, sizeof(bits));
		return mix(bits ^ 0x7f4a7c159e3779b9ULL);
	}
	case JSON_STRING:
		return mix(bytes_hash(json_string_value(v), json_string_length(v)));
	case JSON_ARRAY:
		for (size_t i = 0; i < json_array_size(v); i++)
			h = mix(h * 31 + value_hash(json_array_get(v, i)));
		return h;
	case JSON_OBJECT: {
		const char *key;
		json_t *e;
		json_object_foreach((json_t *)v, key, e) h +=
			mix(bytes_hash(key, strlen(key)) ^ (value_hash(e) * 0x9e3779b97f4a7c15ULL));
		return mix(h);
	}
	default:
		return mix(h + 0x51);
	}
}

struct hashed {
	uint64_t hash;
	size_t index;
};

static int hashed_cmp(const void *pa, const void *pb)
{
	const struct hashed *a = pa, *b = pb;
	if (a->hash != b->hash)
		return a->hash < b->hash ? -1 : 1;
	return (a->index > b->index) - (a->index < b->index);
}

/* uniqueItems in O(n log n): sort by hash, compare only within a run of equal hashes. Sets
 * *a_out and *b_out to the indexes of a duplicate pair, or SIZE_MAX. Hashing charges one
 * visit per item and every comparison the values it compares, so a run of distinct values
 * with one hash (crafted collisions) costs the visit budget, not time squared. -1 when out
 * of memory, -2 when the budget ran out. */
static int find_duplicate(struct ctx *c, const json_t *arr, size_t *a_out, size_t *b_out)
{
	size_t n = json_array_size(arr);
	*a_out = *b_out = SIZE_MAX;
	c->visits += n;
	if (c->visits > MAX_CHECK_VISITS)
		return -2;
	struct hashed *h = malloc((n ? n : 1) * sizeof(*h));
	if (!h)
		return -1;
	for (size_t i = 0; i < n; i++)
		h[i] = (struct hashed){value_hash(json_array_get(arr, i)), i};
	qsort(h, n, sizeof(*h), hashed_cmp);
	int rc = 0;
	for (size_t i = 0; i < n && *a_out == SIZE_MAX && rc == 0; i++)
		for (size_t j = i + 1; j < n && h[j].hash == h[i].hash; j++) {
			if (values_equal(json_array_get(arr, h[i].index),
					 json_array_get(arr, h[j].index), &c->visits)) {
				*a_out = h[i].index;
				*b_out = h[j].index;
				break;
			}
			if (c->visits > MAX_CHECK_VISITS) {
				rc = -2;
				break;
			}
		}
	free(h);
	return rc;
}

static bool has_type(const json_t *value, const char *type)
{
	if (!strcmp(type, "integer"))
		return json_is_integer(value) ||
		       (json_is_real(value) && is_int64(json_real_value(value)));
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
	static const char *const names[] = {
		[JSON_OBJECT] = "object",   [JSON_ARRAY] = "array", [JSON_STRING] = "string",
		[JSON_INTEGER] = "integer", [JSON_REAL] = "number", [JSON_TRUE] = "boolean",
		[JSON_FALSE] = "boolean",   [JSON_NULL] = "null",
	};
	return names[json_typeof(v)];
}

static int check_type(struct ctx *c, const json_t *s, const json_t *v, const char *path,
		      unsigned vd)
{
	const json_t *type = json_object_get(s, "type");
	if (!type)
		return 0;
	if (json_is_string(type))
		return has_type(v, json_string_value(type))
			       ? 0
			       : fail(c, path, vd, "expected %s, got %s", json_string_value(type),
				      type_of(v));
	char names[120] = "";
	size_t i, n = json_array_size(type);
	json_t *t;
	json_array_foreach(type, i, t)
	{
		if (has_type(v, json_string_value(t)))
			return 0;
		snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
			 i == 0	      ? ""
			 : i + 1 == n ? " or "
				      : ", ",
			 json_string_value(t));
	}
	return fail(c, path, vd, "expected %s, got %s", names, type_of(v));
}

static int check_number(struct ctx *c, const json_t *s, const json_t *v, const char *path,
			unsigned vd)
{
	char num[40];
	const json_t *lo = json_object_get(s, "minimum"), *hi = json_object_get(s, "maximum");
	const json_t *xlo = json_object_get(s, "exclusiveMinimum");
	const json_t *xhi = json_object_get(s, "exclusiveMaximum");
	/* Draft 4 spelled "exclusive" as a boolean beside minimum/maximum. */
	bool lo_open = json_is_true(xlo), hi_open = json_is_true(xhi);
	if (json_is_number(xlo) && (!lo || cmp_num(xlo, lo) >= 0))
		lo = xlo, lo_open = true;
	if (json_is_number(xhi) && (!hi || cmp_num(xhi, hi) <= 0))
		hi = xhi, hi_open = true;
	if (lo && cmp_num(v, lo) < lo_open) {
		number_text(lo, num, sizeof(num));
		return fail(c, path, vd, "must be %s %s", lo_open ? ">" : ">=", num);
	}
	if (hi && cmp_num(v, hi) > -hi_open) {
		number_text(hi, num, sizeof(num));
		return fail(c, path, vd, "must be %s %s", hi_open ? "<" : "<=", num);
	}
	const json_t *m = json_object_get(s, "multipleOf");
	if (!m)
		return 0;
	bool ok;
	if (json_is_integer(v) && json_is_integer(m)) {
		ok = json_integer_value(v) % json_integer_value(m) == 0;
	} else {
		double q = json_number_value(v) / json_number_value(m);
		ok = isfinite(q) &&
		     fabs(q - nearbyint(q)) <= MULTIPLE_OF_EPSILON * fmax(1, fabs(q));
	}
	number_text(m, num, sizeof(num));
	return ok ? 0 : fail(c, path, vd, "must be a multiple of %s", num);
}

static size_t code_points(const char *s, size_t len)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += ((unsigned char)s[i] & 0xC0) != 0x80;
	return n;
}

static int on_callout(pcre2_callout_block *block, void *data)
{
	struct ctx *c = data;
	return ++c->pattern_steps > MAX_PATTERN_STEPS ? PCRE2_ERROR_CALLOUT : 0;
}

/* 1 when the string matches the pattern registered under key, 0 when not, -1 (a hard
 * failure: the value is refused) when the budget or a PCRE2 limit ran out. */
static int match(struct ctx *c, const void *key, const char *str, size_t len, const char *path)
{
	const struct sc_schema_node *n = sc__schema_node(c->s, key, SC_NODE_PATTERN);
	if (!n)
		return hard_fail(c, path, "pattern was not compiled at registration");
	if (!c->md) {
		c->md = pcre2_match_data_create(1, NULL);
		c->mctx = pcre2_match_context_create(NULL);
		if (!c->md || !c->mctx)
			return hard_fail(c, path, "out of memory matching a pattern");
		pcre2_set_callout(c->mctx, on_callout, c);
		pcre2_set_match_limit(c->mctx, MAX_PATTERN_STEPS);
		pcre2_set_depth_limit(c->mctx, PATTERN_DEPTH);
		pcre2_set_heap_limit(c->mctx, PATTERN_HEAP_KIB);
	}
	int rc = pcre2_match(n->code, (PCRE2_SPTR)str, len, 0, 0, c->md, c->mctx);
	if (rc >= 0)
		return 1;
	if (rc == PCRE2_ERROR_NOMATCH)
		return 0;
	if (rc == PCRE2_ERROR_CALLOUT || rc == PCRE2_ERROR_MATCHLIMIT)
		return hard_fail(c, path, "pattern matching took more than %d steps in this call",
				 MAX_PATTERN_STEPS);
	PCRE2_UCHAR msg[120];
	pcre2_get_error_message(rc, msg, sizeof(msg));
	return hard_fail(c, path, "cannot match the pattern: %s", (const char *)msg);
}

static int check_string(struct ctx *c, const json_t *s, const json_t *v, const char *path,
			unsigned vd)
{
	const char *str = json_string_value(v);
	size_t len = json_string_length(v);
	const json_t *lo = json_object_get(s, "minLength"), *hi = json_object_get(s, "maxLength");
	if (lo || hi) {
		double n = (double)code_points(str, len);
		if (lo && n < json_number_value(lo))
			return fail(c, path, vd, "must be at least %.0f characters long",
				    json_number_value(lo));
		if (hi && n > json_number_value(hi))
			return fail(c, path, vd, "must be at most %.0f characters long",
				    json_number_value(hi));
	}
	const json_t *pattern = json_object_get(s, "pattern");
	if (!pattern)
		return 0;
	int m = match(c, pattern, str, len, path);
	if (m < 0)
		return -1;
	return m ? 0
		 : fail(c, path, vd, "does not match the pattern '%.60s'",
			json_string_value(pattern));
}

static int check_counts(struct ctx *c, const json_t *s, size_t n, const char *path, unsigned vd,
			const char *lo_key, const char *hi_key, const char *unit)
{
	const json_t *lo = json_object_get(s, lo_key), *hi = json_object_get(s, hi_key);
	if (lo && (double)n < json_number_value(lo))
		return fail(c, path, vd, "must have at least %.0f %s", json_number_value(lo), unit);
	if (hi && (double)n > json_number_value(hi))
		return fail(c, path, vd, "must have at most %.0f %s", json_number_value(hi), unit);
	return 0;
}

static int check_items(struct ctx *c, const json_t *s, const json_t *v, const char *path,
		       unsigned vd, unsigned sd)
{
	const json_t *prefix = json_object_get(s, "prefixItems");
	const json_t *items = json_object_get(s, "items");
	const json_t *rest = items;
	if (!prefix && json_is_array(items)) { /* the tuple form before 2020-12 */
		prefix = items;
		rest = json_object_get(s, "additionalItems");
	}
	char sub[280];
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		const json_t *is = i < json_array_size(prefix) ? json_array_get(prefix, i) : rest;
		snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
		if (json_is_false(is))
			return fail(c, path, vd, "has %zu items; at most %zu are allowed",
				    json_array_size(v), i);
		if (is && check(c, is, e, sub, vd + 1, sd + 1) < 0)
			return -1;
	}
	return 0;
}

static int check_array(struct ctx *c, const json_t *s, const json_t *v, const char *path,
		       unsigned vd, unsigned sd)
{
	if (check_counts(c, s, json_array_size(v), path, vd, "minItems", "maxItems", "items") < 0 ||
	    check_items(c, s, v, path, vd, sd) < 0)
		return -1;
	if (json_is_true(json_object_get(s, "uniqueItems"))) {
		size_t a, b;
		int dup = find_duplicate(c, v, &a, &b);
		if (dup == -2)
			return hard_fail(c, path,
					 "checking took more than %d steps; the schema or the "
					 "arguments are too complex",
					 MAX_CHECK_VISITS);
		if (dup < 0)
			return hard_fail(c, path, "out of memory checking uniqueItems");
		if (a != SIZE_MAX)
			return fail(c, path, vd, "items %zu and %zu are equal; they must be unique",
				    a < b ? a : b, a < b ? b : a);
	}
	const json_t *contains = json_object_get(s, "contains");
	if (!contains)
		return 0;
	size_t i;
	json_t *e;
	json_array_foreach(v, i, e)
	{
		if (check(c, contains, e, path, vd + 1, sd + 1) == 0)
			return 0;
		if (c->hard)
			return -1;
	}
	return fail(c, path, vd, "no item matches the 'contains' schema");
}

/* The schema for one property: properties, then every matching patternProperties entry, then
 * additionalProperties for a name neither covers. */
static int check_property(struct ctx *c, const json_t *s, const char *key, const json_t *val,
			  const char *path, unsigned vd, unsigned sd)
{
	char sub[256];
	sc__schema_path(sub, sizeof(sub), path, key);
	const json_t *ps = json_object_get(json_object_get(s, "properties"), key);
	bool covered = ps != NULL;
	if (ps && check(c, ps, val, sub, vd + 1, sd + 1) < 0)
		return -1;
	const json_t *patterns = json_object_get(s, "patternProperties");
	const char *pat;
	json_t *pschema;
	json_object_foreach((json_t *)patterns, pat, pschema)
	{
		int m = match(c, pat, key, strlen(key), sub);
		if (m < 0 || (m && check(c, pschema, val, sub, vd + 1, sd + 1) < 0))
			return -1;
		covered = covered || m;
	}
	const json_t *add = json_object_get(s, "additionalProperties");
	if (covered || !add)
		return 0;
	if (json_is_false(add))
		return fail(c, path, vd, "unexpected %s '%s'", vd == 0 ? "argument" : "property",
			    key);
	return check(c, add, val, sub, vd + 1, sd + 1);
}

static int check_object(struct ctx *c, const json_t *s, const json_t *v, const char *path,
			unsigned vd, unsigned sd)
{
	if (check_counts(c, s, json_object_size(v), path, vd, "minProperties", "maxProperties",
			 "properties") < 0)
		return -1;
	const json_t *required = json_object_get(s, "required");
	size_t i;
	json_t *r;
	json_array_foreach(required, i, r)
	{
		if (!json_object_get(v, json_string_value(r)))
			return fail(c, path, vd, "'%s' is required", json_string_value(r));
	}
	const json_t *names = json_object_get(s, "propertyNames");
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)v, key, val)
	{
		if (check_property(c, s, key, val, path, vd, sd) < 0)
			return -1;
		if (!names)
			continue;
		json_t *name = json_string(key);
		char sub[300];
		snprintf(sub, sizeof(sub), "%s%sname '%s'", path, *path ? ": " : "", key);
		int rc = name ? check(c, names, name, sub, vd + 1, sd + 1)
			      : hard_fail(c, path, "out of memory");
		json_decref(name);
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* Why an alternative failed, minus the path it shares with the others. */
static const char *reason(const char *msg, const char *path)
{
	size_t n = strlen(path);
	return n && !strncmp(msg, path, n) && !strncmp(msg + n, ": ", 2) ? msg + n + 2 : msg;
}

/* anyOf (one_of false) or oneOf. On failure the reason is the alternative that got deepest
 * into the value (for Optional[Model], the model's own complaint), else every reason. */
static int check_alternatives(struct ctx *c, const json_t *alts, bool one_of, const json_t *v,
			      const char *path, unsigned vd, unsigned sd)
{
	char best[256] = "", all[256] = "";
	unsigned best_depth = 0, n_best = 0;
	size_t i, first_pass = SIZE_MAX;
	json_t *alt;
	json_array_foreach(alts, i, alt)
	{
		if (check(c, alt, v, path, vd, sd + 1) == 0) {
			if (!one_of)
				return 0;
			if (first_pass != SIZE_MAX)
				return fail(c, path, vd,
					    "matches both alternative %zu and %zu of oneOf; it "
					    "must match exactly one",
					    first_pass, i);
			first_pass = i;
			continue;
		}
		if (c->hard)
			return -1;
		if (c->fail_depth > best_depth || !n_best) {
			best_depth = c->fail_depth;
			n_best = 0;
		}
		if (c->fail_depth == best_depth && n_best++ == 0)
			snprintf(best, sizeof(best), "%s", c->why_len ? c->why : "");
		snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s", *all ? "; " : "",
			 reason(c->why_len ? c->why : "", path));
	}
	if (first_pass != SIZE_MAX)
		return 0;
	if (best_depth > vd && n_best == 1) {
		if (c->why_len)
			snprintf(c->why, c->why_len, "%s", best);
		c->fail_depth = best_depth;
		return -1;
	}
	return fail(c, path, vd, "matches no alternative of %s (%s)", one_of ? "oneOf" : "anyOf",
		    all);
}

static int check_enum(struct ctx *c, const json_t *s, const json_t *v, const char *path,
		      unsigned vd)
{
	const json_t *en = json_object_get(s, "enum"), *cn = json_object_get(s, "const");
	size_t i;
	json_t *e;
	bool found = !en;
	json_array_foreach(en, i, e) found = found || values_equal(e, v, &c->visits);
	const json_t *shown = found ? cn : en;
	if (found && (!cn || values_equal(cn, v, &c->visits)))
		return 0;
	char *text = json_dumps(shown, JSON_COMPACT | JSON_ENCODE_ANY);
	fail(c, path, vd, "must be %s%.120s%s", shown == en ? "one of " : "", text ? text : "?",
	     text && strlen(text) > 120 ? "..." : "");
	free(text);
	return -1;
}

static int check_applicators(struct ctx *c, const json_t *s, const json_t *v, const char *path,
			     unsigned vd, unsigned sd)
{
	const json_t *ref = json_object_get(s, "$ref");
	if (ref) {
		const struct sc_schema_node *n = sc__schema_node(c->s, ref, SC_NODE_REF);
		if (!n)
			return hard_fail(c, path, "'$ref' was not resolved at registration");
		if (check(c, n->target, v, path, vd, sd + 1) < 0)
			return -1;
	}
	const json_t *all = json_object_get(s, "allOf");
	size_t i;
	json_t *sub;
	json_array_foreach(all, i, sub)
	{
		if (check(c, sub, v, path, vd, sd + 1) < 0)
			return -1;
	}
	const json_t *any = json_object_get(s, "anyOf"), *one = json_object_get(s, "oneOf");
	if ((any && check_alternatives(c, any, false, v, path, vd, sd) < 0) ||
	    (one && check_alternatives(c, one, true, v, path, vd, sd) < 0))
		return -1;
	const json_t *not = json_object_get(s, "not");
	if (!not )
		return 0;
	if (check(c, not, v, path, vd, sd + 1) == 0)
		return fail(c, path, vd, "matches the schema under 'not'");
	return c->hard ? -1 : 0;
}

static int check(struct ctx *c, const json_t *s, const json_t *v, const char *path, unsigned vdepth,
		 unsigned sdepth)
{
	if (++c->visits > MAX_CHECK_VISITS)
		return hard_fail(c, path,
				 "checking took more than %d steps; the schema or the "
				 "arguments are too complex",
				 MAX_CHECK_VISITS);
	if (sdepth > MAX_CHECK_DEPTH)
		return hard_fail(c, path,
				 "schema nested deeper than %d levels here (a '$ref' "
				 "cycle?)",
				 MAX_CHECK_DEPTH);
	if (json_is_true(s))
		return 0;
	if (json_is_false(s))
		return fail(c, path, vdepth, "no value is allowed here");
	if (check_type(c, s, v, path, vdepth) < 0 || check_enum(c, s, v, path, vdepth) < 0)
		return -1;
	int rc = 0;
	if (json_is_number(v))
		rc = check_number(c, s, v, path, vdepth);
	else if (json_is_string(v))
		rc = check_string(c, s, v, path, vdepth);
	else if (json_is_array(v))
		rc = check_array(c, s, v, path, vdepth, sdepth);
	else if (json_is_object(v))
		rc = check_object(c, s, v, path, vdepth, sdepth);
	return rc < 0 ? -1 : check_applicators(c, s, v, path, vdepth, sdepth);
}

int sc__schema_check(const struct sc_schema *schema, const json_t *value, char *why, size_t why_len)
{
	if (!schema)
		return 0;
	struct ctx c = {.s = schema, .why = why, .why_len = why_len};
	int rc = check(&c, schema->root, value, "", 0, 0);
	pcre2_match_data_free(c.md);
	pcre2_match_context_free(c.mctx);
	return rc;
}

char *sc__json_exact_numbers(const char *text, size_t len)
{
	size_t run = 0;
	struct sc_buf out;
	sc__buf_init(&out, SIZE_MAX);
	locale_t saved = numbers_begin();
	bool in_string = false, ok = sc__buf_reserve(&out, len + len / 2 + 64) == 0 && saved;
	for (size_t i = 0; ok && i < len; i++) {
		char ch = text[i];
		if (in_string || (ch != '-' && (ch < '0' || ch > '9'))) {
			if (in_string && ch == '\\')
				i++;
			else if (ch == '"')
				in_string = !in_string;
			continue;
		}
		size_t end = i;
		bool real = false;
		while (end < len && strchr("0123456789+-.eE", text[end]) && text[end]) {
			real = real || strchr(".eE", text[end]);
			end++;
		}
		if (!real) {
			i = end - 1;
			continue;
		}
		char *token = strndup(text + i, end - i), num[40];
		ok = token != NULL;
		if (ok) {
			real_text(strtod(token, NULL), num, sizeof(num));
			ok = sc__buf_add(&out, text + run, i - run) == 0 &&
			     sc__buf_add_str(&out, num) == 0;
		}
		free(token);
		run = end;
		i = end - 1;
	}
	numbers_end(saved);
	if (ok)
		ok = sc__buf_add(&out, text + run, len - run) == 0;
	if (!ok) {
		sc__buf_free(&out);
		return NULL;
	}
	return sc__buf_take(&out, NULL);
}
