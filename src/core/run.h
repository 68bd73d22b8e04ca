/* One run's state, shared by the files that drive it: run.c (the loop, the cell's streams and
 * frames, the result), run_calls.c (serving its tool calls) and run_resume.c (pausing at a
 * call that waits for a decision, and the resume). Nothing outside them includes this: the
 * rest of the core knows a run through core.h's sc__run_start. */
#ifndef SC_CORE_RUN_H
#define SC_CORE_RUN_H

#include "core.h"
#include "rpc/frame.h"
#include "util/buf.h"

enum forced {
	NOT_FORCED,
	FORCED_TIMEOUT,
	FORCED_OUTPUT,
	FORCED_PROTOCOL,
	FORCED_CANCEL,
	FORCED_FILES,
	FORCED_EXPIRED, /* no decision came in time */
};

/* What loop() returns besides 0 (the run ended) and a negative code. */
#define RUN_PAUSED 1

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
	/* A sandbox that resets cells: the cell's pid and CPU clock at the start, for a DONE
	 * with SC_DONE_HOST_FIGURES (0: not read). */
	int cell_pid;
	uint64_t cell_cpu_start_ns;
	struct sc_spin spin;
	uint64_t spin_until_us;	 /* after answering a call: poll without sleeping until then */
	uint64_t files_watch_us; /* when to measure /tmp and /output next (files_over); 0: never */
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
	const struct sc_cell_ops *cells;     /* its sandbox's mechanism, which froze them */
	struct snapcell_decision *decisions;
	size_t n_decisions;
	/* Its own copy of the target, and what its owner does at its end. */
	struct sc_run_target t;
	sc_run_finish finish;
	void *ctx;
};

/* run.c */
/* Kills the run's target once, remembering why (the first reason wins). */
void sc__run_kill(struct sc_run *r, enum forced why);
/* The cell broke the frame protocol: a note for its stderr, and the kill. */
void sc__run_violation(struct sc_run *r, const char *why);
int sc__run_queue_frame(struct outbuf *o, uint8_t type, const void *head, size_t head_len,
			const void *body, size_t body_len);
/* Sends what the frames for the cell hold, without blocking. */
void sc__run_send_pending(struct sc_run *r);
/* Drives a run until it ends (handing it to its owner, freeing r) or pauses (listing r). */
int sc__run_drive(struct snapcell_sandbox *sb, struct sc_run *r, int rc,
		  struct snapcell_result **out, struct snapcell_error *err);

/* run_calls.c */
/* A CALL frame the reader holds: served, held for a decision, started, or queued. */
void sc__run_call_frame(struct sc_run *r, struct snapcell_sandbox *sb);
void sc__run_serve_queue(struct sc_run *r, struct snapcell_sandbox *sb);
void sc__run_free_queue(struct sc_run *r);
void sc__run_answer_call(struct sc_run *r, uint32_t id, int rc, struct sc_call_outcome *o);
void sc__run_drop_held(struct sc_run *r, struct snapcell_sandbox *sb);
/* Answers the calls in flight that were answered since. */
void sc__run_take_answers(struct sc_run *r);
void sc__run_end_calls(struct sc_run *r);

/* run_resume.c: a paused run's result, copies of everything so far and the pending call. */
int sc__run_paused_result(const struct sc_run *r, const struct snapcell_sandbox *sb,
			  struct snapcell_result **out);
/* Stops the run's processes for its pause (sc_cell_ops.freeze); when they cannot all be
 * stopped, answers the held call with the reason instead and returns false. */
bool sc__run_freeze_for_pause(struct sc_run *r, struct snapcell_sandbox *sb);

#endif
