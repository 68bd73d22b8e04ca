/* Frees a session (and a snapshot of it) on one thread while another frees their sandbox,
 * released together by a barrier, many times over. Run under TSan (scripts/test's TSan build)
 * it reports the race on a family's sandbox pointer; under ASan, the use of a freed sandbox.
 * Each round then has several threads take cells of one sandbox at once (fresh runs, runs
 * with files of their own, stats and a session), so TSan also watches the cell queue and the
 * questions for run cells, filled by one thread at a time without the sandbox's lock.
 * A plain program rather than a Criterion test, so the TSan build needs nothing but the
 * library, the helper and this. Usage: race-session-free HELPER [ITERATIONS]. Exits 77 (a
 * skip) with the reason when the host cannot make a sandbox, unless SNAPCELL_REQUIRE_ALL=1. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapcell.h"

struct pair {
	pthread_barrier_t start;
	struct snapcell_sandbox *sb;
	struct snapcell_session *s;
	struct snapcell_snapshot *snap;
};

static void *free_session(void *arg)
{
	struct pair *p = arg;
	pthread_barrier_wait(&p->start);
	snapcell_snapshot_free(p->snap);
	snapcell_session_free(p->s);
	return NULL;
}

static void *free_sandbox(void *arg)
{
	struct pair *p = arg;
	pthread_barrier_wait(&p->start);
	snapcell_sandbox_free(p->sb);
	return NULL;
}

static int skip_or_fail(const char *why)
{
	const char *strict = getenv("SNAPCELL_REQUIRE_ALL");
	if (strict && !strcmp(strict, "1")) {
		fprintf(stderr, "race-session-free: required feature missing: %s\n", why);
		return 1;
	}
	printf("SKIP: %s\n", why);
	return 77;
}

#define TAKERS 5

struct takers {
	pthread_barrier_t start;
	struct snapcell_sandbox *sb;
	_Atomic int failed;
};

/* Thread i: stats (thread 0), a session (thread 1), fresh runs (thread 2) or fresh runs with a
 * file of their own (threads 3 and 4; plain ones at level rlimits, which has no run files). */
struct taker {
	struct takers *all;
	int i;
};

static void *take(void *arg)
{
	struct taker *t = arg;
	struct snapcell_sandbox *sb = t->all->sb;
	pthread_barrier_wait(&t->all->start);
	for (int k = 0; k < 3; k++) {
		struct snapcell_result *res = NULL;
		struct snapcell_sandbox_stats st;
		struct snapcell_session *s = NULL;
		struct snapcell_run_file f = {.name = "f", .data = "1", .data_len = 1};
		struct snapcell_run_options opts = {
			.size = sizeof(opts), .files = &f, .n_files = 1};
		bool files =
			t->i >= 3 && snapcell_sandbox_isolation(sb) != SNAPCELL_ISOLATION_RLIMITS;
		int rc = t->i == 0 ? snapcell_sandbox_stats(sb, &st, NULL)
			 : t->i == 1
				 ? snapcell_session_new(sb, &s, NULL)
				 : snapcell_sandbox_run(sb,
							files ? "print(open('/input/f').read())"
							      : "print(1)",
							SIZE_MAX, files ? &opts : NULL, &res, NULL);
		if (rc == 0 && s)
			rc = snapcell_session_run(s, "x = 1", SIZE_MAX, NULL, &res, NULL);
		if (rc < 0 || (res && res->status != SNAPCELL_STATUS_OK))
			t->all->failed = 1;
		snapcell_result_free(res);
		snapcell_session_free(s);
	}
	return NULL;
}

static int take_round(struct snapcell_config *cfg, struct snapcell_error *err)
{
	struct takers all = {0};
	int rc = snapcell_sandbox_new(cfg, &all.sb, err);
	if (rc < 0)
		return rc;
	pthread_t th[TAKERS];
	struct taker t[TAKERS];
	pthread_barrier_init(&all.start, NULL, TAKERS);
	for (int i = 0; i < TAKERS; i++) {
		t[i] = (struct taker){&all, i};
		pthread_create(&th[i], NULL, take, &t[i]);
	}
	for (int i = 0; i < TAKERS; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&all.start);
	snapcell_sandbox_free(all.sb);
	if (!all.failed)
		return 0;
	snprintf(err->message, sizeof(err->message),
		 "a run, stats or session taken at once failed");
	return err->code = SNAPCELL_E_TEMPLATE;
}

/* 0 or a negative code with err set. */
static int one_round(struct snapcell_config *cfg, struct snapcell_error *err)
{
	struct pair p = {0};
	int rc = snapcell_sandbox_new(cfg, &p.sb, err);
	if (rc == 0 && (rc = snapcell_session_new(p.sb, &p.s, err)) == 0)
		rc = snapcell_session_snapshot(p.s, &p.snap, err);
	if (rc < 0) {
		snapcell_session_free(p.s);
		snapcell_sandbox_free(p.sb);
		return rc;
	}
	pthread_t a, b;
	pthread_barrier_init(&p.start, NULL, 2);
	pthread_create(&a, NULL, free_session, &p);
	pthread_create(&b, NULL, free_sandbox, &p);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	pthread_barrier_destroy(&p.start);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: race-session-free HELPER [ITERATIONS]\n");
		return 2;
	}
	int rounds = argc > 2 ? atoi(argv[2]) : 20;
	struct snapcell_error err = {0};
	struct snapcell_config *cfg = snapcell_config_new();
	if (!cfg || snapcell_config_set_helper(cfg, argv[1], &err) < 0) {
		fprintf(stderr, "race-session-free: %s\n", cfg ? err.message : "out of memory");
		return 1;
	}
	int rc = 0;
	for (int i = 0; i < rounds && rc == 0; i++)
		if ((rc = one_round(cfg, &err)) == 0)
			rc = take_round(cfg, &err);
	snapcell_config_free(cfg);
	/* Asked only after a failure: the probe unshares in a forked child, which TSan's
	 * runtime makes multi-threaded (EINVAL), while the sandbox's own clone works. */
	struct snapcell_probe probe;
	if (rc < 0 && snapcell_probe_host(&probe, NULL) == 0 &&
	    probe.level < SNAPCELL_ISOLATION_NAMESPACES)
		return skip_or_fail(
			probe.mech[SNAPCELL_MECH_USERNS].available
				? "the host cannot make a sandbox (see `snapcell doctor`)"
				: "the host cannot make a user namespace");
	if (rc < 0) {
		fprintf(stderr, "race-session-free: %s\n", err.message);
		return 1;
	}
	printf("race-session-free: %d rounds\n", rounds);
	return 0;
}
