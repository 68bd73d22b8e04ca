/* The `_snapcell` builtin module: the cell's side of a tool call. A call writes a CALL frame
 * carrying an id of its own on the cell's frame socket; answers come back as RESULT frames
 * with that id, in any order, so several calls can be in flight at once (threads, or calls
 * awaited in an event loop). A synchronous call blocks (without the GIL) until its answer is
 * filed; an awaited one is started here and its answer collected by the loop (prelude.py). A
 * forked child of the cell may not call (it shares the socket). The Python face of this
 * (call_tool, the tools module, ToolError) is prelude.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "guest.h"
#include "util/util.h"

/* How long a call waits for its answer without sleeping (rpc/frame.h): a host tool that
 * answers at once (microseconds) is caught without this CPU going idle and being woken. A
 * slow tool costs this much CPU, and only until the spins back off. */
#ifndef CALL_SPIN_US
#define CALL_SPIN_US 50
#endif

/* A call in flight. Its answer is filed by whichever thread reads the socket. */
struct call {
	uint32_t id;
	bool awaited; /* collected by an event loop (collect), never waited for by a thread */
	bool done;
	uint8_t *answer; /* ok byte, then the text */
	size_t answer_len;
	struct call *next;
};

/* One thread at a time reads the socket (the reader: a call waiting for its answer, or an
 * event loop collecting) and files every answer it reads with its call; the others wait on
 * `answered`. So no answer is lost to the wrong thread, and none waits for a reader that is
 * not there. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t answered = PTHREAD_COND_INITIALIZER;
static struct call *calls;	      /* under mu */
static unsigned n_calls;	      /* under mu */
static uint32_t next_id;	      /* under mu */
static bool reading;		      /* under mu: a thread holds the reader's role */
static int broken;		      /* under mu: the channel failed (-errno); sticky */
static struct sc_frame_reader reader; /* the reader's */
static struct sc_spin call_spin = {.window_us = CALL_SPIN_US}; /* the reader's */
/* Written when a thread files an awaited call's answer, so the loop that waits for it wakes
 * (it watches this and the socket; the socket alone may have been emptied by the thread). */
static int notify_fd = -1;

/* Frames go out whole and in the order calls were made (a ticket lock: a plain mutex lets a
 * thread that just had its answer call again ahead of one already waiting), so calls that
 * wait for a host's decision are asked about in call order. */
static pthread_mutex_t call_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t call_turn = PTHREAD_COND_INITIALIZER;
static unsigned long call_next, call_serving; /* under call_lock */

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
	if (!reader.cap)
		sc__frame_reader_init(&reader, SC_FRAME_DEFAULT_CAP);
}

void sc_bridge_set_cap(size_t cap)
{
	frame_cap = cap;
}

/* Files one frame the reader read; the host sends nothing but answers during a run. An answer
 * to no call in flight (one a finished run left behind) is dropped. */
static int file_answer(void)
{
	if (sc__frame_type(&reader) != SC_FRAME_RESULT || reader.payload_len < SC_RESULT_HEAD_LEN)
		return -EPROTO;
	uint32_t id = sc__le32(reader.payload);
	size_t len = reader.payload_len - 4;
	uint8_t *answer = malloc(len);
	if (!answer)
		return -ENOMEM;
	memcpy(answer, reader.payload + 4, len);
	pthread_mutex_lock(&mu);
	struct call *c = calls;
	while (c && c->id != id)
		c = c->next;
	if (c && !c->done) {
		c->answer = answer;
		c->answer_len = len;
		c->done = true;
		answer = NULL;
		pthread_cond_broadcast(&answered);
		if (c->awaited && notify_fd >= 0) {
			uint64_t one = 1;
			if (write(notify_fd, &one, sizeof(one)) < 0) {
				/* full (2^64 - 2): the loop has plenty to wake for */
			}
		}
	}
	pthread_mutex_unlock(&mu);
	free(answer);
	return 0;
}

/* The reader's read: what the socket has (waiting for the first bytes, spinning first, when
 * block), every whole frame filed. Returns the bytes read (0: none were waiting), or -errno. */
