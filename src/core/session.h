/* A session family's state, shared by session.c (sessions, snapshots, the family's turns) and
 * session_tmp.c (the /tmp trees of its sessions and snapshots). Nothing else includes it. */
#ifndef SC_CORE_SESSION_H
#define SC_CORE_SESSION_H

#include <pthread.h>

#include "core.h"

/* One parked cell turned into a session family: its anchor (pid 1, never runs code) and the
 * count of sessions and snapshots living in its namespace. */
struct sc_family {
	struct snapcell_sandbox *sb; /* NULL once the sandbox is freed; families_lock */
	struct sc_cell anchor;
	const struct sc_cell_ops *ops; /* its sandbox's mechanism, which made the anchor */
	pthread_mutex_t lock;	       /* guards writes to the anchor socket and refs */
	/* Taken while the family runs: runs, snapshots and branchings of its sessions take
	 * turns, each with its own /tmp in place and the rest of the family stopped (so the
	 * network namespace and socket they share carry one run's events at a time). A turn,
	 * not a mutex: a run paused for a decision keeps it, and the thread that resumes the
	 * run (any thread) gives it back. */
	pthread_mutex_t turn_lock;
	pthread_cond_t turn_free;
	bool turn_taken;
	bool turn_paused; /* by a run waiting for a decision: others are refused, not kept */
	unsigned refs;
	uint32_t next_tmp_id; /* for the next /tmp tree (lock); the first session's is 1 */
	/* Each session's and snapshot's /tmp: the root of the family's /tmp tmpfs, whose
	 * SC_TMP_LIVE the code sees at /tmp; the others' trees wait beside it as s<id>. */
	int tmp_root;
	uid_t uid; /* the sandbox's outside ids, which the trees belong to */
	gid_t gid;
	uint32_t tmp_owner;	  /* whose tree is in SC_TMP_LIVE; 0: nobody's (tmp_lock) */
	pthread_mutex_t tmp_lock; /* guards tmp_owner and the trees */
	struct sc_family *next;	  /* in the sandbox's list (families_lock) */
};

/* session.c: ends the family (its anchor's death takes everything of its cell); whether its
 * sandbox was freed. */
void sc__family_end(struct sc_family *f);
bool sc__family_orphaned(struct sc_family *f);

/* session_tmp.c: the family's /tmp trees, one per session and snapshot (by id), of which one
 * is in place (SC_TMP_LIVE) at a time. new_tmp_id: the id for a new tree. make: a new empty
 * tree for id, opened (the first session's). switch: puts id's tree in place; the family is
 * stopped. copy: makes to's tree a copy of from's, within the /tmp size limit. drop: removes
 * id's tree. 0 or a negative code; -EPERM when the thread's file-system ids cannot be the
 * sandbox's. */
uint32_t sc__family_new_tmp_id(struct sc_family *f);
int sc__family_tmp_make(struct sc_family *f, uint32_t id);
int sc__family_tmp_switch(struct sc_family *f, uint32_t id);
int sc__family_tmp_copy(struct sc_family *f, uint32_t from, uint32_t to);
void sc__family_tmp_drop(struct sc_family *f, uint32_t id);

#endif
