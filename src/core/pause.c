/* A sandbox's paused runs: the list of runs waiting for a decision (run.c drives them; this
 * file only keeps them), taking one off for its resume (exactly one caller gets it), their
 * expiry (a reaper thread, started with the first pause, ends each when its time is up, so its
 * cell is freed without waiting for the caller), and ending them with their session or
 * sandbox. It never looks inside a run (whose processes are stopped while it waits). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core.h"
#include "util/util.h"

/* One entry. A waiting run has r; an expired one leaves an entry with only its id and final
 * result (ended), for the resume that asks; while a sweep ends a run, its entry is there,
 * ending, and a resume of it (or the end of its owner) waits. */
struct sc_paused {
	struct sc_paused *next;
	uint64_t id; /* the held call's */
	uint64_t expires_us;
	void *ctx; /* the run's owner (a session), for sc__paused_end_ctx */
	bool ending;
	struct sc_run *r;
	struct snapcell_result *ended;
};

/* Expired runs kept for a resume to find; older ones are dropped (their resume then fails as
 * for an unknown id). */
#define MAX_ENDED 64

void sc__decisions_free(struct snapcell_decision *d, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(d[i].arguments);
		free(d[i].text);
		free(d[i].decided_by);
	}
	free(d);
}

static char *copy_text(const char *s)
{
	return s ? strdup(s) : NULL;
}

int sc__decisions_copy(const struct snapcell_decision *src, size_t n,
		       struct snapcell_decision **out)
{
	*out = NULL;
	if (n == 0)
		return 0;
	struct snapcell_decision *d = calloc(n, sizeof(*d));
	if (!d)
		return -ENOMEM;
	bool ok = true;
	for (size_t i = 0; i < n; i++) {
		d[i] = src[i];
		d[i].arguments = copy_text(src[i].arguments);
		d[i].text = copy_text(src[i].text);
		d[i].decided_by = copy_text(src[i].decided_by);
		ok = ok && d[i].arguments && (d[i].text || !src[i].text) &&
		     (d[i].decided_by || !src[i].decided_by);
	}
	if (!ok) {
		sc__decisions_free(d, n);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}

/* Takes p off the list; sb->lock held. */
static void unlink_paused(struct snapcell_sandbox *sb, struct sc_paused *p)
{
	for (struct sc_paused **pp = &sb->paused; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			return;
		}
	}
}

/* Keeps at most MAX_ENDED expired entries, dropping the oldest; sb->lock held. */
static void trim_ended(struct snapcell_sandbox *sb)
{
	struct sc_paused *oldest = NULL;
	size_t n = 0;
	for (struct sc_paused *p = sb->paused; p; p = p->next)
		if (p->ended && ++n > MAX_ENDED)
			oldest = p;
	if (!oldest)
		return;
	unlink_paused(sb, oldest);
	snapcell_result_free(oldest->ended);
	free(oldest);
}

/* When the first waiting run expires, or UINT64_MAX; sb->lock held. */
static uint64_t next_expiry(const struct snapcell_sandbox *sb)
{
	uint64_t next = UINT64_MAX;
	for (const struct sc_paused *p = sb->paused; p; p = p->next)
		if (p->r && !p->ending && p->expires_us < next)
			next = p->expires_us;
	return next;
}

/* Sleeps until the earliest expiry (or a new pause, or the stop), and ends what expired. */
static void *reaper(void *arg)
{
	struct snapcell_sandbox *sb = arg;
	pthread_mutex_lock(&sb->lock);
	while (!sb->reaper_stop) {
		uint64_t next = next_expiry(sb), now = sc__now_us();
		if (next <= now) {
			pthread_mutex_unlock(&sb->lock);
			sc__paused_sweep(sb);
			pthread_mutex_lock(&sb->lock);
		} else if (next == UINT64_MAX) {
			pthread_cond_wait(&sb->reaper_wake, &sb->lock);
		} else {
			struct timespec at = {(time_t)(next / 1000000),
					      (long)(next % 1000000) * 1000};
			pthread_cond_timedwait(&sb->reaper_wake, &sb->lock, &at);
		}
	}
	pthread_mutex_unlock(&sb->lock);
	return NULL;
}