static ssize_t read_some(bool block)
{
	uint8_t buf[16384];
	uint64_t until = block ? sc__spin_start(&call_spin) : 0;
	bool spun = until != 0;
	ssize_t n;
	for (;;) {
		n = recv(SC_CELL_RPC_FD, buf, sizeof(buf), block && !until ? 0 : MSG_DONTWAIT);
		if (n >= 0 || (errno != EINTR && errno != EAGAIN))
			break;
		if (!block)
			return 0;
		if (until && sc__now_us() >= until)
			until = 0;
	}
	if (spun)
		sc__spin_end(&call_spin, until != 0);
	if (n <= 0)
		return n < 0 ? -errno : -EPIPE;
	for (size_t off = 0; off < (size_t)n;) {
		size_t used;
		int rc = sc__frame_feed(&reader, buf + off, (size_t)n - off, &used);
		off += used;
		if (rc < 0)
			return rc;
		if (rc == 1 && (rc = file_answer()) < 0)
			return rc;
	}
	return n;
}

/* Takes the reader's role when no thread has it; mu held. */
static bool reader_take(void)
{
	if (reading || broken)
		return false;
	reading = true;
	return true;
}

/* Gives the role back after reading (rc: read_some's); mu held. */
static void reader_give(ssize_t rc)
{
	reading = false;
	if (rc < 0 && !broken)
		broken = (int)rc;
	pthread_cond_broadcast(&answered);
}

static void unlink_call(struct call *c)
{
	struct call **p = &calls;
	while (*p != c)
		p = &(*p)->next;
	*p = c->next;
	n_calls--;
}

/* Lists a new call; the call, or NULL with *rc set. */
static struct call *call_register(bool awaited, int *rc)
{
	struct call *c = calloc(1, sizeof(*c));
	*rc = c ? 0 : -ENOMEM;
	pthread_mutex_lock(&mu);
	if (*rc == 0 && broken)
		*rc = broken;
	else if (*rc == 0 && n_calls >= SC_CALLS_IN_FLIGHT_MAX)
		*rc = -EBUSY;
	if (*rc == 0) {
		c->id = ++next_id;
		c->awaited = awaited;
		c->next = calls;
		calls = c;
		n_calls++;
	}
	pthread_mutex_unlock(&mu);
	if (*rc < 0) {
		free(c);
		return NULL;
	}
	return c;
}

/* Writes a listed call's frame (GIL released); 0, or -errno with the call unlisted and freed
 * and the channel broken. */
static int call_write(struct call *c, const char *name, Py_ssize_t name_len, const char *args,
		      Py_ssize_t args_len)
{
	size_t len = SC_CALL_HEAD_LEN + (size_t)name_len + 1 + (size_t)args_len;
	uint8_t *payload = malloc(len);
	int rc = -ENOMEM;
	if (payload) {
		sc__put_le32(payload, c->id);
		payload[4] = c->awaited ? SC_CALL_AWAITED : 0;
		memcpy(payload + SC_CALL_HEAD_LEN, name, (size_t)name_len);
		payload[SC_CALL_HEAD_LEN + name_len] = 0;
		memcpy(payload + SC_CALL_HEAD_LEN + name_len + 1, args, (size_t)args_len);
		turn_take();
		rc = sc__frame_write(SC_CELL_RPC_FD, SC_FRAME_CALL, payload, len);
		turn_give();
		free(payload);
	}
	if (rc < 0) {
		pthread_mutex_lock(&mu);
		unlink_call(c);
		if (!broken && rc != -ENOMEM)
			broken = rc;
		pthread_mutex_unlock(&mu);
		free(c);
	}
	return rc;
}

/* Waits for c's answer, reading the socket when no other thread does; 0 or -errno. */
static int call_wait(struct call *c, uint8_t **answer, size_t *answer_len)
{
	pthread_mutex_lock(&mu);
	while (!c->done && !broken) {
		if (!reader_take()) {
			pthread_cond_wait(&answered, &mu);
			continue;
		}
		pthread_mutex_unlock(&mu);
		ssize_t rc = read_some(true);
		pthread_mutex_lock(&mu);
		reader_give(rc);
	}
	int rc = c->done ? 0 : broken;
	unlink_call(c);
	pthread_mutex_unlock(&mu);
	*answer = c->answer;
	*answer_len = c->answer_len;
	free(c);
	return rc;
}

