/* The namespaces mechanism (and level cgroups, which adds a memory cgroup per cell): the root
 * the helper built, made the cells' (the module's file detached, the host's paths forgotten,
 * the exec ruleset), a pid and mount namespace per cell, each cell's /output tmpfs and its own
 * /tmp (src/isolate/rootfs.c). One implementation of struct sc_guest_ops (guest.h); plain.c
 * is the other. Not the cell's other confinement, which both levels share (cell.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "template.h"
#include "util/cleanup.h"
#include "util/util.h"

/* The template's own pid namespace, made the children's again after each cell. */
static int self_pidns = -1;

/* What building the root left on the stack below the caller's frame: its path buffers. */
static __attribute__((noinline)) void scrub_stack(void)
{
	char below[128 * 1024];
	explicit_bzero(below, sizeof(below));
}

/* The work directory's host path (where the root, /output and /input come from) and the
 * memory cgroup's (the template holds its descriptor) are the host's business: nothing needs
 * them once the root is built, and every cell forked from here would otherwise carry them in
 * its memory (tests/c/integration/test_isolation.c). */
static void forget_host_paths(void)
{
	char **paths[] = {&T.cfg.s.root, &T.cfg.s.out, &T.cfg.s.input, &T.cfg.s.cgroup,
			  &T.cfg.s.tmp};
	for (size_t i = 0; i < SC_ARRAY_LEN(paths); i++) {
		if (*paths[i])
			explicit_bzero(*paths[i], strlen(*paths[i]));
		free(*paths[i]);
		*paths[i] = NULL;
	}
	T.cfg.root_base = T.cfg.out_dir = T.cfg.input_dir = T.cfg.cgroup = T.cfg.tmp_dir = NULL;
	scrub_stack();
}

/* The host's root detached before anything else: the helper's compiling child started on it
 * while the interpreter started (guest/helper.c), and its word that it is done is awaited
 * (usually there already): its detach is by path, so one that came after the preloads' /tmp
 * was mounted there would take that instead (setup then failed "detach the preload's /tmp",
 * under load). Then this finds it gone (EINVAL), or detaches it where the child did not. */
static int host_root_detached(struct snapcell_error *err)
{
	sc_template_compile_heard(SC_GUEST_HOST_DETACHED);
	int rc = sc__rootfs_detach_host();
	return rc < 0 ? sc__err(err, rc, "detach the host's root") : 0;
}

/* The guest module's bind detached, by the helper's compiling child or here; EINVAL (not a
 * mount point) says the child did it. */
static int module_detached(struct snapcell_error *err)
{
	char module[PATH_MAX];
	snprintf(module, sizeof(module), SC_GUEST_DIR "/%s", T.cfg.s.guest.file);
	if (umount2(module, MNT_DETACH) < 0 && errno != EINVAL)
		return sc__err(err, -errno, "detach %s", module);
	return 0;
}

/* The host's root and paths gone from the template, and the guest module's bind going: the
 * cells need not see its file once it is loaded. The helper's compiling child detaches it
 * meanwhile (guest/helper.c); init_python makes sure before any cell. */
static int host_detached(struct snapcell_error *err)
{
	int rc = host_root_detached(err);
	if (rc < 0)
		return rc;
	forget_host_paths();
	if (!sc_template_compile_tell(SC_GUEST_DETACH_MODULE))
		return module_detached(err);
	return 0;
}

/* The namespaces level: the cells' pid and network namespaces to come back to (opened by the
 * helper before the pivot), the root it built, and the exec ruleset when Landlock offers one. */
