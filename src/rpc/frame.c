/* Frame encoding and decoding. The decoder never trusts the peer's length beyond the cap. */
#define _GNU_SOURCE
#include "frame.h"
#include "fds.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "util/util.h"

void sc__frame_reader_init(struct sc_frame_reader *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->cap = cap;
}

void sc__frame_reader_reset(struct sc_frame_reader *r)
{
	free(r->payload);
	size_t cap = r->cap;
	sc__frame_reader_init(r, cap);
}

void sc__frame_header(uint8_t out[SC_FRAME_HEADER_LEN], uint8_t type, size_t payload_len)
{
	uint32_t n = (uint32_t)payload_len + 1;
	out[0] = (uint8_t)n;
	out[1] = (uint8_t)(n >> 8);
	out[2] = (uint8_t)(n >> 16);
	out[3] = (uint8_t)(n >> 24);
	out[4] = type;
}

static int header_done(struct sc_frame_reader *r)
{
	uint32_t n = (uint32_t)r->header[0] | (uint32_t)r->header[1] << 8 |
		     (uint32_t)r->header[2] << 16 | (uint32_t)r->header[3] << 24;
	if (n == 0 || n - 1 > r->cap)
		return -EMSGSIZE;
	r->payload_len = n - 1;
	r->payload = malloc(r->payload_len + 1);
	if (!r->payload)
		return -ENOMEM;
	r->payload[r->payload_len] = 0;
	return 0;
}

int sc__frame_feed(struct sc_frame_reader *r, const uint8_t *buf, size_t len, size_t *used)
{
	size_t off = 0;
	*used = 0;
	if (r->header_got == SC_FRAME_HEADER_LEN && !r->payload)
		return -EMSGSIZE; /* a refused header: its payload must never parse as frames */
	if (r->header_got == SC_FRAME_HEADER_LEN && r->payload_got == r->payload_len) {
		/* The previous frame was handed out; start the next one. */
		sc__frame_reader_reset(r);
	}
	while (r->header_got < SC_FRAME_HEADER_LEN && off < len)
		r->header[r->header_got++] = buf[off++];
	if (r->header_got < SC_FRAME_HEADER_LEN) {
		*used = off;
		return 0;
	}
	if (!r->payload) {
		int rc = header_done(r);
		if (rc < 0) {
			*used = off;
			return rc;
		}
	}
	size_t take = r->payload_len - r->payload_got;
	if (take > len - off)
		take = len - off;
	if (take)
		memcpy(r->payload + r->payload_got, buf + off, take);
	r->payload_got += take;
	*used = off + take;
	return r->payload_got == r->payload_len;
}

uint8_t sc__frame_type(const struct sc_frame_reader *r)
{
	return r->header[4];
}

int sc__frame_write(int fd, uint8_t type, const void *payload, size_t len)
{
	uint8_t hdr[SC_FRAME_HEADER_LEN];
	if (len >= UINT32_MAX)
		return -EMSGSIZE;
	sc__frame_header(hdr, type, len);
	struct iovec iov[2] = {{hdr, sizeof(hdr)}, {(void *)payload, len}};
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = 2};
	while (iov[0].iov_len + iov[1].iov_len > 0) {
		ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		for (int i = 0; i < 2; i++) {
			size_t k = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
			iov[i].iov_base = (char *)iov[i].iov_base + k;
			iov[i].iov_len -= k;
			n -= (ssize_t)k;
		}
	}
	return 0;
}

int sc__frame_read(int fd, size_t cap, uint8_t *type, uint8_t **payload, size_t *len)
{
	uint8_t hdr[SC_FRAME_HEADER_LEN];
	int rc = sc__read_all(fd, hdr, sizeof(hdr));
	if (rc < 0)
		return rc;
	uint32_t n = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
		     (uint32_t)hdr[3] << 24;
	if (n == 0 || n - 1 > cap)
		return -EMSGSIZE;
	uint8_t *p = malloc(n);
	if (!p)
		return -ENOMEM;
	rc = sc__read_all(fd, p, n - 1);
	if (rc < 0) {
		free(p);
		return rc;
	}
	p[n - 1] = 0;
	*type = hdr[4];
	*payload = p;
	*len = n - 1;
	return 0;
}

uint64_t sc__spin_start(struct sc_spin *s)
{
	if (s->window_us == 0)
		return 0;
	if (s->skip > 0) {
		s->skip--;
		return 0;
	}
	return sc__now_us() + s->window_us;
}

