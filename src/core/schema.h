/* The compiled form of a tool's parameter schema, shared by schema.c (which builds it when the
 * tool is registered) and schema_check.c (which checks call arguments against it). Everything
 * registration can work out once lives here, so checking a call never parses a reference or
 * compiles a pattern. Only these two files include this header. */
#ifndef SC_CORE_SCHEMA_H
#define SC_CORE_SCHEMA_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <stdbool.h>

/* What the checker looks up by the address of a schema part. */
enum sc_schema_node_kind {
	SC_NODE_REF,	 /* key: the string node of a "$ref"; target: what it points to */
	SC_NODE_PATTERN, /* key: the string node of a "pattern", or a patternProperties key */
};

struct sc_schema_node {
	const void *key;
	enum sc_schema_node_kind kind;
	const json_t *target;
	pcre2_code *code;
};

/* Immutable once built, so threads may check against it at once. */
struct sc_schema {
	json_t *root;		      /* one reference, held; never modified */
	struct sc_schema_node *nodes; /* sorted by (key, kind) */
	size_t n_nodes;
};

/* The node for key, or NULL (registration resolved every ref and pattern, so the checker
 * treats NULL as a bug and refuses the value). */
const struct sc_schema_node *sc__schema_node(const struct sc_schema *s, const void *key,
					     enum sc_schema_node_kind kind);

/* The keywords of the subset and what their values must be. */
enum sc_kw_kind {
	KW_ANY,		   /* any JSON: default, examples, const, discriminator */
	KW_STRING,	   /* title, description, format, $comment, $schema */
	KW_BOOL,	   /* deprecated, readOnly, writeOnly, uniqueItems */
	KW_COUNT,	   /* a non-negative integer: minLength, maxItems, ... */
	KW_NUMBER,	   /* minimum, maximum */
	KW_NUMBER_OR_BOOL, /* exclusiveMinimum/Maximum (draft 4 used a boolean) */
	KW_POSITIVE,	   /* multipleOf */
	KW_TYPE,	   /* a type name or a non-empty array of distinct ones */
	KW_SCHEMA,	   /* one subschema */
	KW_SCHEMA_ARRAY,   /* a non-empty array of subschemas */
	KW_ITEMS,	   /* a subschema, or (before 2020-12) an array of them */
	KW_SCHEMA_MAP,	   /* an object whose values are subschemas */
	KW_PATTERN_MAP,	   /* patternProperties: keys are patterns, values subschemas */
	KW_STRING_ARRAY,   /* required */
	KW_ARRAY,	   /* enum */
	KW_PATTERN,	   /* pattern */
	KW_REF,		   /* $ref */
	KW_ID,		   /* $id: only at the root */
};

/* path.name into out, cut short with "..." when it does not fit. */
void sc__schema_path(char *out, size_t len, const char *path, const char *name);

/* "path: msg" into why; a path too long to fit loses its start, never the reason. */
void sc__schema_reason(char *why, size_t why_len, const char *path, const char *msg);

/* The kind of a keyword, or -1 when it is not in the subset. */
int sc__schema_keyword(const char *name);

#endif
