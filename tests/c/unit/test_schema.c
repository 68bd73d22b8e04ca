#define _GNU_SOURCE
/* The schema subset on its own (src/core/schema.c and schema_check.c linked in; no sandbox, so
 * no user namespaces needed): what registration accepts and refuses, with the path and reason;
 * what checking lets through; the bounds on $ref cycles and patterns; the exact numbers the
 * callback receives. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <locale.h>
#include <string.h>

#include "core/core.h"
#include "schemas.h"

static struct sc_schema *compile(const char *text)
{
	json_error_t jerr;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	cr_assert(root, "test schema is not JSON: %s", jerr.text);
	struct sc_schema *s = NULL;
	char why[256];
	int rc = sc__schema_compile(root, &s, why, sizeof(why));
	json_decref(root);
	cr_assert_eq(rc, 0, "refused: %s", why);
	return s;
}

static void expect_refused(const char *text, const char *reason)
{
	json_t *root = json_loads(text, 0, NULL);
	cr_assert(root, "%s", text);
	char why[256] = "";
	cr_expect_eq(sc__schema_validate(root, why, sizeof(why)), -1, "accepted: %s", text);
	cr_expect_str_eq(why, reason, "%s", text);
	json_decref(root);
}

/* Checks value against s: NULL when it passes, else the reason (static buffer). */
static const char *check(const struct sc_schema *s, const char *value)
{
	static char why[256];
	json_error_t jerr;
	json_t *v = json_loads(value, JSON_DECODE_ANY, &jerr);
	cr_assert(v, "test value is not JSON: %s: %s", value, jerr.text);
	int rc = sc__schema_check(s, v, why, sizeof(why));
	json_decref(v);
	return rc == 0 ? NULL : why;
}

static void expect_pass(const struct sc_schema *s, const char *value)
{
	const char *why = check(s, value);
	cr_expect_null(why, "%s refused: %s", value, why);
}

static void expect_fail(const struct sc_schema *s, const char *value, const char *reason)
{
	const char *why = check(s, value);
	cr_expect(why && strstr(why, reason), "%s: expected \"%s\", got \"%s\"", value, reason,
		  why ? why : "(passed)");
}

#define ORDER_OK "\"customer\": \"ann\", \"items\": [{\"sku\": \"ABC-1234\", \"qty\": 2}]"

Test(schema, pydantic_model_schema_is_accepted_and_checked)
{
	struct sc_schema *s = compile(pydantic_order_schema);
	expect_pass(s, "{" ORDER_OK "}");
	expect_pass(s, "{" ORDER_OK ", \"priority\": \"high\", \"channel\": \"web\","
		       " \"discount\": 0.5, \"tags\": [\"a\", \"b\"], \"where\": [1, 2.5],"
		       " \"pet\": {\"kind\": \"dog\"}, \"extra\": {\"x\": 1}, \"discount\": null,"
		       " \"parent\": {" ORDER_OK ", \"parent\": null}}");
	expect_fail(s, "{\"customer\": \"ann\"}", "'items' is required");
	expect_fail(s, "{" ORDER_OK ", \"priority\": \"urgent\"}",
		    "priority: must be one of [\"low\",\"high\"]");
	expect_fail(s, "{" ORDER_OK ", \"channel\": \"app\"}", "channel: must be \"web\"");
	expect_fail(s, "{\"customer\": \"ann\", \"items\": [{\"sku\": \"ABC-1234\", \"qty\": 0}]}",
		    "items[0].qty: must be >= 1");
	expect_fail(s, "{\"customer\": \"ann\", \"items\": [{\"sku\": \"abc\", \"qty\": 1}]}",
		    "items[0].sku: does not match the pattern '^[A-Z]{3}-\\d{4}$'");
	expect_fail(s, "{\"customer\": \"ann\", \"items\": []}",
		    "items: must have at least 1 items");
	expect_fail(s, "{" ORDER_OK ", \"discount\": 1}",
		    "discount: matches no alternative of anyOf (must be < 1; expected null, got "
		    "integer)");
	expect_fail(s, "{" ORDER_OK ", \"tags\": [\"a\", \"a\"]}", "tags: items 0 and 1 are equal");
	expect_fail(s, "{" ORDER_OK ", \"where\": [1]}", "where: must have at least 2 items");
	expect_fail(s, "{" ORDER_OK ", \"where\": [1, \"x\"]}",
		    "where[1]: expected number, got string");
	expect_fail(s, "{" ORDER_OK ", \"extra\": {\"x\": \"1\"}}",
		    "extra.x: expected integer, got string");
	expect_fail(s, "{" ORDER_OK ", \"pet\": {\"kind\": \"cow\"}}",
		    "pet: matches no alternative");
	/* Through the recursive reference: the deepest complaint wins over "not null". */
	expect_fail(s,
		    "{" ORDER_OK ", \"parent\": {\"customer\": \"bob\", \"items\": [{\"sku\":"
		    " \"ABC-1234\", \"qty\": \"2\"}]}}",
		    "parent.items[0].qty: expected integer, got string");
	sc__schema_free(s);
}

