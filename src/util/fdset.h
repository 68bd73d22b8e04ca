/* A descriptor set: the descriptors a setup step opens, owned together until the step hands
 * them on, so a failure anywhere closes all of them with one call (or with SC_AUTO_FDSET)
 * instead of a chain of close() that must name each one. Small by design: a linear list,
 * for the few descriptors of one step. */
#ifndef SC_UTIL_FDSET_H
#define SC_UTIL_FDSET_H

#include <stddef.h>

/* Members are held inline up to this many, so the common step allocates nothing. */
#define SC_FDSET_INLINE 8

struct sc_fdset {
	int inline_fds[SC_FDSET_INLINE];
	int *heap; /* past SC_FDSET_INLINE: all members, the inline ones copied in */
	size_t n, alloc;
};

#define SC_FDSET_INIT                                                                              \
	{                                                                                          \
		.n = 0                                                                             \
	}

/* Adds fd, which the set owns from now on, and returns it; adding -1 (or any negative value,
 * as a failed open() gives) adds nothing and returns -errno as the failed call left it, so
 * `int fd = sc__fdset_add(&set, open(...)); if (fd < 0) ...` reads as the call it wraps.
 * -ENOMEM when the set cannot grow, with fd closed: the set owns it either way. A set that
 * holds fewer than SC_FDSET_INLINE members always has room. */
int sc__fdset_add(struct sc_fdset *set, int fd);

/* Creates a pipe (flags as pipe2's) whose two ends the set owns. 0 or -errno. */
int sc__fdset_pipe(struct sc_fdset *set, int fds[2], int flags);

/* Whether fd is a member. */
int sc__fdset_has(const struct sc_fdset *set, int fd);

/* Removes fd from the set without closing it and returns it: its new owner has it. -EBADF
 * when it is not a member. */
int sc__fdset_take(struct sc_fdset *set, int fd);

/* Hands every member on at once (the success path of a step whose descriptors all went to
 * their owners): the set is left empty, nothing closed. */
void sc__fdset_release(struct sc_fdset *set);

/* Closes one member early (a pipe end the parent does not keep). */
void sc__fdset_close(struct sc_fdset *set, int fd);

/* Closes every member, frees the set's memory and leaves it empty and reusable; errno is
 * kept. Async-signal-safe when the set never grew past SC_FDSET_INLINE (no free() then). */
void sc__fdset_close_all(struct sc_fdset *set);

#define SC_AUTO_FDSET __attribute__((cleanup(sc__fdset_close_all)))

#endif
