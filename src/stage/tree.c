/* Moving and copying the /tmp trees of a session family on its tmpfs (src/core/session.c),
 * through directory descriptors. The trees were made by the family's code: names come from
 * readdir, every open is O_NOFOLLOW relative to a descriptor, links are copied as links and
 * never followed, and a copy is bounded in depth. The caller has the family stopped, so
 * nothing changes a tree while it is read. Not /output (collect.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stage.h"
#include "util/util.h"

/* Moving a directory to another parent rewrites its "..", which needs write permission on
 * it: one the code made read-only is given it back for the move (the caller owns it). Never
 * through a link (AT_SYMLINK_NOFOLLOW): where the family is not stopped (level rlimits below
 * Landlock ABI 6) the code can swap the directory for one between the check and the chmod. */
static int move_entry(int from, int to, const char *name)
{
	if (renameat(from, name, to, name) == 0)
		return 0;
	int rc = -errno;
	struct stat st;
	if (rc != -EACCES || fstatat(from, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    !S_ISDIR(st.st_mode) ||
	    fchmodat(from, name, (st.st_mode & 07777) | S_IWUSR, AT_SYMLINK_NOFOLLOW) < 0)
		return rc;
	rc = renameat(from, name, to, name) < 0 ? -errno : 0;
	fchmodat(rc == 0 ? to : from, name, st.st_mode & 07777, AT_SYMLINK_NOFOLLOW);
	return rc;
}

int sc__tree_move_entries(int from, int to)
{
	char **names;
	size_t n;
	int rc = sc__sorted_names(from, &names, &n);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = move_entry(from, to, names[i]);
	sc__names_free(names, n);
	return rc;
}

static int open_dir(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static int copy_data(int src, int dst)
{
	for (;;) {
		ssize_t n = copy_file_range(src, NULL, dst, NULL, 1u << 30, 0);
		if (n == 0)
			return 0;
		if (n < 0 && errno != EINTR)
			break;
	}
	if (errno != EXDEV && errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
		return -errno;
	char buf[65536];
	for (;;) {
		ssize_t n = read(src, buf, sizeof(buf));
		if (n <= 0)
			return n < 0 ? -errno : 0;
		for (ssize_t done = 0; done < n;) {
			ssize_t w = write(dst, buf + done, (size_t)(n - done));
			if (w < 0)
				return -errno;
			done += w;
		}
	}
}

static int copy_tree(int src, int dst, unsigned depth);

/* A directory or regular file: made, filled, then given its mode and times (a directory's
 * last, so a read-only one can still be filled). */
static int copy_node(int src, int dst, const char *name, const struct stat *st, unsigned depth)
{
	int from, to, rc;
	if (S_ISDIR(st->st_mode)) {
		from = open_dir(src, name);
		rc = from < 0 ? from : mkdirat(dst, name, 0700) < 0 ? -errno : 0;
		to = rc < 0 ? rc : open_dir(dst, name);
		rc = to < 0 ? to : copy_tree(from, to, depth + 1);
	} else {
		from = openat(src, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		rc = from < 0 ? -errno : 0;
		to = rc < 0 ? -1
			    : openat(dst, name,
				     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		rc = rc < 0 ? rc : to < 0 ? -errno : copy_data(from, to);
	}
	struct timespec times[2] = {st->st_atim, st->st_mtim};
	if (rc == 0 && (fchmod(to, st->st_mode & 07777) < 0 || futimens(to, times) < 0))
		rc = -errno;
	if (from >= 0)
		close(from);
	if (to >= 0)
		close(to);
	return rc;
}

/* Symbolic links are copied as links and FIFOs as FIFOs; sockets are left out (what
 * listened on one was a process), and hard links become separate files. */
static int copy_entry(int src, int dst, const char *name, unsigned depth)
{
	struct stat st;
	if (fstatat(src, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (S_ISDIR(st.st_mode) || S_ISREG(st.st_mode))
		return copy_node(src, dst, name, &st, depth);
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlinkat(src, name, target, sizeof(target) - 1);
		if (n < 0)
			return -errno;
		target[n] = 0;
		if (symlinkat(target, dst, name) < 0)
			return -errno;
	} else if (S_ISFIFO(st.st_mode)) {
		if (mkfifoat(dst, name, st.st_mode & 07777) < 0)
			return -errno;
	}
	return 0;
}

static int copy_tree(int src, int dst, unsigned depth)
{
	if (depth > SC_TREE_COPY_DEPTH)
		return -ELOOP;
	char **names;
	size_t n;
	int rc = sc__sorted_names(src, &names, &n);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = copy_entry(src, dst, names[i], depth);
	sc__names_free(names, n);
	return rc;
}

int sc__tree_copy(int src, int dst)
{
	return copy_tree(src, dst, 0);
}
