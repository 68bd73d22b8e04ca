/* One run: deliver code to a run target (a fresh cell, or a session worker: session.c makes
 * those), serve its tool calls on this thread, read its output under caps, enforce the wall
 * clock and the cancellation token, and derive the result (from the cell's DONE report,
 * trusted only for its own result, or from the template's exit record when none came). The
 * target kills and collects in its own way; this file knows nothing of sessions. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "net/gate.h"
#include "rpc/frame.h"
#include "stage/stage.h"
#include "util/buf.h"
#include "util/util.h"

#define READ_CHUNK 65536
/* After the kill, the template reports the exit within milliseconds; past this it is wedged. */
#define EXIT_GRACE_US 5000000
/* After the exit record, pipes reach EOF once the cell's namespace is gone. */
#define DRAIN_GRACE_US 1000000
/* After answering a tool call the loop polls without sleeping for up to this long (a spin,
 * rpc/frame.h): code that calls tools in a row sends its next call within microseconds (6-22
 * us after its answer in `snapcell bench`'s loop). Where cell and host share a CPU a failed
 * spin delays the cell by the whole window, so it is not longer. Nothing waits on it: poll
 * still sees every descriptor, and the deadline and the cancellation token are checked each
 * round. Code that makes no more calls costs this much CPU, and only until the spins back
 * off. */
#ifndef CALL_SPIN_US
#define CALL_SPIN_US 50
#endif

enum forced {
	NOT_FORCED,
	FORCED_TIMEOUT,
	FORCED_OUTPUT,
	FORCED_PROTOCOL,
	FORCED_CANCEL,
	FORCED_FILES,
	FORCED_EXPIRED, /* no decision came in time */
};

/* Level rlimits has no tmpfs per cell: its /tmp and /output are directories on the work
 * directory's filesystem (/dev/shm, host memory, by default), which a cell filled at ~2.5
 * GiB/s. The host measures them while the cell runs, every FILES_WATCH_US plus ten times
 * what the last walk took, at most FILES_WATCH_MAX_US more (the walk's cost is the code's to
 * choose: 4,000 descriptors made it ~30 ms, and ten times that let the cell write 0.5 GiB
 * past the bound), and kills the cell once they hold more than its /tmp and /output
 * sizes together (what the other levels' tmpfs allow), more than FILES_MAX_ENTRIES entries,
 * or a directory deeper than FILES_MAX_DEPTH. */
#define FILES_WATCH_US	   20000
#define FILES_WATCH_MAX_US 20000
#define FILES_MAX_ENTRIES  131072
#define FILES_MAX_DEPTH	   64

/* What loop() returns besides 0 (the run ended) and a negative code. */
#define RUN_PAUSED 1
/* How long stopping a paused run's processes may take before the held call is refused instead:
 * a tree holds still within a few passes, unless a thread stays in an uninterruptible sleep. */
#define FREEZE_TIMEOUT_MS 1000

/* A stream's bytes grow as the cell writes them, up to the stream's limit: a large limit
 * costs nothing until output comes. */
struct stream {
	struct sc_buf buf;
	bool truncated, eof;
	uint32_t hit_flag;
};

/* Frames not yet sent: bytes.data[off..bytes.len). */
struct outbuf {
	struct sc_buf bytes;
	size_t off;
};

/* The tool-call log keeps this many entries; later calls are only counted. */
#define MAX_LOGGED_CALLS 100000
/* Answers not yet sent and calls not yet served, in bytes: past this the loop stops reading
 * the cell's frames until they drain (code that sends calls and never reads their answers
 * then blocks in its own write; nothing on the host grows). */
#define BACKLOG_MAX_BYTES (64u << 20)

/* A call read while it could not be served (a call waits for a decision, or the run's
 * awaited calls are at their bound): served in arrival order later. */
struct queued_call {
	struct queued_call *next;
	size_t len;
	uint8_t payload[]; /* NUL-terminated, as the frame reader's */
};

struct sc_run {
	const struct sc_run_target *target;
	struct sc_cell *cell; /* the target's; the loop closes its socket when the cell hangs up */
	int cancel_fd;	      /* -1 for none */
	struct stream out, err;
	struct outbuf send; /* frames for the cell: RUN, then RESULTs */
	struct snapcell_tool_call *calls;
	size_t n_calls, cap_calls, n_calls_dropped;
	struct sc_frame_reader reader;
	bool have_done, have_exit, exit_eof;
	struct sc_done_payload done;
	struct snapcell_config *tools; /* the run's own tools (a copy), or NULL */
	bool have_value;	       /* the VALUE frame came (one, before DONE) */
	enum snapcell_value_state value_state;
	char *value_json;
	struct sc_exit_record exit;
	size_t exit_got;
	enum forced forced;
	bool learn; /* the request's: RUN_LEARN, the cell lingers after DONE */
	uint32_t hit;
	char note[160];
	uint64_t start_us, deadline_us;
	uint64_t killed_us; /* when kill_cell fired */
	struct sc_spin spin;
	uint64_t spin_until_us; /* after answering a call: poll without sleeping until then */
	uint64_t
		files_watch_us; /* level rlimits: when to measure /tmp and /output next; 0: never */
	/* A call held for a decision: the cell waits in it while the run is paused. held_slot:
	 * it holds one of the sandbox's paused-run slots (until the decision or the end). */
	const struct sc_tool *held;
	char *held_args;
	struct snapcell_tool_call held_log;
	uint64_t held_id;
	uint32_t held_call; /* the cell's id of the held call */
	bool held_slot;
	/* Calls in flight to asynchronous faces (calls.c), and calls waiting to be served. */
	struct sc_calls flight;
	struct queued_call *queue, **queue_end;
	size_t n_queued, queued_bytes;
	uint64_t paused_us, paused_total_us; /* when the pause began; all pauses' time */
	struct sc_frozen *frozen;	     /* its processes, stopped while it is paused */
	struct snapcell_decision *decisions;
	size_t n_decisions;
	/* Its own copy of the target, and what its owner does at its end. */
	struct sc_run_target t;
	sc_run_finish finish;
	void *ctx;
};

static _Atomic uint64_t next_pending_id = 1;

static void kill_cell(struct sc_run *r, enum forced why)
{
	if (r->forced == NOT_FORCED) {
		r->forced = why;
		r->killed_us = sc__now_us();
		r->target->kill(r->target);
	}
}

/* Reads once; returns the bytes read, 0 at EOF or when nothing is pending. */
static ssize_t read_stream(struct sc_run *r, int fd, struct stream *s)
{
	char scratch[READ_CHUNK];
	ssize_t n = read(fd, scratch, sizeof(scratch));
	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			s->eof = true;
		return 0;
	}
	if (n == 0) {
		s->eof = true;
		return 0;
	}
	/* Memory that runs out cuts the stream as its limit would: what was kept stays. */
	if (sc__buf_add_some(&s->buf, scratch, (size_t)n, NULL) < 0) {
		s->truncated = true;
		r->hit |= s->hit_flag;
		kill_cell(r, FORCED_OUTPUT);
	}
	return n;
}

/* After DONE the cell has flushed: what it wrote is already in the pipes. */
static void drain(struct sc_run *r)
{
	while (!r->out.eof && read_stream(r, r->cell->fds[SC_CELL_STDOUT], &r->out) > 0)
		;
	while (!r->err.eof && read_stream(r, r->cell->fds[SC_CELL_STDERR], &r->err) > 0)
		;
}

