/* The frame codec on its own: header bytes, the incremental decoder under any split of its input,
 * the cap, and the blocking read/write pair over a real socket. No sandbox is started. */
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include "helpers.h"
#include "rpc/frame.h"

/* Header + payload in a caller buffer; returns the frame length. */
static size_t make_frame(uint8_t *out, uint8_t type, const char *payload, size_t len)
{
	sc__frame_header(out, type, len);
	memcpy(out + SC_FRAME_HEADER_LEN, payload, len);
	return SC_FRAME_HEADER_LEN + len;
}

static void expect_frame(const struct sc_frame_reader *r, uint8_t type, const char *payload,
			 size_t len)
{
	cr_expect_eq(sc__frame_type(r), type);
	cr_assert_eq(r->payload_len, len);
	cr_expect_eq(memcmp(r->payload, payload, len), 0);
	cr_expect_eq(r->payload[len], 0, "payload is NUL-terminated");
}

Test(frame, header_is_little_endian_length_of_type_plus_payload)
{
	uint8_t h[SC_FRAME_HEADER_LEN];
	sc__frame_header(h, SC_FRAME_RUN, 3);
	uint8_t small[] = {4, 0, 0, 0, 'R'};
	cr_expect_arr_eq(h, small, sizeof(small));
	sc__frame_header(h, SC_FRAME_DONE, 0x01020303);
	uint8_t big[] = {0x04, 0x03, 0x02, 0x01, 'D'};
	cr_expect_arr_eq(h, big, sizeof(big));
	sc__frame_header(h, SC_FRAME_DONE, 0);
	uint8_t empty[] = {1, 0, 0, 0, 'D'};
	cr_expect_arr_eq(h, empty, sizeof(empty));
}

Test(frame, decodes_byte_by_byte)
{
	uint8_t buf[64];
	size_t n = make_frame(buf, SC_FRAME_RUN, "print(1)", 8);
	struct sc_frame_reader r;
	sc__frame_reader_init(&r, 64);
	for (size_t i = 0; i < n; i++) {
		size_t used = 99;
		int rc = sc__frame_feed(&r, buf + i, 1, &used);
		cr_assert_eq(rc, i == n - 1 ? 1 : 0, "byte %zu: rc %d", i, rc);
		cr_assert_eq(used, 1);
	}
	expect_frame(&r, SC_FRAME_RUN, "print(1)", 8);
	sc__frame_reader_reset(&r);
}

Test(frame, decodes_in_one_go)
{
	uint8_t buf[64];
	size_t n = make_frame(buf, SC_FRAME_RUN, "x = 1", 5);
	struct sc_frame_reader r;
	sc__frame_reader_init(&r, 64);
	size_t used = 0;
	cr_assert_eq(sc__frame_feed(&r, buf, n, &used), 1);
	cr_expect_eq(used, n);
	expect_frame(&r, SC_FRAME_RUN, "x = 1", 5);
	sc__frame_reader_reset(&r);
}

Test(frame, two_frames_in_one_buffer_come_out_one_at_a_time)
{
	uint8_t buf[64];
	size_t n1 = make_frame(buf, SC_FRAME_RUN, "first", 5);
	size_t n2 = make_frame(buf + n1, SC_FRAME_DONE, "second!", 7);
	struct sc_frame_reader r;
	sc__frame_reader_init(&r, 64);
	size_t used = 0;
	cr_assert_eq(sc__frame_feed(&r, buf, n1 + n2, &used), 1);
	cr_assert_eq(used, n1, "the decoder stops at the end of the first frame");
	expect_frame(&r, SC_FRAME_RUN, "first", 5);
	cr_assert_eq(sc__frame_feed(&r, buf + n1, n2, &used), 1);
	cr_expect_eq(used, n2);
	expect_frame(&r, SC_FRAME_DONE, "second!", 7);
	cr_expect_eq(sc__frame_feed(&r, buf, 0, &used), 0, "nothing left: more bytes needed");
	cr_expect_eq(used, 0);
	sc__frame_reader_reset(&r);
}

