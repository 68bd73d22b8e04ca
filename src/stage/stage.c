/* Staging /input: the workspace's children and each mount are copied into the sandbox's work
 * directory, which the template binds read-only at /input. Copying (not binding the user's
 * tree) is what lets the rules hold: links of any kind and depth, FIFOs, sockets and devices
 * are left out, so nothing a link points at is reachable; and the copies are readable by the
 * sandbox's uid whatever the originals' modes. Mount paths normalise here, once, for every
 * front end. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#define STAGE_MAX_FILES 100000
#define STAGE_MAX_BYTES (1ull << 30)
#define STAGE_MAX_DEPTH 64

int snapcell_normalize_mount_path(const char *in, char *out, size_t out_len,
				  struct snapcell_error *err)
{
	char buf[PATH_MAX];
	if (!in || !out || out_len < 8)
		return sc__err(err, SNAPCELL_E_INVAL, "mount path: NULL argument");
	while (*in == ' ' || *in == '\t' || *in == '\n')
		in++;
	size_t n = strlen(in);
	while (n > 0 && (in[n - 1] == ' ' || in[n - 1] == '\t' || in[n - 1] == '\n'))
		n--;
	if (n >= sizeof(buf))
		return sc__err(err, SNAPCELL_E_INVAL, "mount path is too long");
	/* The path is told to the model (snapcell_config_describe) and named in its code: text,
	 * one line of it. */
	if (!sc__utf8_valid(in, n))
		return sc__err(err, SNAPCELL_E_INVAL, "mount path is not UTF-8");
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)in[i] < 0x20 || in[i] == 0x7f)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "mount path contains a control character (byte %zu)", i);
	for (size_t i = 0; i < n; i++)
		buf[i] = in[i] == '\\' ? '/' : in[i];
	buf[n] = 0;
	size_t o = snprintf(out, out_len, "/input");
	bool first = true;
	for (char *save, *part = strtok_r(buf, "/", &save); part;
	     part = strtok_r(NULL, "/", &save)) {
		if (!strcmp(part, "."))
			continue;
		if (!strcmp(part, ".."))
			return sc__err(err, SNAPCELL_E_INVAL, "mount path '%s' contains '..'", in);
		if (first && !strcmp(part, "input")) {
			first = false;
			continue;
		}
		first = false;
		if (o + 1 + strlen(part) >= out_len)
			return sc__err(err, SNAPCELL_E_INVAL, "mount path is too long");
		o += (size_t)snprintf(out + o, out_len - o, "/%s", part);
	}
	if (o == strlen("/input"))
		return sc__err(err, SNAPCELL_E_INVAL,
			       "mount path '%s' names /input itself; give a path beneath it", in);
	return 0;
}

struct copy {
	uint64_t files, bytes;
	bool reject_links;
	struct snapcell_error *err;
};

static int copy_file(int sfd, int ddir, const char *name, mode_t mode, struct copy *c)
{
	int dfd = openat(ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			 (mode & 0111) ? 0755 : 0644);
	if (dfd < 0)
		return sc__err(c->err, -errno, "stage /input: create %s", name);
	int rc = 0;
	for (;;) {
		ssize_t n = copy_file_range(sfd, NULL, dfd, NULL, 1 << 30, 0);
		if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS)) {
			char buf[65536];
			n = read(sfd, buf, sizeof(buf));
			if (n > 0 && sc__write_all(dfd, buf, (size_t)n) < 0)
				n = -1;
		}
		if (n <= 0) {
			rc = n < 0 ? -errno : 0;
			break;
		}
		if ((c->bytes += (uint64_t)n) > STAGE_MAX_BYTES) {
			rc = -EFBIG;
			break;
		}
	}
	close(dfd);
	if (rc < 0)
		return sc__err(c->err, rc == -EFBIG ? SNAPCELL_E_TOO_BIG : rc,
			       "stage /input: copy %s (the inputs may total at most 1 GiB)", name);
	return 0;
}

static int copy_tree(int sdir, int ddir, unsigned depth, struct copy *c);

/* Takes ownership of dir_fd. */
static int copy_dir(int dir_fd, int ddir, const char *dname, unsigned depth, struct copy *c)
{
	int fd SC_AUTO_CLOSE = dir_fd;
	if (depth >= STAGE_MAX_DEPTH)
		return sc__err(c->err, SNAPCELL_E_TOO_BIG,
			       "stage /input: deeper than %d directories", STAGE_MAX_DEPTH);
	if (mkdirat(ddir, dname, 0755) < 0 && errno != EEXIST)
		return sc__err(c->err, -errno, "stage /input: mkdir %s", dname);
	int sub SC_AUTO_CLOSE =
		openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (sub < 0)
		return sc__err(c->err, -errno, "stage /input: %s", dname);
	return copy_tree(SC_STEAL_FD(fd), sub, depth + 1, c);
}

