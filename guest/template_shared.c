/* The template's shared mappings that cells could write: one left by a preload or the warm-up
 * (mmap.mmap(-1, n) is MAP_SHARED; so are multiprocessing's heap, a memfd, /dev/zero mapped
 * shared) is, after the fork, the same pages in every cell, one run writing what another
 * user's run reads. Only the set-up bytes (template.h), which each cell unmaps before code
 * runs, are meant to be shared. This file finds the others in the template's maps; it does not
 * say where they came from (python.c names the preload or the warm-up). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "guest.h"
#include "util/util.h"

#define LINE_MAX_BYTES 8192 /* a maps line: addresses, flags, and a path of up to PATH_MAX */

/* The template's maps, opened once (a read from the start shows them as they are then):
 * through the sandbox's procfs (SC_GUEST_PROC_FD: the root has no /proc), else through its own
 * directory in the host's procfs (SC_GUEST_SELF_FD, where the kernel refused a procfs of the
 * sandbox's), closed at once (through its ".." the host's processes are in reach), else /proc
 * (the rlimits level); -1 when none. */
static int maps_fd = -1;
/* The set-up bytes' mapping, exactly: code that maps a larger shared region over it (same
 * start) would leave each cell, which unmaps only the set-up bytes, the rest shared. */
static uintptr_t allowed, allowed_end;

static bool is_procfs(int fd)
{
	struct statfs fs;
	return fstatfs(fd, &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

void sc_shared_maps_init(const volatile void *set_up, size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	allowed = (uintptr_t)set_up;
	allowed_end = allowed + (len + page - 1) / page * page;
	if (is_procfs(SC_GUEST_PROC_FD)) {
		if (fcntl(SC_GUEST_PROC_FD, F_SETFD, FD_CLOEXEC) == 0)
			maps_fd = openat(SC_GUEST_PROC_FD, "self/maps", O_RDONLY | O_CLOEXEC);
	} else if (is_procfs(SC_GUEST_SELF_FD)) {
		maps_fd = openat(SC_GUEST_SELF_FD, "maps", O_RDONLY | O_CLOEXEC);
		close(SC_GUEST_SELF_FD);
	} else {
		int dir = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (dir >= 0 && is_procfs(dir))
			maps_fd = openat(dir, "self/maps", O_RDONLY | O_CLOEXEC);
		if (dir >= 0)
			close(dir);
	}
}

/* Whether a cell could write the shared mapping [start, end) with flags perms ("r--s"): it is
 * writable, or it may be made so (VM_MAYWRITE: anonymous shared memory, a file opened for
 * writing), which only mprotect itself tells without smaps' page walk. The template is
 * single-threaded, so the brief change of protection is seen by nothing. A file opened
 * read-only and mapped shared (glibc's gconv cache) is not. */
static bool cell_writable(uintptr_t start, uintptr_t end, const char *perms)
{
	if (perms[1] == 'w')
		return true;
	int prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[2] == 'x' ? PROT_EXEC : 0);
	/* Where W+X is refused (prctl PR_SET_MDWE, which the cells inherit), write alone, which a
	 * cell may ask for, is not: ask for it too. A mapping that then cannot get its exec back
	 * is refused or kept from the cells anyway. */
	if (mprotect((void *)start, end - start, prot | PROT_WRITE) < 0 &&
	    (!(prot & PROT_EXEC) ||
	     mprotect((void *)start, end - start, (prot & ~PROT_EXEC) | PROT_WRITE) < 0))
		return false;
	mprotect((void *)start, end - start, prot);
	return true;
}

/* One maps line: whether it is a shared mapping cells could write, other than the set-up
 * bytes; then dropped from the cells (MADV_DONTFORK) when drop, else described in what. */
static bool line_found(char *line, bool drop, char *what, size_t what_len)
{
	unsigned long start, end;
	char perms[5];
	int path_at = 0;
	if (sscanf(line, "%lx-%lx %4s %*s %*s %*s %n", &start, &end, perms, &path_at) < 3 ||
	    strlen(perms) != 4 || perms[3] != 's' || (start == allowed && end == allowed_end) ||
	    end <= start || !cell_writable(start, end, perms))
		return false;
	if (drop)
		return madvise((void *)start, end - start, MADV_DONTFORK) == 0;
	const char *path = path_at > 0 && line[path_at] ? line + path_at : "no file";
	snprintf(what, what_len, "%lu bytes at 0x%lx, %s", end - start, start, path);
	return true;
}

int sc_shared_maps_scan(bool drop, char *what, size_t what_len)
{
	if (maps_fd < 0)
		return -ENOENT;
	int fd = maps_fd;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return -errno;
	static char buf[LINE_MAX_BYTES + 1];
	size_t have = 0;
	int found = 0, rc = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, LINE_MAX_BYTES - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		have += (size_t)n;
		buf[have] = 0;
		char *line = buf, *nl;
		while ((nl = strchr(line, '\n')) || (n == 0 && *line)) {
			if (nl)
				*nl = 0;
			if (line_found(line, drop, what, what_len) && ++found && !drop)
				break;
			line = nl ? nl + 1 : line + strlen(line);
		}
		if (n == 0 || (found && !drop))
			break;
		have -= (size_t)(line - buf);
		memmove(buf, line, have);
		if (have == LINE_MAX_BYTES) { /* a line longer than any maps line */
			rc = -EPROTO;
			break;
		}
	}
	return rc < 0 ? rc : found;
}
