/* The template's cells: each forked with its descriptors, its /output, its memory cgroup and
 * (with network entries) its network namespace, handed to the host, and reaped, its exit
 * record written to its exit pipe. Not what a cell does once forked (cell.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rpc/fds.h"
#include "template.h"
#include "util/util.h"

/* Makes the descriptors of one cell above fd 9, where the cell's dup2 to 0-3 cannot clobber
 * them. host[] travel to the host; cell[] are the cell's ends; exit_w stays here. */
static int make_fds(int host[SC_CELL_NFDS], int cell[3], int *exit_w)
{
	int h[3], c[3], e[2];
	host[SC_CELL_PIDFD] = -1;
	host[SC_CELL_OUTPUT] = -1;
	int rc = sc__channels_new(h, c);
	if (rc < 0)
		return rc;
	if (pipe2(e, O_CLOEXEC) < 0) {
		rc = -errno;
		close_all(h, 3), close_all(c, 3);
		return rc;
	}
	int raw[8] = {h[0], h[1], h[2], e[0], c[1], c[2], c[0], e[1]};
	int moved[8];
	for (int i = 0; i < 8; i++) {
		moved[i] = fcntl(raw[i], F_DUPFD_CLOEXEC, 10);
		close(raw[i]);
	}
	host[SC_CELL_RPC] = moved[0];
	host[SC_CELL_STDOUT] = moved[1];
	host[SC_CELL_STDERR] = moved[2];
	host[SC_CELL_EXIT] = moved[3];
	cell[0] = moved[4];
	cell[1] = moved[5];
	cell[2] = moved[6];
	*exit_w = moved[7];
	for (int i = 0; i < 8; i++)
		if (moved[i] < 0) {
			close_all(moved, 8);
			return -EMFILE;
		}
	return 0;
}

/* The cell's network socket: the host's end and the cell's, above fd 9. */
static int make_net_socket(int *host, int *cell)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	*host = fcntl(sv[0], F_DUPFD_CLOEXEC, 10);
	*cell = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
	close(sv[0]), close(sv[1]);
	if (*host < 0 || *cell < 0) {
		if (*host >= 0)
			close(*host);
		if (*cell >= 0)
			close(*cell);
		return -EMFILE;
	}
	return 0;
}

/* One cell's descriptors while it is made: host[] travel to the host, cell[] and net are the
 * cell's ends (closed here once it is forked), exit_w stays here while it lives. */
struct cell_fds {
	int host[SC_CTL_MAX_FDS];
	size_t n_host;
	int cell[3];
	int net;
	int exit_w;
};

static int cell_fds_make(struct cell_fds *f)
{
	f->n_host = SC_CELL_NFDS;
	f->net = -1;
	int rc = make_fds(f->host, f->cell, &f->exit_w);
	if (rc < 0 || !T.cfg.network)
		return rc;
	if ((rc = make_net_socket(&f->host[f->n_host], &f->net)) < 0) {
		close_all(f->host, SC_CELL_NFDS), close_all(f->cell, 3), close(f->exit_w);
		return rc;
	}
	f->n_host++;
	return 0;
}

/* What cell id needs from the template, fixed before the fork. */
static struct sc_cell_plan cell_plan(uint32_t id, unsigned slot, const struct cell_fds *f,
				     const char *input_layer)
{
	return (struct sc_cell_plan){.cfg = &T.cfg,
				     .seccomp = &T.seccomp,
				     .set_up = T.set_up + slot,
				     .set_up_map = (void *)T.set_up,
				     .set_up_len = MAX_CELLS,
				     .id = id,
				     .stdout_fd = f->cell[0],
				     .stderr_fd = f->cell[1],
				     .rpc_fd = f->cell[2],
				     .net_fd = f->net,
				     .landlock_fd = T.landlock_fd,
				     .prefault = T.prefault,
				     .n_prefault = T.n_prefault,
				     .cgroup_fd = -1,
				     .input_layer = input_layer};
}

/* The cell's /output, its memory cgroup and its network namespace, then the fork (*pid, left
 * -1 or negative when there is no cell); the template ends back in its own network namespace. */
static int fork_cell(struct cell_fds *f, struct sc_cell_plan *plan, pid_t *pid)
{
	char name[16];
	snprintf(name, sizeof(name), "%u", plan->id);
	int rc = 0;
	if ((f->host[SC_CELL_OUTPUT] = T.cfg.ops->cell_dirs(name)) < 0)
		rc = f->host[SC_CELL_OUTPUT];
	if (rc == 0 && T.cgroup_fd >= 0 &&
	    (plan->cgroup_fd =
		     sc__cgroup_cell_make(T.cgroup_fd, plan->id, T.cfg.limits.memory_bytes)) < 0)
		rc = plan->cgroup_fd;
	struct sc_netns ns = {T.cfg.net_addrs, T.cfg.n_net_addrs, T.cfg.net_ports,
			      T.cfg.n_net_ports, T.cfg.net_v6};
	if (rc == 0 && T.cfg.network)
		rc = sc__netns_enter(&ns, f->host, &f->n_host);
	if (rc == 0 && (*pid = T.cfg.ops->fork_cell(plan)) < 0)
		rc = *pid;
	if (plan->cgroup_fd >= 0)
		close(plan->cgroup_fd);
	if (plan->cgroup_fd >= 0 && *pid <= 0)
		sc__cgroup_cell_drop(T.cgroup_fd,
				     plan->id); /* no cell will be removed to take it */
	if (T.cfg.network && setns(T.self_netns, CLONE_NEWNET) < 0) {
		/* Every later cell would share this one's namespace; end the sandbox loudly. */
		if (*pid > 0)
			kill(*pid, SIGKILL);
		exit(3);
	}
	return rc;
}

