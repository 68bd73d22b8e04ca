/* The isolation mechanisms the helper applies, one per file: the read-only root (rootfs.c),
 * the seccomp policy (seccomp.c), rlimits (rlimits.c), capabilities and no_new_privs
 * (caps.c), a cell's network namespace (netns.c). They apply mechanisms; the order is the
 * caller's (guest/template*.c and guest/cell.c). Linked into the helper only, never into the
 * host library. */
#ifndef SC_ISOLATE_GUEST_H
#define SC_ISOLATE_GUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "snapcell.h"

/* ---- rootfs.c (helper side) ---- */

#define SC_OUT_BASE	    "/.snapcell/out" /* where per-cell output dirs live inside the root */
#define SC_OUTPUT_INODES    131072	     /* files and directories a cell's /output may hold */
#define SC_PYTHON_PATH_BASE "/.snapcell/python" /* python_paths[i] appear at BASE/i */
/* The public CA bundle, at its Debian path; SSL_CERT_FILE names it in the cell. */
#define SC_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define SC_GUEST_DIR "/.snapcell/guest" /* the guest module's directory, bound */
/* With Python paths: a venv over the interpreter, for the interpreter a cell execs. */
#define SC_VENV_DIR "/.snapcell/venv"
/* A file (content) or symbolic link (link) the root gets, at an absolute path. */
struct sc_root_file {
	const char *path;
	const char *content;
	const char *link;
};

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
	/* The bound shared-library directories: /etc/alternatives links into them are copied. */
	const char *const *lib_dirs;
	size_t n_lib_dirs;
	const char *hosts; /* lines for /etc/hosts after localhost's, or NULL */
	/* A certificate (PEM) the cells trust beyond the public bundle: SC_CA_BUNDLE is then a
	 * copy of the host's with this appended, not a bind. NULL for none. */
	const char *extra_ca;
	/* The interpreter, or NULL for none: the file interp_src (a path the helper can read)
	 * bound read-only at interp_path (copied mode 0111 when not everyone may execute it),
	 * and its ELF loader copied to the loader's own path mode 0111, so a cell can execute
	 * the loader but not read it (an exec whose program or loader is unreadable leaves the
	 * process non-dumpable). */
	const char *interp_src;
	const char *interp_path;
	const struct sc_root_file *files; /* made after the interpreter, before the pivot */
	size_t n_files;
};

/* Builds the minimal root and pivots into it; afterwards the host filesystem is mounted at
 * SC_HOST_ROOT_AT in the root, reachable by that path alone, until sc__rootfs_detach_host. */
int sc__rootfs_build(const struct sc_rootfs *fs, struct snapcell_error *err);

/* Where sc__rootfs_build leaves the host's root: the root's /tmp, which every cell mounts
 * its own tmpfs on. */
#define SC_HOST_ROOT_AT "/tmp"

/* Detaches the host's root from this mount namespace, lazily (MNT_DETACH); 0 also when it was
 * detached already (SC_HOST_ROOT_AT is then not a mount point), or -errno. Detaching waits
 * for an RCU grace period (namespace_unlock): 0.05-5 ms, longer the busier the CPUs. */
int sc__rootfs_detach_host(void);

/* Per cell, in the cell's own mount namespace: a fresh size-capped tmpfs whose directory
 * tmp_live is bound at /tmp (also at /dev/shm), its root left open as *tmp_root for a
 * session family's host side; SC_OUT_BASE/<name> at /output; with input_layer (a directory
 * of SC_OUT_BASE: one run's files), /input becomes a read-only overlay of it over the
 * workspace; then SC_OUT_BASE is detached so no other cell's output or files are reachable. */
int sc__rootfs_enter_cell(const char *out_name, uint64_t tmp_bytes, const char *tmp_live,
			  const char *input_layer, int *tmp_root, struct snapcell_error *err);

/* The system data the root binds when the host has it (zoneinfo, the CA bundle, ...). */
const char *const *sc__rootfs_data_paths(size_t *n);

/* The running program's ELF interpreter (PT_INTERP, e.g. /lib64/ld-linux-x86-64.so.2), or
 * NULL for a static program. Points into the program's own image. */
const char *sc__rootfs_own_loader(void);

/* ---- landlock.c ---- */

/* The Landlock ABI version this kernel offers, 0 for none. */
int sc__landlock_abi(void);

/* Landlock ABI from which sc__landlock_exec_ruleset can scope abstract AF_UNIX sockets, and
 * from which it also keeps connect and sendmsg to pathname sockets the cell made itself. */
