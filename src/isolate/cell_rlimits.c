/* The cell interface at level rlimits: the helper is a plain child in the caller's namespaces
 * (spawn.c) and each cell is confined by Landlock (hostfs.c), seccomp and rlimits, with its
 * /tmp and /output directories on the work directory's filesystem (tmp/<id>, out/<id>), which
 * no tmpfs bounds: this file measures them for the host's watch (with held.c for what no name
 * shows). What the guest does is guest/plain.c; this file is only the host's side. */
#define _GNU_SOURCE
#include "cell.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

/* Deeper directories count as over: the walk is recursive. */
#define FILES_MAX_DEPTH 64

/* The cells' /tmp trees live in the work directory too (tmp/<cell id>), made and removed by
 * the template as the sandbox's uid. */
static int prepare(struct sc_cells *c, int workdir, enum snapcell_isolation required,
		   struct snapcell_error *err)
{
	(void)required; /* choose_level refused a requirement above this level */
	struct stat st;
	if (mkdirat(workdir, "tmp", 0700) < 0 || fchownat(workdir, "tmp", c->uid, c->gid, 0) < 0 ||
	    fstat(workdir, &st) < 0)
		return sc__err(err, -errno, "prepare work directory: its tmp");
	c->work_dev = st.st_dev;
	c->tmp_fd = openat(workdir, "tmp", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return c->tmp_fd < 0 ? sc__err(err, -errno, "open work directory: tmp") : 0;
}

static int start(struct sc_cells *c, struct sc_spawn *spec, pid_t *pid, int *pidfd,
		 struct snapcell_error *err)
{
	(void)c;
	spec->namespaces = false;
	spec->cgroup_fd = -1;
	return sc__spawn_helper(spec, pid, pidfd, err);
}

/* Cells that run as the caller's own uid make seccomp refuse path-based chmod, chown and
 * utimes: Landlock does not cover them, and the caller's files are that uid's. */
static void setup(const struct sc_cells *c, struct sc_cells_setup *out)
{
	*out = (struct sc_cells_setup){
		.level = c->level,
		.cell_tmp = true,
		.own_uid = c->uid == geteuid(),
		.host_paths = true,
	};
}

static void cells_free(struct sc_cells *c)
{
	if (c->tmp_fd >= 0)
		close(c->tmp_fd);
	c->tmp_fd = -1;
}

struct usage {
	uint64_t bytes, entries;
	const struct sc_files_bounds *b;
};

/* Whether a failed open or stat in the walk hides what a directory holds: the host may not
 * read it. A caller that is not root runs the cells as its own uid, without CAP_DAC_OVERRIDE,
 * and code can fchmod a directory of its own to 000 (chmod by path is refused): twelve such
 * directories held 768 MiB past the 321 MiB bound before this counted as over. A name gone
 * meanwhile, or swapped for a link or a file, hides nothing. */
static bool unreadable(void)
{
	return errno == EACCES || errno == EPERM;
}

/* Adds what dir holds to u; true once u is over its bounds (the walk stops there), or when a
 * directory in it cannot be read. Nothing is followed through a link, and a hard-linked file
 * counts once per name. */
static bool tree_over(int dir, unsigned depth, struct usage *u)
{
	/* Its own open file: a dup would share (and move) the offset of the caller's. */
	int fd =
		depth > FILES_MAX_DEPTH ? -1 : openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		bool over = depth > FILES_MAX_DEPTH || unreadable();
		if (fd >= 0)
			close(fd);
		return over;
	}
	bool over = false;
	for (struct dirent *e; !over && (e = readdir(d));) {
		struct stat st;
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			over = unreadable();
			continue;
		}
		u->bytes += (uint64_t)st.st_blocks * 512;
		over = u->bytes > u->b->max_bytes || ++u->entries > u->b->max_entries;
		if (!over && S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), e->d_name,
					 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0) {
				over = tree_over(sub, depth + 1, u);
				close(sub);
			} else {
				over = unreadable();
			}
		}
	}
	closedir(d);
	return over;
}

/* The cell's tmp/<id> and out/<id> (through its /output descriptor), what its processes hold
 * that no name shows (files they opened or mapped, then unlinked), and what is in flight. */
static bool files_over(const struct sc_cells *c, const struct sc_cell *files,
		       const struct sc_files_bounds *b)
{
	struct usage u = {.b = b};
	char name[16];
	snprintf(name, sizeof(name), "%u", files->id);
	int tmp = openat(c->tmp_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int pid = sc__pidfd_pid(files->fds[SC_CELL_PIDFD]);
	if (pid > 0) {
		uint64_t held = sc__held_bytes(pid, c->work_dev, b->file_bytes);
		u.bytes = held > b->max_bytes ? b->max_bytes + 1 : held;
	}
	bool over = u.bytes > b->max_bytes || (tmp >= 0 && tree_over(tmp, 0, &u));
	if (tmp >= 0)
		close(tmp);
	over = over ||
	       (files->fds[SC_CELL_OUTPUT] >= 0 && tree_over(files->fds[SC_CELL_OUTPUT], 0, &u));
	/* And what no table holds: descriptors in flight in a socket's queue. */
	return over || (b->in_flight_over && b->in_flight_over(b->ctx, b->max_bytes - u.bytes));
}

const struct sc_cell_ops sc__cells_rlimits = {
	.name = "rlimits",
	.level = SNAPCELL_ISOLATION_RLIMITS,
	.no_run_files = "run files need level 'namespaces' (a mount namespace per cell for their "
			"/input); this sandbox runs at 'rlimits'",
	.prepare = prepare,
	.start = start,
	.setup = setup,
	.free = cells_free,
	.kill = sc__cell_pidfd_kill,
	.wait_gone = sc__cell_pidfd_wait_gone,
	.pid = sc__cell_pidfd_pid,
	.freeze = sc__cell_pidfd_freeze,
	.thaw = sc__cell_thaw,
	.frozen_free = sc__cell_frozen_free,
	.files_over = files_over,
};
