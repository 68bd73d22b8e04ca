/* snapcell._native.Cancel: a cancellation token for runs (struct snapcell_cancel). fire() may be
 * called from any thread, also while the run it cancels holds no GIL. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "snapcell.h"
#include "_native.h"

PyTypeObject *sc__py_cancel_type;

typedef struct {
	PyObject ob_base;
	struct snapcell_cancel *c;
} CancelObject;

static PyObject *cancel_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
	if (!PyArg_ParseTuple(args, ":Cancel") || (kwds && PyObject_Length(kwds) > 0)) {
		if (!PyErr_Occurred())
			PyErr_SetString(PyExc_TypeError, "Cancel() takes no arguments");
		return NULL;
	}
	allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
	CancelObject *self = (CancelObject *)alloc(type, 0);
	if (!self)
		return NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_cancel_new(&self->c, &err);
	if (rc < 0) {
		Py_DECREF(self);
		return sc__py_fail(rc, &err, "Cancel", NULL, false);
	}
	return (PyObject *)self;
}

static void cancel_dealloc(CancelObject *self)
{
	PyTypeObject *type = Py_TYPE(self);
	snapcell_cancel_free(self->c);
	freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
	tp_free(self);
	Py_DECREF(type);
}

static PyObject *cancel_fire(CancelObject *self, PyObject *unused)
{
	snapcell_cancel_fire(self->c);
	Py_RETURN_NONE;
}

int sc__py_run_options(PyObject *cancel, PyObject *tools, struct snapcell_run_options *opts)
{
	*opts = (struct snapcell_run_options){.size = sizeof(*opts)};
	if (tools && tools != Py_None) {
		if (!PyObject_TypeCheck(tools, sc__py_config_type)) {
			PyErr_Format(PyExc_TypeError,
				     "run: tools must be a Config holding the run's tools or None, "
				     "not %R",
				     tools);
			return -1;
		}
		opts->tools = ((ConfigObject *)tools)->cfg;
	}
	if (cancel == Py_None)
		return 0;
	if (!PyObject_TypeCheck(cancel, sc__py_cancel_type)) {
		PyErr_Format(PyExc_TypeError, "run: cancel must be a Cancel or None, not %R",
			     cancel);
		return -1;
	}
	opts->cancel = ((CancelObject *)cancel)->c;
	return 0;
}

static int run_file(PyObject *item, struct snapcell_run_file *f)
{
	PyObject *name, *data, *path;
	if (!PyTuple_Check(item) || !PyArg_ParseTuple(item, "UOO", &name, &data, &path) ||
	    (data != Py_None && !PyBytes_Check(data)) ||
	    (path != Py_None && !PyBytes_Check(path)) || (data == Py_None) == (path == Py_None)) {
		PyErr_Clear();
		PyErr_Format(
			PyExc_TypeError,
			"run: a file is (name, bytes, None) or (name, None, host path), not %R",
			item);
		return -1;
	}
	Py_ssize_t len;
	const char *utf8 = PyUnicode_AsUTF8AndSize(name, &len);
	if (!utf8)
		return -1;
	if ((size_t)len != strlen(utf8)) {
		PyErr_Format(PyExc_ValueError, "run file %R: a NUL in the name", name);
		return -1;
	}
	f->name = utf8;
	char *bytes;
	Py_ssize_t n;
	if (PyBytes_AsStringAndSize(data != Py_None ? data : path, &bytes, &n) < 0)
		return -1;
	if (data != Py_None) {
		f->data = bytes;
		f->data_len = (size_t)n;
		return 0;
	}
	f->host_path = bytes;
	if ((size_t)n != strlen(bytes)) {
		PyErr_Format(PyExc_ValueError, "run file %R: a NUL in the host path", name);
		return -1;
	}
	return 0;
}

int sc__py_run_files(PyObject *files, struct snapcell_run_options *opts, struct sc_py_files *keep)
{
	*keep = (struct sc_py_files){NULL, NULL};
	if (!files || files == Py_None)
		return 0;
	if (!(keep->items = PySequence_Tuple(files)))
		return -1;
	Py_ssize_t n = PyTuple_Size(keep->items);
	if (n == 0)
		return 0;
	if (!(keep->list = PyMem_Calloc((size_t)n, sizeof(*keep->list)))) {
		sc__py_run_files_clear(keep);
		PyErr_NoMemory();
		return -1;
	}
	for (Py_ssize_t i = 0; i < n; i++)
		if (run_file(PyTuple_GetItem(keep->items, i), &keep->list[i]) < 0) {
			sc__py_run_files_clear(keep);
			return -1;
		}
	opts->files = keep->list;
	opts->n_files = (size_t)n;
	return 0;
}

void sc__py_run_files_clear(struct sc_py_files *keep)
{
	PyMem_Free(keep->list);
	Py_CLEAR(keep->items);
	keep->list = NULL;
}

static PyMethodDef cancel_methods[] = {
	{"fire", (PyCFunction)cancel_fire, METH_NOARGS,
	 "fire(): the run using this token ends at once as 'cancelled' (its cell killed); a run "
	 "started with a fired token is cancelled before it starts."},
	{NULL, NULL, 0, NULL},
};

static PyType_Slot cancel_slots[] = {
	{Py_tp_doc, "Cancel(): a one-shot cancellation token for Sandbox.run and Session.run."},
	{Py_tp_new, cancel_new},
	{Py_tp_dealloc, cancel_dealloc},
	{Py_tp_methods, cancel_methods},
	{0, NULL},
};

PyType_Spec sc__py_cancel_spec = {"snapcell._native.Cancel", sizeof(CancelObject), 0,
				  Py_TPFLAGS_DEFAULT, cancel_slots};
