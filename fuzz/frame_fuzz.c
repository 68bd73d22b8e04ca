/* libFuzzer target for the frame codec (src/rpc/frame.c): decodes arbitrary bytes whole, byte by
 * byte and in pseudo-random slices, and through the blocking reader, and checks that every way
 * agrees and respects the cap; then reads the input's first frame with the reply reader. Builds
 * without libFuzzer too, for fuzz/replay.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rpc/frame.h"

#define CAP	     4096
#define BYTEWISE_MAX (64u << 10)
#define FNV_OFFSET   14695981039346656037ull
#define FNV_PRIME    1099511628211ull

/* abort() rather than assert(): the check must survive NDEBUG builds of the replay. */
#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "frame_fuzz: %s:%d: check failed: %s\n", __FILE__,         \
				__LINE__, #cond);                                                  \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What a pass saw: a digest of the frames in order, their count, and the error that ended it
 * (0 when the input simply ran out, on a frame boundary or not). */
struct outcome {
	uint64_t digest;
	size_t frames;
	int error;
};

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * FNV_PRIME;
	return h;
}

static void record(struct outcome *o, uint8_t type, const uint8_t *payload, size_t len)
{
	uint64_t len64 = len;
	CHECK(len <= CAP);
	CHECK(payload != NULL && payload[len] == 0);
	o->digest = fnv(o->digest, &type, 1);
	o->digest = fnv(o->digest, &len64, sizeof(len64));
	o->digest = fnv(o->digest, payload, len);
	o->frames++;
}

enum slicing { WHOLE, BYTEWISE, RANDOM };

/* Slice lengths for RANDOM mix empty, tiny, header-sized and large feeds. */
static size_t next_slice(enum slicing how, uint64_t *state, size_t left)
{
	if (how == WHOLE)
		return left;
	if (how == BYTEWISE)
		return left ? 1 : 0;
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	size_t r = (size_t)(*state >> 8), n;
	switch (*state & 3) {
	case 0:
		n = r % 8;
		break;
	case 1:
		n = 1 + r % 64;
		break;
	case 2:
		n = SC_FRAME_HEADER_LEN - 1 + r % 3;
		break;
	default:
		n = r % (2 * CAP);
		break;
	}
	return n < left ? n : left;
}

/* Feeds the input the way a caller such as core/run.c does, stopping at the first error. */
static struct outcome decode(const uint8_t *data, size_t size, enum slicing how, uint64_t seed)
{
	struct outcome o = {.digest = FNV_OFFSET};
	struct sc_frame_reader r;
	sc__frame_reader_init(&r, CAP);
	for (size_t off = 0; off < size;) {
		size_t len = next_slice(how, &seed, size - off);
		size_t used = SIZE_MAX;
		int rc = sc__frame_feed(&r, data + off, len, &used);
		CHECK(used <= len);
		off += used;
		if (rc < 0) {
			CHECK(rc == -EMSGSIZE);
			CHECK(r.payload == NULL);
			o.error = rc;
			break;
		}
		/* "More bytes needed" must mean all were taken: callers drop the rest. */
		CHECK(rc == 1 || used == len);
		if (rc == 1) {
			CHECK(used > 0);
			CHECK(r.payload_len <= r.cap);
			record(&o, sc__frame_type(&r), r.payload, r.payload_len);
		}
	}
	sc__frame_reader_reset(&r);
	return o;
}

/* The same bytes through sc__frame_read, from a memfd so no size limits apply. */
static struct outcome read_blocking(const uint8_t *data, size_t size)
{
	static int fd = -1;
	struct outcome o = {.digest = FNV_OFFSET};
	if (fd < 0)
		fd = memfd_create("frame_fuzz", MFD_CLOEXEC);
	CHECK(fd >= 0);
	CHECK(ftruncate(fd, 0) == 0);
	for (size_t off = 0; off < size;) {
		ssize_t n = pwrite(fd, data + off, size - off, (off_t)off);
		CHECK(n > 0);
		off += (size_t)n;
	}
	CHECK(lseek(fd, 0, SEEK_SET) == 0);
	for (;;) {
		uint8_t type, *payload = NULL;
		size_t len = SIZE_MAX;
		int rc = sc__frame_read(fd, CAP, &type, &payload, &len);
		if (rc < 0) {
			CHECK(rc == -EPIPE || rc == -EMSGSIZE);
			CHECK(payload == NULL);
			o.error = rc == -EMSGSIZE ? rc : 0;
			return o;
		}
		record(&o, type, payload, len);
		free(payload);
	}
}

/* sc__frame_read_reply on a socket holding the input (up to what a socket buffer surely
 * takes), then end of stream: the first frame the other readers saw, or a refusal that fits:
 * its cap, a cut-short input, or bytes past the one frame it owed. */
#define REPLY_MAX 16384
static void read_reply(const uint8_t *data, size_t size)
{
	if (size > REPLY_MAX)
		return;
	struct outcome first = {.digest = FNV_OFFSET};
	struct sc_frame_reader r;
	sc__frame_reader_init(&r, CAP);
	size_t used = 0;
	int whole_rc = sc__frame_feed(&r, data, size, &used);
	if (whole_rc == 1)
		record(&first, sc__frame_type(&r), r.payload, r.payload_len);
	sc__frame_reader_reset(&r);
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	CHECK(size == 0 || write(sv[0], data, size) == (ssize_t)size);
	close(sv[0]);
	uint8_t type, *payload = NULL;
	size_t len = SIZE_MAX;
	struct sc_spin spin = {.window_us = 10};
	int rc = sc__frame_read_reply(sv[1], CAP, &spin, &type, &payload, &len);
	close(sv[1]);
	if (rc == 0) {
		struct outcome got = {.digest = FNV_OFFSET};
		record(&got, type, payload, len);
		free(payload);
		CHECK(whole_rc == 1 && got.digest == first.digest);
		return;
	}
	CHECK(payload == NULL);
	if (whole_rc == -EMSGSIZE)
		CHECK(rc == -EMSGSIZE);
	else if (whole_rc == 0)
		CHECK(rc == -EPIPE);
	else
		CHECK(rc == -EPROTO && size > used);
}

static void expect_same(const struct outcome *a, const struct outcome *b)
{
	CHECK(a->frames == b->frames);
	CHECK(a->digest == b->digest);
	CHECK(a->error == b->error);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct outcome whole = decode(data, size, WHOLE, 0);
	uint64_t seed = fnv(FNV_OFFSET, data, size) | 1;
	for (int i = 0; i < 2; i++) {
		struct outcome sliced =
			decode(data, size, RANDOM, seed + 0x9e3779b97f4a7c15ull * i);
		expect_same(&whole, &sliced);
	}
	if (size <= BYTEWISE_MAX) {
		struct outcome bytewise = decode(data, size, BYTEWISE, 0);
		expect_same(&whole, &bytewise);
	}
	struct outcome blocking = read_blocking(data, size);
	expect_same(&whole, &blocking);
	read_reply(data, size);
	return 0;
}
