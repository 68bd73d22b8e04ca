/* Memory cgroups, host side: a cgroup v1 memory controller directory per sandbox, made below
 * the cgroup this process already runs in and never elsewhere, owned by the sandbox's outside
 * uid so its template can make one child per cell (src/isolate/cgroup_cell.c). The kernel then
 * charges everything a cell costs (its pages, page tables and kernel memory) to its cgroup,
 * bounds it at the memory limit and keeps the peak, which the host reports.
 *
 * Only v1: on the machines we target the cgroup v2 hierarchy has no memory controller, and
 * where it has one a process cannot enable it for children of the cgroup it is itself a member
 * of (no internal processes), which would mean moving the caller. Needs write access to the
 * caller's own memory cgroup: root, or a subtree chowned to the caller.
 *
 * Names: snapcell-<pid namespace>-<pid>-<start time>-<n>, so a host process that died without
 * freeing its sandboxes (its template exits with it, and its cells) is recognised by the next
 * sandbox made below the same cgroup, which removes what it left (sc__cgroup_reap_stale). */
#define _GNU_SOURCE
#include "host.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"

#define REAP_MAX	 64
#define REAP_DEADLINE_MS 1000
#define NAME_PREFIX	 "snapcell-"

/* This process's cgroup in the v1 hierarchy that has the memory controller, from
 * /proc/self/cgroup ("4:memory:/a/b" or "4:cpu,memory:/a/b"). */
static int own_memory_cgroup(char *out, size_t len)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	if (!f)
		return -errno;
	char line[PATH_MAX + 64];
	int rc = -ENOENT;
	while (rc < 0 && fgets(line, sizeof(line), f)) {
		char *ctrl = strchr(line, ':'), *path = ctrl ? strchr(ctrl + 1, ':') : NULL;
		if (!path)
			continue;
		*path++ = 0;
		path[strcspn(path, "\n")] = 0;
		for (char *save = NULL, *c = strtok_r(ctrl + 1, ",", &save); c;
		     c = strtok_r(NULL, ",", &save))
			if (!strcmp(c, "memory") && snprintf(out, len, "%s", path) < (int)len)
				rc = 0;
	}
	fclose(f);
	return rc;
}

/* Where the v1 memory hierarchy is mounted and the cgroup path its mount shows as its root
 * (not "/" inside some containers), from /proc/self/mountinfo. */
static int memory_mount(char *mnt, char *root, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	char line[2 * PATH_MAX];
	int rc = -ENOENT;
	while (rc < 0 && fgets(line, sizeof(line), f)) {
		char r[PATH_MAX], m[PATH_MAX], type[32], opts[512];
		char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", r, m) != 2 ||
		    sscanf(sep + 3, "%31s %*s %511s", type, opts) != 2 || strcmp(type, "cgroup"))
			continue;
		for (char *save = NULL, *o = strtok_r(opts, ",", &save); o;
		     o = strtok_r(NULL, ",", &save))
			if (!strcmp(o, "memory") && strlen(r) < len && strlen(m) < len) {
				strcpy(root, r), strcpy(mnt, m);
				rc = 0;
			}
	}
	fclose(f);
	return rc;
}

/* The directory of this process's own memory cgroup, or why there is none. */
static int own_directory(char *dir, size_t len, struct snapcell_error *err)
{
	char cg[PATH_MAX], mnt[PATH_MAX], root[PATH_MAX];
	if (own_memory_cgroup(cg, sizeof(cg)) < 0)
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "no cgroup v1 memory controller for this process");
	if (memory_mount(mnt, root, sizeof(mnt)) < 0)
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "the cgroup v1 memory hierarchy is not mounted");
	size_t rl = strcmp(root, "/") ? strlen(root) : 0;
	if (strncmp(cg, root, rl) || (cg[rl] && cg[rl] != '/'))
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "this process's memory cgroup %s is outside the mount", cg);
	if (snprintf(dir, len, "%s%s", mnt, cg + rl) >= (int)len)
		return sc__err(err, -ENAMETOOLONG, "memory cgroup path");
	return 0;
}

/* A process's start time in clock ticks (sc__proc_start_time), 0 when it is gone. */
static unsigned long long start_time(long pid)
{
	unsigned long long t;
	return sc__proc_start_time((pid_t)pid, &t) < 0 ? 0 : t;
}

