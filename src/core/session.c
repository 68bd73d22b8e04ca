/* Sessions and snapshots, host side (the guest side is guest/session.c). A family is one
 * parked cell whose first process became an anchor; sessions are worker processes in it, and
 * snapshots are parked forks of workers. Only the anchor is trusted (it never ran code):
 * kills go through it, and the family's end (closing the anchor's socket, or killing it
 * through its pidfd) takes every process with it. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "core.h"
#include "rpc/frame.h"
#include "util/util.h"

#define REPLY_TIMEOUT_MS 10000

struct snapcell_session {
	struct sc_family *family;
	struct sc_cell worker; /* rpc, stdout, stderr; no pidfd or exit pipe */
	int32_t pid;	       /* in the family's namespace; from the anchor or a snapshot */
	bool alive;
};

struct snapcell_snapshot {
	struct sc_family *family;
	int ctl; /* the snapshot's socket */
};

static void no_worker(struct sc_cell *c)
{
	for (int i = 0; i < SC_CELL_NFDS; i++)
		c->fds[i] = -1;
}

void sc__family_kill(struct sc_family *f, int32_t worker_pid)
{
	pthread_mutex_lock(&f->lock);
	if (f->anchor.fds[SC_CELL_RPC] >= 0)
		sc__frame_write(f->anchor.fds[SC_CELL_RPC], SC_FRAME_KILL, &worker_pid,
				sizeof(worker_pid));
	pthread_mutex_unlock(&f->lock);
}

void sc__family_end(struct sc_family *f)
{
	syscall(SYS_pidfd_send_signal, f->anchor.fds[SC_CELL_PIDFD], SIGKILL, NULL, 0);
}