#define SC_LANDLOCK_ABI_UNIX	  6
#define SC_LANDLOCK_ABI_UNIX_PATH 9
/* Landlock ABI from which a domain scopes signals (and abstract sockets) to itself. */
#define SC_LANDLOCK_ABI_SCOPE 6

/* A ruleset (a CLOEXEC fd above 9) that handles execution and allows it only for these
 * files, or a negative code. With unix_scope (ABI SC_LANDLOCK_ABI_UNIX) it also keeps
 * abstract AF_UNIX sockets within each cell's domain and refuses every TCP bind; from ABI
 * SC_LANDLOCK_ABI_UNIX_PATH, whatever unix_scope, pathname sockets too. Made once in the
 * template after the pivot. */
int sc__landlock_exec_ruleset(const char *const *paths, size_t n, bool unix_scope,
			      struct snapcell_error *err);

/* In each cell after its last mount (a Landlock domain may not mount) and before seccomp. */
int sc__landlock_restrict(int ruleset_fd);

/* ---- hostfs.c (the rlimits level) ---- */

/* What one cell may reach of the host's filesystem when it has no root of its own. */
struct sc_hostfs {
	const char *const *read; /* files and directories it may read (absent ones skipped) */
	size_t n_read;
	const char *tmp_dir; /* its own /tmp and /output: read, write, make, remove */
	const char *out_dir;
};

/* In each cell after fork, before seccomp: a Landlock domain handling every right the ABI
 * knows, granting only fs's (and /dev/null, zero, full, random, urandom), no TCP (ABI 4),
 * signals and abstract sockets scoped to the cell (ABI 6). */
int sc__hostfs_restrict(const struct sc_hostfs *fs, struct snapcell_error *err);

/* ---- seccomp.c ---- */

struct sc_bpf {
	void *filter; /* struct sock_filter[] */
	unsigned short len;
};

enum sc_seccomp_flags {
	/* TCP sockets (AF_INET, AF_INET6) and connect; in the cell's namespace every connection
	 * reaches the host's egress gate. */
	SC_SECCOMP_NETWORK = 1 << 0,
	/* execve and execveat (the caller confines them with Landlock to the cell's
	 * interpreter), with what a freshly exec'd program needs: arch_prctl(ARCH_SET_FS) for
	 * the loader's TLS and prctl(PR_SET_DUMPABLE, 0), which only hardens. */
	SC_SECCOMP_EXEC = 1 << 1,
	/* Without NETWORK: AF_UNIX sockets with bind, listen, accept and connect; only under
	 * the Landlock domain that scopes abstract sockets to the cell. Ignored with NETWORK. */
	SC_SECCOMP_UNIX = 1 << 2,
	/* The rlimits level (no namespaces; docs/security.md): no kill(-1) unless
	 * SIGNALS_SCOPED (without it kill(-1) reaches every process of the uid), socketpair only of
	 * stream and seqpacket types (a datagram one could sendmsg to a host's pathname socket). */
	SC_SECCOMP_HOST = 1 << 3,
	/* With HOST: no chmod, chown, utimes or truncate by path (Landlock does not cover them;
	 * the descriptor forms stay). The cells' uid owns what they must not change: the
	 * caller's files when it is the caller's own, the work directory's tmp/ and out/, the
	 * other cells' directories and the template's home when it is the sandbox's. */
	SC_SECCOMP_NO_PATH_ATTRS = 1 << 4,
	/* With HOST, where the cells' Landlock domain scopes signals (ABI 6): kill(-1) allowed,
	 * since it reaches only the cell's own processes, as a pid namespace's would (a
	 * session's anchor stops its family with it between runs). */
	SC_SECCOMP_SIGNALS_SCOPED = 1 << 5,
	/* Cells reset in place (guest/reset.c): madvise(MADV_FREE) refused (EINVAL, as before
	 * Linux 4.5, which allocators fall back from): a page freed lazily stays present and
	 * protected until the kernel drops it, later, so no reset could see it gone. So is every
	 * advice that sets a mapping's flags, which a reset neither sees nor puts back
	 * (seccomp.c, add_reuse_madvise_rules); and open with O_TMPFILE (EOPNOTSUPP, as at the
	 * rlimits level: a nameless file numbers an inode unseen, guest/reset_leftovers.c). */
	SC_SECCOMP_NO_LAZY_FREE = 1 << 6,
};

