/* The guest: the helper (helper.c), which builds the root and execs the chosen interpreter,
 * and the guest module it imports there (module.c), an abi3 extension that becomes the
 * template (template.c) owning the warm interpreter (python.c) and forking the cells (cell.c).
 * Runs only inside the sandbox's namespaces; never linked into the host library. */
#ifndef SC_GUEST_H
#define SC_GUEST_H

#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "isolate/guest.h"
#include "rpc/frame.h"
#include "rpc/setup.h"
#include "snapcell.h"

/* What the helper hands the template across its exec of the interpreter. The module is a
 * template only with SC_GUEST_ENV=SC_GUEST_MARK in its environment and the sealed setup memfd
 * at SC_GUEST_SETUP_FD; anywhere else its import fails and touches nothing. */
#define SC_GUEST_MODULE	     "_snapcell_guest"
#define SC_GUEST_ENV	     "SNAPCELL_GUEST"
#define SC_GUEST_MARK	     "template"
#define SC_GUEST_SETUP_FD    4	/* a sealed memfd: the setup message as the host sent it */
#define SC_GUEST_PIDNS_FD    5	/* the namespaces level: the template's pid namespace */
#define SC_GUEST_NETNS_FD    6	/* ... and its network namespace (network entries only) */
#define SC_GUEST_CGROUP_FD   7	/* the sandbox's memory cgroup directory (O_PATH), if any */
#define SC_GUEST_MODULE_FD   8	/* the rlimits level: the module's file (O_PATH) */
#define SC_GUEST_SECCOMP_FD  9	/* the namespaces level: the helper's seccomp compiler's socket */
#define SC_GUEST_PROC_FD     10 /* a detached procfs of the sandbox (reset.c, template_shared.c) */
#define SC_GUEST_SELF_FD     11 /* without one: the template's own /proc/PID (template_shared.c) */
#define SC_GUEST_SETUP_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

struct sc_guest_ops;

/* Words to the compiling child (guest/helper.c start_compiler): the helper's once it pivoted
 * (the child detaches the host's root), the template's once it loaded the module (the child
 * detaches the module's bind). */
#define SC_GUEST_PIVOTED       'p'
#define SC_GUEST_DETACH_MODULE 'd'
/* The child's word back, before its program: it tried to detach the host's root. The template
 * waits for it before it mounts anything at SC_HOST_ROOT_AT (the preloads' /tmp), which a
 * late detach by path would take instead. */
#define SC_GUEST_HOST_DETACHED 'h'

struct sc_guest_config {
	struct sc_setup s; /* as decoded; the fields below borrow from it */
	char *root_base;
	char *out_dir;
	char *input_dir;	/* staged by the host; bound read-only at /input */
	char **python_paths;	/* sys.path entries (a venv's: its site directory) */
	bool *python_path_site; /* a venv's: its .pth files are processed */
	char **python_binds;	/* where each is: SC_PYTHON_PATH_BASE/<index>, or the host path */
	size_t n_python_paths;
	char **preloads; /* modules imported before cells are parked */
	size_t n_preloads;
	char *warmup; /* Python run once after the preloads (snapcell_config_set_warmup), or NULL */
	unsigned spares;
	uint64_t tmp_bytes;
	uint64_t output_bytes; /* size of each cell's /output tmpfs */
	size_t frame_cap;
	struct sc_rlimits limits;
	char **tool_names; /* for the guest's `tools` module */
	char **tool_attrs; /* each name's attribute path there (sc_tool.attr) */
	char **tool_docs;
	size_t n_tools;
	char *network_notice; /* the message of the guest's network error (sc__network_notice) */
	/* A sandbox with network entries: each cell gets a network namespace of its own with
	 * loopback up, the entries' IP literals on it, and a listener per port for the host. */
	bool network;
	uint16_t *net_ports;
	size_t n_net_ports;
	bool net_v6;	  /* listen on IPv6 too (an entry is an IPv6 literal) */
	char **net_addrs; /* the entries' IP literals, put on loopback */
	size_t n_net_addrs;
	/* Cells may exec the interpreter (Landlock is available): sys.executable names it. */
	bool exec;
	/* The isolation mechanism, picked once from the setup message's level. */
	const struct sc_guest_ops *ops;
	char *tmp_dir; /* the rlimits level (plain.c): the parent of the cells' /tmp directories */
	bool own_uid;  /* the cells' uid is the caller's (seccomp: no attributes by path) */
	char *cgroup;  /* the sandbox's memory cgroup directory on the host, or NULL for none */
	bool reuse;    /* fresh cells are armed to be reset in place (reset.c) */
};

struct sc_cell_plan;

/* One isolation mechanism, as the template and its cells use it: what differs between the
 * levels, and nothing else. The template picks one, once, from the setup message's level
 * (sc_guest_ops_for); no other code asks for the level. Two implementations: namespaces.c (a
 * root of the sandbox's own, a pid and mount namespace per cell, and at level cgroups a memory
 * cgroup per cell) and plain.c (the rlimits level: the host's filesystem through each cell's
 * Landlock domain, the template as the cells' subreaper). The template's steps see its state
 * (template.h); the cell's see only the plan. */
