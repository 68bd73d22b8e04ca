/* A run's own files (snapcell_run_options.files): the name rule, the caps, the check against
 * the staged workspace, and the directory the host writes them into for the template to lay
 * over /input in that run's cell (guest/template.c, src/isolate/rootfs.c). Not the staging of
 * the workspace itself (src/stage), which happens once per sandbox. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "util/util.h"

#define NAME_MAX_BYTES 1024
#define NAME_MAX_PARTS 32

static _Atomic uint32_t next_id = 1;

/* Length of the UTF-8 sequence at s (at most left bytes), or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
	size_t n = s[0] < 0x80		   ? 1
		   : (s[0] & 0xe0) == 0xc0 ? 2
		   : (s[0] & 0xf0) == 0xe0 ? 3
		   : (s[0] & 0xf8) == 0xf0 ? 4
					   : 0;
	if (n == 0 || n > left || (n == 2 && s[0] < 0xc2) || (n == 4 && s[0] > 0xf4))
		return 0;
	for (size_t i = 1; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	if ((n == 3 && s[0] == 0xe0 && s[1] < 0xa0) || (n == 3 && s[0] == 0xed && s[1] >= 0xa0) ||
	    (n == 4 && s[0] == 0xf0 && s[1] < 0x90) || (n == 4 && s[0] == 0xf4 && s[1] >= 0x90))
		return 0;
	return n;
}

int sc__run_file_name_check(const char *name, struct snapcell_error *err)
{
	if (!name || !*name)
		return sc__err(err, SNAPCELL_E_INVAL, "run file: an empty name");
	size_t len = strlen(name), parts = 1;
	if (len > NAME_MAX_BYTES)
		return sc__err(err, SNAPCELL_E_INVAL, "run file %.64s...: %zu bytes; at most %d",
			       name, len, NAME_MAX_BYTES);
	if (name[0] == '/')
		return sc__err(err, SNAPCELL_E_INVAL,
			       "run file %s: an absolute name; give its path under /input", name);
	for (size_t i = 0; i < len;) {
		unsigned char c = (unsigned char)name[i];
		size_t n = utf8_len((const unsigned char *)name + i, len - i);
		if (c < 0x20 || c == 0x7f)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "run file name: a control byte (0x%02x) at %zu", c, i);
		if (n == 0)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "run file name: not UTF-8 at byte %zu", i);
		parts += c == '/';
		i += n;
	}
	if (parts > NAME_MAX_PARTS)
		return sc__err(err, SNAPCELL_E_INVAL, "run file %s: %zu parts; at most %d", name,
			       parts, NAME_MAX_PARTS);
	for (const char *p = name; p;) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
			return sc__err(err, SNAPCELL_E_INVAL,
				       "run file %s: an empty, '.' or '..' part; give a plain "
				       "relative path",
				       name);
		if (n > NAME_MAX)
			return sc__err(err, SNAPCELL_E_INVAL, "run file %s: a part of %zu bytes",
				       name, n);
		p = slash ? slash + 1 : NULL;
	}
	return 0;
}

/* Whether name, or one of its parents, is something of the staged workspace other than a
 * directory the run's file may go into. */
