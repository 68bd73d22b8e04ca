/* snapcell._native: the CPython binding of include/snapcell.h. One Python type per handle
 * (Config, Sandbox, Session, Snapshot); everything else crosses as plain Python values. It
 * adapts the C API and holds no policy of its own: the pure-Python package builds the
 * user-facing API on it. Limited API 3.10 only, so one abi3 build serves every CPython since.
 * This file: the module, its functions, error mapping and results; _native_config.c has
 * Config and the tool callbacks, _native_policy.c the Config methods over the policy calls,
 * _native_sandbox.c Sandbox, Session and Snapshot, _native_cancel.c Cancel, _native_call.c
 * Call (tools' asynchronous face).
 *
 * Threads: the GIL is released while a sandbox starts, a cell runs, a session works and a
 * probe forks; tool callbacks take it back. A Sandbox counts the calls that run without the
 * GIL, and close() waits for them (_native_sandbox.c). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "snapcell.h"
#include "_native.h"

#define MOUNT_PATH_LEN 4096
#define ARRAY_LEN(a)   (sizeof(a) / sizeof((a)[0]))

PyObject *sc__py_snapcell_error, *sc__py_setup_error;
PyTypeObject *sc__py_config_type, *sc__py_sandbox_type, *sc__py_session_type, *sc__py_snapshot_type;

/* ---- errors ---- */

static PyObject *error_name(int code)
{
	return PyUnicode_FromString(snapcell_error_name(code));
}

/* Raises type(message) with the attributes code and name; returns NULL. */
PyObject *sc__py_raise(PyObject *type, int code, const char *message)
{
	PyObject *msg = text(message);
	PyObject *exc = msg ? PyObject_CallFunctionObjArgs(type, msg, NULL) : NULL;
	PyObject *code_obj = PyLong_FromLong(code);
	PyObject *name = error_name(code);
	if (exc && code_obj && name && PyObject_SetAttrString(exc, "code", code_obj) == 0 &&
	    PyObject_SetAttrString(exc, "name", name) == 0)
		PyErr_SetObject(type, exc);
	Py_XDECREF(msg);
	Py_XDECREF(exc);
	Py_XDECREF(code_obj);
	Py_XDECREF(name);
	return NULL;
}

/* Raises the exception for a failed call (pynative.md, "Errors") and returns NULL. The
 * message is the library's when it gave one, else "<what>: <strerror>". path (borrowed, may
 * be NULL) becomes an OSError's filename; setup marks sandbox creation. */
PyObject *sc__py_fail(int rc, const struct snapcell_error *err, const char *what, PyObject *path,
		      bool setup)
{
	char buf[SNAPCELL_ERROR_MESSAGE_LEN + 128];
	if (err && err->message[0])
		PyOS_snprintf(buf, sizeof(buf), "%s", err->message);
	else
		PyOS_snprintf(buf, sizeof(buf), "%s: %s", what, snapcell_strerror(rc));
	if (rc == SNAPCELL_E_INVAL || rc == SNAPCELL_E_TOO_BIG) {
		PyObject *msg = text(buf);
		if (msg) {
			PyErr_SetObject(PyExc_ValueError, msg);
			Py_DECREF(msg);
		}
		return NULL;
	}
	if (setup && (rc == SNAPCELL_E_HELPER || rc == SNAPCELL_E_ISOLATION ||
		      rc == SNAPCELL_E_TEMPLATE || rc == SNAPCELL_E_EXHAUSTED))
		return sc__py_raise(sc__py_setup_error, rc, buf);
	if (rc <= -4096)
		return sc__py_raise(sc__py_snapcell_error, rc, buf);
	if (rc == -ENOMEM)
		return PyErr_NoMemory();
	/* OSError(errno, ...) picks the subclass: FileNotFoundError for ENOENT, and so on. */
	PyObject *msg = text(buf);
	PyObject *exc =
		msg ? PyObject_CallFunction(PyExc_OSError, path ? "iOO" : "iO", -rc, msg, path)
		    : NULL;
	if (exc) {
		PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
		Py_DECREF(exc);
	}
	Py_XDECREF(msg);
	return NULL;
}

PyObject *sc__py_closed(const char *what)
{
	char buf[64];
	PyOS_snprintf(buf, sizeof(buf), "%s is closed", what);
	return sc__py_raise(sc__py_snapcell_error, SNAPCELL_E_TEMPLATE, buf);
}

/* ---- results ---- */

