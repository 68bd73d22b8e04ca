/* Sessions and snapshots, host side (the guest side is guest/session.c). A family is one
 * parked cell whose first process became an anchor; sessions are worker processes in it, and
 * snapshots are parked forks of workers. Only the anchor is trusted (it never ran code):
 * kills go through it, and the family's end (closing the anchor's socket, or killing it
 * through its mechanism) takes every process with it. Its /tmp trees are session_tmp.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "session.h"
#include "net/gate.h"
#include "rpc/fds.h"
#include "rpc/frame.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#define REPLY_TIMEOUT_MS 10000
/* Time a session's /output may take to empty between runs. */
#define EMPTY_OUTPUT_MS 2000

struct snapcell_session {
	struct sc_family *family;
	struct sc_cell worker; /* rpc, stdout, stderr; no pidfd or exit pipe */
	int32_t pid;	       /* in the family's namespace; from the anchor or a snapshot */
	uint32_t tmp_id;       /* its /tmp tree */
	bool alive;
	/* A run is in progress or paused for a decision: another run, a snapshot or a restore of
	 * this session is refused (-EBUSY) rather than waiting on itself. */
	_Atomic bool busy;
	struct sc_gate_cell *gate; /* the run's, while busy */
};

struct snapcell_snapshot {
	struct sc_family *family;
	int ctl;	 /* the snapshot's socket */
	int32_t pid;	 /* in the family's namespace, as its worker said */
	uint32_t tmp_id; /* the copy of its session's /tmp */
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

/* Ends the family: the anchor's death (its mechanism's kill) takes everything of its cell. */
void sc__family_end(struct sc_family *f)
{
	f->ops->kill(&f->anchor);
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
bool sc__family_orphaned(struct sc_family *f)
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
	pthread_mutex_destroy(&f->turn_lock);
	pthread_cond_destroy(&f->turn_free);
	pthread_mutex_destroy(&f->tmp_lock);
	if (f->tmp_root >= 0)
		close(f->tmp_root);
	free(f);
}

void sc__sessions_orphan(struct snapcell_sandbox *sb)
{
	pthread_mutex_lock(&families_lock);
	for (struct sc_family *f = sb->families; f; f = f->next) {
		sc__family_end(f);
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

/* Reads a reply of a known type and payload length, within one deadline, accepting no
 * descriptors (recv without a control buffer makes the kernel drop any that were sent). */
static int read_reply(int fd, uint8_t want, void *payload, size_t len)
{
	uint8_t buf[SC_FRAME_HEADER_LEN + sizeof(int32_t)];
	size_t got = 0, total = SC_FRAME_HEADER_LEN + len;
	if (len > sizeof(int32_t))
		return -EINVAL;
	uint64_t deadline = sc__deadline_ms(REPLY_TIMEOUT_MS);
	while (got < total) {
		ssize_t n = recv(fd, buf + got, total - got, MSG_DONTWAIT);
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
	sc__frame_header(want_hdr, want, len);
	if (memcmp(buf, want_hdr, sizeof(want_hdr)) != 0)
		return -EPROTO;
	if (len)
		memcpy(payload, buf + SC_FRAME_HEADER_LEN, len);
	return 0;
}

static int read_pid_reply(int fd, uint8_t want, int32_t *pid)
{
	return read_reply(fd, want, pid, sizeof(*pid));
}

/* The family runs only while the host needs it to: during a run of one of its sessions, or
 * while a worker forks a snapshot or a snapshot a branch, one at a time (its turn). Between,
 * the anchor keeps every other process of the family stopped, so nothing changes /output or
 * /tmp while the host reads, moves or copies them, or while no run is in progress. A failed
 * exchange with the anchor (it is trusted; only a dead or stuck one fails) ends the family
 * rather than leave its stream out of step. */
static int anchor_call(struct sc_family *f, uint8_t type, uint8_t reply)
{
	pthread_mutex_lock(&f->lock);
	int fd = f->anchor.fds[SC_CELL_RPC];
	int rc = fd < 0 ? -EPIPE : sc__frame_write(fd, type, NULL, 0);
	if (rc == 0 && reply)
		rc = read_reply(fd, reply, NULL, 0);
	pthread_mutex_unlock(&f->lock);
	if (rc < 0)
		sc__family_end(f);
	return rc;
}

/* Stops every process of the family but the anchor, once the anchor says so. */
static int family_freeze(struct sc_family *f)
{
	return anchor_call(f, SC_FRAME_FREEZE, SC_FRAME_FROZEN);
}

/* Continues one process of the family (the worker that runs, or the snapshot that forks),
 * and nothing else: a process an earlier run left, and every other session's worker, stay
 * stopped, so none writes the /output or /tmp this turn sees. No answer is needed: a request
 * sent next waits in the process's socket until it runs again. */
static void family_thaw(struct sc_family *f, int32_t pid)
{
	pthread_mutex_lock(&f->lock);
	int fd = f->anchor.fds[SC_CELL_RPC];
	int rc = fd < 0 ? -EPIPE : sc__frame_write(fd, SC_FRAME_THAW, &pid, sizeof(pid));
	pthread_mutex_unlock(&f->lock);
	if (rc < 0)
		sc__family_end(f);
}

/* Waits for the family's turn; -EBUSY while a run of the family waits for a decision (which
 * may take minutes). */
static int turn_take(struct sc_family *f)
{
	pthread_mutex_lock(&f->turn_lock);
	while (f->turn_taken && !f->turn_paused)
		pthread_cond_wait(&f->turn_free, &f->turn_lock);
	int rc = f->turn_taken ? -EBUSY : 0;
	f->turn_taken = true;
	pthread_mutex_unlock(&f->turn_lock);
	return rc;
}

static void turn_pause(struct sc_family *f)
{
	pthread_mutex_lock(&f->turn_lock);
	f->turn_paused = true;
	pthread_cond_broadcast(&f->turn_free);
	pthread_mutex_unlock(&f->turn_lock);
}

static void turn_give(struct sc_family *f)
{
	pthread_mutex_lock(&f->turn_lock);
	f->turn_taken = f->turn_paused = false;
	pthread_cond_broadcast(&f->turn_free);
	pthread_mutex_unlock(&f->turn_lock);
}

#define PAUSED_FAMILY "a run of another session of this family waits for a decision"

/* Ends a turn: stops the family, runs during() on it stopped (with what stopping returned),
 * and lets the next turn begin. */
static int family_leave(struct sc_family *f, int (*during)(int frozen, void *ctx), void *ctx)
{
	int rc = family_freeze(f);
	if (during)
		rc = during(rc, ctx);
	turn_give(f);
	return rc;
}

/* The anchor's reply to SESSION: the anchor is trusted (it never ran code), so its
 * descriptors are accepted. */
static int receive_first_worker(int fd, struct snapcell_session *s)
{
	struct timeval tv = {REPLY_TIMEOUT_MS / 1000, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	int fds[4];
	uint8_t type;
	uint8_t *payload SC_AUTO_FREE = NULL;
	size_t len, got = 0;
	int rc = sc__frame_read_fds(fd, 64, &type, &payload, &len, fds, 4, &got);
	if (rc == 0 && (type != SC_FRAME_WORKER || len != sizeof(s->pid) || got != 4))
		rc = -EPROTO;
	if (rc == 0)
		memcpy(&s->pid, payload, sizeof(s->pid));
	else
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
	if (rc < 0)
		return rc;
	no_worker(&s->worker);
	s->worker.fds[SC_CELL_RPC] = fds[0];
	s->worker.fds[SC_CELL_STDOUT] = fds[1];
	s->worker.fds[SC_CELL_STDERR] = fds[2];
	s->family->tmp_root = fds[3];
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
	return sc__family_orphaned(f) ? sc__err(err, SNAPCELL_E_TEMPLATE, "the sandbox was freed")
				      : 0;
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
	pthread_mutex_init(&f->turn_lock, NULL);
	pthread_cond_init(&f->turn_free, NULL);
	pthread_mutex_init(&f->tmp_lock, NULL);
	f->sb = sb;
	f->ops = sb->cells.ops;
	f->refs = 1;
	f->next_tmp_id = 2;
	f->tmp_root = -1;
	f->uid = sb->ids.uid;
	f->gid = sb->ids.gid;
	f->tmp_owner = 1;
	s->family = f;
	s->tmp_id = 1;
	rc = sc__frame_write(f->anchor.fds[SC_CELL_RPC], SC_FRAME_SESSION, NULL, 0);
	if (rc == 0)
		rc = receive_first_worker(f->anchor.fds[SC_CELL_RPC], s);
	const char *step = "start session";
	if (rc == 0) { /* the first tree's directory, kept while it is in place (switch_trees) */
		int fd = sc__family_tmp_make(f, s->tmp_id);
		rc = fd < 0 ? fd : close(fd);
		if (rc == -EPERM)
			step = "start session: its /tmp, with the sandbox's file-system ids";
	}
	if (rc == 0) /* stopped whenever no turn is in progress, from the start */
		rc = family_freeze(f);
	if (rc < 0) {
		sc__err(err, rc, "%s", step);
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

static void worker_pausing(const struct sc_run_target *t)
{
	const struct snapcell_session *s = t->ctx;
	turn_pause(s->family);
}

/* What a session run collects once its family is stopped. */
struct collect_ctx {
	struct sc_family *family;
	struct snapcell_sandbox *sb;
	struct snapcell_result *res; /* NULL: the run failed, nothing to collect */
};

/* The family shares one /output (the anchor's), read only while every process that could
 * change it is stopped, and emptied for the next run; past the deadline the session ends
 * rather than the caller waiting on its code. A family that could not be stopped is not
 * read (its anchor is gone, and the family with it). */
static int collect_stopped(int frozen, void *ctx)
{
	const struct collect_ctx *c = ctx;
	int out_fd = c->family->anchor.fds[SC_CELL_OUTPUT];
	if (frozen < 0)
		return frozen;
	if (!c->res || !sc__output_pending(out_fd))
		return 0;
	sc__output_collect(c->sb, out_fd, c->res);
	return sc__empty_dir(out_fd, sc__deadline_ms(EMPTY_OUTPUT_MS));
}

/* The end of a session's run (on the thread that ended it, maybe a resuming one): its
 * network, its /output, the family's turn. */
static void session_finish(struct snapcell_sandbox *sb, void *ctx, int rc, bool alive,
			   struct snapcell_result *res)
{
	struct snapcell_session *s = ctx;
	struct sc_family *f = s->family;
	s->alive = alive;
	if (s->gate)
		sc__gate_cell_stop(s->gate, rc == 0 ? res : NULL);
	s->gate = NULL;
	struct collect_ctx c = {f, sb, rc == 0 ? res : NULL};
	if (family_leave(f, collect_stopped, &c) < 0)
		end_worker(s); /* its /output could not be emptied: the next run would see it */
	s->busy = false;
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
	/* A session's worker has one /input for all its runs: its mount namespace is the
	 * family's, set up before any run, and no longer able to mount. */
	const struct snapcell_run_file *files;
	if (sc__run_options_files(opts, &files))
		return sc__err(err, SNAPCELL_E_INVAL,
			       "session_run: a session's runs take no files of their own; give "
			       "them to snapcell_sandbox_run, or put them in the workspace");
	struct sc_run_request req;
	rc = sc__run_prepare(s->family->sb, code, code_len, opts, &req, out, err);
	if (rc != 0)
		return rc < 0 ? rc : 0; /* cancelled before it started: the worker is untouched */
	struct sc_run_target t = {&s->worker,	      false,	      worker_kill,	 NULL, s,
				  &s->family->anchor, worker_pausing, &s->family->anchor};
	struct sc_family *f = s->family;
	if (s->busy)
		return sc__err(
			err, -EBUSY,
			"session_run: the session's run waits for a decision; resume it first");
	if (turn_take(f) < 0)
		return sc__err(err, -EBUSY, "session_run: " PAUSED_FAMILY);
	s->busy = true;
	s->gate = NULL;
	if ((rc = sc__family_tmp_switch(f, s->tmp_id)) < 0) {
		turn_give(f);
		s->busy = false;
		return sc__err(err, rc, "session_run: put the session's /tmp in place");
	}
	family_thaw(f, s->pid);
	if (f->anchor.n_net) {
		rc = sc__gate_cell_start(
			f->sb->gate, f->anchor.net, f->anchor.n_net,
			sc__deadline_ms(f->sb->cfg->limits[SNAPCELL_LIMIT_WALL_MS]), &s->gate, err);
		if (rc < 0) {
			family_leave(f, NULL, NULL);
			s->busy = false;
			return rc;
		}
	}
	return sc__run_start(f->sb, &t, &req, session_finish, s, out, err);
}

static int tmp_copy_error(int rc, struct snapcell_error *err, const char *what)
{
	return sc__err(err, rc,
		       rc == -ELOOP    ? "%s: copy /tmp: deeper than 32 directories"
		       : rc == -ENOSPC ? "%s: copy /tmp: no room in the family's /tmp (one size "
					 "limit for every session's and snapshot's)"
				       : "%s: copy /tmp",
		       what);
}

/* Forks the snapshot from the worker, once its /tmp was copied (into snap->tmp_id). */
static int fork_snapshot(struct snapcell_session *s, struct snapcell_snapshot *snap)
{
	/* We make the snapshot's socket and hand the worker its end: nothing from the worker
	 * is ever used as a descriptor here. */
	int c[2];
	int rc = sc__family_tmp_switch(s->family,
				       s->tmp_id); /* its working directory is in its /tmp */
	if (rc < 0)
		return rc;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c) < 0)
		return -errno;
	family_thaw(s->family, s->pid);
	rc = send_request(s->worker.fds[SC_CELL_RPC], SC_FRAME_SNAPSHOT, &c[1], 1);
	close(c[1]);
	snap->ctl = c[0];
	if (rc == 0)
		rc = read_pid_reply(s->worker.fds[SC_CELL_RPC], SC_FRAME_SNAPPED, &snap->pid);
	if (rc < 0)
		close(snap->ctl);
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
	if (s->busy)
		return sc__err(err, -EBUSY, "snapshot: the session's run waits for a decision");
	struct snapcell_snapshot *snap = calloc(1, sizeof(*snap));
	if (!snap)
		return sc__err(err, -ENOMEM, "snapshot");
	struct sc_family *f = s->family;
	snap->family = f;
	if (turn_take(f) < 0) {
		free(snap);
		return sc__err(err, -EBUSY, "snapshot: " PAUSED_FAMILY);
	}
	snap->tmp_id = sc__family_new_tmp_id(f);
	/* /tmp first, copied while the family is stopped, then the interpreter. */
	int tmp_rc = sc__family_tmp_copy(f, s->tmp_id, snap->tmp_id);
	rc = tmp_rc < 0 ? 0 : fork_snapshot(s, snap);
	family_leave(f, NULL, NULL);
	if (tmp_rc < 0 || rc < 0) {
		sc__family_tmp_drop(f, snap->tmp_id);
		free(snap);
		if (tmp_rc < 0)
			return tmp_copy_error(tmp_rc, err, "snapshot");
		end_worker(s); /* a late reply would desynchronise its stream */
		return sc__err(err, rc, "snapshot");
	}
	pthread_mutex_lock(&f->lock);
	f->refs++;
	pthread_mutex_unlock(&f->lock);
	*out = snap;
	return 0;
}

/* A new worker forked from the snapshot, with a copy of its /tmp, into s (whose old worker
 * and /tmp, if any, are ended). */
static int branch(const struct snapcell_snapshot *snap, struct snapcell_session *s,
		  struct snapcell_error *err, const char *what)
{
	struct sc_family *f = snap->family;
	int mine[3] = {-1, -1, -1}, theirs[3] = {-1, -1, -1};
	int32_t pid;
	int rc = sc__channels_new(mine, theirs);
	if (rc < 0)
		return sc__err(err, rc, "%s", what);
	if (turn_take(f) < 0) {
		for (int i = 0; i < 3; i++) {
			close(mine[i]);
			close(theirs[i]);
		}
		return sc__err(err, -EBUSY, "%s: " PAUSED_FAMILY, what);
	}
	uint32_t tmp_id = sc__family_new_tmp_id(f);
	int tmp_rc = sc__family_tmp_copy(f, snap->tmp_id, tmp_id);
	if (tmp_rc == 0 && (rc = sc__family_tmp_switch(f, tmp_id)) == 0) {
		family_thaw(f, snap->pid);
		rc = send_request(snap->ctl, SC_FRAME_FORK, theirs, 3);
	}
	for (int i = 0; i < 3; i++)
		close(theirs[i]);
	if (tmp_rc == 0 && rc == 0)
		rc = read_pid_reply(snap->ctl, SC_FRAME_WORKER, &pid);
	family_leave(f, NULL, NULL);
	if (tmp_rc < 0 || rc < 0) {
		for (int i = 0; i < 3; i++)
			close(mine[i]);
		sc__family_tmp_drop(f, tmp_id);
		return tmp_rc < 0 ? tmp_copy_error(tmp_rc, err, what)
				  : sc__err(err, rc, "%s", what);
	}
	if (s->alive)
		family_kill(f, s->pid);
	if (s->tmp_id)
		sc__family_tmp_drop(f, s->tmp_id);
	sc__cell_close(&s->worker);
	s->worker.fds[SC_CELL_RPC] = mine[0];
	s->worker.fds[SC_CELL_STDOUT] = mine[1];
	s->worker.fds[SC_CELL_STDERR] = mine[2];
	s->pid = pid;
	s->tmp_id = tmp_id;
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
	if (s->busy)
		return sc__err(err, -EBUSY, "restore: the session's run waits for a decision");
	int rc = orphaned(s->family, err);
	return rc < 0 ? rc : branch(snap, s, err, "restore");
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
	if ((rc = branch(snap, s, err, "start session from snapshot")) < 0) {
		free(s);
		return rc;
	}
	pthread_mutex_lock(&s->family->lock);
	s->family->refs++;
	pthread_mutex_unlock(&s->family->lock);
	*out = s;
	return 0;
}

bool snapcell_session_alive(const struct snapcell_session *s)
{
	return s && s->alive && !sc__family_orphaned(s->family);
}

void snapcell_session_free(struct snapcell_session *s)
{
	if (!s)
		return;
	/* A run paused for a decision ends with the session (its sandbox ended it already when
	 * the family is orphaned). */
	pthread_mutex_lock(&families_lock);
	struct snapcell_sandbox *sb = s->busy ? s->family->sb : NULL;
	pthread_mutex_unlock(&families_lock);
	if (sb)
		sc__paused_end_ctx(sb, s);
	if (s->alive && !sc__family_orphaned(s->family))
		family_kill(s->family, s->pid);
	if (s->tmp_id)
		sc__family_tmp_drop(s->family, s->tmp_id);
	sc__cell_close(&s->worker);
	family_put(s->family);
	free(s);
}

void snapcell_snapshot_free(struct snapcell_snapshot *snap)
{
	if (!snap)
		return;
	close(snap->ctl); /* the snapshot process exits on EOF, when it next runs */
	sc__family_tmp_drop(snap->family, snap->tmp_id);
	family_put(snap->family);
	free(snap);
}
