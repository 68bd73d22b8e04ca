/* Record transport for the control channel. Received descriptors are always closed on error,
 * so a confused peer cannot make the host leak fds. */
#define _GNU_SOURCE
#include "control.h"
#include "fds.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

_Static_assert(SC_MAX_PASSED_FDS >= SC_CTL_MAX_FDS, "a cell's record fits the control buffer");

int sc__ctl_send(int sock, const struct sc_ctl_msg *msg, const int *fds, size_t n_fds)
{
	union sc_fd_cmsg u;
	struct iovec iov = {(void *)msg, sizeof(*msg)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n_fds > SC_CTL_MAX_FDS)
		return -EINVAL;
	if (n_fds > 0)
		sc__msg_attach_fds(&mh, &u, fds, n_fds);
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
	union sc_fd_cmsg u;
	struct iovec iov = {msg, sizeof(*msg)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	sc__msg_expect_fds(&mh, &u);
	ssize_t n;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	size_t got = sc__msg_take_fds(&mh, fds, fds ? SC_CTL_MAX_FDS : 0);
	if (n == 0 || n != (ssize_t)sizeof(*msg) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (size_t i = 0; i < got; i++)
			close(fds[i]);
		if (n == (ssize_t)sizeof(*msg) &&
		    (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == MSG_CTRUNC)
			return -EMFILE;
		return n == 0 ? -EPIPE : -EPROTO;
	}
	msg->message[sizeof(msg->message) - 1] = 0;
	if (n_fds)
		*n_fds = got;
	return 0;
}

int sc__hello_send(int sock)
{
	struct sc_hello h = {.protocol = SC_PROTOCOL_VERSION};
	memcpy(h.magic, SC_HELLO_MAGIC, sizeof(h.magic));
	ssize_t n;
	do
		n = send(sock, &h, sizeof(h), MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n == (ssize_t)sizeof(h) ? 0 : -EPROTO;
}

int sc__hello_recv(int sock, uint32_t *protocol)
{
	/* Room for more than a greeting, so a longer record shows as the wrong size. */
	union {
		struct sc_hello h;
		struct sc_ctl_msg m;
	} u;
	ssize_t n;
	do
		n = recv(sock, &u, sizeof(u), MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EPIPE;
	if (n != (ssize_t)sizeof(u.h) || memcmp(u.h.magic, SC_HELLO_MAGIC, sizeof(u.h.magic)))
		return -EPROTO;
	*protocol = u.h.protocol;
	return 0;
}
