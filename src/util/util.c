/* Helpers shared by the host library and the cell helper. Not a general-purpose library: each
 * function exists because both sides need it. */
#define _GNU_SOURCE
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
			 snapcell_strerror(code));
	err->code = code;
	return code;
}

uint64_t sc__now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
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

static int remove_children(int dfd, unsigned depth_left)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		int e = -errno;
		close(dfd);
		return e;
	}
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int r = sc__remove_tree(dirfd(d), de->d_name, depth_left);
		if (r < 0 && rc == 0)
			rc = r;
	}
	closedir(d);
	return rc;
}

int sc__remove_tree(int dirfd, const char *name, unsigned max_depth)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (max_depth == 0)
		return -ELOOP;
	/* A directory the guest made unreadable or unwritable (chmod 000) is ours to fix. */
	int dfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* AT_SYMLINK_NOFOLLOW: a cell may swap the directory for a link meanwhile, and a chmod
	 * through it would land on a host file. */
	if (dfd < 0 && errno == EACCES && fchmodat(dirfd, name, 0700, AT_SYMLINK_NOFOLLOW) == 0)
		dfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	fchmod(dfd, 0700);
	int rc = remove_children(dfd, max_depth - 1);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && rc == 0)
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
