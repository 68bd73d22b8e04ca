/* A run's calls in flight to tools with an asynchronous face: started on the run's thread,
 * answered from any thread (snapcell_call_answer), handed back to the run loop through an
 * eventfd it polls. Not the run loop itself (run.c) and not the serving of a call's bytes
 * (tools.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core.h"
#include "rpc/frame.h"
#include "util/util.h"

struct snapcell_call {
	struct sc_calls *owner;
	const struct sc_tool *tool;
	uint32_t id;
	uint64_t deadline_us, start_us;
	struct snapcell_tool_call log;
	bool answered, cancelled, ok; /* under owner->mu */
	bool cancelling;	      /* its cancel runs (under owner->mu) */
	char *text;
	void *data;
	struct snapcell_call *next; /* on owner->running, then on owner->answered */
};

int sc__calls_start(struct sc_calls *c, const struct sc_tool *t, uint32_t id, char *args,
		    const struct snapcell_tool_call *log, uint64_t deadline_us)
{
	if (c->event_fd < 0 && (c->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		c->event_fd = -1;
		free(args);
		return -errno;
	}
	struct snapcell_call *call = calloc(1, sizeof(*call));
	if (!call) {
		free(args);
		return -ENOMEM;
	}
	*call = (struct snapcell_call){.owner = c,
				       .tool = t,
				       .id = id,
				       .deadline_us = deadline_us,
				       .start_us = sc__now_us(),
				       .log = *log};
	pthread_mutex_lock(&c->mu);
	call->next = c->running;
	c->running = call;
	c->n_flight++;
	pthread_mutex_unlock(&c->mu);
	/* It may answer before it returns, on this thread or another. */
	t->start(t->user, call, args);
	free(args);
	return 0;
}

void snapcell_call_answer(struct snapcell_call *call, bool ok, const char *text)
{
	if (!call)
		return;
	struct sc_calls *c = call->owner;
	char *copy = text ? strdup(text)
			  : sc__message("tool '%s' %s", call->tool->name,
					ok ? "returned no result" : "failed with no message");
	pthread_mutex_lock(&c->mu);
	/* An answer from another thread waits for a cancel in progress: the tool's cancel may
	 * use what the answering thread frees once it answered. */
	while (call->cancelling && !pthread_equal(c->canceller, pthread_self()))
		pthread_cond_wait(&c->cancel_done, &c->mu);
	if (call->answered) {
		pthread_mutex_unlock(&c->mu);
		free(copy);
		return;
	}
	struct snapcell_call **p = &c->running;
	while (*p != call)
		p = &(*p)->next;
	*p = call->next;
	call->answered = true;
	call->ok = ok && copy;
	call->text = copy;
	call->next = c->answered;
	c->answered = call;
	pthread_mutex_unlock(&c->mu);
	uint64_t one = 1;
	if (write(c->event_fd, &one, sizeof(one)) < 0) {
		/* only when the counter is full (2^64 - 2): the loop is awake already */
	}
}

uint64_t snapcell_call_deadline_us(const struct snapcell_call *call)
{
	return call ? call->deadline_us : 0;
}

void snapcell_call_set_data(struct snapcell_call *call, void *data)
{
	if (call)
		call->data = data;
}

void *snapcell_call_data(const struct snapcell_call *call)
{
	return call ? call->data : NULL;
}

/* Takes the answered calls, oldest first, into the caller's hands. */
static struct snapcell_call *take_answered(struct sc_calls *c)
{
	uint64_t n;
	if (c->event_fd >= 0 && read(c->event_fd, &n, sizeof(n)) < 0) {
		/* nothing answered since the last take */
	}
	pthread_mutex_lock(&c->mu);
	struct snapcell_call *list = c->answered, *reversed = NULL;
	c->answered = NULL;
	pthread_mutex_unlock(&c->mu);
	while (list) {
		struct snapcell_call *next = list->next;
		list->next = reversed;
		reversed = list;
		list = next;
	}
	return reversed;
}

size_t sc__calls_take(struct sc_calls *c, sc_calls_answer_fn fn, void *ctx)
{
	size_t n = 0;
	for (struct snapcell_call *call = take_answered(c); call; n++) {
		struct snapcell_call *next = call->next;
		struct sc_call_outcome out = {.ok = call->ok, .text = call->text, .log = call->log};
		size_t cap = SC_FRAME_DEFAULT_CAP - 1;
		if (out.text && strlen(out.text) > cap) {
			size_t len = strlen(out.text);
			free(out.text);
			out.ok = false;
			out.text = sc__message(
				"tool '%s' %s %zu bytes; the limit is %zu", call->tool->name,
				call->ok ? "returned" : "failed with a message of", len, cap);
		}
		out.log.ok = out.ok;
		out.log.duration_us = sc__now_us() - call->start_us;
		pthread_mutex_lock(&c->mu);
		c->n_flight--;
		pthread_mutex_unlock(&c->mu);
		fn(ctx, call->id, out.text ? 0 : -ENOMEM, &out);
		free(call);
		call = next;
	}
	return n;
}

void sc__calls_cancel(struct sc_calls *c)
{
	for (;;) {
		/* One at a time, unlocked around the tool's cancel (which may answer at once). */
		pthread_mutex_lock(&c->mu);
		struct snapcell_call *call = c->running;
		while (call && call->cancelled)
			call = call->next;
		if (call) {
			call->cancelled = true;
			call->cancelling = true;
			c->canceller = pthread_self();
		}
		pthread_mutex_unlock(&c->mu);
		if (!call)
			return;
		if (call->tool->cancel)
			call->tool->cancel(call->tool->user, call);
		pthread_mutex_lock(&c->mu);
		call->cancelling = false; /* still listed: only this thread frees calls */
		pthread_cond_broadcast(&c->cancel_done);
		pthread_mutex_unlock(&c->mu);
	}
}

unsigned sc__calls_in_flight(struct sc_calls *c)
{
	pthread_mutex_lock(&c->mu);
	unsigned n = c->n_flight;
	pthread_mutex_unlock(&c->mu);
	return n;
}

void sc__calls_init(struct sc_calls *c)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cancel_done, NULL);
	c->event_fd = -1;
}

void sc__calls_destroy(struct sc_calls *c)
{
	if (c->event_fd >= 0)
		close(c->event_fd);
	c->event_fd = -1;
	pthread_cond_destroy(&c->cancel_done);
	pthread_mutex_destroy(&c->mu);
}
