/* The isolation mechanisms the helper applies, one per file: the read-only root (rootfs.c),
 * the seccomp policy (seccomp.c), rlimits (rlimits.c), capabilities and no_new_privs
 * (caps.c). They apply mechanisms; the order is the caller's (guest/template.c and
 * guest/cell.c). Linked into the helper only, never into the host library. */
#ifndef SC_ISOLATE_GUEST_H
#define SC_ISOLATE_GUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "snapcell.h"

/* ---- rootfs.c (helper side) ---- */

#define SC_OUT_BASE	    "/.snapcell/out" /* where per-cell output dirs live inside the root */
#define SC_OUTPUT_INODES    131072	     /* files and directories a cell's /output may hold */
#define SC_PYTHON_PATH_BASE "/.snapcell/python" /* python_paths[i] appear at BASE/i */
/* The public CA bundle, at its Debian path; SSL_CERT_FILE names it in the cell. */
#define SC_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

/* A read-only bind: src is a host path or /proc/self/fd/N of a descriptor the host opened
 * (so the sandbox uid need not be able to walk to it); dst is the path inside the root. */
struct sc_bind {
	const char *src;
	const char *dst;
};

struct sc_rootfs {
	const char *base;    /* host directory the root tmpfs is mounted on */
	const char *out_dir; /* host directory bound at SC_OUT_BASE */
	const struct sc_bind *ro_binds;
	size_t n_ro_binds;
	/* The bound shared-library directory: /etc/alternatives links into it are copied. */
	const char *lib_dir;
	const char *hosts; /* lines for /etc/hosts after localhost's, or NULL */
	/* A certificate (PEM) the cells trust beyond the public bundle: SC_CA_BUNDLE is then a
	 * copy of the host's with this appended, not a bind. NULL for none. */
	const char *extra_ca;
};

/* Builds the minimal root and pivots into it; afterwards the host filesystem is gone from
 * this mount namespace. */
int sc__rootfs_build(const struct sc_rootfs *fs, struct snapcell_error *err);

/* Per cell, in the cell's own mount namespace: a fresh size-capped /tmp (also at /dev/shm),
 * SC_OUT_BASE/<name> at /output, and SC_OUT_BASE detached so no other cell's output is
 * reachable. */
int sc__rootfs_enter_cell(const char *out_name, uint64_t tmp_bytes, struct snapcell_error *err);

/* ---- seccomp.c ---- */

struct sc_bpf {
	void *filter; /* struct sock_filter[] */
	unsigned short len;
};

/* Compiles the cell policy once (in the template), so cells only install it. With network,
 * cells may make TCP sockets (AF_INET, AF_INET6) and connect them; in the cell's namespace
 * every connection reaches the host's egress gate. Never bind, listen or accept (so cells
 * cannot reach each other), never UDP, raw, netlink or packet sockets. */
int sc__seccomp_compile(struct sc_bpf *out, bool network, struct snapcell_error *err);
int sc__seccomp_install(const struct sc_bpf *bpf);
void sc__seccomp_free(struct sc_bpf *bpf);

/* ---- rlimits.c ---- */

struct sc_rlimits {
	uint64_t memory_bytes;
	uint64_t cpu_ms;
	uint64_t processes;
	uint64_t file_bytes;
	uint64_t open_files;
};

int sc__rlimits_apply(const struct sc_rlimits *lim, struct snapcell_error *err);

/* ---- caps.c ---- */

/* In the template, once: locked securebits (root inside cannot regain capabilities), empty
 * bounding and ambient sets, no_new_privs. Inherited by every cell; effective capabilities
 * stay. */
int sc__caps_lock(struct snapcell_error *err);

/* In each cell: clears the effective, permitted and inheritable sets. */
int sc__caps_clear(struct snapcell_error *err);

#endif
