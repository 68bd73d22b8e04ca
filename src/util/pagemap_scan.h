/* What the reset in place needs from the kernel's uapi that the build machine's headers may
 * lack (Debian 12's are older than 6.7): PAGEMAP_SCAN and its arguments (<linux/fs.h>, 6.7),
 * PROCMAP_QUERY (<linux/fs.h>, 6.11), asynchronous userfaultfd write-protection
 * (<linux/userfaultfd.h>, 6.7). Values as the kernel defines them; used by guest/reset.c,
 * guest/counters.c and bench/reset_cell.c. */
#ifndef SC_UTIL_PAGEMAP_SCAN_H
#define SC_UTIL_PAGEMAP_SCAN_H

#include <linux/fs.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <sys/ioctl.h>

/* The kernel's uapi <linux/fs.h> since 6.7; the build machine's headers may be older. */
#ifndef PAGEMAP_SCAN
struct page_region {
	uint64_t start, end, categories;
};
struct pm_scan_arg {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN	      _IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_WP_MATCHING   (1ULL << 0)
#define PM_SCAN_CHECK_WPASYNC (1ULL << 1)
#define PAGE_IS_WPALLOWED     (1ULL << 0)
#define PAGE_IS_WRITTEN	      (1ULL << 1)
#define PAGE_IS_FILE	      (1ULL << 2)
#define PAGE_IS_PRESENT	      (1ULL << 3)
#endif
/* The kernel's uapi <linux/fs.h> since 6.11. */
#ifndef PROCMAP_QUERY
struct procmap_query {
	uint64_t size, query_flags, query_addr;
	uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define PROCMAP_QUERY			   _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#define PROCMAP_QUERY_VMA_READABLE	   0x01
#define PROCMAP_QUERY_VMA_WRITABLE	   0x02
#define PROCMAP_QUERY_VMA_EXECUTABLE	   0x04
#define PROCMAP_QUERY_VMA_SHARED	   0x08
#endif
/* The kernel's uapi <linux/userfaultfd.h> since 6.7. */
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1ULL << 15)
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

#endif