static int queue_frame(struct outbuf *o, uint8_t type, const void *head, size_t head_len,
		       const void *body, size_t body_len)
{
	if (o->off == o->bytes.len) {
		o->off = 0;
		sc__buf_reset(&o->bytes);
	}
	uint8_t header[SC_FRAME_HEADER_LEN];
	sc__frame_header(header, type, head_len + body_len);
	/* Room for the whole frame first: the adds after it cannot fail. */
	if (sc__buf_reserve(&o->bytes, sizeof(header) + head_len + body_len) < 0)
		return -ENOMEM;
	sc__buf_add(&o->bytes, header, sizeof(header));
	sc__buf_add(&o->bytes, head, head_len);
	sc__buf_add(&o->bytes, body, body_len);
	return 0;
}

static void violation(struct sc_run *r, const char *why)
{
	snprintf(r->note, sizeof(r->note),
		 "snapcell: the cell broke the frame protocol (%s) and was killed\n", why);
	kill_cell(r, FORCED_PROTOCOL);
}

static void log_call(struct sc_run *r, const struct snapcell_tool_call *entry)
{
	if (r->n_calls == MAX_LOGGED_CALLS) {
		r->n_calls_dropped++;
		return;
	}
	if (SC_ARRAY_RESERVE(r->calls, r->cap_calls, r->n_calls + 1, MAX_LOGGED_CALLS) < 0) {
		r->n_calls_dropped++;
		return;
	}
	r->calls[r->n_calls++] = *entry;
}

/* Runs the tool on this thread (the caller's) and queues its answer. */
static void send_pending(struct sc_run *r)
{
	struct outbuf *o = &r->send;
	ssize_t n = send(r->cell->fds[SC_CELL_RPC], o->bytes.data + o->off, o->bytes.len - o->off,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n > 0)
		o->off += (size_t)n;
	else if (n < 0 && errno != EAGAIN && errno != EINTR)
		o->off = o->bytes.len; /* the cell is gone; its exit says why */
}

static void answer_call(struct sc_run *r, uint32_t id, int rc, struct sc_call_outcome *out);

/* A call that needs a decision: pauses the run when it may and the sandbox has a slot free,
 * else answers it with the reason. */
static void hold_call(struct sc_run *r, struct snapcell_sandbox *sb, uint32_t id,
		      struct sc_call_outcome *out)
{
	const struct sc_tool *t = out->held;
	unsigned bound = (unsigned)sb->cfg->limits[SNAPCELL_LIMIT_PAUSED_RUNS];
	pthread_mutex_lock(&sb->lock);
	bool slot = sb->n_paused_slots < bound;
	sb->n_paused_slots += slot;
	pthread_mutex_unlock(&sb->lock);
	if (slot) {
		r->held = t;
		r->held_args = out->held_args;
		r->held_log = out->log;
		r->held_id = next_pending_id++;
		r->held_call = id;
		r->held_slot = true;
		r->paused_us = sc__now_us();
		return;
	}
	free(out->held_args);
	out->held = NULL;
	out->text = sc__message("tool '%s' needs a decision, and %u runs of this sandbox already "
				"wait for one (the paused_runs bound); the call was not made",
				t->name, bound);
	answer_call(r, id, out->text ? 0 : -ENOMEM, out);
}

/* Serves one CALL payload (id, flags, name, NUL, arguments): answers it, holds it
 * for a decision, or starts it on the tool's asynchronous face. */
static void serve_call(struct sc_run *r, struct snapcell_sandbox *sb, uint8_t *payload, size_t len)
{
	if (len < SC_CALL_HEAD_LEN) {
		violation(r, "malformed tool call");
		return;
	}
	uint32_t id = sc__le32(payload);
	bool awaited = payload[4] & SC_CALL_AWAITED;
	struct sc_call_outcome out;
	int rc = sc__tool_serve(sb->cfg, r->tools, payload + SC_CALL_HEAD_LEN,
				len - SC_CALL_HEAD_LEN, SC_FRAME_DEFAULT_CAP - 1, r->deadline_us,
				r->cancel_fd, awaited, &out);
	if (rc == -EPROTO) {
		violation(r, "malformed tool call");
		return;
	}
	if (out.held && out.start) {
		rc = sc__calls_start(&r->flight, out.held, id, out.held_args, &out.log,
				     r->deadline_us);
		if (rc < 0)
			violation(r, "no resources to start a tool call");
		return;
	}
	if (out.held) {
		hold_call(r, sb, id, &out);
		return;
	}
	answer_call(r, id, rc, &out);
}

static bool queue_call(struct sc_run *r)
{
	if (r->n_queued + sc__calls_in_flight(&r->flight) >= SC_CALLS_IN_FLIGHT_MAX) {
		violation(r, "more tool calls in flight than a cell may have");
		return false;
	}
	struct queued_call *q = malloc(sizeof(*q) + r->reader.payload_len + 1);
	if (!q) {
		violation(r, "out of memory queueing a tool call");
		return false;
	}
	q->next = NULL;
	q->len = r->reader.payload_len;
	memcpy(q->payload, r->reader.payload, q->len + 1);
	if (!r->queue)
		r->queue_end = &r->queue;
	*r->queue_end = q;
	r->queue_end = &q->next;
	r->n_queued++;
	r->queued_bytes += q->len;
	return true;
}

/* Whether a call may be served now: none waits for a decision or in the queue, and the
 * run's awaited calls are under their bound. */
static bool may_serve(struct sc_run *r, const struct snapcell_sandbox *sb)
{
	return !r->held && sc__calls_in_flight(&r->flight) <
				   (unsigned)sb->cfg->limits[SNAPCELL_LIMIT_TOOL_CALLS];
}

/* Serves queued calls while it may, oldest first. */
static void serve_queue(struct sc_run *r, struct snapcell_sandbox *sb)
{
	while (r->queue && may_serve(r, sb) && r->forced == NOT_FORCED && !r->have_done) {
		struct queued_call *q = r->queue;
		r->queue = q->next;
		r->n_queued--;
		r->queued_bytes -= q->len;
		serve_call(r, sb, q->payload, q->len);
		free(q);
	}
}

static void free_queue(struct sc_run *r)
{
	while (r->queue) {
		struct queued_call *q = r->queue;
		r->queue = q->next;
		free(q);
	}
	r->n_queued = r->queued_bytes = 0;
}

/* Answers a served (or decided) call, unless the run is out of time or over. */
static void answer_call(struct sc_run *r, uint32_t id, int rc, struct sc_call_outcome *o)
{
	struct sc_call_outcome out = *o;
	if (r->have_done || r->forced != NOT_FORCED) {
		/* The code ended or is being killed: nothing reads this answer. */
		log_call(r, &out.log);
		free(out.text);
		return;
	}
	if (sc__cancel_fired(r->cancel_fd)) {
		/* Cancelled while the tool ran: its answer must not reach the code. */
		log_call(r, &out.log);
		free(out.text);
		kill_cell(r, FORCED_CANCEL);
		return;
	}
	if (sc__now_us() >= r->deadline_us) {
		/* The tool outlived the run: its answer must not reach code that is out of time. */
		log_call(r, &out.log);
		free(out.text);
		r->hit |= SNAPCELL_HIT_WALL;
		kill_cell(r, FORCED_TIMEOUT);
		return;
	}
	uint8_t head[SC_RESULT_HEAD_LEN];
	sc__put_le32(head, id);
	head[4] = out.ok;
	if (rc < 0 || queue_frame(&r->send, SC_FRAME_RESULT, head, sizeof(head), out.text,
				  strlen(out.text)) < 0)
		violation(r, "out of memory answering a tool call");
	log_call(r, &out.log);
	free(out.text);
	send_pending(r); /* the cell is waiting for it: no need to poll first */
	r->spin_until_us = sc__spin_start(&r->spin);
}