/* The cell's descriptors to the host, with its pidfd: CELL, or RUN_CELL for a run's files. */
static int send_cell(struct cell_fds *f, pid_t pid, uint32_t id, const char *input_layer)
{
	f->host[SC_CELL_PIDFD] = (int)syscall(SYS_pidfd_open, pid, 0);
	if (f->host[SC_CELL_PIDFD] < 0)
		return -errno;
	struct sc_ctl_msg m = {.type = input_layer ? SC_CTL_RUN_CELL : SC_CTL_CELL, .cell_id = id};
	return sc__ctl_send(CTL, &m, f->host, f->n_host);
}

int sc_template_park_cell(const char *input_layer)
{
	if (T.n_cells == MAX_CELLS)
		return -EAGAIN;
	struct cell_fds f;
	int rc = cell_fds_make(&f);
	if (rc < 0)
		return rc;
	uint32_t id = T.next_id++;
	unsigned slot = T.free_slots[T.n_free_slots - 1]; /* n_cells < MAX_CELLS: one is free */
	T.set_up[slot] = 0;
	struct sc_cell_plan plan = cell_plan(id, slot, &f, input_layer);
	pid_t pid = -1;
	rc = fork_cell(&f, &plan, &pid);
	close_all(f.cell, 3);
	if (f.net >= 0)
		close(f.net);
	if (rc == 0)
		rc = send_cell(&f, pid, id, input_layer);
	if (pid > 0) {
		T.cells[T.n_cells++] = (struct live_cell){id, pid, f.exit_w, slot, NULL};
		T.n_free_slots--;
		if (sc_cell_reusable(&T.cfg, id, input_layer))
			sc_reuse_seize(&T.cells[T.n_cells - 1]);
	} else {
		close(f.exit_w);
		if (f.host[SC_CELL_OUTPUT] >= 0)
			T.cfg.ops->cell_forget(id); /* no cell will be reaped to do it */
	}
	if (rc < 0 && pid > 0)
		kill(pid, SIGKILL);
	close_all(f.host, f.n_host);
	return rc;
}

/* Cell i is dead: its exit record (rusage ru, wait status) to its exit pipe, its slot and
 * cgroup released, its directories gone, and it off the list. */
static void cell_ended(size_t i, int status, const struct rusage *ru)
{
	struct sc_exit_record rec = {
		.wait_status = status,
		.cpu_us = (uint64_t)ru->ru_utime.tv_sec * 1000000 + ru->ru_utime.tv_usec +
			  (uint64_t)ru->ru_stime.tv_sec * 1000000 + ru->ru_stime.tv_usec,
		.maxrss_kib = (uint64_t)ru->ru_maxrss};
	if (!T.set_up[T.cells[i].slot])
		rec.flags |= SC_EXIT_NOT_SET_UP;
	/* The cgroup goes here, off the host's path; a host that finds it gone waits for this
	 * record, which carries its figures. */
	if (T.cgroup_fd >= 0 &&
	    sc__cgroup_cell_release(T.cgroup_fd, T.cells[i].id, &rec.charged_peak_bytes,
				    &rec.oom_kills) == 0)
		rec.flags |= SC_EXIT_CGROUP;
	T.free_slots[T.n_free_slots++] = T.cells[i].slot;
	sc__write_all(T.cells[i].exit_fd, &rec, sizeof(rec));
	close(T.cells[i].exit_fd);
	T.cfg.ops->cell_forget(T.cells[i].id);
	sc_reuse_free(&T.cells[i]);
	T.cells[i] = T.cells[--T.n_cells];
}

void sc_template_reaped(pid_t pid, int status, const struct rusage *ru)
{
	T.cfg.ops->reaped();
	for (size_t i = 0; i < T.n_cells; i++)
		if (T.cells[i].pid == pid) {
			cell_ended(i, status, ru);
			break;
		}
}

void sc_template_reap(void)
{
	struct signalfd_siginfo si;
	while (read(T.sig_fd, &si, sizeof(si)) > 0)
		if ((int)si.ssi_signo == SC_REUSE_CPU_SIGNAL && si.ssi_code == SI_TIMER)
			sc_reuse_cpu_expired((uint32_t)si.ssi_int);
	for (;;) {
		int status;
		struct rusage ru;
		pid_t pid = wait4(-1, &status, WNOHANG, &ru);
		if (pid <= 0)
			return;
		if (WIFSTOPPED(status)) { /* a cell seized for reuse (reset.c), at a stop */
			for (size_t i = 0; i < T.n_cells; i++)
				if (T.cells[i].pid == pid)
					sc_reuse_stopped(&T.cells[i], status);
			continue;
		}
		/* First, before the dead cell's /tmp is removed (up to 2 s): what it left must
		 * not write there meanwhile, nor outlive a host that stops waiting for us. */
		T.cfg.ops->reaped();
		for (size_t i = 0; i < T.n_cells; i++)
			if (T.cells[i].pid == pid) {
				cell_ended(i, status, &ru);
				break;
			}
	}
}