void sc__spin_end(struct sc_spin *s, bool caught)
{
	if (caught) {
		s->backoff = 0;
		return;
	}
	s->backoff = s->backoff ? s->backoff * 2 : 1;
	if (s->backoff > SC_SPIN_MAX_BACKOFF)
		s->backoff = SC_SPIN_MAX_BACKOFF;
	s->skip = s->backoff;
}

/* The first bytes of an answer: non-blocking reads while the spin lasts, then a blocking one. */
static ssize_t first_read(int fd, void *buf, size_t len, struct sc_spin *s)
{
	uint64_t until = s ? sc__spin_start(s) : 0;
	bool spun = until != 0;
	for (;;) {
		ssize_t n = recv(fd, buf, len, until ? MSG_DONTWAIT : 0);
		if (n >= 0 || (errno != EINTR && errno != EAGAIN)) {
			if (spun)
				sc__spin_end(s, until != 0);
			return n < 0 ? -errno : n;
		}
		if (until && sc__now_us() >= until)
			until = 0;
	}
}

int sc__frame_read_reply(int fd, size_t cap, struct sc_spin *s, uint8_t *type, uint8_t **payload,
			 size_t *len)
{
	uint8_t buf[SC_FRAME_REPLY_READ];
	ssize_t got = first_read(fd, buf, sizeof(buf), s);
	if (got <= 0)
		return got < 0 ? (int)got : -EPIPE;
	int rc = 0;
	if (got < SC_FRAME_HEADER_LEN) {
		rc = sc__read_all(fd, buf + got, SC_FRAME_HEADER_LEN - (size_t)got);
		got = SC_FRAME_HEADER_LEN;
	}
	if (rc < 0)
		return rc;
	uint32_t n = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
		     (uint32_t)buf[3] << 24;
	if (n == 0 || n - 1 > cap)
		return -EMSGSIZE;
	size_t have = (size_t)got - SC_FRAME_HEADER_LEN;
	if (have > n - 1)
		return -EPROTO; /* bytes past the one frame the peer owed */
	uint8_t *p = malloc(n);
	if (!p)
		return -ENOMEM;
	memcpy(p, buf + SC_FRAME_HEADER_LEN, have);
	rc = sc__read_all(fd, p + have, n - 1 - have);
	if (rc < 0) {
		free(p);
		return rc;
	}
	p[n - 1] = 0;
	*type = buf[4];
	*payload = p;
	*len = n - 1;
	return 0;
}

int sc__frame_write_fds(int fd, uint8_t type, const void *payload, size_t len, const int *fds,
			size_t n_fds)
{
	uint8_t hdr[SC_FRAME_HEADER_LEN];
	union sc_fd_cmsg u;
	if (n_fds == 0 || n_fds > SC_FRAME_MAX_FDS)
		return -EINVAL;
	sc__frame_header(hdr, type, len);
	struct iovec iov = {hdr, sizeof(hdr)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	sc__msg_attach_fds(&mh, &u, fds, n_fds);
	/* The descriptors ride on the header bytes; the payload follows as plain data. */
	ssize_t n;
	do
		n = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n < (ssize_t)sizeof(hdr)) {
		int rc = sc__write_all(fd, hdr + n, sizeof(hdr) - (size_t)n);
		if (rc < 0)
			return rc;
	}
	return sc__write_all(fd, payload, len);
}

int sc__frame_read_fds(int fd, size_t cap, uint8_t *type, uint8_t **payload, size_t *len, int *fds,
		       size_t max_fds, size_t *n_fds)
{
	uint8_t hdr[SC_FRAME_HEADER_LEN];
	union sc_fd_cmsg u;
	struct iovec iov = {hdr, sizeof(hdr)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	sc__msg_expect_fds(&mh, &u);
	ssize_t n;
	do
		n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
	while (n < 0 && errno == EINTR);
	*n_fds = n < 0 ? 0 : sc__msg_take_fds(&mh, fds, max_fds);
	int rc = n < 0 ? -errno : n < (ssize_t)sizeof(hdr) ? -EPIPE : 0;
	uint32_t total = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
			 (uint32_t)hdr[3] << 24;
	if (rc == 0 && (total == 0 || total - 1 > cap))
		rc = -EMSGSIZE;
	uint8_t *p = rc == 0 ? malloc(total) : NULL;
	if (rc == 0 && !p)
		rc = -ENOMEM;
	if (rc == 0 && (rc = sc__read_all(fd, p, total - 1)) == 0) {
		p[total - 1] = 0;
		*type = hdr[4];
		*payload = p;
		*len = total - 1;
		return 0;
	}
	free(p);
	for (size_t i = 0; i < *n_fds; i++)
		close(fds[i]);
	*n_fds = 0;
	return rc;
}
