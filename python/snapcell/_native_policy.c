/* The Config methods that adapt the library's policy calls: the helper's path, network entries,
 * and the texts and approval a model's front end needs. Conversions only; every rule (what a
 * target normalises to, which methods are valid, what the description says) is the C
 * library's. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "snapcell.h"

#include "_native.h"

PyObject *sc__py_config_set_helper(ConfigObject *self, PyObject *arg)
{
	PyObject *path = NULL;
	if (sc__py_config_writable(self) < 0 ||
	    (arg != Py_None && !PyUnicode_FSConverter(arg, &path)))
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_helper(self->cfg, path ? PyBytes_AsString(path) : NULL, &err);
	if (rc < 0)
		sc__py_fail(rc, &err, "set_helper", arg, false);
	Py_XDECREF(path);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

PyObject *sc__py_config_set_reject_links(ConfigObject *self, PyObject *arg)
{
	int reject = PyObject_IsTrue(arg);
	if (reject < 0 || sc__py_config_writable(self) < 0)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_reject_links(self->cfg, reject, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "set_reject_links", NULL, false);
	Py_RETURN_NONE;
}

PyObject *sc__py_config_set_reuse(ConfigObject *self, PyObject *arg)
{
	int on = PyObject_IsTrue(arg);
	if (on < 0 || sc__py_config_writable(self) < 0)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_reuse(self->cfg, on, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "set_reuse", NULL, false);
	Py_RETURN_NONE;
}

/* methods: None, or a list or tuple of str (an empty one is the library's error to give).
 * The strings are borrowed from the container, which the caller's arguments keep alive and
 * nothing can change while the GIL is held. */
static int methods_array(PyObject *methods, const char ***out, size_t *n)
{
	*out = NULL;
	*n = 0;
	if (methods == Py_None)
		return 0;
	Py_ssize_t len = PySequence_Size(methods);
	if (len < 0)
		return -1;
	*out = calloc((size_t)len + 1, sizeof(**out));
	if (!*out) {
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < len; i++) {
		PyObject *m = PySequence_GetItem(methods, i);
		const char *s = m && PyUnicode_Check(m) ? PyUnicode_AsUTF8AndSize(m, NULL) : NULL;
		if (m && !s && !PyErr_Occurred())
			PyErr_Format(PyExc_TypeError, "an HTTP method must be a str, not %R", m);
		Py_XDECREF(m); /* the container still holds it */
		if (!s) {
			free(*out);
			*out = NULL;
			return -1;
		}
		(*out)[i] = s;
	}
	*n = (size_t)len;
	return 0;
}

PyObject *sc__py_config_allow(ConfigObject *self, PyObject *args)
{
	const char *target;
	PyObject *methods = Py_None;
	if (!PyArg_ParseTuple(args, "s|O:allow", &target, &methods) ||
	    sc__py_config_writable(self) < 0)
		return NULL;
	if (methods != Py_None && !PyList_Check(methods) && !PyTuple_Check(methods))
		return PyErr_Format(PyExc_TypeError,
				    "allow %s: methods must be None, a list or a tuple", target);
	const char **m;
	size_t n;
	if (methods_array(methods, &m, &n) < 0)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_allow(self->cfg, target, m, n, &err);
	free(m);
	if (rc < 0)
		return sc__py_fail(rc, &err, "allow", NULL, false);
	Py_RETURN_NONE;
}

PyObject *sc__py_config_allow_header(ConfigObject *self, PyObject *args)
{
	const char *target, *name, *value;
	if (!PyArg_ParseTuple(args, "sss:allow_header", &target, &name, &value) ||
	    sc__py_config_writable(self) < 0)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_allow_header(self->cfg, target, name, value, &err);
	if (rc == -ENOENT)
		return PyErr_Format(PyExc_KeyError, "allow_header: no entry for %s", target);
	if (rc < 0)
		return sc__py_fail(rc, &err, "allow_header", NULL, false);
	Py_RETURN_NONE;
}

PyObject *sc__py_config_map_host(ConfigObject *self, PyObject *args)
{
	const char *name, *address;
	if (!PyArg_ParseTuple(args, "ss:map_host", &name, &address) ||
	    sc__py_config_writable(self) < 0)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_map_host(self->cfg, name, address, &err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "map_host", NULL, false);
	Py_RETURN_NONE;
}

