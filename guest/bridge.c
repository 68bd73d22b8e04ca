/* The `_snapcell` builtin module: the cell's side of a tool call. It writes a CALL frame on the
 * cell's frame socket and blocks (without the GIL) for the RESULT frame. Calls from threads
 * are serialised; a forked child of the cell may not call (it shares the socket). The Python
 * face of this (call_tool, the tools module, ToolError) is prelude.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest.h"

/* How long a call waits for its answer without sleeping (rpc/frame.h): a host tool that
 * answers at once (microseconds) is caught without this CPU going idle and being woken. A
 * slow tool costs this much CPU, and only until the spins back off. */
#ifndef CALL_SPIN_US
#define CALL_SPIN_US 50
#endif

/* Calls take turns in the order they were made (a ticket lock: a plain mutex lets a thread
 * that just had its answer call again ahead of one already waiting), so calls that wait for a
 * host's decision are asked about one at a time, in call order. */
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t call_turn = PTHREAD_COND_INITIALIZER;
static unsigned long call_next, call_serving;		       /* under call_lock */
static struct sc_spin call_spin = {.window_us = CALL_SPIN_US}; /* the turn's holder's */

static void turn_take(void)
{
	pthread_mutex_lock(&call_lock);
	unsigned long mine = call_next++;
	while (mine != call_serving)
		pthread_cond_wait(&call_turn, &call_lock);
	pthread_mutex_unlock(&call_lock);
}

static void turn_give(void)
{
	pthread_mutex_lock(&call_lock);
	call_serving++;
	pthread_cond_broadcast(&call_turn);
	pthread_mutex_unlock(&call_lock);
}
static size_t frame_cap = SC_FRAME_DEFAULT_CAP;
/* The process running a run's code (cell.c sets it before each run); 0 until then, so the
 * template (its warm-up) has no tool or network channel: its fd 3 is the control socket. */
static int owner_pid;

void sc_bridge_set_owner(int pid)
{
	owner_pid = pid;
}

void sc_bridge_set_cap(size_t cap)
{
	frame_cap = cap;
}

/* Sends the call and waits for the answer; 0 or -errno. */
static int exchange(const char *name, Py_ssize_t name_len, const char *args, Py_ssize_t args_len,
		    uint8_t **answer, size_t *answer_len)
{
	size_t len = (size_t)name_len + 1 + (size_t)args_len;
	char *payload = malloc(len);
	if (!payload)
		return -ENOMEM;
	memcpy(payload, name, (size_t)name_len);
	payload[name_len] = 0;
	memcpy(payload + name_len + 1, args, (size_t)args_len);
	turn_take();
	int rc = sc__frame_write(SC_CELL_RPC_FD, SC_FRAME_CALL, payload, len);
	uint8_t type = 0;
	if (rc == 0)
		rc = sc__frame_read_reply(SC_CELL_RPC_FD, frame_cap, &call_spin, &type, answer,
					  answer_len);
	turn_give();
	free(payload);
	if (rc == 0 && (type != SC_FRAME_RESULT || *answer_len == 0)) {
		free(*answer);
		rc = -EPROTO;
	}
	return rc;
}

