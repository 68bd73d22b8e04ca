/* The few glibc functions newer than 2.28 that snapcell calls, for the wheel, which is built
 * against glibc 2.28 (manylinux_2_28: scripts/build-wheel) to install on older systems. Each is
 * defined here only when the glibc built against lacks it, so any other build uses glibc's own.
 * The versions are kept as sc__compat_* whatever the glibc, so the unit tests compare them
 * with glibc's. Not a portability layer for anything but glibc. */
#define _GNU_SOURCE
#include "util/glibc_compat.h"

#include <dlfcn.h>
#include <errno.h>
#include <locale.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* Linux's errno numbers (the kernel's ABI, so one table serves every glibc) 1 to EHWPOISON, by
 * the names glibc 2.32's strerrorname_np gives (EAGAIN, EDEADLK and EOPNOTSUPP, not their
 * aliases); 41 and 58 have none. */
static const char *const errno_names[] = {NULL,
					  "EPERM",
					  "ENOENT",
					  "ESRCH",
					  "EINTR",
					  "EIO",
					  "ENXIO",
					  "E2BIG",
					  "ENOEXEC",
					  "EBADF",
					  "ECHILD",
					  "EAGAIN",
					  "ENOMEM",
					  "EACCES",
					  "EFAULT",
					  "ENOTBLK",
					  "EBUSY",
					  "EEXIST",
					  "EXDEV",
					  "ENODEV",
					  "ENOTDIR",
					  "EISDIR",
					  "EINVAL",
					  "ENFILE",
					  "EMFILE",
					  "ENOTTY",
					  "ETXTBSY",
					  "EFBIG",
					  "ENOSPC",
					  "ESPIPE",
					  "EROFS",
					  "EMLINK",
					  "EPIPE",
					  "EDOM",
					  "ERANGE",
					  "EDEADLK",
					  "ENAMETOOLONG",
					  "ENOLCK",
					  "ENOSYS",
					  "ENOTEMPTY",
					  "ELOOP",
					  NULL,
					  "ENOMSG",
					  "EIDRM",
					  "ECHRNG",
					  "EL2NSYNC",
					  "EL3HLT",
					  "EL3RST",
					  "ELNRNG",
					  "EUNATCH",
					  "ENOCSI",
					  "EL2HLT",
					  "EBADE",
					  "EBADR",
					  "EXFULL",
					  "ENOANO",
					  "EBADRQC",
					  "EBADSLT",
					  NULL,
					  "EBFONT",
					  "ENOSTR",
					  "ENODATA",
					  "ETIME",
					  "ENOSR",
					  "ENONET",
					  "ENOPKG",
					  "EREMOTE",
					  "ENOLINK",
					  "EADV",
					  "ESRMNT",
					  "ECOMM",
					  "EPROTO",
					  "EMULTIHOP",
					  "EDOTDOT",
					  "EBADMSG",
					  "EOVERFLOW",
					  "ENOTUNIQ",
					  "EBADFD",
					  "EREMCHG",
					  "ELIBACC",
					  "ELIBBAD",
					  "ELIBSCN",
					  "ELIBMAX",
					  "ELIBEXEC",
					  "EILSEQ",
					  "ERESTART",
					  "ESTRPIPE",
					  "EUSERS",
					  "ENOTSOCK",
					  "EDESTADDRREQ",
					  "EMSGSIZE",
					  "EPROTOTYPE",
					  "ENOPROTOOPT",
					  "EPROTONOSUPPORT",
					  "ESOCKTNOSUPPORT",
					  "EOPNOTSUPP",
					  "EPFNOSUPPORT",
					  "EAFNOSUPPORT",
					  "EADDRINUSE",
					  "EADDRNOTAVAIL",
					  "ENETDOWN",
					  "ENETUNREACH",
					  "ENETRESET",
					  "ECONNABORTED",
					  "ECONNRESET",
					  "ENOBUFS",
					  "EISCONN",
					  "ENOTCONN",
					  "ESHUTDOWN",
					  "ETOOMANYREFS",
					  "ETIMEDOUT",
					  "ECONNREFUSED",
					  "EHOSTDOWN",
					  "EHOSTUNREACH",
					  "EALREADY",
					  "EINPROGRESS",
					  "ESTALE",
					  "EUCLEAN",
					  "ENOTNAM",
					  "ENAVAIL",
					  "EISNAM",
					  "EREMOTEIO",
					  "EDQUOT",
					  "ENOMEDIUM",
					  "EMEDIUMTYPE",
					  "ECANCELED",
					  "ENOKEY",
					  "EKEYEXPIRED",
					  "EKEYREVOKED",
					  "EKEYREJECTED",
					  "EOWNERDEAD",
					  "ENOTRECOVERABLE",
					  "ERFKILL",
					  "EHWPOISON"};

