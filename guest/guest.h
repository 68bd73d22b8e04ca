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
#define SC_GUEST_SETUP_FD    4 /* a sealed memfd: the setup message as the host sent it */
#define SC_GUEST_PIDNS_FD    5 /* the namespaces level: the template's pid namespace */
#define SC_GUEST_NETNS_FD    6 /* ... and its network namespace (network entries only) */
#define SC_GUEST_CGROUP_FD   7 /* the sandbox's memory cgroup directory (O_PATH), if any */
#define SC_GUEST_MODULE_FD   8 /* the rlimits level: the module's file (O_PATH) */
#define SC_GUEST_SECCOMP_FD  9 /* the namespaces level: the helper's seccomp compiler's socket */
#define SC_GUEST_SETUP_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)

/* Words to the compiling child (guest/helper.c start_compiler): the helper's once it pivoted
 * (the child detaches the host's root), the template's once it loaded the module (the child
 * detaches the module's bind). */
#define SC_GUEST_PIVOTED       'p'
#define SC_GUEST_DETACH_MODULE 'd'

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
	/* The rlimits level (plain.c): no namespaces, so no root of the cells' own; each cell
	 * sees the host's filesystem through its Landlock domain, its /tmp and /output are
	 * tmp_dir/<id> and out_dir/<id>, and its environment says where they are. */
	bool rlimits;
	char *tmp_dir;
	bool own_uid; /* the cells' uid is the caller's (seccomp: no attributes by path) */
	char *cgroup; /* the sandbox's memory cgroup directory on the host, or NULL for none */
};

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

#define SC_CELL_RPC_FD 3 /* the cell's frame socket */
#define SC_CELL_NET_FD 4 /* its network socket (a sandbox with entries) */
/* The root of its /tmp tmpfs (rootfs.c): a session family's anchor hands it to the host;
 * closed before a fresh cell's code runs; never in a process that runs code. */
#define SC_CELL_TMP_FD 5

/* Never returns: sets up the cell, waits for the host's first frame: code to run once, or
 * SESSION to become the anchor of a session family (session.c). */
_Noreturn void sc_cell_main(const struct sc_cell_plan *plan);

/* Runs code as __main__ and reports DONE on the frame socket; returns the exit code. In a
 * session, state stays and SystemExit ends only the run. */
int sc_cell_run(const uint8_t *code, size_t len, const uint8_t *tools, size_t tools_len,
		bool session);

/* session.c: never returns. */
_Noreturn void sc_session_anchor(size_t frame_cap);

/* plain.c: the rlimits level. In the template: made a subreaper (a dead cell's processes
 * come back to it), the cells' directory parents opened (*out_fd, *tmp_fd), and the process
 * limit raised by what the uid already runs when it is the caller's own. */
int sc_plain_template_setup(struct sc_guest_config *cfg, int *out_fd, int *tmp_fd,
			    struct snapcell_error *err);
/* A cell's fresh /output and /tmp directories; returns a descriptor of its /output (above
 * fd 9) or a negative code. */
int sc_plain_cell_dirs(int out_fd, int tmp_fd, const char *name);
/* Removes a reaped cell's /tmp directory (the host removes its /output). */
void sc_plain_cell_forget(int tmp_fd, const char *name);
/* Kills every child of the template that is not a live cell: what a dead cell left. */
void sc_plain_kill_orphans(const pid_t *cells, size_t n);
/* At the sandbox's end: kills the cells and everything they started, until no child is left. */
void sc_plain_kill_all(void);
/* In the cell, instead of its mounts: a subreaper like a namespace's pid 1, and confined by
 * its Landlock domain (hostfs.c); *tmp_root gets its /tmp root (the directory holding
 * SC_TMP_LIVE), as sc__rootfs_enter_cell gives it. */
int sc_plain_cell_restrict(const struct sc_cell_plan *plan, int *tmp_root,
			   struct snapcell_error *err);
/* In the cell, before warming up: the environment names its directories. */
void sc_plain_cell_environ(const struct sc_cell_plan *plan);
/* The cell's /tmp, its SC_TMP_LIVE directory and working directory; static storage. */
const char *sc_plain_cell_tmp(const struct sc_cell_plan *plan);

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
void sc_py_before_fork(void);
void sc_py_after_fork_parent(void);
void sc_py_after_fork_child(void);

#endif
