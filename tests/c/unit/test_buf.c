/* util/buf.c: the capped buffer and array growth, up to their caps and past them, and what a
 * failed allocation leaves. No sandbox is started. */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdint.h>

#include "helpers.h"
#include "util/buf.h"
#include "util/cleanup.h"

#ifdef __SANITIZE_ADDRESS__
/* An allocation too large to make fails with NULL, as glibc's does, instead of ending the
 * process: the tests below ask for one on purpose. */
const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}
#endif

/* Larger than any address space: realloc() fails at once. */
#define HUGE_BYTES ((size_t)1 << 62)

Test(buf, allocates_nothing_until_the_first_byte)
{
	struct sc_buf b;
	sc__buf_init(&b, (size_t)1 << 30);
	cr_expect_null(b.data);
	cr_expect_eq(b.alloc, 0);
	sc__buf_free(&b); /* freeing what never allocated */
}

Test(buf, adds_up_to_the_cap_and_refuses_past_it)
{
	struct sc_buf b = SC_BUF_INIT(10);
	cr_assert_eq(sc__buf_add(&b, "hello", 5), 0);
	cr_assert_eq(sc__buf_add_str(&b, "world"), 0);
	cr_expect_eq(b.len, 10);
	cr_expect_str_eq(b.data, "helloworld");
	cr_expect_leq(b.alloc, 11, "the allocation stops at cap + 1: %zu", b.alloc);
	cr_expect_eq(sc__buf_add(&b, "!", 1), SNAPCELL_E_TOO_BIG);
	cr_expect_eq(sc__buf_add(&b, "", 0), 0, "nothing fits even at the cap");
	cr_expect_eq(b.len, 10);
	cr_expect_str_eq(b.data, "helloworld", "a refused add changes nothing");
	sc__buf_free(&b);
}

Test(buf, all_or_nothing_past_the_cap)
{
	struct sc_buf b = SC_BUF_INIT(8);
	cr_assert_eq(sc__buf_add(&b, "abcdef", 6), 0);
	cr_expect_eq(sc__buf_add(&b, "xyz", 3), SNAPCELL_E_TOO_BIG);
	cr_expect_eq(b.len, 6);
	cr_expect_str_eq(b.data, "abcdef");
	sc__buf_free(&b);
}

Test(buf, add_some_keeps_the_head_and_says_it_cut)
{
	struct sc_buf b = SC_BUF_INIT(8);
	size_t kept = 99;
	cr_expect_eq(sc__buf_add_some(&b, "abcdef", 6, &kept), 0);
	cr_expect_eq(kept, 6);
	cr_expect_eq(sc__buf_add_some(&b, "ghijk", 5, &kept), SNAPCELL_E_TOO_BIG);
	cr_expect_eq(kept, 2);
	cr_expect_str_eq(b.data, "abcdefgh");
	cr_expect_eq(sc__buf_add_some(&b, "z", 1, &kept), SNAPCELL_E_TOO_BIG);
	cr_expect_eq(kept, 0);
	cr_expect_eq(b.len, 8);
	sc__buf_free(&b);
}

Test(buf, reaches_a_power_of_two_cap_without_growing_by_its_nul)
{
	/* Pieces no larger than the first allocation (256 bytes), so every growth doubles a
	 * power of two, until the cap is filled exactly: the growth from half the cap goes to
	 * cap + 1 at once, never to cap and then one byte more (the MCP server's stdio line). */
	struct sc_buf b = SC_BUF_INIT(1 << 20);
	char piece[256] = {0};
	cr_assert_eq(sc__buf_add(&b, piece, 1), 0);
	while (b.len + sizeof(piece) <= (1u << 20)) {
		cr_assert_eq(sc__buf_add(&b, piece, sizeof(piece)), 0);
		cr_assert_neq(b.alloc, (size_t)1 << 20, "grew to the cap, then by one byte");
	}
	cr_assert_eq(sc__buf_add(&b, piece, (1u << 20) - b.len), 0);
	cr_expect_eq(b.alloc, (1u << 20) + 1);
	sc__buf_free(&b);
}

Test(buf, never_grows_to_just_short_of_its_cap)
{
	/* A first piece of 65,537 bytes sets sizes of 65,537 · 2^k, and doubling alone stops
	 * at 8,388,736, just past half of cap + 1, before growing to cap + 1 as well: three
	 * large allocations held at once instead of two. Whatever the first size, none lies
	 * between half of cap + 1 and cap + 1. */
	for (size_t first = 1; first <= 65537; first += 4096) {
		struct sc_buf b = SC_BUF_INIT(16u << 20);
		static char piece[65537];
		cr_assert_eq(sc__buf_add(&b, piece, first), 0);
		while (b.len + 65536 <= (16u << 20)) {
			cr_assert_eq(sc__buf_add(&b, piece, 65536), 0);
			cr_assert(b.alloc <= ((16u << 20) + 1) / 2 || b.alloc == (16u << 20) + 1,
				  "first %zu: grew to %zu", first, b.alloc);
		}
		sc__buf_free(&b);
	}
}

