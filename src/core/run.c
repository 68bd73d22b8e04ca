/* One run: deliver code to a run target (a fresh cell, run_fresh.c, or a session worker:
 * session.c makes those), serve its tool calls on this thread (run_calls.c), read its output
 * under caps, enforce the wall clock and the cancellation token, and derive the result (from
 * the cell's DONE report, trusted only for its own result, or from the template's exit record
 * when none came). The target kills and collects in its own way; a pause for a decision is
 * run_resume.c's; this file knows nothing of sessions. */
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
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "net/gate.h"
#include "run.h"
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

/* A mechanism with the files watch (sc_cell_ops.files_over: level rlimits) has no tmpfs per
 * cell: its /tmp and /output are directories on the work directory's filesystem (/dev/shm,
 * host memory, by default), which a cell filled at ~2.5 GiB/s. The host measures them while
 * the cell runs, every FILES_WATCH_US plus ten times what the last walk took, at most
 * FILES_WATCH_MAX_US more (the walk's cost is the code's to choose: 4,000 descriptors made it
 * ~30 ms, and ten times that let the cell write 0.5 GiB past the bound), and kills the cell
 * once they hold more than its /tmp and /output sizes together (what a tmpfs of each would
 * allow), more than FILES_MAX_ENTRIES entries, or a directory too deep to walk. */
#define FILES_WATCH_US	   20000
#define FILES_WATCH_MAX_US 20000
#define FILES_MAX_ENTRIES  131072

/* Answers not yet sent and calls not yet served, in bytes: past this the loop stops reading
 * the cell's frames until they drain (code that sends calls and never reads their answers
 * then blocks in its own write; nothing on the host grows). */
#define BACKLOG_MAX_BYTES (64u << 20)

void sc__run_kill(struct sc_run *r, enum forced why)
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
		sc__run_kill(r, FORCED_OUTPUT);
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

