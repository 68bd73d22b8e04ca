/* The helper at the rlimits level: started in the caller's namespaces (no user namespace to
 * be had), so there is no root of the cells' own and no pid namespace per cell. What stands in
 * for them: each cell's Landlock domain over the host's filesystem (src/isolate/hostfs.c),
 * directories of its own for /tmp and /output under the work directory, named in its
 * environment, and the template as subreaper, killing whatever a dead cell left behind (a
 * pid namespace's death did that). */
#define _GNU_SOURCE 1 /* as pyconfig.h has it, which may define it unguarded */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rpc/control.h"
#include "template.h"
#include "util/cleanup.h"
#include "util/util.h"

/* The parent of the cells' /tmp directories (out_dir's is T.out_fd). */
static int tmp_parent_fd = -1;

/* Tasks (processes and threads) of uid now: RLIMIT_NPROC counts them all. */
static uint64_t count_tasks(uid_t uid)
{
	DIR *d = opendir("/proc");
	uint64_t n = 0;
	for (struct dirent *e; d && (e = readdir(d));) {
		char path[300], line[128];
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
		FILE *f = fopen(path, "re");
		unsigned long real = ~0UL, threads = 0;
		while (f && fgets(line, sizeof(line), f))
			if (sscanf(line, "Uid: %lu", &real) != 1)
				sscanf(line, "Threads: %lu", &threads);
		if (f)
			fclose(f);
		if (real == uid)
			n += threads;
	}
	if (d)
		closedir(d);
	return n;
}

/* The template made a subreaper (a dead cell's processes come back to it), the cells'
 * directory parents opened (*out_fd, *tmp_fd), and the process limit raised by what the uid
 * already runs when it is the caller's own. */
static int template_setup(struct sc_guest_config *cfg, int *out_fd, int *tmp_fd,
			  struct snapcell_error *err)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		return sc__err(err, -errno, "become a subreaper");
	*out_fd = open(cfg->out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*out_fd < 0)
		return sc__err(err, -errno, "open %s", cfg->out_dir);
	*tmp_fd = open(cfg->tmp_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (*tmp_fd < 0)
		return sc__err(err, -errno, "open %s", cfg->tmp_dir);
	/* Preloads may want a writable home at import (matplotlib's config and font cache); the
	 * namespaces level gives them a scratch /tmp, this one a directory beside the cells'. */
	char home[PATH_MAX];
	snprintf(home, sizeof(home), "%s/template", cfg->tmp_dir);
	if (mkdir(home, 0700) < 0 || sc_py_setenv("HOME", home, true) < 0)
		return sc__err(err, -errno, "make %s", home);
	/* RLIMIT_NPROC counts every task of the real uid: as the caller's own uid, the caller's
	 * other processes count too, so the cells' limit starts above what runs now. */
	if (cfg->own_uid)
		cfg->limits.processes += count_tasks(getuid());
	return 0;
}

/* A cell's fresh /output and /tmp directories; returns a descriptor of its /output (above
 * fd 9) or a negative code. */
static int cell_dirs(const char *name)
{
	int out_fd = T.out_fd;
	char live[32];
	snprintf(live, sizeof(live), "%s/" SC_TMP_LIVE, name);
	/* tmp/<id> is the cell's /tmp root as at the namespaces level: the code's /tmp is its
	 * SC_TMP_LIVE, and a session family keeps its other /tmp trees beside that, where the
	 * cell's Landlock domain (on SC_TMP_LIVE alone) does not reach. */
	if (mkdirat(out_fd, name, 0700) < 0 || mkdirat(tmp_parent_fd, name, 0700) < 0 ||
	    mkdirat(tmp_parent_fd, live, 0700) < 0)
		return -errno;
	int fd SC_AUTO_CLOSE =
		openat(out_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	return high < 0 ? -EMFILE : high;
}

/* Removes a reaped cell's /tmp directory. Not out/<id>: the host may still be collecting it
 * (it removes it once the cell is retired, sandbox.c's forget_cell). */
static void cell_forget(uint32_t id)
{
	char name[16];
	snprintf(name, sizeof(name), "%u", id);
	sc__remove_tree(tmp_parent_fd, name, sc__deadline_ms(2000));
}

/* Kills every child of the template that is not one of the n cells: what a dead cell left. A
 * dead cell's processes are reparented to the template (the subreaper above the cell); each
 * one killed makes its own children the template's in turn, and its SIGCHLD brings the
 * template back here, so the whole tree goes. */
static void kill_orphans(const pid_t *cells, size_t n)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/self/task/%d/children", (int)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return;
	buf[len] = 0;
	for (char *p = buf, *end; *p; p = end) {
		long pid = strtol(p, &end, 10);
		/* Each pid ends with a space: one at the end of the buffer may be cut short (over
		 * about 500 children), a prefix naming another process of the uid. The next reap's
		 * pass reads the rest. */
		if (end == p || *end == 0)
			break;
		bool cell = false;
		for (size_t i = 0; i < n && !cell; i++)
			cell = cells[i] == (pid_t)pid;
		if (!cell && pid > 0)
			kill((pid_t)pid, SIGKILL);
	}
}