/* The checks every call makes before anything is sent: a ToolError in the code rather than a
 * dead cell (the host refuses these too: a name is what precedes the frame's last NUL). */
static int call_check(const char *name, Py_ssize_t name_len, Py_ssize_t body_len)
{
	if (owner_pid == 0) {
		PyErr_SetString(PyExc_RuntimeError,
				"call_tool is not available in the warm-up (it runs in the "
				"template, before any run)");
		return -1;
	}
	if (getpid() != owner_pid) {
		PyErr_SetString(PyExc_RuntimeError,
				"call_tool is only available in the process running the code, not "
				"in a forked child");
		return -1;
	}
	if (name_len > SNAPCELL_TOOL_NAME_MAX) {
		PyErr_Format(PyExc_ValueError, "a tool name of %zd bytes; the limit is %d",
			     name_len, SNAPCELL_TOOL_NAME_MAX);
		return -1;
	}
	if (memchr(name, 0, (size_t)name_len)) {
		PyErr_SetString(PyExc_ValueError, "a NUL byte in the tool name");
		return -1;
	}
	if ((size_t)(name_len + body_len) + 1 + SC_CALL_HEAD_LEN > frame_cap) {
		PyErr_Format(PyExc_ValueError, "tool arguments are %zd bytes; the limit is %zu",
			     body_len, frame_cap - (size_t)name_len - 1 - SC_CALL_HEAD_LEN);
		return -1;
	}
	return 0;
}

static PyObject *channel_error(int rc)
{
	if (rc == -EBUSY)
		return PyErr_Format(PyExc_ValueError, "%d tool calls are in flight already",
				    SC_CALLS_IN_FLIGHT_MAX);
	errno = -rc;
	return PyErr_SetFromErrno(PyExc_OSError);
}

static PyObject *answer_tuple(uint8_t *answer, size_t answer_len)
{
	PyObject *r = Py_BuildValue("(Ny#)", PyBool_FromLong(answer[0] == 1), answer + 1,
				    (Py_ssize_t)answer_len - 1);
	free(answer);
	return r;
}

/* call(name, args_json) -> (ok, answer): a call that blocks this thread for its answer. */
static PyObject *bridge_call(PyObject *self, PyObject *args)
{
	const char *name, *body;
	Py_ssize_t name_len, body_len;
	if (!PyArg_ParseTuple(args, "s#y#:call", &name, &name_len, &body, &body_len))
		return NULL;
	if (call_check(name, name_len, body_len) < 0)
		return NULL;
	uint8_t *answer = NULL;
	size_t answer_len = 0;
	int rc;
	PyThreadState *ts = PyEval_SaveThread();
	struct call *c = call_register(false, &rc);
	if (c && (rc = call_write(c, name, name_len, body, body_len)) == 0)
		rc = call_wait(c, &answer, &answer_len);
	PyEval_RestoreThread(ts);
	return rc < 0 ? channel_error(rc) : answer_tuple(answer, answer_len);
}

/* start(name, args_json, table, value) -> id: sends an awaited call, its answer for collect();
 * table[id] = value is set before the call can be answered (another thread's collect may read
 * the answer while this one writes the frame), and removed again when it cannot be sent. */
static PyObject *bridge_start(PyObject *self, PyObject *args)
{
	const char *name, *body;
	Py_ssize_t name_len, body_len;
	PyObject *table, *value;
	if (!PyArg_ParseTuple(args, "s#y#O!O:start", &name, &name_len, &body, &body_len,
			      &PyDict_Type, &table, &value))
		return NULL;
	if (call_check(name, name_len, body_len) < 0)
		return NULL;
	int rc;
	struct call *c = call_register(true, &rc);
	if (!c)
		return channel_error(rc);
	PyObject *id = PyLong_FromUnsignedLong(c->id);
	if (!id || PyDict_SetItem(table, id, value) < 0) {
		pthread_mutex_lock(&mu);
		unlink_call(c);
		pthread_mutex_unlock(&mu);
		free(c);
		Py_XDECREF(id);
		return NULL;
	}
	PyThreadState *ts = PyEval_SaveThread();
	rc = call_write(c, name, name_len, body, body_len);
	PyEval_RestoreThread(ts);
	if (rc < 0) {
		if (PyDict_DelItem(table, id) < 0)
			PyErr_Clear();
		Py_DECREF(id);
		return channel_error(rc);
	}
	return id;
}

