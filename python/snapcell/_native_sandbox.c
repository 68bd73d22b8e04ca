/* snapcell._native: Sandbox, Session and Snapshot, and how closing a sandbox waits for the calls
 * in flight. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "snapcell.h"
#include "_native.h"

/* ---- Sandbox ----
 *
 * Calls into the C sandbox that release the GIL are counted in busy; while busy > 0 the idle
 * lock is held (taken by the first, given back by the last, from whichever thread). close()
 * marks the sandbox closing, so nothing new starts, and takes idle, so it waits for what is in
 * flight, before freeing. A tool callback closing the sandbox it runs for would wait for
 * itself: each thread keeps the list of sandboxes it is inside, and close() refuses then. */

typedef struct {
	PyObject ob_base;
	struct snapcell_sandbox *sb;
	PyObject *tools; /* the callables the sandbox's copy of the config borrows */
	Py_ssize_t busy;
	PyThread_type_lock idle;
	bool closing; /* set by close(), never cleared */
} SandboxObject;

PyObject *sc__py_in_flight_key;

/* The calling thread's list of sandboxes it is inside (borrowed), created on demand. */
static PyObject *thread_in_flight(void)
{
	PyObject *d = PyThreadState_GetDict();
	if (!d) {
		PyErr_SetString(PyExc_RuntimeError, "no thread state dictionary");
		return NULL;
	}
	PyObject *list = PyDict_GetItemWithError(d, sc__py_in_flight_key);
	if (list || PyErr_Occurred())
		return list;
	list = PyList_New(0);
	if (!list || PyDict_SetItem(d, sc__py_in_flight_key, list) < 0) {
		Py_XDECREF(list);
		return NULL;
	}
	Py_DECREF(list);
	return list;
}

/* Before releasing the GIL for a call on self->sb. -1 with an exception when closed. */
static int sandbox_enter(SandboxObject *self)
{
	if (self->closing) {
		sc__py_closed("sandbox");
		return -1;
	}
	PyObject *mine = thread_in_flight();
	if (!mine || PyList_Append(mine, (PyObject *)self) < 0)
		return -1;
	/* Cannot fail: only close() takes idle otherwise, and only once closing is set. */
	if (self->busy++ == 0)
		PyThread_acquire_lock(self->idle, NOWAIT_LOCK);
	return 0;
}

/* After the call, with the GIL back. */
static void sandbox_leave(SandboxObject *self)
{
	if (--self->busy == 0)
		PyThread_release_lock(self->idle);
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	PyObject *mine = thread_in_flight();
	Py_ssize_t n = mine ? PyList_Size(mine) : 0;
	if (n > 0)
		PyList_SetSlice(mine, n - 1, n, NULL); /* calls nest, so ours is the last */
	PyErr_Clear();
	PyErr_Restore(type, value, tb);
}

/* Waits until no close() of self is freeing it, so a session or snapshot can be freed. A
 * thread inside one of self's calls need not wait (and must not): the free waits for it. */
static void sandbox_wait_closed(SandboxObject *self)
{
	if (!self->closing)
		return;
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb); /* called from deallocators too */
	PyObject *mine = thread_in_flight();
	int inside = mine ? PySequence_Contains(mine, (PyObject *)self) : 0;
	PyErr_Restore(type, value, tb);
	if (inside > 0)
		return;
	Py_BEGIN_ALLOW_THREADS;
	PyThread_acquire_lock(self->idle, WAIT_LOCK);
	PyThread_release_lock(self->idle);
	Py_END_ALLOW_THREADS;
}

