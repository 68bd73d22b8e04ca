/* The setup message's codec: one table per object of the schema (setup.h) drives the encoder,
 * the decoder and the freeing alike, so the two sides cannot disagree on a key. Not the place
 * for what the values mean: the host chooses them, the helper and the template use them. */
#define _GNU_SOURCE
#include "setup.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "rpc/control.h"
#include "util/buf.h"
#include "util/util.h"

enum kind {
	STR,   /* char *, never null */
	NSTR,  /* char *, null allowed */
	U64,   /* uint64_t */
	INT,   /* int, >= -1 */
	BOOL,  /* bool */
	STRS,  /* char **, with its count at n_off */
	INTS,  /* int *, with its count at n_off */
	ARRAY, /* an array of sub's structs, with its count at n_off */
	OBJ,   /* a struct sub, embedded */
	NOBJ,  /* a pointer to a struct sub, null allowed */
	MAP,   /* string to string: names at off, values at n_off + ..., see env_field */
};

struct schema;
struct field {
	const char *key;
	enum kind kind;
	size_t off, n_off;
	const struct schema *sub;
};

struct schema {
	const struct field *fields;
	size_t n_fields, size;
};

#define F(type, key, kind)                                                                         \
	{                                                                                          \
#key, kind, offsetof(type, key), 0, NULL                                           \
	}
#define FN(type, key, kind, n)                                                                     \
	{                                                                                          \
#key, kind, offsetof(type, key), offsetof(type, n), NULL                           \
	}
#define FS(type, key, kind, n, sub)                                                                \
	{                                                                                          \
#key, kind, offsetof(type, key), n, sub                                            \
	}
#define SCHEMA(type, fields)                                                                       \
	{                                                                                          \
		fields, SC_ARRAY_LEN(fields), sizeof(type)                                         \
	}

static const struct field path_fields[] = {
	F(struct sc_setup_path, fd, INT),
	F(struct sc_setup_path, site, NSTR),
	F(struct sc_setup_path, host, NSTR),
};
static const struct schema path_schema = SCHEMA(struct sc_setup_path, path_fields);

static const struct field tool_fields[] = {
	F(struct sc_setup_tool, name, STR),
	F(struct sc_setup_tool, attr, STR),
	F(struct sc_setup_tool, description, STR),
};
static const struct schema tool_schema = SCHEMA(struct sc_setup_tool, tool_fields);

static const struct field net_fields[] = {
	FN(struct sc_setup_net, ports, INTS, n_ports),
	F(struct sc_setup_net, v6, BOOL),
	FN(struct sc_setup_net, addrs, STRS, n_addrs),
	F(struct sc_setup_net, hosts, STR),
	F(struct sc_setup_net, ca, STR),
};
static const struct schema net_schema = SCHEMA(struct sc_setup_net, net_fields);

static const struct field python_fields[] = {
	F(struct sc_setup_python, executable, STR),
	F(struct sc_setup_python, version, STR),
	F(struct sc_setup_python, exe_dir_fd, INT),
	FS(struct sc_setup_python, dirs, ARRAY, offsetof(struct sc_setup_python, n_dirs),
	   &path_schema),
	F(struct sc_setup_python, prelude_bytes, U64),
	F(struct sc_setup_python, sys_version, NSTR),
	F(struct sc_setup_python, prelude_hash, U64),
};
static const struct schema python_schema = SCHEMA(struct sc_setup_python, python_fields);

static const struct field guest_fields[] = {
	F(struct sc_setup_guest, fd, INT),
	F(struct sc_setup_guest, file, STR),
};
static const struct schema guest_schema = SCHEMA(struct sc_setup_guest, guest_fields);