Test(buf, grows_by_doubling_and_holds_every_byte)
{
	struct sc_buf b = SC_BUF_INIT(1 << 20);
	size_t reallocs = 0, last = 0;
	for (unsigned i = 0; i < (1u << 20); i++) {
		char c = (char)('a' + i % 26);
		cr_assert_eq(sc__buf_add(&b, &c, 1), 0, "byte %u", i);
		reallocs += b.alloc != last;
		last = b.alloc;
	}
	cr_expect_leq(reallocs, 14, "%zu reallocations for 1 MiB", reallocs);
	cr_expect_eq(b.alloc, (1u << 20) + 1);
	for (unsigned i = 0; i < (1u << 20); i++)
		cr_assert_eq(b.data[i], (char)('a' + i % 26), "byte %u", i);
	cr_expect_eq(b.data[b.len], 0);
	sc__buf_free(&b);
}

Test(buf, a_large_cap_with_little_in_it_holds_little)
{
	struct sc_buf b = SC_BUF_INIT((size_t)1 << 40);
	cr_assert_eq(sc__buf_add_str(&b, "small output\n"), 0);
	cr_expect_lt(malloc_usable_size(b.data), 4096, "%zu bytes held for 13",
		     malloc_usable_size(b.data));
	sc__buf_free(&b);
}

Test(buf, printf_formats_under_the_cap)
{
	struct sc_buf b = SC_BUF_INIT(16);
	cr_assert_eq(sc__buf_printf(&b, "%s=%d", "n", 42), 0);
	cr_assert_eq(sc__buf_printf(&b, "%s", ""), 0);
	cr_expect_str_eq(b.data, "n=42");
	cr_expect_eq(sc__buf_printf(&b, "%020d", 1), SNAPCELL_E_TOO_BIG);
	cr_expect_str_eq(b.data, "n=42");
	cr_assert_eq(sc__buf_printf(&b, "%012d", 7), 0);
	cr_expect_eq(b.len, 16);
	cr_expect_str_eq(b.data, "n=42000000000007");
	sc__buf_free(&b);
}

Test(buf, space_and_commit_read_in_place_up_to_the_cap)
{
	struct sc_buf b = SC_BUF_INIT(1000);
	char *at;
	ssize_t room = sc__buf_space(&b, 600, &at);
	cr_assert_geq(room, 600);
	cr_assert_leq(room, 1000);
	memset(at, 'x', 600);
	sc__buf_commit(&b, 600);
	room = sc__buf_space(&b, 600, &at);
	cr_expect_eq(room, 400, "the cap leaves 400: %zd", room);
	memset(at, 'y', 400);
	sc__buf_commit(&b, 400);
	cr_expect_eq(sc__buf_space(&b, 1, &at), 0, "at the cap");
	cr_expect_eq(b.len, 1000);
	cr_expect_eq(b.data[599], 'x');
	cr_expect_eq(b.data[600], 'y');
	cr_expect_eq(b.data[1000], 0);
	sc__buf_free(&b);
}

Test(buf, truncate_takes_a_tail_back)
{
	struct sc_buf b = SC_BUF_INIT(64);
	cr_assert_eq(sc__buf_add_str(&b, "call(\"x\", "), 0);
	sc__buf_truncate(&b, 8);
	cr_expect_str_eq(b.data, "call(\"x\"");
	sc__buf_truncate(&b, 50);
	cr_expect_eq(b.len, 8, "a length past the contents changes nothing");
	sc__buf_free(&b);
	sc__buf_truncate(&b, 0); /* nothing allocated */
	cr_expect_eq(b.len, 0);
}

Test(buf, take_hands_over_and_leaves_it_empty)
{
	struct sc_buf b = SC_BUF_INIT(64);
	size_t len = 99;
	char *empty = sc__buf_take(&b, &len);
	cr_assert_not_null(empty);
	cr_expect_eq(len, 0);
	cr_expect_str_eq(empty, "");
	free(empty);
	cr_assert_eq(sc__buf_add_str(&b, "kept"), 0);
	char *text = sc__buf_take(&b, &len);
	cr_expect_str_eq(text, "kept");
	cr_expect_eq(len, 4);
	cr_expect_null(b.data);
	cr_expect_eq(b.len, 0);
	cr_expect_eq(b.cap, 64, "the cap stays for the next contents");
	free(text);
}