/* Copies sdir/sname to ddir/dname: regular files and directories only. Links, FIFOs,
 * sockets and devices are left out on purpose (see the top of this file). */
static int copy_entry(int sdir, const char *sname, int ddir, const char *dname, unsigned depth,
		      struct copy *c)
{
	/* Classify before opening: opening a device node can have effects of its own. */
	struct stat pre;
	if (fstatat(sdir, sname, &pre, AT_SYMLINK_NOFOLLOW) < 0)
		return 0;
	if (S_ISLNK(pre.st_mode) && c->reject_links)
		return sc__err(c->err, SNAPCELL_E_INVAL,
			       "stage /input: %s is a symbolic link, and links are refused "
			       "(reject_links)",
			       sname);
	if (!S_ISREG(pre.st_mode) && !S_ISDIR(pre.st_mode))
		return 0;
	int fd SC_AUTO_CLOSE =
		openat(sdir, sname, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return errno == ELOOP || errno == ENXIO
			       ? 0 /* a link or a socket */
			       : sc__err(c->err, -errno, "stage /input: open %s", sname);
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_ino != pre.st_ino || st.st_dev != pre.st_dev ||
	    (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)))
		return 0;
	if (S_ISDIR(st.st_mode))
		return copy_dir(SC_STEAL_FD(fd), ddir, dname, depth, c);
	return ++c->files > STAGE_MAX_FILES
		       ? sc__err(c->err, SNAPCELL_E_TOO_BIG, "stage /input: more than %d files",
				 STAGE_MAX_FILES)
		       : copy_file(fd, ddir, dname, st.st_mode, c);
}

/* Takes ownership of sdir. */
static int copy_tree(int sdir, int ddir, unsigned depth, struct copy *c)
{
	DIR *d = fdopendir(sdir);
	if (!d) {
		close(sdir);
		return sc__err(c->err, -errno, "stage /input: read directory");
	}
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			rc = copy_entry(dirfd(d), e->d_name, ddir, e->d_name, depth, c);
	closedir(d);
	return rc;
}

/* Creates the parents of rel (modified in place) under root; returns a descriptor of the
 * last one and points *leaf at the final component. */
static int make_parents(int root, char *rel, char **leaf)
{
	int dfd = openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	char *save, *part = strtok_r(rel, "/", &save), *next;
	while (dfd >= 0 && part && (next = strtok_r(NULL, "/", &save))) {
		if (mkdirat(dfd, part, 0755) < 0 && errno != EEXIST) {
			close(dfd);
			return -errno;
		}
		int sub = openat(dfd, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dfd);
		dfd = sub;
		part = next;
	}
	*leaf = part;
	return dfd < 0 ? -errno : dfd;
}

static int stage_mount(int root, const struct sc_stage_mount *m, struct copy *c)
{
	char rel[PATH_MAX], parent[PATH_MAX], *leaf = NULL;
	snprintf(rel, sizeof(rel), "%s", m->mount_path + strlen("/input/"));
	snprintf(parent, sizeof(parent), "%s", m->host_path);
	char *base = strrchr(parent, '/');
	*base++ = 0;
	int dfd SC_AUTO_CLOSE = make_parents(root, rel, &leaf);
	if (dfd < 0)
		return sc__err(c->err, dfd, "stage %s: a file is in the way", m->mount_path);
	sc__remove_tree(dfd, leaf, 0); /* a later mount wins over what is there */
	int pfd SC_AUTO_CLOSE = open(*parent ? parent : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return pfd < 0 ? sc__err(c->err, -errno, "stage %s", m->host_path)
		       : copy_entry(pfd, base, dfd, leaf, 0, c);
}

int sc__stage_input(const char *workspace, const struct sc_stage_mount *mounts, size_t n_mounts,
		    bool reject_links, int root, struct snapcell_error *err)
{
	struct copy c = {.reject_links = reject_links, .err = err};
	int rc = 0;
	if (workspace) {
		int ws = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		rc = ws < 0 ? sc__err(err, -errno, "workspace %s", workspace)
			    : copy_tree(ws, root, 0, &c);
	}
	for (size_t i = 0; rc == 0 && i < n_mounts; i++)
		rc = stage_mount(root, &mounts[i], &c);
	return rc;
}
