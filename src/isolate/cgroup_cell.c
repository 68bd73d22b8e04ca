/* Memory cgroups, helper side: the template makes one cgroup per cell below the sandbox's
 * (which the host made and handed to the sandbox's uid: src/isolate/cgroup.c), limits it to
 * the cell's memory, and the cell moves itself in as its first act after fork, before it
 * touches a page of its own. Everything the cell and its processes then cost is charged
 * there: copy-on-write pages, page tables, kernel memory (cgroup v1 feeds kernel memory into
 * the memory counter), swap (memsw, where swap accounting exists). The host reads the peak and
 * removes the cgroup once the cell is gone. */
#define _GNU_SOURCE
#include "guest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
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
	snprintf(path, sizeof(path), "%s/cgroup.procs", name);
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

int sc__cgroup_cell_enter(int procs_fd)
{
	/* "0" is the writer itself; v1 allows it because the opener (the template) and the
	 * cell are the same uid. */
	int rc = sc__write_all(procs_fd, "0", 1);
	close(procs_fd);
	return rc;
}

void sc__cgroup_cell_drop(int sandbox_fd, uint32_t id)
{
	char name[16];
	snprintf(name, sizeof(name), "%u", id);
	unlinkat(sandbox_fd, name, AT_REMOVEDIR);
}
