/* Learned pre-faulting: which of the template's pages fresh runs touch, read from the cell of a
 * finished run, so the template's next parked cells fault those pages in while they wait
 * (guest/cell.c) and a run does not pay the faults (docs/performance.md).
 *
 * A cell shares the template's memory copy-on-write; the first write to a page copies it, and
 * the first touch of a code page maps it. In /proc/PID/pagemap a copied page of the cell is
 * present and mapped only there (bit 56), a mapped code page present. After a learning run's
 * DONE the cell lingers (the run loop does not shut the frame socket), so its address space is
 * still there to read; the template's /proc/PID/maps says which ranges are the template's
 * (what the cell made itself is never learned). The list only names pages of the template's
 * own mappings, never their contents: a cell that pre-faults copies its own pages, and nothing
 * writable is shared. It does carry what earlier runs touched into later cells' timing, like
 * the page cache does (docs/security.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core.h"
#include "rpc/control.h"
#include "util/buf.h"
#include "util/util.h"

#define PAGE 4096u
/* Learn from the first runs, then from one in this many (a workload that changes). */
#define LEARN_FIRST 8
#define LEARN_EVERY 64
/* What a parked cell may be asked to copy (memory it holds privately while parked) and to
 * map; a run that touched more than this is not learned from. */
#define MAX_WRITE_PAGES 2048u /* 8 MiB */
#define MAX_READ_PAGES	8192u
/* Address space read per learning run, in pages (8 bytes of pagemap each). */
#define SCAN_MAX_PAGES (1u << 18)
#define CHUNK	       512

/* One learner thread per sandbox, started with its first learning run, reads one lingering
 * cell at a time and then retires it, so no run waits for the reading. */
struct sc_prefault {
	pthread_mutex_t lock;
	pthread_cond_t wake;
	pthread_t thread;
	bool started, busy, stop;
	struct sc_cell cell; /* the one handed over, while busy */
	unsigned long runs;
	uint64_t *pages; /* sorted page addresses; bit 0 set for a writable (copied) page */
	size_t n_pages;
};

int sc__prefault_new(struct snapcell_sandbox *sb)
{
	sb->prefault = calloc(1, sizeof(*sb->prefault));
	if (!sb->prefault)
		return -ENOMEM;
	pthread_mutex_init(&sb->prefault->lock, NULL);
	pthread_cond_init(&sb->prefault->wake, NULL);
	return 0;
}

void sc__prefault_free(struct snapcell_sandbox *sb)
{
	struct sc_prefault *pf = sb->prefault;
	if (!pf)
		return;
	pthread_mutex_lock(&pf->lock);
	pf->stop = true;
	pthread_cond_signal(&pf->wake);
	pthread_mutex_unlock(&pf->lock);
	if (pf->started)
		pthread_join(pf->thread, NULL);
	pthread_cond_destroy(&pf->wake);
	pthread_mutex_destroy(&pf->lock);
	free(pf->pages);
	free(pf);
	sb->prefault = NULL;
}

bool sc__prefault_wants(struct snapcell_sandbox *sb, uint32_t cell_id)
{
	struct sc_prefault *pf = sb->prefault;
	/* Cell 0 is the one the template parks before its warm-up (guest/template.c, serve):
	 * its run touches what the later cells' runs find preloaded, and the warm-up's writes
	 * would make the template's pages its own alone, which reads as written by the run. */
	if (cell_id == 0 || !sb->cells.ops->pid)
		return false;
	pthread_mutex_lock(&pf->lock);
	unsigned long n = ++pf->runs;
	bool idle = !pf->busy && !pf->stop;
	pthread_mutex_unlock(&pf->lock);
	return idle && (n <= LEARN_FIRST || n % LEARN_EVERY == 0);
}

struct page_list {
	uint64_t *v;
	size_t n, cap, n_write, n_read;
};

