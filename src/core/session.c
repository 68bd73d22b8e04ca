/* Sessions and snapshots, host side (the guest side is guest/session.c). A family is one
 * parked cell whose first process became an anchor; sessions are worker processes in it, and
 * snapshots are parked forks of workers. Only the anchor is trusted (it never ran code):
 * kills go through it, and the family's end (closing the anchor's socket, or killing it
 * through its pidfd) takes every process with it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "core.h"
#include "net/gate.h"
#include "rpc/fds.h"
#include "rpc/frame.h"
#include "stage/stage.h"
#include "util/util.h"

#define REPLY_TIMEOUT_MS 10000
/* Time a session's /output may take to empty between runs. */
#define EMPTY_OUTPUT_MS 2000

/* One parked cell turned into a session family: its anchor (pid 1, never runs code) and the
 * count of sessions and snapshots living in its namespace. */
struct sc_family {
	struct snapcell_sandbox *sb; /* NULL once the sandbox is freed; families_lock */
	struct sc_cell anchor;
	pthread_mutex_t lock; /* guards writes to the anchor socket and refs */
	/* The family's processes share one network namespace and network socket: runs of its
	 * sessions that can reach the network take turns, so each run's events are its own. */
	pthread_mutex_t net_lock;
	unsigned refs;
	struct sc_family *next; /* in the sandbox's list (families_lock) */
};

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
	c->n_net = 0;
}

/* Asks the anchor to kill one worker (its process group). */
static void family_kill(struct sc_family *f, int32_t worker_pid)
{
	pthread_mutex_lock(&f->lock);
	if (f->anchor.fds[SC_CELL_RPC] >= 0)
		sc__frame_write(f->anchor.fds[SC_CELL_RPC], SC_FRAME_KILL, &worker_pid,
				sizeof(worker_pid));
	pthread_mutex_unlock(&f->lock);
}

/* Ends the family: the anchor's death takes everything in its namespace. */
static void family_end(struct sc_family *f)
{
	syscall(SYS_pidfd_send_signal, f->anchor.fds[SC_CELL_PIDFD], SIGKILL, NULL, 0);
}

/* Guards every family's sb and every sandbox's families list. A family's last put and the
 * sandbox's free may run on two threads at once: the put must see either the sandbox alive
 * for as long as it uses it, or NULL, and the free must never walk a family that was freed.
 * Held across the put's use of the sandbox, which sc__sessions_orphan (run before the
 * sandbox's memory goes) waits for. Order: families_lock, then a sandbox's or family's lock. */
static pthread_mutex_t families_lock = PTHREAD_MUTEX_INITIALIZER;

/* The family's sandbox, or NULL once it was freed; only for the NULL check, since the
 * sandbox may go right after (a caller that races a run against the sandbox's free broke
 * the thread rules; freeing both at once is allowed). */
static bool family_orphaned(struct sc_family *f)
{
	pthread_mutex_lock(&families_lock);
	bool orphaned = f->sb == NULL;
	pthread_mutex_unlock(&families_lock);
	return orphaned;
}

static void family_put(struct sc_family *f)
{
	pthread_mutex_lock(&f->lock);
	bool last = --f->refs == 0;
	pthread_mutex_unlock(&f->lock);
	if (!last)
		return;
	pthread_mutex_lock(&families_lock);
	struct snapcell_sandbox *sb = f->sb;
	if (sb) {
		for (struct sc_family **p = &sb->families; *p; p = &(*p)->next)
			if (*p == f) {
				*p = f->next;
				break;
			}
		sc__sandbox_retire_cell(sb, &f->anchor);
	}
	pthread_mutex_unlock(&families_lock);
	sc__cell_close(&f->anchor);
	pthread_mutex_destroy(&f->lock);
	pthread_mutex_destroy(&f->net_lock);
	free(f);
}

void sc__sessions_orphan(struct snapcell_sandbox *sb)
{
	pthread_mutex_lock(&families_lock);
	for (struct sc_family *f = sb->families; f; f = f->next) {
		family_end(f);
		f->sb = NULL;
	}
	sb->families = NULL;
	pthread_mutex_unlock(&families_lock);
}

/* Sends a request (an empty frame, with fds) to a worker or a snapshot, which may be hostile:
 * without blocking, within one deadline. */
