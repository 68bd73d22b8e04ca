/* A run's tool calls: serving each CALL frame (answered on the run's thread, held for a
 * decision, or started on the tool's asynchronous face), queueing those that cannot be served
 * yet, answering them within the run's time, and the log of calls. Not the tools themselves
 * (tools.c, calls.c), nor the loop that reads the frames (run.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "util/util.h"

static _Atomic uint64_t next_pending_id = 1;

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
	sc__run_answer_call(r, id, out->text ? 0 : -ENOMEM, out);
}

/* Serves one CALL payload (id, flags, name, NUL, arguments): answers it, holds it
 * for a decision, or starts it on the tool's asynchronous face. */
static void serve_call(struct sc_run *r, struct snapcell_sandbox *sb, uint8_t *payload, size_t len)
{
	if (len < SC_CALL_HEAD_LEN) {
		sc__run_violation(r, "malformed tool call");
		return;
	}
	uint32_t id = sc__le32(payload);
	bool awaited = payload[4] & SC_CALL_AWAITED;
	struct sc_call_outcome out;
	int rc = sc__tool_serve(sb->cfg, r->tools, payload + SC_CALL_HEAD_LEN,
				len - SC_CALL_HEAD_LEN, SC_FRAME_DEFAULT_CAP - 1, r->deadline_us,
				r->cancel_fd, awaited, &out);
	if (rc == -EPROTO) {
		sc__run_violation(r, "malformed tool call");
		return;
	}
	if (out.held && out.start) {
		rc = sc__calls_start(&r->flight, out.held, id, out.held_args, &out.log,
				     r->deadline_us);
		if (rc < 0)
			sc__run_violation(r, "no resources to start a tool call");
		return;
	}
	if (out.held) {
		hold_call(r, sb, id, &out);
		return;
	}
	sc__run_answer_call(r, id, rc, &out);
}

static bool queue_call(struct sc_run *r)
{
	if (r->n_queued + sc__calls_in_flight(&r->flight) >= SC_CALLS_IN_FLIGHT_MAX) {
		sc__run_violation(r, "more tool calls in flight than a cell may have");
		return false;
	}
	struct queued_call *q = malloc(sizeof(*q) + r->reader.payload_len + 1);
	if (!q) {
		sc__run_violation(r, "out of memory queueing a tool call");
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
void sc__run_serve_queue(struct sc_run *r, struct snapcell_sandbox *sb)
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

void sc__run_free_queue(struct sc_run *r)
{
	while (r->queue) {
		struct queued_call *q = r->queue;
		r->queue = q->next;
		free(q);
	}
	r->n_queued = r->queued_bytes = 0;
}

/* Answers a served (or decided) call, unless the run is out of time or over. */
void sc__run_answer_call(struct sc_run *r, uint32_t id, int rc, struct sc_call_outcome *o)
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
		sc__run_kill(r, FORCED_CANCEL);
		return;
	}
	if (sc__now_us() >= r->deadline_us) {
		/* The tool outlived the run: its answer must not reach code that is out of time. */
		log_call(r, &out.log);
		free(out.text);
		r->hit |= SNAPCELL_HIT_WALL;
		sc__run_kill(r, FORCED_TIMEOUT);
		return;
	}
	uint8_t head[SC_RESULT_HEAD_LEN];
	sc__put_le32(head, id);
	head[4] = out.ok;
	if (rc < 0 || sc__run_queue_frame(&r->send, SC_FRAME_RESULT, head, sizeof(head), out.text,
					  strlen(out.text)) < 0)
		sc__run_violation(r, "out of memory answering a tool call");
	log_call(r, &out.log);
	free(out.text);
	sc__run_send_pending(r); /* the cell is waiting for it: no need to poll first */
	r->spin_until_us = sc__spin_start(&r->spin);
}

/* Lets go of a held call without a decision (the run is being killed). */
void sc__run_drop_held(struct sc_run *r, struct snapcell_sandbox *sb)
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

static void on_answer(void *ctx, uint32_t id, int rc, struct sc_call_outcome *out)
{
	sc__run_answer_call(ctx, id, rc, out);
}

/* The end of a run with awaited calls in flight: each is asked to end, and the run waits for
 * every answer (a tool's thread or task must not outlive the run it belongs to). */
void sc__run_end_calls(struct sc_run *r)
{
	if (!sc__calls_in_flight(&r->flight))
		return;
	sc__calls_cancel(&r->flight);
	while (sc__calls_in_flight(&r->flight)) {
		sc__wait_fd(r->flight.event_fd, POLLIN, sc__deadline_ms(1000));
		sc__calls_take(&r->flight, on_answer, r);
	}
}

/* A CALL frame just read: served now, or queued behind a call that waits for a decision or
 * past the bound of awaited calls. */
void sc__run_call_frame(struct sc_run *r, struct snapcell_sandbox *sb)
{
	if (r->queue || !may_serve(r, sb))
		queue_call(r);
	else
		serve_call(r, sb, r->reader.payload, r->reader.payload_len);
}

void sc__run_take_answers(struct sc_run *r)
{
	sc__calls_take(&r->flight, on_answer, r);
}
