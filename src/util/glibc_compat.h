#ifndef SC_UTIL_GLIBC_COMPAT_H
#define SC_UTIL_GLIBC_COMPAT_H
/* glibc_compat.c's versions of glibc functions newer than 2.28, under names of their own (the
 * glibc names are defined there only when the glibc built against lacks them). */
#include <pthread.h>
#include <spawn.h>
#include <time.h>

/* strerrorname_np and strerrordesc_np (glibc 2.32): NULL for a number with no name. */
const char *sc__compat_strerrorname(int e);
const char *sc__compat_strerrordesc(int e);
/* sigabbrev_np (glibc 2.32): a signal's name without SIG, NULL for a real-time one. */
const char *sc__compat_sigabbrev(int sig);
/* pthread_mutex_clocklock (glibc 2.30), for CLOCK_REALTIME and CLOCK_MONOTONIC. */
int sc__compat_mutex_clocklock(pthread_mutex_t *m, clockid_t clock, const struct timespec *at);
/* posix_spawn_file_actions_addchdir_np (glibc 2.29): the running glibc's, or ENOSYS. */
int sc__compat_spawn_addchdir(posix_spawn_file_actions_t *fa, const char *path);

#endif
