/* The template's CPython (the interpreter the helper exec'd, started in isolated mode): set up
 * once in the read-only root, with the common standard library imported and frozen out of the
 * garbage collector's reach, so each forked cell shares it copy-on-write. The run logic itself
 * is Python (prelude.py). Limited API (abi3) only: one module serves every CPython >= 3.10. */
#define _GNU_SOURCE 1 /* as pyconfig.h has it, which may define it unguarded */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "guest.h"
#include "prelude.h"
#include "util/util.h"

/* Imported in the template: what model-written code reaches for most (statistics brings
 * decimal and fractions, re brings enum). The rest imports in the cell that uses it: each
 * module here costs every sandbox's start (dataclasses with inspect ~8 ms, hashlib with
 * libcrypto ~4 ms, pathlib ~5 ms). Nothing that starts a thread at import (the template must
 * be single-threaded when it forks), and not threading itself: its at-fork hook costs every
 * cell 0.2-0.6 ms (docs/performance.md). They are imported after the sandbox's first cell is
 * parked (sc_py_warm_template), so that the first run does not wait for them. */
static const char *const warm_modules[] = {
	"json",	     "re",	  "datetime", "collections", "math",   "random",   "itertools",
	"functools", "traceback", "typing",   "statistics",  "string", "time",	   "csv",
	"copy",	     "heapq",	  "bisect",   "operator",    "struct", "textwrap", "base64",
};

static PyObject *prelude_run, *prelude_warm, *prelude_prepare, *prelude_reseed;
static size_t warm_step; /* sc_py_warm_template's next: a warm_modules index, then prepare */
static bool config_code; /* the config runs code here: preloads, a warm-up, site directories */

/* Thread pools that size themselves from these at load (OpenBLAS, OpenMP, MKL, numexpr, BLIS):
 * pinned to 1 while preloads import, so numpy's BLAS starts no threads in the template. */
static const char *const thread_vars[] = {
	"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",  "MKL_NUM_THREADS",
	"NUMEXPR_NUM_THREADS",	"BLIS_NUM_THREADS", "GOTO_NUM_THREADS",
};

/* The template's interpreter as cells see it: the tool bridge importable as _snapcell, the
 * configured Python paths after the interpreter's own, sys.executable the interpreter only
 * where cells may exec it (Landlock), and an empty sys.argv[0] as for an interactive run. */
static int set_up_interpreter(const struct sc_guest_config *cfg)
{
	PyObject *bridge = sc_bridge_init();
	int rc = bridge ? PyDict_SetItemString(PyImport_GetModuleDict(), "_snapcell", bridge) : -1;
	Py_XDECREF(bridge);
	sc_bridge_set_cap(cfg->frame_cap);
	PyObject *path = PySys_GetObject("path"); /* borrowed */
	for (size_t i = 0; rc == 0 && i < cfg->n_python_paths; i++) {
		PyObject *p = PyUnicode_DecodeFSDefault(cfg->python_paths[i]);
		rc = p && path ? PyList_Append(path, p) : -1;
		Py_XDECREF(p);
	}
	const char *executable = cfg->exec ? cfg->ops->executable(cfg) : "";
	PyObject *exe = PyUnicode_DecodeFSDefault(executable);
	PyObject *argv = Py_BuildValue("[s]", "");
	if (rc == 0 && (!exe || !argv || PySys_SetObject("executable", exe) < 0 ||
			PySys_SetObject("argv", argv) < 0))
		rc = -1;
	Py_XDECREF(exe);
	Py_XDECREF(argv);
	return rc;
}

/* The template imports os only after the sandbox's first cell is parked (its import is ~1 ms
 * of a cold start that a run's own path does not need). Until then the environment is set in
 * posix.environ, which os.environ is made from at os's import, and in the process's own
 * (setenv); once os is there, through os.environ, which sets the process's too (putenv). */