static PyObject *bridge_call(PyObject *self, PyObject *args)
{
	const char *name, *body;
	Py_ssize_t name_len, body_len;
	if (!PyArg_ParseTuple(args, "s#y#:call", &name, &name_len, &body, &body_len))
		return NULL;
	if (owner_pid == 0) {
		PyErr_SetString(PyExc_RuntimeError,
				"call_tool is not available in the warm-up (it runs in the "
				"template, before any run)");
		return NULL;
	}
	if (getpid() != owner_pid) {
		PyErr_SetString(PyExc_RuntimeError,
				"call_tool is only available in the process running the code, not "
				"in a forked child");
		return NULL;
	}
	/* Checked here so the code gets a ToolError and not a dead cell (the host refuses too:
	 * a name is what precedes the frame's last NUL). */
	if (name_len > SNAPCELL_TOOL_NAME_MAX) {
		PyErr_Format(PyExc_ValueError, "a tool name of %zd bytes; the limit is %d",
			     name_len, SNAPCELL_TOOL_NAME_MAX);
		return NULL;
	}
	if (memchr(name, 0, (size_t)name_len)) {
		PyErr_SetString(PyExc_ValueError, "a NUL byte in the tool name");
		return NULL;
	}
	if ((size_t)(name_len + body_len) + 1 > frame_cap) {
		PyErr_Format(PyExc_ValueError, "tool arguments are %zd bytes; the limit is %zu",
			     body_len, frame_cap - (size_t)name_len - 1);
		return NULL;
	}
	uint8_t *answer = NULL;
	size_t answer_len = 0;
	PyThreadState *ts = PyEval_SaveThread();
	int rc = exchange(name, name_len, body, body_len, &answer, &answer_len);
	PyEval_RestoreThread(ts);
	if (rc < 0) {
		errno = -rc;
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	PyObject *r = Py_BuildValue("(Ny#)", PyBool_FromLong(answer[0] == 1), answer + 1,
				    (Py_ssize_t)answer_len - 1);
	free(answer);
	return r;
}

/* net(question) -> answer: one question to the host's egress gate on the network socket
 * ("R name", "C address port"); the answer starts with '1' (yes, and the address) or '0'
 * (no, and why). */
static PyObject *bridge_net(PyObject *self, PyObject *args)
{
	static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
	const char *q;
	Py_ssize_t q_len;
	if (!PyArg_ParseTuple(args, "y#:net", &q, &q_len))
		return NULL;
	if (owner_pid == 0) {
		PyErr_SetString(PyExc_PermissionError,
				"no network in the warm-up (it runs in the template, before any "
				"run)");
		return NULL;
	}
	if (getpid() != owner_pid) {
		PyErr_SetString(PyExc_PermissionError,
				"the network is only available in the process running the code, "
				"not in a forked child");
		return NULL;
	}
	if (q_len > 1024) {
		PyErr_SetString(PyExc_ValueError, "a network question over 1024 bytes");
		return NULL;
	}
	uint8_t *answer = NULL, type = 0;
	size_t answer_len = 0;
	PyThreadState *ts = PyEval_SaveThread();
	pthread_mutex_lock(&net_lock);
	int rc = sc__frame_write(SC_CELL_NET_FD, SC_FRAME_NET, q, (size_t)q_len);
	if (rc == 0)
		rc = sc__frame_read_reply(SC_CELL_NET_FD, 4096, NULL, &type, &answer, &answer_len);
	pthread_mutex_unlock(&net_lock);
	PyEval_RestoreThread(ts);
	if (rc == 0 && (type != SC_FRAME_NET_ANSWER || answer_len == 0)) {
		free(answer);
		rc = -EPROTO;
	}
	if (rc < 0) {
		errno = -rc;
		return PyErr_SetFromErrno(PyExc_OSError);
	}
	PyObject *r = Py_BuildValue("(Ns#)", PyBool_FromLong(answer[0] == '1'), answer + 1,
				    (Py_ssize_t)answer_len - 1);
	free(answer);
	return r;
}

static PyMethodDef bridge_methods[] = {
	{"net", bridge_net, METH_VARARGS,
	 "net(question) -> (ok, answer): one question to the host's egress gate."},
	{"call", bridge_call, METH_VARARGS,
	 "call(name, args_json) -> (ok, answer): one tool call through the host."},
	{NULL, NULL, 0, NULL},
};

static struct PyModuleDef bridge_module = {
	PyModuleDef_HEAD_INIT,
	"_snapcell",
	"The cell's tool-call channel to the host.",
	-1,
	bridge_methods,
	NULL,
	NULL,
	NULL,
	NULL,
};

PyObject *sc_bridge_init(void)
{
	return PyModule_Create(&bridge_module);
}
