/* snapcell_probe_reuse: whether this kernel gives what reset in place needs (guest/reset.c,
 * guest/cell.c reuse_arm), asked once per process. The template finds the same out on its
 * own when a parking fails; asking here first lets a sandbox not arm its cells at all where a
 * cell could not even open its userfaultfd, and lets `snapcell doctor` say which mode runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.h"
#include "util/pagemap_scan.h"
#include "util/util.h"

static struct snapcell_reuse_probe answer;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* userfaultfd as a cell opens it, with asynchronous write-protection registered on a page of
 * ours as the template registers the cell's mappings, then PAGEMAP_SCAN over that page with
 * PM_SCAN_WP_MATCHING as a reset re-protects (without the userfaultfd, a plain scan: each
 * feature is answered on its own). detail: the first that failed and why. */
static void probe_memory(struct snapcell_reuse_probe *p)
{
	long page = sysconf(_SC_PAGESIZE);
	void *mem = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	if (mem == MAP_FAILED) {
		snprintf(p->detail, sizeof(p->detail), "mmap: %s", strerror(errno));
		return;
	}
	int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_WP_ASYNC};
	struct uffdio_register reg = {.range = {(uintptr_t)mem, (uint64_t)page},
				      .mode = UFFDIO_REGISTER_MODE_WP};
	if (uffd < 0)
		snprintf(p->detail, sizeof(p->detail), "userfaultfd: %s", strerror(errno));
	else if (ioctl(uffd, UFFDIO_API, &api) < 0)
		snprintf(p->detail, sizeof(p->detail),
			 "userfaultfd: no asynchronous write-protection (UFFD_FEATURE_WP_ASYNC, "
			 "Linux 6.7): %s",
			 strerror(errno));
	else if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0)
		snprintf(p->detail, sizeof(p->detail), "userfaultfd: write-protect register: %s",
			 strerror(errno));
	else
		p->userfaultfd_wp_async = true;
	*(volatile char *)mem = 1;
	struct page_region vec[1];
	struct pm_scan_arg a = {
		.size = sizeof(a),
		.flags = p->userfaultfd_wp_async ? PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC : 0,
		.start = (uintptr_t)mem,
		.end = (uintptr_t)mem + (uint64_t)page,
		.vec = (uintptr_t)vec,
		.vec_len = 1,
		.category_mask = PAGE_IS_WRITTEN,
		.return_mask = PAGE_IS_WRITTEN};
	int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	const char *failed = pagemap < 0			    ? "/proc/self/pagemap"
			     : ioctl(pagemap, PAGEMAP_SCAN, &a) < 0 ? "PAGEMAP_SCAN (Linux 6.7)"
								    : NULL;
	if (failed && !p->detail[0])
		snprintf(p->detail, sizeof(p->detail), "%s: %s", failed, strerror(errno));
	p->pagemap_scan = !failed;
	if (pagemap >= 0)
		close(pagemap);
	if (uffd >= 0)
		close(uffd); /* unregisters the page */
	munmap(mem, (size_t)page);
}

/* Whether the template may PTRACE_SEIZE its own children, as it seizes its cells: Yama's
 * ptrace_scope is the one setting that refuses a parent (2, admin only, and 3, never; the
 * template's capabilities are not the caller's, so 2 counts as no). A kernel without Yama
 * allows it. Read rather than tried: a fork here would run in the caller's process, which
 * may be large and multi-threaded. */
static void probe_ptrace(struct snapcell_reuse_probe *p)
{
	int scope = 0;
	FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
	if (f) {
		if (fscanf(f, "%d", &scope) != 1)
			scope = 3;
		fclose(f);
	}
	p->ptrace_child = scope < 2;
	if (!p->ptrace_child && !p->detail[0])
		snprintf(p->detail, sizeof(p->detail),
			 "kernel.yama.ptrace_scope is %d: a parent may not trace its child", scope);
}

/* PROCMAP_QUERY on this process's maps, as a reset asks it of a cell's. */
static void probe_procmap(struct snapcell_reuse_probe *p)
{
	int maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	struct procmap_query q = {.size = sizeof(q),
				  .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA};
	p->procmap_query = maps >= 0 && ioctl(maps, PROCMAP_QUERY, &q) == 0;
	if (maps >= 0)
		close(maps);
}

static void probe_once(void)
{
	probe_procmap(&answer);
	probe_memory(&answer);
	probe_ptrace(&answer);
	answer.available =
		answer.userfaultfd_wp_async && answer.pagemap_scan && answer.ptrace_child;
}

int snapcell_probe_reuse(struct snapcell_reuse_probe *out, struct snapcell_error *err)
{
	if (!out)
		return sc__err(err, SNAPCELL_E_INVAL, "probe_reuse: NULL out");
	pthread_once(&once, probe_once);
	*out = answer;
	return 0;
}

bool sc__reuse_available(void)
{
	struct snapcell_reuse_probe p;
	return snapcell_probe_reuse(&p, NULL) == 0 && p.available;
}

bool snapcell_sandbox_reuse(const struct snapcell_sandbox *sb)
{
	return sb && sc__sandbox_reuse(sb->cfg, sb->cells.level, sb->gate != NULL);
}

bool sc__sandbox_reuse(const struct snapcell_config *cfg, enum snapcell_isolation level, bool gate)
{
	/* Not at level rlimits (no pid namespace per cell), nor with network entries (the gate
	 * keeps per-cell state), nor on a kernel without what reuse needs. */
	return cfg->reuse && level >= SNAPCELL_ISOLATION_NAMESPACES && !gate &&
	       sc__reuse_available();
}

bool snapcell_config_reuse(const struct snapcell_config *cfg)
{
	return cfg && cfg->reuse;
}