int sc_py_setenv(const char *name, const char *value, bool overwrite)
{
	if (!overwrite && getenv(name))
		return 0;
	bool has_os = PyMapping_HasKeyString(PyImport_GetModuleDict(), "os");
	PyObject *mod = PyImport_ImportModule(has_os ? "os" : "posix");
	PyObject *environ = mod ? PyObject_GetAttrString(mod, "environ") : NULL;
	PyObject *k = has_os ? PyUnicode_DecodeFSDefault(name) : PyBytes_FromString(name);
	PyObject *v = has_os ? PyUnicode_DecodeFSDefault(value) : PyBytes_FromString(value);
	int rc = environ && k && v ? PyObject_SetItem(environ, k, v) : -1;
	if (rc == 0 && !has_os && setenv(name, value, 1) < 0)
		rc = -1;
	Py_XDECREF(k);
	Py_XDECREF(v);
	Py_XDECREF(environ);
	Py_XDECREF(mod);
	if (rc < 0) {
		PyErr_Clear();
		errno = ENOMEM;
	}
	return rc;
}

static int py_fail(struct snapcell_error *err, const char *what)
{
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	PyObject *s = value ? PyObject_Str(value) : NULL;
	const char *msg = s ? PyUnicode_AsUTF8AndSize(s, NULL) : NULL;
	sc__err(err, SNAPCELL_E_HELPER, "%s: %s", what, msg ? msg : "unknown error");
	Py_XDECREF(s);
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
	PyErr_Clear();
	return err ? err->code : SNAPCELL_E_HELPER;
}

/* The kernel's answer to "is this process single-threaded": unshare(CLONE_VM) is a no-op that
 * fails with EINVAL when another thread shares the address space (kernel/fork.c,
 * check_unshare_flags), and it needs no /proc, which the root does not have. Where a filter
 * refuses unshare altogether (a container's seccomp profile, at level rlimits, where the host's
 * /proc is there), /proc/self/status says. */
static bool single_threaded(void)
{
	if (unshare(CLONE_VM) == 0)
		return true;
	if (errno == EINVAL)
		return false;
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	long threads = -1;
	while (f && threads < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "Threads: %ld", &threads) != 1)
			threads = -1;
	if (f)
		fclose(f);
	return threads == 1;
}

static int preload_failed(PyObject *prelude, const char *name, struct snapcell_error *err)
{
	PyObject *type, *value, *tb;
	PyErr_Fetch(&type, &value, &tb);
	PyErr_NormalizeException(&type, &value, &tb);
	if (value && tb)
		PyException_SetTraceback(value, tb);
	PyObject *s = value ? PyObject_CallMethod(prelude, "preload_error", "(O)", value) : NULL;
	const char *msg = s ? PyUnicode_AsUTF8AndSize(s, NULL) : NULL;
	sc__err(err, SNAPCELL_E_HELPER, "preload %s: %s", name, msg ? msg : "import failed");
	Py_XDECREF(s);
	Py_XDECREF(type);
	Py_XDECREF(value);
	Py_XDECREF(tb);
	PyErr_Clear();
	return SNAPCELL_E_HELPER;
}

/* What stage (a preload, the warm-up) left mapped shared that a cell could write: the cells,
 * forks of the template, would all share it (template_shared.c). Unchecked, a configured
 * module would be a channel between runs, other users' included. */
static int shared_check(const char *stage, const char *name, struct snapcell_error *err)
{
	char what[512];
	int n = sc_shared_maps_scan(false, what, sizeof(what));
	if (n < 0)
		return sc__err(err, n, "%s%s%s: check the template's maps for shared memory", stage,
			       name ? " " : "", name ? name : "");
	if (n > 0)
		return sc__err(err, SNAPCELL_E_HELPER,
			       "%s%s%s: leaves shared memory mapped, which every cell would share "
			       "(map it MAP_PRIVATE): %s",
			       stage, name ? " " : "", name ? name : "", what);
	return 0;
}

#define FD_SCAN_MAX  (1 << 20) /* descriptors checked around the warm-up */
#define FD_PATH_SCAN 4096      /* ... and for O_PATH ones, which poll cannot see */
#define FD_LIST_MAX  256       /* the template's own: a few dozen at most */

