/* snapcell._native.Call and the asynchronous face of Python tools: the library starts an
 * awaited call on the run's thread (start_tool), the Python layer runs the tool wherever it
 * chooses (the caller's event loop, a pool thread) and answers through the Call from any
 * thread. Not the synchronous face (_native_config.c's call_tool). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "snapcell.h"
#include "_native.h"

PyTypeObject *sc__py_call_type;

/* Until it is answered the call's data holds a reference to this object, which holds the
 * call; answering (with the GIL) clears both before the library may free the call, so the
 * cancel trampoline, which reads the data with the GIL, never meets a freed object. */
typedef struct {
	PyObject ob_base;
	struct snapcell_call *call; /* NULL once answered */
	PyObject *on_cancel;	    /* callable or NULL */
} CallObject;

static void call_dealloc(CallObject *self)
{
	PyTypeObject *type = Py_TYPE(self);
	Py_XDECREF(self->on_cancel);
	freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
	tp_free(self);
	Py_DECREF(type);
}

/* Answers once; later answers are ignored. GIL held on entry and exit; released while the
 * library takes the answer, which waits for a cancel of the call in progress on the run's
 * thread (and that cancel needs the GIL). */
static void answer(CallObject *self, bool ok, const char *text)
{
	struct snapcell_call *call = self->call;
	if (!call)
		return;
	self->call = NULL;
	snapcell_call_set_data(call, NULL); /* a cancel that gets the GIL now does nothing */
	PyThreadState *ts = PyEval_SaveThread();
	snapcell_call_answer(call, ok, text);
	PyEval_RestoreThread(ts);
	Py_DECREF(self); /* the call's reference */
}

static PyObject *call_answer(CallObject *self, PyObject *args)
{
	int ok;
	const char *text;
	Py_ssize_t n;
	if (!PyArg_ParseTuple(args, "ps#:answer", &ok, &text, &n))
		return NULL;
	if (memchr(text, 0, (size_t)n))
		answer(self, false, "tool callback returned a str with a NUL character");
	else
		answer(self, ok, text);
	Py_RETURN_NONE;
}

/* The message of an exception, as the synchronous face gives it: str(exc), else its type's
 * name. */
static char *exception_text(PyObject *exc)
{
	PyObject *s = PyObject_Str(exc);
	Py_ssize_t n;
	const char *utf8 = s ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
	if (!utf8) {
		PyErr_Clear();
		Py_XDECREF(s);
		s = PyObject_GetAttrString((PyObject *)Py_TYPE(exc), "__name__");
		utf8 = s ? PyUnicode_AsUTF8AndSize(s, &n) : NULL;
	}
	char *msg = utf8 ? dup_bytes(utf8, (size_t)n) : NULL;
	PyErr_Clear();
	Py_XDECREF(s);
	return msg;
}

static PyObject *call_fail(CallObject *self, PyObject *exc)
{
	char *msg = exception_text(exc);
	answer(self, false, msg);
	free(msg);
	Py_RETURN_NONE;
}

static PyObject *call_set_cancel(CallObject *self, PyObject *fn)
{
	PyObject *old = self->on_cancel;
	Py_INCREF(fn);
	self->on_cancel = fn;
	Py_XDECREF(old);
	Py_RETURN_NONE;
}

static PyMethodDef call_methods[] = {
	{"answer", (PyCFunction)call_answer, METH_VARARGS,
	 "answer(ok, text): the call's result (a JSON text) or, not ok, the message the code's "
	 "ToolError carries. Any thread; once (later answers are ignored)."},
	{"fail", (PyCFunction)call_fail, METH_O,
	 "fail(exc): answers with the exception's message, as a synchronous tool's would be."},
	{"set_cancel", (PyCFunction)call_set_cancel, METH_O,
	 "set_cancel(fn): fn() is called (on the run's thread) when the run ends with the call in "
	 "flight; the call must still be answered."},
	{NULL, NULL, 0, NULL},
};

static PyType_Slot call_slots[] = {
	{Py_tp_doc, "A tool call awaited by the code, started by the library; answer it once."},
	{Py_tp_dealloc, call_dealloc},
	{Py_tp_methods, call_methods},
	{0, NULL},
};

PyType_Spec sc__py_call_spec = {"snapcell._native.Call", sizeof(CallObject), 0, Py_TPFLAGS_DEFAULT,
				call_slots};

/* snapcell_tool_start_fn: user is the tool's callable (the Config keeps it alive), whose
 * start(args_json, call) runs the tool and answers. Called on the run's thread, which released
 * the GIL. A start that raises answers with that exception's message. */
void sc__py_start_tool(void *user, struct snapcell_call *call, const char *args_json)
{
	PyGILState_STATE gil = PyGILState_Ensure();
	allocfunc alloc = (allocfunc)PyType_GetSlot(sc__py_call_type, Py_tp_alloc);
	CallObject *c = (CallObject *)alloc(sc__py_call_type, 0);
	if (!c) {
		PyErr_Clear();
		snapcell_call_answer(call, false, "out of memory starting the tool call");
		PyGILState_Release(gil);
		return;
	}
	c->call = call;
	Py_INCREF(c); /* the call's reference, dropped when it is answered */
	snapcell_call_set_data(call, c);
	PyObject *args = PyUnicode_DecodeUTF8(args_json, (Py_ssize_t)strlen(args_json), "strict");
	PyObject *r = args ? PyObject_CallMethod((PyObject *)user, "start", "OO", args, c) : NULL;
	if (!r) {
		PyObject *type, *value, *tb;
		PyErr_Fetch(&type, &value, &tb);
		PyErr_NormalizeException(&type, &value, &tb);
		char *msg = value ? exception_text(value) : NULL;
		answer(c, false, msg);
		free(msg);
		Py_XDECREF(type);
		Py_XDECREF(value);
		Py_XDECREF(tb);
	}
	Py_XDECREF(r);
	Py_XDECREF(args);
	Py_DECREF(c);
	PyGILState_Release(gil);
}

/* snapcell_tool_cancel_fn: calls the Call's cancel function, if it has one and is still
 * unanswered. Errors are dropped: the call is answered either way. */
void sc__py_cancel_tool(void *user, struct snapcell_call *call)
{
	PyGILState_STATE gil = PyGILState_Ensure();
	CallObject *c = snapcell_call_data(call);
	if (c && c->on_cancel) {
		PyObject *r = PyObject_CallNoArgs(c->on_cancel);
		if (!r)
			PyErr_Clear();
		Py_XDECREF(r);
	}
	PyGILState_Release(gil);
}
