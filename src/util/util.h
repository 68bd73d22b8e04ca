/* Small helpers shared by the host library and the cell helper: error messages, clocks, whole
 * reads and writes, and dirfd-based tree removal. Nothing here allocates without a cap. */
#ifndef SC_UTIL_H
#define SC_UTIL_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "snapcell.h"

#define SC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Fills err (if not NULL) with code and a message "<formatted>: <strerror(code)>"; returns
 * code so callers can write `return sc__err(err, -errno, "open %s", path);`. */
int sc__err(struct snapcell_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Gives a cause context as it climbs: err's message becomes "<formatted>: <message>" (cut to
 * fit), its code is kept. Returns err's code, or code when err is NULL. */
int sc__err_wrap(struct snapcell_error *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

uint64_t sc__now_us(void);

/* pthread_create with every signal blocked in the new thread (glibc keeps its own two), so a
 * signal sent to the process goes to one of the caller's threads, never to one the library
 * started; the calling thread's mask is unchanged. */
static inline int sc__thread_start(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
				   void *arg)
{
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(t, attr, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

/* Waits until fd has one of events or the deadline (sc__now_us clock) passes; a deadline
 * already past still checks once. 0, -ETIMEDOUT or -errno; EINTR is retried. */
int sc__wait_fd(int fd, short events, uint64_t deadline_us);

/* A deadline ms milliseconds from now. */
uint64_t sc__deadline_ms(uint64_t ms);

/* write()/read() until done; retry EINTR. Return 0 or -errno (-EPIPE for a short read). */
int sc__write_all(int fd, const void *buf, size_t len);
int sc__read_all(int fd, void *buf, size_t len);

/* Removes dirfd/name and everything beneath it without following any link, restoring
 * permissions on unreadable directories, with one directory descriptor whatever the depth
 * and time linear in the tree's size. deadline_us (sc__now_us() clock; 0 for none) bounds a
 * walk that a live writer keeps growing: -ETIMEDOUT. 0 or the first -errno. */
int sc__remove_tree(int dirfd, const char *name, uint64_t deadline_us);

/* The entry names of dirfd other than "." and "..", sorted bytewise, so walks that cap what
 * they take cut the same entries every time. Free with sc__names_free. 0 or -errno. */
int sc__sorted_names(int dirfd, char ***names, size_t *n);
void sc__names_free(char **names, size_t n);

/* Writes a small file relative to dirfd with the given mode (used to build the cell's /etc). */
int sc__write_file_at(int dirfd, const char *name, const char *content, mode_t mode);
/* Reads a small file relative to dirfd (AT_FDCWD: a path) with one read(), as /proc, /sys and
 * cgroup files are read: at most size - 1 bytes into buf, NUL-terminated even on failure.
 * The length read, or -errno. */
int sc__read_file_at(int dirfd, const char *name, char *buf, size_t size);
/* The same through a descriptor kept for the next read: *fd < 0 opens name and leaves it in *fd
 * (for the caller to close), then each call reads the text again from its start (pread; /proc
 * and cgroup files make it anew). A failed open leaves *fd -1 and is tried again next time. */
int sc__read_kept_at(int dirfd, const char *name, int *fd, char *buf, size_t size);
/* When process pid started: clock ticks after boot, /proc/PID/stat's 22nd field, into *start.
 * 0, or -errno (-ENOENT once the process is gone; -EINVAL for a line it cannot read). */
int sc__proc_start_time(pid_t pid, unsigned long long *start);

/* Whether s[0..len) is well-formed UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF): text that JSON, and a model, can carry. */
bool sc__utf8_valid(const char *s, size_t len);

/* FNV-1a of a NUL-terminated text: which prelude source a compiled prelude came from (the
 * host's and the guest module's copies of guest/prelude.py), not a defence against anyone. */
uint64_t sc__prelude_hash(const char *text); /* 63 bits */

#endif