static int send_request(int fd, uint8_t type, const int *fds, size_t n_fds)
{
	uint8_t hdr[SC_FRAME_HEADER_LEN];
	sc__frame_header(hdr, type, 0);
	union sc_fd_cmsg u;
	struct iovec iov = {hdr, sizeof(hdr)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n_fds)
		sc__msg_attach_fds(&mh, &u, fds, n_fds);
	uint64_t deadline = sc__deadline_ms(REPLY_TIMEOUT_MS);
	for (;;) {
		ssize_t n = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n == (ssize_t)sizeof(hdr))
			return 0;
		if (n >= 0)
			return -EPROTO; /* a 5-byte write is all or nothing on a unix stream */
		int rc = errno == EAGAIN || errno == EINTR ? sc__wait_fd(fd, POLLOUT, deadline)
							   : -errno;
		if (rc < 0)
			return rc;
	}
}

/* Reads a reply carrying a pid, within one deadline, accepting no descriptors (recv without a
 * control buffer makes the kernel drop any that were sent). */
static int read_pid_reply(int fd, uint8_t want, int32_t *pid)
{
	uint8_t buf[SC_FRAME_HEADER_LEN + sizeof(*pid)];
	size_t got = 0;
	uint64_t deadline = sc__deadline_ms(REPLY_TIMEOUT_MS);
	while (got < sizeof(buf)) {
		ssize_t n = recv(fd, buf + got, sizeof(buf) - got, MSG_DONTWAIT);
		if (n == 0)
			return -EPIPE;
		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		int rc = errno == EAGAIN || errno == EINTR ? sc__wait_fd(fd, POLLIN, deadline)
							   : -errno;
		if (rc < 0)
			return rc;
	}
	uint8_t want_hdr[SC_FRAME_HEADER_LEN];
	sc__frame_header(want_hdr, want, sizeof(*pid));
	if (memcmp(buf, want_hdr, sizeof(want_hdr)) != 0)
		return -EPROTO;
	memcpy(pid, buf + SC_FRAME_HEADER_LEN, sizeof(*pid));
	return 0;
}

/* The anchor's reply to SESSION: the anchor is trusted (it never ran code), so its
 * descriptors are accepted. */
