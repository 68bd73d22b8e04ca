/* The sandbox's work directory: made (in $TMPDIR, /dev/shm or /tmp) with the parts the template
 * binds (root/, input/ with the staged workspace and mounts, out/ for the cells' /output), locked
 * for its life, and the stale ones of crashed owners reaped. Not what a mechanism adds there
 * (sc_cell_ops.prepare), nor its removal (snapcell_sandbox_free). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "core.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

/* $TMPDIR when set; else /dev/shm when it is a tmpfs of at least 1 GiB, since creating and
 * removing a directory per cell there costs microseconds, against tens to hundreds on ext4
 * (docs/performance.md); else /tmp. */
static const char *workdir_parent(void)
{
	const char *tmp = getenv("TMPDIR");
	if (tmp && *tmp == '/')
		return tmp;
	struct statfs fs;
	if (statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC &&
	    (uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize >= (1ull << 30) &&
	    access("/dev/shm", W_OK | X_OK) == 0)
		return "/dev/shm";
	return "/tmp";
}

/* Stage copies what the config names; it knows nothing of the config's layout. */
static int stage_inputs(const struct snapcell_config *cfg, int input, struct snapcell_error *err)
{
	struct sc_stage_mount *mounts = calloc(cfg->n_mounts + 1, sizeof(*mounts));
	if (!mounts)
		return sc__err(err, -ENOMEM, "stage /input");
	for (size_t i = 0; i < cfg->n_mounts; i++)
		mounts[i] = (struct sc_stage_mount){cfg->mounts[i].host_path,
						    cfg->mounts[i].mount_path};
	int rc = sc__stage_input(cfg->workspace, mounts, cfg->n_mounts, cfg->reject_links, input,
				 err);
	free(mounts);
	return rc;
}

/* Work directories whose owner died without snapcell_sandbox_free (a crash, a kill, _exit)
 * would keep their staged inputs in memory (/dev/shm) for ever. Each work directory holds a
 * "lock" file its sandbox keeps flock'ed, renamed into place only once locked; a directory of
 * this uid whose lock can be taken has no live owner, and is removed here, at sandbox
 * creation, while the template starts (sc__workdir_reap: the scan of a shared /dev/shm took
 * ~0.35 ms that was on the cold start's path before the helper was spawned). A directory
 * without a lock (being made, or by an older library) is left alone. Bounded: at most 64
 * removals and 1 s per creation; failures are ignored. */
#define REAP_MAX	 64
#define REAP_DEADLINE_MS 1000
#define WORKDIR_NAME_LEN 15 /* "snapcell-XXXXXX" */

static void reap_stale_workdirs(const char *parent_path)
{
	int parent SC_AUTO_CLOSE = open(parent_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (parent < 0)
		return;
	int scan SC_AUTO_CLOSE = dup(parent);
	DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
	if (!d)
		return;
	SC_STEAL_FD(scan); /* the stream owns it */
	uint64_t deadline = sc__deadline_ms(REAP_DEADLINE_MS);
	unsigned reaped = 0;
	struct dirent *e;
	while (reaped < REAP_MAX && sc__now_us() < deadline && (e = readdir(d))) {
		if (strncmp(e->d_name, "snapcell-", 9) || strlen(e->d_name) != WORKDIR_NAME_LEN)
			continue;
		struct stat st;
		if (fstatat(parent, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		int dir SC_AUTO_CLOSE =
			openat(parent, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int lock SC_AUTO_CLOSE =
			dir < 0 ? -1 : openat(dir, "lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		/* Held until the tree is gone, so two creating sandboxes never race on it. */
		if (lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0 &&
		    sc__remove_tree(parent, e->d_name, deadline) == 0)
			reaped++;
	}
	closedir(d);
}

/* The lock file is made under another name, locked, then renamed into place, so a reaper
 * never sees an unlocked "lock" of a live sandbox. */
static int lock_workdir(int dfd)
{
	int fd SC_AUTO_CLOSE =
		openat(dfd, "lock.new", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0 || renameat(dfd, "lock.new", dfd, "lock") < 0)
		return -errno;
	return SC_STEAL_FD(fd);
}

void sc__workdir_reap(const struct snapcell_sandbox *sb)
{
	char parent[PATH_MAX];
	const char *slash = sb->workdir ? strrchr(sb->workdir, '/') : NULL;
	if (!slash || (size_t)(slash - sb->workdir) >= sizeof(parent))
		return;
	snprintf(parent, sizeof(parent), "%.*s",
		 slash == sb->workdir ? 1 : (int)(slash - sb->workdir), sb->workdir);
	reap_stale_workdirs(parent);
}

int sc__workdir_make(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	const char *tmp = workdir_parent();
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/snapcell-XXXXXX", tmp);
	if (!mkdtemp(path))
		return sc__err(err, -errno, "create work directory in %s", tmp);
	if (!(sb->workdir = strdup(path)))
		return -ENOMEM;
	uid_t uid = sb->ids.uid;
	gid_t gid = sb->ids.gid;
	/* The sandbox uid must reach the root mount point and own the output tree. */
	int dfd SC_AUTO_CLOSE = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0 && (sb->lock_fd = lock_workdir(dfd)) < 0)
		return sc__err(err, sb->lock_fd, "lock work directory %s", path);
	if (dfd < 0 || fchmod(dfd, 0711) < 0 || mkdirat(dfd, "root", 0755) < 0 ||
	    mkdirat(dfd, "input", 0755) < 0 || mkdirat(dfd, "out", 0700) < 0 ||
	    fchownat(dfd, "out", uid, gid, 0) < 0)
		return sc__err(err, -errno, "prepare work directory %s", path);
	sb->out_fd = openat(dfd, "out", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int input SC_AUTO_CLOSE = openat(dfd, "input", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (sb->out_fd < 0 || input < 0)
		return sc__err(err, -errno, "open %s", path);
	return stage_inputs(sb->cfg, input, err);
}
