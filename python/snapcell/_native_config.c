/* snapcell._native: Config, and the trampoline through which tools call back into Python. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "snapcell.h"
#include "_native.h"

/* The limit named name, or -1 with ValueError listing the valid names. */
static int limit_from_name(const char *name)
{
	enum snapcell_limit limit;
	if (snapcell_limit_from_name(name, &limit, NULL) == 0)
		return (int)limit;
	char valid[512] = "";
	size_t off = 0;
	for (int i = 0; i < SNAPCELL_LIMIT__COUNT && off < sizeof(valid); i++)
		off += (size_t)PyOS_snprintf(valid + off, sizeof(valid) - off, "%s%s",
					     i ? ", " : "", snapcell_limit_name(i));
	PyErr_Format(PyExc_ValueError, "unknown limit '%s'; valid: %s", name, valid);
	return -1;
}

/* ---- tool callbacks ---- */

/* The message of the pending exception, malloc'd: str(exc), else its type's name. Clears it. */
static char *exception_message(void)
{
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	PyErr_NormalizeException(&type, &value, &tb);
	char *msg = NULL;
	PyObject *s = value ? PyObject_Str(value) : NULL;
	Py_ssize_t n;
	const char *utf8 = s ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
	if (!utf8) {
		PyErr_Clear();
		Py_XDECREF(s);
		s = type ? PyObject_GetAttrString(type, "__name__") : NULL;
		utf8 = s ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
	}
	if (utf8)
		msg = dup_bytes(utf8, (size_t)n);
	PyErr_Clear();
	Py_XDECREF(s);
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
	return msg;
}

/* snapcell_tool_fn: user is the callable, kept alive by the Sandbox that runs. Called on the
 * run's thread, which released the GIL. No exception outlives the call. */
static int call_tool(void *user, const char *args_json, char **result)
{
	PyGILState_STATE gil = PyGILState_Ensure();
	int rc = 1;
	*result = NULL;
	PyObject *args = PyUnicode_DecodeUTF8(args_json, (Py_ssize_t)strlen(args_json), "strict");
	PyObject *ret = args ? PyObject_CallFunctionObjArgs((PyObject *)user, args, NULL) : NULL;
	if (ret && PyUnicode_Check(ret)) {
		Py_ssize_t n;
		const char *s = PyUnicode_AsUTF8AndSize(ret, &n);
		if (s && memchr(s, 0, (size_t)n)) {
			*result =
				dup_bytes("tool callback returned a str with a NUL character", 49);
		} else if (s) {
			*result = dup_bytes(s, (size_t)n);
			rc = 0;
		}
	} else if (ret) {
		char buf[160];
		PyObject *tname = PyObject_GetAttrString((PyObject *)Py_TYPE(ret), "__name__");
		Py_ssize_t n;
		const char *t = tname ? PyUnicode_AsUTF8AndSize(tname, &n) : NULL;
		PyOS_snprintf(buf, sizeof(buf),
			      "tool callback returned %.64s, not str (a JSON text)",
			      t ? t : "an object");
		Py_XDECREF(tname);
		*result = dup_bytes(buf, strlen(buf));
	}
	if (PyErr_Occurred()) {
		free(*result);
		*result = exception_message();
		rc = 1;
	}
	Py_XDECREF(args);
	Py_XDECREF(ret);
	PyGILState_Release(gil);
	return rc;
}

/* ---- Config ---- */

/* A config is read by sandbox creation without the GIL; changing it then would race. */
int sc__py_config_writable(ConfigObject *self)
{
	if (self->starting == 0)
		return 0;
	PyErr_SetString(PyExc_RuntimeError,
			"Config is in use: a Sandbox is being created from it in another thread");
	return -1;
}

static PyObject *config_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
	if (!PyArg_ParseTuple(args, ":Config") || (kwds && PyObject_Length(kwds) > 0)) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "Config() takes no arguments");
		return NULL;
	}
	allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
	ConfigObject *self = (ConfigObject *)alloc(type, 0);
	if (!self)
		return NULL;
	self->tools = PyDict_New();
	self->cfg = snapcell_config_new();
	if (!self->tools || !self->cfg) {
		Py_DECREF(self);
		return PyErr_NoMemory();
	}
	return (PyObject *)self;
}