static PyObject *sandbox_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"config", NULL};
	ConfigObject *cfg;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!:Sandbox", kwlist, sc__py_config_type,
					 &cfg))
		return NULL;
	allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
	SandboxObject *self = (SandboxObject *)alloc(type, 0);
	if (!self)
		return NULL;
	self->idle = PyThread_allocate_lock();
	self->tools = self->idle ? PyDict_Copy(cfg->tools) : NULL;
	if (!self->tools) {
		Py_DECREF(self);
		return PyErr_Occurred() ? NULL : PyErr_NoMemory();
	}
	struct snapcell_error err = {0};
	struct snapcell_sandbox *sb = NULL;
	Py_INCREF(cfg);
	cfg->starting++;
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	rc = snapcell_sandbox_new(cfg->cfg, &sb, &err);
	Py_END_ALLOW_THREADS;
	cfg->starting--;
	Py_DECREF(cfg);
	if (rc < 0) {
		Py_DECREF(self);
		return sc__py_fail(rc, &err, "sandbox", NULL, true);
	}
	self->sb = sb;
	return (PyObject *)self;
}

static int sandbox_traverse(SandboxObject *self, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(self));
	Py_VISIT(self->tools);
	return 0;
}

/* Only an unreachable sandbox is cleared: no run can be in flight or start. */
static int sandbox_clear(SandboxObject *self)
{
	Py_CLEAR(self->tools);
	return 0;
}

static void sandbox_free_c(SandboxObject *self)
{
	struct snapcell_sandbox *sb = self->sb;
	self->sb = NULL;
	if (!sb)
		return;
	Py_BEGIN_ALLOW_THREADS;
	snapcell_sandbox_free(sb); /* waits up to 2 s for the template to exit */
	Py_END_ALLOW_THREADS;
}

static void sandbox_dealloc(SandboxObject *self)
{
	PyTypeObject *type = Py_TYPE(self);
	PyObject_GC_UnTrack(self);
	self->closing = true;
	sandbox_free_c(self);
	if (self->idle)
		PyThread_free_lock(self->idle);
	sandbox_clear(self);
	freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
	tp_free(self);
	Py_DECREF(type);
}

static PyObject *sandbox_close(SandboxObject *self, PyObject *unused)
{
	PyObject *mine = thread_in_flight();
	int inside = mine ? PySequence_Contains(mine, (PyObject *)self) : -1;
	if (inside < 0)
		return NULL;
	if (inside)
		return sc__py_raise(sc__py_snapcell_error, SNAPCELL_E_INVAL,
				    "sandbox.close() from inside one of its own runs (a tool "
				    "callback) would wait for itself; close it after the run");
	self->closing = true;
	Py_BEGIN_ALLOW_THREADS;
	PyThread_acquire_lock(self->idle, WAIT_LOCK);
	Py_END_ALLOW_THREADS;
	sandbox_free_c(self);
	PyThread_release_lock(self->idle);
	Py_RETURN_NONE;
}

static PyObject *sandbox_run(SandboxObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"code", "cancel", "tools", "files", NULL};
	const char *code;
	Py_ssize_t len;
	PyObject *cancel = Py_None, *tools = Py_None, *files = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "s#|OOO:run", kwlist, &code, &len, &cancel,
					 &tools, &files))
		return NULL;
	struct snapcell_run_options opts;
	struct sc_py_files keep;
	if (sc__py_run_options(cancel, tools, &opts) < 0 ||
	    sc__py_run_files(files, &opts, &keep) < 0)
		return NULL;
	if (sandbox_enter(self) < 0) {
		sc__py_run_files_clear(&keep);
		return NULL;
	}
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	rc = snapcell_sandbox_run(self->sb, code, (size_t)len, &opts, &res, &err);
	Py_END_ALLOW_THREADS;
	sandbox_leave(self);
	sc__py_run_files_clear(&keep);
	if (rc < 0)
		return sc__py_fail(rc, &err, "run", NULL, false);
	PyObject *d = sc__py_result(res);
	snapcell_result_free(res);
	return d;
}

/* The verdict named name, or -1 with ValueError. */
static int verdict_from_name(const char *name)
{
	static const enum snapcell_verdict given[] = {
		SNAPCELL_VERDICT_APPROVED, SNAPCELL_VERDICT_REJECTED, SNAPCELL_VERDICT_VALUE};
	for (size_t i = 0; i < sizeof(given) / sizeof(given[0]); i++)
		if (!strcmp(name, snapcell_verdict_name(given[i])))
			return (int)given[i];
	PyErr_Format(PyExc_ValueError, "resume: unknown verdict %s", name);
	return -1;
}