struct sc_guest_ops {
	/* ---- the template's setup (template_setup.c) ---- */
	/* The setup message's values the mechanism needs, and none it cannot honour: 0 or -1. */
	int (*check)(const struct sc_guest_config *cfg);
	/* Where Python path i (p) is for the cells: *bind, malloc'd. 0 or -1. */
	int (*python_bind)(const struct sc_setup_path *p, size_t i, char **bind);
	/* Its part of the template's setup, after the setup message is read: the cells' root or
	 * their directories, the exec ruleset, the seccomp compiler started or taken over. */
	int (*setup)(struct snapcell_error *err);
	/* The code's environment beyond the configured one, set after it. */
	int (*environ)(struct snapcell_error *err);
	/* Starts the interpreter (sc_py_init), in what the preloads may write to. */
	int (*python_init)(struct snapcell_error *err);
	/* The seccomp flags the mechanism adds to the cells' policy (enum sc_seccomp_flags). */
	unsigned (*seccomp_flags)(void);
	/* The level READY reports. */
	enum snapcell_isolation (*level)(void);
	/* ---- the template's cells (template_park.c, template.c) ---- */
	/* A cell's own /output (and /tmp) named name: a descriptor of its /output above fd 9, or
	 * a negative code. */
	int (*cell_dirs)(const char *name);
	/* Forks the cell of plan (which runs sc_cell_main): its pid, or a negative code. */
	pid_t (*fork_cell)(const struct sc_cell_plan *plan);
	/* A cell for one run's files (SC_CTL_FILES), parked now with input_layer laid over its
	 * /input: 0 or a negative code (nothing was sent to the host then). */
	int (*files_cell)(const char *input_layer);
	/* After a cell is reaped, before its directories go: what the dead cell left. */
	void (*reaped)(void);
	/* Removes what cell_dirs made for cell id, once it is reaped or was never forked. */
	void (*cell_forget)(uint32_t id);
	/* When the host closes the control socket, before the template exits. */
	void (*end)(void);
	/* ---- in the cell (cell.c, python.c) ---- */
	/* Its view of the file system, before Landlock and seccomp: *tmp_root gets the root of
	 * its /tmp (the directory holding SC_TMP_LIVE). */
	int (*cell_enter)(const struct sc_cell_plan *plan, int *tmp_root,
			  struct snapcell_error *err);
	/* Its /tmp (also its working directory), as the code sees it. */
	const char *(*cell_tmp)(const struct sc_cell_plan *plan);
	/* Before warming up: the environment names its directories. */
	void (*cell_environ)(const struct sc_cell_plan *plan);
	/* sys.executable where cells may exec the interpreter (cfg->exec). */
	const char *(*executable)(const struct sc_guest_config *cfg);
};

extern const struct sc_guest_ops sc_namespaces_ops; /* namespaces.c */
extern const struct sc_guest_ops sc_plain_ops;	    /* plain.c */

/* The mechanism of a setup message's level (enum snapcell_isolation), or NULL for none. */
const struct sc_guest_ops *sc_guest_ops_for(int level);

/* The value of name in the code's configured environment, or NULL. */
const char *sc_guest_env(const struct sc_guest_config *cfg, const char *name);

/* What a cell needs from the template, fixed before the fork. */
struct sc_prefault_range; /* rpc/control.h */

struct sc_cell_plan {
	const struct sc_guest_config *cfg;
	const struct sc_bpf *seccomp;
	uint32_t id;
	int stdout_fd, stderr_fd, rpc_fd; /* the cell's ends */
	int net_fd;			  /* its end of the network socket, or -1 */
	int landlock_fd;		  /* the exec ruleset (sc__landlock_exec_ruleset), or -1 */
	int cgroup_fd; /* the tasks file of its memory cgroup (sc__cgroup_cell_make), or -1 */
	/* A byte of a page shared with the template, set once the cell is set up; the cell
	 * unmaps the page (set_up_map, set_up_len) before any code runs. */
	volatile uint8_t *set_up;
	void *set_up_map;
	size_t set_up_len;
	/* Pages to fault in once warm (rpc/control.h); the template's copy, read-only here. */
	const struct sc_prefault_range *prefault;
	size_t n_prefault;
	/* A cell made for one run's files (SC_CTL_FILES): their directory under SC_OUT_BASE,
	 * laid over /input; NULL for a parked cell. */
	const char *input_layer;
};

/* A cell armed to be reset in place (reset.c): a parked one of a sandbox that asked for it,
 * but not the sandbox's first, which is parked before the template's warm-up and so never
 * reset (reset.c sc_reuse_reset): its image, its counters filter and its parked stop would
 * all be on the path of the sandbox's first run. */
static inline bool sc_cell_reusable(const struct sc_guest_config *cfg, uint32_t id,
				    const char *input_layer)
{
	return cfg->reuse && !input_layer && id != 0;
}

