/* The helper's stderr as the host keeps it (src/core/helper_stderr.c): the last 4 KiB of what
 * came through a real pipe, and the last lines of it that fit a message, escaped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/core.h"
#include "util/util.h"

/* A capture holding what was written to the helper's end, with its words in out_len bytes. */
static const char *words_of(const char *said, size_t said_len, size_t out_len)
{
	static char out[8192];
	struct sc_helper_stderr *h = NULL;
	int w = -1;
	cr_assert_eq(sc__helper_stderr_new(&h, &w), 0);
	cr_assert_eq(sc__write_all(w, said, said_len), 0);
	close(w);
	sc__helper_stderr_drain(h);
	cr_assert_eq(h->fd, -1, "the end of the pipe is seen");
	cr_assert_lt(out_len, sizeof(out));
	size_t n = sc__helper_stderr_words(h, out, out_len);
	cr_assert_eq(n, strlen(out));
	cr_assert_lt(n, out_len);
	sc__helper_stderr_free(h);
	return out;
}

#define WORDS(s, out_len) words_of(s, sizeof(s) - 1, out_len)

Test(helper_stderr, lines_keep_their_newlines_and_lose_the_trailing_ones)
{
	cr_expect_str_eq(WORDS("\nfirst line\nsecond line\n\n", 64), "first line\nsecond line");
	cr_expect_str_eq(WORDS(" \n\n", 64), "");
	cr_expect_str_eq(WORDS("", 64), "");
}

Test(helper_stderr, control_bytes_and_bytes_that_are_not_utf8_are_escaped)
{
	cr_expect_str_eq(WORDS("a\tb\r\x1b[0m\x7f\xc3\xa9\xff\xc3 z", 64),
			 "a\\x09b\\x0d\\x1b[0m\\x7f\xc3\xa9\\xff\\xc3 z");
	/* A sequence cut short by the end, and one with a surrogate, byte by byte. */
	cr_expect_str_eq(WORDS("x\xe2\x82", 64), "x\\xe2\\x82");
	cr_expect_str_eq(WORDS("\xed\xa0\x80", 64), "\\xed\\xa0\\x80");
}

Test(helper_stderr, what_does_not_fit_is_cut_before_the_last_lines)
{
	/* Whole lines when one fits, else the end of the last line after "...". */
	cr_expect_str_eq(WORDS("first line\nsecond line\n", 16), "second line");
	cr_expect_str_eq(WORDS("abcdefghijklmnopqrstuvwxyz\n", 11), "...tuvwxyz");
	/* Never inside an escape or a UTF-8 sequence. */
	cr_expect_str_eq(WORDS("\x01\x02\x03\x04", 10), "...\\x04");
	cr_expect_str_eq(WORDS("\xc3\xa9\xc3\xa9\xc3\xa9", 6), "...\xc3\xa9");
	cr_expect_str_eq(WORDS("abc", 3), "bc");
}

Test(helper_stderr, only_the_last_4_kib_are_kept_from_their_first_whole_line)
{
	char said[10000 + 1];
	for (int i = 0; i < 1000; i++)
		snprintf(said + i * 10, 11, "line %04d\n", i);
	const char *w = words_of(said, 10000, 8000);
	/* 4096 bytes kept: from the middle of line 590; whole lines from 591. */
	cr_expect_eq(strncmp(w, "line 0591\n", 10), 0, "%.20s", w);
	cr_expect_eq(strlen(w), 409 * 10 - 1);
	cr_expect_str_eq(w + strlen(w) - 9, "line 0999");
}