static PyObject *sandbox_resume(SandboxObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"pending_id", "verdict", "text", "decided_by", "cancel", NULL};
	unsigned long long id;
	const char *verdict_name, *text = NULL, *decided_by = NULL;
	PyObject *cancel = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "Ks|zzO:resume", kwlist, &id, &verdict_name,
					 &text, &decided_by, &cancel))
		return NULL;
	int verdict = verdict_from_name(verdict_name);
	struct snapcell_run_options opts;
	if (verdict < 0 || sc__py_run_options(cancel, NULL, &opts) < 0)
		return NULL;
	if (sandbox_enter(self) < 0)
		return NULL;
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	rc = snapcell_sandbox_resume(self->sb, id, (enum snapcell_verdict)verdict, text, decided_by,
				     &opts, &res, &err);
	Py_END_ALLOW_THREADS;
	sandbox_leave(self);
	if (rc == -ENOENT)
		return PyErr_Format(PyExc_ValueError,
				    "this result's run is not waiting for a decision any more (it "
				    "was resumed already)");
	if (rc < 0)
		return sc__py_fail(rc, &err, "resume", NULL, false);
	PyObject *d = sc__py_result(res);
	snapcell_result_free(res);
	return d;
}

static PyObject *sandbox_stats(SandboxObject *self, PyObject *unused)
{
	if (sandbox_enter(self) < 0)
		return NULL;
	struct snapcell_sandbox_stats st;
	struct snapcell_error err = {0};
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	rc = snapcell_sandbox_stats(self->sb, &st, &err);
	Py_END_ALLOW_THREADS;
	sandbox_leave(self);
	if (rc < 0)
		return sc__py_fail(rc, &err, "stats", NULL, false);
	PyObject *d = PyDict_New();
	if (!d || put(d, "template_pid", PyLong_FromLong(st.template_pid)) < 0 ||
	    put(d, "template_private_bytes",
		PyLong_FromUnsignedLongLong(st.template_private_bytes)) < 0 ||
	    put(d, "parked_cells", PyLong_FromUnsignedLong(st.parked_cells)) < 0 ||
	    put(d, "parked_cell_private_bytes",
		PyLong_FromUnsignedLongLong(st.parked_cell_private_bytes)) < 0)
		Py_CLEAR(d);
	return d;
}

static PyObject *sandbox_get_reuse(SandboxObject *self, void *closure)
{
	if (!self->sb)
		return sc__py_closed("sandbox");
	return PyBool_FromLong(snapcell_sandbox_reuse(self->sb));
}

static PyObject *sandbox_get_isolation(SandboxObject *self, void *closure)
{
	if (!self->sb)
		return sc__py_closed("sandbox");
	return PyUnicode_FromString(snapcell_isolation_name(snapcell_sandbox_isolation(self->sb)));
}

/* ---- Session and Snapshot ----
 *
 * Each keeps its Sandbox alive and counts its blocking calls in the Sandbox's busy, so a
 * sandbox close() waits for them. The C handles are used by one thread at a time: a second
 * thread is refused rather than queued. */

typedef struct {
	PyObject ob_base;
	struct snapcell_session *s;
	SandboxObject *sandbox;
	bool busy;
} SessionObject;

typedef struct {
	PyObject ob_base;
	struct snapcell_snapshot *snap;
	SandboxObject *sandbox;
	bool busy;
} SnapshotObject;

static PyObject *wrap_session(SandboxObject *sandbox, struct snapcell_session *s)
{
	allocfunc alloc = (allocfunc)PyType_GetSlot(sc__py_session_type, Py_tp_alloc);
	SessionObject *self = (SessionObject *)alloc(sc__py_session_type, 0);
	if (!self) {
		sandbox_wait_closed(sandbox);
		snapcell_session_free(s);
		return NULL;
	}
	self->s = s;
	Py_INCREF(sandbox);
	self->sandbox = sandbox;
	return (PyObject *)self;
}