static void family_put(struct sc_family *f)
{
	pthread_mutex_lock(&f->lock);
	bool last = --f->refs == 0;
	pthread_mutex_unlock(&f->lock);
	if (!last)
		return;
	struct snapcell_sandbox *sb = f->sb;
	if (sb) {
		pthread_mutex_lock(&sb->lock);
		for (struct sc_family **p = &sb->families; *p; p = &(*p)->next)
			if (*p == f) {
				*p = f->next;
				break;
			}
		pthread_mutex_unlock(&sb->lock);
		sc__sandbox_retire_cell(sb, &f->anchor);
	}
	sc__cell_close(&f->anchor);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

void sc__sessions_orphan(struct snapcell_sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	for (struct sc_family *f = sb->families; f; f = f->next) {
		pthread_mutex_lock(&f->lock);
		sc__family_end(f);
		f->sb = NULL;
		pthread_mutex_unlock(&f->lock);
	}
	sb->families = NULL;
	pthread_mutex_unlock(&sb->lock);
}

/* Reads the reply to a request, bounded in time: the replying process may be hostile. */
static int read_reply(int fd, uint8_t want, int32_t *pid, int *fds, size_t n_fds)
{
	struct pollfd pf = {fd, POLLIN, 0};
	if (poll(&pf, 1, REPLY_TIMEOUT_MS) <= 0)
		return -ETIMEDOUT;
	struct timeval tv = {REPLY_TIMEOUT_MS / 1000, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	uint8_t type, *payload = NULL;
	size_t len, got = 0;
	int rc = sc__frame_read_fds(fd, 64, &type, &payload, &len, fds, n_fds, &got);
	if (rc == 0 && (type != want || len != sizeof(*pid) || got != n_fds))
		rc = -EPROTO;
	if (rc == 0)
		memcpy(pid, payload, sizeof(*pid));
	else
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
	free(payload);
	return rc;
}

static int receive_worker(int fd, struct snapcell_session *s)
{
	int fds[3];
	int rc = read_reply(fd, SC_FRAME_WORKER, &s->pid, fds, 3);
	if (rc < 0)
		return rc;
	no_worker(&s->worker);
	s->worker.fds[SC_CELL_RPC] = fds[0];
	s->worker.fds[SC_CELL_STDOUT] = fds[1];
	s->worker.fds[SC_CELL_STDERR] = fds[2];
	s->alive = true;
	return 0;
}

static int orphaned(struct sc_family *f, struct snapcell_error *err)
{
	return f->sb ? 0 : sc__err(err, SNAPCELL_E_TEMPLATE, "the sandbox was freed");
}

int snapcell_session_new(struct snapcell_sandbox *sb, struct snapcell_session **out,
			 struct snapcell_error *err)
{
	if (!sb || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "session_new: NULL argument");
	struct sc_family *f = calloc(1, sizeof(*f));
	struct snapcell_session *s = calloc(1, sizeof(*s));
	if (!f || !s) {
		free(f), free(s);
		return sc__err(err, -ENOMEM, "session");
	}
	int rc = sc__sandbox_take_cell(sb, &f->anchor, err);
	if (rc < 0) {
		free(f), free(s);
		return rc;
	}
	pthread_mutex_init(&f->lock, NULL);
	f->sb = sb;
	f->refs = 1;
	s->family = f;
	rc = sc__frame_write(f->anchor.fds[SC_CELL_RPC], SC_FRAME_SESSION, NULL, 0);
	if (rc == 0)
		rc = receive_worker(f->anchor.fds[SC_CELL_RPC], s);
	if (rc < 0) {
		sc__err(err, rc, "start session");
		f->sb = NULL; /* not listed yet */
		sc__sandbox_retire_cell(sb, &f->anchor);
		family_put(f);
		free(s);
		return rc;
	}
	pthread_mutex_lock(&sb->lock);
	f->next = sb->families;
	sb->families = f;
	pthread_mutex_unlock(&sb->lock);
	*out = s;
	return 0;
}

int snapcell_session_run(struct snapcell_session *s, const char *code, size_t code_len,
			 struct snapcell_result **out, struct snapcell_error *err)
{
	if (!s || !code || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "session_run: NULL argument");
	int rc = orphaned(s->family, err);
	if (rc < 0)
		return rc;
	if (!s->alive)
		return sc__err(err, SNAPCELL_E_TEMPLATE,
			       "the session's process ended with an earlier run; restore a "
			       "snapshot to continue");
	if (code_len == SIZE_MAX)
		code_len = strlen(code);
	rc = sc__run_code(s->family->sb, &s->worker, s->family, s->pid, code, code_len, out,
			  &s->alive, err);
	if (rc == 0)
		sc__collect_output(s->family->sb, &s->family->anchor, true, *out);
	return rc;
}

int snapcell_session_snapshot(struct snapcell_session *s, struct snapcell_snapshot **out,
			      struct snapcell_error *err)
{
	if (!s || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "snapshot: NULL argument");
	int rc = orphaned(s->family, err);
	if (rc < 0)
		return rc;
	if (!s->alive)
		return sc__err(err, SNAPCELL_E_TEMPLATE, "snapshot: the session's process ended");
	struct snapcell_snapshot *snap = calloc(1, sizeof(*snap));
	if (!snap)
		return sc__err(err, -ENOMEM, "snapshot");
	int32_t pid;
	rc = sc__frame_write(s->worker.fds[SC_CELL_RPC], SC_FRAME_SNAPSHOT, NULL, 0);
	if (rc == 0)
		rc = read_reply(s->worker.fds[SC_CELL_RPC], SC_FRAME_SNAPPED, &pid, &snap->ctl, 1);
	if (rc < 0) {
		free(snap);
		return sc__err(err, rc, "snapshot");
	}
	snap->family = s->family;
	pthread_mutex_lock(&s->family->lock);
	s->family->refs++;
	pthread_mutex_unlock(&s->family->lock);
	*out = snap;
	return 0;
}

/* A new worker forked from the snapshot, into s (whose old worker, if any, is ended). */
static int branch(const struct snapcell_snapshot *snap, struct snapcell_session *s)
{
	struct snapcell_session fresh = {.family = snap->family};
	int rc = sc__frame_write(snap->ctl, SC_FRAME_FORK, NULL, 0);
	if (rc == 0)
		rc = receive_worker(snap->ctl, &fresh);
	if (rc < 0)
		return rc;
	if (s->alive)
		sc__family_kill(s->family, s->pid);
	sc__cell_close(&s->worker);
	s->worker = fresh.worker;
	s->pid = fresh.pid;
	s->alive = true;
	return 0;
}

int snapcell_session_restore(struct snapcell_session *s, const struct snapcell_snapshot *snap,
			     struct snapcell_error *err)
{
	if (!s || !snap)
		return sc__err(err, SNAPCELL_E_INVAL, "restore: NULL argument");
	if (s->family != snap->family)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "restore: the snapshot belongs to another session family");
	int rc = orphaned(s->family, err);
	if (rc == 0 && (rc = branch(snap, s)) < 0)
		sc__err(err, rc, "restore");
	return rc;
}

int snapcell_snapshot_new_session(const struct snapcell_snapshot *snap,
				  struct snapcell_session **out, struct snapcell_error *err)
{
	if (!snap || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "snapshot_new_session: NULL argument");
	int rc = orphaned(snap->family, err);
	if (rc < 0)
		return rc;
	struct snapcell_session *s = calloc(1, sizeof(*s));
	if (!s)
		return sc__err(err, -ENOMEM, "session");
	s->family = snap->family;
	no_worker(&s->worker);
	if ((rc = branch(snap, s)) < 0) {
		free(s);
		return sc__err(err, rc, "start session from snapshot");
	}
	pthread_mutex_lock(&s->family->lock);
	s->family->refs++;
	pthread_mutex_unlock(&s->family->lock);
	*out = s;
	return 0;
}

void snapcell_session_free(struct snapcell_session *s)
{
	if (!s)
		return;
	if (s->alive && s->family->sb)
		sc__family_kill(s->family, s->pid);
	sc__cell_close(&s->worker);
	family_put(s->family);
	free(s);
}

void snapcell_snapshot_free(struct snapcell_snapshot *snap)
{
	if (!snap)
		return;
	close(snap->ctl); /* the snapshot process exits on EOF */
	family_put(snap->family);
	free(snap);
}
