/* The cells' view of the file system, made by the template: at the namespaces level the root
 * the helper built (the module's file detached, the host's paths forgotten, the exec
 * ruleset) and each cell's /output tmpfs; at the rlimits level the directories plain.c
 * keeps. Not the cells' own mounts (src/isolate/rootfs.c, in each cell). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "template.h"
#include "util/util.h"

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

/* The namespaces level: the cells' pid and network namespaces to come back to (opened by the
 * helper before the pivot), the root it built, and the exec ruleset when Landlock offers one. */
int sc_template_root_namespaces(struct snapcell_error *err)
{
	T.self_pidns = SC_GUEST_PIDNS_FD;
	T.self_netns = T.cfg.network ? SC_GUEST_NETNS_FD : -1;
	if (fcntl(T.self_pidns, F_SETFD, FD_CLOEXEC) < 0 ||
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
						      sc__landlock_abi());
	T.cfg.exec = flags & SC_SECCOMP_EXEC;
	T.unix_sockets = flags & SC_SECCOMP_UNIX;
	sc_template_compile_adopt();
	forget_host_paths();
	/* Loaded: the cells need not see the module's file. */
	char module[PATH_MAX];
	snprintf(module, sizeof(module), SC_GUEST_DIR "/%s", T.cfg.s.guest.file);
	if (umount2(module, MNT_DETACH) < 0)
		return sc__err(err, -errno, "detach %s", module);
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

/* The rlimits level: no root to build, no namespace to return to; cells neither exec nor
 * listen (plain.c, hostfs.c). */
int sc_template_root_plain(struct snapcell_error *err)
{
	T.self_pidns = T.self_netns = T.landlock_fd = -1;
	close(SC_GUEST_MODULE_FD); /* the module is loaded */
	return sc_plain_template_setup(&T.cfg, &T.out_fd, &T.tmp_fd, err);
}

/* Each cell's /output is a tmpfs of its own, capped in size and inodes, so code cannot fill
 * the host's disk or memory through it. The host reads it through the descriptor sent with
 * the cell; the mount is detached when the cell is reaped and freed when the host closes
 * that descriptor, so nothing needs removing file by file. */
int sc_template_output_mount(const char *name)
{
	if (T.cfg.rlimits)
		return sc_plain_cell_dirs(T.out_fd, T.tmp_fd, name);
	char path[64], opts[96];
	snprintf(path, sizeof(path), SC_OUT_BASE "/%s", name);
	snprintf(opts, sizeof(opts), "mode=0755,size=%llu,nr_inodes=%u",
		 (unsigned long long)T.cfg.output_bytes, SC_OUTPUT_INODES);
	if (mkdirat(T.out_fd, name, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
		return -errno;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;
		umount2(path, MNT_DETACH);
		return rc;
	}
	int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	close(fd);
	if (high < 0)
		umount2(path, MNT_DETACH);
	return high < 0 ? -EMFILE : high;
}

void sc_template_output_unmount(uint32_t id)
{
	char path[64], name[16];
	snprintf(path, sizeof(path), SC_OUT_BASE "/%u", id);
	snprintf(name, sizeof(name), "%u", id);
	if (T.cfg.rlimits) {
		sc_plain_cell_forget(T.tmp_fd, name);
		return;
	}
	umount2(path, MNT_DETACH);
	unlinkat(T.out_fd, name, AT_REMOVEDIR); /* the host's retire may find it gone */
}