Test(schema, lengths_count_code_points_not_bytes)
{
	struct sc_schema *s = compile(pydantic_order_schema);
	/* 8 characters, 16 bytes in UTF-8; then 9 characters; then 4 four-byte ones. */
	expect_pass(s,
		    "{\"customer\": \"\\u00fc\\u00fc\\u00fc\\u00fc\\u00fc\\u00fc\\u00fc\\u00fc\","
		    " \"items\": [{\"sku\": \"ABC-1234\", \"qty\": 2}]}");
	expect_fail(
		s,
		"{\"customer\": \"üüüüüüüüü\", \"items\": [{\"sku\": \"ABC-1234\", \"qty\": 2}]}",
		"customer: must be at most 8 characters long");
	expect_pass(s,
		    "{\"customer\": \"𝄞𝄞𝄞𝄞\", \"items\": [{\"sku\": \"ABC-1234\", \"qty\": 2}]}");
	sc__schema_free(s);
}

/* What the MCP reference servers publish (zod-to-json-schema, draft-07), plus the keywords
 * other MCP servers use. */
static const char mcp_schema[] =
	"{\"$schema\": \"http://json-schema.org/draft-07/schema#\", \"type\": \"object\","
	" \"properties\": {"
	"  \"path\": {\"type\": \"string\", \"minLength\": 1, \"format\": \"uri-reference\"},"
	"  \"edits\": {\"type\": \"array\", \"items\": {\"$ref\": \"#/definitions/edit\"}},"
	"  \"dryRun\": {\"type\": \"boolean\", \"default\": false, \"description\": \"Preview\"},"
	"  \"when\": {\"type\": \"string\", \"format\": \"date-time\"},"
	"  \"mode\": {\"oneOf\": [{\"const\": \"fast\"}, {\"const\": \"safe\", \"deprecated\": "
	"true}]},"
	"  \"level\": {\"allOf\": [{\"type\": \"integer\"}, {\"not\": {\"const\": 13}}],"
	"    \"exclusiveMinimum\": 0, \"exclusiveMaximum\": 100},"
	"  \"ratio\": {\"type\": \"number\", \"multipleOf\": 0.1, \"readOnly\": false},"
	"  \"headers\": {\"type\": \"object\", \"minProperties\": 1, \"maxProperties\": 2,"
	"    \"patternProperties\": {\"^x-\": {\"type\": \"string\"}},"
	"    \"additionalProperties\": false},"
	"  \"odd\": {\"$ref\": \"#/definitions/a~1b~0c\"},"
	"  \"pct\": {\"$ref\": \"#/definitions/with%20space\"}"
	" },"
	" \"required\": [\"path\", \"edits\"], \"additionalProperties\": false,"
	" \"definitions\": {"
	"  \"edit\": {\"type\": \"object\", \"properties\": {\"oldText\": {\"type\": \"string\"},"
	"    \"newText\": {\"type\": \"string\"}}, \"required\": [\"oldText\", \"newText\"],"
	"    \"additionalProperties\": false, \"$comment\": \"one replacement\"},"
	"  \"a/b~c\": {\"type\": \"integer\"},"
	"  \"with space\": {\"type\": \"boolean\"}"
	" }}";

