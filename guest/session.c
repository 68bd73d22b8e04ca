/* Sessions and snapshots inside one cell. The cell's first process becomes the family's
 * anchor: it never runs code, forks the first session worker, kills workers on the host's
 * request, and holds the pid namespace open until the host lets go. A worker keeps its
 * interpreter between runs; a snapshot is a fork of a worker parked between runs, which forks
 * new workers (branches) on request. Everything here but the anchor has run untrusted code, so
 * the host believes none of it beyond that process's own results. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "guest.h"
#include "util/util.h"

static size_t cap;

static _Noreturn void worker_loop(void);

/* Forks a worker with its own output pipes and frame socket and sends the host their ends on
 * reply_fd (a WORKER frame carrying the worker's pid). Returns only in the parent. */
static int fork_worker(int reply_fd)
{
	int out[2], err[2], s[2];
	if (pipe2(out, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(err, O_CLOEXEC) < 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s)) {
		int rc = -errno;
		close(out[0]), close(out[1]);
		return rc;
	}
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	sc_py_before_fork();
	pid_t pid = fork();
	if (pid == 0) {
		sc_py_after_fork_child();
		signal(SIGCHLD, SIG_DFL);
		if (dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0 || dup2(s[1], SC_CELL_RPC_FD) < 0)
			_exit(125);
		syscall(SYS_close_range, SC_CELL_RPC_FD + 1, ~0U, 0);
		worker_loop();
	}
	sc_py_after_fork_parent();
	close(out[1]), close(err[1]), close(s[1]);
	int fds[3] = {s[0], out[0], err[0]};
	int32_t p = pid;
	int rc = pid < 0 ? -errno
			 : sc__frame_write_fds(reply_fd, SC_FRAME_WORKER, &p, sizeof(p), fds, 3);
	close(s[0]), close(out[0]), close(err[0]);
	return rc;
}

/* A snapshot: the state of the worker it was forked from, frozen until asked to branch. */
static _Noreturn void snapshot_loop(int ctl)
{
	/* The worker's pipes and socket are the worker's: holding them would keep them open. */
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
	dup2(devnull, 1);
	dup2(devnull, 2);
	close(devnull);
	close(SC_CELL_RPC_FD);
	signal(SIGCHLD, SIG_IGN); /* branches are reaped by the kernel */
	for (;;) {
		uint8_t type, *payload;
		size_t len;
		int rc = sc__frame_read(ctl, cap, &type, &payload, &len);
		if (rc < 0)
			_exit(0); /* released */
		free(payload);
		if (type != SC_FRAME_FORK || fork_worker(ctl) < 0)
			_exit(124);
	}
}

static void take_snapshot(void)
{
	int c[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c) < 0)
		_exit(124);
	sc_py_before_fork();
	pid_t pid = fork();
	if (pid == 0) {
		sc_py_after_fork_child();
		close(c[0]);
		snapshot_loop(c[1]);
	}
	sc_py_after_fork_parent();
	close(c[1]);
	int32_t p = pid;
	if (pid < 0 || sc__frame_write_fds(SC_CELL_RPC_FD, SC_FRAME_SNAPPED, &p, sizeof(p), c, 1))
		_exit(124);
	close(c[0]);
}

static _Noreturn void worker_loop(void)
{
	for (;;) {
		uint8_t type, *payload;
		size_t len;
		int rc = sc__frame_read(SC_CELL_RPC_FD, cap, &type, &payload, &len);
		if (rc < 0)
			_exit(0); /* the host closed the session */
		if (type == SC_FRAME_RUN)
			sc_cell_run(payload, len, true);
		else if (type == SC_FRAME_SNAPSHOT)
			take_snapshot();
		else
			_exit(124);
		free(payload);
	}
}

_Noreturn void sc_session_anchor(size_t frame_cap)
{
	cap = frame_cap;
	signal(SIGCHLD, SIG_IGN); /* workers and orphans are reaped by the kernel */
	if (fork_worker(SC_CELL_RPC_FD) < 0)
		_exit(125);
	for (;;) {
		uint8_t type, *payload;
		size_t len;
		if (sc__frame_read(SC_CELL_RPC_FD, cap, &type, &payload, &len) < 0)
			_exit(0); /* the family is released: the namespace goes with us */
		int32_t pid = 0;
		if (type == SC_FRAME_KILL && len == sizeof(pid))
			memcpy(&pid, payload, sizeof(pid));
		free(payload);
		if (pid > 1)
			kill(pid, SIGKILL);
	}
}