static int config_traverse(ConfigObject *self, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(self));
	Py_VISIT(self->tools);
	return 0;
}

/* Only an unreachable config is cleared: nothing can call its tools any more. */
static int config_clear(ConfigObject *self)
{
	Py_CLEAR(self->tools);
	return 0;
}

static void config_dealloc(ConfigObject *self)
{
	PyTypeObject *type = Py_TYPE(self);
	PyObject_GC_UnTrack(self);
	snapcell_config_free(self->cfg);
	config_clear(self);
	freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
	tp_free(self);
	Py_DECREF(type);
}

static PyObject *config_set_limit(ConfigObject *self, PyObject *args)
{
	const char *name;
	PyObject *value;
	if (!PyArg_ParseTuple(args, "sO:set_limit", &name, &value) ||
	    sc__py_config_writable(self) < 0)
		return NULL;
	int limit = limit_from_name(name);
	if (limit < 0)
		return NULL;
	if (PyBool_Check(value) || !PyLong_Check(value))
		return PyErr_Format(PyExc_TypeError, "limit %s: expected int, not %s", name,
				    PyBool_Check(value) ? "bool" : "another type");
	unsigned long long v = PyLong_AsUnsignedLongLong(value);
	if (v == (unsigned long long)-1 && PyErr_Occurred()) {
		PyErr_Clear();
		return PyErr_Format(PyExc_ValueError, "limit %s: %R is out of range", name, value);
	}
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_limit(self->cfg, (enum snapcell_limit)limit, v, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "set_limit", NULL, false);
	Py_RETURN_NONE;
}

static PyObject *config_get_limit(ConfigObject *self, PyObject *args)
{
	const char *name;
	if (!PyArg_ParseTuple(args, "s:get_limit", &name))
		return NULL;
	int limit = limit_from_name(name);
	if (limit < 0)
		return NULL;
	return PyLong_FromUnsignedLongLong(
		snapcell_config_get_limit(self->cfg, (enum snapcell_limit)limit));
}

static PyObject *config_set_env(ConfigObject *self, PyObject *args)
{
	const char *name, *value;
	if (!PyArg_ParseTuple(args, "ss:set_env", &name, &value) ||
	    sc__py_config_writable(self) < 0)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_env(self->cfg, name, value, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "set_env", NULL, false);
	Py_RETURN_NONE;
}