Test(schema, mcp_style_schema_is_accepted_and_checked)
{
	struct sc_schema *s = compile(mcp_schema);
	expect_pass(s,
		    "{\"path\": \"a.txt\", \"edits\": [{\"oldText\": \"a\", \"newText\": \"b\"}],"
		    " \"when\": \"not a date: format is not checked\", \"mode\": \"safe\","
		    " \"level\": 12, \"ratio\": 0.3, \"headers\": {\"x-a\": \"1\"}, \"odd\": 1,"
		    " \"pct\": true}");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [{\"oldText\": \"a\"}]}",
		    "edits[0]: 'newText' is required");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"x\": 1}", "unexpected argument 'x'");
	expect_fail(s,
		    "{\"path\": \"a\", \"edits\": [{\"oldText\": \"a\", \"newText\": \"b\", \"c\": "
		    "1}]}",
		    "edits[0]: unexpected property 'c'");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"mode\": \"slow\"}",
		    "mode: matches no alternative of oneOf");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"level\": 13}",
		    "level: matches the schema under 'not'");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"level\": 0}", "level: must be > 0");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"level\": 100}", "level: must be < 100");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"level\": 2.5}",
		    "level: expected integer, got number");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"ratio\": 0.35}",
		    "ratio: must be a multiple of 0.1");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"headers\": {}}",
		    "headers: must have at least 1 properties");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"headers\": {\"x-a\": 1}}",
		    "headers.x-a: expected string, got integer");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"headers\": {\"y\": \"1\"}}",
		    "headers: unexpected property 'y'");
	expect_fail(s, "{\"path\": \"a\", \"edits\": [], \"odd\": true}",
		    "odd: expected integer, got boolean");
	expect_fail(s, "{\"path\": \"\", \"edits\": []}",
		    "path: must be at least 1 characters long");
	sc__schema_free(s);
}

Test(schema, refused_schemas_name_the_path_and_the_reason)
{
	expect_refused("{\"properties\": {\"a\": {\"if\": {}}}}",
		       "properties.a: unknown keyword 'if'");
	expect_refused("{\"anyOf\": [{\"type\": \"string\"}, {\"type\": \"objekt\"}]}",
		       "anyOf[1]: 'type' has an unknown type name 'objekt'");
	expect_refused("{\"$defs\": {\"X\": {\"items\": {\"minLength\": -1}}}}",
		       "$defs.X.items: 'minLength' must be a non-negative integer");
	expect_refused("{\"$ref\": \"http://example.com/s.json\"}",
		       "'$ref' 'http://example.com/s.json': only local references ('#/...') are "
		       "supported");
	expect_refused("{\"properties\": {\"a\": {\"$ref\": \"#/$defs/Nope\"}}}",
		       "properties.a: '$ref' '#/$defs/Nope' points to nothing");
	expect_refused("{\"properties\": {\"a\": {\"default\": {}}, \"b\": {\"$ref\":"
		       " \"#/properties/a/default\"}}}",
		       "properties.b: '$ref' '#/properties/a/default' does not point to a schema");
	expect_refused("{\"$ref\": \"#/a~2\", \"a~\": {}}", "'$ref' '#/a~2' has a bad '~' escape");
	expect_refused("{\"properties\": {\"a\": {\"pattern\": \"a(\"}}}",
		       "properties.a: bad pattern 'a(' at offset 2: missing closing parenthesis");
	expect_refused("{\"patternProperties\": {\"[\": {}}}",
		       "patternProperties: bad pattern '[' at offset 1: missing terminating ] for "
		       "character class");
	expect_refused("{\"multipleOf\": 0}", "'multipleOf' must be a number above 0");
	expect_refused("{\"allOf\": []}", "'allOf' must be a non-empty array of schemas");
	expect_refused("{\"type\": [\"string\", \"string\"]}", "'type' names 'string' twice");
	expect_refused("{\"properties\": {\"a\": {\"$id\": \"x\"}}}",
		       "properties.a: '$id' is only supported at the root (it would change what "
		       "'$ref' resolves against)");
	expect_refused("{\"items\": 3}", "items: a schema must be an object or a boolean");
	expect_refused("[]", "the parameter schema must be an object");
	char deep[1024] = "";
	for (int i = 0; i < 70; i++)
		strcat(deep, "{\"not\": ");
	strcat(deep, "{}");
	for (int i = 0; i < 70; i++)
		strcat(deep, "}");
	json_t *root = json_loads(deep, 0, NULL);
	char why[256];
	cr_expect_eq(sc__schema_validate(root, why, sizeof(why)), -1);
	cr_expect(strstr(why, "nested deeper than 64 levels"), "%s", why);
	json_decref(root);
}