/* The code's own frames could forge a value: it is believed only as the cell's word on its
 * own result, like its stdout, and only once. */
static void read_value(struct sc_run *r)
{
	int rc = r->have_value ? -EPROTO
			       : sc__value_read(r->reader.payload, r->reader.payload_len,
						&r->value_json, &r->value_state);
	r->have_value = true;
	if (rc < 0)
		violation(r, rc == -ENOMEM ? "out of memory reading the value" : "malformed value");
}

static void on_frame(struct sc_run *r, struct snapcell_sandbox *sb)
{
	uint8_t type = sc__frame_type(&r->reader);
	if (r->forced != NOT_FORCED)
		return; /* being killed: nothing more is served */
	if (r->have_done)
		violation(r, "frame after DONE");
	else if (type == SC_FRAME_CALL && (r->queue || !may_serve(r, sb)))
		queue_call(r);
	else if (type == SC_FRAME_CALL)
		serve_call(r, sb, r->reader.payload, r->reader.payload_len);
	else if (type == SC_FRAME_VALUE)
		read_value(r);
	else if (type == SC_FRAME_DONE && r->reader.payload_len == sizeof(r->done)) {
		memcpy(&r->done, r->reader.payload, sizeof(r->done));
		r->have_done = true;
		/* A cell sent RUN_LEARN stays after DONE until this end shuts (guest/cell.c),
		 * so the sandbox can read its pages (prefault.c). A setup-failure claim is never
		 * learned from: the template's word on it needs the cell gone. */
		if (r->learn && r->done.status == SNAPCELL_STATUS_SETUP_FAILURE)
			shutdown(r->cell->fds[SC_CELL_RPC], SHUT_WR);
		drain(r);
	} else
		violation(r, "unexpected frame");
}

static void end_spin(struct sc_run *r, bool caught)
{
	sc__spin_end(&r->spin, caught);
	r->spin_until_us = 0;
}

static void read_frames(struct sc_run *r, struct snapcell_sandbox *sb)
{
	uint8_t buf[65536];
	ssize_t n = recv(r->cell->fds[SC_CELL_RPC], buf, sizeof(buf), MSG_DONTWAIT);
	if (n > 0 && r->spin_until_us)
		end_spin(r, true);
	if (n <= 0) {
		if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
			close(r->cell->fds[SC_CELL_RPC]);
			r->cell->fds[SC_CELL_RPC] = -1;
		}
		return;
	}
	size_t off = 0;
	while (off < (size_t)n && r->forced != FORCED_PROTOCOL) {
		size_t used;
		int rc = sc__frame_feed(&r->reader, buf + off, (size_t)n - off, &used);
		off += used;
		if (rc < 0)
			violation(r, rc == -EMSGSIZE ? "oversized frame" : "out of memory");
		else if (rc == 0)
			break;
		else
			on_frame(r, sb);
	}
}

static void read_exit(struct sc_run *r)
{
	ssize_t n = read(r->cell->fds[SC_CELL_EXIT], (char *)&r->exit + r->exit_got,
			 sizeof(r->exit) - r->exit_got);
	if (n > 0) {
		r->exit_got += (size_t)n;
		r->have_exit = r->exit_got == sizeof(r->exit);
	} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
		r->exit_eof = true;
	}
}

/* A run ends at the cell's DONE report, or, when it never came, at the template's report of
 * the cell's death with both pipes closed. */
static bool finished(const struct sc_run *r, uint64_t now)
{
	/* A setup failure is the template's to confirm (its exit record), never the cell's
	 * claim: code can write a DONE frame of its own. The cell exits right after reporting
	 * one, so waiting costs nothing unless the claim is forged. */
	bool claims_setup_failure = r->have_done &&
				    r->done.status == SNAPCELL_STATUS_SETUP_FAILURE &&
				    r->target->reports_exit;
	/* A session's worker reads its next request after the answers it was sent: the last
	 * one goes out whole (the worker skips answers its code left behind). */
	if (r->have_done && r->forced == NOT_FORCED && !claims_setup_failure &&
	    (r->target->reports_exit || r->send.off == r->send.bytes.len ||
	     r->cell->fds[SC_CELL_RPC] < 0))
		return true;
	if (!r->target->reports_exit) /* its socket and pipes closing are its end */
		return r->cell->fds[SC_CELL_RPC] < 0 && r->out.eof && r->err.eof;
	if (!r->have_exit && !r->exit_eof)
		return false;
	return (r->out.eof && r->err.eof) || now > r->deadline_us + DRAIN_GRACE_US;
}

struct usage {
	uint64_t bytes, entries, max_bytes;
};

/* Whether a failed open or stat in the walk hides what a directory holds: the host may not
 * read it. A caller that is not root runs the cells as its own uid, without CAP_DAC_OVERRIDE,
 * and code can fchmod a directory of its own to 000 (chmod by path is refused): twelve such
 * directories held 768 MiB past the 321 MiB bound before this counted as over. A name gone
 * meanwhile, or swapped for a link or a file, hides nothing. */
static bool unreadable(void)
{
	return errno == EACCES || errno == EPERM;
}

/* Adds what dir holds to u; true once u is over its bounds (the walk stops there), or when a
 * directory in it cannot be read. Nothing is followed through a link, and a hard-linked file
 * counts once per name. */
static bool tree_over(int dir, unsigned depth, struct usage *u)
{
	/* Its own open file: a dup would share (and move) the offset of the caller's. */
	int fd =
		depth > FILES_MAX_DEPTH ? -1 : openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		bool over = depth > FILES_MAX_DEPTH || unreadable();
		if (fd >= 0)
			close(fd);
		return over;
	}
	bool over = false;
	for (struct dirent *e; !over && (e = readdir(d));) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			over = unreadable();
			continue;
		}
		u->bytes += (uint64_t)st.st_blocks * 512;
		over = u->bytes > u->max_bytes || ++u->entries > FILES_MAX_ENTRIES;
		if (!over && S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				over = tree_over(sub, depth + 1, u);
				close(sub);
			} else {
				over = unreadable();
			}
		}
	}
	closedir(d);
	return over;
}

/* Level rlimits: whether the cell's /tmp and /output (out/<id> and tmp/<id> in the work
 * directory; a session's family shares its anchor's) are over their sizes together. */
static bool files_over(const struct sc_run *r, const struct snapcell_sandbox *sb)
{
	const struct sc_cell *c = r->target->files ? r->target->files : r->cell;
	const uint64_t *l = sb->cfg->limits;
	struct usage u = {.max_bytes = l[SNAPCELL_LIMIT_TMP_BYTES] +
				       l[SNAPCELL_LIMIT_OUTPUT_TOTAL_BYTES] + (1u << 20)};
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/tmp/%u", sb->workdir, c->id);
	int tmp = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* What no name shows: files the cell's processes opened or mapped, then unlinked. */
	struct stat wd;
	int pid = sc__pidfd_pid(c->fds[SC_CELL_PIDFD]);
	if (pid > 0 && fstat(sb->out_fd, &wd) == 0) {
		uint64_t held = sc__held_bytes(pid, wd.st_dev, l[SNAPCELL_LIMIT_FILE_BYTES]);
		u.bytes = held > u.max_bytes ? u.max_bytes + 1 : held;
	}
	bool over = u.bytes > u.max_bytes || (tmp >= 0 && tree_over(tmp, 0, &u));
	if (tmp >= 0)
		close(tmp);
	over = over || (c->fds[SC_CELL_OUTPUT] >= 0 && tree_over(c->fds[SC_CELL_OUTPUT], 0, &u));
	/* And what no table holds: descriptors in flight in a socket's queue. */
	return over || sc__inflight_over(sb, u.max_bytes - u.bytes, l[SNAPCELL_LIMIT_FILE_BYTES]);
}