/* The sandbox's end: no pid namespace dies with the cells, and a cell's parent-death signal
 * takes only the cell, so what its code started would be reparented to the host's reaper and
 * outlive the sandbox. The template, their subreaper, kills every child it has (cells and
 * what dead ones left) until none is left: each death brings the dead one's children to it. */
static void kill_all(void)
{
	for (;;) {
		kill_orphans(NULL, 0);
		if (wait(NULL) < 0 && errno == ECHILD)
			return;
	}
}

static void cell_path(const struct sc_cell_plan *plan, const char *base, char *out, size_t len)
{
	snprintf(out, len, "%s/%u", base, plan->id);
}

/* The cell's /tmp, its SC_TMP_LIVE directory and working directory; static storage. */
static const char *cell_tmp(const struct sc_cell_plan *plan)
{
	static char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/%u/" SC_TMP_LIVE, plan->cfg->tmp_dir, plan->id);
	return tmp;
}

/* In the cell, instead of its mounts: a subreaper like a namespace's pid 1, and confined by
 * its Landlock domain (hostfs.c); *tmp_root gets its /tmp root (the directory holding
 * SC_TMP_LIVE), as sc__rootfs_enter_cell gives it. */
static int cell_enter(const struct sc_cell_plan *plan, int *tmp_root, struct snapcell_error *err)
{
	const struct sc_guest_config *c = plan->cfg;
	const char *read[4 + 16 + 2 * SC_PASS_FD_MAX];
	char out[PATH_MAX];
	size_t n = 0, n_data;
	const char *const *data = sc__rootfs_data_paths(&n_data);
	/* Orphans of the code's processes come back to the cell, as to a namespace's pid 1. */
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		return sc__err(err, -errno, "become a subreaper");
	cell_path(plan, c->tmp_dir, out, sizeof(out));
	int fd = open(out, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	*tmp_root = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10);
	if (fd >= 0)
		close(fd);
	if (*tmp_root < 0)
		return sc__err(err, -errno, "open %s", out);
	read[n++] = c->input_dir;
	for (size_t i = 0; i < c->s.python.n_dirs && i < SC_PASS_FD_MAX; i++)
		read[n++] = c->s.python.dirs[i].host;
	for (size_t i = 0; i < n_data && i < 16; i++)
		read[n++] = data[i];
	for (size_t i = 0; i < c->n_python_paths && i < SC_PASS_FD_MAX; i++)
		read[n++] = c->python_binds[i];
	cell_path(plan, c->out_dir, out, sizeof(out));
	struct sc_hostfs fs = {
		.read = read, .n_read = n, .tmp_dir = cell_tmp(plan), .out_dir = out};
	return sc__hostfs_restrict(&fs, err);
}

static void set_environ(PyObject *environ, const char *name, const char *value)
{
	PyObject *k = PyUnicode_DecodeFSDefault(name), *v = PyUnicode_DecodeFSDefault(value);
	if (!k || !v || PyObject_SetItem(environ, k, v) < 0)
		PyErr_Clear();
	Py_XDECREF(k);
	Py_XDECREF(v);
}