int sc__paused_add(struct snapcell_sandbox *sb, struct sc_run *r, uint64_t id, uint64_t expires_us,
		   void *ctx)
{
	struct sc_paused *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	*p = (struct sc_paused){.id = id, .expires_us = expires_us, .ctx = ctx, .r = r};
	pthread_mutex_lock(&sb->lock);
	p->next = sb->paused;
	sb->paused = p;
	/* Without its thread (none could be made) expiry still happens, at the sandbox's next
	 * run or resume. */
	if (!sb->reaper_started && !sb->reaper_stop)
		sb->reaper_started = sc__thread_start(&sb->reaper, NULL, reaper, sb) == 0;
	pthread_cond_signal(&sb->reaper_wake);
	pthread_mutex_unlock(&sb->lock);
	return 0;
}

int sc__paused_take(struct snapcell_sandbox *sb, uint64_t id, struct sc_run **r,
		    struct snapcell_result **ended)
{
	pthread_mutex_lock(&sb->lock);
	struct sc_paused *p;
	for (;;) {
		for (p = sb->paused; p && p->id != id; p = p->next)
			;
		if (!p || !p->ending)
			break;
		pthread_cond_wait(&sb->paused_cond, &sb->lock);
	}
	if (p)
		unlink_paused(sb, p);
	pthread_mutex_unlock(&sb->lock);
	if (!p)
		return -ENOENT;
	*r = p->r;
	*ended = p->ended;
	free(p);
	return 0;
}

void sc__paused_sweep(struct snapcell_sandbox *sb)
{
	for (;;) {
		uint64_t now = sc__now_us();
		pthread_mutex_lock(&sb->lock);
		struct sc_paused *p;
		for (p = sb->paused; p; p = p->next)
			if (p->r && !p->ending && now >= p->expires_us)
				break;
		struct sc_run *r = p ? p->r : NULL;
		if (p) {
			p->ending = true; /* its resume, or its owner's end, waits */
			p->r = NULL;
		}
		pthread_mutex_unlock(&sb->lock);
		if (!p)
			return;
		struct snapcell_result *res = NULL;
		struct snapcell_error e;
		int rc = sc__run_end_paused(sb, r, SNAPCELL_VERDICT_EXPIRED, &res, &e);
		pthread_mutex_lock(&sb->lock);
		p->ending = false;
		p->ctx = NULL; /* the owner may go; the result needs nothing of it */
		if (rc == 0) {
			p->ended = res;
			trim_ended(sb);
		} else {
			unlink_paused(sb, p);
			free(p);
		}
		pthread_cond_broadcast(&sb->paused_cond);
		pthread_mutex_unlock(&sb->lock);
	}
}

/* Ends the listed entries (off the sandbox's list) as CLOSED, dropping their results. */
static void end_list(struct snapcell_sandbox *sb, struct sc_paused *list)
{
	while (list) {
		struct sc_paused *p = list;
		list = p->next;
		struct snapcell_result *res = p->ended;
		struct snapcell_error e;
		if (p->r)
			sc__run_end_paused(sb, p->r, SNAPCELL_VERDICT_CLOSED, &res, &e);
		snapcell_result_free(res);
		free(p);
	}
}

void sc__paused_end_all(struct snapcell_sandbox *sb)
{
	pthread_mutex_lock(&sb->lock);
	sb->reaper_stop = true;
	pthread_cond_signal(&sb->reaper_wake);
	bool started = sb->reaper_started;
	pthread_mutex_unlock(&sb->lock);
	if (started)
		pthread_join(sb->reaper, NULL); /* a sweep it is in finishes first */
	pthread_mutex_lock(&sb->lock);
	struct sc_paused *list = sb->paused;
	sb->paused = NULL;
	pthread_mutex_unlock(&sb->lock);
	end_list(sb, list);
}

void sc__paused_end_ctx(struct snapcell_sandbox *sb, void *ctx)
{
	struct sc_paused *list = NULL;
	pthread_mutex_lock(&sb->lock);
	for (;;) {
		bool busy = false;
		for (struct sc_paused **pp = &sb->paused; *pp;) {
			struct sc_paused *p = *pp;
			busy = busy || (p->ending && p->ctx == ctx);
			if (p->ctx == ctx && !p->ending) {
				*pp = p->next;
				p->next = list;
				list = p;
			} else {
				pp = &p->next;
			}
		}
		if (!busy)
			break;
		/* A sweep is ending one of ctx's runs, which ends in ctx: wait for it. */
		pthread_cond_wait(&sb->paused_cond, &sb->lock);
	}
	pthread_mutex_unlock(&sb->lock);
	end_list(sb, list);
}