/* Measures the cell's /tmp and /output now, killing it when they are over; sets when to look
 * again. True when it was killed. */
static bool files_check(struct sc_run *r, const struct snapcell_sandbox *sb, uint64_t now)
{
	bool over = files_over(r, sb);
	if (over) {
		r->hit |= SNAPCELL_HIT_TMP;
		snprintf(r->note, sizeof(r->note),
			 "snapcell: /tmp and /output passed their size limit (%llu bytes together, "
			 "or %u entries) and the cell was killed\n",
			 (unsigned long long)(sb->cfg->limits[SNAPCELL_LIMIT_TMP_BYTES] +
					      sb->cfg->limits[SNAPCELL_LIMIT_OUTPUT_TOTAL_BYTES] +
					      (1u << 20)),
			 FILES_MAX_ENTRIES);
		kill_cell(r, FORCED_FILES);
	}
	uint64_t after = sc__now_us();
	uint64_t wait = 10 * (after - now);
	r->files_watch_us =
		after + FILES_WATCH_US + (wait < FILES_WATCH_MAX_US ? wait : FILES_WATCH_MAX_US);
	return over;
}

static void watch_files(struct sc_run *r, const struct snapcell_sandbox *sb, uint64_t now)
{
	if (r->files_watch_us && now >= r->files_watch_us && r->forced == NOT_FORCED)
		files_check(r, sb, now);
}

/* Lets go of a held call without a decision (the run is being killed). */
static void drop_held(struct sc_run *r, struct snapcell_sandbox *sb)
{
	free(r->held_args);
	r->held_args = NULL;
	r->held = NULL;
	if (r->held_slot) {
		pthread_mutex_lock(&sb->lock);
		sb->n_paused_slots--;
		pthread_mutex_unlock(&sb->lock);
		r->held_slot = false;
	}
}

/* Stops every process of the run's target for its pause: the cell's tree, or a session
 * worker's family below its anchor (docs/approval.md). When they cannot all be stopped, the
 * held call is answered with the reason instead, and the run goes on without pausing. */
static bool freeze_for_pause(struct sc_run *r, struct snapcell_sandbox *sb)
{
	const struct sc_cell *root = r->target->anchor ? r->target->anchor : r->cell;
	struct sc_cell_procs procs = {sc__pidfd_pid(root->fds[SC_CELL_PIDFD]),
				      r->target->anchor != NULL, -1};
	if (sb->cgroup.dir_fd >= 0)
		procs.cgroup_fd = sc__cgroup_cell_open(&sb->cgroup, root->id);
	/* Not past the wall limit: a cell that cannot be stopped (a thread held in 'D') made
	 * each try last 1 s, and its run end 0.7 s past its limit. */
	uint64_t now = sc__now_us(),
		 left_ms = r->deadline_us > now ? (r->deadline_us - now) / 1000 : 0;
	unsigned timeout_ms = left_ms < FREEZE_TIMEOUT_MS ? (unsigned)left_ms : FREEZE_TIMEOUT_MS;
	int rc = procs.root > 0 ? sc__cell_freeze(&procs, timeout_ms, &r->frozen) : -ESRCH;
	if (procs.cgroup_fd >= 0)
		close(procs.cgroup_fd);
	if (rc == 0) {
		r->paused_us = sc__now_us(); /* the wall clock stops from here */
		return true;
	}
	struct sc_call_outcome o = {.log = r->held_log};
	o.text = sc__message("tool '%s' needs a decision, and the cell's processes could not all "
			     "be stopped to wait for it (%s); the call was not made",
			     r->held->name,
			     rc == -ETIMEDOUT ? "some did not stop in time" : strerror(-rc));
	uint32_t id = r->held_call;
	drop_held(r, sb);
	answer_call(r, id, o.text ? 0 : -ENOMEM, &o);
	return false;
}

static void on_answer(void *ctx, uint32_t id, int rc, struct sc_call_outcome *out)
{
	answer_call(ctx, id, rc, out);
}

/* The end of a run with awaited calls in flight: each is asked to end, and the run waits for
 * every answer (a tool's thread or task must not outlive the run it belongs to). */
static void end_calls(struct sc_run *r)
{
	if (!sc__calls_in_flight(&r->flight))
		return;
	sc__calls_cancel(&r->flight);
	while (sc__calls_in_flight(&r->flight)) {
		sc__wait_fd(r->flight.event_fd, POLLIN, sc__deadline_ms(1000));
		sc__calls_take(&r->flight, on_answer, r);
	}
}

/* Returns 0 when the cell is gone and reaped, RUN_PAUSED when a call waits for a decision
 * (the cell blocked in it), or SNAPCELL_E_TEMPLATE. */
static int loop(struct sc_run *r, struct snapcell_sandbox *sb)
{
	for (;;) {
		uint64_t now = sc__now_us();
		if (r->held && (r->forced != NOT_FORCED || r->have_done))
			drop_held(r, sb);
		serve_queue(r, sb);
		/* A run pauses once nothing of it runs on the host: awaited calls started before
		 * the held one are answered first. */
		if (r->held && !sc__calls_in_flight(&r->flight) && freeze_for_pause(r, sb)) {
			/* What the code wrote before the call is in the pipes (call_tool flushes
			 * first), so the paused result has all of it. */
			drain(r);
			return RUN_PAUSED;
		}
		if (finished(r, now))
			return 0;
		watch_files(r, sb, now);
		if (now >= r->deadline_us && r->forced == NOT_FORCED) {
			r->hit |= SNAPCELL_HIT_WALL;
			kill_cell(r, FORCED_TIMEOUT);
		}
		/* A killed target with no exit report whose pipes stay open (a session worker's
		 * child left its process group, or a snapshot gave a wrong pid) is given up on,
		 * not waited for: it cannot run again, the caller goes on. One with an exit
		 * report that never comes means the template is wedged. */
		bool reports = r->target->reports_exit;
		if (!reports && r->forced != NOT_FORCED && now > r->killed_us + DRAIN_GRACE_US)
			return 0;
		/* From the kill, not the deadline: a tool callback that blocked past the deadline
		 * delays the kill, and the template then still needs its moment. */
		if (reports && r->forced != NOT_FORCED && now > r->killed_us + EXIT_GRACE_US &&
		    !r->have_exit)
			return SNAPCELL_E_TEMPLATE;
		bool backlog =
			r->send.bytes.len - r->send.off + r->queued_bytes > BACKLOG_MAX_BYTES;
		struct pollfd pf[6] = {
			{r->out.eof ? -1 : r->cell->fds[SC_CELL_STDOUT], POLLIN, 0},
			{r->err.eof ? -1 : r->cell->fds[SC_CELL_STDERR], POLLIN, 0},
			{r->have_exit || r->exit_eof ? -1 : r->cell->fds[SC_CELL_EXIT], POLLIN, 0},
			{r->cell->fds[SC_CELL_RPC],
			 (short)((backlog ? 0 : POLLIN) |
				 (r->send.off < r->send.bytes.len ? POLLOUT : 0)),
			 0},
			{r->forced == NOT_FORCED ? r->cancel_fd : -1, POLLIN, 0},
			{r->flight.event_fd, POLLIN, 0},
		};
		uint64_t until = r->deadline_us > now ? r->deadline_us - now : 0;
		if (r->forced != NOT_FORCED || r->have_exit)
			until = 50000; /* only draining now */
		else if (now < r->spin_until_us)
			until = 0; /* just answered a call: the next may be microseconds away */
		else if (r->spin_until_us)
			end_spin(r, false);
		if (r->files_watch_us && r->forced == NOT_FORCED) {
			uint64_t watch = r->files_watch_us > now ? r->files_watch_us - now : 0;
			until = watch < until ? watch : until;
		}
		int timeout_ms = (int)((until + 999) / 1000);
		if (poll(pf, 6, timeout_ms) < 0 && errno != EINTR)
			return -errno;
		if (pf[5].revents)
			sc__calls_take(&r->flight, on_answer, r);
		if (pf[4].revents)
			kill_cell(r, FORCED_CANCEL);
		if (pf[0].revents)
			read_stream(r, pf[0].fd, &r->out);
		if (pf[1].revents)
			read_stream(r, pf[1].fd, &r->err);
		if (pf[2].revents)
			read_exit(r);
		if (pf[3].revents & POLLOUT)
			send_pending(r);
		if (pf[3].revents & (POLLIN | POLLHUP | POLLERR) && !backlog)
			read_frames(r, sb);
	}
}

