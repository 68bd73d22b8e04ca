/* Helpers shared by the host library and the cell helper. Not a general-purpose library: each
 * function exists because both sides need it. */
#define _GNU_SOURCE
#include "util.h"

#include "buf.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* glibc's text for an errno; the names of our own codes are the core's (errors.c), which
 * util must not depend on. */
static const char *describe_errno(int e)
{
	const char *d = strerrordesc_np(e);
	return d ? d : "unknown system error";
}

int sc__err(struct snapcell_error *err, int code, const char *fmt, ...)
{
	if (!err)
		return code;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(err->message) && code < 0 && code >= -4095)
		snprintf(err->message + n, sizeof(err->message) - (size_t)n, ": %s",
			 describe_errno(-code));
	err->code = code;
	return code;
}

int sc__err_wrap(struct snapcell_error *err, int code, const char *fmt, ...)
{
	if (!err)
		return code;
	char cause[SNAPCELL_ERROR_MESSAGE_LEN];
	memcpy(cause, err->message, sizeof(cause));
	cause[sizeof(cause) - 1] = 0;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	size_t used = n < 0 ? 0 : (size_t)n, room = sizeof(err->message);
	if (used + 2 < room) {
		memcpy(err->message + used, ": ", 2);
		used += 2;
		size_t len = strnlen(cause, room - used - 1);
		memcpy(err->message + used, cause, len);
		err->message[used + len] = 0;
	}
	return err->code;
}

uint64_t sc__now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t sc__deadline_ms(uint64_t ms)
{
	return sc__now_us() + ms * 1000;
}

int sc__wait_fd(int fd, short events, uint64_t deadline_us)
{
	for (;;) {
		uint64_t now = sc__now_us();
		int timeout_ms = now >= deadline_us ? 0 : (int)((deadline_us - now + 999) / 1000);
		struct pollfd pf = {fd, events, 0};
		int n = poll(&pf, 1, timeout_ms);
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

int sc__write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int sc__read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = read(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Opens dirfd/name as a directory without following a link, making it readable first if a
 * guest made it mode 000 (never through a link: AT_SYMLINK_NOFOLLOW). */
static int open_dir(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == EACCES && fchmodat(dirfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
		fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0)
		fchmod(fd, 0700);
	return fd < 0 ? -errno : fd;
}

/* One level of the walk: the subdirectories of a directory still to remove, read once, and
 * the directory's inode, which the climb back to it checks. */
struct level {
	char **dirs;
	size_t n, next;
	ino_t ino;
};

static void level_free(struct level *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->dirs[i]);
	free(l->dirs);
}

/* Reads dfd once: unlinks everything that is not a directory, lists the directories. */
static int read_level(int dfd, struct level *l)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	int rc = 0;
	size_t cap = 0;
	struct dirent *e;
	struct stat st;
	*l = (struct level){0};
	if (fstat(dfd, &st) < 0)
		rc = -errno;
	l->ino = st.st_ino;
	while (rc == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (e->d_type != DT_DIR && (unlinkat(dfd, e->d_name, 0) == 0 || errno == ENOENT))
			continue;
		if (e->d_type != DT_DIR && errno != EISDIR && errno != EPERM) {
			rc = -errno;
			break;
		}
		if ((rc = SC_ARRAY_RESERVE(l->dirs, cap, l->n + 1, SC_ARRAY_NO_CAP)) < 0)
			break;
		if (!(l->dirs[l->n] = strdup(e->d_name)))
			rc = -ENOMEM;
		else
			l->n++;
	}
	closedir(d);
	return rc;
}

/* Climbs from cur to its parent, checking it is the directory the walk came down from: a
 * directory moved elsewhere while the walk was in it (by a writer still alive, such as a
 * process a dead cell left) has another "..", and the names listed for the level above would
 * then be opened, and removed, there. */
static int climb(int *cur, dev_t dev, ino_t ino)
{
	int up = openat(*cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	if (up < 0 || fstat(up, &st) < 0 || st.st_dev != dev || st.st_ino != ino) {
		int rc = up < 0 ? -errno : -EXDEV;
		if (up >= 0)
			close(up);
		return rc;
	}
	close(*cur);
	*cur = up;
	return 0;
}

/* Depth-first with one directory descriptor, each directory read once, and a stack of the
 * names still to visit: a tree thousands of directories deep or wide costs no more
 * descriptors than a flat one and time linear in its size. Every step checks the device and
 * every climb the directory it returns to, so a tree rearranged under us (a live session, a
 * dead cell's leftover processes) cannot lead the walk off its filesystem or out of the
 * tree: the walk stops there instead (EXDEV). The
 * deadline (0 for none) bounds a walk a live writer keeps growing. */
int sc__remove_tree(int dirfd, const char *name, uint64_t deadline_us)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	struct stat top;
	int cur = open_dir(dirfd, name);
	if (cur < 0 || fstat(cur, &top) < 0)
		return cur < 0 ? cur : -errno;
	struct level *stack = NULL;
	size_t depth = 0, cap = 0;
	int rc = 0;
	for (;;) {
		if (deadline_us && sc__now_us() > deadline_us) {
			rc = -ETIMEDOUT;
			break;
		}
		if ((rc = SC_ARRAY_RESERVE(stack, cap, depth + 1, SC_ARRAY_NO_CAP)) < 0)
			break;
		if ((rc = read_level(cur, &stack[depth])) < 0) {
			level_free(&stack[depth]);
			break;
		}
		depth++;
		/* Descend into the next directory left at this level, or climb when none is. */
		while (depth > 0 && stack[depth - 1].next == stack[depth - 1].n) {
			level_free(&stack[--depth]);
			if (depth == 0)
				break;
			if ((rc = climb(&cur, top.st_dev, stack[depth - 1].ino)) < 0)
				break;
			struct level *up = &stack[depth - 1];
			if (unlinkat(cur, up->dirs[up->next - 1], AT_REMOVEDIR) < 0 &&
			    errno != ENOENT)
				rc = -errno;
		}
		if (rc < 0 || depth == 0)
			break;
		struct level *l = &stack[depth - 1];
		int sub = open_dir(cur, l->dirs[l->next++]);
		struct stat st;
		if (sub < 0 || fstat(sub, &st) < 0 || st.st_dev != top.st_dev) {
			rc = sub < 0 ? sub : -EXDEV;
			if (sub >= 0)
				close(sub);
			break;
		}
		close(cur);
		cur = sub;
	}
	while (depth > 0)
		level_free(&stack[--depth]);
	free(stack);
	close(cur);
	if (rc == 0 && unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		rc = -errno;
	return rc;
}

int sc__write_file_at(int dirfd, const char *name, const char *content, mode_t mode)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	int rc = sc__write_all(fd, content, strlen(content));
	close(fd);
	return rc;
}

int sc__read_file_at(int dirfd, const char *name, char *buf, size_t size)
{
	buf[0] = 0;
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, size - 1);
	int rc = n < 0 ? -errno : (int)n;
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return rc;
}

