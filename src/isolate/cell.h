/* The cell interface: what the host needs from the mechanism that makes its cells, as one table
 * of operations (crun's handler table, into which libkrun plugs a VM, and libuv's platform
 * contract are the models). The core picks an implementation once, at sandbox creation
 * (choose_level, src/core/sandbox.c), and from then on only calls through the table: no file
 * of src/core asks which level it runs at. Two implementations: namespaces (cell_namespaces.c:
 * levels namespaces and cgroups) and rlimits (cell_rlimits.c); docs/architecture.md, "The cell
 * interface", lists what a third (a micro-VM over vsock) must provide.
 *
 * Typical use, by the core:
 *
 *	sc__cells_init(&sb->cells, &sc__cells_namespaces);
 *	sb->cells.ops->prepare(&sb->cells, workdir_fd, required, err);	// may become cgroups
 *	sb->cells.ops->start(&sb->cells, &spec, &pid, &pidfd, err);	// the template
 *	... cells arrive on the control socket as struct sc_cell ...
 *	sb->cells.ops->kill(&cell);
 *	sb->cells.ops->free(&sb->cells);				// template gone */
#ifndef SC_ISOLATE_CELL_H
#define SC_ISOLATE_CELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "host.h"
#include "rpc/control.h"
#include "snapcell.h"

/* A cell the template parked for the host (or made for one run): its id and the descriptors
 * the host polls and reads (enum sc_cell_fd): its frame socket, stdout and stderr pipes, the
 * exit pipe (one struct sc_exit_record, then EOF), its /output directory and the pidfd of its
 * first process, which the core also waits on (readable once the cell is gone) before it
 * removes a retired cell's out/<id>; with network entries, its network socket and listeners
 * (net). Every implementation hands the host these as descriptors; one whose cells live
 * outside this kernel makes them (socket pairs and pipes it feeds, an eventfd it signals for
 * the pidfd). */
struct sc_cell {
	uint32_t id;
	int fds[SC_CELL_NFDS];
	int net[SC_CELL_NET_MAX]; /* a sandbox with entries: network socket, listeners */
	size_t n_net;
	/* A cell reset in place (snapcell_config_set_reuse): its CPU time before this run, which
	 * the exit record's whole-life figure is reduced by; 0 for a cell that never ran. */
	uint64_t cpu_base_us;
	bool reused; /* it was reset in place: it ran code before */
	/* What every run of a fresh cell reads, looked up at its first and kept for the next
	 * (a cell reset in place runs many; run.c keep_cell): its pid in this namespace, its
	 * /proc status and its memory cgroup's figures (sc_cell_ops.usage). Valid once kept is
	 * set; -1 where there is none. */
	bool kept;
	int pid;
	int status_fd;
	int usage_fds[SC_CGROUP_USAGE_FILES];
};

/* Closes the cell's descriptors (cell.c). */
void sc__cell_close(struct sc_cell *cell);
/* The pid behind a pidfd in this process's namespace, or -1 (cell.c). */
int sc__pidfd_pid(int pidfd);

/* One sandbox's mechanism: its table and what the table's operations keep. */
struct sc_cells {
	const struct sc_cell_ops *ops;
	enum snapcell_isolation level; /* what it gives: ops->level, or more after prepare */
	uid_t uid;		       /* the sandbox's outside ids, which cells run as */
	gid_t gid;
	struct sc_cgroup cgroup; /* namespaces: the memory cgroup (dir_fd -1: none) */
	int tmp_fd;		 /* rlimits: the work directory's tmp/, cells' /tmp trees */
	dev_t work_dev;		 /* rlimits: the work directory's filesystem */
};

/* A sandbox's mechanism before prepare: ops, its level, nothing made yet (cell.c). */
void sc__cells_init(struct sc_cells *c, const struct sc_cell_ops *ops);

/* The mechanism's part of the template's setup message (rpc/setup.h's fields). */
struct sc_cells_setup {
	enum snapcell_isolation level;
	bool cell_tmp;	 /* the cells' /tmp trees are in the work directory's tmp/ */
	bool own_uid;	 /* cells run as the caller's own uid (seccomp then refuses path chmod) */
	bool host_paths; /* cells read the Python paths at their host paths (no root of their own)
			  */
	const char *cgroup; /* the sandbox's memory cgroup, or NULL */
};

/* The bounds of the files watch: a cell's /tmp and /output together. */
struct sc_files_bounds {
	uint64_t max_bytes;
	uint64_t max_entries;
	uint64_t file_bytes; /* the file-size limit: what a mapped file no name shows counts */
	/* Whether more descriptors are in flight in AF_UNIX queues (in no process's table, so
	 * neither the walk nor /proc sees them) than room bytes hold; the host counts them, as
	 * they are its uid's and its control socket's (src/core/inflight.c). NULL: not asked. */
	bool (*in_flight_over)(const void *ctx, uint64_t room);
	const void *ctx;
};

/* What the host needs from a mechanism. Every operation but those marked optional is set;
 * the cell operations may be called from any thread, the others from the sandbox's creating
 * and freeing thread only. Errors: 0 or a negative code, err naming the step. */
struct sc_cell_ops {
	const char *name;
	enum snapcell_isolation level; /* the level it gives before prepare */
	/* Why a run cannot have files of its own here (the message of the refusal), or NULL. */
	const char *no_run_files;