static int push(struct page_list *l, uint64_t page)
{
	if ((page & 1) ? ++l->n_write > MAX_WRITE_PAGES : ++l->n_read > MAX_READ_PAGES)
		return -E2BIG;
	int rc = SC_ARRAY_RESERVE(l->v, l->cap, l->n + 1, MAX_WRITE_PAGES + MAX_READ_PAGES);
	if (rc < 0)
		return rc;
	l->v[l->n++] = page;
	return 0;
}

/* The pages of [start, end) the cell touched, from its pagemap. */
static int scan_range(int pagemap, uint64_t start, uint64_t end, bool write, struct page_list *l)
{
	uint64_t entries[CHUNK];
	for (uint64_t at = start; at < end;) {
		size_t n = (size_t)((end - at) / PAGE < CHUNK ? (end - at) / PAGE : CHUNK);
		ssize_t got = pread(pagemap, entries, n * 8, (off_t)(at / PAGE * 8));
		if (got <= 0)
			return got < 0 ? -errno : -ESRCH; /* the cell is gone */
		for (size_t i = 0; i < (size_t)got / 8; i++) {
			bool present = entries[i] >> 63 & 1, exclusive = entries[i] >> 56 & 1;
			int rc = 0;
			if (present && (!write || exclusive))
				rc = push(l, (at + i * PAGE) | (write ? 1 : 0));
			if (rc < 0)
				return rc;
		}
		at += (uint64_t)got / 8 * PAGE;
	}
	return 0;
}

/* The template's private, readable mappings (not the kernel's [vdso] and friends), each read
 * in the cell's pagemap. */
static int scan(pid_t template, pid_t cell, struct page_list *l)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)template);
	FILE *maps = fopen(path, "re");
	snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)cell);
	int pagemap = open(path, O_RDONLY | O_CLOEXEC);
	int rc = maps && pagemap >= 0 ? 0 : -errno;
	uint64_t budget = SCAN_MAX_PAGES;
	while (rc == 0 && maps && fgets(line, sizeof(line), maps)) {
		unsigned long long start, end;
		char perms[8];
		int name_at = 0;
		if (sscanf(line, "%llx-%llx %7s %*s %*s %*s %n", &start, &end, perms, &name_at) <
			    3 ||
		    perms[0] != 'r' || perms[3] != 'p' || !strncmp(line + name_at, "[v", 2))
			continue;
		uint64_t pages = (end - start) / PAGE;
		if (pages > budget)
			break;
		budget -= pages;
		rc = scan_range(pagemap, start, end, perms[1] == 'w', l);
	}
	if (maps)
		fclose(maps);
	if (pagemap >= 0)
		close(pagemap);
	return rc;
}