/* The names of the flags set in mask, in bit order (the library's names). */
static PyObject *flag_list(uint32_t mask, const char *(*name)(uint32_t))
{
	PyObject *list = PyList_New(0);
	for (unsigned bit = 0; list && bit < 32; bit++)
		if ((mask & (1u << bit)) && name(1u << bit) &&
		    append(list, PyUnicode_FromString(name(1u << bit))) < 0)
			Py_CLEAR(list);
	return list;
}

static PyObject *opt_text(const char *s)
{
	if (s)
		return text(s);
	Py_RETURN_NONE;
}

/* [(kind, allowed, target, address, port, method, path, http_status, header_added, rule,
 *   bytes_out, bytes_in, started_us, duration_us, upstream_tls, count)] */
static PyObject *net_events(const struct snapcell_result *r)
{
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < r->n_net_events; i++) {
		const struct snapcell_net_event *e = &r->net_events[i];
		const char *kind = snapcell_net_kind_name(e->kind);
		PyObject *item = Py_BuildValue(
			"(sNNNiNNiNNKKKKNK)", kind ? kind : "?", PyBool_FromLong(e->allowed),
			opt_text(e->target), opt_text(e->address), (int)e->port,
			opt_text(e->method), opt_text(e->path), e->http_status,
			PyBool_FromLong(e->header_added), opt_text(e->rule),
			(unsigned long long)e->bytes_out, (unsigned long long)e->bytes_in,
			(unsigned long long)e->started_us, (unsigned long long)e->duration_us,
			PyBool_FromLong(e->upstream_tls), (unsigned long long)e->count);
		if (append(list, item) < 0)
			Py_CLEAR(list);
	}
	return list;
}

static PyObject *tool_calls(const struct snapcell_result *r)
{
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < r->n_tool_calls; i++) {
		const struct snapcell_tool_call *c = &r->tool_calls[i];
		/* The name is what the cell asked for: any bytes, cut at 64. */
		PyObject *name = text(c->name);
		if (append(list, name ? Py_BuildValue("(NnKN)", name, (Py_ssize_t)c->args_bytes,
						      (unsigned long long)c->duration_us,
						      PyBool_FromLong(c->ok))
				      : NULL) < 0)
			Py_CLEAR(list);
	}
	return list;
}

static PyObject *artifacts(const struct snapcell_result *r)
{
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < r->n_artifacts; i++) {
		const struct snapcell_artifact *a = &r->artifacts[i];
		PyObject *path = fs_text(a->path);
		PyObject *data =
			PyBytes_FromStringAndSize((const char *)a->data, (Py_ssize_t)a->size);
		PyObject *item =
			path && data ? Py_BuildValue("(OsO)", path, a->media_type, data) : NULL;
		Py_XDECREF(path);
		Py_XDECREF(data);
		if (append(list, item) < 0)
			Py_CLEAR(list);
	}
	return list;
}

static PyObject *skipped(const struct snapcell_result *r)
{
	PyObject *list = PyList_New(0);
	for (size_t i = 0; list && i < r->n_skipped_listed; i++) {
		PyObject *path = fs_text(r->skipped[i].path);
		if (append(list, path ? Py_BuildValue("(Ns)", path, r->skipped[i].reason) : NULL) <
		    0)
			Py_CLEAR(list);
	}
	return list;
}

/* None, or (id, name, arguments JSON) of the call a paused run waits on. */
static PyObject *pending(const struct snapcell_result *r)
{
	const struct snapcell_pending_call *p = r->pending;
	if (!p)
		Py_RETURN_NONE;
	return Py_BuildValue("(Kss)", (unsigned long long)p->id, p->name, p->arguments);
}

/* [(id, name, arguments, verdict, text, decided_by, decided_at_ms, waited_us, call_index)] */
static PyObject *decisions(const struct snapcell_result *r)
{
	PyObject *list = PyList_New((Py_ssize_t)r->n_decisions);
	for (size_t i = 0; list && i < r->n_decisions; i++) {
		const struct snapcell_decision *d = &r->decisions[i];
		const char *verdict = snapcell_verdict_name(d->verdict);
		PyObject *index = d->call_index == SIZE_MAX ? Py_NewRef(Py_None)
							    : PyLong_FromSize_t(d->call_index);
		PyObject *item =
			index ? Py_BuildValue("(KssszzKKN)", (unsigned long long)d->pending_id,
					      d->name, d->arguments, verdict ? verdict : "unknown",
					      d->text, d->decided_by,
					      (unsigned long long)d->decided_at_ms,
					      (unsigned long long)d->waited_us, index)
			      : NULL;
		if (!item) {
			Py_CLEAR(list);
			break;
		}
		PyList_SetItem(list, (Py_ssize_t)i, item);
	}
	return list;
}

