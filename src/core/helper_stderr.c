/* The helper's stderr while the template starts: read by the host so a helper that dies
 * before it is ready is reported with its own words (the loader's "error while loading shared
 * libraries", a missing file). Not a log: only the last SC_HELPER_STDERR_MAX bytes are kept,
 * and after READY the host closes its end (docs/architecture.md, "A helper that dies says
 * why"). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "util/util.h"

int sc__helper_stderr_new(struct sc_helper_stderr **out, int *write_end)
{
	int fds[2];
	struct sc_helper_stderr *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	/* Only the host's end reads without blocking; the helper writes as to any stderr. */
	if (pipe2(fds, O_CLOEXEC) < 0 || fcntl(fds[0], F_SETFL, O_NONBLOCK) < 0) {
		int rc = -errno;
		free(h);
		return rc;
	}
	h->fd = fds[0];
	*out = h;
	*write_end = fds[1];
	return 0;
}

void sc__helper_stderr_free(struct sc_helper_stderr *h)
{
	if (!h)
		return;
	if (h->fd >= 0)
		close(h->fd);
	free(h);
}

void sc__helper_stderr_drain(struct sc_helper_stderr *h)
{
	char chunk[4096];
	while (h && h->fd >= 0) {
		ssize_t n = read(h->fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0) { /* every writer is gone: nothing more will come */
				close(h->fd);
				h->fd = -1;
			}
			return;
		}
		/* Keep the last cap bytes of what was kept and what came. */
		size_t len = (size_t)n, cap = sizeof(h->tail);
		const char *from = chunk;
		if (len > cap) {
			from += len - cap;
			len = cap;
			h->cut = true;
		}
		if (h->len > cap - len) {
			size_t keep = cap - len;
			memmove(h->tail, h->tail + h->len - keep, keep);
			h->len = keep;
			h->cut = true;
		}
		memcpy(h->tail + h->len, from, len);
		h->len += len;
	}
}

int sc__helper_stderr_wait(struct sc_helper_stderr *h, int fd, uint64_t deadline_us)
{
	for (;;) {
		uint64_t now = sc__now_us();
		int timeout_ms = now >= deadline_us ? 0 : (int)((deadline_us - now + 999) / 1000);
		struct pollfd pf[2] = {{fd, POLLIN, 0}, {h && h->fd >= 0 ? h->fd : -1, POLLIN, 0}};
		int n = poll(pf, 2, timeout_ms);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (pf[1].revents)
			sc__helper_stderr_drain(h);
		if (pf[0].revents)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
	}
}

/* The length of the unit (a well-formed UTF-8 sequence, else one byte) at s, and whether it
 * is shown as is; a byte that is not is shown as \xNN. */
static size_t unit_at(const char *s, size_t left, bool *plain)
{
	unsigned char c = (unsigned char)*s;
	size_t len = c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
	if (c >= 0x80 && len <= left && sc__utf8_valid(s, len)) {
		*plain = true;
		return len;
	}
	*plain = c == '\n' || (c >= 0x20 && c < 0x7f);
	return 1;
}

/* Escapes the units of [s, end) from the end backwards into buf[0, room) right-aligned,
 * until they are all in or the next would not fit. Returns where the escaped text starts in
 * buf; *stop is where the units taken start in [s, end), *line_at where in buf the first whole
 * line taken starts (room when none does). */
static size_t escape_back(const char *s, const char *end, char *buf, size_t room, const char **stop,
			  size_t *line_at)
{
	static const char hex[] = "0123456789abcdef";
	size_t at = room;
	const char *p = end;
	*line_at = room;
	while (p > s) {
		const char *q = p - 1; /* back to the start of the unit that ends at p */
		while (q > s && p - q < 4 && ((unsigned char)*q & 0xc0) == 0x80)
			q--;
		bool plain;
		size_t len = unit_at(q, (size_t)(end - q), &plain);
		if (q + len != p) { /* no sequence ends at p: its last byte alone */
			q = p - 1;
			len = unit_at(q, 1, &plain);
		}
		size_t shown = plain ? len : 4;
		if (shown > at)
			break;
		at -= shown;
		if (plain) {
			memcpy(buf + at, q, len);
		} else {
			unsigned char c = (unsigned char)*q;
			memcpy(buf + at, (const char[]){'\\', 'x', hex[c >> 4], hex[c & 15]}, 4);
		}
		p = q;
		if (*q == '\n')
			*line_at = at + 1;
	}
	*stop = p;
	return at;
}

size_t sc__helper_stderr_words(const struct sc_helper_stderr *h, char *out, size_t out_len)
{
	if (out_len == 0)
		return 0;
	out[0] = 0;
	if (!h)
		return 0;
	const char *s = h->tail, *end = h->tail + h->len, *stop;
	if (h->cut) { /* the first line lost its beginning: start at the next one, if any */
		const char *nl = memchr(s, '\n', h->len);
		if (nl && nl + 1 < end)
			s = nl + 1;
	}
	while (end > s && (end[-1] == '\n' || end[-1] == '\r' || end[-1] == ' '))
		end--;
	while (s < end && *s == '\n')
		s++;
	/* The last lines are what says why (the loader's message is its last): whole lines when
	 * they fit, else the end of the last one after "...". */
	size_t room = out_len - 1, line_at, from = escape_back(s, end, out, room, &stop, &line_at);
	size_t n = 0;
	if (stop > s && line_at < room) {
		from = line_at;
		while (from < room && out[from] == '\n') /* an empty line taken first */
			from++;
	} else if (stop > s && room > 3) {
		from = escape_back(s, end, out + 3, room - 3, &stop, &line_at) + 3;
		memcpy(out, "...", 3);
		n = 3;
	}
	memmove(out + n, out + from, room - from);
	n += room - from;
	out[n] = 0;
	return n;
}
