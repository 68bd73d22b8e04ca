/* The control channel between the host library and its template: fixed-size records on a
 * SOCK_SEQPACKET socket, some carrying file descriptors. The setup message is the only
 * variable-size one (JSON, capped; its codec is setup.h). Not used by cells, which never see this
 * socket. */
#ifndef SC_RPC_CONTROL_H
#define SC_RPC_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#define SC_CONTROL_FD 3 /* where the helper finds the control socket */
/* The directories the host passes (the configured Python paths, opened with the caller's
 * uid) are the helper's fds SC_PASS_FD_FIRST, ...; at most SC_PASS_FD_MAX of them. */
#define SC_PASS_FD_FIRST 4
#define SC_PASS_FD_MAX	 64
#define SC_SETUP_MAX	 (1u << 20) /* cap on the setup message */
/* At level cgroups: the sandbox cgroup's tasks file, which the template writes itself into
 * first thing in its setup, then closes. */
#define SC_CGROUP_FD (SC_PASS_FD_FIRST + SC_PASS_FD_MAX)

/* The version of everything the library and its helper exchange: the greeting, the setup
 * message's fields, the control records, and the frames and payloads between host and cells.
 * Any change to one of them bumps it. Overridable only so a test can build a mismatched
 * helper. */
#ifndef SC_PROTOCOL_VERSION
#define SC_PROTOCOL_VERSION 11
#endif

/* The directory of a cell's /tmp tmpfs that is bound at /tmp: a session family's host side
 * keeps its other sessions' and snapshots' /tmp trees beside it (src/core/session.c). */
#define SC_TMP_LIVE "live"

/* The helper's first record, sent before it reads anything. Its layout never changes, so a
 * helper of any version can be told apart from one that is not a snapcell-cell at all. */
#define SC_HELLO_MAGIC "snapcell"
struct sc_hello {
	char magic[8]; /* SC_HELLO_MAGIC, no NUL */
	uint32_t protocol;
	uint32_t reserved;
};

enum sc_ctl_type {
	SC_CTL_READY = 1, /* template -> host: setup finished (status 0) or failed */
	SC_CTL_CELL,	  /* template -> host: a parked cell; carries SC_CELL_NFDS fds */
	SC_CTL_TAKE,	  /* host -> template: a cell was taken, park another */
	/* host -> template: the pages cells should fault in while parked; carries one fd, a
	 * memfd holding struct sc_prefault_range[] (core/prefault.c, guest/cell.c) */
	SC_CTL_PREFAULT,
	/* host -> template: fork a cell for one run whose /input is an overlay of
	 * SC_OUT_BASE/in-<cell_id> (the run's files, written by the host) over the workspace;
	 * no fds. Never a parked cell: the template answers with RUN_CELL. */
	SC_CTL_FILES,
	/* template -> host: that cell (status 0, SC_CELL_NFDS fds and the network ones, as CELL)
	 * or why there is none (status -errno, no fds) */
	SC_CTL_RUN_CELL,
	/* host -> template: reset cell_id in place (guest/reset.c), a fresh cell whose run ended
	 * at DONE with its output collected; no fds. template -> host: the answer, status 0 (it is
	 * parked again, cpu_us its CPU time so far) or -errno with the reason in message (the
	 * template killed it: its exit record comes as for any cell). */
	SC_CTL_RESET,
};

/* Pages of the template's address space that runs were seen to touch: each parked cell faults
 * them in (writable ones copied, read-only ones mapped) before it waits for code, so a run
 * does not pay those faults. Hints only: a range that is not mapped in the cell is skipped. */
struct sc_prefault_range {
	uint64_t start; /* page-aligned address */
	uint32_t pages;
	uint32_t write; /* 1: copy (MADV_POPULATE_WRITE); 0: map (MADV_POPULATE_READ) */
};
#define SC_PREFAULT_MAX_RANGES 4096

/* The descriptors of one parked cell, in the order they travel. */
enum sc_cell_fd {
	SC_CELL_PIDFD,	/* pidfd of the cell's first process (pid 1 of its namespace) */
	SC_CELL_RPC,	/* host end of the cell's frame socket */
	SC_CELL_STDOUT, /* read ends of the cell's output pipes */
	SC_CELL_STDERR,
	SC_CELL_EXIT,	/* read end of a pipe that carries struct sc_exit_record, then EOF */
	SC_CELL_OUTPUT, /* the cell's /output: its own size-capped tmpfs, read by the host */
	SC_CELL_NFDS
};

/* A cell of a sandbox with network entries has more, after those: the host end of its
 * network socket (SC_FRAME_NET questions, guest/bridge.c), then one listening socket per
 * port and family, made in the cell's own network namespace (so every connection the cell
 * makes lands at the host's egress gate). */
#define SC_CELL_NET_MAX 65 /* the socket and up to 64 listeners */
#define SC_CTL_MAX_FDS	(SC_CELL_NFDS + SC_CELL_NET_MAX)

struct sc_ctl_msg {
	uint32_t type;
	int32_t status;	  /* READY: 0 or -errno / SNAPCELL_E_* */
	uint32_t cell_id; /* CELL, RUN_CELL; FILES: the run's files directory's id */
	int32_t level;	  /* READY: enum snapcell_isolation reached */
	char message[200];
	uint64_t cpu_us; /* RESET's answer: the cell's CPU time so far */
};

/* Written by the template when it reaps a cell. flags are the template's own knowledge,
 * never the cell's claim. */
enum sc_exit_flag {
	/* The cell never finished its setup (restrict_self up to seccomp): the code cannot have
	 * run. The only source of a setup-failure status. */
	SC_EXIT_NOT_SET_UP = 1u << 0,
	/* charged_peak_bytes and oom_kills hold the cell's memory cgroup's figures. */
	SC_EXIT_CGROUP = 1u << 1,
};

struct sc_exit_record {
	int32_t wait_status;
	uint32_t flags; /* enum sc_exit_flag */
	uint64_t cpu_us;
	uint64_t maxrss_kib;
	/* With a memory cgroup per cell (SC_EXIT_CGROUP): its peak and out-of-memory kills, read
	 * by the template just before it removes the cgroup. */
	uint64_t charged_peak_bytes;
	uint64_t oom_kills;
};

/* Send and receive one record with up to SC_CTL_MAX_FDS descriptors. Received fds are
 * O_CLOEXEC; *n_fds says how many arrived. -EPIPE on end of stream, -EPROTO on a short or
 * oversized record; -EMFILE for a whole record whose descriptors the kernel dropped (the
 * receiver had no room for them: the record is good, what it carried is lost). */
int sc__ctl_send(int sock, const struct sc_ctl_msg *msg, const int *fds, size_t n_fds);
int sc__ctl_recv(int sock, struct sc_ctl_msg *msg, int *fds, size_t *n_fds);

/* The greeting: sent by the helper with SC_PROTOCOL_VERSION; received by the host, which
 * takes no descriptors with it. -EPIPE when the peer closed, -EPROTO for anything but a
 * greeting (wrong size or magic); 0 with *protocol set, whatever its value. */
int sc__hello_send(int sock);
int sc__hello_recv(int sock, uint32_t *protocol);

#endif