Test(frame, zero_length_payload_is_a_frame)
{
	uint8_t buf[SC_FRAME_HEADER_LEN];
	sc__frame_header(buf, SC_FRAME_DONE, 0);
	struct sc_frame_reader r;
	sc__frame_reader_init(&r, 64);
	size_t used = 0;
	cr_assert_eq(sc__frame_feed(&r, buf, 4, &used), 0);
	cr_expect_eq(used, 4);
	cr_assert_eq(sc__frame_feed(&r, buf + 4, 1, &used), 1);
	cr_expect_eq(used, 1);
	expect_frame(&r, SC_FRAME_DONE, "", 0);
	sc__frame_reader_reset(&r);
}

Test(frame, length_over_cap_is_refused_without_allocating)
{
	struct sc_frame_reader r;
	sc__frame_reader_init(&r, 16);
	uint8_t buf[SC_FRAME_HEADER_LEN + 16];
	size_t used = 0;

	/* Exactly at the cap is fine. */
	size_t n = make_frame(buf, SC_FRAME_RUN, "0123456789abcdef", 16);
	cr_assert_eq(sc__frame_feed(&r, buf, n, &used), 1);
	sc__frame_reader_reset(&r);

	sc__frame_header(buf, SC_FRAME_RUN, 17);
	cr_expect_eq(sc__frame_feed(&r, buf, SC_FRAME_HEADER_LEN, &used), -EMSGSIZE);
	cr_expect_eq(used, SC_FRAME_HEADER_LEN);
	cr_expect_null(r.payload);
	sc__frame_reader_reset(&r);

	/* A peer claiming 4 GiB must not make the reader try to allocate it. */
	uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 'R', 'x'};
	cr_expect_eq(sc__frame_feed(&r, huge, sizeof(huge), &used), -EMSGSIZE);
	cr_expect_eq(used, SC_FRAME_HEADER_LEN);
	cr_expect_null(r.payload);
	sc__frame_reader_reset(&r);
}

Test(frame, length_field_zero_is_an_error)
{
	/* The length counts the type byte, so 0 cannot describe any frame. */
	uint8_t buf[] = {0, 0, 0, 0, 'R'};
	struct sc_frame_reader r;
	sc__frame_reader_init(&r, 64);
	size_t used = 0;
	cr_expect_eq(sc__frame_feed(&r, buf, sizeof(buf), &used), -EMSGSIZE);
	cr_expect_null(r.payload);
	sc__frame_reader_reset(&r);

	int sv[2];
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(write(sv[0], buf, sizeof(buf)), (ssize_t)sizeof(buf));
	uint8_t type;
	uint8_t *payload = NULL;
	size_t len;
	cr_expect_eq(sc__frame_read(sv[1], 64, &type, &payload, &len), -EMSGSIZE);
	cr_expect_null(payload);
	close(sv[0]);
	close(sv[1]);
}

static void socket_pair(int sv[2])
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

Test(frame, write_then_read_over_a_socket)
{
	int sv[2];
	socket_pair(sv);
	cr_assert_eq(sc__frame_write(sv[0], SC_FRAME_RUN, "print(1)", 8), 0);
	cr_assert_eq(sc__frame_write(sv[0], SC_FRAME_DONE, NULL, 0), 0);
	uint8_t type;
	uint8_t *payload;
	size_t len;
	cr_assert_eq(sc__frame_read(sv[1], 64, &type, &payload, &len), 0);
	cr_expect_eq(type, SC_FRAME_RUN);
	cr_expect_eq(len, 8);
	cr_expect_str_eq((char *)payload, "print(1)");
	free(payload);
	cr_assert_eq(sc__frame_read(sv[1], 64, &type, &payload, &len), 0);
	cr_expect_eq(type, SC_FRAME_DONE);
	cr_expect_eq(len, 0);
	cr_expect_eq(payload[0], 0);
	free(payload);
	close(sv[0]);
	close(sv[1]);
}

Test(frame, read_refuses_a_frame_over_its_cap)
{
	int sv[2];
	socket_pair(sv);
	cr_assert_eq(sc__frame_write(sv[0], SC_FRAME_RUN, "0123456789", 10), 0);
	uint8_t type;
	uint8_t *payload = NULL;
	size_t len;
	cr_expect_eq(sc__frame_read(sv[1], 9, &type, &payload, &len), -EMSGSIZE);
	cr_expect_null(payload);
	close(sv[0]);
	close(sv[1]);
}

#define BIG_LEN (1u << 20)

struct writer {
	int fd;
	const uint8_t *data;
	int rc;
};

static void *write_big(void *arg)
{
	struct writer *w = arg;
	w->rc = sc__frame_write(w->fd, SC_FRAME_RUN, w->data, BIG_LEN);
	return NULL;
}