/* In the cell, before warming up: the environment names its directories. */
static void cell_environ(const struct sc_cell_plan *plan)
{
	char out[PATH_MAX];
	const char *tmp = cell_tmp(plan);
	cell_path(plan, plan->cfg->out_dir, out, sizeof(out));
	PyObject *os = PyImport_ImportModule("os");
	PyObject *environ = os ? PyObject_GetAttrString(os, "environ") : NULL;
	if (environ) {
		/* os.environ sets the process's environment too (putenv). */
		set_environ(environ, "SNAPCELL_INPUT", plan->cfg->input_dir);
		set_environ(environ, "SNAPCELL_OUTPUT", out);
		set_environ(environ, "SNAPCELL_TMP", tmp);
		set_environ(environ, "TMPDIR", tmp);
		if (!sc_guest_env(plan->cfg, "HOME")) /* the caller's, or the cell's own */
			set_environ(environ, "HOME", tmp);
	}
	/* tempfile caches the directory it chose (the template's warm-up may have asked). */
	PyObject *name = PyUnicode_FromString("tempfile");
	PyObject *tempfile = name ? PyImport_GetModule(name) : NULL;
	Py_XDECREF(name);
	if (tempfile && PyObject_SetAttrString(tempfile, "tempdir", Py_None) < 0)
		PyErr_Clear();
	PyErr_Clear();
	Py_XDECREF(tempfile);
	Py_XDECREF(environ);
	Py_XDECREF(os);
}

/* No root to build, no namespace to return to; cells neither exec nor listen (hostfs.c), and
 * the seccomp compiler is the template's own child. */
static int setup(struct snapcell_error *err)
{
	T.self_netns = T.landlock_fd = -1;
	close(SC_GUEST_MODULE_FD); /* the module is loaded */
	int rc = template_setup(&T.cfg, &T.out_fd, &tmp_parent_fd, err);
	if (rc == 0)
		sc_template_compile_start();
	return rc;
}

/* Each cell reads the Python paths where they are on the host. */
static int python_bind(const struct sc_setup_path *p, size_t i, char **bind)
{
	return p->host && (*bind = strdup(p->host)) ? 0 : -1;
}

/* The cells' directories' parent, and no network: Landlock rules name ports, not addresses. */
static int check(const struct sc_guest_config *cfg)
{
	return cfg->tmp_dir && !cfg->network ? 0 : -1;
}

/* The cells set their own (cell_environ). */
static int template_environ(struct snapcell_error *err)
{
	return 0;
}

/* The preloads' writable home is the template's directory (template_setup). */
static int python_init(struct snapcell_error *err)
{
	return sc_py_init(&T.cfg, err);
}

/* With no namespaces around the cells, seccomp keeps them off the host's processes and
 * attributes (enum sc_seccomp_flags). */
static unsigned seccomp_flags(void)
{
	return SC_SECCOMP_HOST | SC_SECCOMP_NO_PATH_ATTRS |
	       (sc__landlock_abi() >= SC_LANDLOCK_ABI_SCOPE ? SC_SECCOMP_SIGNALS_SCOPED : 0);
}

static enum snapcell_isolation level(void)
{
	return SNAPCELL_ISOLATION_RLIMITS;
}

/* A plain fork: no namespace to make. */
static pid_t fork_cell(const struct sc_cell_plan *plan)
{
	pid_t pid = sc_py_before_fork() == 0 ? fork() : -1;
	if (pid == 0)
		sc_cell_main(plan);
	int saved = errno;
	sc_py_after_fork_parent();
	return pid < 0 ? -saved : pid;
}

/* A run's own files come over /input, a mount this level cannot make. */
static int files_cell(const char *input_layer)
{
	return -EOPNOTSUPP;
}

/* What dead cells left: no pid namespace ended it with them. */
static void reaped(void)
{
	pid_t live[MAX_CELLS];
	for (size_t i = 0; i < T.n_cells; i++)
		live[i] = T.cells[i].pid;
	kill_orphans(live, T.n_cells);
}

static const char *executable(const struct sc_guest_config *cfg)
{
	return cfg->s.python.executable;
}

const struct sc_guest_ops sc_plain_ops = {
	.check = check,
	.python_bind = python_bind,
	.setup = setup,
	.environ = template_environ,
	.python_init = python_init,
	.seccomp_flags = seccomp_flags,
	.level = level,
	.cell_dirs = cell_dirs,
	.fork_cell = fork_cell,
	.files_cell = files_cell,
	.reaped = reaped,
	.cell_forget = cell_forget,
	.end = kill_all,
	.cell_enter = cell_enter,
	.cell_tmp = cell_tmp,
	.cell_environ = cell_environ,
	.executable = executable,
};
