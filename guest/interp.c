/* The helper as the cell's python3. The template copies itself into each root at
 * SC_INTERP_PATH with its mode mark rewritten (src/isolate/rootfs.c), so that copy runs as a
 * plain CPython with the cell's search path and can never be a template: it reads no
 * control socket, makes no namespace or mount, and runs only under the policy of the cell
 * that exec'd it (seccomp, Landlock, no_new_privs, rlimits, all inherited across exec). */
#define _GNU_SOURCE
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <fcntl.h>
#include <linux/seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "guest.h"
#include "util/util.h"

/* The host's helper holds "template" here; its copy in a root holds "python". Read through
 * a volatile so the compiler cannot fold the test into a constant. */
#define MARK_HEAD "snapcell helper mode: "
static volatile const char mode_mark[SC_INTERP_MARK_LEN] = MARK_HEAD "template";
static const char python_mark[SC_INTERP_MARK_LEN] = MARK_HEAD "python";

bool sc_interp_is_copy(void)
{
	for (size_t i = 0; i < SC_INTERP_MARK_LEN; i++)
		if (mode_mark[i] != python_mark[i])
			return false;
	return true;
}

void sc_interp_marks(const void **mark, const void **patch)
{
	static char copy[SC_INTERP_MARK_LEN];
	for (size_t i = 0; i < SC_INTERP_MARK_LEN; i++)
		copy[i] = mode_mark[i];
	*mark = copy;
	*patch = python_mark;
}

static _Noreturn void refuse(const char *why)
{
	char line[160];
	int n = snprintf(line, sizeof(line), "python3: %s\n", why);
	(void)!write(2, line, (size_t)n);
	_exit(126);
}

static int append(PyWideStringList *list, const char *path)
{
	wchar_t *w = Py_DecodeLocale(path, NULL);
	if (!w)
		return -1;
	PyStatus st = PyWideStringList_Append(list, w);
	PyMem_RawFree(w);
	return PyStatus_Exception(st) ? -1 : 0;
}

/* SC_PYTHON_CONF, as the template wrote it; at most 64 KiB. */
static char *read_conf(void)
{
	enum { MAX = 64 << 10 };
	char *buf = calloc(1, MAX + 1);
	int fd = open(SC_PYTHON_CONF, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 || !buf ? -1 : read(fd, buf, MAX);
	if (fd >= 0)
		close(fd);
	if (n < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

/* $PYTHONPATH (unless -E or -I), the standard library, then the cell's configured paths. */
static int search_path(PyConfig *c, char *conf)
{
	const char *env = c->use_environment ? getenv("PYTHONPATH") : NULL;
	static const char *const stdlib[] = {SC_PY_STDLIB, SC_PY_DYNLOAD};
	if (PyStatus_Exception(PyConfig_SetWideStringList(c, &c->module_search_paths, 0, NULL)))
		return -1;
	c->module_search_paths_set = 1;
	char *dup = env && *env ? strdup(env) : NULL, *save = NULL;
	for (char *p = dup ? strtok_r(dup, ":", &save) : NULL; p; p = strtok_r(NULL, ":", &save))
		if (append(&c->module_search_paths, p) < 0)
			return -1;
	free(dup);
	for (size_t i = 0; i < SC_ARRAY_LEN(stdlib); i++)
		if (append(&c->module_search_paths, stdlib[i]) < 0)
			return -1;
	for (char *line = strtok_r(conf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *dir = strchr(line, ' ');
		if (dir && append(&c->module_search_paths, dir + 1) < 0)
			return -1;
	}
	return 0;
}

/* A venv's .pth files, as the template processed them (site.addsitedir). */
static void add_site_dirs(const char *conf)
{
	const char *line = conf;
	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		if (len > 5 && strncmp(line, "site ", 5) == 0) {
			PyObject *site = PyImport_ImportModule("site");
			PyObject *r = site ? PyObject_CallMethod(site, "addsitedir", "s#", line + 5,
								 (Py_ssize_t)(len - 5))
					   : NULL;
			if (!r)
				PyErr_Print();
			Py_XDECREF(r);
			Py_XDECREF(site);
		}
		line = end ? end + 1 : NULL;
	}
}

static int fail(PyStatus st)
{
	if (PyStatus_IsExit(st))
		return st.exitcode;
	Py_ExitStatusException(st);
}

int sc_interp_main(int argc, char **argv)
{
	/* First: exec made the process dumpable again. Then the policy the cell had must still
	 * hold; without it this is not a cell's process and runs nothing. */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		refuse("cannot make the process non-dumpable");
	if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != SECCOMP_MODE_FILTER ||
	    prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		refuse("runs only inside a snapcell cell");
	char *conf = read_conf(), *paths = conf ? strdup(conf) : NULL;
	if (!paths)
		refuse("cannot read " SC_PYTHON_CONF);
	PyPreConfig pre;
	PyPreConfig_InitPythonConfig(&pre);
	pre.utf8_mode = 1; /* as in the cell: no locale but C.UTF-8 */
	PyStatus st = Py_PreInitializeFromBytesArgs(&pre, argc, argv);
	if (PyStatus_Exception(st))
		return fail(st);
	PyConfig c;
	PyConfig_InitPythonConfig(&c);
	c.user_site_directory = 0; /* ~ is /tmp, the code's own */
	c.write_bytecode = 0;	   /* the root is read-only */
	st = PyConfig_SetBytesArgv(&c, argc, argv);
	if (!PyStatus_Exception(st))
		st = PyConfig_SetString(&c, &c.program_name, L"" SC_INTERP_PATH);
	if (!PyStatus_Exception(st))
		st = PyConfig_SetString(&c, &c.executable, L"" SC_INTERP_PATH);
	if (!PyStatus_Exception(st))
		st = PyConfig_Read(&c);
	if (!PyStatus_Exception(st) && search_path(&c, paths) < 0)
		st = PyStatus_NoMemory();
	if (!PyStatus_Exception(st))
		st = Py_InitializeFromConfig(&c);
	PyConfig_Clear(&c);
	free(paths);
	if (PyStatus_Exception(st))
		return fail(st);
	add_site_dirs(conf);
	free(conf);
	return Py_RunMain();
}