static PyObject *wrap_snapshot(SandboxObject *sandbox, struct snapcell_snapshot *snap)
{
	allocfunc alloc = (allocfunc)PyType_GetSlot(sc__py_snapshot_type, Py_tp_alloc);
	SnapshotObject *self = (SnapshotObject *)alloc(sc__py_snapshot_type, 0);
	if (!self) {
		sandbox_wait_closed(sandbox);
		snapcell_snapshot_free(snap);
		return NULL;
	}
	self->snap = snap;
	Py_INCREF(sandbox);
	self->sandbox = sandbox;
	return (PyObject *)self;
}

/* Claims a session or snapshot handle for one blocking call; -1 with an exception. */
static int claim(bool *busy, const void *handle, const char *what)
{
	if (!handle) {
		sc__py_closed(what);
		return -1;
	}
	if (*busy) {
		PyErr_Format(PyExc_RuntimeError, "%s is in use by another thread", what);
		return -1;
	}
	*busy = true;
	return 0;
}

static PyObject *sandbox_session(SandboxObject *self, PyObject *unused)
{
	if (sandbox_enter(self) < 0)
		return NULL;
	struct snapcell_session *s = NULL;
	struct snapcell_error err = {0};
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	rc = snapcell_session_new(self->sb, &s, &err);
	Py_END_ALLOW_THREADS;
	sandbox_leave(self);
	if (rc < 0)
		return sc__py_fail(rc, &err, "session", NULL, false);
	return wrap_session(self, s);
}

static int session_traverse(SessionObject *self, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(self));
	Py_VISIT(self->sandbox);
	return 0;
}

/* The C session may outlive its sandbox (then it only fails) but must not race its free. */
static void session_free_c(SessionObject *self)
{
	struct snapcell_session *s = self->s;
	self->s = NULL;
	if (!s)
		return;
	sandbox_wait_closed(self->sandbox);
	snapcell_session_free(s);
}

static void session_dealloc(SessionObject *self)
{
	PyTypeObject *type = Py_TYPE(self);
	PyObject_GC_UnTrack(self);
	session_free_c(self);
	Py_CLEAR(self->sandbox);
	freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
	tp_free(self);
	Py_DECREF(type);
}

static PyObject *session_close(SessionObject *self, PyObject *unused)
{
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "session is in use by another thread");
		return NULL;
	}
	session_free_c(self);
	Py_RETURN_NONE;
}

static PyObject *session_run(SessionObject *self, PyObject *args, PyObject *kwds)
{
	static char *kwlist[] = {"code", "cancel", "tools", "files", NULL};
	const char *code;
	Py_ssize_t len;
	PyObject *cancel = Py_None, *tools = Py_None, *files = Py_None;
	if (!PyArg_ParseTupleAndKeywords(args, kwds, "s#|OOO:run", kwlist, &code, &len, &cancel,
					 &tools, &files))
		return NULL;
	struct snapcell_run_options opts;
	struct sc_py_files keep;
	if (sc__py_run_options(cancel, tools, &opts) < 0 ||
	    sc__py_run_files(files, &opts, &keep) < 0)
		return NULL;
	if (claim(&self->busy, self->s, "session") < 0) {
		sc__py_run_files_clear(&keep);
		return NULL;
	}
	if (sandbox_enter(self->sandbox) < 0) {
		self->busy = false;
		sc__py_run_files_clear(&keep);
		return NULL;
	}
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	rc = snapcell_session_run(self->s, code, (size_t)len, &opts, &res, &err);
	Py_END_ALLOW_THREADS;
	sandbox_leave(self->sandbox);
	sc__py_run_files_clear(&keep);
	self->busy = false;
	if (rc == -EBUSY)
		return PyErr_Format(PyExc_RuntimeError, "session is busy: %s", err.message);
	if (rc < 0)
		return sc__py_fail(rc, &err, "session run", NULL, false);
	PyObject *d = sc__py_result(res);
	snapcell_result_free(res);
	return d;
}