/* The open descriptors below the soft RLIMIT_NOFILE, in order (at most max; -EMFILE if more),
 * without /proc (the root has none): poll says POLLNVAL for a closed one, 1024 a call, and
 * for an O_PATH one too (the template holds some), so below FD_PATH_SCAN those are asked
 * again with F_GETFD. */
static long open_fds(int *fds, size_t max)
{
	struct rlimit rl;
	rlim_t limit = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
	if (limit > FD_SCAN_MAX)
		limit = FD_SCAN_MAX;
	struct pollfd pf[1024];
	size_t n = 0;
	for (rlim_t base = 0; base < limit; base += SC_ARRAY_LEN(pf)) {
		size_t count = limit - base < SC_ARRAY_LEN(pf) ? limit - base : SC_ARRAY_LEN(pf);
		for (size_t i = 0; i < count; i++)
			pf[i] = (struct pollfd){.fd = (int)(base + i)};
		if (poll(pf, count, 0) < 0)
			return -errno;
		for (size_t i = 0; i < count; i++) {
			if ((pf[i].revents & POLLNVAL) &&
			    (pf[i].fd >= FD_PATH_SCAN || fcntl(pf[i].fd, F_GETFD) < 0))
				continue;
			if (n == max)
				return -EMFILE;
			fds[n++] = pf[i].fd;
		}
	}
	return (long)n;
}

/* The first descriptor in one sorted list and not the other, or -1. */
static int first_extra(const int *a, size_t n_a, const int *b, size_t n_b)
{
	for (size_t i = 0, j = 0; i < n_a; i++) {
		while (j < n_b && b[j] < a[i])
			j++;
		if (j == n_b || b[j] != a[i])
			return a[i];
	}
	return -1;
}

/* The config's warm-up (prelude.warm_up), checked like a preload to leave no thread running,
 * and to leave the template's descriptors as it found them: a file object it kept open would
 * name, in a cell, a descriptor the cell has closed (and may reuse). */
static int warm_up(PyObject *prelude, const char *code, struct snapcell_error *err)
{
	static int before[FD_LIST_MAX], after[FD_LIST_MAX];
	long n_before = open_fds(before, FD_LIST_MAX);
	if (n_before < 0)
		return sc__err(err, (int)n_before, "warm-up: list the template's descriptors");
	PyObject *r = PyObject_CallMethod(prelude, "warm_up", "(s)", code);
	if (!r)
		return py_fail(err, "warm-up");
	int rc = 0;
	if (r != Py_None)
		rc = sc__err(err, SNAPCELL_E_HELPER, "warm-up: %s",
			     PyUnicode_Check(r) ? PyUnicode_AsUTF8AndSize(r, NULL) : "failed");
	Py_DECREF(r);
	if (rc < 0)
		return rc;
	if (!single_threaded())
		return sc__err(err, SNAPCELL_E_HELPER,
			       "warm-up: leaves threads running; the template must be "
			       "single-threaded when it forks cells");
	if ((rc = shared_check("warm-up", NULL, err)) < 0)
		return rc;
	long n_after = open_fds(after, FD_LIST_MAX);
	int fd;
	if (n_after < 0)
		return sc__err(err, n_after == -EMFILE ? SNAPCELL_E_HELPER : (int)n_after,
			       "warm-up: leaves over %d descriptors open", FD_LIST_MAX);
	if ((fd = first_extra(after, (size_t)n_after, before, (size_t)n_before)) >= 0)
		return sc__err(err, SNAPCELL_E_HELPER,
			       "warm-up: leaves descriptor %d open (a file or socket it made); "
			       "close what it opens, e.g. with `with open(...)`",
			       fd);
	if ((fd = first_extra(before, (size_t)n_before, after, (size_t)n_after)) >= 0)
		return sc__err(err, SNAPCELL_E_HELPER,
			       "warm-up: closed descriptor %d, which the template needs", fd);
	return 0;
}

