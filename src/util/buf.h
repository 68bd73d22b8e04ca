/* Growing memory with a hard cap: a byte buffer (output streams, frames on their way out,
 * texts built piece by piece) and the growth of arrays. Memory is taken as the contents grow,
 * never past the cap the owner set; a call that fails leaves the contents as they were. Not
 * a string library: no search, no editing in the middle. */
#ifndef SC_UTIL_BUF_H
#define SC_UTIL_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "snapcell.h"

/* The bytes held, data[0..len), are followed by a NUL once anything is allocated (data is
 * NULL until then), so text can be read in place. len never passes cap. */
struct sc_buf {
	char *data;
	size_t len;
	size_t alloc; /* bytes allocated, the NUL's included */
	size_t cap;
};

/* sc__buf_init as an initializer; max_bytes below SIZE_MAX. */
#define SC_BUF_INIT(max_bytes)                                                                     \
	{                                                                                          \
		.cap = (max_bytes)                                                                 \
	}

/* An empty buffer that will hold at most cap_bytes; it allocates nothing yet. */
void sc__buf_init(struct sc_buf *b, size_t cap_bytes);

/* Makes room for n more bytes now, so later adds up to that much cannot fail. 0,
 * SNAPCELL_E_TOO_BIG past the cap, -ENOMEM. */
int sc__buf_reserve(struct sc_buf *b, size_t n);

/* Appends n bytes, all or none: 0, SNAPCELL_E_TOO_BIG when they would pass the cap, or
 * -ENOMEM. */
int sc__buf_add(struct sc_buf *b, const void *p, size_t n);
int sc__buf_add_str(struct sc_buf *b, const char *s);
int sc__buf_printf(struct sc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sc__buf_vprintf(struct sc_buf *b, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));

/* Appends what of p[0..n) fits under the cap, for streams that keep their head and report
 * the cut: 0 when all of it was kept, SNAPCELL_E_TOO_BIG when the tail was dropped, -ENOMEM
 * when memory ran out before (nothing of p was kept then). *kept (if not NULL) says how many
 * bytes were appended. */
int sc__buf_add_some(struct sc_buf *b, const void *p, size_t n, size_t *kept);

/* Room to read into without a copy: makes at least want bytes (or what the cap leaves, if
 * less) free after the contents, puts where they start in *at, and returns how many are free
 * there; 0 at the cap, -ENOMEM. sc__buf_commit(b, n) then counts n of them as added. */
ssize_t sc__buf_space(struct sc_buf *b, size_t want, char **at);
void sc__buf_commit(struct sc_buf *b, size_t n);

/* Cuts the contents back to their first len bytes (a text that tried a form and took it
 * back); a len past the contents changes nothing. */
void sc__buf_truncate(struct sc_buf *b, size_t len);

/* Empties the buffer and keeps its memory for the next contents. */
void sc__buf_reset(struct sc_buf *b);

/* Hands the contents over as a malloc'd, NUL-terminated block (1 byte for none) the caller
 * frees, its length in *len if len is not NULL; the buffer is left empty with the same cap.
 * NULL (the buffer untouched) only when an empty buffer cannot get its one byte. */
char *sc__buf_take(struct sc_buf *b, size_t *len);

/* Frees the contents; the buffer is empty, with the same cap, and may be used again. */
void sc__buf_free(struct sc_buf *b);

/* For arrays that keep an allocated count beside the used one: room for want elements of
 * elem_size bytes in *arrp (the address of a T *), which has room for *alloc now. Grows to
 * twice the size (at least 8 elements), never past max_n elements. 0, SNAPCELL_E_TOO_BIG
 * when want > max_n, -ENOMEM (the array untouched either way). */
int sc__array_reserve(void *arrp, size_t *alloc, size_t want, size_t elem_size, size_t max_n);

/* For short lists that keep only their count n (configuration lists: a handful of entries,
 * copied by their owners at exactly n): room for element n, allocated to exactly n + 1 so
 * that whatever made the array, a copy included, it stays right. The new element is zeroed.
 * 0, SNAPCELL_E_TOO_BIG when n + 1 > max_n, -ENOMEM (the array untouched either way). */
int sc__array_add(void *arrp, size_t n, size_t elem_size, size_t max_n);

/* The type-checked spellings: arr is a T * lvalue. */
#define SC_ARRAY_RESERVE(arr, alloc, want, max_n)                                                  \
	sc__array_reserve(&(arr), &(alloc), (want), sizeof(*(arr)), (max_n))
#define SC_ARRAY_ADD(arr, n, max_n) sc__array_add(&(arr), (n), sizeof(*(arr)), (max_n))

/* The cap of a list bounded only by what can be counted: its size in bytes must fit size_t. */
#define SC_ARRAY_NO_CAP ((size_t)-1)

#endif
