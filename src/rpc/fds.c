/* SCM_RIGHTS helpers; see fds.h. */
#define _GNU_SOURCE
#include "fds.h"

#include <string.h>
#include <unistd.h>

void sc__msg_attach_fds(struct msghdr *mh, union sc_fd_cmsg *u, const int *fds, size_t n_fds)
{
	memset(u, 0, sizeof(*u));
	mh->msg_control = u->buf;
	mh->msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
	struct cmsghdr *c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
	memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
}

void sc__msg_expect_fds(struct msghdr *mh, union sc_fd_cmsg *u)
{
	mh->msg_control = u->buf;
	mh->msg_controllen = sizeof(u->buf);
}

size_t sc__msg_take_fds(struct msghdr *mh, int *fds, size_t max)
{
	size_t got = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (fds && got < max)
				fds[got++] = fd;
			else
				close(fd);
		}
	}
	return got;
}