const char *sc__compat_strerrorname(int e)
{
	_Static_assert(sizeof(errno_names) / sizeof(errno_names[0]) == EHWPOISON + 1,
		       "1 to EHWPOISON");
	return e > 0 && e <= EHWPOISON ? errno_names[e] : NULL;
}

const char *sc__compat_strerrordesc(int e)
{
	/* strerror_l in the C locale reads the table strerrordesc_np does; glibc's C locale object
	 * is static, so nothing is allocated for a number that has a name. */
	return sc__compat_strerrorname(e) ? strerror_l(e, newlocale(LC_ALL_MASK, "C", (locale_t)0))
					  : NULL;
}

/* Linux's x86-64 signal numbers 1 to 31 by glibc 2.32's sigabbrev_np names; real-time signals
 * have none. */
static const char *const signal_names[] = {
	NULL,	"HUP",	"INT",	"QUIT", "ILL",	  "TRAP",   "ABRT",  "BUS",  "FPE",  "KILL", "USR1",
	"SEGV", "USR2", "PIPE", "ALRM", "TERM",	  "STKFLT", "CHLD",  "CONT", "STOP", "TSTP", "TTIN",
	"TTOU", "URG",	"XCPU", "XFSZ", "VTALRM", "PROF",   "WINCH", "POLL", "PWR",  "SYS"};

const char *sc__compat_sigabbrev(int sig)
{
	_Static_assert(sizeof(signal_names) / sizeof(signal_names[0]) == SIGSYS + 1, "1 to SIGSYS");
	return sig > 0 && sig <= SIGSYS ? signal_names[sig] : NULL;
}

int sc__compat_mutex_clocklock(pthread_mutex_t *m, clockid_t clock, const struct timespec *at)
{
	if (clock == CLOCK_REALTIME)
		return pthread_mutex_timedlock(m, at);
	if (clock != CLOCK_MONOTONIC)
		return EINVAL;
	/* The same distance ahead on the clock pthread_mutex_timedlock waits on. */
	struct timespec mono, real;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	clock_gettime(CLOCK_REALTIME, &real);
	int64_t left =
		((int64_t)at->tv_sec - mono.tv_sec) * 1000000000 + (at->tv_nsec - mono.tv_nsec);
	int64_t until = (int64_t)real.tv_sec * 1000000000 + real.tv_nsec + (left > 0 ? left : 0);
	struct timespec deadline = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
	return pthread_mutex_timedlock(m, &deadline);
}

int sc__compat_spawn_addchdir(posix_spawn_file_actions_t *fa, const char *path)
{
	/* Only glibc can add a chdir to its posix_spawn: the running glibc's, from 2.29 on. */
	int (*addchdir)(posix_spawn_file_actions_t *, const char *);
	*(void **)&addchdir =
		dlvsym(RTLD_DEFAULT, "posix_spawn_file_actions_addchdir_np", "GLIBC_2.29");
	return addchdir ? addchdir(fa, path) : ENOSYS;
}

#if !__GLIBC_PREREQ(2, 32)
const char *strerrorname_np(int e)
{
	return sc__compat_strerrorname(e);
}

const char *strerrordesc_np(int e)
{
	return sc__compat_strerrordesc(e);
}

const char *sigabbrev_np(int sig)
{
	return sc__compat_sigabbrev(sig);
}
#endif

#if !__GLIBC_PREREQ(2, 30)
int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clock, const struct timespec *at)
{
	return sc__compat_mutex_clocklock(m, clock, at);
}
#endif

#if !__GLIBC_PREREQ(2, 29)
int posix_spawn_file_actions_addchdir_np(posix_spawn_file_actions_t *fa, const char *path)
{
	return sc__compat_spawn_addchdir(fa, path);
}
#endif