static PyObject *config_add_python_path(ConfigObject *self, PyObject *args)
{
	PyObject *dir;
	if (sc__py_config_writable(self) < 0 ||
	    !PyArg_ParseTuple(args, "O&:add_python_path", PyUnicode_FSConverter, &dir))
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_add_python_path(self->cfg, PyBytes_AsString(dir), &err);
	if (rc < 0)
		sc__py_fail(rc, &err, "add_python_path", NULL, false);
	Py_DECREF(dir);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *config_set_venv(ConfigObject *self, PyObject *args)
{
	PyObject *dir;
	if (sc__py_config_writable(self) < 0 ||
	    !PyArg_ParseTuple(args, "O&:set_venv", PyUnicode_FSConverter, &dir))
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_venv(self->cfg, PyBytes_AsString(dir), &err);
	if (rc < 0)
		sc__py_fail(rc, &err, "set_venv", NULL, false);
	Py_DECREF(dir);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *config_set_python(ConfigObject *self, PyObject *args)
{
	PyObject *path;
	if (sc__py_config_writable(self) < 0 ||
	    !PyArg_ParseTuple(args, "O&:set_python", PyUnicode_FSConverter, &path))
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_python(self->cfg, PyBytes_AsString(path), &err);
	if (rc < 0)
		sc__py_fail(rc, &err, "set_python", NULL, false);
	Py_DECREF(path);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *config_python_info(ConfigObject *self, PyObject *unused)
{
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	int rc = snapcell_config_python_info(self->cfg, &info, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "python_info", NULL, false);
	PyObject *d = PyDict_New();
	if (!d || put(d, "executable", fs_text(info.executable)) < 0 ||
	    put(d, "chosen_by", PyUnicode_FromString(info.chosen_by)) < 0 ||
	    put(d, "version", PyUnicode_FromString(info.version)) < 0 ||
	    put(d, "version_info", Py_BuildValue("(II)", info.major, info.minor)) < 0 ||
	    put(d, "warning", PyUnicode_FromString(info.warning)) < 0) {
		Py_XDECREF(d);
		return NULL;
	}
	return d;
}

static PyObject *config_add_preload(ConfigObject *self, PyObject *args)
{
	const char *module;
	if (sc__py_config_writable(self) < 0 || !PyArg_ParseTuple(args, "s:add_preload", &module))
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_add_preload(self->cfg, module, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "add_preload", NULL, false);
	Py_RETURN_NONE;
}

static PyObject *config_set_warmup(ConfigObject *self, PyObject *arg)
{
	if (sc__py_config_writable(self) < 0)
		return NULL;
	if (arg != Py_None && !PyUnicode_Check(arg)) {
		PyErr_SetString(PyExc_TypeError, "set_warmup() wants a str (Python code) or None");
		return NULL;
	}
	Py_ssize_t len = 0;
	const char *code = arg == Py_None ? NULL : PyUnicode_AsUTF8AndSize(arg, &len);
	if (arg != Py_None && !code)
		return NULL;
	if (code && strlen(code) != (size_t)len)
		return PyErr_Format(PyExc_ValueError, "set_warmup: a NUL character in the code");
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_warmup(self->cfg, code, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "set_warmup", NULL, false);
	Py_RETURN_NONE;
}

static PyObject *config_set_workspace(ConfigObject *self, PyObject *arg)
{
	PyObject *dir = NULL;
	if (sc__py_config_writable(self) < 0 ||
	    (arg != Py_None && !PyUnicode_FSConverter(arg, &dir)))
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_workspace(self->cfg, dir ? PyBytes_AsString(dir) : NULL, &err);
	if (rc < 0)
		sc__py_fail(rc, &err, "workspace", arg, false);
	Py_XDECREF(dir);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *config_get_workspace(ConfigObject *self, void *closure)
{
	const char *w = snapcell_config_workspace(self->cfg);
	if (!w)
		Py_RETURN_NONE;
	return fs_text(w);
}

static PyObject *config_add_mount(ConfigObject *self, PyObject *args)
{
	PyObject *host, *mount;
	if (sc__py_config_writable(self) < 0 ||
	    !PyArg_ParseTuple(args, "O&O&:add_mount", PyUnicode_FSConverter, &host,
			      PyUnicode_FSConverter, &mount))
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_add_mount(self->cfg, PyBytes_AsString(host),
					   PyBytes_AsString(mount), &err);
	if (rc < 0) {
		PyObject *path = PyUnicode_DecodeFSDefault(PyBytes_AsString(host));
		if (path) {
			sc__py_fail(rc, &err, "add_mount", path, false);
			Py_DECREF(path);
		}
	}
	Py_DECREF(host);
	Py_DECREF(mount);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *config_remove_mount(ConfigObject *self, PyObject *arg)
{
	PyObject *mount;
	if (sc__py_config_writable(self) < 0 || !PyUnicode_FSConverter(arg, &mount))
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_remove_mount(self->cfg, PyBytes_AsString(mount), &err);
	Py_DECREF(mount);
	if (rc == -ENOENT)
		PyErr_SetObject(PyExc_KeyError, arg);
	else if (rc < 0)
		sc__py_fail(rc, &err, "remove_mount", NULL, false);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static PyObject *config_mounts(ConfigObject *self, PyObject *unused)
{
	PyObject *list = PyList_New(0);
	size_t n = snapcell_config_mount_count(self->cfg);
	for (size_t i = 0; list && i < n; i++) {
		const char *host, *mount;
		PyObject *item = NULL;
		if (snapcell_config_mount_info(self->cfg, i, &host, &mount, NULL) == 0) {
			PyObject *h = fs_text(host), *m = h ? fs_text(mount) : NULL;
			item = m ? Py_BuildValue("(OO)", h, m) : NULL;
			Py_XDECREF(h);
			Py_XDECREF(m);
		} else {
			PyErr_SetString(PyExc_RuntimeError, "mount list changed while read");
		}
		if (append(list, item) < 0)
			Py_CLEAR(list);
	}
	return list;
}

/* set_tool_async(name): awaited calls of the registered tool go to its callable's
 * start(args_json, call) (_native_call.c) instead of the callable itself. */
static PyObject *config_set_tool_async(ConfigObject *self, PyObject *args)
{
	const char *name;
	if (!PyArg_ParseTuple(args, "s:set_tool_async", &name) || sc__py_config_writable(self) < 0)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_tool_async(self->cfg, name, sc__py_start_tool,
						sc__py_cancel_tool, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "set_tool_async", NULL, false);
	Py_RETURN_NONE;
}

static PyObject *config_add_tool(ConfigObject *self, PyObject *args)
{
	const char *name, *description, *schema;
	int approval;
	PyObject *callback;
	if (!PyArg_ParseTuple(args, "szzpO:add_tool", &name, &description, &schema, &approval,
			      &callback) ||
	    sc__py_config_writable(self) < 0)
		return NULL;
	if (!PyCallable_Check(callback))
		return PyErr_Format(PyExc_TypeError, "add_tool %s: the callback is not callable",
				    name);
	struct snapcell_error err = {0};
	int rc = snapcell_config_add_tool(self->cfg, name, description, schema,
					  approval ? SNAPCELL_APPROVAL_ALWAYS
						   : SNAPCELL_APPROVAL_NEVER,
					  call_tool, callback, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "add_tool", NULL, false);
	/* The C tool now borrows callback: the dict must own it before anything can run. */
	if (PyDict_SetItemString(self->tools, name, callback) < 0) {
		snapcell_config_remove_tool(self->cfg, name, NULL);
		return NULL;
	}
	Py_RETURN_NONE;
}

static PyObject *config_set_tool_decision(ConfigObject *self, PyObject *args)
{
	const char *name;
	int needed;
	if (!PyArg_ParseTuple(args, "sp:set_tool_decision", &name, &needed) ||
	    sc__py_config_writable(self) < 0)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_tool_decision(self->cfg, name, needed, &err);
	if (rc == -ENOENT)
		return PyErr_Format(PyExc_ValueError,
				    "approval_required names %R, which is not a registered tool",
				    PyTuple_GetItem(args, 0));
	if (rc < 0)
		return sc__py_fail(rc, &err, "set_tool_decision", NULL, false);
	Py_RETURN_NONE;
}

static PyObject *config_remove_tool(ConfigObject *self, PyObject *arg)
{
	Py_ssize_t n;
	const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, &n) : NULL;
	if (!name) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "remove_tool: the name must be a str");
		return NULL;
	}
	if (sc__py_config_writable(self) < 0)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_remove_tool(self->cfg, name, &err);
	if (rc == -ENOENT) {
		PyErr_SetObject(PyExc_KeyError, arg);
		return NULL;
	}
	if (rc < 0)
		return sc__py_fail(rc, &err, "remove_tool", NULL, false);
	if (PyDict_DelItem(self->tools, arg) < 0)
		PyErr_Clear();
	Py_RETURN_NONE;
}

static PyObject *config_tools(ConfigObject *self, PyObject *unused)
{
	PyObject *list = PyList_New(0);
	size_t n = snapcell_config_tool_count(self->cfg);
	for (size_t i = 0; list && i < n; i++) {
		struct snapcell_tool_info t;
		PyObject *item = NULL;
		if (snapcell_config_tool_info(self->cfg, i, &t, NULL) == 0) {
			PyObject *desc = text(t.description);
			PyObject *schema = desc ? text(t.params_schema) : NULL;
			item = schema ? Py_BuildValue("(sOON)", t.name, desc, schema,
						      PyBool_FromLong(t.approval ==
								      SNAPCELL_APPROVAL_ALWAYS))
				      : NULL;
			Py_XDECREF(desc);
			Py_XDECREF(schema);
		} else {
			PyErr_SetString(PyExc_RuntimeError, "tool list changed while read");
		}
		if (append(list, item) < 0)
			Py_CLEAR(list);
	}
	return list;
}

static PyObject *config_require_isolation(ConfigObject *self, PyObject *args)
{
	const char *name;
	if (!PyArg_ParseTuple(args, "s:require_isolation", &name) ||
	    sc__py_config_writable(self) < 0)
		return NULL;
	enum snapcell_isolation level;
	if (snapcell_isolation_from_name(name, &level) == 0) {
		struct snapcell_error err = {0};
		int rc = snapcell_config_require_isolation(self->cfg, level, &err);
		if (rc < 0)
			return sc__py_fail(rc, &err, "require_isolation", NULL, false);
		Py_RETURN_NONE;
	}
	return PyErr_Format(PyExc_ValueError, "unknown isolation level '%s'; valid: %s, %s, %s, %s",
			    name, snapcell_isolation_name(SNAPCELL_ISOLATION_NONE),
			    snapcell_isolation_name(SNAPCELL_ISOLATION_RLIMITS),
			    snapcell_isolation_name(SNAPCELL_ISOLATION_NAMESPACES),
			    snapcell_isolation_name(SNAPCELL_ISOLATION_CGROUPS));
}

/* Both numbers must fit a uid: OverflowError otherwise, as for any C unsigned. */
static PyObject *config_set_uid_range(ConfigObject *self, PyObject *args)
{
	PyObject *first_obj, *count_obj;
	if (!PyArg_ParseTuple(args, "O!O!:set_uid_range", &PyLong_Type, &first_obj, &PyLong_Type,
			      &count_obj) ||
	    sc__py_config_writable(self) < 0)
		return NULL;
	unsigned long first = PyLong_AsUnsignedLong(first_obj);
	unsigned long count = first == (unsigned long)-1 && PyErr_Occurred()
				      ? 0
				      : PyLong_AsUnsignedLong(count_obj);
	if (PyErr_Occurred())
		return NULL;
	if (first > UINT32_MAX || count > UINT32_MAX)
		return PyErr_Format(PyExc_OverflowError, "uid_range values must fit in 32 bits");
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_uid_range(self->cfg, (uint32_t)first, (uint32_t)count, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "set_uid_range", NULL, false);
	Py_RETURN_NONE;
}

static PyMethodDef config_methods[] = {
	{"set_limit", (PyCFunction)config_set_limit, METH_VARARGS,
	 "set_limit(name, value): one limit; names as in snapcell.h, lower case, no prefix."},
	{"get_limit", (PyCFunction)config_get_limit, METH_VARARGS, "get_limit(name) -> int"},
	{"set_env", (PyCFunction)config_set_env, METH_VARARGS,
	 "set_env(name, value): an environment variable of the code."},
	{"add_python_path", (PyCFunction)config_add_python_path, METH_VARARGS,
	 "add_python_path(dir): a host directory appended (read-only) to sys.path."},
	{"set_python", (PyCFunction)config_set_python, METH_VARARGS,
	 "set_python(path): the interpreter executable sandboxes run (absolute, or a name on "
	 "PATH)."},
	{"python_info", (PyCFunction)config_python_info, METH_NOARGS,
	 "python_info() -> {executable, chosen_by, version, version_info, warning}: the "
	 "interpreter sandboxes made from this config would run."},
	{"set_venv", (PyCFunction)config_set_venv, METH_VARARGS,
	 "set_venv(dir): a virtual environment of CPython 3.10 or newer, read-only; its "
	 "interpreter runs."},
	{"add_preload", (PyCFunction)config_add_preload, METH_VARARGS,
	 "add_preload(module): a module the template imports before it parks cells."},
	{"set_warmup", (PyCFunction)config_set_warmup, METH_O,
	 "set_warmup(code or None): Python the template runs once after the preloads."},
	{"set_workspace", (PyCFunction)config_set_workspace, METH_O,
	 "set_workspace(dir or None): the directory whose children appear under /input."},
	{"add_mount", (PyCFunction)config_add_mount, METH_VARARGS,
	 "add_mount(host, mount): a host file or directory at /input/<mount>."},
	{"remove_mount", (PyCFunction)config_remove_mount, METH_O,
	 "remove_mount(mount): KeyError when no mount has that path."},
	{"mounts", (PyCFunction)config_mounts, METH_NOARGS,
	 "mounts() -> [(host, '/input/...')] in order."},
	{"set_tool_async", (PyCFunction)config_set_tool_async, METH_VARARGS,
	 "set_tool_async(name): awaited calls of tool name go to its callback's start(args_json, "
	 "call), which answers through call (snapcell._native.Call) from any thread."},
	{"add_tool", (PyCFunction)config_add_tool, METH_VARARGS,
	 "add_tool(name, description, schema_json, requires_approval, callback): "
	 "callback(args_json) "
	 "returns a JSON text; what it raises reaches the code as ToolError."},
	{"set_tool_decision", (PyCFunction)config_set_tool_decision, METH_VARARGS,
	 "set_tool_decision(name, needed): each call of the tool waits for a decision "
	 "(ValueError when no tool has that name)."},
	{"remove_tool", (PyCFunction)config_remove_tool, METH_O,
	 "remove_tool(name): KeyError when no tool has that name."},
	{"tools", (PyCFunction)config_tools, METH_NOARGS,
	 "tools() -> [(name, description, schema_json, requires_approval)] in order."},
	{"require_isolation", (PyCFunction)config_require_isolation, METH_VARARGS,
	 "require_isolation(level): creating a Sandbox fails below it."},
	{"set_uid_range", (PyCFunction)config_set_uid_range, METH_VARARGS,
	 "set_uid_range(first, count): as root, each Sandbox runs as its own outside uid of "
	 "[first, first + count); count 0 runs all as first."},
	{"set_helper", (PyCFunction)sc__py_config_set_helper, METH_O,
	 "set_helper(path or None): the snapcell-cell executable Sandboxes start."},
	{"set_reject_links", (PyCFunction)sc__py_config_set_reject_links, METH_O,
	 "set_reject_links(bool): a link in the inputs fails sandbox creation instead of being "
	 "left out."},
	{"set_reuse", (PyCFunction)sc__py_config_set_reuse, METH_O,
	 "set_reuse(bool): a fresh run's cell is reset in place for a later run instead of a "
	 "newly forked one (where the kernel allows: probe()['reuse'])."},
	{"allow", (PyCFunction)sc__py_config_allow, METH_VARARGS,
	 "allow(target, methods=None): a network entry, normalised by the library; the same "
	 "target replaces."},
	{"allow_header", (PyCFunction)sc__py_config_allow_header, METH_VARARGS,
	 "allow_header(target, name, value): a header the host adds for target's entry; "
	 "${env:NAME}, ${file:PATH} and $$ in value are expanded now. KeyError without the "
	 "entry."},
	{"map_host", (PyCFunction)sc__py_config_map_host, METH_VARARGS,
	 "map_host(name, address): lookups of name answer address instead of DNS (tests, "
	 "private names); the address rules still apply."},
	{"set_upstream_ca", (PyCFunction)sc__py_config_set_upstream_ca, METH_O,
	 "set_upstream_ca(path or None): the CA bundle the host verifies upstream servers "
	 "with, for entries whose requests the host makes."},
	{"remove_allowed", (PyCFunction)sc__py_config_remove_allowed, METH_O,
	 "remove_allowed(target): KeyError when no entry has that (normalised) target."},
	{"allowed", (PyCFunction)sc__py_config_allowed, METH_NOARGS,
	 "allowed() -> [(target, (methods...) or None)] sorted by target."},
	{"describe", (PyCFunction)(void (*)(void))sc__py_config_describe,
	 METH_VARARGS | METH_KEYWORDS,
	 "describe(json=False, stateful=False) -> the execute_code description."},
	{"instructions", (PyCFunction)(void (*)(void))sc__py_config_instructions,
	 METH_VARARGS | METH_KEYWORDS,
	 "instructions(tools_visible=False) -> the provider instructions."},
	{"set_tool_describe_format", (PyCFunction)sc__py_config_set_tool_describe_format,
	 METH_VARARGS, "set_tool_describe_format(name, json) -> None: that tool's own format."},
	{"approval", (PyCFunction)sc__py_config_approval, METH_O,
	 "approval(base_requires) -> whether running code needs approval."},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef config_getset[] = {
	{"workspace", (getter)config_get_workspace, NULL, "the resolved workspace, or None", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot config_slots[] = {
	{Py_tp_doc, "Config(): limits, environment, files and tools for Sandboxes. Not "
		    "thread-safe; a Sandbox copies it."},
	{Py_tp_new, config_new},
	{Py_tp_dealloc, config_dealloc},
	{Py_tp_traverse, config_traverse},
	{Py_tp_clear, config_clear},
	{Py_tp_methods, config_methods},
	{Py_tp_getset, config_getset},
	{0, NULL},
};

PyType_Spec sc__py_config_spec = {"snapcell._native.Config", sizeof(ConfigObject), 0,
				  Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, config_slots};
