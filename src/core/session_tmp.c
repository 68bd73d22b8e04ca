/* A session family's /tmp trees (session.h): each session and snapshot has one, kept beside
 * the live one in the family's /tmp (a tmpfs at level namespaces, the cell's tmp/<id> at
 * rlimits) through the directory descriptor the anchor passed, and moved in and out of place
 * by renames, made and copied as the sandbox's user. Not the family's processes (session.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#define TMP_REMOVE_MS 5000

uint32_t sc__family_new_tmp_id(struct sc_family *f)
{
	pthread_mutex_lock(&f->lock);
	uint32_t id = f->next_tmp_id++;
	pthread_mutex_unlock(&f->lock);
	return id;
}

static void tree_name(char out[16], uint32_t id)
{
	snprintf(out, 16, "s%u", id);
}

static int open_at(struct sc_family *f, const char *name)
{
	int fd = openat(f->tmp_root, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The live tree, with the mode the code may have taken away from its /tmp given back. */
static int open_live(struct sc_family *f)
{
	fchmodat(f->tmp_root, SC_TMP_LIVE, 01777, 0);
	return open_at(f, SC_TMP_LIVE);
}

/* id's tree: SC_TMP_LIVE when id owns it; -ENOENT when it has none (an empty /tmp). */
static int tree_open(struct sc_family *f, uint32_t id)
{
	char name[16];
	tree_name(name, id);
	return id == f->tmp_owner ? open_live(f) : open_at(f, name);
}

/* What this thread makes or renames in the trees must belong to the sandbox user (the
 * kernel refuses to make a name there for an id the sandbox's user namespace does not map):
 * it works with that user's file-system ids, which setfsuid changes for the calling thread
 * only (and, from root, with its file capabilities dropped until they are set back), and then
 * sets back the ids the thread had, whatever they were: the caller's thread may have chosen
 * its own. Removals keep the caller's ids, so a root host can remove what the code made
 * read-only. */
struct fs_ids {
	uid_t uid;
	gid_t gid;
};

/* setfsuid and setfsgid return the previous id whether or not they changed it; an id no user
 * namespace maps ((uid_t)-1), which they always refuse, reads the current one. */
static bool fsuid_is(uid_t uid)
{
	return (uid_t)setfsuid((uid_t)-1) == uid;
}

static bool fsgid_is(gid_t gid)
{
	return (gid_t)setfsgid((gid_t)-1) == gid;
}

/* -EPERM, with the thread's ids unchanged, when the kernel refuses the switch (a caller
 * without CAP_SETUID or CAP_SETGID): nothing is then made with the caller's own ids. */
static int become_sandbox_user(const struct sc_family *f, struct fs_ids *saved)
{
	saved->gid = (gid_t)setfsgid(f->gid);
	if (!fsgid_is(f->gid))
		return -EPERM;
	saved->uid = (uid_t)setfsuid(f->uid);
	if (fsuid_is(f->uid))
		return 0;
	setfsgid(saved->gid);
	return -EPERM;
}

/* 0, or -EPERM when the thread's ids could not be set back. */
static int restore_ids(const struct fs_ids *saved)
{
	setfsuid(saved->uid);
	setfsgid(saved->gid);
	return fsuid_is(saved->uid) && fsgid_is(saved->gid) ? 0 : -EPERM;
}

static int move_entries(const struct sc_family *f, int from, int to)
{
	struct fs_ids saved;
	int rc = become_sandbox_user(f, &saved);
	if (rc < 0)
		return rc;
	rc = sc__tree_move_entries(from, to);
	int back = restore_ids(&saved);
	return rc < 0 ? rc : back;
}

/* A new empty tree for id (which owns nothing) beside SC_TMP_LIVE. */
int sc__family_tmp_make(struct sc_family *f, uint32_t id)
{
	char name[16];
	tree_name(name, id);
	struct fs_ids saved;
	int rc = become_sandbox_user(f, &saved);
	if (rc < 0)
		return rc;
	int fd SC_AUTO_CLOSE = mkdirat(f->tmp_root, name, 0700) < 0 ? -errno : open_at(f, name);
	if ((rc = restore_ids(&saved)) < 0)
		return rc;
	return SC_STEAL_FD(fd);
}

