/* Attacks on the helper's spawn, whose child shares the caller's memory until its exec
 * (src/isolate/spawn.c; docs/security.md "The helper's spawn shares the caller's memory"):
 * the dumpable flag its switch of ids sets in that memory, the caller's. */
#include "helpers.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <sys/prctl.h>

#define SPAWN_THREADS 4
#define SPAWNS_EACH   4

static void *spawn_some(void *arg)
{
	(void)arg;
	for (int i = 0; i < SPAWNS_EACH; i++) {
		struct snapcell_config *cfg = test_config_new();
		struct snapcell_sandbox *sb = NULL;
		struct snapcell_error err = {0};
		int rc = snapcell_sandbox_new(cfg, &sb, &err);
		snapcell_config_free(cfg);
		if (rc < 0)
			return strdup(err.message);
		snapcell_sandbox_free(sb);
	}
	return NULL;
}

/* Spawns at once from several threads: each child clears the caller's flag at its switch of
 * ids (a root caller, fs.suid_dumpable 0); a spawn that saved the flag itself could save
 * another's cleared one and put that back for good. */
Test(spawn_attack, concurrent_spawns_leave_the_caller_dumpable, .timeout = 300)
{
	if (geteuid() != 0)
		criterion_skip_test(
			"the flag changes only when a root caller's child switches uid");
	cr_assert_eq(prctl(PR_SET_DUMPABLE, 1), 0);
	for (int round = 0; round < 3; round++) {
		pthread_t t[SPAWN_THREADS];
		for (int i = 0; i < SPAWN_THREADS; i++)
			cr_assert_eq(pthread_create(&t[i], NULL, spawn_some, NULL), 0);
		for (int i = 0; i < SPAWN_THREADS; i++) {
			void *failed;
			pthread_join(t[i], &failed);
			cr_assert_null(failed, "sandbox_new: %s", (char *)failed);
		}
		cr_assert_eq(prctl(PR_GET_DUMPABLE), 1,
			     "round %d: the caller is no longer dumpable", round);
	}
}

static int read_suid_dumpable(void)
{
	char c = 0;
	int fd = open("/proc/sys/fs/suid_dumpable", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, &c, 1) != 1)
		c = 0;
	if (fd >= 0)
		close(fd);
	return c ? c - '0' : -1;
}

static int write_suid_dumpable(int value)
{
	char c = (char)('0' + value);
	int fd = open("/proc/sys/fs/suid_dumpable", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = write(fd, &c, 1) == 1 ? 0 : -1;
	close(fd);
	return rc;
}

static int restore_suid_dumpable = -1;

static void put_back_suid_dumpable(void)
{
	if (restore_suid_dumpable >= 0)
		write_suid_dumpable(restore_suid_dumpable);
}

static atomic_int watching, seen_dumpable;

static void *watch_dumpable(void *arg)
{
	(void)arg;
	while (atomic_load(&watching))
		if (prctl(PR_GET_DUMPABLE) == 1)
			atomic_store(&seen_dumpable, 1);
	return NULL;
}

/* With fs.suid_dumpable = 1 the child's switch to the sandbox's uid makes the memory it
 * shares dumpable by that uid, which any process of that uid (the fallback 65534 is every
 * "nobody" daemon's) could then ptrace, writing the caller's memory through the child. A
 * caller that made itself non-dumpable sees its flag rise to 1 while that lasts: it must not
 * (the child gets a copy of the memory then, as a fork's). */
Test(spawn_attack, suid_dumpable_1_never_makes_the_callers_memory_dumpable, .timeout = 300,
     .fini = put_back_suid_dumpable)
{
	if (geteuid() != 0)
		criterion_skip_test(
			"the flag changes only when a root caller's child switches uid");
	/* The sysctl is the machine's: a test running beside this one would see it (an exec's
	 * dumpable flag: test_exec.c). scripts/test runs this test alone. */
	const char *alone = getenv("SNAPCELL_TEST_SYSCTL");
	if (!alone || strcmp(alone, "1") != 0)
		criterion_skip_test("sets fs.suid_dumpable for the whole machine: runs alone, with "
				    "SNAPCELL_TEST_SYSCTL=1 (scripts/test)");
	int was = read_suid_dumpable();
	if (was < 0 || write_suid_dumpable(1) < 0)
		criterion_skip_test("fs.suid_dumpable cannot be set here");
	restore_suid_dumpable = was;
	cr_assert_eq(prctl(PR_SET_DUMPABLE, 0), 0);
	atomic_store(&watching, 1);
	pthread_t watcher;
	cr_assert_eq(pthread_create(&watcher, NULL, watch_dumpable, NULL), 0);
	for (int i = 0; i < 20 && !atomic_load(&seen_dumpable); i++)
		snapcell_sandbox_free(test_sandbox(NULL));
	atomic_store(&watching, 0);
	pthread_join(watcher, NULL);
	int after = prctl(PR_GET_DUMPABLE);
	prctl(PR_SET_DUMPABLE, 1);
	cr_expect_eq(atomic_load(&seen_dumpable), 0,
		     "the caller's memory was dumpable by the sandbox's uid during a spawn");
	cr_expect_eq(after, 0, "the caller's flag was not put back");
}
