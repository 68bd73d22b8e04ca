/* The tree signature that keys cached sandboxes: FNV-1a (two 64-bit lanes) over the sorted
 * relative path, type, size and mtime of every regular file and directory. Links are
 * excluded, as they are from /input. Not a cryptographic hash: it detects change, it does
 * not resist someone crafting a collision with their own files. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stage.h"
#include "util/util.h"

#define MAX_DEPTH 64

struct sig {
	uint64_t a, b;
};

static void mix(struct sig *s, const void *data, size_t len)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < len; i++) {
		s->a = (s->a ^ p[i]) * 0x100000001b3ull;
		s->b = (s->b ^ p[i]) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
	}
}

static void mix_entry(struct sig *s, const char *rel, const struct stat *st)
{
	uint64_t fields[4] = {S_ISDIR(st->st_mode), (uint64_t)st->st_size,
			      (uint64_t)st->st_mtim.tv_sec, (uint64_t)st->st_mtim.tv_nsec};
	mix(s, rel, strlen(rel) + 1);
	/* A directory's size and mtime change when a link is added to it; its files speak for
	 * it. */
	if (S_ISDIR(st->st_mode))
		fields[1] = fields[2] = fields[3] = 0;
	mix(s, fields, sizeof(fields));
}

static int walk(struct sig *s, int dfd, const char *rel, unsigned depth);

static int visit(struct sig *s, int dfd, const char *name, const char *rel, unsigned depth)
{
	char sub[4096];
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
		return 0;
	if (snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", name) >= (int)sizeof(sub))
		return -ENAMETOOLONG;
	mix_entry(s, sub, &st);
	if (!S_ISDIR(st.st_mode))
		return 0;
	if (depth >= MAX_DEPTH)
		return -ELOOP;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : walk(s, fd, sub, depth + 1);
}

/* Takes ownership of dfd. */
static int walk(struct sig *s, int dfd, const char *rel, unsigned depth)
{
	char **names = NULL;
	size_t n = 0;
	int rc = sc__sorted_names(dfd, &names, &n);
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = visit(s, dfd, names[i], rel, depth);
	sc__names_free(names, n);
	close(dfd);
	return rc;
}

int snapcell_tree_signature(const char *path, char out[SNAPCELL_SIGNATURE_LEN],
			    struct snapcell_error *err)
{
	if (!path || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "signature: NULL argument");
	struct sig s = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull};
	struct stat st;
	/* The root itself is followed: a symlinked workspace is walked through its target. */
	if (stat(path, &st) < 0)
		return sc__err(err, -errno, "signature of %s", path);
	mix_entry(&s, "", &st);
	int rc = 0;
	if (S_ISDIR(st.st_mode)) {
		int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rc = fd < 0 ? -errno : walk(&s, fd, "", 0);
	}
	if (rc < 0)
		return sc__err(err, rc, "signature of %s", path);
	snprintf(out, SNAPCELL_SIGNATURE_LEN, "%016llx%016llx", (unsigned long long)s.a,
		 (unsigned long long)s.b);
	return 0;
}
