/* Memory cgroups, helper side: the template makes one cgroup per cell below the sandbox's
 * (which the host made and handed to the sandbox's uid: src/isolate/cgroup.c), limits it to
 * the cell's memory, and the cell moves itself in as its first act after fork, before it
 * touches a page of its own. Everything the cell and its processes then cost is charged
 * there: copy-on-write pages, page tables, kernel memory (cgroup v1 feeds kernel memory into
 * the memory counter), swap (memsw, where swap accounting exists). When it reaps the cell the
 * template reads the cgroup's figures for the exit record and removes it; the host reads them
 * itself for a run that ended at the cell's DONE report, while the cell may still live. */
#define _GNU_SOURCE
#include "guest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/util.h"

static int write_at(int dir, const char *path, const char *text)
{
	int fd = openat(dir, path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = sc__write_all(fd, text, strlen(text));
	close(fd);
	return rc;
}

int sc__cgroup_cell_make(int sandbox_fd, uint32_t id, uint64_t limit_bytes)
{
	char name[16], path[64], limit[24];
	snprintf(name, sizeof(name), "%u", id);
	snprintf(limit, sizeof(limit), "%llu", (unsigned long long)limit_bytes);
	if (mkdirat(sandbox_fd, name, 0755) < 0 && errno != EEXIST)
		return -errno;
	/* The memory limit first: memsw (memory + swap) may never be below it. */
	snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", name);
	int rc = write_at(sandbox_fd, path, limit);
	snprintf(path, sizeof(path), "%s/memory.memsw.limit_in_bytes", name);
	int sw = rc == 0 ? write_at(sandbox_fd, path, limit) : 0;
	if (rc == 0 && sw < 0 && sw != -ENOENT) /* no swap accounting: nothing to bound */
		rc = sw;
	/* tasks, not cgroup.procs: the cell is single-threaded when it moves, so moving its
	 * thread moves the process, and a thread moving itself skips the kernel's global
	 * threadgroup lock, whose grace-period wait made a move cost 100-800 us, against 20. */
	snprintf(path, sizeof(path), "%s/tasks", name);
	int fd = rc < 0 ? -1 : openat(sandbox_fd, path, O_WRONLY | O_CLOEXEC);
	if (rc == 0 && fd < 0)
		rc = -errno;
	int high = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10);
	if (fd >= 0)
		close(fd);
	if (rc == 0 && high < 0)
		rc = -EMFILE;
	if (rc < 0) {
		unlinkat(sandbox_fd, name, AT_REMOVEDIR);
		return rc;
	}
	return high;
}

int sc__cgroup_cell_enter(int tasks_fd)
{
	/* "0" is the writer itself; v1 allows it because the opener (the template) and the
	 * cell are the same uid. */
	int rc = sc__write_all(tasks_fd, "0", 1);
	close(tasks_fd);
	return rc;
}

/* The number after key in a cgroup file (the file's first number for key NULL). */
static int read_number_at(int dir, const char *path, const char *key, uint64_t *out)
{
	char buf[512];
	int rc = sc__read_file_at(dir, path, buf, sizeof(buf));
	const char *at = key ? strstr(buf, key) : buf;
	if (rc >= 0 && !at)
		rc = -ENODATA;
	*out = rc >= 0 ? strtoull(at + (key ? strlen(key) : 0), NULL, 10) : 0;
	return rc < 0 ? rc : 0;
}

int sc__cgroup_cell_release(int sandbox_fd, uint32_t id, uint64_t *peak, uint64_t *oom_kills)
{
	char path[64];
	snprintf(path, sizeof(path), "%u/memory.max_usage_in_bytes", id);
	int rc = read_number_at(sandbox_fd, path, NULL, peak);
	snprintf(path, sizeof(path), "%u/memory.oom_control", id);
	if (rc == 0)
		rc = read_number_at(sandbox_fd, path, "oom_kill ", oom_kills);
	/* Empty now; one that is not goes with the sandbox's cgroup. */
	snprintf(path, sizeof(path), "%u", id);
	unlinkat(sandbox_fd, path, AT_REMOVEDIR);
	return rc;
}

int sc__cgroup_cell_rearm(int sandbox_fd, uint32_t id, int fds[2])
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "%u/memory.oom_control", id);
	int rc = sc__read_kept_at(sandbox_fd, path, &fds[0], buf, sizeof(buf));
	const char *at = rc < 0 ? NULL : strstr(buf, "oom_kill ");
	if (!at)
		return rc < 0 ? rc : -ENODATA;
	if (strtoull(at + strlen("oom_kill "), NULL, 10))
		return -EDQUOT;
	/* Each write is one of the kernel's: the peak set back to the usage now. */
	snprintf(path, sizeof(path), "%u/memory.max_usage_in_bytes", id);
	if (fds[1] < 0 && (fds[1] = openat(sandbox_fd, path, O_WRONLY | O_CLOEXEC)) < 0)
		return -errno;
	return pwrite(fds[1], "0", 1, 0) == 1 ? 0 : -errno;
}

void sc__cgroup_cell_drop(int sandbox_fd, uint32_t id)
{
	char name[16];
	snprintf(name, sizeof(name), "%u", id);
	unlinkat(sandbox_fd, name, AT_REMOVEDIR);
}
