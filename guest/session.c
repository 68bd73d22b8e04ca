/* Sessions and snapshots inside one cell. The cell's first process becomes the family's
 * anchor: it never runs code, forks the first session worker, kills workers on the host's
 * request, and holds the pid namespace open until the host lets go. A worker keeps its
 * interpreter between runs; a snapshot is a fork of a worker parked between runs, which forks
 * new workers (branches) on request. Everything here but the anchor has run untrusted code, so
 * the host believes none of it beyond that process's own results. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest.h"
#include "rpc/fds.h"
#include "util/util.h"

static size_t cap;
/* In a snapshot: the working directory its worker had, which each branch takes up again in
 * its own copy of /tmp (empty: keep the inherited one). */
static char snapshot_cwd[PATH_MAX];

static _Noreturn void worker_loop(void);

static void close_fds(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
}

/* Forks a worker onto the given frame socket and output pipes (the child's ends). The worker
 * leads a process group of its own, so a kill reaches what it started. Returns the pid. */
static pid_t start_worker(int rpc, int out, int err)
{
	sc_py_before_fork();
	pid_t pid = fork();
	if (pid == 0) {
		sc_py_after_fork_child();
		signal(SIGCHLD, SIG_DFL);
		setpgid(0, 0);
		if (snapshot_cwd[0])
			(void)!chdir(snapshot_cwd);
		if (dup2(out, 1) < 0 || dup2(err, 2) < 0 || dup2(rpc, SC_CELL_RPC_FD) < 0)
			_exit(125);
		syscall(SYS_close_range, SC_CELL_RPC_FD + 1, ~0U, 0);
		worker_loop();
	}
	if (pid > 0)
		setpgid(pid, pid); /* as the child does: whichever runs first, the group exists */
	sc_py_after_fork_parent();
	return pid;
}

/* The anchor's first worker: the anchor is trusted, so it makes the descriptors and sends the
 * host its ends (a WORKER frame carrying the pid), with the root of the family's /tmp tmpfs,
 * where the host keeps each session's and snapshot's /tmp tree (src/core/session.c). */
static int first_worker(void)
{
	int host[4], cell[3];
	int rc = sc__channels_new(host, cell);
	if (rc < 0)
		return rc;
	int32_t pid = start_worker(cell[0], cell[1], cell[2]);
	close_fds(cell, 3);
	host[3] = SC_CELL_TMP_FD;
	rc = pid < 0 ? -errno
		     : sc__frame_write_fds(SC_CELL_RPC_FD, SC_FRAME_WORKER, &pid, sizeof(pid), host,
					   4);
	close_fds(host, 4);
	return rc;
}

/* A snapshot: the state of the worker it was forked from, frozen until asked to branch. The
 * host sends the new worker's descriptors with each FORK and never accepts any from here. */
static _Noreturn void snapshot_loop(int ctl)
{
	/* The worker's pipes and socket (and anything its code opened) are the worker's:
	 * holding them would keep them open after the worker is gone. */
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	dup2(devnull, 1);
	dup2(devnull, 2);
	dup2(ctl, SC_CELL_RPC_FD);
	syscall(SYS_close_range, SC_CELL_RPC_FD + 1, ~0U, 0);
	signal(SIGCHLD, SIG_IGN); /* branches are reaped by the kernel */
	for (;;) {
		uint8_t type, *payload;
		size_t len, n_fds;
		int fds[3];
		if (sc__frame_read_fds(SC_CELL_RPC_FD, cap, &type, &payload, &len, fds, 3, &n_fds) <
		    0)
			_exit(0); /* released */
		free(payload);
		if (type != SC_FRAME_FORK || n_fds != 3)
			_exit(124);
		int32_t pid = start_worker(fds[0], fds[1], fds[2]);
		close_fds(fds, 3);
		if (pid < 0 ||
		    sc__frame_write(SC_CELL_RPC_FD, SC_FRAME_WORKER, &pid, sizeof(pid)) < 0)
			_exit(124);
	}
}

