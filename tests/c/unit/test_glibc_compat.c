/* util/glibc_compat.c's versions of glibc 2.29-2.32 functions (what the wheel's glibc 2.28
 * build uses) against glibc's own, which this build's glibc has. No sandbox is started. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "util/glibc_compat.h"

Test(glibc_compat, errno_names_and_texts_are_glibcs)
{
	for (int e = -2; e < 300; e++) {
		const char *name = strerrorname_np(e), *ours = sc__compat_strerrorname(e);
		/* glibc names 0 "0"; nothing asks for that one. */
		if (e == 0)
			continue;
		cr_expect_str_eq(ours ? ours : "(none)", name ? name : "(none)", "errno %d", e);
		const char *desc = strerrordesc_np(e), *our_desc = sc__compat_strerrordesc(e);
		cr_expect_str_eq(our_desc ? our_desc : "(none)", desc ? desc : "(none)", "errno %d",
				 e);
	}
}

Test(glibc_compat, signal_names_are_glibcs)
{
	for (int sig = -1; sig < 70; sig++) {
		const char *name = sigabbrev_np(sig), *ours = sc__compat_sigabbrev(sig);
		cr_expect_str_eq(ours ? ours : "(none)", name ? name : "(none)", "signal %d", sig);
	}
}

static pthread_mutex_t held = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ns(clockid_t clock)
{
	struct timespec t;
	clock_gettime(clock, &t);
	return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static struct timespec ahead(clockid_t clock, int64_t ns)
{
	int64_t at = now_ns(clock) + ns;
	return (struct timespec){(time_t)(at / 1000000000), (long)(at % 1000000000)};
}

static void *try_lock(void *arg)
{
	clockid_t clock = *(clockid_t *)arg;
	struct timespec at = ahead(clock, 100000000);
	int64_t start = now_ns(CLOCK_MONOTONIC);
	int rc = sc__compat_mutex_clocklock(&held, clock, &at);
	int64_t waited = now_ns(CLOCK_MONOTONIC) - start;
	cr_expect_eq(rc, ETIMEDOUT, "clock %d", (int)clock);
	cr_expect_geq(waited, 90000000, "gave up after %lld ns", (long long)waited);
	return NULL;
}

Test(glibc_compat, clocklock_waits_until_the_deadline_on_either_clock)
{
	pthread_mutex_lock(&held);
	for (clockid_t clock = CLOCK_REALTIME; clock <= CLOCK_MONOTONIC; clock++) {
		pthread_t t;
		cr_assert_eq(pthread_create(&t, NULL, try_lock, &clock), 0);
		pthread_join(t, NULL);
	}
	pthread_mutex_unlock(&held);
	struct timespec at = ahead(CLOCK_MONOTONIC, 100000000);
	cr_expect_eq(sc__compat_mutex_clocklock(&held, CLOCK_MONOTONIC, &at), 0);
	pthread_mutex_unlock(&held);
	cr_expect_eq(sc__compat_mutex_clocklock(&held, CLOCK_PROCESS_CPUTIME_ID, &at), EINVAL);
}

Test(glibc_compat, spawn_addchdir_is_the_running_glibcs)
{
	int out[2];
	cr_assert_eq(pipe(out), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	cr_assert_eq(sc__compat_spawn_addchdir(&fa, "/proc/self/.."), 0);
	pid_t pid;
	char *argv[] = {"pwd", "-P", NULL};
	cr_assert_eq(posix_spawnp(&pid, "pwd", &fa, NULL, argv, NULL), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(out[1]);
	char buf[64] = {0};
	cr_expect_gt(read(out[0], buf, sizeof(buf) - 1), 0);
	close(out[0]);
	waitpid(pid, NULL, 0);
	cr_expect_str_eq(buf, "/proc\n");
}
