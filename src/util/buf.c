/* The capped buffer and array growth (buf.h). The invariants: len <= cap; data is NULL or
 * holds alloc >= len + 1 bytes with data[len] == 0; alloc never passes cap + 1; a failed call
 * changes nothing. */
#define _GNU_SOURCE
#include "buf.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first allocation: small texts and short outputs fit without a second one. */
#define BUF_MIN_ALLOC 256
#define ARRAY_MIN_N   8

void sc__buf_init(struct sc_buf *b, size_t cap_bytes)
{
	/* One byte short of SIZE_MAX, so len + n + 1 never wraps. */
	*b = (struct sc_buf){.cap = cap_bytes < SIZE_MAX ? cap_bytes : SIZE_MAX - 1};
}

/* Room for n more bytes and the NUL: doubles, so a stream read in small pieces costs
 * amortised constant time per byte, and stops at cap + 1 so a large cap costs nothing until
 * output comes. A doubling past half of cap + 1 goes straight there: one just short of it
 * (to a power-of-two cap, or from a size the first piece set) would be followed by one more
 * growth to cap + 1, copying the whole buffer once more (and, with ASan's quarantine,
 * holding every copy: the MCP server's 16 MiB stdio line held 74 MiB instead of 57). */
int sc__buf_reserve(struct sc_buf *b, size_t n)
{
	if (n > b->cap - b->len)
		return SNAPCELL_E_TOO_BIG;
	size_t need = b->len + n + 1, limit = b->cap + 1; /* cap < SIZE_MAX: no wrap */
	if (need <= b->alloc)
		return 0;
	size_t size = b->alloc > limit / 4 ? limit : b->alloc * 2;
	if (size < BUF_MIN_ALLOC)
		size = BUF_MIN_ALLOC < limit ? BUF_MIN_ALLOC : limit;
	if (size < need)
		size = need;
	char *grown = realloc(b->data, size);
	if (!grown)
		return -ENOMEM;
	grown[b->len] = 0;
	b->data = grown;
	b->alloc = size;
	return 0;
}

int sc__buf_add(struct sc_buf *b, const void *p, size_t n)
{
	int rc = sc__buf_reserve(b, n);
	if (rc < 0)
		return rc;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = 0;
	return 0;
}

int sc__buf_add_str(struct sc_buf *b, const char *s)
{
	return sc__buf_add(b, s, strlen(s));
}

int sc__buf_add_some(struct sc_buf *b, const void *p, size_t n, size_t *kept)
{
	size_t room = b->cap - b->len, take = n < room ? n : room;
	int rc = sc__buf_add(b, p, take);
	if (kept)
		*kept = rc < 0 ? 0 : take;
	if (rc < 0)
		return rc;
	return take < n ? SNAPCELL_E_TOO_BIG : 0;
}

int sc__buf_vprintf(struct sc_buf *b, const char *fmt, va_list ap)
{
	va_list again;
	va_copy(again, ap);
	int n = vsnprintf(NULL, 0, fmt, ap);
	int rc = n < 0 ? -errno : sc__buf_reserve(b, (size_t)n);
	if (rc == 0) {
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
		b->len += (size_t)n;
	}
	va_end(again);
	return rc;
}

int sc__buf_printf(struct sc_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int rc = sc__buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

ssize_t sc__buf_space(struct sc_buf *b, size_t want, char **at)
{
	size_t room = b->cap - b->len;
	if (room == 0)
		return 0;
	int rc = sc__buf_reserve(b, want < room ? want : room);
	if (rc < 0)
		return rc;
	size_t free_bytes = b->alloc - b->len - 1, n = free_bytes < room ? free_bytes : room;
	*at = b->data + b->len;
	return (ssize_t)(n < SSIZE_MAX ? n : SSIZE_MAX);
}

void sc__buf_commit(struct sc_buf *b, size_t n)
{
	b->len += n;
	b->data[b->len] = 0;
}

void sc__buf_truncate(struct sc_buf *b, size_t len)
{
	if (len >= b->len)
		return;
	b->len = len;
	b->data[len] = 0;
}

void sc__buf_reset(struct sc_buf *b)
{
	sc__buf_truncate(b, 0);
}

char *sc__buf_take(struct sc_buf *b, size_t *len)
{
	char *data = b->data ? b->data : calloc(1, 1);
	if (!data)
		return NULL;
	if (len)
		*len = b->len;
	sc__buf_init(b, b->cap);
	return data;
}

void sc__buf_free(struct sc_buf *b)
{
	free(b->data);
	sc__buf_init(b, b->cap);
}

/* The pointer behind arrp, read and written as bytes: arrp is the address of a T *, which
 * has the representation of a void * on every target we build for. */
static void *array_get(const void *arrp)
{
	void *p;
	memcpy(&p, arrp, sizeof(p));
	return p;
}

static int array_resize(void *arrp, size_t n, size_t elem_size)
{
	if (elem_size && n > SIZE_MAX / elem_size)
		return -ENOMEM;
	size_t bytes = n * elem_size;
	void *grown = realloc(array_get(arrp), bytes ? bytes : 1);
	if (!grown)
		return -ENOMEM;
	memcpy(arrp, &grown, sizeof(grown));
	return 0;
}

int sc__array_reserve(void *arrp, size_t *alloc, size_t want, size_t elem_size, size_t max_n)
{
	if (want > max_n)
		return SNAPCELL_E_TOO_BIG;
	if (want <= *alloc)
		return 0;
	size_t n = *alloc > max_n / 2 ? max_n : *alloc * 2;
	if (n < ARRAY_MIN_N)
		n = ARRAY_MIN_N < max_n ? ARRAY_MIN_N : max_n;
	if (n < want)
		n = want;
	int rc = array_resize(arrp, n, elem_size);
	if (rc < 0)
		return rc;
	*alloc = n;
	return 0;
}

int sc__array_add(void *arrp, size_t n, size_t elem_size, size_t max_n)
{
	if (n >= max_n)
		return SNAPCELL_E_TOO_BIG;
	int rc = array_resize(arrp, n + 1, elem_size);
	if (rc < 0)
		return rc;
	memset((char *)array_get(arrp) + n * elem_size, 0, elem_size);
	return 0;
}