#define SC_CELL_RPC_FD 3 /* the cell's frame socket */
#define SC_CELL_NET_FD 4 /* its network socket (a sandbox with entries) */
/* The root of its /tmp tmpfs (rootfs.c): a session family's anchor hands it to the host;
 * closed before a fresh cell's code runs; never in a process that runs code. */
#define SC_CELL_TMP_FD 5
/* A cell armed for reuse: its userfaultfd, from its setup until its parked stop (reset.c). */
#define SC_CELL_UFFD_FD 6
/* A cell armed for reuse: the listener of its counters filter (src/isolate/seccomp_counters.c),
 * from its setup until its parked stop; the template takes it there (guest/counters.c). */
#define SC_CELL_NOTIF_FD 7
/* The mappings a run added, which the template's reset (reset.c) writes here, in the cell's
 * memory (the guest module is at the same address in the template and every cell), for the
 * cell to unmap after its parked stop (cell.c), before any code runs. */
#define SC_REUSE_UNMAP_MAX 256
struct sc_reuse_unmaps {
	uint64_t n;
	struct {
		uint64_t start, end;
	} at[SC_REUSE_UNMAP_MAX];
};
extern struct sc_reuse_unmaps sc_reuse_unmaps;
/* Set in the cell's memory by the template at the parked stop it saw (reset.c), before the
 * image is taken: a cell that stopped untraced stops again (cell.c reuse_park). */
extern volatile int sc_reuse_stop_seen;

/* RLIMIT_CPU of a cell armed for reuse is the configured limit and this much more: the
 * template resets a cell only while it has used less than this, so every run in it has at
 * least the configured limit; the template's timer on the cell's CPU clock (reset.c
 * cpu_limit_arm) ends each run at it, the RLIMIT_CPU being only the backstop. */
#define SC_REUSE_CPU_SLACK_MS 1000

/* Never returns: sets up the cell, waits for the host's first frame: code to run once, or
 * SESSION to become the anchor of a session family (session.c). */
_Noreturn void sc_cell_main(const struct sc_cell_plan *plan);

/* Runs code as __main__ and reports DONE on the frame socket; returns the exit code. In a
 * session, state stays and SystemExit ends only the run. */
int sc_cell_run(const uint8_t *code, size_t len, const uint8_t *tools, size_t tools_len,
		bool session);

/* session.c: never returns. */
_Noreturn void sc_session_anchor(size_t frame_cap);

/* template.c: the template's life, from the module's main() (module.c) until the host closes
 * the control socket; returns the process's exit code. */
int sc_template_main(void);

/* bridge.c */
struct _object *sc_bridge_init(void); /* PyObject *: keeps Python.h out of this header */
void sc_bridge_set_cap(size_t cap);
/* Only this process may call tools or ask the network (its forks share the sockets). */
void sc_bridge_set_owner(int pid);
/* After a run's code, before DONE: the socket is left on a frame boundary (a session's
 * worker reads its next request there). */
void sc_bridge_end_run(void);

/* template_shared.c: the template's shared mappings a cell could write (mprotect included),
 * other than set_up (its set-up bytes: len of them, the whole mapping, which each cell unmaps;
 * a larger one at that address is not passed). init: where it reads its maps. scan: the number
 * found, the first described in what (size, address, file), or with drop every one marked
 * MADV_DONTFORK (cells forked later lack it); -errno when the maps cannot be read. */
void sc_shared_maps_init(const volatile void *set_up, size_t len);
int sc_shared_maps_scan(bool drop, char *what, size_t what_len);

/* python.c */
/* The interpreter, the prelude, the venv's site directories and the configured preloads:
 * what a cell needs before the template parks the first. */
int sc_py_init(const struct sc_guest_config *cfg, struct snapcell_error *err);
/* Then, in the template, one step per call of importing the common standard library and
 * warming it up before gc.freeze (prelude.prepare), each a few ms, so the template answers
 * the host between steps; cells parked afterwards share the result. False once done. */
bool sc_py_warm_template(void);
/* In each parked cell (prelude.warm). */
void sc_py_warm(void);
/* Runs code as __main__, with the run's own tools (a TOOLS frame's payload, or NULL) in its
 * `tools` module for that run; fills done and returns the process exit code. *value is the
 * VALUE frame's payload (malloc'd: the state byte, then the last expression's JSON), or
 * NULL. */
int sc_py_run(const uint8_t *code, size_t len, const uint8_t *tools, size_t tools_len, bool session,
	      struct sc_done_payload *done, uint8_t **value, size_t *value_len);
/* setenv, through os.environ so that Python sees it too; -1 with errno on failure. */
int sc_py_setenv(const char *name, const char *value, bool overwrite);
/* Before a fork (PyOS_BeforeFork); in the template, also the shared mappings a cell could
 * write are dropped from the fork (template_shared.c); -1 with errno when they cannot be looked
 * for: no fork then. The caller calls sc_py_after_fork_parent either way. */
int sc_py_before_fork(void);
void sc_py_after_fork_parent(void);
void sc_py_after_fork_child(void);
/* A reset cell, before each run (cell.c): what no fork renewed, renewed: random generators. */
void sc_py_after_reset(void);

#endif