/* How the run ended in the library's words (snapcell_result_summary). */
static PyObject *summary(const struct snapcell_result *r)
{
	char *text = NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_result_summary(r, &text, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "result summary", NULL, false);
	PyObject *s = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
	free(text);
	return s;
}

/* The value as the model is told it (snapcell_result_value_text), or None. */
static PyObject *value_text(const struct snapcell_result *r)
{
	char *text = NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_result_value_text(r, &text, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "result value", NULL, false);
	if (!text)
		Py_RETURN_NONE;
	PyObject *s = PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
	free(text);
	return s;
}

/* The last expression's JSON text, or None. */
static PyObject *value_json(const struct snapcell_result *r)
{
	const char *text = snapcell_result_value_json(r);
	if (!text)
		Py_RETURN_NONE;
	return PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "strict");
}

PyObject *sc__py_result(const struct snapcell_result *r)
{
	PyObject *d = PyDict_New();
	const char *status = snapcell_status_name(r->status);
	const char *level = snapcell_isolation_name(r->isolation);
	const char *state = snapcell_value_state_name(r->value_state);
	if (!d || put(d, "status", PyUnicode_FromString(status ? status : "unknown")) < 0 ||
	    put(d, "exit_code", PyLong_FromLong(r->exit_code)) < 0 ||
	    put(d, "term_signal", PyLong_FromLong(r->term_signal)) < 0 ||
	    put(d, "limits_hit", flag_list(r->limits_hit, snapcell_limit_flag_name)) < 0 ||
	    put(d, "stdout",
		PyUnicode_DecodeUTF8(r->stdout_buf, (Py_ssize_t)r->stdout_len, "replace")) < 0 ||
	    put(d, "stderr",
		PyUnicode_DecodeUTF8(r->stderr_buf, (Py_ssize_t)r->stderr_len, "replace")) < 0 ||
	    put(d, "stdout_truncated", PyBool_FromLong(r->stdout_truncated)) < 0 ||
	    put(d, "stderr_truncated", PyBool_FromLong(r->stderr_truncated)) < 0 ||
	    put(d, "wall_us", PyLong_FromUnsignedLongLong(r->wall_us)) < 0 ||
	    put(d, "cpu_us", PyLong_FromUnsignedLongLong(r->cpu_us)) < 0 ||
	    put(d, "peak_memory_bytes", PyLong_FromUnsignedLongLong(r->peak_memory_bytes)) < 0 ||
	    put(d, "peak_rss_bytes", PyLong_FromUnsignedLongLong(r->peak_rss_bytes)) < 0 ||
	    put(d, "isolation", PyUnicode_FromString(level ? level : "unknown")) < 0 ||
	    put(d, "summary", summary(r)) < 0 || put(d, "tool_calls", tool_calls(r)) < 0 ||
	    put(d, "tool_calls_dropped", PyLong_FromSize_t(r->n_tool_calls_dropped)) < 0 ||
	    put(d, "artifacts", artifacts(r)) < 0 || put(d, "skipped", skipped(r)) < 0 ||
	    put(d, "skipped_count", PyLong_FromSize_t(r->n_skipped)) < 0 ||
	    put(d, "output_limits_hit",
		flag_list(r->output_limits_hit, snapcell_output_limit_flag_name)) < 0 ||
	    put(d, "pending", pending(r)) < 0 || put(d, "decisions", decisions(r)) < 0 ||
	    put(d, "value_json", value_json(r)) < 0 || put(d, "value_text", value_text(r)) < 0 ||
	    put(d, "value_state", PyUnicode_FromString(state ? state : "unknown")) < 0 ||
	    put(d, "network_events", net_events(r)) < 0 ||
	    put(d, "network_limits_hit", flag_list(r->net_limits_hit, snapcell_net_hit_name)) < 0)
		Py_CLEAR(d);
	return d;
}

/* ---- module functions ---- */

static PyObject *mod_version(PyObject *mod, PyObject *unused)
{
	return PyUnicode_FromString(snapcell_version());
}

static PyObject *mod_normalize_mount_path(PyObject *mod, PyObject *arg)
{
	PyObject *in;
	if (!PyUnicode_FSConverter(arg, &in))
		return NULL;
	char out[MOUNT_PATH_LEN];
	struct snapcell_error err = {0};
	int rc = snapcell_normalize_mount_path(PyBytes_AsString(in), out, sizeof(out), &err);
	Py_DECREF(in);
	if (rc < 0)
		return sc__py_fail(rc, &err, "normalize_mount_path", NULL, false);
	return fs_text(out);
}