static int workspace_clash(int input, const char *name, struct snapcell_error *err)
{
	char prefix[NAME_MAX_BYTES + 1];
	snprintf(prefix, sizeof(prefix), "%s", name);
	for (char *p = prefix;; p++) {
		bool last = *p == 0;
		if (*p != '/' && !last)
			continue;
		*p = 0;
		struct stat st;
		if (fstatat(input, prefix, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return 0; /* not in the workspace: nothing below it is */
		if (last)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "run file %s: /input/%s is already the workspace's", name,
				       prefix);
		if (!S_ISDIR(st.st_mode))
			return sc__err(err, SNAPCELL_E_INVAL,
				       "run file %s: /input/%s is a file of the workspace", name,
				       prefix);
		*p = '/';
	}
}

/* The directory that will hold name's last part, made as needed under dir (0755 whatever
 * the umask) and opened part by part with O_NOFOLLOW, so nothing put in the run's directory
 * meanwhile can lead the writes out of it; *leaf points into name. A descriptor, or a
 * negative code. */
static int open_parent(int dir, const char *name, const char **leaf, struct snapcell_error *err)
{
	char part[NAME_MAX + 1];
	int at = fcntl(dir, F_DUPFD_CLOEXEC, 0);
	if (at < 0)
		return sc__err(err, -errno, "run file %s", name);
	const char *p = name, *slash;
	for (; (slash = strchr(p, '/')); p = slash + 1) {
		snprintf(part, sizeof(part), "%.*s", (int)(slash - p), p);
		if (mkdirat(at, part, 0755) == 0)
			fchmodat(at, part, 0755, 0);
		int next = openat(at, part, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int saved = errno;
		close(at);
		if (next < 0)
			return saved == ENOTDIR || saved == ELOOP
				       ? sc__err(err, SNAPCELL_E_INVAL,
						 "run file %s: %s is another file of the run", name,
						 part)
				       : sc__err(err, -saved, "run file %s: mkdir %s", name, part);
		at = next;
	}
	*leaf = p;
	return at;
}

/* Copies the regular file at path into fd, at most left bytes (*used gets what it took). */
static int copy_host_file(int fd, const char *name, const char *path, uint64_t left, uint64_t *used,
			  struct snapcell_error *err)
{
	/* O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below. */
	int in = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (in < 0)
		return sc__err(err, errno == ELOOP ? SNAPCELL_E_INVAL : -errno,
			       "run file %s: open %s%s", name, path,
			       errno == ELOOP ? ": a symbolic link" : "");
	struct stat st;
	int rc = fstat(in, &st) < 0 ? -errno : 0;
	if (rc == 0 && !S_ISREG(st.st_mode))
		rc = sc__err(err, SNAPCELL_E_INVAL, "run file %s: %s is not a regular file", name,
			     path);
	char buf[16 << 10];
	*used = 0;
	while (rc == 0) { /* never trusting st_size: the file may grow meanwhile */
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? sc__err(err, -errno, "run file %s: read %s", name, path) : 0;
			break;
		}
		if ((uint64_t)n > left - *used)
			rc = sc__err(err, SNAPCELL_E_TOO_BIG,
				     "run file %s: the run's files are over %u bytes in all", name,
				     SNAPCELL_RUN_FILES_BYTES_MAX);
		else if ((rc = sc__write_all(fd, buf, (size_t)n)) < 0)
			sc__err(err, rc, "run file %s: write", name);
		*used += (uint64_t)n;
	}
	close(in);
	return rc;
}

static int write_one(int dir, const struct snapcell_run_file *f, uint64_t *left,
		     struct snapcell_error *err)
{
	const char *leaf = f->name;
	int parent = open_parent(dir, f->name, &leaf, err);
	if (parent < 0)
		return parent;
	int fd = openat(parent, leaf, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	int rc = fd < 0 ? -errno : 0;
	close(parent);
	if (fd < 0)
		return rc == -EEXIST
			       ? sc__err(err, SNAPCELL_E_INVAL,
					 "run file %s: given twice, or as the parent of another",
					 f->name)
			       : sc__err(err, rc, "run file %s: create", f->name);
	uint64_t used = 0;
	if (f->data) {
		used = f->data_len;
		rc = used > *left ? sc__err(err, SNAPCELL_E_TOO_BIG,
					    "run file %s: the run's files are over %u bytes in all",
					    f->name, SNAPCELL_RUN_FILES_BYTES_MAX)
				  : sc__write_all(fd, f->data, f->data_len);
		if (rc < 0 && rc != SNAPCELL_E_TOO_BIG)
			sc__err(err, rc, "run file %s: write", f->name);
	} else {
		rc = copy_host_file(fd, f->name, f->host_path, *left, &used, err);
	}
	if (rc == 0 && fchmod(fd, 0444) < 0)
		rc = sc__err(err, -errno, "run file %s: chmod", f->name);
	close(fd);
	*left -= rc == 0 ? used : 0;
	return rc;
}

/* The checks that need no file system: count, names, a content for each. */
static int check_list(const struct snapcell_sandbox *sb, const struct snapcell_run_file *files,
		      size_t n, struct snapcell_error *err)
{
	if (sb->cells.ops->no_run_files)
		return sc__err(err, SNAPCELL_E_ISOLATION, "%s", sb->cells.ops->no_run_files);
	if (n > SNAPCELL_RUN_FILES_MAX)
		return sc__err(err, SNAPCELL_E_TOO_BIG, "run files: %zu given; at most %d", n,
			       SNAPCELL_RUN_FILES_MAX);
	if (!files)
		return sc__err(err, SNAPCELL_E_INVAL, "run files: n_files %zu and files NULL", n);
	for (size_t i = 0; i < n; i++) {
		int rc = sc__run_file_name_check(files[i].name, err);
		if (rc < 0)
			return rc;
		if (!files[i].data && !files[i].host_path)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "run file %s: neither data nor host_path", files[i].name);
	}
	return 0;
}

int sc__run_files_stage(const struct snapcell_sandbox *sb, const struct snapcell_run_file *files,
			size_t n, uint32_t *id, struct snapcell_error *err)
{
	int rc = check_list(sb, files, n, err);
	if (rc < 0)
		return rc;
	char path[PATH_MAX], name[32];
	snprintf(path, sizeof(path), "%s/input", sb->workdir);
	int input = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (input < 0)
		return sc__err(err, -errno, "run files: open the staged /input");
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = workspace_clash(input, files[i].name, err);
	close(input);
	if (rc < 0)
		return rc;
	*id = atomic_fetch_add(&next_id, 1);
	snprintf(name, sizeof(name), "in-%u", *id);
	if (mkdirat(sb->out_fd, name, 0755) < 0)
		return sc__err(err, -errno, "run files: mkdir %s", name);
	int dir = openat(sb->out_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0 || fchmod(dir, 0755) < 0)
		rc = sc__err(err, -errno, "run files: open %s", name);
	uint64_t left = SNAPCELL_RUN_FILES_BYTES_MAX;
	for (size_t i = 0; rc == 0 && i < n; i++)
		rc = write_one(dir, &files[i], &left, err);
	if (dir >= 0)
		close(dir);
	if (rc < 0)
		sc__run_files_remove(sb, *id);
	return rc;
}

void sc__run_files_remove(const struct snapcell_sandbox *sb, uint32_t id)
{
	char name[32];
	snprintf(name, sizeof(name), "in-%u", id);
	sc__remove_tree(sb->out_fd, name, 0);
}