/* The union of two sorted lists (a page seen as both keeps its writable bit), or NULL. */
static uint64_t *merge(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, size_t *n)
{
	uint64_t *out = malloc((na + nb + 1) * sizeof(*out));
	size_t i = 0, j = 0, k = 0;
	while (out && (i < na || j < nb)) {
		uint64_t x = i < na ? a[i] & ~1ull : UINT64_MAX,
			 y = j < nb ? b[j] & ~1ull : UINT64_MAX;
		uint64_t bits =
			(x <= y && i < na ? a[i] & 1 : 0) | (y <= x && j < nb ? b[j] & 1 : 0);
		out[k++] = (x < y ? x : y) | bits;
		i += x <= y, j += y <= x;
	}
	*n = k;
	return out;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Runs of neighbouring pages of one kind, in a memfd for the template. */
static int ranges_memfd(const uint64_t *pages, size_t n)
{
	struct sc_prefault_range *r = calloc(SC_PREFAULT_MAX_RANGES, sizeof(*r));
	size_t k = 0;
	for (size_t i = 0; r && i < n; i++) {
		uint64_t addr = pages[i] & ~1ull;
		uint32_t write = pages[i] & 1;
		if (k && r[k - 1].write == write &&
		    r[k - 1].start + (uint64_t)r[k - 1].pages * PAGE == addr)
			r[k - 1].pages++;
		else if (k < SC_PREFAULT_MAX_RANGES)
			r[k++] = (struct sc_prefault_range){addr, 1, write};
	}
	int fd = r ? memfd_create("snapcell-prefault", MFD_CLOEXEC) : -1;
	if (fd >= 0 && write(fd, r, k * sizeof(*r)) != (ssize_t)(k * sizeof(*r))) {
		close(fd);
		fd = -1;
	}
	free(r);
	return fd;
}

/* Tells the template the list in fd (ranges_memfd's), with no lock held: a template that reads
 * slowly may block the send. A failure only leaves cells without the newest list. */
static void send_list(struct snapcell_sandbox *sb, int fd)
{
	if (fd < 0)
		return;
	struct sc_ctl_msg m = {.type = SC_CTL_PREFAULT};
	pthread_mutex_lock(&sb->lock);
	bool broken = sb->broken;
	pthread_mutex_unlock(&sb->lock);
	if (!broken)
		sc__ctl_send(sb->ctl, &m, &fd, 1);
	close(fd);
}

static void learn(struct snapcell_sandbox *sb, const struct sc_cell *cell)
{
	struct sc_prefault *pf = sb->prefault;
	pid_t template = sc__pidfd_pid(sb->helper_pidfd), pid = sb->cells.ops->pid(cell);
	struct page_list seen = {0};
	if (template <= 0 || pid <= 0 || scan(template, pid, &seen) < 0) {
		free(seen.v);
		return; /* nothing learned from this run */
	}
	qsort(seen.v, seen.n, sizeof(*seen.v), cmp_u64);
	pthread_mutex_lock(&pf->lock);
	size_t n;
	uint64_t *all = merge(pf->pages, pf->n_pages, seen.v, seen.n, &n);
	size_t n_write = 0;
	for (size_t i = 0; all && i < n; i++)
		n_write += all[i] & 1;
	bool grew = all && n != pf->n_pages && n_write <= MAX_WRITE_PAGES &&
		    n - n_write <= MAX_READ_PAGES;
	int list = -1;
	if (grew) {
		free(pf->pages);
		pf->pages = all, pf->n_pages = n;
		list = ranges_memfd(all, n);
	} else {
		free(all);
	}
	pthread_mutex_unlock(&pf->lock);
	send_list(sb, list);
	free(seen.v);
}

static void *learner(void *arg)
{
	struct snapcell_sandbox *sb = arg;
	struct sc_prefault *pf = sb->prefault;
	pthread_mutex_lock(&pf->lock);
	for (;;) {
		while (!pf->busy && !pf->stop)
			pthread_cond_wait(&pf->wake, &pf->lock);
		if (!pf->busy)
			break;
		struct sc_cell cell = pf->cell;
		bool stop = pf->stop; /* read under the lock: sc__prefault_free sets it */
		pthread_mutex_unlock(&pf->lock);
		if (!stop)
			learn(sb, &cell);
		sc__sandbox_retire_cell(sb, &cell);
		pthread_mutex_lock(&pf->lock);
		pf->busy = false;
	}
	pthread_mutex_unlock(&pf->lock);
	return NULL;
}

void sc__prefault_learn(struct snapcell_sandbox *sb, struct sc_cell *cell)
{
	struct sc_prefault *pf = sb->prefault;
	pthread_mutex_lock(&pf->lock);
	if (!pf->busy && !pf->stop &&
	    (pf->started || sc__thread_start(&pf->thread, NULL, learner, sb) == 0)) {
		pf->started = true;
		pf->cell = *cell;
		pf->busy = true;
		pthread_cond_signal(&pf->wake);
		cell = NULL;
	}
	pthread_mutex_unlock(&pf->lock);
	if (cell)
		sc__sandbox_retire_cell(sb, cell);
}