static int setup(struct snapcell_error *err)
{
	self_pidns = SC_GUEST_PIDNS_FD;
	T.self_netns = T.cfg.network ? SC_GUEST_NETNS_FD : -1;
	if (fcntl(self_pidns, F_SETFD, FD_CLOEXEC) < 0 ||
	    (T.cfg.network && fcntl(T.self_netns, F_SETFD, FD_CLOEXEC) < 0))
		return sc__err(err, -errno, "the helper's namespace descriptors");
	/* Landlock is what confines execve to the cell's interpreter; without it cells exec
	 * nothing (seccomp) and sys.executable stays empty. AF_UNIX listeners (multiprocessing's
	 * forkserver) need the ruleset's scope, and no network: with TCP sockets, seccomp could not
	 * keep listen and accept to AF_UNIX. And no pathname socket of the host in reach: a
	 * read-only bind does not stop a connect, so before Landlock keeps pathname sockets to the
	 * cell's own (ABI 9), only when the root binds no directory of the caller's (Python paths,
	 * the venv), where its processes may listen (sc__seccomp_namespaces_flags, which the
	 * helper's compiling child used too). */
	unsigned flags = sc__seccomp_namespaces_flags(T.cfg.network, T.cfg.n_python_paths,
						      sc__landlock_abi(), T.cfg.s.reuse);
	T.cfg.exec = flags & SC_SECCOMP_EXEC;
	T.unix_sockets = flags & SC_SECCOMP_UNIX;
	sc_template_compile_adopt();
	int rc = host_detached(err);
	if (rc < 0)
		return rc;
	T.landlock_fd = -1;
	if (T.cfg.exec) {
		const char *exe[] = {T.cfg.s.python.executable, sc__rootfs_own_loader()};
		if ((T.landlock_fd = sc__landlock_exec_ruleset(exe, SC_ARRAY_LEN(exe),
							       T.unix_sockets, err)) < 0)
			return T.landlock_fd;
	}
	if (sethostname("snapcell", 8) < 0)
		return sc__err(err, -errno, "sethostname");
	T.out_fd = open(SC_OUT_BASE, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (T.out_fd < 0)
		return sc__err(err, -errno, "open " SC_OUT_BASE);
	return 0;
}

/* Each cell's /output is a tmpfs of its own, capped in size and inodes, so code cannot fill
 * the host's disk or memory through it. The host reads it through the descriptor sent with
 * the cell; the mount is detached when the cell is reaped and freed when the host closes
 * that descriptor, so nothing needs removing file by file. */
static int mount_output(const char *name)
{
	char path[64], opts[96];
	snprintf(path, sizeof(path), SC_OUT_BASE "/%s", name);
	snprintf(opts, sizeof(opts), "mode=0755,size=%llu,nr_inodes=%u",
		 (unsigned long long)T.cfg.output_bytes, SC_OUTPUT_INODES);
	if (mkdirat(T.out_fd, name, 0755) < 0 && errno != EEXIST)
		return -errno;
	/* No access times, as /tmp (src/isolate/rootfs.c sc__rootfs_enter_cell). */
	if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME, opts) < 0)
		return -errno;
	int fd SC_AUTO_CLOSE = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;
		umount2(path, MNT_DETACH);
		return rc;
	}
	int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	if (high < 0)
		umount2(path, MNT_DETACH);
	return high < 0 ? -EMFILE : high;
}

static void unmount_output(uint32_t id)
{
	char path[64], name[16];
	snprintf(path, sizeof(path), SC_OUT_BASE "/%u", id);
	snprintf(name, sizeof(name), "%u", id);
	umount2(path, MNT_DETACH);
	unlinkat(T.out_fd, name, AT_REMOVEDIR); /* the host's retire may find it gone */
}

static pid_t fork_cell(const struct sc_cell_plan *plan)
{
	/* The next child becomes pid 1 of a new pid namespace; then the template's own
	 * namespace is made the children's namespace again for the following cell. */
	if (unshare(CLONE_NEWPID) < 0)
		return -errno;
	pid_t pid = sc_py_before_fork() == 0 ? fork() : -1;
	if (pid == 0) {
		/* Into its memory cgroup before it makes a page or a namespace of its own. */
		if (plan->cgroup_fd >= 0 && sc__cgroup_cell_enter(plan->cgroup_fd) < 0)
			_exit(126);
		if (unshare(CLONE_NEWNS) < 0)
			_exit(126);
		sc_cell_main(plan);
	}
	int saved = errno;
	sc_py_after_fork_parent();
	if (setns(self_pidns, CLONE_NEWPID) < 0 && pid > 0) {
		/* Without this no further cell could be made; end the sandbox loudly. */
		kill(pid, SIGKILL);
		exit(3);
	}
	return pid < 0 ? -saved : pid;
}