PyObject *sc__py_config_set_upstream_ca(ConfigObject *self, PyObject *arg)
{
	PyObject *path = NULL;
	if (sc__py_config_writable(self) < 0 ||
	    (arg != Py_None && !PyUnicode_FSConverter(arg, &path)))
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_upstream_ca(self->cfg, path ? PyBytes_AsString(path) : NULL,
						 &err);
	if (rc < 0)
		sc__py_fail(rc, &err, "set_upstream_ca", arg, false);
	Py_XDECREF(path);
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

PyObject *sc__py_config_remove_allowed(ConfigObject *self, PyObject *arg)
{
	const char *target = PyUnicode_Check(arg) ? PyUnicode_AsUTF8AndSize(arg, NULL) : NULL;
	if (!target) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError,
					"remove_allowed: the target must be a str");
		return NULL;
	}
	if (sc__py_config_writable(self) < 0)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_remove_allowed(self->cfg, target, &err);
	if (rc == -ENOENT) {
		PyErr_SetObject(PyExc_KeyError, arg);
		return NULL;
	}
	if (rc < 0)
		return sc__py_fail(rc, &err, "remove_allowed", NULL, false);
	Py_RETURN_NONE;
}

static PyObject *allowed_item(const struct snapcell_allowed_info *info)
{
	PyObject *methods;
	if (info->methods) {
		methods = PyTuple_New((Py_ssize_t)info->n_methods);
		for (size_t i = 0; methods && i < info->n_methods; i++) {
			PyObject *m = text(info->methods[i]);
			if (!m)
				Py_CLEAR(methods);
			else
				PyTuple_SetItem(methods, (Py_ssize_t)i, m);
		}
	} else {
		methods = Py_NewRef(Py_None);
	}
	return methods ? Py_BuildValue("(NN)", text(info->target), methods) : NULL;
}

PyObject *sc__py_config_allowed(ConfigObject *self, PyObject *unused)
{
	PyObject *list = PyList_New(0);
	size_t n = snapcell_config_allowed_count(self->cfg);
	for (size_t i = 0; list && i < n; i++) {
		struct snapcell_allowed_info info;
		struct snapcell_error err = {0};
		int rc = snapcell_config_allowed_info(self->cfg, i, &info, &err);
		PyObject *item = rc < 0 ? sc__py_fail(rc, &err, "allowed", NULL, false)
					: allowed_item(&info);
		if (append(list, item) < 0)
			Py_CLEAR(list);
	}
	return list;
}

/* A malloc'd text from the library as a str, freed here. */
static PyObject *owned_text(int rc, char *s, const struct snapcell_error *err, const char *what)
{
	PyObject *out = rc < 0 ? sc__py_fail(rc, err, what, NULL, false) : text(s);
	free(s);
	return out;
}

PyObject *sc__py_config_describe(ConfigObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"json", "stateful", NULL};
	int as_json = 0, stateful = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "|pp:describe", kwlist, &as_json, &stateful))
		return NULL;
	struct snapcell_error err = {0};
	char *s = NULL;
	unsigned format = as_json ? SNAPCELL_DESCRIBE_JSON : SNAPCELL_DESCRIBE_COMPACT;
	if (stateful)
		format |= SNAPCELL_DESCRIBE_STATEFUL;
	int rc = snapcell_config_describe(self->cfg, (enum snapcell_describe_format)format, &s,
					  &err);
	return owned_text(rc, s, &err, "describe");
}

PyObject *sc__py_config_instructions(ConfigObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"tools_visible", NULL};
	int visible = 0;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p:instructions", kwlist, &visible))
		return NULL;
	struct snapcell_error err = {0};
	char *s = NULL;
	int rc = snapcell_config_instructions_with(
		self->cfg, visible ? SNAPCELL_INSTRUCTIONS_TOOLS_VISIBLE : 0, &s, &err);
	return owned_text(rc, s, &err, "instructions");
}

PyObject *sc__py_config_set_tool_describe_format(ConfigObject *self, PyObject *args)
{
	const char *name;
	int as_json;
	if (!PyArg_ParseTuple(args, "sp:set_tool_describe_format", &name, &as_json))
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_config_set_tool_describe_format(
		self->cfg, name, as_json ? SNAPCELL_DESCRIBE_JSON : SNAPCELL_DESCRIBE_COMPACT,
		&err);
	if (rc < 0)
		return sc__py_fail(rc, &err, "set_tool_describe_format", NULL, false);
	Py_RETURN_NONE;
}

PyObject *sc__py_config_approval(ConfigObject *self, PyObject *arg)
{
	int base = PyObject_IsTrue(arg);
	if (base < 0)
		return NULL;
	enum snapcell_approval a = snapcell_config_approval(
		self->cfg, base ? SNAPCELL_APPROVAL_ALWAYS : SNAPCELL_APPROVAL_NEVER);
	return PyBool_FromLong(a == SNAPCELL_APPROVAL_ALWAYS);
}
