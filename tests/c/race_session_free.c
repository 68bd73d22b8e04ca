/* Frees a session (and a snapshot of it) on one thread while another frees their sandbox,
 * released together by a barrier, many times over. Run under TSan (scripts/test's TSan build)
 * it reports the race on a family's sandbox pointer; under ASan, the use of a freed sandbox.
 * A plain program rather than a Criterion test, so the TSan build needs nothing but the
 * library, the helper and this. Usage: race-session-free HELPER [ITERATIONS]. Exits 77 (a
 * skip) with the reason when the host cannot make a sandbox, unless SNAPCELL_REQUIRE_ALL=1. */
#include <pthread.h>
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
		rc = one_round(cfg, &err);
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
