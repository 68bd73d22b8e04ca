/* The reset probe's cell (reset_cell.c): a CPython armed with asynchronous write-protection,
 * parked and reset in place from this process. Used by reset_probe.c; not a library. */
#ifndef SNAPCELL_BENCH_RESET_CELL_H
#define SNAPCELL_BENCH_RESET_CELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#define HEAP_PAGES  1024  /* the child's bytearray the `w` runs write into */
#define MAX_RANGES  1024  /* writable private mappings of the parked child */
#define MAX_REGIONS 8192  /* written extents one scan reports */
#define XSTATE_MAX  16384 /* NT_X86_XSTATE is 2.5-11 KiB */
#define TEXT_MAX    65536 /* /proc/PID/maps, fd table and status as text */
#define MAX_VMAS    4096  /* mappings PROCMAP_QUERY lists */

struct range {
	uint64_t start, end;
	size_t image_off; /* where its parked bytes are in the image */
};

struct text {
	char buf[TEXT_MAX];
	size_t len;
};

/* One mapping as PROCMAP_QUERY reports it (its name only through the inode). */
struct vma {
	uint64_t start, end, flags, offset, inode;
	uint32_t dev_major, dev_minor;
};

/* What the child was when parked: what each reset puts back and checks against. */
struct parked {
	struct range ranges[MAX_RANGES];
	size_t n_ranges;
	uint64_t span_start, span_end; /* lowest and highest registered address */
	char *image;
	size_t image_len;
	struct user_regs_struct regs;
	unsigned char xstate[XSTATE_MAX];
	size_t xstate_len;
	struct text maps, fds, status;
	struct vma vmas[MAX_VMAS]; /* the same mappings through PROCMAP_QUERY */
	size_t n_vmas;
	uint64_t protect_ns, image_ns, park_ns; /* the first protection, the copy, all */
};

struct cell {
	pid_t pid;
	int sock;
	int uffd; /* held only: the registrations last while it is open */
	int pagemap_fd, mem_fd, maps_fd, status_fd, fd_dir_fd, syscall_fd;
	unsigned registered; /* mappings the child registered */
	uint64_t arm_ns;     /* its registration of them, timed by itself */
};

enum step {
	STEP_SETTLE,	   /* until the child sleeps in its recv again (not part of the reset) */
	STEP_STOP,	   /* PTRACE_INTERRUPT and its wait */
	STEP_FIND,	   /* PAGEMAP_SCAN for written pages */
	STEP_COPY_VM,	   /* process_vm_writev of the parked pages (even rounds) */
	STEP_COPY_MEM,	   /* pwrite on /proc/PID/mem (odd rounds) */
	STEP_REPROTECT,	   /* PAGEMAP_SCAN with PM_SCAN_WP_MATCHING over the span */
	STEP_REGS,	   /* PTRACE_GETREGS, the check it is parked, PTRACE_SETREGS */
	STEP_FPU,	   /* PTRACE_SETREGSET NT_X86_XSTATE */
	STEP_CHECK_MAPS,   /* /proc/PID/maps equal */
	STEP_CHECK_QUERY,  /* the same through PROCMAP_QUERY (timed, not in the reset) */
	STEP_CHECK_FDS,	   /* /proc/PID/fd names and targets equal */
	STEP_CHECK_STATUS, /* signal, thread and seccomp lines of /proc/PID/status equal */
	STEP_CONT,	   /* PTRACE_CONT */
	STEP_RESET_VM,	   /* the whole reset, copying with process_vm_writev */
	STEP_RESET_MEM,	   /* the whole reset, copying through /proc/PID/mem */
	STEP_FORK,	   /* the baseline: fork + the same writes + exit + wait */
	STEP_WRITTEN,	   /* pages found written (a count, not a time) */
	N_STEPS,
};

enum reset_outcome { RESET_DONE, RESET_NOT_PARKED, RESET_DIFFERS };

uint64_t probe_clock_ns(void);
/* Says what failed on stderr and exits: a probe has no way on without the step. */
_Noreturn void probe_fail(const char *what, int err);

/* Starts the interpreter at `python` as a child that arms itself and hands over its
 * userfaultfd; the child is seized with ptrace and its /proc files opened. Fails on error. */
void probe_cell_start(struct cell *c, const char *python);
/* One run: sends the command, returns the child's answer (its count of runs). */
long probe_cell_run(struct cell *c, const char *cmd);
/* Waits until the child sleeps in system call parked_nr (-1: any). */
void probe_cell_settle(struct cell *c, long parked_nr);
int probe_cell_stop(struct cell *c);
int probe_cell_cont(struct cell *c);

/* Stops the child in its recv and takes what each reset puts back and checks. Fails on error. */
void probe_park(struct cell *c, struct parked *p);
/* One reset, each step timed into t[N_STEPS] (ns); a reset_outcome or -errno. The child runs
 * again afterwards in every outcome but an error. */
int probe_reset(struct cell *c, const struct parked *p, bool through_mem, uint64_t *t);
/* Pages found written with the child stopped right after a reset (the rseq page: 1). */
size_t probe_left_written(struct cell *c, const struct parked *p);

#endif