static uint8_t *pattern(void)
{
	uint8_t *p = malloc(BIG_LEN);
	cr_assert_not_null(p);
	for (size_t i = 0; i < BIG_LEN; i++)
		p[i] = (uint8_t)(i * 131 + (i >> 12));
	return p;
}

/* Far larger than a socket buffer, so writer and reader must interleave. */
Test(frame, one_mebibyte_payload_written_by_a_thread_while_reading)
{
	int sv[2];
	socket_pair(sv);
	uint8_t *data = pattern();
	struct writer w = {.fd = sv[0], .data = data, .rc = 1};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, write_big, &w), 0);
	uint8_t type;
	uint8_t *payload;
	size_t len;
	int rc = sc__frame_read(sv[1], BIG_LEN, &type, &payload, &len);
	pthread_join(t, NULL);
	cr_assert_eq(rc, 0);
	cr_expect_eq(w.rc, 0);
	cr_expect_eq(type, SC_FRAME_RUN);
	cr_assert_eq(len, BIG_LEN);
	cr_expect_eq(memcmp(payload, data, BIG_LEN), 0);
	free(payload);
	free(data);
	close(sv[0]);
	close(sv[1]);
}

static void on_signal(int sig)
{
	(void)sig;
}

/* A signal without SA_RESTART makes a blocked sendmsg return a short count (or EINTR when it
 * sent nothing): the writer must resume exactly where the kernel stopped. */
Test(frame, write_survives_short_sends_from_signals)
{
	struct sigaction sa = {.sa_handler = on_signal};
	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	int sv[2];
	socket_pair(sv);
	uint8_t *data = pattern();
	struct writer w = {.fd = sv[0], .data = data, .rc = 1};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, write_big, &w), 0);
	uint8_t *got = malloc(SC_FRAME_HEADER_LEN + BIG_LEN);
	cr_assert_not_null(got);
	size_t total = 0;
	while (total < SC_FRAME_HEADER_LEN + BIG_LEN) {
		pthread_kill(t, SIGUSR1);
		ssize_t n = read(sv[1], got + total, 4096);
		if (n < 0 && errno == EINTR)
			continue;
		cr_assert_gt(n, 0);
		total += (size_t)n;
	}
	pthread_join(t, NULL);
	cr_expect_eq(w.rc, 0);
	uint8_t hdr[SC_FRAME_HEADER_LEN];
	sc__frame_header(hdr, SC_FRAME_RUN, BIG_LEN);
	cr_expect_arr_eq(got, hdr, sizeof(hdr));
	cr_expect_eq(memcmp(got + SC_FRAME_HEADER_LEN, data, BIG_LEN), 0);
	free(got);
	free(data);
	close(sv[0]);
	close(sv[1]);
}

Test(frame, read_at_end_of_stream_is_epipe)
{
	int sv[2];
	socket_pair(sv);
	close(sv[0]);
	uint8_t type;
	uint8_t *payload = NULL;
	size_t len;
	cr_expect_eq(sc__frame_read(sv[1], 64, &type, &payload, &len), -EPIPE);
	cr_expect_null(payload);
	close(sv[1]);
}

Test(frame, truncated_frame_then_end_of_stream_is_epipe)
{
	uint8_t buf[64];
	size_t n = make_frame(buf, SC_FRAME_RUN, "0123456789", 10);
	/* Cut inside the payload, then inside the header. */
	size_t cuts[] = {n - 1, SC_FRAME_HEADER_LEN, 3};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		int sv[2];
		socket_pair(sv);
		cr_assert_eq(write(sv[0], buf, cuts[i]), (ssize_t)cuts[i]);
		close(sv[0]);
		uint8_t type;
		uint8_t *payload = NULL;
		size_t len;
		cr_expect_eq(sc__frame_read(sv[1], 64, &type, &payload, &len), -EPIPE, "cut at %zu",
			     cuts[i]);
		cr_expect_null(payload);
		close(sv[1]);
	}
}

Test(frame, write_to_a_closed_peer_is_epipe_not_sigpipe)
{
	int sv[2];
	socket_pair(sv);
	close(sv[1]);
	cr_expect_eq(sc__frame_write(sv[0], SC_FRAME_RUN, "x", 1), -EPIPE);
	close(sv[0]);
}