/* What the preloads and the warm-up wrote past the sink, to the real streams (sys.__stdout__,
 * C's stdio), goes to the template's /dev/null now: left in a buffer, it would be every
 * cell's, written to that cell's output at its next flush. */
static void flush_real_output(void)
{
	static const char *const names[] = {"__stdout__", "__stderr__"};
	for (size_t i = 0; i < SC_ARRAY_LEN(names); i++) {
		PyObject *stream = PySys_GetObject(names[i]);
		PyObject *r = stream && stream != Py_None
				      ? PyObject_CallMethod(stream, "flush", NULL)
				      : NULL;
		if (!r)
			PyErr_Clear();
		Py_XDECREF(r);
	}
	fflush(NULL);
}

/* The thread pools pinned to one thread (thread_vars), the caller's values kept in saved. */
static void pin_threads(char *saved[SC_ARRAY_LEN(thread_vars)])
{
	for (size_t i = 0; i < SC_ARRAY_LEN(thread_vars); i++) {
		const char *v = getenv(thread_vars[i]);
		saved[i] = v ? strdup(v) : NULL;
		setenv(thread_vars[i], "1", 1);
	}
}

static void unpin_threads(char *saved[SC_ARRAY_LEN(thread_vars)])
{
	for (size_t i = 0; i < SC_ARRAY_LEN(thread_vars); i++) {
		if (saved[i])
			setenv(thread_vars[i], saved[i], 1);
		else
			unsetenv(thread_vars[i]);
		free(saved[i]);
	}
}

/* The configured modules in order, each checked to leave no thread behind. */
static int import_preloads(PyObject *prelude, const struct sc_guest_config *cfg,
			   struct snapcell_error *err)
{
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < cfg->n_preloads; i++) {
		PyObject *m = PyImport_ImportModule(cfg->preloads[i]);
		if (!m)
			rc = preload_failed(prelude, cfg->preloads[i], err);
		else if (!single_threaded())
			rc = sc__err(err, SNAPCELL_E_HELPER,
				     "preload %s: leaves threads running after its import; the "
				     "template must be single-threaded when it forks cells",
				     cfg->preloads[i]);
		else
			rc = shared_check("preload", cfg->preloads[i], err);
		Py_XDECREF(m);
	}
	return rc;
}

/* Imports the preloads, then runs the warm-up, with the thread pools pinned; the caller's
 * values of those variables come back afterwards. */
static int preload(PyObject *prelude, const struct sc_guest_config *cfg, struct snapcell_error *err)
{
	char *saved[SC_ARRAY_LEN(thread_vars)];
	pin_threads(saved);
	/* What they print is dropped: left in sys.stdout's buffer, it would reach every cell's
	 * output (cells are forks), and kept in a StringIO, every cell's code. */
	PyObject *sink = PyObject_CallMethod(prelude, "_Discard", NULL);
	PyObject *out = Py_XNewRef(PySys_GetObject("stdout"));
	PyObject *errs = Py_XNewRef(PySys_GetObject("stderr"));
	int rc =
		sink && PySys_SetObject("stdout", sink) == 0 && PySys_SetObject("stderr", sink) == 0
			? 0
			: py_fail(err, "preload output");
	if (rc == 0)
		rc = import_preloads(prelude, cfg, err);
	if (rc == 0 && cfg->warmup) /* pinned too: it may import what starts a pool */
		rc = warm_up(prelude, cfg->warmup, err);
	if ((PySys_SetObject("stdout", out) < 0 || PySys_SetObject("stderr", errs) < 0) && rc == 0)
		rc = py_fail(err, "preload output");
	flush_real_output();
	Py_XDECREF(out);
	Py_XDECREF(errs);
	Py_XDECREF(sink);
	unpin_threads(saved);
	return rc;
}

