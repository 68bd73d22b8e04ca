/* Per-call approval over MCP: the question a paused run's pending call becomes (an
 * elicitation/create form naming the tool and its arguments), how a client's answer becomes a
 * verdict, and, for the stateless era, the paused runs waiting for a client's retry, named by
 * the requestState the input_required result carried. It decides nothing itself: the library
 * pauses and resumes the runs (docs/approval.md); decide.c asks and resumes. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/frontend.h"
#include "mcp.h"

/* What the question shows of the arguments: the client shows the message to a person. */
#define SHOWN_MAX 4096
/* Stateless-era runs waiting for a retry, at most; the library's own bound
 * (SNAPCELL_LIMIT_PAUSED_RUNS) is usually lower, so this only bounds entries whose runs
 * expired and whose clients never came back. */
#define PARKED_MAX 4096
#define STATE_TAG  "approval-"

bool mcp_client_elicits(const json_t *capabilities)
{
	json_t *e = json_object_get(capabilities, "elicitation");
	if (!json_is_object(e))
		return false;
	/* 2025-06-18 declared it as {}: form mode is implied when no mode is named. */
	return json_object_get(e, "form") || !json_object_get(e, "url");
}

/* The arguments as one line of ASCII JSON (no control or non-ASCII character reaches the
 * person's screen through them), cut at SHOWN_MAX with the length said. malloc'd or NULL. */
