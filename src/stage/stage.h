/* Files in and out of cells: staging /input from a workspace and mounts (stage.c), the tree
 * signature that keys cached sandboxes (signature.c), collecting /output (collect.c), and
 * moving and copying a session family's /tmp trees (tree.c).
 * All of it walks trees with directory descriptors and never follows a link. */
#ifndef SC_STAGE_H
#define SC_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapcell.h"

struct sc_collect_caps {
	uint64_t files, file_bytes, total_bytes, depth, path_bytes;
	/* The walk's own bounds (0: none): entries visited, and a deadline (sc__now_us clock).
	 * A tree that stands still never needs more visits than it has inodes; a live writer
	 * renaming a directory onto names still to be visited would make the walk see it again
	 * and again. Past either, the walk stops with SNAPCELL_OUTPUT_HIT_WALK. */
	uint64_t visits, deadline_us;
};

/* Collects the regular files under dirfd into res (artifacts, skipped, output_limits_hit).
 * The caller guarantees no process of the cell can still write there, or accepts that a
 * racing writer only changes what is collected (every open is checked, never followed) and
 * bounds the walk with caps->visits and caps->deadline_us. */
int sc__collect(int dirfd, const struct sc_collect_caps *caps, struct snapcell_result *res);

/* Empties a directory (a session's /output between runs) within the deadline. */
int sc__empty_dir(int dirfd, uint64_t deadline_us);

/* tree.c, a session family's /tmp trees: renames every entry of from into to (one
 * filesystem); copies the tree under src into the empty directory dst (owned by the
 * caller's file-system ids), -ELOOP past SC_TREE_COPY_DEPTH levels. 0 or -errno. */
#define SC_TREE_COPY_DEPTH 32
int sc__tree_move_entries(int from, int to);
int sc__tree_copy(int src, int dst);

void sc__artifacts_free(struct snapcell_result *res);

/* One mount to stage: a resolved host path and its normalised place (/input/...). */
struct sc_stage_mount {
	const char *host_path;
	const char *mount_path;
};

/* Copies the workspace's children (workspace may be NULL) and then each mount, later ones
 * winning, under root. Links are left out, or with reject_links an SNAPCELL_E_INVAL. */
int sc__stage_input(const char *workspace, const struct sc_stage_mount *mounts, size_t n_mounts,
		    bool reject_links, int root, struct snapcell_error *err);

/* A media type for a file name, from its extension; never NULL. */
const char *sc__media_type(const char *name);

#endif
