/* Record transport for the control channel. Received descriptors are always closed on error,
 * so a confused peer cannot make the host leak fds. */
#define _GNU_SOURCE
#include "control.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int sc__ctl_send(int sock, const struct sc_ctl_msg *msg, const int *fds, size_t n_fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SC_CELL_NFDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {(void *)msg, sizeof(*msg)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n_fds > SC_CELL_NFDS)
		return -EINVAL;
	if (n_fds > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * n_fds);
	}
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL);
		if (n >= 0)
			return n == (ssize_t)sizeof(*msg) ? 0 : -EPROTO;
		if (errno != EINTR)
			return -errno;
	}
}

int sc__ctl_recv(int sock, struct sc_ctl_msg *msg, int *fds, size_t *n_fds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * SC_CELL_NFDS)];
		struct cmsghdr align;
	} u;
	struct iovec iov = {msg, sizeof(*msg)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf)};
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	size_t got = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (fds && got < SC_CELL_NFDS)
				fds[got++] = fd;
			else
				close(fd);
		}
	}
	if (n == 0 || n != (ssize_t)sizeof(*msg) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		return n == 0 ? -EPIPE : -EPROTO;
	}
	msg->message[sizeof(msg->message) - 1] = 0;
	if (n_fds)
		*n_fds = got;
	return 0;
}