static const struct field setup_fields[] = {
	F(struct sc_setup, root, STR),
	F(struct sc_setup, out, STR),
	F(struct sc_setup, input, STR),
	FS(struct sc_setup, python_paths, ARRAY, offsetof(struct sc_setup, n_python_paths),
	   &path_schema),
	F(struct sc_setup, spares, U64),
	F(struct sc_setup, tmp_bytes, U64),
	F(struct sc_setup, frame_cap, U64),
	F(struct sc_setup, output_bytes, U64),
	F(struct sc_setup, memory_bytes, U64),
	F(struct sc_setup, cpu_ms, U64),
	F(struct sc_setup, processes, U64),
	F(struct sc_setup, file_bytes, U64),
	F(struct sc_setup, open_files, U64),
	{"env", MAP, offsetof(struct sc_setup, env_names), offsetof(struct sc_setup, env_values),
	 NULL},
	F(struct sc_setup, level, INT),
	F(struct sc_setup, tmp, NSTR),
	F(struct sc_setup, own_uid, BOOL),
	F(struct sc_setup, reuse, BOOL),
	F(struct sc_setup, reuse_maps_text, BOOL),
	F(struct sc_setup, cgroup, NSTR),
	FS(struct sc_setup, tools, ARRAY, offsetof(struct sc_setup, n_tools), &tool_schema),
	FN(struct sc_setup, preloads, STRS, n_preloads),
	F(struct sc_setup, warmup, NSTR),
	FS(struct sc_setup, net, NOBJ, 0, &net_schema),
	F(struct sc_setup, network_notice, STR),
	FS(struct sc_setup, python, OBJ, 0, &python_schema),
	FS(struct sc_setup, guest, OBJ, 0, &guest_schema),
};
static const struct schema setup_schema = SCHEMA(struct sc_setup, setup_fields);

/* The env map keeps its names and values in two arrays; its count follows them. */
#define MAP_COUNT(values_off) ((values_off) + sizeof(char **))
_Static_assert(offsetof(struct sc_setup, n_env) == MAP_COUNT(offsetof(struct sc_setup, env_values)),
	       "the env map's count follows its values");

#define AT(base, off, type) ((type *)(void *)((char *)(base) + (off)))

/* ---- encoding ---- */

static json_t *encode_object(const struct schema *sc, const void *base);

static json_t *encode_list(const struct field *f, const void *base)
{
	size_t n = *AT(base, f->n_off, size_t);
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		json_t *v = f->kind == STRS ? json_string((*AT(base, f->off, char **))[i])
			    : f->kind == INTS
				    ? json_integer((*AT(base, f->off, int *))[i])
				    : encode_object(f->sub, (char *)*AT(base, f->off, void *) +
								    i * f->sub->size);
		if (json_array_append_new(a, v) < 0)
			json_decref(a), a = NULL;
	}
	return a;
}

static json_t *encode_map(const struct field *f, const void *base)
{
	char **names = *AT(base, f->off, char **), **values = *AT(base, f->n_off, char **);
	size_t n = *AT(base, MAP_COUNT(f->n_off), size_t);
	json_t *o = json_object();
	for (size_t i = 0; o && i < n; i++)
		if (json_object_set_new(o, names[i], json_string(values[i])) < 0)
			json_decref(o), o = NULL;
	return o;
}

static json_t *encode_field(const struct field *f, const void *base)
{
	const char *s = f->kind == STR || f->kind == NSTR ? *AT(base, f->off, char *) : NULL;
	void *p = f->kind == NOBJ ? *AT(base, f->off, void *) : NULL;
	switch (f->kind) {
	case STR:
	case NSTR:
		return s ? json_string(s) : json_null();
	case U64:
		return json_integer((json_int_t)*AT(base, f->off, uint64_t));
	case INT:
		return json_integer(*AT(base, f->off, int));
	case BOOL:
		return json_boolean(*AT(base, f->off, bool));
	case STRS:
	case INTS:
	case ARRAY:
		return encode_list(f, base);
	case OBJ:
		return encode_object(f->sub, AT(base, f->off, char));
	case NOBJ:
		return p ? encode_object(f->sub, p) : json_null();
	case MAP:
		return encode_map(f, base);
	}
	return NULL;
}

static json_t *encode_object(const struct schema *sc, const void *base)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < sc->n_fields; i++) {
		json_t *v = encode_field(&sc->fields[i], base);
		/* A required string left NULL is the encoder's bug: no message at all. */
		if (!v || (json_is_null(v) && sc->fields[i].kind == STR) ||
		    json_object_set_new(o, sc->fields[i].key, v) < 0)
			json_decref(o), o = NULL;
	}
	return o;
}

char *sc__setup_encode(const struct sc_setup *s, size_t *len)
{
	json_t *o = encode_object(&setup_schema, s);
	char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	size_t tail = s->python.prelude_bytes;
	if (!text || !tail) {
		if (text)
			*len = strlen(text);
		return text;
	}
	/* The compiled prelude's bytes after the JSON text's NUL. */
	size_t text_len = strlen(text);
	struct sc_buf b;
	sc__buf_init(&b, SIZE_MAX);
	int rc = sc__buf_reserve(&b, text_len + 1 + tail);
	if (rc == 0 && (rc = sc__buf_add(&b, text, text_len + 1)) == 0)
		rc = sc__buf_add(&b, s->python.prelude, tail);
	free(text);
	if (rc < 0) {
		sc__buf_free(&b);
		return NULL;
	}
	return sc__buf_take(&b, len);
}

