/* Choosing the outside uid a sandbox runs as, and reserving it across every process on the
 * machine, so the kernel's per-user quotas are per sandbox when the caller is root. Not the
 * place for the id maps themselves (spawn.c writes them). */
#define _GNU_SOURCE
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

#define LOCK_PARENT "snapcell"
#define LOCK_DIR    "/run/" LOCK_PARENT "/uids"

/* Whether this process's user namespace maps every id of [first, first + n): its own view of
 * ids is the first column of the map. In a container root may have only 65536 of them. */
static bool ns_maps(const char *file, uint32_t first, uint32_t n)
{
	FILE *f = fopen(file, "re");
	if (!f)
		return false;
	unsigned long inside, outside, len;
	bool ok = false;
	while (!ok && fscanf(f, "%lu %lu %lu", &inside, &outside, &len) == 3)
		ok = first >= inside && (uint64_t)first + n <= (uint64_t)inside + len;
	fclose(f);
	return ok;
}

/* One level of the lock directory. Only root may write there: anyone who could remove a lock
 * file could give two sandboxes one uid. */
static int open_dir_at(int parent, const char *name, mode_t mode, struct snapcell_error *err)
{
	if (mkdirat(parent, name, mode) < 0 && errno != EEXIST)
		return sc__err(err, -errno, "create %s", LOCK_DIR);
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sc__err(err, -errno, "open %s", LOCK_DIR);
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022)) {
		close(fd);
		return sc__err(err, -EPERM, "%s: a directory on the way is not root's alone",
			       LOCK_DIR);
	}
	return fd;
}

static int open_lock_dir(struct snapcell_error *err)
{
	int run = open("/run", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (run < 0)
		return sc__err(err, -errno, "open /run (for %s)", LOCK_DIR);
	int parent = open_dir_at(run, LOCK_PARENT, 0755, err);
	close(run);
	if (parent < 0)
		return parent;
	int dir = open_dir_at(parent, "uids", 0700, err);
	close(parent);
	return dir;
}

/* Whether pid runs (not a zombie), and since when: the start time tells a pid reused apart. */
static bool proc_live(pid_t pid, unsigned long long *start)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	char *p = n > 0 ? (buf[n] = 0, strrchr(buf, ')')) : NULL;
	char state = 0;
	if (!p || sscanf(p + 1,
			 " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d "
			 "%*d %llu",
			 &state, start) != 2)
		return false;
	return state != 'Z' && state != 'X';
}

/* Whether the template a lock file names still runs. Its host process's death dropped the
 * lock, but the template exits only when it sees that, and its cells after it: until then
 * they run as the uid. Once it is a zombie its pid namespace is empty. */
static bool template_lives(int fd)
{
	char buf[64];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return false;
	buf[n] = 0;
	int pid;
	unsigned long long start, now;
	return sscanf(buf, "%d %llu", &pid, &start) == 2 && pid > 0 && proc_live(pid, &now) &&
	       now == start;
}

/* The first uid of the range whose lock file nobody holds. A lock is an open file description:
 * the kernel drops it when the last descriptor goes, at snapcell_sandbox_free or the process's
 * death. Files are never removed (an unlink would race with a sandbox opening the old one),
 * and the scan starts at first, so they number the most sandboxes ever alive at once. */
static int take_uid(int dir, uint32_t first, uint32_t count, struct sc_outside_ids *out,
		    struct snapcell_error *err)
{
	char name[16];
	for (uint64_t u = first; u < (uint64_t)first + count; u++) {
		snprintf(name, sizeof(name), "%u", (unsigned)u);
		int fd = openat(dir, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
				0600);
		if (fd < 0)
			return sc__err(err, -errno, "open %s/%s", LOCK_DIR, name);
		struct stat st;
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			close(fd);
			return sc__err(err, -EPERM, "%s/%s is not a regular file", LOCK_DIR, name);
		}
		if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
			if (template_lives(fd)) {
				close(fd); /* its host died; the template and cells have not yet */
				continue;
			}
			out->uid = (uid_t)u;
			out->gid = (gid_t)u;
			out->lock_fd = fd;
			return 0;
		}
		int e = errno;
		close(fd);
		if (e != EWOULDBLOCK)
			return sc__err(err, -e, "lock %s/%s", LOCK_DIR, name);
	}
	return sc__err(err, SNAPCELL_E_EXHAUSTED,
		       "no free outside uid: all %u of %u..%u are held by live sandboxes (see "
		       "snapcell_config_set_uid_range)",
		       (unsigned)count, (unsigned)first, (unsigned)(first + count - 1));
}

/* *host_lacks says the failure is the host's, not a lock's: the range is not mapped, or the
 * lock directory cannot be made. A directory or lock file someone else made is not that. */
static int choose(uint32_t first, uint32_t count, struct sc_outside_ids *out, bool *host_lacks,
		  struct snapcell_error *err)
{
	uint32_t n = count ? count : 1;
	*host_lacks = true;
	if (!ns_maps("/proc/self/uid_map", first, n) || !ns_maps("/proc/self/gid_map", first, n))
		return sc__err(err, SNAPCELL_E_INVAL,
			       "outside uid range %u:%u is not mapped in this process's user "
			       "namespace (/proc/self/uid_map, gid_map)",
			       (unsigned)first, (unsigned)count);
	if (count == 0) {
		*out = (struct sc_outside_ids){first, first, -1};
		return 0;
	}
	int dir = open_lock_dir(err);
	if (dir < 0) {
		*host_lacks = dir != -EPERM && dir != -ELOOP && dir != -ENOTDIR;
		return dir;
	}
	*host_lacks = false;
	int rc = take_uid(dir, first, count, out, err);
	close(dir);
	return rc;
}

int sc__ids_take(uint32_t first, uint32_t count, bool strict, struct sc_outside_ids *out,
		 struct snapcell_error *err)
{
	*out = (struct sc_outside_ids){geteuid(), getegid(), -1};
	if (out->uid != 0)
		return 0;
	struct snapcell_error why = {0};
	bool host_lacks;
	int rc = choose(first, count, out, &host_lacks, &why);
	if (rc < 0 && !strict && host_lacks) {
		/* The default range on a host that cannot give it: the shared uid of 0.2.0, or,
		 * in a user namespace that maps not even that (root of `unshare -r`), root's own
		 * ids, the only ones it has (chown and setresuid to an unmapped id fail). */
		if (ns_maps("/proc/self/uid_map", SC_ROOT_SANDBOX_UID, 1) &&
		    ns_maps("/proc/self/gid_map", SC_ROOT_SANDBOX_GID, 1))
			*out = (struct sc_outside_ids){SC_ROOT_SANDBOX_UID, SC_ROOT_SANDBOX_GID,
						       -1};
		else
			*out = (struct sc_outside_ids){geteuid(), getegid(), -1};
		return 0;
	}
	if (rc < 0 && err)
		*err = why;
	return rc;
}

int sc__ids_bind(struct sc_outside_ids *ids, pid_t template)
{
	unsigned long long start;
	if (ids->lock_fd < 0)
		return 0;
	/* A template already gone (a program that is no helper exits at once) runs nothing as
	 * the uid: nothing to record, and the handshake says what went wrong. */
	if (!proc_live(template, &start))
		return 0;
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%d %llu\n", (int)template, start);
	if (ftruncate(ids->lock_fd, 0) < 0 || pwrite(ids->lock_fd, buf, (size_t)n, 0) != n)
		return -errno;
	return 0;
}

void sc__ids_release(struct sc_outside_ids *ids)
{
	if (ids->lock_fd >= 0)
		close(ids->lock_fd);
	ids->lock_fd = -1;
}