static enum snapcell_status guest_status(const struct sc_run *r, int exit_code)
{
	/* Only the template knows that a cell never got as far as running code. */
	if (r->have_exit && (r->exit.flags & SC_EXIT_NOT_SET_UP))
		return SNAPCELL_STATUS_SETUP_FAILURE;
	if (!r->have_done)
		return exit_code == 0 ? SNAPCELL_STATUS_OK : SNAPCELL_STATUS_ERROR;
	switch (r->done.status) {
	case SNAPCELL_STATUS_MEMORY:
		return SNAPCELL_STATUS_MEMORY;
	case SNAPCELL_STATUS_OK:
		return exit_code == 0 ? SNAPCELL_STATUS_OK : SNAPCELL_STATUS_ERROR;
	default:
		return SNAPCELL_STATUS_ERROR;
	}
}

static void derive_result(const struct sc_run *r, const struct snapcell_sandbox *sb,
			  struct snapcell_result *res)
{
	const uint32_t guest_flags = SNAPCELL_HIT_MEMORY | SNAPCELL_HIT_PROCESSES |
				     SNAPCELL_HIT_FILE_SIZE | SNAPCELL_HIT_TMP;
	int ws = r->exit.wait_status;
	res->limits_hit = r->hit;
	res->cpu_us = r->exit.cpu_us;
	res->peak_rss_bytes = r->exit.maxrss_kib * 1024;
	res->isolation = sb->level;
	if (r->have_done && !r->have_exit) {
		res->exit_code = r->done.exit_code & 0xff;
		res->cpu_us = r->done.cpu_us;
		res->peak_rss_bytes = r->done.maxrss_kib * 1024;
	} else if (WIFSIGNALED(ws)) {
		res->term_signal = WTERMSIG(ws);
		res->exit_code = 128 + res->term_signal;
	} else {
		res->exit_code = WEXITSTATUS(ws);
	}
	/* The kernel enforces whole seconds, and the rusage the template reads can come out well
	 * under what it enforced on a loaded machine (0.79 s for a 1 s limit, seen on a 2-CPU
	 * host at load 20). Nothing else sends a cell's first process a SIGKILL we did not (it
	 * ignores its own namespace's; a memory cgroup's kill is told apart by cgroup_result),
	 * so half the limit is proof. */
	uint64_t cpu_limit_us = (sb->cfg->limits[SNAPCELL_LIMIT_CPU_MS] + 999) / 1000 * 1000000 / 2;
	if (r->forced == FORCED_TIMEOUT)
		res->status = SNAPCELL_STATUS_TIMEOUT;
	else if (r->forced == FORCED_OUTPUT)
		res->status = SNAPCELL_STATUS_OUTPUT_LIMIT;
	else if (r->forced == FORCED_PROTOCOL || r->forced == FORCED_FILES)
		res->status = SNAPCELL_STATUS_KILLED;
	else if (r->forced == FORCED_CANCEL)
		res->status = SNAPCELL_STATUS_CANCELLED;
	else if (r->forced == FORCED_EXPIRED)
		res->status = SNAPCELL_STATUS_EXPIRED;
	else if (res->term_signal == SIGXCPU ||
		 (res->term_signal == SIGKILL && res->cpu_us >= cpu_limit_us)) {
		res->status = SNAPCELL_STATUS_TIMEOUT;
		res->limits_hit |= SNAPCELL_HIT_CPU;
	} else if (res->term_signal)
		res->status = SNAPCELL_STATUS_KILLED;
	else {
		res->status = guest_status(r, res->exit_code);
		if (r->have_done)
			res->limits_hit |= r->done.limits_hit & guest_flags;
	}
}

/* A fresh cell in a memory cgroup of its own: the kernel's figures, not the cell's. The peak
 * is what the host was charged (pages, page tables, kernel memory); an out-of-memory kill at
 * the cgroup's limit is the memory limit, and when it ended the cell, the run's status. The
 * template reads them into the exit record and removes the cgroup when it reaps the cell; a
 * run that ended at DONE, before that record, reads the cgroup itself, or, when the template
 * has already removed it, waits for the record (written right after). */
static void cgroup_result(struct sc_run *r, const struct snapcell_sandbox *sb,
			  struct snapcell_result *res)
{
	struct sc_cgroup_usage u;
	if (sb->cgroup.dir_fd < 0 || !r->target->reports_exit)
		return;
	bool read = !r->have_exit && sc__cgroup_cell_usage(&sb->cgroup, r->cell->id, &u) == 0;
	uint64_t deadline = sc__deadline_ms(EXIT_GRACE_US / 1000);
	while (!read && !r->have_exit && !r->exit_eof &&
	       sc__wait_fd(r->cell->fds[SC_CELL_EXIT], POLLIN, deadline) == 0)
		read_exit(r);
	if (!read && !(r->have_exit && (r->exit.flags & SC_EXIT_CGROUP)))
		return;
	if (!read)
		u = (struct sc_cgroup_usage){r->exit.charged_peak_bytes, r->exit.oom_kills};
	res->peak_memory_bytes = u.peak_bytes;
	if (u.oom_kills == 0)
		return;
	res->limits_hit |= SNAPCELL_HIT_MEMORY;
	if (r->forced == NOT_FORCED && res->term_signal == SIGKILL)
		res->status = SNAPCELL_STATUS_MEMORY;
}

/* Takes the first small block now, so a run that cannot have one fails before it starts. */
static int stream_init(struct stream *s, uint64_t cap, uint32_t flag)
{
	sc__buf_init(&s->buf, (size_t)cap);
	s->hit_flag = flag;
	return sc__buf_reserve(&s->buf, 0) < 0 ? -ENOMEM : 0;
}

/* Appends the note after the cell's own stderr, within the cap. */
static void append_note(struct stream *s, const char *note)
{
	sc__buf_add_some(&s->buf, note, strlen(note), NULL);
}