/* ---- decoding ---- */

static int decode_object(json_t *o, const struct schema *sc, void *base, const char *key,
			 struct snapcell_error *err);

static int bad(struct snapcell_error *err, const char *key, const char *what)
{
	return sc__err(err, SNAPCELL_E_PROTOCOL, "setup message: %s: %s", key, what);
}

static int decode_string(json_t *v, const char *key, char **out, bool null_ok,
			 struct snapcell_error *err)
{
	if (json_is_null(v) && null_ok)
		return 0;
	if (!json_is_string(v))
		return bad(err, key, null_ok ? "not a string or null" : "not a string");
	if (!(*out = strdup(json_string_value(v))))
		return sc__err(err, -ENOMEM, "setup message: %s", key);
	return 0;
}

static int decode_int(json_t *v, const char *key, json_int_t min, json_int_t max, json_int_t *out,
		      struct snapcell_error *err)
{
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return bad(err, key, "not an integer in range");
	*out = json_integer_value(v);
	return 0;
}

static int decode_element(const struct field *f, json_t *v, void *list, size_t i,
			  struct snapcell_error *err)
{
	json_int_t n;
	int rc;
	if (f->kind == STRS)
		return decode_string(v, f->key, &((char **)list)[i], false, err);
	if (f->kind == INTS) {
		if ((rc = decode_int(v, f->key, -1, INT32_MAX, &n, err)) == 0)
			((int *)list)[i] = (int)n;
		return rc;
	}
	return decode_object(v, f->sub, (char *)list + i * f->sub->size, f->key, err);
}

static int decode_list(const struct field *f, json_t *v, void *base, struct snapcell_error *err)
{
	if (!json_is_array(v))
		return bad(err, f->key, "not an array");
	size_t n = json_array_size(v);
	size_t size = f->kind == STRS	? sizeof(char *)
		      : f->kind == INTS ? sizeof(int)
					: f->sub->size;
	void *list = calloc(n + 1, size);
	if (!list)
		return sc__err(err, -ENOMEM, "setup message: %s", f->key);
	*AT(base, f->off, void *) = list;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++) {
		rc = decode_element(f, json_array_get(v, i), list, i, err);
		*AT(base, f->n_off, size_t) = i + (rc == 0 || f->kind == ARRAY);
	}
	return rc;
}

static int decode_map(const struct field *f, json_t *v, void *base, struct snapcell_error *err)
{
	if (!json_is_object(v))
		return bad(err, f->key, "not an object");
	size_t n = json_object_size(v), i = 0;
	char **names = calloc(n + 1, sizeof(char *)), **values = calloc(n + 1, sizeof(char *));
	*AT(base, f->off, char **) = names;
	*AT(base, f->n_off, char **) = values;
	if (!names || !values)
		return sc__err(err, -ENOMEM, "setup message: %s", f->key);
	const char *name;
	json_t *value;
	json_object_foreach(v, name, value)
	{
		int rc = decode_string(value, f->key, &values[i], false, err);
		if (rc == 0 && !(names[i] = strdup(name)))
			rc = sc__err(err, -ENOMEM, "setup message: %s", f->key);
		*AT(base, MAP_COUNT(f->n_off), size_t) = ++i;
		if (rc < 0)
			return rc;
	}
	return 0;
}

static int decode_field(const struct field *f, json_t *v, void *base, struct snapcell_error *err)
{
	json_int_t n = 0;
	int rc = 0;
	switch (f->kind) {
	case STR:
	case NSTR:
		return decode_string(v, f->key, AT(base, f->off, char *), f->kind == NSTR, err);
	case U64:
		if ((rc = decode_int(v, f->key, 0, INT64_MAX, &n, err)) == 0)
			*AT(base, f->off, uint64_t) = (uint64_t)n;
		return rc;
	case INT:
		if ((rc = decode_int(v, f->key, -1, INT32_MAX, &n, err)) == 0)
			*AT(base, f->off, int) = (int)n;
		return rc;
	case BOOL:
		if (!json_is_boolean(v))
			return bad(err, f->key, "not a boolean");
		*AT(base, f->off, bool) = json_is_true(v);
		return 0;
	case STRS:
	case INTS:
	case ARRAY:
		return decode_list(f, v, base, err);
	case OBJ:
		return decode_object(v, f->sub, AT(base, f->off, char), f->key, err);
	case NOBJ:
		if (json_is_null(v))
			return 0;
		if (!(*AT(base, f->off, void *) = calloc(1, f->sub->size)))
			return sc__err(err, -ENOMEM, "setup message: %s", f->key);
		return decode_object(v, f->sub, *AT(base, f->off, void *), f->key, err);
	case MAP:
		return decode_map(f, v, base, err);
	}
	return bad(err, f->key, "unknown kind");
}