static PyObject *mod_normalize_domain(PyObject *mod, PyObject *arg)
{
	const char *in = PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, NULL) : NULL;
	if (!in) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError,
					"normalize_domain: the target must be a str");
		return NULL;
	}
	char out[SNAPCELL_TARGET_MAX];
	struct snapcell_error err = {0};
	int rc = snapcell_normalize_domain(in, out, sizeof(out), &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "normalize_domain", NULL, false);
	return text(out);
}

static PyObject *mod_tree_signature(PyObject *mod, PyObject *arg)
{
	PyObject *path;
	if (!PyUnicode_FSConverter(arg, &path))
		return NULL;
	char out[SNAPCELL_SIGNATURE_LEN];
	struct snapcell_error err = {0};
	int rc;
	const char *p = PyBytes_AsString(path);
	Py_BEGIN_ALLOW_THREADS;
	rc = snapcell_tree_signature(p, out, &err);
	Py_END_ALLOW_THREADS;
	Py_DECREF(path);
	if (rc < 0)
		return sc__py_fail(rc, &err, "tree_signature", arg, false);
	return PyUnicode_FromString(out);
}

static PyObject *mod_probe(PyObject *mod, PyObject *unused)
{
	struct snapcell_probe pr;
	struct snapcell_error err = {0};
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	rc = snapcell_probe_host(&pr, &err);
	Py_END_ALLOW_THREADS;
	if (rc < 0)
		return sc__py_fail(rc, &err, "probe", NULL, false);
	PyObject *mechs = PyList_New(0);
	for (int i = 0; mechs && i < SNAPCELL_MECH__COUNT; i++) {
		const struct snapcell_mechanism_report *m = &pr.mech[i];
		PyObject *d = PyDict_New();
		if (!d || put(d, "name", text(m->name)) < 0 ||
		    put(d, "available", PyBool_FromLong(m->available)) < 0 ||
		    put(d, "used", PyBool_FromLong(m->used)) < 0 ||
		    put(d, "detail", text(m->detail)) < 0)
			Py_CLEAR(d);
		if (append(mechs, d) < 0)
			Py_CLEAR(mechs);
	}
	const char *level = snapcell_isolation_name(pr.level);
	struct snapcell_reuse_probe rp;
	snapcell_probe_reuse(&rp, NULL);
	PyObject *reuse = mechs ? PyDict_New() : NULL;
	if (reuse &&
	    (put(reuse, "userfaultfd_wp_async", PyBool_FromLong(rp.userfaultfd_wp_async)) < 0 ||
	     put(reuse, "pagemap_scan", PyBool_FromLong(rp.pagemap_scan)) < 0 ||
	     put(reuse, "ptrace_child", PyBool_FromLong(rp.ptrace_child)) < 0 ||
	     put(reuse, "available", PyBool_FromLong(rp.available)) < 0 ||
	     put(reuse, "procmap_query", PyBool_FromLong(rp.procmap_query)) < 0 ||
	     put(reuse, "detail", text(rp.detail)) < 0))
		Py_CLEAR(reuse);
	PyObject *d = reuse ? PyDict_New() : NULL;
	if (d && (put(d, "level", PyUnicode_FromString(level ? level : "unknown")) < 0 ||
		  PyDict_SetItemString(d, "mechanisms", mechs) < 0 ||
		  PyDict_SetItemString(d, "reuse", reuse) < 0))
		Py_CLEAR(d);
	Py_XDECREF(reuse);
	Py_XDECREF(mechs);
	return d;
}

static PyObject *mod_execute_code_schema(PyObject *self, PyObject *stateful)
{
	int on = PyObject_IsTrue(stateful);
	if (on < 0)
		return NULL;
	return text(snapcell_execute_code_schema(on ? SNAPCELL_SCHEMA_STATEFUL : 0));
}

static PyObject *mod_limit_names(PyObject *self, PyObject *unused)
{
	PyObject *names = PyTuple_New(SNAPCELL_LIMIT__COUNT);
	for (int i = 0; names && i < SNAPCELL_LIMIT__COUNT; i++) {
		PyObject *name = text(snapcell_limit_name((enum snapcell_limit)i));
		if (!name || PyTuple_SetItem(names, i, name) < 0)
			Py_CLEAR(names);
	}
	return names;
}

/* status_headline(name): the library's headline for the status it names, or None. */
static PyObject *mod_status_headline(PyObject *self, PyObject *name)
{
	const char *want = PyUnicode_AsUTF8AndSize(name, NULL);
	if (!want)
		return NULL;
	for (int st = 0; snapcell_status_name((enum snapcell_status)st); st++)
		if (!strcmp(want, snapcell_status_name((enum snapcell_status)st)))
			return text(snapcell_status_headline((enum snapcell_status)st));
	Py_RETURN_NONE;
}