static unsigned long long pid_namespace(void)
{
	struct stat st;
	return stat("/proc/self/ns/pid", &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* Removes a sandbox cgroup: its cells' children first. -EBUSY while a process is in one. */
static int remove_sandbox_dir(int parent, const char *name)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -ENOMEM;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (e->d_type == DT_DIR && strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
	closedir(d);
	return unlinkat(parent, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

/* Sandbox cgroups below dir whose host process is gone (a crash, a kill, _exit): their
 * templates and cells died with it, so they are empty and removable. Ones of another pid
 * namespace cannot be judged and are left; a live owner's are left; a cgroup that still holds
 * a process refuses removal anyway. Bounded: 64 removals, 1 s. */
static void reap_stale(int dir)
{
	int scan = dup(dir);
	DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
	if (!d) {
		if (scan >= 0)
			close(scan);
		return;
	}
	unsigned long long ns = pid_namespace();
	uint64_t deadline = sc__deadline_ms(REAP_DEADLINE_MS);
	unsigned reaped = 0;
	struct dirent *e;
	while (reaped < REAP_MAX && sc__now_us() < deadline && (e = readdir(d))) {
		unsigned long long owner_ns, start;
		long pid;
		unsigned n;
		if (e->d_type != DT_DIR || strncmp(e->d_name, NAME_PREFIX, strlen(NAME_PREFIX)) ||
		    sscanf(e->d_name + strlen(NAME_PREFIX), "%llu-%ld-%llu-%u", &owner_ns, &pid,
			   &start, &n) != 4 ||
		    owner_ns != ns || start_time(pid) == start)
			continue;
		if (remove_sandbox_dir(dir, e->d_name) == 0)
			reaped++;
	}
	closedir(d);
}

int sc__cgroup_sandbox_new(struct sc_cgroup *cg, uid_t uid, gid_t gid, struct snapcell_error *err)
{
	static atomic_uint counter;
	char dir[PATH_MAX];
	cg->dir_fd = -1;
	int rc = own_directory(dir, sizeof(dir), err);
	if (rc < 0)
		return rc;
	int parent SC_AUTO_CLOSE = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (parent < 0)
		return sc__err(err, -errno, "open memory cgroup %s", dir);
	reap_stale(parent);
	char name[96];
	snprintf(name, sizeof(name), NAME_PREFIX "%llu-%ld-%llu-%u", pid_namespace(),
		 (long)getpid(), start_time(getpid()), atomic_fetch_add(&counter, 1));
	if (snprintf(cg->path, sizeof(cg->path), "%s/%s", dir, name) >= (int)sizeof(cg->path))
		return sc__err(err, -ENAMETOOLONG, "memory cgroup path");
	if (mkdirat(parent, name, 0755) < 0)
		return errno == EACCES || errno == EPERM || errno == EROFS
			       ? sc__err(err, SNAPCELL_E_ISOLATION,
					 "memory cgroup %s: not writable by uid %u", dir,
					 (unsigned)geteuid())
			       : sc__err(err, -errno, "make a memory cgroup in %s", dir);
	/* The template (as uid) makes its cells' cgroups in it and moves each cell there; the
	 * sandbox's own files (its limit, its cgroup.procs) stay root's. */
	cg->dir_fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (cg->dir_fd < 0 || fchown(cg->dir_fd, uid, gid) < 0) {
		rc = sc__err(err, -errno, "prepare memory cgroup %s", cg->path);
		if (cg->dir_fd >= 0)
			close(cg->dir_fd);
		cg->dir_fd = -1;
		unlinkat(parent, name, AT_REMOVEDIR);
	}
	return rc;
}

/* The host does not move the template itself: writing another process's pid takes the
 * kernel's global threadgroup lock, whose RCU grace period cost 10-17 ms of a sandbox's start
 * on the development machine; a thread writing "0" (itself) skips it, as cells do. The
 * template is single-threaded, so its thread is the process. */
int sc__cgroup_tasks_open(const struct sc_cgroup *cg, struct snapcell_error *err)
{
	int fd = openat(cg->dir_fd, "tasks", O_WRONLY | O_CLOEXEC);
	return fd < 0 ? sc__err(err, -errno, "open %s/tasks", cg->path) : fd;
}

int sc__cgroup_cell_usage(const struct sc_cgroup *cg, uint32_t id, int kept[SC_CGROUP_USAGE_FILES],
			  struct sc_cgroup_usage *out)
{
	static const char *const files[SC_CGROUP_USAGE_FILES] = {"memory.max_usage_in_bytes",
								 "memory.oom_control"};
	char text[SC_CGROUP_USAGE_FILES][512];
	*out = (struct sc_cgroup_usage){0};
	for (int i = 0; i < SC_CGROUP_USAGE_FILES; i++) {
		char path[64];
		snprintf(path, sizeof(path), "%u/%s", id, files[i]);
		int rc = kept ? sc__read_kept_at(cg->dir_fd, path, &kept[i], text[i],
						 sizeof(text[i]))
			      : sc__read_file_at(cg->dir_fd, path, text[i], sizeof(text[i]));
		if (rc < 0)
			return rc;
	}
	out->peak_bytes = strtoull(text[0], NULL, 10);
	char *kills = strstr(text[1], "oom_kill ");
	out->oom_kills = kills ? strtoull(kills + 9, NULL, 10) : 0;
	return 0;
}

int sc__cgroup_cell_open(const struct sc_cgroup *cg, uint32_t id)
{
	char name[16];
	snprintf(name, sizeof(name), "%u", id);
	int fd = openat(cg->dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

void sc__cgroup_sandbox_free(struct sc_cgroup *cg)
{
	if (cg->dir_fd < 0)
		return;
	close(cg->dir_fd);
	cg->dir_fd = -1;
	char *slash = strrchr(cg->path, '/');
	*slash = 0;
	int parent = open(cg->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (parent >= 0) {
		remove_sandbox_dir(parent, slash + 1);
		close(parent);
	}
	*slash = '/';
}

int sc__cgroup_probe(char *detail, size_t len)
{
	struct snapcell_error err = {0};
	struct sc_cgroup cg;
	int rc = sc__cgroup_sandbox_new(&cg, geteuid(), getegid(), &err);
	if (rc < 0) {
		snprintf(detail, len, "%s", err.message);
		return rc;
	}
	char *slash = strrchr(cg.path, '/');
	snprintf(detail, len, "cgroup v1 memory below %.*s: a cgroup per cell",
		 (int)(slash - cg.path), cg.path);
	sc__cgroup_sandbox_free(&cg);
	return 0;
}
