/* The guest module, _snapcell_guest.<abi3 suffix>: what the helper's exec of the chosen
 * interpreter imports (guest/helper.c) to become the template. Built against the Limited API
 * (abi3), so one file serves every CPython from 3.10 on. Imported anywhere else it raises
 * ImportError and does nothing: it reads one environment variable and nothing more. */
#define _GNU_SOURCE 1 /* as pyconfig.h has it, which may define it unguarded */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest.h"

/* Started by the helper: its mark in the environment and the sealed setup memfd in place.
 * The mark is read first, so an ordinary process stops there, before any system call. */
static bool is_template(void)
{
	const char *mark = getenv(SC_GUEST_ENV);
	if (!mark || strcmp(mark, SC_GUEST_MARK) != 0)
		return false;
	return fcntl(SC_GUEST_SETUP_FD, F_GET_SEALS) == SC_GUEST_SETUP_SEALS;
}

/* names dropped from module's environ (keys of str or, for posix's, bytes); 0 or -1. */
static int environ_drop(const char *module, const char *const *names, size_t n, bool bytes)
{
	PyObject *m = PyImport_ImportModule(module);
	PyObject *environ = m ? PyObject_GetAttrString(m, "environ") : NULL;
	PyObject *r = environ ? Py_NewRef(Py_None) : NULL;
	for (size_t i = 0; r && i < n; i++) {
		Py_DECREF(r);
		r = PyObject_CallMethod(environ, "pop", bytes ? "(yO)" : "(sO)", names[i], Py_None);
	}
	int rc = r ? 0 : -1;
	Py_XDECREF(r);
	Py_XDECREF(environ);
	Py_XDECREF(m);
	return rc;
}

/* No trace of the start for the cells: the environment is emptied (posix.environ, which
 * os.environ is made from when os is imported, os.environ where the interpreter's start
 * imported os already, and the process's) of the mark and of the LC_CTYPE that the
 * interpreter's C locale coercion (PEP 538) put there, since the helper's exec gave it no
 * other variable; the configured ones come later. os itself is left for later: importing it
 * is ~1 ms of a cold start (guest/python.c sc_py_setenv). The module leaves sys.modules, so a
 * cell cannot call main() again. */
static int forget_start(void)
{
	static const char *const names[] = {SC_GUEST_ENV, "LC_CTYPE"};
	size_t n = sizeof(names) / sizeof(names[0]);
	PyObject *modules = PyImport_GetModuleDict(); /* borrowed */
	int rc = environ_drop("posix", names, n, true);
	if (rc == 0 && PyMapping_HasKeyString(modules, "os"))
		rc = environ_drop("os", names, n, false);
	for (size_t i = 0; i < n; i++)
		unsetenv(names[i]);
	if (rc == 0 && PyMapping_HasKeyString(modules, SC_GUEST_MODULE) &&
	    PyMapping_DelItemString(modules, SC_GUEST_MODULE) < 0)
		return -1;
	return rc;
}

/* main(): the template's whole life; never returns. */
static PyObject *guest_main(PyObject *self, PyObject *unused)
{
	(void)self, (void)unused;
	static bool started;
	if (started || !is_template()) {
		PyErr_SetString(PyExc_RuntimeError,
				"the snapcell template runs once, at its start");
		return NULL;
	}
	started = true;
	if (forget_start() < 0)
		PyErr_Clear(); /* what is left is the mark's copy, harmless */
	int rc = sc_template_main();
	fflush(NULL);
	_exit(rc);
}

static PyMethodDef methods[] = {
	{"main", guest_main, METH_NOARGS, "Run as the sandbox's template (the helper's call)."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef guest_module = {
	PyModuleDef_HEAD_INIT,
	SC_GUEST_MODULE,
	"snapcell's sandbox template; importable only where snapcell-cell started it.",
	-1,
	methods,
	NULL,
	NULL,
	NULL,
	NULL,
};

PyMODINIT_FUNC PyInit__snapcell_guest(void); /* what the import system looks up */

PyMODINIT_FUNC PyInit__snapcell_guest(void)
{
	if (!is_template()) {
		PyErr_SetString(PyExc_ImportError, SC_GUEST_MODULE
				" is snapcell's sandbox template: only the "
				"snapcell-cell helper starts it, inside a sandbox; it cannot be "
				"imported in an ordinary Python process");
		return NULL;
	}
	return PyModule_Create(&guest_module);
}