/* tool_cancel_fd(): snapcell_tool_cancel_fd() of the calling thread. Read with the GIL held
 * by a tool's trampoline, which runs on the run's thread inside the library's callback. */
static PyObject *mod_tool_cancel_fd(PyObject *self, PyObject *unused)
{
	return PyLong_FromLong(snapcell_tool_cancel_fd());
}

static PyMethodDef module_methods[] = {
	{"tool_cancel_fd", mod_tool_cancel_fd, METH_NOARGS,
	 "tool_cancel_fd() -> int: inside a tool call on the run's thread, a descriptor that "
	 "becomes readable once the run is cancelled (poll it only); -1 otherwise."},
	{"execute_code_schema", mod_execute_code_schema, METH_O,
	 "execute_code_schema(stateful) -> str: the execute_code tool's input schema (JSON)."},
	{"status_headline", mod_status_headline, METH_O,
	 "status_headline(status) -> str | None: the library's short title for how a run ended."},
	{"limit_names", mod_limit_names, METH_NOARGS,
	 "limit_names() -> tuple[str, ...]: the library's limit names, in its order."},
	{"version", mod_version, METH_NOARGS, "version() -> str: the library's version."},
	{"normalize_mount_path", mod_normalize_mount_path, METH_O,
	 "normalize_mount_path(path) -> '/input/...'; ValueError for '..' or /input itself."},
	{"normalize_domain", mod_normalize_domain, METH_O,
	 "normalize_domain(target) -> 'host' or 'host:port'; ValueError for a malformed one."},
	{"tree_signature", mod_tree_signature, METH_O,
	 "tree_signature(path) -> str: 32 hex digits that change when a file in the tree does."},
	{"probe", mod_probe, METH_NOARGS,
	 "probe() -> {'level': str, 'mechanisms': [{'name', 'available', 'used', 'detail'}]}"},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef native_module = {
	PyModuleDef_HEAD_INIT,
	"snapcell._native",
	"The C binding of libsnapcell (include/snapcell.h); the snapcell package wraps it.",
	-1,
	module_methods,
	NULL,
	NULL,
	NULL,
	NULL,
};

static PyObject *new_error(const char *name, const char *doc, PyObject *base)
{
	PyObject *attrs = Py_BuildValue("{sOsO}", "code", Py_None, "name", Py_None);
	PyObject *type = attrs ? PyErr_NewExceptionWithDoc(name, doc, base, attrs) : NULL;
	Py_XDECREF(attrs);
	return type;
}

static int add_type(PyObject *mod, PyType_Spec *spec, PyTypeObject **out)
{
	*out = (PyTypeObject *)PyType_FromSpec(spec);
	return *out ? PyModule_AddType(mod, *out) : -1;
}

PyMODINIT_FUNC PyInit__native(void);
PyMODINIT_FUNC PyInit__native(void)
{
	PyObject *mod = PyModule_Create(&native_module);
	if (!mod)
		return NULL;
	sc__py_in_flight_key = PyUnicode_InternFromString("snapcell._native.in_flight");
	sc__py_snapcell_error =
		new_error("snapcell._native.SnapcellError",
			  "A snapcell failure: code (int) and name ('SNAPCELL_E_HELPER').",
			  PyExc_RuntimeError);
	sc__py_setup_error = sc__py_snapcell_error
				     ? new_error("snapcell._native.SetupError",
						 "The sandbox could not be created (helper, "
						 "isolation or template failure).",
						 sc__py_snapcell_error)
				     : NULL;
	if (!sc__py_in_flight_key || !sc__py_setup_error ||
	    PyModule_AddObjectRef(mod, "SnapcellError", sc__py_snapcell_error) < 0 ||
	    PyModule_AddObjectRef(mod, "SetupError", sc__py_setup_error) < 0 ||
	    PyModule_AddIntConstant(mod, "VALUE_MAX_BYTES", SNAPCELL_VALUE_MAX_BYTES) < 0 ||
	    add_type(mod, &sc__py_config_spec, &sc__py_config_type) < 0 ||
	    add_type(mod, &sc__py_sandbox_spec, &sc__py_sandbox_type) < 0 ||
	    add_type(mod, &sc__py_session_spec, &sc__py_session_type) < 0 ||
	    add_type(mod, &sc__py_snapshot_spec, &sc__py_snapshot_type) < 0 ||
	    add_type(mod, &sc__py_cancel_spec, &sc__py_cancel_type) < 0 ||
	    add_type(mod, &sc__py_call_spec, &sc__py_call_type) < 0) {
		Py_DECREF(mod);
		return NULL;
	}
	return mod;
}
