/* The isolation the host library applies itself: starting the helper in new namespaces
 * (spawn.c) and probing what the host offers (probe.c, snapcell_probe_host). No libseccomp or
 * libcap here: the mechanisms the helper applies are isolate/guest.h. */
#ifndef SC_ISOLATE_HOST_H
#define SC_ISOLATE_HOST_H

#include <stddef.h>
#include <sys/types.h>

#include "snapcell.h"

/* Outside uid/gid the sandbox runs as when the host is root: not the host's uid, so the
 * host's per-user kernel quotas, RLIMIT_NPROC exemption and signal rights do not apply. */
#define SC_ROOT_SANDBOX_UID 65534
#define SC_ROOT_SANDBOX_GID 65534

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

#endif