/* The run's own tools, for the cell's `tools` module: a TOOLS frame before the code. */
static int queue_tools(struct sc_run *r)
{
	if (!r->tools || !r->tools->n_tools)
		return 0;
	char *list = sc__tools_guest_json(r->tools); /* bounded by sc__tools_check_run */
	int rc =
		list ? queue_frame(&r->send, SC_FRAME_TOOLS, list, strlen(list), NULL, 0) : -ENOMEM;
	free(list);
	return rc;
}

static int prepare(struct sc_run *r, const struct snapcell_sandbox *sb, const char *code,
		   size_t len)
{
	const uint64_t *l = sb->cfg->limits;
	if (stream_init(&r->out, l[SNAPCELL_LIMIT_STDOUT_BYTES], SNAPCELL_HIT_STDOUT) < 0 ||
	    stream_init(&r->err, l[SNAPCELL_LIMIT_STDERR_BYTES], SNAPCELL_HIT_STDERR) < 0)
		return -ENOMEM;
	sc__frame_reader_init(&r->reader, SC_FRAME_DEFAULT_CAP);
	sc__buf_init(&r->send.bytes, SIZE_MAX); /* the loop bounds it: BACKLOG_MAX_BYTES */
	int rc = queue_tools(r);
	if (rc < 0)
		return rc;
	return queue_frame(&r->send, r->learn ? SC_FRAME_RUN_LEARN : SC_FRAME_RUN, code, len, NULL,
			   0);
}

static void release(struct sc_run *r)
{
	sc__buf_free(&r->out.buf);
	sc__buf_free(&r->err.buf);
	sc__buf_free(&r->send.bytes);
	free(r->calls);
	free(r->held_args);
	free(r->value_json);
	if (r->tools) {
		sc__tools_free(r->tools);
		free(r->tools);
	}
	sc__decisions_free(r->decisions, r->n_decisions);
	sc__cell_frozen_free(r->frozen); /* ended while paused: killed, not continued */
	sc__frame_reader_reset(&r->reader);
	free_queue(r);
	sc__calls_destroy(&r->flight);
}

static void hand_over(struct sc_run *r, struct snapcell_result *res)
{
	if (r->note[0])
		append_note(&r->err, r->note);
	/* Both hold their first block (stream_init): taking them cannot fail. */
	res->stdout_buf = sc__buf_take(&r->out.buf, &res->stdout_len);
	res->stderr_buf = sc__buf_take(&r->err.buf, &res->stderr_len);
	res->stdout_truncated = r->out.truncated, res->stderr_truncated = r->err.truncated;
	res->tool_calls = r->calls;
	res->n_tool_calls = r->n_calls;
	res->n_tool_calls_dropped = r->n_calls_dropped;
	r->calls = NULL;
	res->decisions = r->decisions;
	res->n_decisions = r->n_decisions;
	r->decisions = NULL;
	r->n_decisions = 0;
}

/* Starts a run's clock and queues its code. */
static int run_start(struct sc_run *r, const struct snapcell_sandbox *sb,
		     const struct sc_run_request *req)
{
	int rc = prepare(r, sb, req->code, req->code_len);
	r->start_us = sc__now_us();
	r->deadline_us = r->start_us + sb->cfg->limits[SNAPCELL_LIMIT_WALL_MS] * 1000;
	if (sb->level == SNAPCELL_ISOLATION_RLIMITS)
		r->files_watch_us = r->start_us + FILES_WATCH_US;
	return rc;
}

/* The result of a run whose loop returned rc (not RUN_PAUSED), or the error. */
static int run_end(struct sc_run *r, struct snapcell_sandbox *sb, int rc,
		   struct snapcell_result **out, bool *alive, struct snapcell_error *err)
{
	struct snapcell_result *res = rc == 0 ? calloc(1, sizeof(*res)) : NULL;
	if (rc == 0 && !res)
		rc = -ENOMEM;
	*alive = rc == 0 && r->have_done && r->forced == NOT_FORCED;
	if (rc < 0) {
		kill_cell(r, FORCED_TIMEOUT);
		return rc == -ENOMEM ? sc__err(err, rc, "run: result")
				     : sc__err(err, rc,
					       "run: the template did not report the cell's exit");
	}
	res->wall_us = sc__now_us() - r->start_us - r->paused_total_us;
	derive_result(r, sb, res);
	cgroup_result(r, sb, res);
	if (r->target->reports_exit && !r->have_exit && !r->have_done && r->forced == NOT_FORCED) {
		/* The exit pipe closed with no record: the template died, and its cells with it
		 * (they are in its pid namespace). Not an exit status of 0. */
		snprintf(r->note, sizeof(r->note),
			 "snapcell: the sandbox's template exited during the run; the cell was "
			 "killed with it\n");
		res->status = SNAPCELL_STATUS_KILLED;
		res->term_signal = SIGKILL;
		res->exit_code = 128 + SIGKILL;
	}
	hand_over(r, res);
	if (!r->target->reports_exit && !r->have_done && r->forced == NOT_FORCED)
		res->status = SNAPCELL_STATUS_KILLED; /* exit code and signal unknown */
	/* Only a run that ended ok has a value: one that ended otherwise never got past it. */
	if (res->status == SNAPCELL_STATUS_OK && r->have_value && r->have_done) {
		res->value_state = r->value_state;
		res->value_json = r->value_json;
		r->value_json = NULL;
	}
	*out = res;
	return 0;
}

static bool dir_is_empty(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return true;
	}
	struct dirent *e;
	bool empty = true;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	return empty;
}

bool sc__output_pending(int out_fd)
{
	return out_fd >= 0 && !dir_is_empty(out_fd);
}

/* The walk's bounds: /output holds at most 131,072 inodes (the template's tmpfs option), so a
 * tree that stands still needs fewer visits than this; only a live writer gets near. */
#define COLLECT_VISITS	    (2u * 131072u)
#define COLLECT_DEADLINE_MS 5000

void sc__output_collect(const struct snapcell_sandbox *sb, int out_fd, struct snapcell_result *res)
{
	const uint64_t *l = sb->cfg->limits;
	struct sc_collect_caps caps = {
		l[SNAPCELL_LIMIT_OUTPUT_FILES],	      l[SNAPCELL_LIMIT_OUTPUT_FILE_BYTES],
		l[SNAPCELL_LIMIT_OUTPUT_TOTAL_BYTES], l[SNAPCELL_LIMIT_OUTPUT_DEPTH],
		l[SNAPCELL_LIMIT_OUTPUT_PATH_BYTES],  COLLECT_VISITS,
		sc__deadline_ms(COLLECT_DEADLINE_MS)};
	sc__collect(out_fd, &caps, res);
}

/* A fresh cell: pid 1 of its namespace, so its death (through the pidfd) takes every process
 * of the cell; the template reports its exit. */
static void fresh_kill(const struct sc_run_target *t)
{
	syscall(SYS_pidfd_send_signal, t->cell->fds[SC_CELL_PIDFD], SIGKILL, NULL, 0);
}

/* Dead before the walk (its first process exits only after the rest of its namespace), so
 * nothing can change the tree while it is read. */
static int fresh_collect(const struct sc_run_target *t, struct snapcell_sandbox *sb,
			 struct snapcell_result *res)
{
	if (!sc__output_pending(t->cell->fds[SC_CELL_OUTPUT]))
		return 0;
	fresh_kill(t);
	sc__wait_fd(t->cell->fds[SC_CELL_PIDFD], POLLIN, sc__deadline_ms(5000));
	sc__output_collect(sb, t->cell->fds[SC_CELL_OUTPUT], res);
	return 0;
}