int sc__read_kept_at(int dirfd, const char *name, int *fd, char *buf, size_t size)
{
	buf[0] = 0;
	if (*fd < 0 && (*fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	ssize_t n = pread(*fd, buf, size - 1, 0);
	buf[n > 0 ? n : 0] = 0;
	return n < 0 ? -errno : (int)n;
}

int sc__proc_start_time(pid_t pid, unsigned long long *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int rc = sc__read_file_at(AT_FDCWD, path, buf, sizeof(buf));
	if (rc < 0)
		return rc;
	/* The name before the fields may hold anything, ")" included: they follow the last. After
	 * ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
	 * cutime cstime priority nice threads itrealvalue starttime. */
	const char *p = strrchr(buf, ')');
	if (!p || sscanf(p + 1,
			 " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu",
			 start) != 1)
		return -EINVAL;
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void sc__names_free(char **names, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

int sc__sorted_names(int dirfd, char ***names_out, size_t *n_out)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if ((rc = SC_ARRAY_RESERVE(names, cap, n + 1, SC_ARRAY_NO_CAP)) < 0)
			break;
		if (!(names[n] = strdup(e->d_name)))
			rc = -ENOMEM;
		else
			n++;
	}
	closedir(d);
	if (rc < 0) {
		sc__names_free(names, n);
		return rc;
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), by_name);
	*names_out = names;
	*n_out = n;
	return 0;
}

bool sc__utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;
	while (p < end) {
		unsigned c = *p++;
		size_t more = c < 0x80		       ? 0
			      : c >= 0xc2 && c <= 0xdf ? 1
			      : (c & 0xf0) == 0xe0     ? 2
			      : c >= 0xf0 && c <= 0xf4 ? 3
						       : 4;
		if (more == 4 || (size_t)(end - p) < more)
			return false;
		unsigned cp = more == 1 ? c & 0x1f : more == 2 ? c & 0x0f : c & 0x07;
		for (size_t i = 0; i < more; i++, p++) {
			if ((*p & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (*p & 0x3f);
		}
		if ((more == 2 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
		    (more == 3 && (cp < 0x10000 || cp > 0x10ffff)))
			return false;
	}
	return true;
}

uint64_t sc__prelude_hash(const char *text)
{
	uint64_t h = 0xcbf29ce484222325u;
	for (const unsigned char *c = (const unsigned char *)text; *c; c++)
		h = (h ^ *c) * 0x100000001b3u;
	return h >> 1; /* 63 bits: a JSON integer */
}
