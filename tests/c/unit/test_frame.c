/* The frame codec on its own: header bytes, the incremental decoder under any split of its input,
 * the cap, and the blocking read/write pair over a real socket. No sandbox is started. */
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include "helpers.h"
#include "rpc/frame.h"
#include "util/util.h"

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

/* sc__frame_read_reply: the one answer to a request, in as few reads as it fits. */

static int read_reply(int fd, size_t cap, struct sc_spin *s, uint8_t *type, uint8_t **payload,
		      size_t *len)
{
	*payload = NULL;
	return sc__frame_read_reply(fd, cap, s, type, payload, len);
}

Test(frame, reply_reads_a_small_answer)
{
	int sv[2];
	socket_pair(sv);
	cr_assert_eq(sc__frame_write(sv[0], SC_FRAME_RESULT, "\001{\"n\": 3}", 9), 0);
	uint8_t type;
	uint8_t *payload;
	size_t len;
	cr_assert_eq(read_reply(sv[1], 64, NULL, &type, &payload, &len), 0);
	cr_expect_eq(type, SC_FRAME_RESULT);
	cr_assert_eq(len, 9);
	cr_expect_eq(memcmp(payload, "\001{\"n\": 3}", 10), 0, "NUL-terminated");
	free(payload);
	close(sv[0]);
	close(sv[1]);
}

/* Past the first read's buffer: the rest comes from later reads while the writer still writes. */
Test(frame, reply_reads_an_answer_larger_than_its_first_read)
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
	struct sc_spin spin = {.window_us = 100};
	int rc = read_reply(sv[1], BIG_LEN, &spin, &type, &payload, &len);
	pthread_join(t, NULL);
	cr_assert_eq(rc, 0);
	cr_expect_eq(type, SC_FRAME_RUN);
	cr_assert_eq(len, BIG_LEN);
	cr_expect_eq(memcmp(payload, data, BIG_LEN), 0);
	free(payload);
	free(data);
	close(sv[0]);
	close(sv[1]);
}

/* Writes a frame in two pieces: the first 3 bytes after 20 ms, the rest 5 ms later. */
struct late_writer {
	int fd;
	const uint8_t *bytes;
	size_t len;
};

static void *write_late(void *arg)
{
	struct late_writer *w = arg;
	usleep(20000);
	cr_assert_eq(write(w->fd, w->bytes, 3), 3);
	usleep(5000);
	cr_assert_eq(write(w->fd, w->bytes + 3, w->len - 3), (ssize_t)(w->len - 3));
	return NULL;
}

/* The answer starts after the 1 ms spin gave up, with its header cut in two: the read blocks
 * for it, and the failed spin makes the next wait block at once. */
Test(frame, reply_with_a_split_header_after_a_failed_spin)
{
	int sv[2];
	socket_pair(sv);
	uint8_t buf[64];
	size_t n = make_frame(buf, SC_FRAME_RESULT, "\001true", 5);
	struct late_writer w = {sv[0], buf, n};
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, write_late, &w), 0);
	struct sc_spin spin = {.window_us = 1000};
	uint8_t type;
	uint8_t *payload;
	size_t len;
	cr_assert_eq(read_reply(sv[1], 64, &spin, &type, &payload, &len), 0);
	pthread_join(t, NULL);
	cr_expect_eq(type, SC_FRAME_RESULT);
	cr_assert_eq(len, 5);
	cr_expect_str_eq((char *)payload, "\001true");
	free(payload);
	cr_expect_eq(spin.backoff, 1);
	cr_expect_eq(spin.skip, 1);
	close(sv[0]);
	close(sv[1]);
}

Test(frame, reply_with_bytes_past_its_frame_is_a_protocol_error)
{
	int sv[2];
	socket_pair(sv);
	cr_assert_eq(sc__frame_write(sv[0], SC_FRAME_RESULT, "\001{}", 3), 0);
	cr_assert_eq(sc__frame_write(sv[0], SC_FRAME_RESULT, "\001{}", 3), 0);
	uint8_t type;
	uint8_t *payload;
	size_t len;
	cr_expect_eq(read_reply(sv[1], 64, NULL, &type, &payload, &len), -EPROTO);
	cr_expect_null(payload);
	close(sv[0]);
	close(sv[1]);
}

Test(frame, reply_over_its_cap_or_cut_short_is_refused)
{
	int sv[2];
	socket_pair(sv);
	cr_assert_eq(sc__frame_write(sv[0], SC_FRAME_RESULT, "0123456789", 10), 0);
	uint8_t type;
	uint8_t *payload;
	size_t len;
	cr_expect_eq(read_reply(sv[1], 9, NULL, &type, &payload, &len), -EMSGSIZE);
	cr_expect_null(payload);
	close(sv[0]);
	close(sv[1]);

	uint8_t buf[64];
	size_t n = make_frame(buf, SC_FRAME_RESULT, "0123456789", 10);
	size_t cuts[] = {0, 3, SC_FRAME_HEADER_LEN, n - 1};
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		socket_pair(sv);
		cr_assert_eq(write(sv[0], buf, cuts[i]), (ssize_t)cuts[i]);
		close(sv[0]);
		struct sc_spin spin = {.window_us = 50};
		cr_expect_eq(read_reply(sv[1], 64, &spin, &type, &payload, &len), -EPIPE,
			     "cut at %zu", cuts[i]);
		cr_expect_null(payload);
		close(sv[1]);
	}
}

/* An answer already there is caught by the spin, which keeps spinning on the next wait. */
Test(frame, spin_that_catches_the_answer_keeps_spinning)
{
	int sv[2];
	socket_pair(sv);
	struct sc_spin spin = {.window_us = 1000000};
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(sc__frame_write(sv[0], SC_FRAME_RESULT, "\001[]", 3), 0);
		uint8_t type;
		uint8_t *payload;
		size_t len;
		cr_assert_eq(read_reply(sv[1], 64, &spin, &type, &payload, &len), 0);
		free(payload);
		cr_expect_eq(spin.backoff, 0);
		cr_expect_eq(spin.skip, 0);
	}
	close(sv[0]);
	close(sv[1]);
}

Test(frame, failed_spins_back_off_doubling_to_a_cap_and_a_catch_resets)
{
	struct sc_spin s = {.window_us = 50};
	uint64_t before = sc__now_us();
	uint64_t until = sc__spin_start(&s);
	cr_expect_geq(until, before + 50);
	uint32_t want = 1;
	for (int round = 0; round < 10; round++) {
		sc__spin_end(&s, false);
		cr_expect_eq(s.backoff, want, "round %d", round);
		for (uint32_t i = 0; i < want; i++)
			cr_expect_eq(sc__spin_start(&s), 0, "round %d wait %u blocks", round, i);
		cr_expect_neq(sc__spin_start(&s), 0, "round %d: then a spin again", round);
		want = want * 2 > SC_SPIN_MAX_BACKOFF ? SC_SPIN_MAX_BACKOFF : want * 2;
	}
	sc__spin_end(&s, true);
	cr_expect_eq(s.backoff, 0);
	cr_expect_neq(sc__spin_start(&s), 0);
	sc__spin_end(&s, false);
	cr_expect_eq(s.backoff, 1, "after a catch, a failure starts over");

	struct sc_spin never = {0};
	cr_expect_eq(sc__spin_start(&never), 0, "a window of 0 never spins");
}
