/* The descriptor set (fdset.h). Members are unique and >= 0; the set is the only owner of
 * each until sc__fdset_take hands it on. */
#define _GNU_SOURCE
#include "fdset.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"

static int *members(struct sc_fdset *set)
{
	return set->heap ? set->heap : set->inline_fds;
}

static int close_keeping_errno(int fd)
{
	int saved = errno;
	close(fd);
	errno = saved;
	return fd;
}

int sc__fdset_add(struct sc_fdset *set, int fd)
{
	if (fd < 0)
		return errno ? -errno : -EBADF;
	if (set->n == SC_FDSET_INLINE && !set->heap) {
		size_t alloc = 0;
		int *heap = NULL;
		if (SC_ARRAY_RESERVE(heap, alloc, set->n + 1, SIZE_MAX / sizeof(int)) < 0) {
			close_keeping_errno(fd);
			return -ENOMEM;
		}
		memcpy(heap, set->inline_fds, sizeof(set->inline_fds));
		set->heap = heap;
		set->alloc = alloc;
	} else if (set->heap && SC_ARRAY_RESERVE(set->heap, set->alloc, set->n + 1,
						 SIZE_MAX / sizeof(int)) < 0) {
		close_keeping_errno(fd);
		return -ENOMEM;
	}
	members(set)[set->n++] = fd;
	return fd;
}

int sc__fdset_pipe(struct sc_fdset *set, int fds[2], int flags)
{
	int p[2];
	if (pipe2(p, flags) < 0)
		return -errno;
	int rc = sc__fdset_add(set, p[0]);
	if (rc < 0) {
		close_keeping_errno(p[1]);
		return rc;
	}
	rc = sc__fdset_add(set, p[1]);
	if (rc < 0)
		return rc; /* p[0] stays a member: the set closes it with the rest */
	fds[0] = p[0], fds[1] = p[1];
	return 0;
}

static size_t find(const struct sc_fdset *set, int fd)
{
	const int *m = set->heap ? set->heap : set->inline_fds;
	size_t i = 0;
	while (i < set->n && m[i] != fd)
		i++;
	return i;
}

int sc__fdset_has(const struct sc_fdset *set, int fd)
{
	return fd >= 0 && find(set, fd) < set->n;
}

int sc__fdset_take(struct sc_fdset *set, int fd)
{
	size_t i = find(set, fd);
	if (fd < 0 || i == set->n)
		return -EBADF;
	int *m = members(set);
	m[i] = m[--set->n];
	return fd;
}

void sc__fdset_release(struct sc_fdset *set)
{
	if (set->heap)
		free(set->heap);
	set->heap = NULL;
	set->n = set->alloc = 0;
}

void sc__fdset_close(struct sc_fdset *set, int fd)
{
	if (sc__fdset_take(set, fd) >= 0)
		close_keeping_errno(fd);
}

void sc__fdset_close_all(struct sc_fdset *set)
{
	int *m = members(set);
	for (size_t i = 0; i < set->n; i++)
		close_keeping_errno(m[i]);
	sc__fdset_release(set);
}
