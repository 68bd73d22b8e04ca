/* What the template's files share (guest/template.c and its template_*.c): its one state, T
 * (the template is one process with one thread), and the steps one file lends another. Not for
 * the cells' files: a cell reads only its plan (struct sc_cell_plan, guest.h). */
#ifndef SC_GUEST_TEMPLATE_H
#define SC_GUEST_TEMPLATE_H

#include <stdbool.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "guest.h"
#include "rpc/control.h"

#define CTL	  SC_CONTROL_FD
#define MAX_CELLS 4096 /* live cells per sandbox, parked or running */

struct live_cell {
	uint32_t id;
	pid_t pid;
	int exit_fd;		/* write end of the cell's exit pipe */
	unsigned slot;		/* its byte in T.set_up */
	struct sc_reuse *reuse; /* armed for reset in place (reset.c), or NULL */
};

struct sc_template {
	struct sc_guest_config cfg;
	struct sc_bpf seccomp;
	int self_netns;	   /* to come back after making a cell's network namespace */
	int out_fd;	   /* SC_OUT_BASE */
	int landlock_fd;   /* the cells' exec ruleset, or -1 (no exec) */
	int cgroup_fd;	   /* the sandbox's memory cgroup, or -1: cells get one each below it */
	bool unix_sockets; /* cells may listen on AF_UNIX sockets (the ruleset scopes them) */
	int sig_fd;
	uint32_t next_id;
	unsigned parked;
	struct live_cell cells[MAX_CELLS];
	size_t n_cells;
	/* One byte per live cell, shared with the cells (MAP_SHARED): a cell sets its own once
	 * set up and then unmaps the page, so only the template's reading of it says whether a
	 * cell's code may have run. free_slots is a stack of unused bytes. */
	volatile uint8_t *set_up;
	unsigned free_slots[MAX_CELLS];
	size_t n_free_slots;
	struct sc_prefault_range *prefault; /* the host's latest list, for cells parked next */
	size_t n_prefault;
};

extern struct sc_template T;

static inline void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* template_setup.c: the setup message read, the policy compiled, the interpreter started, the
 * mechanism's own part done (T.cfg.ops->setup): what READY reports. */
int sc_template_setup(struct snapcell_error *err);
/* The seccomp compiling child: the helper's, taken over (the namespaces level), or one forked
 * now (the rlimits level); sc_template_setup joins it. */
void sc_template_compile_adopt(void);
bool sc_template_compile_tell(char word);
bool sc_template_compile_heard(char word);
void sc_template_compile_start(void);

/* template_park.c: forks a cell and hands it to the host (a parked one, or with input_layer
 * one made for a run's files); reaps dead cells, writing each one's exit record. */
int sc_template_park_cell(const char *input_layer);
void sc_template_reap(void);
/* A cell that exited, waited for elsewhere (reset.c): as the reaping does. */
struct rusage;
void sc_template_reaped(pid_t pid, int status, const struct rusage *ru);

/* reset.c: reset in place. seize: right after the fork of a cell sc_cell_reusable (guest.h)
 * names; stopped: the reaping found the cell in a ptrace stop; reset: the
 * host's SC_CTL_RESET, answered; free: the cell is gone. */
void sc_reuse_init(void); /* the template's setup: takes SC_GUEST_PROC_FD, or turns reuse off */
void sc_reuse_seize(struct live_cell *c);
void sc_reuse_stopped(struct live_cell *c, int status);
void sc_reuse_reset(uint32_t id);
void sc_reuse_free(struct live_cell *c);
/* The template had SC_REUSE_CPU_SIGNAL from a timer for id: the cell is killed if its run's CPU
 * timer (reset.c cpu_limit_arm) did expire. */
void sc_reuse_cpu_expired(uint32_t id);
#define SC_REUSE_CPU_SIGNAL (SIGRTMIN + 1)

/* reset_leftovers.c: what a run leaves outside the cell's process, for reset.c. The attributes
 * of the cell's /tmp and /output (taken at parking; at each reset any change, times included,
 * is a reason to discard, and so is a file in /output), and the cell's RUSAGE_CHILDREN, read by a
 * getrusage the stopped cell is made to run at the system call of its parked stop (at: the
 * registers of that stop; the registers are left changed). */
#define SC_REUSE_DIRS 2
struct sc_reuse_dirs {
	bool present[SC_REUSE_DIRS];
	dev_t dev[SC_REUSE_DIRS];
	ino_t ino[SC_REUSE_DIRS];
	mode_t mode[SC_REUSE_DIRS];
	uid_t uid[SC_REUSE_DIRS];
	gid_t gid[SC_REUSE_DIRS];
	struct timespec times[SC_REUSE_DIRS][3]; /* access, modification, change */
};
int sc_reuse_dirs_take(int proc_fd, pid_t pid, struct sc_reuse_dirs *d);
const char *sc_reuse_dirs_check(int proc_fd, pid_t pid, const struct sc_reuse_dirs *d);
struct user_regs_struct;
int sc_reuse_children_usage(pid_t pid, const struct user_regs_struct *at, struct rusage *out);
/* The CPU time of the threads of the stopped cell other than its main one, dead ones' included. */
int sc_reuse_other_threads_ns(int proc_fd, pid_t pid, int64_t *ns);

#endif
