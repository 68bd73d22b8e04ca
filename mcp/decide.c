/* The decisions a paused run waits on (a tool call that needs approval): asking a
 * handshake-era client with elicitation/create and waiting for its answer, refusing where no
 * one can be asked, and resuming a run a stateless client answered by retrying. Parking a
 * stateless run and checking its retry are approval.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "mcp.h"
#include "server.h"

bool mcp_server_asks(const struct mcp_server *srv)
{
	return srv->asks_approval;
}

/* Waits, srv->lock held, for a's answer, the call's cancellation or the end of the pause (the
 * library then expires the run whatever we say). */
static void await_answer(struct call *c, struct ask *a)
{
	struct mcp_server *srv = c->srv;
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)(srv->pause_us / 1000000) + 1;
	while (!a->answer && !c->cancelled)
		if (pthread_cond_timedwait(&srv->changed, &srv->lock, &until) == ETIMEDOUT)
			break;
}

/* Asks the handshake-era client about p (elicitation/create on the call's sink: stdout, or
 * the call's SSE stream) and waits for its answer. */
static enum snapcell_verdict ask_client(struct call *c, const struct snapcell_pending_call *p,
					char *reason, size_t len)
{
	struct mcp_server *srv = c->srv;
	char id[48];
	struct ask a = {.scope = c->sink->scope};
	json_t *question = mcp_approval_question(p);
	pthread_mutex_lock(&srv->lock);
	snprintf(id, sizeof(id), "snapcell-approval-%" PRIu64, ++srv->n_asks);
	a.id = json_string(id);
	a.next = srv->asks;
	srv->asks = &a; /* before sending: the answer may come before send returns */
	/* A run waiting for a person holds no run slot (the library bounds paused runs apart): a
	 * client that never answers cannot make the server busy. Given back before the question
	 * leaves, so the client's next call finds it; taken again (or waited for) to go on. */
	srv->n_running--;
	pthread_cond_broadcast(&srv->changed);
	pthread_mutex_unlock(&srv->lock);
	json_t *request = question && a.id
				  ? json_pack("{s:s, s:O, s:s, s:O}", "jsonrpc", "2.0", "id", a.id,
					      "method", "elicitation/create", "params", question)
				  : NULL;
	json_decref(question);
	bool sent = request && c->sink->send(c->sink, request) == 0;
	pthread_mutex_lock(&srv->lock);
	if (sent)
		await_answer(c, &a);
	while (srv->n_running >= srv->opts.max_runs && !c->cancelled && !srv->draining)
		pthread_cond_wait(&srv->changed, &srv->lock);
	srv->n_running++;
	struct ask **pp = &srv->asks;
	while (*pp != &a)
		pp = &(*pp)->next;
	*pp = a.next;
	bool cancelled = c->cancelled;
	pthread_mutex_unlock(&srv->lock);
	enum snapcell_verdict v = SNAPCELL_VERDICT_REJECTED;
	if (!sent)
		snprintf(reason, len,
			 "approval was not possible: the question could not be sent "
			 "to the MCP client");
	else if (cancelled)
		snprintf(reason, len, "the call was cancelled while the MCP client was asked");
	else if (!a.answer)
		snprintf(reason, len, "no answer came from the MCP client in time");
	else
		v = mcp_approval_answer(a.answer, reason, len);
	json_decref(a.answer);
	json_decref(a.id);
	return v;
}

/* A handshake-era client's response: the answer to the ask with its id and scope. */
void mcp_server_answered(struct mcp_server *srv, const struct mcp_message *msg,
			 const struct mcp_sink *sink)
{
	uint64_t scope = sink ? sink->scope : 0;
	pthread_mutex_lock(&srv->lock);
	for (struct ask *a = srv->asks; a; a = a->next)
		if (!a->answer && a->scope == scope && json_equal(a->id, msg->id)) {
			a->answer = json_incref(msg->root);
			pthread_cond_broadcast(&srv->changed);
			break;
		}
	pthread_mutex_unlock(&srv->lock);
}

/* The verdict on p when the client cannot be asked here. */
static enum snapcell_verdict decide(struct call *c, const struct snapcell_pending_call *p,
				    char *reason, size_t len)
{
	if (c->elicits && !c->modern)
		return ask_client(c, p, reason, len);
	mcp_approval_refusal(p, c->modern, c->elicits, c->session_params != NULL, reason, len);
	return SNAPCELL_VERDICT_REJECTED;
}

/* Gives the decision on the paused run with this pending id: its next result, or NULL (the
 * reason logged). res, the previous one, is freed. */
static struct snapcell_result *resume(struct call *c, struct snapcell_result *res, uint64_t id,
				      enum snapcell_verdict v, const char *reason)
{
	struct snapcell_run_options o = {.size = sizeof(o), .cancel = c->cancel};
	struct snapcell_result *next = NULL;
	struct snapcell_error err = {0};
	if (snapcell_sandbox_resume(c->srv->sb, id, v,
				    v == SNAPCELL_VERDICT_REJECTED ? reason : NULL, MCP_DECIDED_BY,
				    &o, &next, &err) < 0) {
		fprintf(stderr, "snapcell mcp: resume: %s\n", err.message);
		next = NULL;
	}
	snapcell_result_free(res);
	return next;
}

/* mcp_settle_fn: decides each call the run waits on until it ends, or, in the stateless era
 * (not in a session), parks it and leaves c->asked set. */
struct snapcell_result *mcp_call_settle(void *ctx, struct snapcell_result *res)
{
	struct call *c = ctx;
	while (res && res->status == SNAPCELL_STATUS_PAUSED) {
		if (c->modern && c->elicits && !c->session_params &&
		    (c->asked = mcp_approvals_ask(c->srv->approvals, res, c->code, c->code_len)))
			return res;
		char reason[512];
		enum snapcell_verdict v = decide(c, res->pending, reason, sizeof(reason));
		res = resume(c, res, res->pending->id, v, reason);
	}
	return res;
}

/* A stateless retry: resumes the parked run with the client's answer. */
struct snapcell_result *mcp_call_resume_parked(struct call *c, json_t **refused)
{
	if (!mcp_approvals_take(c->srv->approvals, c->state, c->resume_id)) {
		*refused = mcp_error_result("invalid-arguments",
					    "another retry answered this question already; "
					    "nothing was run");
		return NULL;
	}
	struct snapcell_result *res = resume(c, NULL, c->resume_id, c->verdict, c->reason);
	if (!res)
		*refused = mcp_error_result(snapcell_status_name(SNAPCELL_STATUS_EXPIRED),
					    "the paused run is gone (it expired, and its result "
					    "is no longer kept); nothing was run");
	return res;
}
