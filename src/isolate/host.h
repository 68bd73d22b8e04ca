/* The isolation the host library applies itself: starting the helper in new namespaces
 * (spawn.c), the outside uid it runs as (uids.c), which level the host can give (level.c),
 * the sandbox's memory cgroup (cgroup.c), stopping a paused run's cell (freeze.c) and
 * probing what the host offers (probe.c, snapcell_probe_host). No libseccomp or
 * libcap here: the mechanisms the helper applies are isolate/guest.h. */
#ifndef SC_ISOLATE_HOST_H
#define SC_ISOLATE_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "snapcell.h"

/* Outside uid/gid every sandbox of a root host runs as when no range can be had (the default
 * range on a host that does not map it): not the host's uid, so the host's per-user kernel
 * quotas, RLIMIT_NPROC exemption and signal rights do not apply, but shared by them all. */
#define SC_ROOT_SANDBOX_UID 65534
#define SC_ROOT_SANDBOX_GID 65534

/* The outside ids of one sandbox and the reservation that keeps them its own. */
struct sc_outside_ids {
	uid_t uid;
	gid_t gid;
	int lock_fd; /* the uid's lock file, flock'ed for the sandbox's life; -1 when none */
};

/* Chooses a new sandbox's outside ids. Not root: the caller's own, no lock. Root: the first uid
 * of [first, first + count) whose lock in /run/snapcell/uids no live sandbox (of any process)
 * holds, gid the same number, or first unreserved when count is 0. SNAPCELL_E_EXHAUSTED when
 * all are held. The range not mapped in this user namespace, or no lock directory to be had,
 * are errors when strict and otherwise give the shared SC_ROOT_SANDBOX_UID; a lock directory
 * or file someone else made or replaced is always an error. */
int sc__ids_take(uint32_t first, uint32_t count, bool strict, struct sc_outside_ids *out,
		 struct snapcell_error *err);
/* Records in the uid's lock file the template that runs as it: after its host process's death
 * (which drops the lock) the uid stays taken while that template lives. Root's ids only. */
int sc__ids_bind(struct sc_outside_ids *ids, pid_t template);
/* Drops the reservation (the uid's processes must be gone); safe to call twice. */
void sc__ids_release(struct sc_outside_ids *ids);

struct sc_spawn {
	int helper_fd; /* O_PATH descriptor of the helper executable */
	char *const *argv;
	char *const *envp;
	int control_fd; /* becomes fd 3 in the helper */
	int cgroup_fd;	/* becomes SC_CGROUP_FD in the helper, or -1 */
	int stderr_fd;	/* becomes fd 2 in the helper, or -1 for /dev/null (as are 0 and 1) */
	/* Directories opened (O_PATH) as fds 4, 5, ... by the child while it still has the
	 * host's uid, so the sandbox uid need not be able to walk to them; they are in the
	 * helper's mount namespace, so it can bind them. All other fds but 0-3 are closed. The
	 * last n_pass_files of them are files, not directories (the guest module), /dev/null
	 * where they cannot be opened. */
	const char *const *pass_dirs;
	size_t n_pass_dirs, n_pass_files;
	uid_t outside_uid;
	gid_t outside_gid;
	/* false: the rlimits level. The helper is forked and exec'd in the caller's namespaces,
	 * as outside_uid/gid when those are not the caller's own (a root caller: setgroups,
	 * setresgid, setresuid before the exec, so the helper holds no capability). */
	bool namespaces;
};

/* level.c: whether the namespaces level works on this host, tried for real in a throwaway
 * child: each namespace (in enum snapcell_mechanism's order), then the id maps and a mount
 * inside, which fail where user namespaces come without capabilities (Ubuntu's AppArmor
 * restriction). */
enum {
	SC_NS_USER, /* = SNAPCELL_MECH_USERNS, and so on up to SC_NS_CGROUP */
	SC_NS_MOUNT,
	SC_NS_PID,
	SC_NS_NET,
	SC_NS_IPC,
	SC_NS_UTS,
	SC_NS_CGROUP,
	SC_NS_MOUNT_INSIDE, /* the id maps and a tmpfs mounted inside the namespaces */
	SC_NS_STEPS
};

struct sc_ns_check {
	bool ok;
	int failed;	      /* the first step that failed (SC_NS_*), or -1 */
	int err[SC_NS_STEPS]; /* errno of each step, 0 done, -1 not tried */
	char why[160];	      /* what is wrong and what to change, when not ok */
};

/* 0 with out filled (ok or not), or a negative code when the child could not be run. */
int sc__ns_check(struct sc_ns_check *out);
/* The same, with a success remembered for the process (the check costs ~3 ms at level
 * namespaces, mostly the network namespace's teardown): what sandbox creation uses. */
int sc__ns_check_once(struct sc_ns_check *out);
/* The Landlock ABI this kernel offers, 0 for none: the rlimits level needs one. */
int sc__landlock_version(void);