Test(schema, ref_cycles_are_bounded_and_recursion_works)
{
	struct sc_schema *s = compile("{\"$ref\": \"#\"}");
	expect_fail(s, "{}", "schema nested deeper than 128 levels here (a '$ref' cycle?)");
	sc__schema_free(s);
	s = compile("{\"$defs\": {\"A\": {\"$ref\": \"#/$defs/B\"}, \"B\": {\"anyOf\":"
		    " [{\"$ref\": \"#/$defs/A\"}]}}, \"not\": {\"$ref\": \"#/$defs/A\"}}");
	expect_fail(s, "1", "a '$ref' cycle?"); /* a limit under "not" still refuses */
	sc__schema_free(s);
	/* 2^40 paths through allOf: the visit budget ends it. */
	char text[4096] = "{\"$defs\": {";
	for (int i = 0; i < 40; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text),
			 "\"D%d\": {\"allOf\": [{\"$ref\": \"#/$defs/D%d\"}, {\"$ref\":"
			 " \"#/$defs/D%d\"}]}, ",
			 i, i + 1, i + 1);
	strcat(text, "\"D40\": {\"type\": \"integer\"}}, \"$ref\": \"#/$defs/D0\"}");
	s = compile(text);
	expect_fail(s, "1", "checking took more than 2097152 steps");
	sc__schema_free(s);
	/* A tree through a recursive reference is checked to its leaves. */
	s = compile("{\"$defs\": {\"Node\": {\"type\": \"object\", \"properties\": {\"v\": "
		    "{\"type\": \"integer\"}, \"kids\": {\"type\": \"array\", \"items\": "
		    "{\"$ref\": \"#/$defs/Node\"}}}}}, \"$ref\": \"#/$defs/Node\"}");
	expect_pass(s, "{\"v\": 1, \"kids\": [{\"v\": 2, \"kids\": [{\"v\": 3}]}]}");
	expect_fail(s, "{\"v\": 1, \"kids\": [{\"v\": 2, \"kids\": [{\"v\": \"3\"}]}]}",
		    "kids[0].kids[0].v: expected integer, got string");
	sc__schema_free(s);
}

Test(schema, catastrophic_patterns_are_bounded_and_refuse)
{
	struct sc_schema *s = compile("{\"type\": \"string\", \"pattern\": \"^(a+)+$\"}");
	expect_pass(s, "\"aaaa\"");
	expect_fail(s, "\"b\"", "does not match the pattern");
	/* 2^40 ways to split the a's: refused once the step budget runs out, not after hours. */
	expect_fail(s, "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\"",
		    "pattern matching took more than 4194304 steps in this call");
	sc__schema_free(s);
	/* The budget is per call, across matches: many short strings that each match after
	 * 2^16 dead ends cannot add up to an unbounded cost. */
	s = compile("{\"type\": \"array\", \"items\": {\"pattern\": \"^(?:(a+)+$|a*!$)\"}}");
	char *many = malloc(200000), *p = many;
	*p++ = '[';
	for (int i = 0; i < 5000; i++)
		p += sprintf(p, "%s\"aaaaaaaaaaaaaaaa!\"", i ? "," : "");
	strcpy(p, "]");
	expect_fail(s, many, "pattern matching took more than 4194304 steps in this call");
	free(many);
	sc__schema_free(s);
	/* Running out is a refusal even where a failed match would pass. */
	s = compile("{\"not\": {\"pattern\": \"^(a+)+$\"}}");
	expect_pass(s, "\"b\"");
	expect_fail(s, "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!\"", "took more than");
	sc__schema_free(s);
	/* ECMA-262 flavour: unanchored, \u escapes, $ only at the very end. */
	s = compile("{\"pattern\": \"\\\\u00fc.$\"}");
	expect_pass(s, "\"xü€\"");
	expect_fail(s, "\"xü€\\n\"", "does not match");
	sc__schema_free(s);
}

