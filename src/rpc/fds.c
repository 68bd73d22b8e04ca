/* SCM_RIGHTS helpers; see fds.h. */
#define _GNU_SOURCE
#include "fds.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fdset.h"

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

int sc__channels_new(int host[3], int cell[3])
{
	struct sc_fdset set SC_AUTO_FDSET = SC_FDSET_INIT; /* six members: always room */
	int s[2], out[2], err[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s) < 0)
		return -errno;
	sc__fdset_add(&set, s[0]);
	sc__fdset_add(&set, s[1]);
	int rc = sc__fdset_pipe(&set, out, O_CLOEXEC);
	if (rc < 0 || (rc = sc__fdset_pipe(&set, err, O_CLOEXEC)) < 0)
		return rc;
	fcntl(out[0], F_SETFL, O_NONBLOCK);
	fcntl(err[0], F_SETFL, O_NONBLOCK);
	host[0] = s[0], host[1] = out[0], host[2] = err[0];
	cell[0] = s[1], cell[1] = out[1], cell[2] = err[1];
	sc__fdset_release(&set);
	return 0;
}
