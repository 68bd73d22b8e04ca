/* Helpers shared by the host library and the cell helper. Not a general-purpose library: each
 * function exists because both sides need it. */
#define _GNU_SOURCE
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
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

/* Unlinks every non-directory in dfd in one pass and names the first directory left (an
 * empty name when there is none). */
static int clear_files(int dfd, char dir[256])
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	int rc = 0;
	struct dirent *e;
	dir[0] = 0;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (unlinkat(dfd, e->d_name, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR && errno != EPERM)
			rc = -errno;
		else if (!dir[0])
			snprintf(dir, 256, "%s", e->d_name);
	}
	closedir(d);
	return rc;
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

/* Depth-first with one directory descriptor and a stack of names: a tree thousands of
 * directories deep costs no more descriptors than a flat one. Every step checks the device,
 * so even a tree rearranged under us (a live session) cannot lead the walk off the
 * filesystem it started on. */
int sc__remove_tree(int dirfd, const char *name)
{
	if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	struct stat top;
	int cur = open_dir(dirfd, name);
	if (cur < 0 || fstat(cur, &top) < 0)
		return cur < 0 ? cur : -errno;
	char(*stack)[256] = NULL, entry[256];
	size_t depth = 0, cap = 0;
	int rc = 0;
	while (rc == 0) {
		if ((rc = clear_files(cur, entry)) < 0)
			break;
		if (entry[0]) {
			int sub = open_dir(cur, entry);
			struct stat st;
			if (sub < 0 || fstat(sub, &st) < 0 || st.st_dev != top.st_dev) {
				rc = sub < 0 ? sub : -EXDEV;
				if (sub >= 0)
					close(sub);
				break;
			}
			if (depth == cap) {
				cap = cap ? cap * 2 : 64;
				char(*grown)[256] = realloc(stack, cap * sizeof(*grown));
				if (!grown) {
					close(sub);
					rc = -ENOMEM;
					break;
				}
				stack = grown;
			}
			memcpy(stack[depth++], entry, sizeof(entry));
			close(cur);
			cur = sub;
			continue;
		}
		if (depth == 0)
			break;
		/* Empty: climb back and remove it by the name we came down. */
		int up = openat(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		struct stat st;
		if (up < 0 || fstat(up, &st) < 0 || st.st_dev != top.st_dev) {
			rc = up < 0 ? -errno : -EXDEV;
			if (up >= 0)
				close(up);
			break;
		}
		close(cur);
		cur = up;
		if (unlinkat(cur, stack[--depth], AT_REMOVEDIR) < 0 && errno != ENOENT)
			rc = -errno;
	}
	close(cur);
	free(stack);
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