/* A venv's site-packages: .pth files processed as site.addsitedir does; then sitecustomize. */
static int add_site_dirs(PyObject *prelude, const struct sc_guest_config *cfg,
			 struct snapcell_error *err)
{
	PyObject *dirs = PyList_New(0);
	for (size_t i = 0; dirs && i < cfg->n_python_paths; i++) {
		PyObject *s = cfg->python_path_site[i] ? PyUnicode_FromString(cfg->python_paths[i])
						       : NULL;
		if (s && PyList_Append(dirs, s) < 0)
			Py_CLEAR(dirs);
		Py_XDECREF(s);
	}
	PyObject *r = dirs ? PyObject_CallMethod(prelude, "add_site_dirs", "(O)", dirs) : NULL;
	Py_XDECREF(dirs);
	if (!r)
		return py_fail(err, "venv site-packages and sitecustomize");
	Py_DECREF(r);
	return 0;
}

/* [(name, attribute path, description), ...] for prelude.configure. */
static PyObject *tool_list(const struct sc_guest_config *cfg)
{
	PyObject *list = PyList_New((Py_ssize_t)cfg->n_tools);
	for (size_t i = 0; list && i < cfg->n_tools; i++) {
		PyObject *t = Py_BuildValue("(sss)", cfg->tool_names[i], cfg->tool_attrs[i],
					    cfg->tool_docs[i]);
		if (!t) {
			Py_CLEAR(list);
			break;
		}
		if (PyList_SetItem(list, (Py_ssize_t)i, t) < 0) { /* steals t */
			Py_CLEAR(list);
			break;
		}
	}
	return list;
}

/* prelude._compile: compile(source, filename, mode) ("exec", or "eval" for the code's last
 * expression) for a str or bytes source, without
 * builtins.compile's check for an AST object, which creates the ast module's ~120 types on a
 * process's first call. Py_CompileString (the stable ABI's) honours a coding cookie, in a str
 * source too, where builtins.compile ignores it. */
static PyObject *compile_exec(PyObject *self, PyObject *args)
{
	(void)self;
	PyObject *source, *filename, *bytes = NULL;
	const char *mode = "exec";
	if (!PyArg_ParseTuple(args, "OU|s:_compile", &source, &filename, &mode))
		return NULL;
	int start = !strcmp(mode, "eval") ? Py_eval_input : Py_file_input;
	if (start == Py_file_input && strcmp(mode, "exec") != 0)
		return PyErr_Format(PyExc_ValueError, "_compile() mode must be 'exec' or 'eval'");
	char *text = NULL;
	Py_ssize_t len = 0;
	const char *name = PyUnicode_AsUTF8AndSize(filename, NULL);
	if (PyUnicode_Check(source))
		source = bytes = PyUnicode_AsUTF8String(source);
	else if (!PyBytes_Check(source))
		return PyErr_Format(PyExc_TypeError, "_compile() needs str or bytes");
	if (!name || !source || PyBytes_AsStringAndSize(source, &text, &len) < 0) {
		Py_XDECREF(bytes);
		return NULL;
	}
	PyObject *code = NULL;
	if (strlen(text) != (size_t)len)
		PyErr_SetString(PyExc_ValueError, "source code string cannot contain null bytes");
	else
		code = Py_CompileString(text, name, start);
	Py_XDECREF(bytes);
	return code;
}

static PyMethodDef compile_def = {"_compile", compile_exec, METH_VARARGS, NULL};

/* What stage one made is frozen out of the collector's reach, as prelude.prepare does for the
 * rest later: a collection in the first cell would otherwise write to every object's header
 * and copy most of the heap (~1.5 ms of that cell's warm-up). */
static int freeze_heap(void)
{
	PyObject *gc = PyImport_ImportModule("gc");
	PyObject *r = gc ? PyObject_CallMethod(gc, "freeze", NULL) : NULL;
	Py_XDECREF(gc);
	Py_XDECREF(r);
	return r ? 0 : -1;
}

/* The prelude's code as the host's probe of this interpreter compiled it (marshal), or
 * NULL without an error set when there is none for this interpreter and this prelude. The
 * setup message it comes in is the host's (a sealed memfd nothing in the sandbox wrote). */