/* A repeat that auto-possessification would make atomic ("[a-z]+@" becomes "[a-z]++@")
 * consumes the whole run inside one item, between two callouts: unanchored, every start
 * position rescans the rest, n^2 / 2 characters on a few steps each. The repeat must give its
 * characters back one callout at a time, so the budget sees the cost (this took hours for a
 * 16 MiB string; the timeout is the regression check). */
Test(schema, repeats_are_charged_per_character, .timeout = 30)
{
	struct sc_schema *s = compile("{\"type\": \"string\", \"pattern\": \"[a-z]+@\"}");
	expect_pass(s, "\"ann@\"");
	expect_fail(s, "\"ann\"", "does not match the pattern");
	size_t n = 1 << 20;
	char *big = malloc(n + 8);
	big[0] = '"';
	memset(big + 1, 'a', n);
	strcpy(big + 1 + n, "!@\"");
	expect_fail(s, big, "pattern matching took more than 4194304 steps in this call");
	free(big);
	sc__schema_free(s);
}

/* uniqueItems compares only items whose hashes are equal. Integers that round to one double
 * (2^62 - 256 ... 2^62 + 512) are unequal but must not share a hash, or 380,000 pairs of them
 * (16 MiB) cost 10^11 comparisons on the host (an hour); with a hash collision anyway, the
 * comparisons come out of the call's visit budget. */
Test(schema, unique_items_is_not_quadratic_in_equal_doubles, .timeout = 30)
{
	struct sc_schema *s = compile("{\"type\": \"array\", \"uniqueItems\": true}");
	expect_pass(s, "[4611686018427387904, 4611686018427387905]");
	expect_fail(s, "[4611686018427387904, 4611686018427387904.0]", "items 0 and 1 are equal");
	expect_pass(s, "[4611686018427387905, 4611686018427387904.0]");
	expect_fail(s, "[-0.0, 0]", "items 0 and 1 are equal");
	expect_fail(s, "[[1.5, 3], [1.5, 3.0]]", "items 0 and 1 are equal");
	enum { SIDE = 400 };
	char *big = malloc((size_t)SIDE * SIDE * 44 + 8), *p = big;
	*p++ = '[';
	for (int a = 0; a < SIDE; a++)
		for (int b = 0; b < SIDE; b++)
			p += sprintf(p, "%s[%lld,%lld]", a || b ? "," : "",
				     4611686018427387904LL - 200 + a,
				     4611686018427387904LL - 200 + b);
	strcpy(p, "]");
	expect_pass(s, big);
	free(big);
	sc__schema_free(s);
}

Test(schema, numbers_compare_exactly)
{
	struct sc_schema *s = compile("{\"type\": \"integer\", \"maximum\": 9007199254740992}");
	expect_pass(s, "9007199254740992");
	expect_fail(s, "9007199254740993", "must be <= 9007199254740992"); /* equal as doubles */
	expect_pass(s, "1.0");						   /* 1.0 is an integer */
	expect_fail(s, "1.5", "expected integer, got number");
	expect_fail(s, "1e300", "expected integer, got number"); /* beyond 64 bits */
	sc__schema_free(s);
	s = compile("{\"minimum\": 1, \"exclusiveMaximum\": 2.5}");
	expect_pass(s, "0.99999999999999999"); /* parses to 1.0; the callback gets 1.0 */
	expect_fail(s, "0.9999999999999999", "must be >= 1");
	expect_fail(s, "2.5", "must be < 2.5");
	sc__schema_free(s);
	s = compile("{\"minimum\": 0, \"exclusiveMinimum\": true}"); /* draft 4 */
	expect_fail(s, "0", "must be > 0");
	sc__schema_free(s);
	s = compile("{\"enum\": [1, {\"a\": [true, null]}], \"uniqueItems\": true}");
	expect_pass(s, "1.0");
	expect_pass(s, "{\"a\": [true, null]}");
	expect_fail(s, "2", "must be one of [1,{\"a\":[true,null]}]");
	sc__schema_free(s);
	s = compile("{\"uniqueItems\": true}");
	expect_fail(s, "[1, 2, 1.0]", "items 0 and 2 are equal");
	expect_fail(s, "[{\"a\": 1, \"b\": 2}, {\"b\": 2, \"a\": 1}]", "items 0 and 1 are equal");
	expect_pass(s, "[0, \"0\", false, null, [], {}, [0], {\"0\": 0}]");
	sc__schema_free(s);
}