static int receive_first_worker(int fd, struct snapcell_session *s)
{
	struct timeval tv = {REPLY_TIMEOUT_MS / 1000, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int fds[3];
	uint8_t type, *payload = NULL;
	size_t len, got = 0;
	int rc = sc__frame_read_fds(fd, 64, &type, &payload, &len, fds, 3, &got);
	if (rc == 0 && (type != SC_FRAME_WORKER || len != sizeof(s->pid) || got != 3))
		rc = -EPROTO;
	if (rc == 0)
		memcpy(&s->pid, payload, sizeof(s->pid));
	else
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
	free(payload);
	if (rc < 0)
		return rc;
	no_worker(&s->worker);
	s->worker.fds[SC_CELL_RPC] = fds[0];
	s->worker.fds[SC_CELL_STDOUT] = fds[1];
	s->worker.fds[SC_CELL_STDERR] = fds[2];
	s->alive = true;
	return 0;
}

/* Ends the session's worker (the session can be restored from a snapshot). */
static void end_worker(struct snapcell_session *s)
{
	if (s->alive)
		family_kill(s->family, s->pid);
	s->alive = false;
	sc__cell_close(&s->worker);
}

static int orphaned(struct sc_family *f, struct snapcell_error *err)
{
	return family_orphaned(f) ? sc__err(err, SNAPCELL_E_TEMPLATE, "the sandbox was freed") : 0;
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
	pthread_mutex_init(&f->net_lock, NULL);
	f->sb = sb;
	f->refs = 1;
	s->family = f;
	rc = sc__frame_write(f->anchor.fds[SC_CELL_RPC], SC_FRAME_SESSION, NULL, 0);
	if (rc == 0)
		rc = receive_first_worker(f->anchor.fds[SC_CELL_RPC], s);
	if (rc < 0) {
		sc__err(err, rc, "start session");
		f->sb = NULL; /* not listed yet */
		sc__sandbox_retire_cell(sb, &f->anchor);
		family_put(f);
		free(s);
		return rc;
	}
	pthread_mutex_lock(&families_lock);
	f->next = sb->families;
	sb->families = f;
	pthread_mutex_unlock(&families_lock);
	*out = s;
	return 0;
}

/* A worker is killed through its family's anchor, the only process there the host trusts. */
static void worker_kill(const struct sc_run_target *t)
{
	const struct snapcell_session *s = t->ctx;
	family_kill(s->family, s->pid);
}

/* The family shares one /output (the anchor's), collected while the worker lives (every open
 * is checked, so a racing writer changes only what is collected) and emptied for the next
 * run; past the deadline the session ends rather than the caller waiting on its code. */
static int worker_collect(const struct sc_run_target *t, struct snapcell_sandbox *sb,
			  struct snapcell_result *res)
{
	const struct snapcell_session *s = t->ctx;
	int out_fd = s->family->anchor.fds[SC_CELL_OUTPUT];
	if (!sc__output_pending(out_fd))
		return 0;
	sc__output_collect(sb, out_fd, res);
	return sc__empty_dir(out_fd, sc__deadline_ms(EMPTY_OUTPUT_MS));
}

int snapcell_session_run(struct snapcell_session *s, const char *code, size_t code_len,
			 const struct snapcell_run_options *opts, struct snapcell_result **out,
			 struct snapcell_error *err)
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
	struct sc_run_request req;
	rc = sc__run_prepare(s->family->sb, code, code_len, opts, &req, out, err);
	if (rc != 0)
		return rc < 0 ? rc : 0; /* cancelled before it started: the worker is untouched */
	struct sc_run_target t = {&s->worker, false, worker_kill, worker_collect, s};
	struct sc_family *f = s->family;
	struct sc_gate_cell *gate = NULL;
	if (f->anchor.n_net) {
		pthread_mutex_lock(&f->net_lock);
		rc = sc__gate_cell_start(
			f->sb->gate, f->anchor.net, f->anchor.n_net,
			sc__deadline_ms(f->sb->cfg->limits[SNAPCELL_LIMIT_WALL_MS]), &gate, err);
		if (rc < 0) {
			pthread_mutex_unlock(&f->net_lock);
			return rc;
		}
	}
	rc = sc__run_code(f->sb, &t, &req, out, &s->alive, err);
	if (gate) {
		sc__gate_cell_stop(gate, rc == 0 ? *out : NULL);
		pthread_mutex_unlock(&f->net_lock);
	}
	if (rc == 0 && t.collect(&t, f->sb, *out) < 0)
		end_worker(s); /* its /output could not be emptied: the next run would see it */
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
	/* We make the snapshot's socket and hand the worker its end: nothing from the worker
	 * is ever used as a descriptor here. */
	int32_t pid;
	int c[2];
	rc = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c) < 0 ? -errno : 0;
	if (rc == 0) {
		rc = send_request(s->worker.fds[SC_CELL_RPC], SC_FRAME_SNAPSHOT, &c[1], 1);
		close(c[1]);
		snap->ctl = c[0];
	}
	if (rc == 0)
		rc = read_pid_reply(s->worker.fds[SC_CELL_RPC], SC_FRAME_SNAPPED, &pid);
	if (rc < 0) {
		if (snap->ctl > 0)
			close(snap->ctl);
		free(snap);
		end_worker(s); /* a late reply would desynchronise its stream */
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
	int mine[3] = {-1, -1, -1}, theirs[3] = {-1, -1, -1};
	int32_t pid;
	int rc = sc__channels_new(mine, theirs);
	if (rc < 0)
		return rc;
	rc = send_request(snap->ctl, SC_FRAME_FORK, theirs, 3);
	for (int i = 0; i < 3; i++)
		close(theirs[i]);
	if (rc == 0)
		rc = read_pid_reply(snap->ctl, SC_FRAME_WORKER, &pid);
	if (rc < 0) {
		for (int i = 0; i < 3; i++)
			close(mine[i]);
		return rc;
	}
	if (s->alive)
		family_kill(s->family, s->pid);
	sc__cell_close(&s->worker);
	s->worker.fds[SC_CELL_RPC] = mine[0];
	s->worker.fds[SC_CELL_STDOUT] = mine[1];
	s->worker.fds[SC_CELL_STDERR] = mine[2];
	s->pid = pid;
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

bool snapcell_session_alive(const struct snapcell_session *s)
{
	return s && s->alive && !family_orphaned(s->family);
}

void snapcell_session_free(struct snapcell_session *s)
{
	if (!s)
		return;
	if (s->alive && !family_orphaned(s->family))
		family_kill(s->family, s->pid);
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