int sc__run_prepare(const struct snapcell_sandbox *sb, const char *code, size_t code_len,
		    const struct snapcell_run_options *opts, struct sc_run_request *req,
		    struct snapcell_result **out, struct snapcell_error *err)
{
	if (code_len == SIZE_MAX)
		code_len = strlen(code);
	if (code_len > SC_FRAME_DEFAULT_CAP)
		return sc__err(err, SNAPCELL_E_TOO_BIG, "run: code is %zu bytes, the cap is %u",
			       code_len, SC_FRAME_DEFAULT_CAP);
	*req = (struct sc_run_request){code, code_len, -1, NULL, false};
	int rc = sc__run_options(opts, &req->cancel_fd, &req->tools, err);
	if (rc == 0)
		rc = sc__tools_check_run(sb->cfg, req->tools, err);
	if (rc < 0 || !sc__cancel_fired(req->cancel_fd))
		return rc;
	struct snapcell_result *res = calloc(1, sizeof(*res));
	if (res) {
		res->stdout_buf = calloc(1, 1);
		res->stderr_buf = calloc(1, 1);
	}
	if (!res || !res->stdout_buf || !res->stderr_buf) {
		snapcell_result_free(res);
		return sc__err(err, -ENOMEM, "run: result");
	}
	res->status = SNAPCELL_STATUS_CANCELLED;
	res->isolation = sb->level;
	*out = res;
	return 1;
}

/* A fresh cell's owner: the cell, its network, whether its pages are learned from. */
struct fresh {
	struct sc_cell cell;
	struct sc_run_target t;
	struct sc_gate_cell *gate;
	bool learn;
	uint32_t files_id; /* the run's files' directory (sc__run_files_stage), or 0 */
};

static char *copy_bytes(const char *src, size_t len)
{
	char *dst = malloc(len + 1);
	if (dst) {
		memcpy(dst, src, len);
		dst[len] = 0;
	}
	return dst;
}

static char *copy_text(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* A paused run's result: copies of everything so far, and the pending call. */
static int paused_result(const struct sc_run *r, const struct snapcell_sandbox *sb,
			 struct snapcell_result **out)
{
	struct snapcell_result *res = calloc(1, sizeof(*res));
	struct snapcell_pending_call *pc = calloc(1, sizeof(*pc));
	if (!res || !pc) {
		free(res);
		free(pc);
		return -ENOMEM;
	}
	res->pending = pc;
	res->status = SNAPCELL_STATUS_PAUSED;
	res->isolation = sb->level;
	res->limits_hit = r->hit;
	res->wall_us = r->paused_us - r->start_us - r->paused_total_us;
	res->stdout_buf = copy_bytes(r->out.buf.data, r->out.buf.len);
	res->stdout_len = r->out.buf.len;
	res->stdout_truncated = r->out.truncated;
	res->stderr_buf = copy_bytes(r->err.buf.data, r->err.buf.len);
	res->stderr_len = r->err.buf.len;
	res->stderr_truncated = r->err.truncated;
	if (r->n_calls && (res->tool_calls = malloc(r->n_calls * sizeof(*r->calls)))) {
		memcpy(res->tool_calls, r->calls, r->n_calls * sizeof(*r->calls));
		res->n_tool_calls = r->n_calls;
	}
	res->n_tool_calls_dropped = r->n_calls_dropped;
	int rc = sc__decisions_copy(r->decisions, r->n_decisions, &res->decisions);
	res->n_decisions = res->decisions ? r->n_decisions : 0;
	pc->id = r->held_id;
	memcpy(pc->name, r->held_log.name, sizeof(pc->name));
	pc->arguments = strdup(r->held_args);
	if (rc < 0 || !res->stdout_buf || !res->stderr_buf || !pc->arguments ||
	    (r->n_calls && !res->tool_calls)) {
		snapcell_result_free(res);
		return -ENOMEM;
	}
	*out = res;
	return 0;
}

/* Records the decision on the held call; call_index is the entry its answer will get. */
static void record_decision(struct sc_run *r, enum snapcell_verdict verdict, const char *text,
			    const char *decided_by, size_t call_index)
{
	if (SC_ARRAY_ADD(r->decisions, r->n_decisions, SC_ARRAY_NO_CAP) < 0)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct snapcell_decision *d = &r->decisions[r->n_decisions];
	*d = (struct snapcell_decision){
		.pending_id = r->held_id,
		.arguments = copy_text(r->held_args),
		.verdict = verdict,
		.text = copy_text(text),
		.decided_by = copy_text(decided_by),
		.decided_at_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000,
		.waited_us = sc__now_us() - r->paused_us,
		.call_index = call_index,
	};
	memcpy(d->name, r->held_log.name, sizeof(d->name));
	if (d->arguments)
		r->n_decisions++;
}

/* Drives a run (rc: 0 to go on, or its start's failure) until it ends, handing it to its
 * owner and freeing r, or pauses, listing r. */
static int drive(struct snapcell_sandbox *sb, struct sc_run *r, int rc,
		 struct snapcell_result **out, struct snapcell_error *err)
{
	if (rc == 0)
		rc = loop(r, sb);
	if (rc != RUN_PAUSED)
		end_calls(r);
	if (rc == RUN_PAUSED && paused_result(r, sb, out) == 0) {
		r->cancel_fd = -1; /* the caller may free its token once the run returned */
		if (r->t.pausing)
			r->t.pausing(&r->t);
		/* No /tmp watch while it waits: its processes are stopped (freeze_for_pause). */
		uint64_t expires = r->paused_us + sb->cfg->limits[SNAPCELL_LIMIT_PAUSE_MS] * 1000;
		if (sc__paused_add(sb, r, r->held_id, expires, r->ctx) == 0)
			return 0;
		snapcell_result_free(*out);
		*out = NULL;
	}
	if (rc == RUN_PAUSED) {
		violation(r, "no memory to pause the run");
		rc = loop(r, sb);
		end_calls(r);
	}
	bool alive;
	rc = run_end(r, sb, rc, out, &alive, err);
	r->finish(sb, r->ctx, rc, alive, rc == 0 ? *out : NULL);
	release(r);
	free(r);
	return rc;
}

int sc__run_start(struct snapcell_sandbox *sb, const struct sc_run_target *t,
		  const struct sc_run_request *req, sc_run_finish finish, void *ctx,
		  struct snapcell_result **out, struct snapcell_error *err)
{
	struct sc_run *r = calloc(1, sizeof(*r));
	if (!r) {
		finish(sb, ctx, -ENOMEM, false, NULL);
		return sc__err(err, -ENOMEM, "run");
	}
	*r = (struct sc_run){.t = *t,
			     .finish = finish,
			     .ctx = ctx,
			     .cell = t->cell,
			     .cancel_fd = req->cancel_fd,
			     .learn = req->learn,
			     .spin = {.window_us = CALL_SPIN_US}};
	r->target = &r->t;
	sc__calls_init(&r->flight);
	if (req->tools && !(r->tools = sc__tools_dup(req->tools))) {
		finish(sb, ctx, -ENOMEM, false, NULL);
		release(r);
		free(r);
		return sc__err(err, -ENOMEM, "run: its tools");
	}
	return drive(sb, r, run_start(r, sb, req), out, err);
}

int sc__run_end_paused(struct snapcell_sandbox *sb, struct sc_run *r, enum snapcell_verdict why,
		       struct snapcell_result **out, struct snapcell_error *err)
{
	uint64_t waited = sc__now_us() - r->paused_us;
	r->paused_total_us += waited;
	r->deadline_us += waited;
	record_decision(r, why, NULL, NULL, SIZE_MAX);
	kill_cell(r, FORCED_EXPIRED);
	return drive(sb, r, 0, out, err);
}

/* The end of a fresh cell's run: its network, its /output, its cell. */
static void fresh_finish(struct snapcell_sandbox *sb, void *ctx, int rc, bool alive,
			 struct snapcell_result *res)
{
	struct fresh *f = ctx;
	sc__gate_cell_stop(f->gate, rc == 0 ? res : NULL);
	if (rc == 0)
		f->t.collect(&f->t, sb, res);
	if (rc == 0 && alive && f->learn)
		sc__prefault_learn(sb, &f->cell); /* retires it when done */
	else
		sc__sandbox_retire_cell(sb, &f->cell);
	if (f->files_id)
		sc__run_files_remove(sb, f->files_id);
	free(f);
}

int snapcell_sandbox_run(struct snapcell_sandbox *sb, const char *code, size_t code_len,
			 const struct snapcell_run_options *opts, struct snapcell_result **out,
			 struct snapcell_error *err)
{
	if (!sb || !code || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "run: NULL argument");
	struct sc_run_request req;
	int rc = sc__run_prepare(sb, code, code_len, opts, &req, out, err);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	sc__paused_sweep(sb);
	struct fresh *f = calloc(1, sizeof(*f));
	if (!f)
		return sc__err(err, -ENOMEM, "run");
	/* A run with files of its own gets a cell forked for it, whose /input shows them; the
	 * parked cells stay for the runs without. */
	const struct snapcell_run_file *files;
	size_t n_files = sc__run_options_files(opts, &files);
	rc = n_files ? sc__run_files_stage(sb, files, n_files, &f->files_id, err) : 0;
	if (rc == 0)
		rc = f->files_id ? sc__sandbox_files_cell(sb, f->files_id, &f->cell, err)
				 : sc__sandbox_take_cell(sb, &f->cell, err);
	if (rc < 0) {
		if (f->files_id)
			sc__run_files_remove(sb, f->files_id);
		free(f);
		return rc;
	}
	f->t = (struct sc_run_target){&f->cell, true, fresh_kill, fresh_collect,
				      NULL,	NULL, NULL,	  NULL};
	req.learn = f->learn = !f->files_id && sc__prefault_wants(sb, f->cell.id);
	if (f->cell.n_net &&
	    (rc = sc__gate_cell_start(sb->gate, f->cell.net, f->cell.n_net,
				      sc__deadline_ms(sb->cfg->limits[SNAPCELL_LIMIT_WALL_MS]),
				      &f->gate, err)) < 0) {
		sc__sandbox_retire_cell(sb, &f->cell);
		if (f->files_id)
			sc__run_files_remove(sb, f->files_id);
		free(f);
		return rc;
	}
	return sc__run_start(sb, &f->t, &req, fresh_finish, f, out, err);
}

/* Checks a decision's verdict and text before anything changes. */
static int check_verdict(enum snapcell_verdict verdict, const char *text,
			 struct snapcell_error *err)
{
	if (verdict != SNAPCELL_VERDICT_APPROVED && verdict != SNAPCELL_VERDICT_REJECTED &&
	    verdict != SNAPCELL_VERDICT_VALUE)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "resume: the verdict must be approved, rejected or value, not %d",
			       (int)verdict);
	if (text && strlen(text) > SC_FRAME_DEFAULT_CAP / 2)
		return sc__err(err, SNAPCELL_E_TOO_BIG,
			       "resume: the %s is %zu bytes; the cap is %u",
			       verdict == SNAPCELL_VERDICT_VALUE ? "value" : "reason", strlen(text),
			       SC_FRAME_DEFAULT_CAP / 2);
	if (verdict != SNAPCELL_VERDICT_VALUE)
		return 0;
	if (!text)
		return sc__err(err, SNAPCELL_E_INVAL, "resume: a value verdict needs the value");
	json_error_t jerr;
	json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &jerr);
	if (!v)
		return sc__err(err, SNAPCELL_E_INVAL, "resume: the value is not JSON: %s",
			       jerr.text);
	json_decref(v);
	return 0;
}

