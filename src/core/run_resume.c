/* A run paused at a call that waits for a decision, from the host's side: its paused result,
 * the decisions recorded on it, and snapcell_sandbox_resume, which answers the call and drives
 * the run on (or ends it, when its time ran out meanwhile). The list of paused runs and its
 * reaper are pause.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "run.h"
#include "util/util.h"

/* How long stopping a paused run's processes may take before the held call is refused instead:
 * a tree holds still within a few passes, unless a thread stays in an uninterruptible sleep. */
#define FREEZE_TIMEOUT_MS 1000

/* Stops every process of the run's target for its pause: the cell's, or a session worker's
 * family below its anchor (docs/approval.md). When they cannot all be stopped, the held call
 * is answered with the reason instead, and the run goes on without pausing. A mechanism
 * without freeze pauses the run with its processes running. */
bool sc__run_freeze_for_pause(struct sc_run *r, struct snapcell_sandbox *sb)
{
	const struct sc_cell *root = r->target->anchor ? r->target->anchor : r->cell;
	int rc = sb->cells.ops->freeze
			 ? sb->cells.ops->freeze(&sb->cells, root, r->target->anchor != NULL,
						 FREEZE_TIMEOUT_MS, &r->frozen)
			 : 0;
	if (rc == 0) {
		r->paused_us = sc__now_us(); /* the wall clock stops from here */
		return true;
	}
	struct sc_call_outcome o = {.log = r->held_log};
	o.text = sc__message("tool '%s' needs a decision, and the cell's processes could not all "
			     "be stopped to wait for it (%s); the call was not made",
			     r->held->name, strerror(-rc));
	uint32_t id = r->held_call;
	sc__run_drop_held(r, sb);
	sc__run_answer_call(r, id, o.text ? 0 : -ENOMEM, &o);
	return false;
}

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
int sc__run_paused_result(const struct sc_run *r, const struct snapcell_sandbox *sb,
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
	res->isolation = sb->cells.level;
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

int sc__run_end_paused(struct snapcell_sandbox *sb, struct sc_run *r, enum snapcell_verdict why,
		       struct snapcell_result **out, struct snapcell_error *err)
{
	uint64_t waited = sc__now_us() - r->paused_us;
	r->paused_total_us += waited;
	r->deadline_us += waited;
	record_decision(r, why, NULL, NULL, SIZE_MAX);
	sc__run_kill(r, FORCED_EXPIRED);
	return sc__run_drive(sb, r, 0, out, err);
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
	if (r->frozen)
		r->cells->thaw(r->frozen);
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
	sc__run_answer_call(r, r->held_call, rc, &o);
	return sc__run_drive(sb, r, 0, out, err);
}
