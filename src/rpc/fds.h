/* Passing descriptors over unix sockets (SCM_RIGHTS), once for every sender and receiver. A
 * receiver always takes every descriptor that arrived, keeping what it asked for and closing
 * the rest, so a peer cannot fill its table. */
#ifndef SC_RPC_FDS_H
#define SC_RPC_FDS_H

#include <stddef.h>
#include <sys/socket.h>

#define SC_MAX_PASSED_FDS 72 /* >= SC_CTL_MAX_FDS */

union sc_fd_cmsg {
	char buf[CMSG_SPACE(sizeof(int) * SC_MAX_PASSED_FDS)];
	struct cmsghdr align;
};

/* Attaches n_fds (1 to SC_MAX_PASSED_FDS) descriptors to mh, using u as the control buffer. */
void sc__msg_attach_fds(struct msghdr *mh, union sc_fd_cmsg *u, const int *fds, size_t n_fds);

/* Points mh's control buffer at u before a recvmsg. */
void sc__msg_expect_fds(struct msghdr *mh, union sc_fd_cmsg *u);

/* After a recvmsg with MSG_CMSG_CLOEXEC: stores up to max descriptors into fds, closes the
 * others, returns how many were stored. */
size_t sc__msg_take_fds(struct msghdr *mh, int *fds, size_t max);

/* The channels of one cell or session worker: a frame socket and stdout and stderr pipes.
 * host[] = {socket, stdout read end, stderr read end}, the read ends non-blocking (the host
 * drains them); cell[] = {socket, stdout write end, stderr write end}, blocking. All
 * O_CLOEXEC. 0 or -errno (nothing left open). */
int sc__channels_new(int host[3], int cell[3]);

#endif