static PyObject *compiled_prelude(const struct sc_setup_python *py)
{
	if (!py->prelude || !py->sys_version || py->prelude_hash != sc__prelude_hash(sc_prelude_py))
		return NULL;
	PyObject *version = PySys_GetObject("version"); /* borrowed */
	const char *v = version ? PyUnicode_AsUTF8AndSize(version, NULL) : NULL;
	if (!v || strcmp(v, py->sys_version) != 0) {
		PyErr_Clear();
		return NULL;
	}
	PyObject *marshal = PyImport_ImportModule("marshal");
	PyObject *data =
		PyBytes_FromStringAndSize((const char *)py->prelude, (Py_ssize_t)py->prelude_bytes);
	PyObject *code =
		marshal && data ? PyObject_CallMethod(marshal, "loads", "(O)", data) : NULL;
	Py_XDECREF(marshal);
	Py_XDECREF(data);
	if (!code)
		PyErr_Clear();
	return code;
}

/* The prelude (the host's compiled copy, else compiled here from its source), with _compile
 * and the tools, network and bridge configured; a new reference, or NULL with the error set. */
static PyObject *load_prelude(const struct sc_guest_config *cfg)
{
	PyObject *code = compiled_prelude(&cfg->s.python);
	if (!code)
		code = Py_CompileString(sc_prelude_py, "<snapcell>", Py_file_input);
	PyObject *mod = code ? PyImport_ExecCodeModule("_snapcell_prelude", code) : NULL;
	Py_XDECREF(code);
	if (!mod)
		return NULL;
	prelude_run = PyObject_GetAttrString(mod, "run");
	prelude_warm = PyObject_GetAttrString(mod, "warm");
	prelude_prepare = PyObject_GetAttrString(mod, "prepare");
	prelude_reseed = PyObject_GetAttrString(mod, "reseed");
	PyObject *compile = PyCFunction_New(&compile_def, NULL);
	PyObject *tools = tool_list(cfg);
	PyObject *r =
		compile && tools && PyObject_SetAttrString(mod, "_compile", compile) == 0
			? PyObject_CallMethod(mod, "configure", "(OsO)", tools, cfg->network_notice,
					      cfg->network ? Py_True : Py_False)
			: NULL;
	Py_XDECREF(compile);
	Py_XDECREF(tools);
	Py_XDECREF(r);
	if (!r || !prelude_run || !prelude_warm || !prelude_prepare || !prelude_reseed)
		Py_CLEAR(mod);
	return mod;
}

int sc_py_init(const struct sc_guest_config *cfg, struct snapcell_error *err)
{
	config_code = cfg->n_preloads || cfg->warmup || cfg->n_python_paths;
	if (set_up_interpreter(cfg) < 0)
		return py_fail(err, "set up the interpreter");
	PyObject *mod = load_prelude(cfg);
	if (!mod)
		return py_fail(err, "prelude");
	int rc = add_site_dirs(mod, cfg, err);
	if (rc == 0 && !single_threaded())
		rc = sc__err(err, SNAPCELL_E_HELPER,
			     "venv site-packages: its .pth files or sitecustomize leave threads "
			     "running; the template must be single-threaded when it forks cells");
	if (rc == 0 && cfg->n_python_paths)
		rc = shared_check("venv site-packages", NULL, err);
	if (rc == 0)
		rc = preload(mod, cfg, err);
	Py_DECREF(mod);
	if (rc == 0 && freeze_heap() < 0)
		rc = py_fail(err, "prelude");
	return rc;
}

bool sc_py_warm_template(void)
{
	PyObject *r = NULL;
	if (warm_step < SC_ARRAY_LEN(warm_modules))
		r = PyImport_ImportModule(warm_modules[warm_step]);
	else if (warm_step == SC_ARRAY_LEN(warm_modules))
		r = PyObject_CallNoArgs(prelude_prepare);
	else
		return false;
	warm_step++;
	/* A module that fails here fails again, with its traceback, in the cell that imports it;
	 * a failed prepare leaves cells their own first-time work. */
	if (!r)
		PyErr_Clear();
	Py_XDECREF(r);
	return warm_step <= SC_ARRAY_LEN(warm_modules);
}

