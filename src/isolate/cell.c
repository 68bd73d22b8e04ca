/* What the cell interface's two implementations share: a cell's descriptors, and its first
 * process reached through its pidfd (kill, wait for its end, its pid for /proc). Not the
 * choice of a mechanism, which is the core's, nor anything of one mechanism alone. */
#define _GNU_SOURCE
#include "cell.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

void sc__cells_init(struct sc_cells *c, const struct sc_cell_ops *ops)
{
	*c = (struct sc_cells){.ops = ops, .level = ops->level, .tmp_fd = -1};
	c->cgroup.dir_fd = -1;
}

void sc__cell_close(struct sc_cell *cell)
{
	for (int i = 0; i < SC_CELL_NFDS; i++)
		if (cell->fds[i] >= 0) {
			close(cell->fds[i]);
			cell->fds[i] = -1;
		}
	for (size_t i = 0; i < cell->n_net; i++)
		close(cell->net[i]);
	cell->n_net = 0;
	if (cell->kept) {
		if (cell->status_fd >= 0)
			close(cell->status_fd);
		for (int i = 0; i < SC_CGROUP_USAGE_FILES; i++)
			if (cell->usage_fds[i] >= 0)
				close(cell->usage_fds[i]);
		cell->kept = false;
	}
}

/* The pid behind a pidfd, in our namespace, from /proc/self/fdinfo. */
int sc__pidfd_pid(int pidfd)
{
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	FILE *f = fopen(path, "re");
	int pid = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Pid: %d", &pid) == 1)
			break;
	if (f)
		fclose(f);
	return pid;
}

void sc__cell_pidfd_kill(const struct sc_cell *cell)
{
	syscall(SYS_pidfd_send_signal, cell->fds[SC_CELL_PIDFD], SIGKILL, NULL, 0);
}

int sc__cell_pidfd_wait_gone(const struct sc_cell *cell, uint64_t deadline_us)
{
	return sc__wait_fd(cell->fds[SC_CELL_PIDFD], POLLIN, deadline_us);
}

int sc__cell_pidfd_pid(const struct sc_cell *cell)
{
	return sc__pidfd_pid(cell->fds[SC_CELL_PIDFD]);
}

int sc__cell_pidfd_freeze(const struct sc_cells *c, const struct sc_cell *root, bool keep_root,
			  unsigned timeout_ms, struct sc_frozen **out)
{
	struct sc_cell_procs procs = {sc__pidfd_pid(root->fds[SC_CELL_PIDFD]), keep_root, -1, 0};
	/* The start time is the root's while the pidfd still names its pid (not reaped since). */
	if (procs.root > 0 && (sc__proc_start_time(procs.root, &procs.root_start) < 0 ||
			       sc__pidfd_pid(root->fds[SC_CELL_PIDFD]) != procs.root))
		procs.root = -1;
	if (c->cgroup.dir_fd >= 0)
		procs.cgroup_fd = sc__cgroup_cell_open(&c->cgroup, root->id);
	int rc = procs.root > 0 ? sc__cell_freeze(&procs, timeout_ms, out) : -ESRCH;
	if (procs.cgroup_fd >= 0)
		close(procs.cgroup_fd);
	return rc;
}