Test(buf, reset_keeps_the_memory)
{
	struct sc_buf b = SC_BUF_INIT(64);
	cr_assert_eq(sc__buf_add_str(&b, "first"), 0);
	char *data = b.data;
	sc__buf_reset(&b);
	cr_expect_eq(b.len, 0);
	cr_expect_str_eq(b.data, "");
	cr_assert_eq(sc__buf_add_str(&b, "second"), 0);
	cr_expect_eq(b.data, data);
	cr_expect_str_eq(b.data, "second");
	sc__buf_free(&b);
}

Test(buf, a_failed_allocation_changes_nothing)
{
	struct sc_buf b = SC_BUF_INIT(SIZE_MAX);
	cr_assert_eq(sc__buf_add_str(&b, "before"), 0);
	char *data = b.data;
	size_t alloc = b.alloc;
	cr_expect_eq(sc__buf_reserve(&b, HUGE_BYTES), -ENOMEM);
	size_t kept = 99;
	cr_expect_eq(sc__buf_add_some(&b, b.data, HUGE_BYTES, &kept), -ENOMEM);
	cr_expect_eq(kept, 0);
	cr_expect_eq(b.data, data);
	cr_expect_eq(b.alloc, alloc);
	cr_expect_str_eq(b.data, "before");
	cr_expect_eq(sc__buf_add_str(&b, " and after"), 0);
	cr_expect_str_eq(b.data, "before and after");
	sc__buf_free(&b);
}

Test(array, reserve_doubles_up_to_the_cap)
{
	uint32_t *v = NULL;
	size_t alloc = 0, n = 0;
	for (; n < 100; n++) {
		cr_assert_eq(SC_ARRAY_RESERVE(v, alloc, n + 1, 100), 0, "element %zu", n);
		v[n] = (uint32_t)n;
	}
	cr_expect_eq(alloc, 100, "the last growth stops at the cap");
	cr_expect_eq(SC_ARRAY_RESERVE(v, alloc, 101, 100), SNAPCELL_E_TOO_BIG);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(v[i], i);
	free(v);
}

Test(array, add_zeroes_the_new_element_and_keeps_the_rest)
{
	struct pair {
		int a;
		char *b;
	} *v = NULL;
	for (size_t n = 0; n < 5; n++) {
		cr_assert_eq(SC_ARRAY_ADD(v, n, 5), 0);
		cr_expect_eq(v[n].a, 0);
		cr_expect_null(v[n].b);
		v[n].a = (int)n + 1;
	}
	cr_expect_eq(SC_ARRAY_ADD(v, 5, 5), SNAPCELL_E_TOO_BIG);
	for (int i = 0; i < 5; i++)
		cr_expect_eq(v[i].a, i + 1);
	free(v);
}

Test(array, an_array_copied_at_its_count_still_grows_right)
{
	/* What config copies do: an exact-size copy, then adds. */
	int *v = malloc(3 * sizeof(int));
	cr_assert_not_null(v);
	v[0] = 1, v[1] = 2, v[2] = 3;
	cr_assert_eq(SC_ARRAY_ADD(v, 3, SC_ARRAY_NO_CAP), 0);
	v[3] = 4;
	cr_expect_eq(malloc_usable_size(v) >= 4 * sizeof(int), true);
	cr_expect_arr_eq(v, ((int[]){1, 2, 3, 4}), 4 * sizeof(int));
	free(v);
}

Test(array, sizes_that_overflow_and_failed_allocations_change_nothing)
{
	char(*big)[1024] = NULL;
	size_t alloc = 0;
	cr_expect_eq(SC_ARRAY_RESERVE(big, alloc, SIZE_MAX / 512, SC_ARRAY_NO_CAP), -ENOMEM);
	cr_expect_null(big);
	cr_expect_eq(alloc, 0);
	cr_assert_eq(SC_ARRAY_RESERVE(big, alloc, 1, SC_ARRAY_NO_CAP), 0);
	char(*kept)[1024] = big;
	cr_expect_eq(SC_ARRAY_RESERVE(big, alloc, HUGE_BYTES / 1024, SC_ARRAY_NO_CAP), -ENOMEM);
	cr_expect_eq(big, kept);
	cr_expect_eq(alloc, 8);
	cr_expect_eq(SC_ARRAY_ADD(big, SIZE_MAX / 1024, SC_ARRAY_NO_CAP), -ENOMEM);
	cr_expect_eq(big, kept);
	free(big);
}

Test(cleanup, auto_free_and_steal)
{
	char *kept;
	{
		char *dropped SC_AUTO_FREE = strdup("dropped");
		char *handed SC_AUTO_FREE = strdup("handed");
		cr_assert_not_null(dropped);
		kept = SC_STEAL_PTR(handed);
		cr_expect_null(handed);
	}
	cr_expect_str_eq(kept, "handed", "a stolen pointer outlives its scope");
	free(kept);
}