/* Removes id's tree; the owner's entries are renamed aside first (into its kept directory),
 * so SC_TMP_LIVE is empty for the next owner whatever the removal leaves. */
static void tree_remove(struct sc_family *f, uint32_t id)
{
	char name[16];
	tree_name(name, id);
	if (id == f->tmp_owner) {
		int live SC_AUTO_CLOSE = open_live(f);
		int aside SC_AUTO_CLOSE = live < 0 ? live : open_at(f, name);
		if (aside >= 0 && move_entries(f, live, aside) == 0)
			f->tmp_owner = 0;
		if (f->tmp_owner)
			return; /* kept: a tree the next switch cannot move aside ends the family */
	}
	sc__remove_tree(f->tmp_root, name, sc__deadline_ms(TMP_REMOVE_MS));
}

/* Renames the owner's entries aside and id's into SC_TMP_LIVE: open files and working
 * directories move with them. Every tree keeps its directory s<id> while it is in place
 * (empty then), so a switch makes nothing: code that used up the tmpfs's inodes or bytes
 * cannot make it fail, which would end the family (renames need no room). */
static int switch_trees(struct sc_family *f, uint32_t id)
{
	int live SC_AUTO_CLOSE = open_live(f), rc = 0;
	if (live < 0)
		return live;
	char name[16];
	if (f->tmp_owner) { /* else SC_TMP_LIVE is empty (tree_remove) */
		tree_name(name, f->tmp_owner);
		int aside SC_AUTO_CLOSE = open_at(f, name);
		rc = aside < 0 ? aside : move_entries(f, live, aside);
	}
	tree_name(name, id);
	int in SC_AUTO_CLOSE = rc < 0 ? rc : open_at(f, name);
	rc = in < 0 ? in : move_entries(f, in, live);
	if (rc == 0)
		f->tmp_owner = id;
	return rc;
}

static void tmp_lock(struct sc_family *f)
{
	pthread_mutex_lock(&f->tmp_lock);
}

static void tmp_unlock(struct sc_family *f)
{
	pthread_mutex_unlock(&f->tmp_lock);
}

/* Puts id's /tmp in place; the family is stopped. A family whose trees cannot be sorted out
 * ends: a run must never see another session's /tmp. */
int sc__family_tmp_switch(struct sc_family *f, uint32_t id)
{
	tmp_lock(f);
	int rc = id == f->tmp_owner ? 0 : switch_trees(f, id);
	tmp_unlock(f);
	if (rc < 0)
		sc__family_end(f);
	return rc;
}

/* Makes to's tree and copies from's into it (a from without a tree gives an empty one); the
 * caller removes to's on failure. */
static int tree_copy(struct sc_family *f, uint32_t from, uint32_t to)
{
	int src SC_AUTO_CLOSE = tree_open(f, from);
	int dst SC_AUTO_CLOSE = sc__family_tmp_make(f, to);
	int rc = dst < 0 ? dst : src == -ENOENT ? 0 : src;
	struct fs_ids saved;
	if (src >= 0 && dst >= 0 && (rc = become_sandbox_user(f, &saved)) == 0) {
		rc = sc__tree_copy(src, dst);
		int back = restore_ids(&saved);
		rc = rc < 0 ? rc : back;
	}
	return rc;
}

/* Makes to's tree (a new id) a copy of from's, within the family's /tmp size limit; the
 * family is stopped. */
int sc__family_tmp_copy(struct sc_family *f, uint32_t from, uint32_t to)
{
	tmp_lock(f);
	int rc = tree_copy(f, from, to);
	if (rc < 0)
		tree_remove(f, to);
	tmp_unlock(f);
	return rc;
}

void sc__family_tmp_drop(struct sc_family *f, uint32_t id)
{
	if (sc__family_orphaned(f))
		return;
	tmp_lock(f);
	tree_remove(f, id);
	tmp_unlock(f);
}