	/* Before the template starts: what the mechanism needs in the work directory (workdir,
	 * open) and beside it (a memory cgroup); fails when the config's required level cannot
	 * be had. Sets c->level to what the sandbox gets. */
	int (*prepare)(struct sc_cells *c, int workdir, enum snapcell_isolation required,
		       struct snapcell_error *err);
	/* Starts the template from spec, which the core filled but for what the mechanism
	 * decides (namespaces, cgroup_fd): *pid and *pidfd are the template's. */
	int (*start)(struct sc_cells *c, struct sc_spawn *spec, pid_t *pid, int *pidfd,
		     struct snapcell_error *err);
	/* The mechanism's part of the setup message. */
	void (*setup)(const struct sc_cells *c, struct sc_cells_setup *out);
	/* Releases what prepare made; the template and its cells are gone. Safe after a failed
	 * or absent prepare. */
	void (*free)(struct sc_cells *c);

	/* Kills the cell and everything it started; asynchronous, may run more than once. Its
	 * exit record follows on the exit pipe. */
	void (*kill)(const struct sc_cell *cell);
	/* Waits (until deadline_us, sc__now_us clock) for a killed cell to be gone, so nothing
	 * of it can change its /output any more: 0 or -ETIMEDOUT. */
	int (*wait_gone)(const struct sc_cell *cell, uint64_t deadline_us);
	/* Optional: the pid of the cell's first process in this process's pid namespace, whose
	 * pages (/proc/PID/pagemap) teach the pre-fault learner, or -1. NULL: never learned. */
	int (*pid)(const struct sc_cell *cell);
	/* Optional: the kernel's memory figures for the cell (its peak, its out-of-memory kills),
	 * read while it is there; NULL when the mechanism has none. 0 or a negative code.
	 * kept: the cell's files for it, opened at the first read and left open (the caller
	 * closes them), or NULL to open and close them. */
	int (*usage)(const struct sc_cells *c, uint32_t id, int kept[SC_CGROUP_USAGE_FILES],
		     struct sc_cgroup_usage *out);
	/* Optional, for a mechanism without a size-bounded /tmp and /output per cell: whether the
	 * /tmp and /output of files (the cell whose directories they are: a session family's
	 * anchor) hold more than b allows, counting what its processes hold open or mapped that
	 * no name shows. The host calls it every few milliseconds while a run goes on (not while
	 * it is paused: its processes are stopped) and kills the cell when it says so. NULL:
	 * nothing to watch. */
	bool (*files_over)(const struct sc_cells *c, const struct sc_cell *files,
			   const struct sc_files_bounds *b);
	/* Optional: stops every process of the cell below root (the cell, or a session's anchor,
	 * which with keep_root goes on running) for a paused run, within timeout_ms, so none runs
	 * while the run waits for its decision; thaw continues what it stopped, frozen_free
	 * forgets it (the processes were killed). 0 with *out, or a negative code, nothing left
	 * stopped (freeze.c's sc__cell_freeze). NULL: a paused run's processes run on. */
	int (*freeze)(const struct sc_cells *c, const struct sc_cell *root, bool keep_root,
		      unsigned timeout_ms, struct sc_frozen **out);
	void (*thaw)(struct sc_frozen *f);
	void (*frozen_free)(struct sc_frozen *f);
};

/* cell_namespaces.c: cells in namespaces of their own (level namespaces), or also in a memory
 * cgroup each (level cgroups: the same mechanism, whose prepare switches to the second table
 * when it could make the cgroup). */
extern const struct sc_cell_ops sc__cells_namespaces;
extern const struct sc_cell_ops sc__cells_cgroups;
/* cell_rlimits.c: cells in the caller's namespaces, confined by Landlock, seccomp and
 * rlimits, with their /tmp and /output on the work directory's filesystem, watched. */
extern const struct sc_cell_ops sc__cells_rlimits;

/* What the two share (cell.c): the cell's first process through its pidfd. At level
 * namespaces it is pid 1 of its namespace, whose death takes every process of the cell; at
 * rlimits a subreaper, and the template kills what its death leaves (docs/architecture.md,
 * "Isolation levels"). */
void sc__cell_pidfd_kill(const struct sc_cell *cell);
int sc__cell_pidfd_wait_gone(const struct sc_cell *cell, uint64_t deadline_us);
int sc__cell_pidfd_pid(const struct sc_cell *cell);
/* The cell's processes through its first process's pid (and, where the sandbox has memory
 * cgroups, the cell's cgroup): sc__cell_freeze. */
int sc__cell_pidfd_freeze(const struct sc_cells *c, const struct sc_cell *root, bool keep_root,
			  unsigned timeout_ms, struct sc_frozen **out);

/* held.c (rlimits): bytes that the process tree of cell holds on the filesystem dev in
 * regular files no name shows (opened and unlinked: their st_blocks; mapped with no descriptor
 * left: file_bytes each, their size bound, as /proc/PID/maps gives no size), UINT64_MAX past
 * 4,096 processes of its uid or files, 0 when this process cannot read the cell's /proc (it needs
 * CAP_SYS_PTRACE). */
uint64_t sc__held_bytes(pid_t cell, dev_t dev, uint64_t file_bytes);

#endif
