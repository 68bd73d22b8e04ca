/* The server's own state, shared by the files that make it up: server.c (its life and the
 * methods), calls.c (a tools/call from arrival to answer) and decide.c (the decisions a run
 * waits on). Nothing outside them includes it; the rest of mcp/ sees mcp.h. */
#ifndef SNAPCELL_MCP_SERVER_H
#define SNAPCELL_MCP_SERVER_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "mcp.h"

#define PROGRESS_FIRST_US 1000000u
#define PROGRESS_EVERY_US 1000000u

/* A tools/call in progress; it is on the server's list from its start until its answer. */
struct call {
	struct mcp_server *srv;
	struct mcp_sink *sink;
	json_t *id, *progress_token;
	char *code;
	size_t code_len;
	json_t *session_params; /* the call's params when the sessions answer it (sessions.c) */
	struct snapcell_cancel *cancel;
	bool cancelled;
	bool queued; /* admitted past the cap: waits for a run to end before it runs */
	bool modern; /* answer with the stateless revision's result fields */
	/* The client can be asked to approve a call (handshake era: it declared elicitation in
	 * initialize; stateless: in this request's clientCapabilities). */
	bool elicits;
	/* A stateless retry answering the question of a parked run: its requestState, the run's
	 * pending id and the answer's verdict. */
	char *state;
	uint64_t resume_id;
	enum snapcell_verdict verdict;
	char reason[256];
	json_t *asked; /* the input_required result, once the run was parked */
	uint64_t next_progress_us, start_us;
	struct call *next;
};

/* An elicitation/create sent to a handshake-era client, on the server's list until its answer
 * came (only from the same scope: another HTTP session cannot answer it). */
struct ask {
	json_t *id;
	uint64_t scope;
	json_t *answer; /* the client's response message, once it came */
	struct ask *next;
};

/* A pool thread. While idle it waits on wake, on the server's idle list, until a call is
 * handed to it (call set by the dispatcher, under the server's lock). */
struct worker {
	struct mcp_server *srv;
	pthread_cond_t wake;
	struct call *call;
	struct worker *next;
};

struct mcp_server {
	struct snapcell_sandbox *sb;
	char *description, *instructions;
	struct mcp_options opts;
	bool initialized;
	pthread_mutex_t lock;
	pthread_cond_t changed; /* a call or a worker ended, or stopping was set */
	struct call *calls;
	unsigned n_calls;    /* on the list or still answering: drain waits for 0 */
	unsigned n_running;  /* admitted and not yet finished running: the cap */
	unsigned n_queued;   /* admitted past the cap, waiting for a run to end */
	struct worker *idle; /* waiting workers, the most recent first */
	unsigned n_workers;
	bool stopping;
	bool draining;	     /* no call is admitted any more, and none waits for room */
	size_t result_bytes; /* what results hold until sent (mcp_result_cost), at most
			      * opts.result_memory */
	pthread_t ticker;
	struct mcp_sessions *sessions;
	struct mcp_links *links; /* results kept for resources/read (links.c) */
	bool asks_approval;	 /* some tool needs a decision per call (the config's "approve") */
	uint64_t pause_us; /* how long a run waits for its decision (SNAPCELL_LIMIT_PAUSE_MS) */
	struct ask *asks;
	uint64_t n_asks;
	struct mcp_approvals *approvals;
};

static inline void reply(struct mcp_sink *sink, json_t *msg)
{
	if (msg)
		sink->send(sink, msg);
}

/* server.c: a stateless-era result gets resultType and the server's identity (modern);
 * result is returned. */
json_t *mcp_server_complete(json_t *result, bool modern);
/* Takes bytes from the result budget for an answer; false when they do not fit now. */
bool mcp_server_charge(struct mcp_server *srv, size_t bytes);

/* calls.c: tools/call (sync: on this thread, whatever the sink offers). */
void mcp_server_tools_call(struct mcp_server *srv, struct mcp_message *msg, struct mcp_sink *sink,
			   bool sync);
/* notifications/cancelled: cancels the call with params' requestId from scope. */
void mcp_server_cancel_request(struct mcp_server *srv, const json_t *params, uint64_t scope);

/* decide.c: a client's response, the answer to an elicitation/create we sent. */
void mcp_server_answered(struct mcp_server *srv, const struct mcp_message *msg,
			 const struct mcp_sink *sink);
/* mcp_settle_fn over a struct call: the decisions res waits on, until it ends or is parked. */
struct snapcell_result *mcp_call_settle(void *ctx, struct snapcell_result *res);
/* A stateless retry: resumes the parked run with the client's answer, or NULL and *refused. */
struct snapcell_result *mcp_call_resume_parked(struct call *c, json_t **refused);

#endif
