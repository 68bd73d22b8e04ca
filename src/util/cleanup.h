/* Cleanup attributes for the error paths of functions that take several resources: a variable
 * declared with one is released when it goes out of scope, however the function returns, and
 * the success path hands what it keeps over with SC_STEAL_PTR or SC_STEAL_FD. Only for locals
 * whose ownership is plain; a struct with an owner keeps its own _free. */
#ifndef SC_UTIL_CLEANUP_H
#define SC_UTIL_CLEANUP_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline void sc__freep(void *pp)
{
	void *p;
	memcpy(&p, pp, sizeof(p)); /* pp is the address of any T * */
	free(p);
}

/* Closes a descriptor that is not -1, keeping errno for the return path it runs on. */
static inline void sc__closep(int *fd)
{
	if (*fd < 0)
		return;
	int saved = errno;
	close(*fd);
	errno = saved;
}

/* char *text SC_AUTO_FREE = malloc(...); int fd SC_AUTO_CLOSE = open(...); */
#define SC_AUTO_FREE  __attribute__((cleanup(sc__freep)))
#define SC_AUTO_CLOSE __attribute__((cleanup(sc__closep)))

/* The value of a cleanup variable, which no longer owns it. */
#define SC_STEAL_PTR(p)                                                                            \
	({                                                                                         \
		__typeof__(p) stolen_ = (p);                                                       \
		(p) = NULL;                                                                        \
		stolen_;                                                                           \
	})
#define SC_STEAL_FD(fd)                                                                            \
	({                                                                                         \
		int stolen_ = (fd);                                                                \
		(fd) = -1;                                                                         \
		stolen_;                                                                           \
	})

#endif
