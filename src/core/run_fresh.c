/* A run in a fresh cell (snapcell_sandbox_run): the cell taken from the parked ones (or made
 * for the run's own files), its network started at the gate, its /output collected, the cell
 * retired or handed to the pre-fault learner at the end. The run itself is run.c's. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "net/gate.h"
#include "stage/stage.h"
#include "util/util.h"

static bool dir_is_empty(int dfd)
{
	int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return true;
	}
	struct dirent *e;
	bool empty = true;
	while (empty && (e = readdir(d)))
		empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
	closedir(d);
	return empty;
}

bool sc__output_pending(int out_fd)
{
	return out_fd >= 0 && !dir_is_empty(out_fd);
}

/* The walk's bounds: /output holds at most 131,072 inodes (the template's tmpfs option), so a
 * tree that stands still needs fewer visits than this; only a live writer gets near. */
#define COLLECT_VISITS	    (2u * 131072u)
#define COLLECT_DEADLINE_MS 5000

void sc__output_collect(const struct snapcell_sandbox *sb, int out_fd, struct snapcell_result *res)
{
	const uint64_t *l = sb->cfg->limits;
	struct sc_collect_caps caps = {
		l[SNAPCELL_LIMIT_OUTPUT_FILES],	      l[SNAPCELL_LIMIT_OUTPUT_FILE_BYTES],
		l[SNAPCELL_LIMIT_OUTPUT_TOTAL_BYTES], l[SNAPCELL_LIMIT_OUTPUT_DEPTH],
		l[SNAPCELL_LIMIT_OUTPUT_PATH_BYTES],  COLLECT_VISITS,
		sc__deadline_ms(COLLECT_DEADLINE_MS)};
	sc__collect(out_fd, &caps, res);
}

/* A fresh cell's owner: the cell, its network, whether its pages are learned from. */
struct fresh {
	struct sc_cell cell;
	struct sc_run_target t;
	struct sc_gate_cell *gate;
	bool learn;
	bool killed;		       /* fresh_kill ran: never reset in place */
	uint32_t files_id;	       /* the run's files' directory (sc__run_files_stage), or 0 */
	const struct sc_cell_ops *ops; /* its sandbox's mechanism */
};

/* A fresh cell is killed by its mechanism (sc_cell_ops.kill: every process of it goes); the
 * template reports its exit. */
static void fresh_kill(const struct sc_run_target *t)
{
	struct fresh *f = t->ctx;
	f->killed = true;
	f->ops->kill(t->cell);
}

/* Gone before the walk (sc_cell_ops.wait_gone), so nothing can change the tree while it is
 * read. */
static int fresh_collect(const struct sc_run_target *t, struct snapcell_sandbox *sb,
			 struct snapcell_result *res)
{
	if (!sc__output_pending(t->cell->fds[SC_CELL_OUTPUT]))
		return 0;
	fresh_kill(t);
	sb->cells.ops->wait_gone(t->cell, sc__deadline_ms(5000));
	sc__output_collect(sb, t->cell->fds[SC_CELL_OUTPUT], res);
	return 0;
}

/* Whether a fresh cell that ran may be reset in place (snapcell_config_set_reuse) rather than
 * retired: a parked cell (not a run's files' own) of a sandbox without network entries, at
 * the levels with a pid namespace per cell, whose run ended at its DONE without a kill (an
 * /output to collect is one), its descriptors all open. The template checks the rest. */
static bool reuse_on(const struct snapcell_sandbox *sb)
{
	return snapcell_sandbox_reuse(sb); /* what the template was told at its start */
}

static bool reusable(const struct snapcell_sandbox *sb, const struct fresh *f)
{
	if (!reuse_on(sb) || f->files_id || f->learn || f->killed || f->cell.n_net)
		return false;
	for (size_t i = 0; i < SC_CELL_NFDS; i++)
		if (f->cell.fds[i] < 0)
			return false;
	return true;
}

/* The end of a fresh cell's run: its network, its /output, its cell. */
static void fresh_finish(struct snapcell_sandbox *sb, void *ctx, int rc, bool alive,
			 struct snapcell_result *res)
{
	struct fresh *f = ctx;
	sc__gate_cell_stop(f->gate, rc == 0 ? res : NULL);
	if (rc == 0)
		f->t.collect(&f->t, sb, res);
	if (rc == 0 && alive && f->learn)
		sc__prefault_learn(sb, &f->cell); /* retires it when done */
	else if (rc == 0 && alive && reusable(sb, f))
		sc__sandbox_reset_cell(sb, &f->cell);
	else
		sc__sandbox_retire_cell(sb, &f->cell);
	if (f->files_id)
		sc__run_files_remove(sb, f->files_id);
	free(f);
}

int snapcell_sandbox_run(struct snapcell_sandbox *sb, const char *code, size_t code_len,
			 const struct snapcell_run_options *opts, struct snapcell_result **out,
			 struct snapcell_error *err)
{
	if (!sb || !code || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "run: NULL argument");
	struct sc_run_request req;
	int rc = sc__run_prepare(sb, code, code_len, opts, &req, out, err);
	if (rc != 0)
		return rc < 0 ? rc : 0;
	sc__paused_sweep(sb);
	struct fresh *f = calloc(1, sizeof(*f));
	if (!f)
		return sc__err(err, -ENOMEM, "run");
	/* A run with files of its own gets a cell forked for it, whose /input shows them; the
	 * parked cells stay for the runs without. */
	const struct snapcell_run_file *files;
	size_t n_files = sc__run_options_files(opts, &files);
	rc = n_files ? sc__run_files_stage(sb, files, n_files, &f->files_id, err) : 0;
	if (rc == 0)
		rc = f->files_id ? sc__sandbox_files_cell(sb, f->files_id, &f->cell, err)
				 : sc__sandbox_take_fresh_cell(sb, &f->cell, err);
	if (rc < 0) {
		if (f->files_id)
			sc__run_files_remove(sb, f->files_id);
		free(f);
		return rc;
	}
	f->ops = sb->cells.ops;
	f->t = (struct sc_run_target){&f->cell, true, fresh_kill, fresh_collect,
				      f,	NULL, NULL,	  NULL};
	/* With reuse, no run is learned from: a reset cell holds its runs' pages already, and a
	 * learning run's cell is retired, so a new one (and its parking) would replace it. */
	req.learn = f->learn = !f->files_id && !reuse_on(sb) && sc__prefault_wants(sb, f->cell.id);
	if (f->cell.n_net &&
	    (rc = sc__gate_cell_start(sb->gate, f->cell.net, f->cell.n_net,
				      sc__deadline_ms(sb->cfg->limits[SNAPCELL_LIMIT_WALL_MS]),
				      &f->gate, err)) < 0) {
		sc__sandbox_retire_cell(sb, &f->cell);
		if (f->files_id)
			sc__run_files_remove(sb, f->files_id);
		free(f);
		return rc;
	}
	return sc__run_start(sb, &f->t, &req, fresh_finish, f, out, err);
}