static PyObject *session_snapshot(SessionObject *self, PyObject *unused)
{
	if (claim(&self->busy, self->s, "session") < 0)
		return NULL;
	if (sandbox_enter(self->sandbox) < 0) {
		self->busy = false;
		return NULL;
	}
	struct snapcell_snapshot *snap = NULL;
	struct snapcell_error err = {0};
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	rc = snapcell_session_snapshot(self->s, &snap, &err);
	Py_END_ALLOW_THREADS;
	sandbox_leave(self->sandbox);
	self->busy = false;
	if (rc < 0)
		return sc__py_fail(rc, &err, "snapshot", NULL, false);
	return wrap_snapshot(self->sandbox, snap);
}

static PyObject *session_restore(SessionObject *self, PyObject *arg)
{
	if (!PyObject_TypeCheck(arg, sc__py_snapshot_type))
		return PyErr_Format(PyExc_TypeError, "restore: expected a Snapshot");
	SnapshotObject *snap = (SnapshotObject *)arg;
	if (claim(&self->busy, self->s, "session") < 0)
		return NULL;
	if (claim(&snap->busy, snap->snap, "snapshot") < 0) {
		self->busy = false;
		return NULL;
	}
	int rc = sandbox_enter(self->sandbox);
	struct snapcell_error err = {0};
	if (rc == 0) {
		Py_BEGIN_ALLOW_THREADS;
		rc = snapcell_session_restore(self->s, snap->snap, &err);
		Py_END_ALLOW_THREADS;
		sandbox_leave(self->sandbox);
		if (rc < 0)
			sc__py_fail(rc, &err, "restore", NULL, false);
	}
	self->busy = snap->busy = false;
	if (rc < 0)
		return NULL;
	Py_RETURN_NONE;
}

static int snapshot_traverse(SnapshotObject *self, visitproc visit, void *arg)
{
	Py_VISIT(Py_TYPE(self));
	Py_VISIT(self->sandbox);
	return 0;
}

static void snapshot_free_c(SnapshotObject *self)
{
	struct snapcell_snapshot *snap = self->snap;
	self->snap = NULL;
	if (!snap)
		return;
	sandbox_wait_closed(self->sandbox);
	snapcell_snapshot_free(snap);
}

static void snapshot_dealloc(SnapshotObject *self)
{
	PyTypeObject *type = Py_TYPE(self);
	PyObject_GC_UnTrack(self);
	snapshot_free_c(self);
	Py_CLEAR(self->sandbox);
	freefunc tp_free = (freefunc)PyType_GetSlot(type, Py_tp_free);
	tp_free(self);
	Py_DECREF(type);
}

static PyObject *snapshot_close(SnapshotObject *self, PyObject *unused)
{
	if (self->busy) {
		PyErr_SetString(PyExc_RuntimeError, "snapshot is in use by another thread");
		return NULL;
	}
	snapshot_free_c(self);
	Py_RETURN_NONE;
}

static PyObject *snapshot_session(SnapshotObject *self, PyObject *unused)
{
	if (claim(&self->busy, self->snap, "snapshot") < 0)
		return NULL;
	if (sandbox_enter(self->sandbox) < 0) {
		self->busy = false;
		return NULL;
	}
	struct snapcell_session *s = NULL;
	struct snapcell_error err = {0};
	int rc;
	Py_BEGIN_ALLOW_THREADS;
	rc = snapcell_snapshot_new_session(self->snap, &s, &err);
	Py_END_ALLOW_THREADS;
	sandbox_leave(self->sandbox);
	self->busy = false;
	if (rc < 0)
		return sc__py_fail(rc, &err, "snapshot session", NULL, false);
	return wrap_session(self->sandbox, s);
}