int snapcell_sandbox_resume(struct snapcell_sandbox *sb, uint64_t pending_id,
			    enum snapcell_verdict verdict, const char *text, const char *decided_by,
			    const struct snapcell_run_options *opts, struct snapcell_result **out,
			    struct snapcell_error *err)
{
	if (!sb || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "resume: NULL argument");
	int cancel_fd;
	const struct snapcell_config *tools;
	int rc = check_verdict(verdict, text, err);
	if (rc == 0)
		rc = sc__run_options(opts, &cancel_fd, &tools, err);
	if (rc == 0 && tools)
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "resume: a run's tools are given when it starts, not at a resume");
	const struct snapcell_run_file *files;
	if (rc == 0 && sc__run_options_files(opts, &files))
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "resume: a run's files are given when it starts, not at a resume");
	if (rc < 0)
		return rc;
	sc__paused_sweep(sb);
	struct sc_run *r;
	struct snapcell_result *ended;
	if (sc__paused_take(sb, pending_id, &r, &ended) < 0)
		return sc__err(err, -ENOENT,
			       "resume: no run of this sandbox waits with pending id %" PRIu64
			       " (resumed already, or never paused here)",
			       pending_id);
	if (ended) {
		*out = ended;
		return 0;
	}
	uint64_t now = sc__now_us();
	if (now >= r->paused_us + sb->cfg->limits[SNAPCELL_LIMIT_PAUSE_MS] * 1000)
		return sc__run_end_paused(sb, r, SNAPCELL_VERDICT_EXPIRED, out, err);
	/* Continued before the answer goes: the wall clock runs again from here. */
	sc__cell_thaw(r->frozen);
	r->frozen = NULL;
	now = sc__now_us();
	r->paused_total_us += now - r->paused_us;
	r->deadline_us += now - r->paused_us;
	r->cancel_fd = cancel_fd;
	pthread_mutex_lock(&sb->lock);
	sb->n_paused_slots--;
	pthread_mutex_unlock(&sb->lock);
	r->held_slot = false;
	/* Frames the code sent while the call waited (other threads' calls, awaited calls, its
	 * DONE) are read by the loop as usual once the held call is answered. */
	struct sc_call_outcome o = {.log = r->held_log};
	rc = sc__tool_decided(r->held, r->held_args, verdict, text, SC_FRAME_DEFAULT_CAP - 1,
			      r->deadline_us, r->cancel_fd, &o);
	record_decision(r, verdict, text, decided_by,
			r->n_calls < MAX_LOGGED_CALLS ? r->n_calls : SIZE_MAX);
	free(r->held_args);
	r->held_args = NULL;
	r->held = NULL;
	answer_call(r, r->held_call, rc, &o);
	return drive(sb, r, 0, out, err);
}

void snapcell_result_free(struct snapcell_result *res)
{
	if (!res)
		return;
	free(res->stdout_buf);
	free(res->stderr_buf);
	free(res->tool_calls);
	free(res->value_json);
	if (res->pending)
		free(res->pending->arguments);
	free(res->pending);
	sc__decisions_free(res->decisions, res->n_decisions);
	sc__artifacts_free(res);
	sc__net_events_free(res);
	free(res);
}