Test(schema, the_callback_text_spells_the_checked_numbers)
{
	const char in[] = "{\"a\": 0.99999999999999999, \"b\": [12, -2.50, 1e5, 0.1, -0],"
			  " \"s\": \"0.99999999999999999 \\\" 1.50\", \"c\": 1E-400}";
	char *out = sc__json_exact_numbers(in, strlen(in));
	cr_assert_not_null(out);
	cr_expect_str_eq(out, "{\"a\": 1.0, \"b\": [12, -2.5, 100000.0, 0.1, -0],"
			      " \"s\": \"0.99999999999999999 \\\" 1.50\", \"c\": 0.0}");
	json_t *x = json_loads(in, 0, NULL), *y = json_loads(out, 0, NULL);
	cr_expect(json_equal(x, y), "the rewritten text parses to the same values");
	json_decref(x);
	json_decref(y);
	free(out);
}

/* JSON spells reals with '.', and jansson parses them so in any locale; the text the
 * callback gets must too, or under a decimal-comma LC_NUMERIC "[19e-1]" (one item >= 1,
 * checked) reached the callback as "[1,9.0]" (two items) and "1.9" as "1.0". Needs a locale
 * with a decimal comma (skipped without one; LOCPATH may point at a localedef output). */
Test(schema, the_callback_text_does_not_depend_on_the_locale)
{
	static const char *const commas[] = {"de_DE.UTF-8", "de_DE.utf8",  "fr_FR.UTF-8",
					     "fr_FR.utf8",  "nl_NL.UTF-8", "es_ES.UTF-8"};
	locale_t loc = (locale_t)0;
	for (size_t i = 0; !loc && i < sizeof(commas) / sizeof(commas[0]); i++)
		loc = newlocale(LC_NUMERIC_MASK, commas[i], (locale_t)0);
	if (!loc)
		cr_skip_test("no locale with a decimal comma is installed");
	locale_t old = uselocale(loc);
	char probe[16];
	snprintf(probe, sizeof(probe), "%.1f", 1.5);
	cr_assert_str_eq(probe, "1,5", "the locale has a decimal comma");
	const char in[] = "{\"x\": [19e-1], \"y\": 1.9, \"z\": 0.5e0}";
	char *out = sc__json_exact_numbers(in, strlen(in));
	struct sc_schema *s = compile("{\"properties\": {\"x\": {\"maxItems\": 1}},"
				      " \"maximum\": 2.5, \"minimum\": 1.5}");
	expect_fail(s, "1.25", "must be >= 1.5");
	sc__schema_free(s);
	uselocale(old);
	freelocale(loc);
	cr_assert_not_null(out);
	cr_expect_str_eq(out, "{\"x\": [1.9], \"y\": 1.9, \"z\": 0.5}");
	free(out);
}

static int noop(void *user, const char *args, char **result)
{
	*result = strdup("null");
	return 0;
}

Test(schema, real_tool_schemas_register_through_the_public_api)
{
	struct snapcell_config *cfg = snapcell_config_new();
	cr_expect_eq(snapcell_config_add_tool(cfg, "order", "", pydantic_order_schema,
					      SNAPCELL_APPROVAL_NEVER, noop, NULL, NULL),
		     0);
	cr_expect_eq(snapcell_config_add_tool(cfg, "edit", "", mcp_schema, SNAPCELL_APPROVAL_NEVER,
					      noop, NULL, NULL),
		     0);
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_add_tool(cfg, "bad", "", "{\"if\": {}}",
					      SNAPCELL_APPROVAL_NEVER, noop, NULL, &err),
		     SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, "add_tool bad: schema: unknown keyword 'if'");
	cr_expect_eq(snapcell_config_tool_count(cfg), 2);
	snapcell_config_free(cfg);
}