/* Preloaded modules may want a writable directory at import (matplotlib its config and font
 * cache under $HOME, which /etc/passwd says is /tmp). The root is read-only, so they get a
 * small tmpfs of their own, detached once they are in memory; cells mount their own /tmp.
 * Then the guest module's bind is gone for sure (module_detached), before any cell. */
static int init_python(struct snapcell_error *err)
{
	bool scratch = T.cfg.n_preloads > 0;
	if (scratch && mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			     "mode=1777,size=32m,nr_inodes=4096") < 0)
		return sc__err(err, -errno, "mount /tmp for the preload");
	int rc = sc_py_init(&T.cfg, err);
	if (scratch && umount2("/tmp", MNT_DETACH) < 0 && rc == 0)
		rc = sc__err(err, -errno, "detach the preload's /tmp");
	return rc == 0 ? module_detached(err) : rc;
}

/* Bound at SC_PYTHON_PATH_BASE/<i>, not at the host path: that may lie under /tmp, which each
 * cell remounts. */
static int python_bind(const struct sc_setup_path *p, size_t i, char **bind)
{
	return asprintf(bind, SC_PYTHON_PATH_BASE "/%zu", i) < 0 ? -1 : 0;
}

static int check(const struct sc_guest_config *cfg)
{
	return 0;
}

/* The same paths for every cell: each mounts its own there. */
static int set_environ(struct snapcell_error *err)
{
	if (sc_py_setenv("SNAPCELL_INPUT", "/input", true) < 0 ||
	    sc_py_setenv("SNAPCELL_OUTPUT", "/output", true) < 0 ||
	    sc_py_setenv("SNAPCELL_TMP", "/tmp", true) < 0)
		return sc__err(err, -errno, "setenv SNAPCELL_*");
	return 0;
}

/* The pid and mount namespaces stand in for what the rlimits level's flags refuse. */
static unsigned seccomp_flags(void)
{
	return 0;
}

static enum snapcell_isolation level(void)
{
	return T.cgroup_fd >= 0 ? SNAPCELL_ISOLATION_CGROUPS : SNAPCELL_ISOLATION_NAMESPACES;
}

static int files_cell(const char *input_layer)
{
	return sc_template_park_cell(input_layer);
}

/* A dead cell's processes died with its pid namespace. */
static void reaped(void)
{
}

/* The cells die with the template, pid 1 of the sandbox's pid namespace. */
static void end(void)
{
}

static int cell_enter(const struct sc_cell_plan *plan, int *tmp_root, struct snapcell_error *err)
{
	char out_name[16];
	snprintf(out_name, sizeof(out_name), "%u", plan->id);
	return sc__rootfs_enter_cell(out_name, plan->cfg->tmp_bytes, SC_TMP_LIVE, plan->input_layer,
				     tmp_root, err);
}

static const char *cell_tmp(const struct sc_cell_plan *plan)
{
	return "/tmp";
}

/* The template's environment says it already (set_environ). */
static void cell_environ(const struct sc_cell_plan *plan)
{
}

/* With Python paths, the root's venv over the interpreter (guest/helper.c), as a venv's
 * python names itself on a host. */
static const char *executable(const struct sc_guest_config *cfg)
{
	return cfg->n_python_paths ? SC_VENV_DIR "/bin/python3" : cfg->s.python.executable;
}

const struct sc_guest_ops sc_namespaces_ops = {
	.check = check,
	.python_bind = python_bind,
	.setup = setup,
	.environ = set_environ,
	.python_init = init_python,
	.seccomp_flags = seccomp_flags,
	.level = level,
	.cell_dirs = mount_output,
	.fork_cell = fork_cell,
	.files_cell = files_cell,
	.reaped = reaped,
	.cell_forget = unmount_output,
	.end = end,
	.cell_enter = cell_enter,
	.cell_tmp = cell_tmp,
	.cell_environ = cell_environ,
	.executable = executable,
};