/* collect() -> [(id, ok, answer)]: the awaited calls answered so far, reading what the socket
 * holds first when no thread is reading it. Never blocks. */
static PyObject *bridge_collect(PyObject *self, PyObject *noargs)
{
	uint64_t drained;
	if (notify_fd >= 0 && read(notify_fd, &drained, sizeof(drained)) < 0) {
		/* nothing was filed by a thread */
	}
	pthread_mutex_lock(&mu);
	if (reader_take()) {
		pthread_mutex_unlock(&mu);
		ssize_t rc;
		while ((rc = read_some(false)) > 0)
			;
		pthread_mutex_lock(&mu);
		reader_give(rc);
	}
	int failed = broken;
	struct call *done = NULL;
	for (struct call **p = &calls; *p;) {
		struct call *c = *p;
		if (c->awaited && (c->done || failed)) {
			*p = c->next;
			n_calls--;
			c->next = done;
			done = c;
		} else {
			p = &c->next;
		}
	}
	pthread_mutex_unlock(&mu);
	PyObject *list = PyList_New(0);
	while (done) {
		struct call *c = done;
		done = c->next;
		PyObject *item = NULL;
		if (list && c->done)
			item = Py_BuildValue("(kNy#)", (unsigned long)c->id,
					     PyBool_FromLong(c->answer[0] == 1), c->answer + 1,
					     (Py_ssize_t)c->answer_len - 1);
		else if (list)
			item = Py_BuildValue("(kOi)", (unsigned long)c->id, Py_None, -failed);
		if (!item || PyList_Append(list, item) < 0)
			Py_CLEAR(list);
		Py_XDECREF(item);
		free(c->answer);
		free(c);
	}
	return list;
}

/* fds() -> (socket, notify): what an event loop watches to know an answer may be waiting. */
static PyObject *bridge_fds(PyObject *self, PyObject *noargs)
{
	pthread_mutex_lock(&mu);
	if (notify_fd < 0)
		notify_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int fd = notify_fd;
	pthread_mutex_unlock(&mu);
	if (fd < 0)
		return PyErr_SetFromErrno(PyExc_OSError);
	return Py_BuildValue("(ii)", SC_CELL_RPC_FD, fd);
}

void sc_bridge_end_run(void)
{
	/* A session's worker reads its next request from this socket: a RESULT the reader has
	 * only begun (its call's code gave up on it) is read to its end, so that request starts
	 * on a frame boundary. Answers the host sent whole are skipped there. Awaited calls the
	 * code left behind are forgotten: the host answers nothing after the run. */
	pthread_mutex_lock(&mu);
	for (struct call **p = &calls; *p;) {
		struct call *c = *p;
		if (c->awaited) {
			*p = c->next;
			n_calls--;
			free(c->answer);
			free(c);
		} else {
			p = &c->next;
		}
	}
	bool mine = reader_take();
	pthread_mutex_unlock(&mu);
	if (!mine)
		return;
	ssize_t rc = 0;
	while (rc >= 0 && reader.header_got > 0 &&
	       !(reader.header_got == SC_FRAME_HEADER_LEN && reader.payload &&
		 reader.payload_got == reader.payload_len))
		rc = read_some(true);
	pthread_mutex_lock(&mu);
	reader_give(rc);
	pthread_mutex_unlock(&mu);
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
	{"start", bridge_start, METH_VARARGS,
	 "start(name, args_json) -> id: an awaited tool call; collect() gives its answer."},
	{"collect", bridge_collect, METH_NOARGS,
	 "collect() -> [(id, ok, answer)]: awaited calls answered (ok None: the channel failed, "
	 "answer its errno)."},
	{"fds", bridge_fds, METH_NOARGS,
	 "fds() -> (socket, notify): descriptors an event loop watches for answers."},
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
