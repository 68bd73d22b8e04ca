/* Header values as users write them, so a secret need not appear in a command line or a
 * config file: "${env:NAME}" and "${file:PATH}" read on the host when the header is set, once,
 * and "$$" for a '$'. Not validation of the result (list.c does that). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "util/util.h"

struct buf {
	char data[SC_NET_HEADER_VALUE_MAX + 1];
	size_t len;
};

static int put(struct buf *b, const char *s, size_t n, struct snapcell_error *err)
{
	if (n > SC_NET_HEADER_VALUE_MAX - b->len)
		return sc__err(err, SNAPCELL_E_TOO_BIG,
			       "allow header: value longer than %d bytes once expanded",
			       SC_NET_HEADER_VALUE_MAX);
	memcpy(b->data + b->len, s, n);
	b->len += n;
	return 0;
}

/* The whole file, one trailing newline ("\n" or "\r\n") dropped. */
static int put_file(struct buf *b, const char *path, struct snapcell_error *err)
{
	char data[SC_NET_HEADER_VALUE_MAX + 3]; /* the cap, "\r\n", and one byte to see more */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return sc__err(err, -errno, "allow header: ${file:%s}", path);
	struct stat st = {0};
	int fs = fstat(fd, &st);
	if (fs < 0 || !S_ISREG(st.st_mode)) {
		int e = fs < 0 ? -errno : SNAPCELL_E_INVAL;
		close(fd);
		return sc__err(err, e, "allow header: ${file:%s} is not a regular file", path);
	}
	size_t got = 0;
	ssize_t n = 1;
	while (got < sizeof(data) && n != 0) {
		n = read(fd, data + got, sizeof(data) - got);
		if (n < 0 && errno != EINTR)
			break;
		got += n > 0 ? (size_t)n : 0;
	}
	int e = errno;
	close(fd);
	if (n < 0)
		return sc__err(err, -e, "allow header: read ${file:%s}", path);
	if (got == sizeof(data))
		got = SIZE_MAX / 2; /* more than the cap: refused below */
	size_t len = got;
	if (len > 0 && len <= SC_NET_HEADER_VALUE_MAX + 2 && data[len - 1] == '\n')
		len -= len > 1 && data[len - 2] == '\r' ? 2 : 1;
	if (len > SC_NET_HEADER_VALUE_MAX)
		return sc__err(err, SNAPCELL_E_TOO_BIG,
			       "allow header: ${file:%s} is larger than %d bytes", path,
			       SC_NET_HEADER_VALUE_MAX);
	if (memchr(data, 0, len))
		return sc__err(err, SNAPCELL_E_INVAL, "allow header: ${file:%s} holds a NUL byte",
			       path);
	int rc = put(b, data, len, err);
	explicit_bzero(data, sizeof(data));
	return rc;
}

/* One "${kind:arg}" at s (after the '$'); *used is how many bytes it took. */
static int expansion(struct buf *b, const char *s, size_t *used, struct snapcell_error *err)
{
	const char *close = strchr(s, '}');
	bool env = !strncmp(s, "{env:", 5), file = !strncmp(s, "{file:", 6);
	if (!close || (!env && !file))
		return sc__err(err, SNAPCELL_E_INVAL,
			       "allow header: '$' starts ${env:NAME}, ${file:PATH} or $$");
	const char *arg = s + (env ? 5 : 6);
	size_t n = (size_t)(close - arg);
	char name[4096];
	if (n == 0 || n >= sizeof(name))
		return sc__err(err, SNAPCELL_E_INVAL, "allow header: empty or too long ${%s:...}",
			       env ? "env" : "file");
	memcpy(name, arg, n);
	name[n] = 0;
	*used = (size_t)(close + 1 - s);
	if (file)
		return put_file(b, name, err);
	const char *v = secure_getenv(name);
	if (!v)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "allow header: ${env:%.64s}: the variable is not set", name);
	return put(b, v, strlen(v), err);
}

int sc__net_header_expand(const char *value, char **out, struct snapcell_error *err)
{
	struct buf *b = calloc(1, sizeof(*b));
	if (!b)
		return sc__err(err, -ENOMEM, "allow header");
	int rc = 0;
	for (const char *s = value; *s && rc == 0;) {
		const char *dollar = strchr(s, '$');
		size_t lit = dollar ? (size_t)(dollar - s) : strlen(s), used = 0;
		rc = put(b, s, lit, err);
		s += lit;
		if (rc == 0 && dollar && dollar[1] == '$')
			rc = put(b, "$", 1, err), used = 2;
		else if (rc == 0 && dollar)
			rc = expansion(b, dollar + 1, &used, err), used++;
		s += used;
	}
	b->data[b->len] = 0;
	if (rc == 0 && !(*out = strdup(b->data)))
		rc = sc__err(err, -ENOMEM, "allow header");
	explicit_bzero(b, sizeof(*b));
	free(b);
	return rc;
}