/* The namespaces level's flags for the cells (NETWORK, EXEC, UNIX): exec where Landlock
 * (ABI 1) can confine it; AF_UNIX listeners without network, where the ruleset scopes abstract
 * sockets (ABI 6) and either keeps pathname sockets to the cell's own (ABI 9) or no Python path
 * or venv binds a host directory a host process may listen in; NO_LAZY_FREE with reuse (the
 * setup message's). The helper (which has the
 * policy compiled meanwhile) and the template decide by it alike. */
unsigned sc__seccomp_namespaces_flags(bool network, size_t n_python_paths, int landlock_abi,
				      bool reuse);

/* Compiles the cell policy once per sandbox (a child of the helper, else the template), so
 * cells only install it. Whatever the
 * flags: never bind, listen or accept on TCP (so cells cannot reach each other or serve
 * anything), never UDP, raw, netlink or packet sockets. */
int sc__seccomp_compile(struct sc_bpf *out, unsigned flags, struct snapcell_error *err);
int sc__seccomp_install(const struct sc_bpf *bpf);
/* In a child made to compile the policy: writes its pid and flags to fd, then the program's
 * length (unsigned short) and instructions. 0, or -1 once something failed (the reader then
 * compiles the policy itself). */
int sc__seccomp_compile_to(int fd, unsigned flags);

/* ---- seccomp_counters.c ---- */

/* A cell armed for reset in place, before its policy: the filter that sends the calls reading
 * the process's own counters (CPU time, faults, switches, peak), and those making a task, to a
 * supervisor, the template (guest/counters.c), and refuses CPU-clock timers and absolute
 * CPU-clock sleeps. Returns its
 * listener (close-on-exec), or -errno. */
int sc__seccomp_counters_install(void);

/* ---- rlimits.c ---- */

struct sc_rlimits {
	uint64_t memory_bytes;
	uint64_t cpu_ms;
	uint64_t processes;
	uint64_t file_bytes;
	uint64_t open_files;
};

int sc__rlimits_apply(const struct sc_rlimits *lim, struct snapcell_error *err);

/* ---- cgroup_cell.c ---- */

/* In the template, before forking cell id: makes its memory cgroup below the sandbox's
 * (sandbox_fd, from the host), limited to limit_bytes, and returns an fd (CLOEXEC, above 9)
 * of its tasks file for the cell, or a negative code (nothing is left behind). */
int sc__cgroup_cell_make(int sandbox_fd, uint32_t id, uint64_t limit_bytes);
/* In the cell, first thing after fork, while it has one thread: moves itself into its
 * cgroup; closes tasks_fd. The template does the same with the sandbox's (SC_CGROUP_FD). */
int sc__cgroup_cell_enter(int tasks_fd);
/* In the template, once the cell is reaped (its cgroup is empty): reads the cgroup's peak and
 * out-of-memory kill count (0, or a negative code when they cannot be read) and removes it. */
int sc__cgroup_cell_release(int sandbox_fd, uint32_t id, uint64_t *peak, uint64_t *oom_kills);
/* A cell reset in place (guest/reset.c), before its next run: its cgroup's peak reset to what
 * it holds now. -EDQUOT when an out-of-memory kill was counted there (a later run would be
 * told of it), another negative code when the cgroup cannot be read or written. fds: its
 * memory.oom_control and memory.max_usage_in_bytes, each opened where -1 and kept open for
 * the next reset (the caller closes them). */
int sc__cgroup_cell_rearm(int sandbox_fd, uint32_t id, int fds[2]);
/* In the template, when the cell was not forked after all. */
void sc__cgroup_cell_drop(int sandbox_fd, uint32_t id);

/* ---- netns.c ---- */

/* What a cell's network namespace holds: the network entries' IP literals on loopback, and
 * one listener per port, on IPv6 too with v6. */
struct sc_netns {
	char *const *addrs;
	size_t n_addrs;
	const uint16_t *ports;
	size_t n_ports;
	bool v6;
};

/* Moves the caller into a new network namespace for its next child (the caller comes back
 * with setns) and makes what the child's connections land on: loopback up, ns's addresses on
 * it, one listener per port and family (CLOEXEC, above fd 9), appended to fds, which has room
 * for n_ports * 2 more. 0 or a negative code; listeners made before a failure are in fds. */
int sc__netns_enter(const struct sc_netns *ns, int *fds, size_t *n);

/* ---- caps.c ---- */

/* In the template, once: locked securebits (root inside cannot regain capabilities), empty
 * bounding and ambient sets, no_new_privs. Inherited by every cell; effective capabilities
 * stay. */
int sc__caps_lock(struct snapcell_error *err);

/* In each cell: clears the effective, permitted and inheritable sets. */
int sc__caps_clear(struct snapcell_error *err);

#endif