static char *shown_arguments(const char *arguments)
{
	json_t *v = json_loads(arguments, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	char *text = v ? json_dumps(v, JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER | JSON_COMPACT |
					       JSON_ENCODE_ANY)
		       : NULL;
	json_decref(v);
	size_t n = text ? strlen(text) : 0;
	if (n > SHOWN_MAX) {
		char *cut = NULL;
		if (asprintf(&cut, "%.*s... (%zu bytes in all)", SHOWN_MAX, text, n) < 0)
			cut = NULL;
		free(text);
		text = cut;
	}
	return text;
}

json_t *mcp_approval_question(const struct snapcell_pending_call *p)
{
	char *shown = shown_arguments(p->arguments);
	char *message = NULL;
	if (!shown || asprintf(&message,
			       "The code run by execute_code calls tool %s with the arguments %s. "
			       "Approve this one call? (It runs only if approve is true; otherwise "
			       "the code gets ToolError.)",
			       p->name, shown) < 0)
		message = NULL;
	free(shown);
	json_t *args = json_loads(p->arguments, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
	char description[SNAPCELL_TOOL_NAME_MAX + 80];
	snprintf(description, sizeof(description),
		 "Allow this call of %s with these arguments, once", p->name);
	json_t *q =
		message ? json_pack("{s:s, s:s, s:{s:s, s:{s:{s:s, s:s, s:s, s:b}}, s:[s]}, "
				    "s:{s:{s:s, s:o}}}",
				    "mode", "form", "message", message, "requestedSchema", "type",
				    "object", "properties", "approve", "type", "boolean", "title",
				    "Approve", "description", description, "default", 0, "required",
				    "approve", "_meta", MCP_APPROVAL_META, "tool", p->name,
				    "arguments", args ? args : json_null())
			: NULL;
	free(message);
	return q;
}

int mcp_approval_verdict(const json_t *answer, enum snapcell_verdict *verdict, char *reason,
			 size_t reason_len)
{
	const char *action = json_string_value(json_object_get(answer, "action"));
	json_t *content = json_object_get(answer, "content");
	if (!json_is_object(answer) || !action || (content && !json_is_object(content)))
		return -1;
	*verdict = SNAPCELL_VERDICT_REJECTED;
	if (!strcmp(action, "accept") && json_is_true(json_object_get(content, "approve"))) {
		*verdict = SNAPCELL_VERDICT_APPROVED;
		reason[0] = 0;
	} else if (!strcmp(action, "accept")) {
		snprintf(reason, reason_len, "the MCP client's user did not approve it");
	} else if (!strcmp(action, "decline")) {
		snprintf(reason, reason_len, "the MCP client's user declined it");
	} else if (!strcmp(action, "cancel")) {
		snprintf(reason, reason_len,
			 "the MCP client's user dismissed the question without approving it");
	} else {
		return -1;
	}
	return 0;
}

enum snapcell_verdict mcp_approval_answer(const json_t *response, char *reason, size_t len)
{
	json_t *error = json_object_get(response, "error");
	const char *message = json_string_value(json_object_get(error, "message"));
	enum snapcell_verdict v = SNAPCELL_VERDICT_REJECTED;
	if (error)
		snprintf(reason, len,
			 "approval was not possible: the MCP client answered the question with "
			 "error %" JSON_INTEGER_FORMAT " (%.120s)",
			 json_integer_value(json_object_get(error, "code")),
			 message ? message : "");
	else if (mcp_approval_verdict(json_object_get(response, "result"), &v, reason, len) < 0)
		snprintf(reason, len,
			 "approval was not possible: the MCP client's answer was not an "
			 "ElicitResult");
	return v;
}

json_t *mcp_approval_input_required(const json_t *question, const char *state,
				    const struct snapcell_result *res)
{
	json_t *r = json_pack("{s:s, s:{s:{s:s, s:O}}, s:s}", "resultType", "input_required",
			      "inputRequests", MCP_APPROVAL_KEY, "method", "elicitation/create",
			      "params", question, "requestState", state);
	json_t *full = r && res ? mcp_call_result(res, false) : NULL;
	if (full)
		json_object_set(r, "_meta", json_object_get(full, "_meta"));
	json_decref(full);
	return r;
}

/* A run waiting for a stateless client's retry. */
struct parked {
	char secret[MCP_SECRET_HEX + 1];
	uint64_t pending_id;
	uint64_t parked_us;
	char *code; /* the call's code: a retry must carry the same */
	size_t code_len;
	json_t *question;
	struct parked *next;
};

struct mcp_approvals {
	pthread_mutex_t lock;
	struct parked *list;
	size_t n;
	char replica[MCP_REPLICA_MAX + 1];
	uint64_t keep_us; /* an entry older than this names a run that expired */
};

struct mcp_approvals *mcp_approvals_new(const char *replica, uint64_t pause_ms)
{
	struct mcp_approvals *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	pthread_mutex_init(&a->lock, NULL);
	snprintf(a->replica, sizeof(a->replica), "%s", replica);
	a->keep_us = (pause_ms + 60000) * 1000;
	return a;
}

static void parked_free(struct parked *p)
{
	free(p->code);
	json_decref(p->question);
	free(p);
}

void mcp_approvals_free(struct mcp_approvals *a)
{
	if (!a)
		return;
	while (a->list) {
		struct parked *p = a->list;
		a->list = p->next;
		parked_free(p);
	}
	pthread_mutex_destroy(&a->lock);
	free(a);
}

/* Drops entries whose runs expired long ago (the library ended them and freed their cells;
 * a retry would only learn that); a->lock held. */
static void sweep(struct mcp_approvals *a, uint64_t now)
{
	for (struct parked **pp = &a->list; *pp;) {
		struct parked *p = *pp;
		if (now - p->parked_us > a->keep_us) {
			*pp = p->next;
			a->n--;
			parked_free(p);
		} else {
			pp = &p->next;
		}
	}
}

char *mcp_approvals_park(struct mcp_approvals *a, uint64_t pending_id, const char *code,
			 size_t code_len, const json_t *question)
{
	struct parked *p = calloc(1, sizeof(*p));
	char *state = NULL;
	if (!p || mcp_secret_new(p->secret) < 0 || !(p->code = malloc(code_len + 1)) ||
	    !(p->question = json_deep_copy(question)) ||
	    asprintf(&state, "%s~%s%s", a->replica, STATE_TAG, p->secret) < 0) {
		if (p)
			parked_free(p);
		return NULL;
	}
	memcpy(p->code, code, code_len);
	p->code[code_len] = 0;
	p->code_len = code_len;
	p->pending_id = pending_id;
	p->parked_us = fe_now_us();
	pthread_mutex_lock(&a->lock);
	sweep(a, p->parked_us);
	bool room = a->n < PARKED_MAX;
	if (room) {
		p->next = a->list;
		a->list = p;
		a->n++;
	}
	pthread_mutex_unlock(&a->lock);
	if (!room) {
		parked_free(p);
		free(state);
		return NULL;
	}
	return state;
}

/* The secret a requestState of this replica holds, or NULL with why (a state of another
 * replica is named as such, so the client or its balancer can route the retry). */
static const char *state_secret(const struct mcp_approvals *a, const char *state, char *why,
				size_t why_len)
{
	const char *tilde = strchr(state, '~');
	size_t rlen = tilde ? (size_t)(tilde - state) : 0;
	char replica[MCP_REPLICA_MAX + 1] = "";
	if (rlen && rlen <= MCP_REPLICA_MAX)
		memcpy(replica, state, rlen), replica[rlen] = 0;
	if (!tilde || !mcp_replica_valid(replica) ||
	    strncmp(tilde + 1, STATE_TAG, strlen(STATE_TAG)) ||
	    strlen(tilde + 1 + strlen(STATE_TAG)) != MCP_SECRET_HEX) {
		snprintf(why, why_len,
			 "Invalid params: requestState is not one this server issued (it must be "
			 "sent back exactly as the input_required result gave it)");
		return NULL;
	}
	if (strcmp(replica, a->replica)) {
		snprintf(why, why_len,
			 "Invalid params: requestState belongs to replica '%s', and this is "
			 "replica '%s': the paused run is there; send the retry to that replica "
			 "(a load balancer routes on the part of requestState before '~')",
			 replica, a->replica);
		return NULL;
	}
	return tilde + 1 + strlen(STATE_TAG);
}

/* The entry secret names, compared in full; a->lock held. */
static struct parked *lookup(struct mcp_approvals *a, const char *secret)
{
	struct parked *found = NULL;
	for (struct parked *p = a->list; p; p = p->next)
		if (mcp_secret_equal(p->secret, secret, MCP_SECRET_HEX))
			found = p;
	return found;
}

/* The run a retry's requestState names, when the retry carries the same code: 0, its pending
 * id and a copy of its question; else -1 and why (a -32602 message). Leaves it parked. */
static int find(struct mcp_approvals *a, const char *state, const char *code, size_t code_len,
		uint64_t *pending_id, json_t **question, char *why, size_t why_len)
{
	const char *secret = state_secret(a, state, why, why_len);
	if (!secret)
		return -1;
	pthread_mutex_lock(&a->lock);
	struct parked *p = lookup(a, secret);
	bool same = p && p->code_len == code_len && !memcmp(p->code, code, code_len);
	if (same) {
		*pending_id = p->pending_id;
		*question = json_deep_copy(p->question);
	}
	pthread_mutex_unlock(&a->lock);
	if (!p)
		snprintf(why, why_len,
			 "Invalid params: no run waits with this requestState (it was answered "
			 "already, its run expired long ago, or the server restarted)");
	else if (!same)
		snprintf(why, why_len,
			 "Invalid params: the retry's code is not the code of the call that "
			 "paused; send the original request again with inputResponses and "
			 "requestState");
	else if (!*question)
		snprintf(why, why_len, "Internal error: out of memory");
	return same && *question ? 0 : -1;
}

bool mcp_approvals_take(struct mcp_approvals *a, const char *state, uint64_t pending_id)
{
	char why[512];
	const char *secret = state_secret(a, state, why, sizeof(why));
	if (!secret)
		return false;
	pthread_mutex_lock(&a->lock);
	struct parked *p = lookup(a, secret);
	bool taken = p && p->pending_id == pending_id;
	if (taken) {
		struct parked **pp = &a->list;
		while (*pp != p)
			pp = &(*pp)->next;
		*pp = p->next;
		a->n--;
	}
	pthread_mutex_unlock(&a->lock);
	if (taken)
		parked_free(p);
	return taken;
}

int mcp_approvals_retry(struct mcp_approvals *a, const json_t *params, const char *code,
			size_t code_len, struct mcp_retry *out)
{
	const char *state = json_string_value(json_object_get(params, "requestState"));
	json_t *responses = json_object_get(params, "inputResponses");
	json_t *question = NULL;
	if (!state) {
		snprintf(out->why, sizeof(out->why),
			 "Invalid params: requestState must be a string");
		return 0;
	}
	if (responses && !json_is_null(responses) && !json_is_object(responses)) {
		snprintf(out->why, sizeof(out->why),
			 "Invalid params: inputResponses must be an object");
		return 0;
	}
	if (find(a, state, code, code_len, &out->pending_id, &question, out->why,
		 sizeof(out->why)) < 0)
		return 0;
	json_t *answer = json_object_get(responses, MCP_APPROVAL_KEY);
	if (!answer) { /* the revision's advice: ask again for what is missing */
		out->again = mcp_approval_input_required(question, state, NULL);
		json_decref(question);
		if (!out->again)
			snprintf(out->why, sizeof(out->why), "Internal error: out of memory");
		return 0;
	}
	json_decref(question);
	if (mcp_approval_verdict(answer, &out->verdict, out->reason, sizeof(out->reason)) == 0)
		return 1;
	snprintf(out->why, sizeof(out->why),
		 "Invalid params: inputResponses.%s must be an ElicitResult: {\"action\": "
		 "\"accept\", \"content\": {\"approve\": true}} approves; action \"decline\" "
		 "or \"cancel\" rejects",
		 MCP_APPROVAL_KEY);
	return 0;
}

json_t *mcp_approvals_ask(struct mcp_approvals *a, const struct snapcell_result *res,
			  const char *code, size_t code_len)
{
	json_t *question = mcp_approval_question(res->pending);
	char *state =
		question ? mcp_approvals_park(a, res->pending->id, code, code_len, question) : NULL;
	json_t *r = state ? mcp_approval_input_required(question, state, res) : NULL;
	if (state && !r) /* never to be answered: the run expires */
		mcp_approvals_take(a, state, res->pending->id);
	free(state);
	json_decref(question);
	return r;
}

void mcp_approval_refusal(const struct snapcell_pending_call *p, bool modern, bool elicits,
			  bool in_session, char *reason, size_t len)
{
	if (elicits)
		snprintf(reason, len, "approval was not possible: %s",
			 in_session ? "a run in a session cannot wait for a stateless "
				      "(2026-07-28) retry; call it from a handshake-era client, or "
				      "without session"
				    : "the paused run could not be kept for the retry (too many "
				      "wait)");
	else
		snprintf(reason, len,
			 "approval was not possible: the MCP client did not declare the "
			 "elicitation capability (%s), so it could not be asked about this call "
			 "of %s",
			 modern ? "in its request's clientCapabilities"
				: "in initialize; over HTTP its request must also accept "
				  "text/event-stream, the stream that carries the question",
			 p->name);
}