void sc_py_warm(void)
{
	PyObject *r = PyObject_CallNoArgs(prelude_warm);
	if (!r)
		PyErr_Clear();
	Py_XDECREF(r);
}

/* The VALUE frame's payload from the prelude's (state, JSON bytes or None): the state byte,
 * then the text; NULL when there is nothing to send (the run did not get to the value) or it
 * cannot be made: the host then reports the value not evaluated. */
static uint8_t *value_payload(PyObject *state, PyObject *text, size_t *len)
{
	long kind = PyLong_AsLong(state);
	char *bytes = NULL;
	Py_ssize_t n = 0;
	if (kind <= 0 || kind > 255 ||
	    (text != Py_None &&
	     (!PyBytes_Check(text) || PyBytes_AsStringAndSize(text, &bytes, &n) < 0)))
		return NULL;
	uint8_t *p = malloc(1 + (size_t)n);
	if (p) {
		p[0] = (uint8_t)kind;
		if (n)
			memcpy(p + 1, bytes, (size_t)n);
		*len = 1 + (size_t)n;
	}
	return p;
}

int sc_py_run(const uint8_t *code, size_t len, const uint8_t *tools, size_t tools_len, bool session,
	      struct sc_done_payload *done, uint8_t **value, size_t *value_len)
{
	memset(done, 0, sizeof(*done));
	*value = NULL;
	*value_len = 0;
	PyObject *src = PyBytes_FromStringAndSize((const char *)code, (Py_ssize_t)len);
	PyObject *run_tools =
		tools ? PyBytes_FromStringAndSize((const char *)tools, (Py_ssize_t)tools_len)
		      : Py_NewRef(Py_None);
	PyObject *r = src && run_tools
			      ? PyObject_CallFunction(prelude_run, "(OOO)", src,
						      session ? Py_True : Py_False, run_tools)
			      : NULL;
	Py_XDECREF(src);
	Py_XDECREF(run_tools);
	long status = SNAPCELL_STATUS_ERROR, exit_code = 1, flags = 0;
	if (r && PyTuple_Check(r) && PyTuple_Size(r) == 5) {
		status = PyLong_AsLong(PyTuple_GetItem(r, 0));
		exit_code = PyLong_AsLong(PyTuple_GetItem(r, 1));
		flags = PyLong_AsLong(PyTuple_GetItem(r, 2));
		*value = value_payload(PyTuple_GetItem(r, 3), PyTuple_GetItem(r, 4), value_len);
	} else {
		/* The code replaced our run function or broke the interpreter. */
		PyErr_Print();
	}
	Py_XDECREF(r);
	PyErr_Clear();
	done->status = (uint8_t)status;
	done->limits_hit = (uint32_t)flags;
	return (int)(exit_code & 0xff);
}

int sc_py_before_fork(void)
{
	PyOS_BeforeFork();
	/* Code the config left may still run in the template after its checks (an at-fork hook,
	 * an import hook the warm-up steps call, a finalizer): what it mapped shared is kept
	 * from this cell, which faults if it touches it, rather than shared with it. */
	int rc = config_code ? sc_shared_maps_scan(true, NULL, 0) : 0;
	if (rc < 0)
		errno = -rc;
	return rc < 0 ? -1 : 0;
}

void sc_py_after_fork_parent(void)
{
	PyOS_AfterFork_Parent();
}

void sc_py_after_fork_child(void)
{
	config_code = false; /* a cell's forks are its session's own */
	PyOS_AfterFork_Child();
}

/* A generator left as it was parked would give every run in the cell the same numbers: a
 * cell that cannot renew them does not run code. */
void sc_py_after_reset(void)
{
	PyObject *r = PyObject_CallNoArgs(prelude_reseed);
	if (!r)
		_exit(124);
	Py_DECREF(r);
}
