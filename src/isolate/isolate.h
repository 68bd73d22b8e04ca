/* Kernel isolation mechanisms, one per file: namespaces and the helper spawn (spawn.c), the
 * read-only root (rootfs.c), the seccomp policy (seccomp.c), rlimits (rlimits.c), capabilities
 * and no_new_privs (caps.c), and the host probe (probe.c). These apply mechanisms; the order in
 * which they are applied is the caller's (guest/template.c and guest/cell.c). */
#ifndef SC_ISOLATE_H
#define SC_ISOLATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "snapcell.h"

/* Outside uid/gid the sandbox runs as when the host is root: not the host's uid, so the
 * host's per-user kernel quotas, RLIMIT_NPROC exemption and signal rights do not apply. */
#define SC_ROOT_SANDBOX_UID 65534
#define SC_ROOT_SANDBOX_GID 65534

/* ---- spawn.c (host side) ---- */

struct sc_spawn {
	int helper_fd; /* O_PATH descriptor of the helper executable */
	char *const *argv;
	char *const *envp;
	int control_fd; /* becomes fd 3 in the helper */
	/* Directories opened (O_PATH) as fds 4, 5, ... by the child while it still has the
	 * host's uid, so the sandbox uid need not be able to walk to them; they are in the
	 * helper's mount namespace, so it can bind them. All other fds but 0-3 are closed. */
	const char *const *pass_dirs;
	size_t n_pass_dirs;
	uid_t outside_uid;
	gid_t outside_gid;
};

/* Starts the helper as pid 1 of new user, mount, pid, net, ipc, uts and cgroup namespaces,
 * mapped to root inside. Returns 0 with *pid and *pidfd set, or a negative code with err
 * naming the step (SNAPCELL_E_ISOLATION when the kernel refuses the namespaces). */
int sc__spawn_helper(const struct sc_spawn *spec, pid_t *pid, int *pidfd,
		     struct snapcell_error *err);

/* The outside ids a sandbox started by this process runs as. */
void sc__sandbox_ids(uid_t *uid, gid_t *gid);

/* ---- rootfs.c (helper side) ---- */

#define SC_OUT_BASE	    "/.snapcell/out" /* where per-cell output dirs live inside the root */
#define SC_OUTPUT_INODES    131072	     /* files and directories a cell's /output may hold */
#define SC_PYTHON_PATH_BASE "/.snapcell/python" /* python_paths[i] appear at BASE/i */
#define SC_PASS_FD_FIRST    4 /* the helper's first fd beyond the control socket */
#define SC_PASS_FD_MAX	    64

/* A read-only bind: src is a host path or /proc/self/fd/N of a descriptor the host opened
 * (so the sandbox uid need not be able to walk to it); dst is the path inside the root. */
struct sc_bind {
	const char *src;
	const char *dst;
};

struct sc_rootfs {
	const char *base;    /* host directory the root tmpfs is mounted on */
	const char *out_dir; /* host directory bound at SC_OUT_BASE */
	const struct sc_bind *ro_binds;
	size_t n_ro_binds;
};

/* Builds the minimal root and pivots into it; afterwards the host filesystem is gone from
 * this mount namespace. */
int sc__rootfs_build(const struct sc_rootfs *fs, struct snapcell_error *err);

/* Per cell, in the cell's own mount namespace: a fresh size-capped /tmp (also at /dev/shm),
 * SC_OUT_BASE/<name> at /output, and SC_OUT_BASE detached so no other cell's output is
 * reachable. */
int sc__rootfs_enter_cell(const char *out_name, uint64_t tmp_bytes, struct snapcell_error *err);

/* ---- seccomp.c ---- */

struct sc_bpf {
	void *filter; /* struct sock_filter[] */
	unsigned short len;
};

/* Compiles the cell policy once (in the template), so cells only install it. */
int sc__seccomp_compile(struct sc_bpf *out, struct snapcell_error *err);
int sc__seccomp_install(const struct sc_bpf *bpf);
void sc__seccomp_free(struct sc_bpf *bpf);

/* ---- rlimits.c ---- */

struct sc_rlimits {
	uint64_t memory_bytes;
	uint64_t cpu_ms;
	uint64_t processes;
	uint64_t file_bytes;
	uint64_t open_files;
};

int sc__rlimits_apply(const struct sc_rlimits *lim, struct snapcell_error *err);

/* ---- caps.c ---- */

/* In the template, once: locked securebits (root inside cannot regain capabilities), empty
 * bounding and ambient sets, no_new_privs. Inherited by every cell; effective capabilities
 * stay. */
int sc__caps_lock(struct snapcell_error *err);

/* In each cell: clears the effective, permitted and inheritable sets. */
int sc__caps_clear(struct snapcell_error *err);

#endif