/* Starts the helper as pid 1 of new user, mount, pid, net, ipc, uts and cgroup namespaces,
 * mapped to root inside (spec->namespaces), or else as a plain child. Returns 0 with *pid and
 * *pidfd set, or a negative code with err naming the step (SNAPCELL_E_ISOLATION when the kernel
 * refuses the namespaces). */
int sc__spawn_helper(const struct sc_spawn *spec, pid_t *pid, int *pidfd,
		     struct snapcell_error *err);

/* ---- cgroup.c ---- */

/* A sandbox's memory cgroup (v1): a directory below this process's own memory cgroup, owned
 * by the sandbox's outside uid, holding the template and one child per cell named by the
 * cell's id (made and removed by the template, guest side: cgroup_cell.c). */
struct sc_cgroup {
	int dir_fd; /* -1 when the sandbox has none */
	char path[PATH_MAX];
};

/* Makes the cgroup (reaping those of dead host processes first). A negative code with err
 * saying why memory cgroups cannot be had here (no v1 memory controller, not writable by
 * this user); dir_fd is then -1. */
int sc__cgroup_sandbox_new(struct sc_cgroup *cg, uid_t uid, gid_t gid, struct snapcell_error *err);
/* The sandbox cgroup's tasks file, opened for writing (CLOEXEC), for the template to move
 * itself in with (src/isolate/spawn.c passes it as SC_CGROUP_FD). */
int sc__cgroup_tasks_open(const struct sc_cgroup *cg, struct snapcell_error *err);

/* What a cell's cgroup recorded: the peak of the memory charged to it (pages, page tables,
 * kernel memory) and the kills of its processes by the out-of-memory killer at its limit. */
struct sc_cgroup_usage {
	uint64_t peak_bytes;
	uint64_t oom_kills;
};
/* The files it reads them from, which a caller may keep open (sc_cell_ops.usage). */
#define SC_CGROUP_USAGE_FILES 2
int sc__cgroup_cell_usage(const struct sc_cgroup *cg, uint32_t id, int kept[SC_CGROUP_USAGE_FILES],
			  struct sc_cgroup_usage *out);
/* A cell's cgroup's directory, opened (CLOEXEC) for sc__cell_freeze; -errno. */
int sc__cgroup_cell_open(const struct sc_cgroup *cg, uint32_t id);
/* Removes the cgroup and what is left of its cells' (the template must be gone; it removes
 * each cell's when it reaps the cell). */
void sc__cgroup_sandbox_free(struct sc_cgroup *cg);
/* Whether sandboxes of this process get memory cgroups: 0 with where, or a negative code
 * with why not; makes and removes one to know. */
int sc__cgroup_probe(char *detail, size_t len);

/* ---- freeze.c ---- */

/* A cell's processes stopped for a paused run (docs/approval.md): the ones sc__cell_freeze
 * stopped, by pid and start time, for sc__cell_thaw to continue. */
struct sc_frozen;

/* Which processes are a cell's. */
struct sc_cell_procs {
	pid_t root;	/* the cell (pid 1 of its pid namespace, or a subreaper), or an anchor */
	bool keep_root; /* the root goes on running: a session's anchor, which runs no code */
	int cgroup_fd;	/* the cell's own cgroup's directory (level cgroups), or -1 */
	/* root's start time (sc__proc_start_time), read while root was held: once root is
	 * reaped its pid may be another process's, whose tree is not the cell's */
	unsigned long long root_start;
};

/* Stops every process of the cell (those of its cgroup, else those below root as the host's
 * /proc shows them: root is a cell's pid 1, or a subreaper at level rlimits, so the tree is
 * every process its code started), every thread of each, root too unless keep_root. SIGSTOP
 * from outside, pass after pass, until a listing begun after all were seen stopped finds the
 * same, all stopped: a process the code forks meanwhile, or one it continues with SIGCONT, is
 * met by a later pass, and once all are stopped none is left to continue another. Processes
 * found stopped already are left as they are (and not continued by the thaw). 0 with *out;
 * -ETIMEDOUT when the cell did not hold still within timeout_ms (a thread that stays in an
 * uninterruptible sleep, a vfork's parent), -ESRCH when root is gone (or its pid names a
 * process started at another time than root_start), -E2BIG past 4,096
 * processes, -ENOMEM: then what it stopped is continued again and *out is NULL. */
int sc__cell_freeze(const struct sc_cell_procs *cell, unsigned timeout_ms, struct sc_frozen **out);
/* Continues what the freeze stopped (each only while it is still the process it stopped) and
 * frees f. NULL: nothing. */
void sc__cell_thaw(struct sc_frozen *f);
/* Frees f and continues nothing: its processes were killed, and one that outlived the kill
 * stays stopped. NULL: nothing. */
void sc__cell_frozen_free(struct sc_frozen *f);

#endif