/* The first key of o that sc does not name, or NULL. */
static const char *unknown_key(json_t *o, const struct schema *sc)
{
	const char *key;
	json_t *v;
	json_object_foreach(o, key, v)
	{
		size_t i = 0;
		while (i < sc->n_fields && strcmp(sc->fields[i].key, key) != 0)
			i++;
		if (i == sc->n_fields)
			return key;
	}
	return NULL;
}

static int decode_object(json_t *o, const struct schema *sc, void *base, const char *key,
			 struct snapcell_error *err)
{
	if (!json_is_object(o))
		return bad(err, key, "not an object");
	const char *extra = unknown_key(o, sc);
	if (extra)
		return sc__err(err, SNAPCELL_E_PROTOCOL, "setup message: %s: unknown key %s", key,
			       extra);
	for (size_t i = 0; i < sc->n_fields; i++) {
		json_t *v = json_object_get(o, sc->fields[i].key);
		if (!v)
			return sc__err(err, SNAPCELL_E_PROTOCOL,
				       "setup message: %s: missing key %s", key, sc->fields[i].key);
		int rc = decode_field(&sc->fields[i], v, base, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int sc__setup_decode(const char *buf, size_t len, struct sc_setup *s, struct snapcell_error *err)
{
	memset(s, 0, sizeof(*s));
	json_error_t jerr;
	size_t text_len = strnlen(buf, len), tail = len - text_len - (text_len < len);
	json_t *root = json_loadb(buf, text_len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return sc__err(err, SNAPCELL_E_PROTOCOL, "setup message: %s", jerr.text);
	int rc = decode_object(root, &setup_schema, s, "setup", err);
	json_decref(root);
	if (rc == 0 && (tail != s->python.prelude_bytes || (text_len < len && !tail)))
		rc = sc__err(err, SNAPCELL_E_PROTOCOL,
			     "setup message: python: prelude_bytes %llu, %zu bytes follow",
			     (unsigned long long)s->python.prelude_bytes, tail);
	if (rc == 0 && tail && !(s->python.prelude = malloc(tail)))
		rc = sc__err(err, -ENOMEM, "setup message: prelude");
	if (rc == 0 && tail)
		memcpy(s->python.prelude, buf + text_len + 1, tail);
	return rc;
}

/* ---- freeing ---- */

static void clear_object(const struct schema *sc, void *base);

static void clear_list(const struct field *f, void *base)
{
	void *list = *AT(base, f->off, void *);
	size_t n = *AT(base, f->n_off, size_t);
	for (size_t i = 0; list && i < n; i++) {
		if (f->kind == STRS)
			free(((char **)list)[i]);
		else if (f->kind == ARRAY)
			clear_object(f->sub, (char *)list + i * f->sub->size);
	}
	free(list);
}

static void clear_map(const struct field *f, void *base)
{
	char **names = *AT(base, f->off, char **), **values = *AT(base, f->n_off, char **);
	size_t n = *AT(base, MAP_COUNT(f->n_off), size_t);
	for (size_t i = 0; i < n; i++) {
		free(names ? names[i] : NULL);
		free(values ? values[i] : NULL);
	}
	free(names);
	free(values);
}

static void clear_field(const struct field *f, void *base)
{
	void *p = NULL;
	switch (f->kind) {
	case STR:
	case NSTR:
		free(*AT(base, f->off, char *));
		return;
	case STRS:
	case INTS:
	case ARRAY:
		clear_list(f, base);
		return;
	case OBJ:
		clear_object(f->sub, AT(base, f->off, char));
		return;
	case NOBJ:
		if ((p = *AT(base, f->off, void *)))
			clear_object(f->sub, p);
		free(p);
		return;
	case MAP:
		clear_map(f, base);
		return;
	default:
		return;
	}
}

static void clear_object(const struct schema *sc, void *base)
{
	for (size_t i = 0; i < sc->n_fields; i++)
		clear_field(&sc->fields[i], base);
}

void sc__setup_clear(struct sc_setup *s)
{
	clear_object(&setup_schema, s);
	free(s->python.prelude);
	memset(s, 0, sizeof(*s));
}