int sc__run_queue_frame(struct outbuf *o, uint8_t type, const void *head, size_t head_len,
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

void sc__run_violation(struct sc_run *r, const char *why)
{
	snprintf(r->note, sizeof(r->note),
		 "snapcell: the cell broke the frame protocol (%s) and was killed\n", why);
	sc__run_kill(r, FORCED_PROTOCOL);
}

/* Runs the tool on this thread (the caller's) and queues its answer. */
void sc__run_send_pending(struct sc_run *r)
{
	struct outbuf *o = &r->send;
	ssize_t n = send(r->cell->fds[SC_CELL_RPC], o->bytes.data + o->off, o->bytes.len - o->off,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n > 0)
		o->off += (size_t)n;
	else if (n < 0 && errno != EAGAIN && errno != EINTR)
		o->off = o->bytes.len; /* the cell is gone; its exit says why */
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
		sc__run_violation(r, rc == -ENOMEM ? "out of memory reading the value"
						   : "malformed value");
}

static void on_frame(struct sc_run *r, struct snapcell_sandbox *sb)
{
	uint8_t type = sc__frame_type(&r->reader);
	if (r->forced != NOT_FORCED)
		return; /* being killed: nothing more is served */
	if (r->have_done)
		sc__run_violation(r, "frame after DONE");
	else if (type == SC_FRAME_CALL)
		sc__run_call_frame(r, sb);
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
		sc__run_violation(r, "unexpected frame");
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
			sc__run_violation(r, rc == -EMSGSIZE ? "oversized frame" : "out of memory");
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

/* Whether the frames queued for the cell and for the host's tools are past their bound: the
 * loop stops reading the cell's frames until they drain. */
static bool backlogged(const struct sc_run *r)
{
	return r->send.bytes.len - r->send.off + r->queued_bytes > BACKLOG_MAX_BYTES;
}

/* Whether the cell's socket still holds bytes it wrote: a dead cell's last frames (a value of
 * up to 256 KiB, then DONE) can still be there when its exit and its pipes' ends are seen,
 * and a read takes 64 KiB at a time. */
static bool frames_waiting(const struct sc_run *r)
{
	int fd = r->cell->fds[SC_CELL_RPC], n = 0;
	return fd >= 0 && ioctl(fd, FIONREAD, &n) == 0 && n > 0;
}

/* A run ends at the cell's DONE report, or, when it never came, at the template's report of
 * the cell's death with both pipes closed and its frames read. */
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
	/* Frames are waited for only while they can still be read and used: not once the cell
	 * was killed, nor past the backlog (the loop reads none then). */
	bool unread = r->forced == NOT_FORCED && !backlogged(r) && frames_waiting(r);
	return (r->out.eof && r->err.eof && !unread) || now > r->deadline_us + DRAIN_GRACE_US;
}

/* Descriptors in flight in a socket's queue, which no process's table holds and only the
 * host can count (inflight.c), for the mechanism's walk. */
static bool in_flight_over(const void *ctx, uint64_t room)
{
	const struct snapcell_sandbox *sb = ctx;
	return sc__inflight_over(sb, room, sb->cfg->limits[SNAPCELL_LIMIT_FILE_BYTES]);
}

/* Whether the cell's /tmp and /output (a session's family shares its anchor's) are over
 * their sizes together, as the mechanism measures them. */
static bool files_over(const struct sc_run *r, const struct snapcell_sandbox *sb)
{
	const struct sc_cell *c = r->target->files ? r->target->files : r->cell;
	const uint64_t *l = sb->cfg->limits;
	struct sc_files_bounds b = {.max_bytes = l[SNAPCELL_LIMIT_TMP_BYTES] +
						 l[SNAPCELL_LIMIT_OUTPUT_TOTAL_BYTES] + (1u << 20),
				    .max_entries = FILES_MAX_ENTRIES,
				    .file_bytes = l[SNAPCELL_LIMIT_FILE_BYTES],
				    .in_flight_over = in_flight_over,
				    .ctx = sb};
	return sb->cells.ops->files_over(&sb->cells, c, &b);
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
		sc__run_kill(r, FORCED_FILES);
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

/* Returns 0 when the cell is gone and reaped, RUN_PAUSED when a call waits for a decision
 * (the cell blocked in it), or SNAPCELL_E_TEMPLATE. */
static int loop(struct sc_run *r, struct snapcell_sandbox *sb)
{
	for (;;) {
		uint64_t now = sc__now_us();
		if (r->held && (r->forced != NOT_FORCED || r->have_done))
			sc__run_drop_held(r, sb);
		sc__run_serve_queue(r, sb);
		/* A run pauses once nothing of it runs on the host: awaited calls started before
		 * the held one are answered first. */
		if (r->held && !sc__calls_in_flight(&r->flight) &&
		    sc__run_freeze_for_pause(r, sb)) {
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
			sc__run_kill(r, FORCED_TIMEOUT);
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
		bool backlog = backlogged(r);
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
			sc__run_take_answers(r);
		if (pf[4].revents)
			sc__run_kill(r, FORCED_CANCEL);
		if (pf[0].revents)
			read_stream(r, pf[0].fd, &r->out);
		if (pf[1].revents)
			read_stream(r, pf[1].fd, &r->err);
		if (pf[2].revents)
			read_exit(r);
		if (pf[3].revents & POLLOUT)
			sc__run_send_pending(r);
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

/* A process's CPU time so far (its CPU clock: no permission needed where its pid is visible),
 * or 0. */
static uint64_t cell_cpu_ns(int pid)
{
	struct timespec ts;
	if (clock_gettime((clockid_t)((unsigned)~pid << 3 | 2 /* CPUCLOCK_SCHED */), &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A DONE with SC_DONE_HOST_FIGURES: the cell's own CPU time in the run and its resident peak
 * (VmHWM, which a reset clears), added to the children's the cell sent. */
static void add_cell_figures(const struct sc_run *r, struct snapcell_result *res)
{
	uint64_t now = r->cell_cpu_start_ns ? cell_cpu_ns(r->cell_pid) : 0;
	if (now > r->cell_cpu_start_ns)
		res->cpu_us += (now - r->cell_cpu_start_ns) / 1000;
	char path[64], text[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", r->cell_pid);
	if (r->cell_pid <= 0 ||
	    sc__read_kept_at(AT_FDCWD, path, &r->cell->status_fd, text, sizeof(text)) < 0)
		text[0] = 0;
	const char *hwm = strstr(text, "\nVmHWM:");
	uint64_t peak = hwm ? strtoull(hwm + 7, NULL, 10) * 1024 : 0;
	if (peak > res->peak_rss_bytes)
		res->peak_rss_bytes = peak;
}

static void derive_result(const struct sc_run *r, const struct snapcell_sandbox *sb,
			  struct snapcell_result *res)
{
	const uint32_t guest_flags = SNAPCELL_HIT_MEMORY | SNAPCELL_HIT_PROCESSES |
				     SNAPCELL_HIT_FILE_SIZE | SNAPCELL_HIT_TMP;
	int ws = r->exit.wait_status;
	res->limits_hit = r->hit;
	/* A cell reset in place: its exit record counts its whole life. */
	uint64_t base = r->cell->cpu_base_us;
	res->cpu_us = r->exit.cpu_us > base ? r->exit.cpu_us - base : 0;
	res->peak_rss_bytes = r->exit.maxrss_kib * 1024;
	res->isolation = sb->cells.level;
	if (r->have_done && !r->have_exit) {
		res->exit_code = r->done.exit_code & 0xff;
		res->cpu_us = r->done.cpu_us;
		res->peak_rss_bytes = r->done.maxrss_kib * 1024;
		if (r->done.flags & SC_DONE_HOST_FIGURES)
			add_cell_figures(r, res);
	} else if (WIFSIGNALED(ws)) {
		res->term_signal = WTERMSIG(ws);
		res->exit_code = 128 + res->term_signal;
	} else {
		res->exit_code = WEXITSTATUS(ws);
	}
	/* The kernel enforces whole seconds, and the rusage the template reads can come out well
	 * under what it enforced on a loaded machine (0.79 s for a 1 s limit, seen on a 2-CPU
	 * host at load 20). Nothing else sends a cell's first process a SIGKILL we did not (it
	 * ignores its own namespace's; a memory cgroup's kill is told apart by usage_result),
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

/* A fresh cell whose mechanism has the kernel's memory figures (sc_cell_ops.usage: a memory
 * cgroup of its own, at level cgroups): those, not the cell's. The peak is what the host was
 * charged (pages, page tables, kernel memory); an out-of-memory kill at the cgroup's limit is
 * the memory limit, and when it ended the cell, the run's status. The template reads them
 * into the exit record and removes the cgroup when it reaps the cell; a run that ended at
 * DONE, before that record, reads the cgroup itself, or, when the template has already
 * removed it, waits for the record (written right after). */
static void usage_result(struct sc_run *r, const struct snapcell_sandbox *sb,
			 struct snapcell_result *res)
{
	struct sc_cgroup_usage u;
	if (!sb->cells.ops->usage || !r->target->reports_exit)
		return;
	bool read = !r->have_exit &&
		    sb->cells.ops->usage(&sb->cells, r->cell->id,
					 r->cell->kept ? r->cell->usage_fds : NULL, &u) == 0;
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
	int rc = list ? sc__run_queue_frame(&r->send, SC_FRAME_TOOLS, list, strlen(list), NULL, 0)
		      : -ENOMEM;
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
	return sc__run_queue_frame(&r->send, r->learn ? SC_FRAME_RUN_LEARN : SC_FRAME_RUN, code,
				   len, NULL, 0);
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
	if (r->frozen) /* ended while paused: killed, not continued */
		r->cells->frozen_free(r->frozen);
	sc__frame_reader_reset(&r->reader);
	sc__run_free_queue(r);
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

/* A fresh cell of a sandbox that resets its cells in place: what its runs read, looked up at
 * its first run and kept for the next (cell.h). */
static void keep_cell(struct sc_cell *cell, const struct snapcell_sandbox *sb)
{
	if (!cell->kept) {
		cell->kept = true;
		cell->pid = -1;
		cell->status_fd = -1;
		for (int i = 0; i < SC_CGROUP_USAGE_FILES; i++)
			cell->usage_fds[i] = -1;
	}
	if (cell->pid <= 0 && sb->cells.ops->pid) /* again after a failed lookup (EMFILE) */
		cell->pid = sb->cells.ops->pid(cell);
}

/* Starts a run's clock and queues its code. */
static int run_start(struct sc_run *r, const struct snapcell_sandbox *sb,
		     const struct sc_run_request *req)
{
	int rc = prepare(r, sb, req->code, req->code_len);
	if (snapcell_sandbox_reuse(sb) && r->target->reports_exit) {
		keep_cell(r->cell, sb);
		if ((r->cell_pid = r->cell->pid) > 0)
			r->cell_cpu_start_ns = cell_cpu_ns(r->cell_pid);
	}
	r->start_us = sc__now_us();
	r->deadline_us = r->start_us + sb->cfg->limits[SNAPCELL_LIMIT_WALL_MS] * 1000;
	if (sb->cells.ops->files_over)
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
		sc__run_kill(r, FORCED_TIMEOUT);
		return rc == -ENOMEM ? sc__err(err, rc, "run: result")
				     : sc__err(err, rc,
					       "run: the template did not report the cell's exit");
	}
	res->wall_us = sc__now_us() - r->start_us - r->paused_total_us;
	derive_result(r, sb, res);
	usage_result(r, sb, res);
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
	res->isolation = sb->cells.level;
	*out = res;
	return 1;
}

/* Drives a run (rc: 0 to go on, or its start's failure) until it ends, handing it to its
 * owner and freeing r, or pauses, listing r. */
int sc__run_drive(struct snapcell_sandbox *sb, struct sc_run *r, int rc,
		  struct snapcell_result **out, struct snapcell_error *err)
{
	if (rc == 0)
		rc = loop(r, sb);
	if (rc != RUN_PAUSED)
		sc__run_end_calls(r);
	if (rc == RUN_PAUSED && sc__run_paused_result(r, sb, out) == 0) {
		r->cancel_fd = -1; /* the caller may free its token once the run returned */
		if (r->t.pausing)
			r->t.pausing(&r->t);
		/* No /tmp watch while it waits: its processes are stopped
		 * (sc__run_freeze_for_pause). */
		uint64_t expires = r->paused_us + sb->cfg->limits[SNAPCELL_LIMIT_PAUSE_MS] * 1000;
		if (sc__paused_add(sb, r, r->held_id, expires, r->ctx) == 0)
			return 0;
		snapcell_result_free(*out);
		*out = NULL;
	}
	if (rc == RUN_PAUSED) {
		sc__run_violation(r, "no memory to pause the run");
		rc = loop(r, sb);
		sc__run_end_calls(r);
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
	r->cells = sb->cells.ops;
	r->target = &r->t;
	sc__calls_init(&r->flight);
	if (req->tools && !(r->tools = sc__tools_dup(req->tools))) {
		finish(sb, ctx, -ENOMEM, false, NULL);
		release(r);
		free(r);
		return sc__err(err, -ENOMEM, "run: its tools");
	}
	return sc__run_drive(sb, r, run_start(r, sb, req), out, err);
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