static void take_snapshot(int ctl)
{
	/* Before the fork, not in the child: the family is stopped once the host has SNAPPED,
	 * and only this worker runs again, so a child that had not yet run would look for its
	 * working directory after the worker's next run changed it. (Only a snapshot reads
	 * snapshot_cwd; the worker keeps its copy unused.) */
	if (!getcwd(snapshot_cwd, sizeof(snapshot_cwd)) || snapshot_cwd[0] != '/')
		snapshot_cwd[0] = 0;
	sc_py_before_fork();
	pid_t pid = fork();
	if (pid == 0) {
		sc_py_after_fork_child();
		setpgid(0,
			0); /* out of the worker's group: killing the worker spares its snapshots */
		snapshot_loop(ctl);
	}
	/* Before SNAPPED: the host may kill the worker's group as soon as it has the reply, and
	 * the child may not have run its own setpgid yet. */
	if (pid > 0)
		setpgid(pid, pid);
	sc_py_after_fork_parent();
	close(ctl);
	int32_t p = pid;
	if (pid < 0 || sc__frame_write(SC_CELL_RPC_FD, SC_FRAME_SNAPPED, &p, sizeof(p)) < 0)
		_exit(124);
}

static _Noreturn void worker_loop(void)
{
	for (;;) {
		uint8_t type, *payload;
		size_t len, n_fds;
		int ctl;
		int rc = sc__frame_read_fds(SC_CELL_RPC_FD, cap, &type, &payload, &len, &ctl, 1,
					    &n_fds);
		if (rc < 0)
			_exit(0); /* the host closed the session */
		if (type == SC_FRAME_TOOLS && n_fds == 0) {
			/* The run's own tools, then its code. */
			uint8_t *code;
			size_t code_len;
			if (sc__frame_read(SC_CELL_RPC_FD, cap, &type, &code, &code_len) < 0 ||
			    type != SC_FRAME_RUN)
				_exit(124);
			sc_cell_run(code, code_len, payload, len, true);
			free(code);
		} else if (type == SC_FRAME_RUN && n_fds == 0)
			sc_cell_run(payload, len, NULL, 0, true);
		else if (type == SC_FRAME_SNAPSHOT && n_fds == 1)
			take_snapshot(ctl);
		else if (type != SC_FRAME_RESULT || n_fds != 0)
			_exit(124); /* (an answer the last run's code did not wait for is skipped)
				     */
		free(payload);
	}
}

/* Between the family's runs every other process in its namespace is stopped, so nothing
 * writes /output or /tmp while the host reads them or while no run is in progress. kill(-1)
 * from a namespace's init reaches every other process of the namespace, whatever its process
 * group or session, and is atomic with fork (a child being forked gets it too); SIGSTOP cannot
 * be caught, blocked or ignored, and once all are stopped none is left to continue another. */
static void anchor_request(uint8_t type, const uint8_t *payload, size_t len)
{
	int32_t pid = 0;
	if (type == SC_FRAME_KILL && len == sizeof(pid)) {
		memcpy(&pid, payload, sizeof(pid));
		if (pid > 1) {
			kill(-pid, SIGKILL); /* the worker's group: what it started goes too */
			kill(pid, SIGKILL);
		}
	} else if (type == SC_FRAME_FREEZE && len == 0) {
		kill(-1, SIGSTOP);
		if (sc__frame_write(SC_CELL_RPC_FD, SC_FRAME_FROZEN, NULL, 0) < 0)
			_exit(0);
	} else if (type == SC_FRAME_THAW && len == sizeof(pid)) {
		memcpy(&pid, payload, sizeof(pid));
		if (pid > 1)
			kill(pid, SIGCONT); /* that one process: the others stay stopped */
	}
}

_Noreturn void sc_session_anchor(size_t frame_cap)
{
	cap = frame_cap;
	signal(SIGCHLD, SIG_IGN); /* workers and orphans are reaped by the kernel */
	if (first_worker() < 0)
		_exit(125);
	for (;;) {
		uint8_t type, *payload;
		size_t len;
		if (sc__frame_read(SC_CELL_RPC_FD, cap, &type, &payload, &len) < 0)
			_exit(0); /* the family is released: the namespace goes with us */
		anchor_request(type, payload, len);
		free(payload);
	}
}
