/* What the files of snapcell._native share: the exceptions and types, the Config object
 * (Sandbox reads it), error mapping and small conversions. Internal to the extension. */
#ifndef SNAPCELL_NATIVE_H
#define SNAPCELL_NATIVE_H

extern PyObject *sc__py_snapcell_error, *sc__py_setup_error;
extern PyTypeObject *sc__py_config_type, *sc__py_sandbox_type, *sc__py_session_type,
	*sc__py_snapshot_type;
extern PyType_Spec sc__py_config_spec, sc__py_sandbox_spec, sc__py_session_spec,
	sc__py_snapshot_spec, sc__py_cancel_spec;
extern PyTypeObject *sc__py_cancel_type;
/* _native_call.c: the asynchronous face of Python tools (snapcell_tool_start_fn and
 * snapcell_tool_cancel_fn over a tool callable's start method) and its Call type. */
extern PyType_Spec sc__py_call_spec;
extern PyTypeObject *sc__py_call_type;
void sc__py_start_tool(void *user, struct snapcell_call *call, const char *args_json);
void sc__py_cancel_tool(void *user, struct snapcell_call *call);
/* The run options for a run's cancel argument (None or a Cancel, which the caller keeps
 * referenced for the run); -1 with TypeError (_native_cancel.c). */
/* Run options from a Cancel (or None) and a Config of the run's own tools (NULL or None for
 * none; the caller keeps it alive for the run). */
int sc__py_run_options(PyObject *cancel, PyObject *tools, struct snapcell_run_options *opts);
/* A run's files (None, or a sequence of (name: str, data: bytes or None, host path: bytes or
 * None) tuples, as snapcell._sandbox makes them) into opts; what they borrow stays in *keep
 * until sc__py_run_files_clear. -1 with TypeError for another shape. */
struct sc_py_files {
	PyObject *items; /* a tuple of the given items (immutable, whatever the caller does) */
	struct snapcell_run_file *list;
};
int sc__py_run_files(PyObject *files, struct snapcell_run_options *opts, struct sc_py_files *keep);
void sc__py_run_files_clear(struct sc_py_files *keep);
/* The key of each thread's list of the sandboxes it is inside (_native_sandbox.c). */
extern PyObject *sc__py_in_flight_key;

typedef struct {
	PyObject ob_base;
	struct snapcell_config *cfg;
	PyObject *tools; /* name -> callable: the references the C tools' user_data borrow */
	int starting;	 /* Sandboxes being created from it with the GIL released */
} ConfigObject;

/* -1 with RuntimeError while a Sandbox is being created from the config (_native_config.c). */
int sc__py_config_writable(ConfigObject *self);

/* _native_policy.c: Config methods over the library's policy calls. */
PyObject *sc__py_config_set_helper(ConfigObject *self, PyObject *arg);
PyObject *sc__py_config_set_reject_links(ConfigObject *self, PyObject *arg);
PyObject *sc__py_config_set_reuse(ConfigObject *self, PyObject *arg);
PyObject *sc__py_config_allow(ConfigObject *self, PyObject *args);
PyObject *sc__py_config_allow_header(ConfigObject *self, PyObject *args);
PyObject *sc__py_config_map_host(ConfigObject *self, PyObject *args);
PyObject *sc__py_config_set_upstream_ca(ConfigObject *self, PyObject *arg);
PyObject *sc__py_config_remove_allowed(ConfigObject *self, PyObject *arg);
PyObject *sc__py_config_allowed(ConfigObject *self, PyObject *unused);
PyObject *sc__py_config_describe(ConfigObject *self, PyObject *args, PyObject *kwds);
PyObject *sc__py_config_instructions(ConfigObject *self, PyObject *args, PyObject *kwds);
PyObject *sc__py_config_set_tool_describe_format(ConfigObject *self, PyObject *args);
PyObject *sc__py_config_approval(ConfigObject *self, PyObject *arg);

/* Raise and return NULL (see _native.c). */
PyObject *sc__py_raise(PyObject *type, int code, const char *message);
PyObject *sc__py_fail(int rc, const struct snapcell_error *err, const char *what, PyObject *path,
		      bool setup);
PyObject *sc__py_closed(const char *what);
/* A run's result as the dict pynative.md describes; NULL with an exception. */
PyObject *sc__py_result(const struct snapcell_result *r);

/* Text from the library: UTF-8 by contract, but it may quote bytes a cell or a path chose. */
static inline PyObject *text(const char *s)
{
	return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

/* Steals v; -1 when v is NULL or the dict refuses it. */
static inline int put(PyObject *dict, const char *key, PyObject *v)
{
	if (!v)
		return -1;
	int rc = PyDict_SetItemString(dict, key, v);
	Py_DECREF(v);
	return rc;
}

/* Steals v. */
static inline int append(PyObject *list, PyObject *v)
{
	if (!v)
		return -1;
	int rc = PyList_Append(list, v);
	Py_DECREF(v);
	return rc;
}

static inline PyObject *fs_text(const char *s)
{
	return PyUnicode_DecodeFSDefaultAndSize(s, (Py_ssize_t)strlen(s));
}

static inline char *dup_bytes(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

#endif