static PyMethodDef sandbox_methods[] = {
	{"run", (PyCFunction)(void (*)(void))sandbox_run, METH_VARARGS | METH_KEYWORDS,
	 "run(code, cancel=None, tools=None, files=None) -> dict: the code in a fresh cell, with "
	 "a Config's tools added for this run, and files ((name, bytes, None) or (name, None, "
	 "host path) tuples) at /input; any number of threads at once."},
	{"resume", (PyCFunction)(void (*)(void))sandbox_resume, METH_VARARGS | METH_KEYWORDS,
	 "resume(pending_id, verdict, text=None, decided_by=None, cancel=None) -> dict: the "
	 "decision on a paused run (verdict 'approved', 'rejected' or 'value'; text the reason "
	 "or the value's JSON); ValueError when no run waits with that id."},
	{"session", (PyCFunction)sandbox_session, METH_NOARGS,
	 "session() -> Session: a cell that keeps its state between runs."},
	{"stats", (PyCFunction)sandbox_stats, METH_NOARGS,
	 "stats() -> dict: what the idle sandbox costs in memory."},
	{"close", (PyCFunction)sandbox_close, METH_NOARGS,
	 "close(): waits for the runs and session calls in flight (new ones are refused), then "
	 "ends the template and its cells and removes the work directory. Idempotent. Refused "
	 "from a tool callback of one of its own runs. Its sessions and snapshots then fail "
	 "until closed."},
	{NULL, NULL, 0, NULL},
};

static PyGetSetDef sandbox_getset[] = {
	{"isolation", (getter)sandbox_get_isolation, NULL, "the isolation level reached", NULL},
	{"reuse", (getter)sandbox_get_reuse, NULL,
	 "whether fresh cells are reset in place (snapcell_sandbox_reuse)", NULL},
	{NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot sandbox_slots[] = {
	{Py_tp_doc, "Sandbox(config): a warm template started from a copy of config."},
	{Py_tp_new, sandbox_new},
	{Py_tp_dealloc, sandbox_dealloc},
	{Py_tp_traverse, sandbox_traverse},
	{Py_tp_clear, sandbox_clear},
	{Py_tp_methods, sandbox_methods},
	{Py_tp_getset, sandbox_getset},
	{0, NULL},
};

PyType_Spec sc__py_sandbox_spec = {"snapcell._native.Sandbox", sizeof(SandboxObject), 0,
				   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, sandbox_slots};

static PyMethodDef session_methods[] = {
	{"run", (PyCFunction)(void (*)(void))session_run, METH_VARARGS | METH_KEYWORDS,
	 "run(code, cancel=None, tools=None, files=None) -> dict: the code in this session's "
	 "interpreter, with a Config's tools added for this run (files are refused)."},
	{"snapshot", (PyCFunction)session_snapshot, METH_NOARGS,
	 "snapshot() -> Snapshot: the session's state, frozen."},
	{"restore", (PyCFunction)session_restore, METH_O,
	 "restore(snapshot): replaces the session's state with a copy of the snapshot's."},
	{"close", (PyCFunction)session_close, METH_NOARGS,
	 "close(): ends the session; idempotent."},
	{NULL, NULL, 0, NULL},
};

static PyType_Slot session_slots[] = {
	{Py_tp_doc, "A session of a Sandbox (Sandbox.session()); one thread at a time."},
	{Py_tp_dealloc, session_dealloc},
	{Py_tp_traverse, session_traverse},
	{Py_tp_methods, session_methods},
	{0, NULL},
};

PyType_Spec sc__py_session_spec = {
	"snapcell._native.Session", sizeof(SessionObject), 0,
	Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION, session_slots};

static PyMethodDef snapshot_methods[] = {
	{"session", (PyCFunction)snapshot_session, METH_NOARGS,
	 "session() -> Session: a new session starting from a copy of this state."},
	{"close", (PyCFunction)snapshot_close, METH_NOARGS,
	 "close(): ends the snapshot; idempotent."},
	{NULL, NULL, 0, NULL},
};

static PyType_Slot snapshot_slots[] = {
	{Py_tp_doc, "A frozen session state (Session.snapshot()); one thread at a time."},
	{Py_tp_dealloc, snapshot_dealloc},
	{Py_tp_traverse, snapshot_traverse},
	{Py_tp_methods, snapshot_methods},
	{0, NULL},
};

PyType_Spec sc__py_snapshot_spec = {"snapcell._native.Snapshot", sizeof(SnapshotObject), 0,
				    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
					    Py_TPFLAGS_DISALLOW_INSTANTIATION,
				    snapshot_slots};
