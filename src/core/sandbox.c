/* The sandbox handle: its creation in steps (the mechanism chosen, the work directory, the
 * gate, the template started: workdir.c, template_start.c), handing out parked cells, and
 * tearing everything down. One run's life is in run.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "isolate/host.h"
#include "net/gate.h"
#include "rpc/frame.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/util.h"

#define TAKE_TIMEOUT_MS 20000
/* How long a fresh run waits for a reset under way (await_reset_then). */
#define RESET_WAIT_MS 200

static void forget_cell(struct snapcell_sandbox *sb, uint32_t id)
{
	char name[16];
	snprintf(name, sizeof(name), "%u", id);
	sc__remove_tree(sb->out_fd, name, 0);
}

/* Forgets the retired cells that are gone; with wait, waits for all of them. Lock held. */
static void sweep(struct snapcell_sandbox *sb, bool wait)
{
	size_t kept = 0;
	for (size_t i = 0; i < sb->n_dying; i++) {
		if (sc__wait_fd(sb->dying[i].pidfd, POLLIN, sc__deadline_ms(wait ? 5000 : 0)) ==
		    -ETIMEDOUT) {
			sb->dying[kept++] = sb->dying[i];
			continue;
		}
		forget_cell(sb, sb->dying[i].id);
		close(sb->dying[i].pidfd);
	}
	sb->n_dying = kept;
}

/* Kills a cell and lists it as dying; the lock is held. */
static void retire_locked(struct snapcell_sandbox *sb, struct sc_cell *cell)
{
	int pidfd = cell->fds[SC_CELL_PIDFD];
	sb->cells.ops->kill(cell);
	cell->fds[SC_CELL_PIDFD] = -1;
	sc__cell_close(cell);
	if (SC_ARRAY_RESERVE(sb->dying, sb->cap_dying, sb->n_dying + 1, SC_ARRAY_NO_CAP) < 0)
		sweep(sb, true); /* no memory to defer: wait now */
	if (sb->n_dying < sb->cap_dying)
		sb->dying[sb->n_dying++] = (struct sc_dying){pidfd, cell->id};
}

void sc__sandbox_retire_cell(struct snapcell_sandbox *sb, struct sc_cell *cell)
{
	pthread_mutex_lock(&sb->lock);
	retire_locked(sb, cell);
	pthread_mutex_unlock(&sb->lock);
}

/* What the sandbox's mechanism needs in the work directory and beside it (a memory cgroup,
 * which raises the level to cgroups); it fails when the config requires more. */
static int prepare_cells(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	int dfd SC_AUTO_CLOSE = open(sb->workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return sc__err(err, -errno, "open %s", sb->workdir);
	sb->cells.uid = sb->ids.uid;
	sb->cells.gid = sb->ids.gid;
	return sb->cells.ops->prepare(&sb->cells, dfd, sb->cfg->required, err);
}

/* A sandbox with entries runs the egress gate for its cells. */
static int start_gate(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	const struct snapcell_config *c = sb->cfg;
	if (c->allowed.n == 0)
		return 0;
	struct sc_gate_options o = {
		.list = &c->allowed,
		.map_names = (const char *const *)c->map_names,
		.map_addresses = (const char *const *)c->map_addresses,
		.n_maps = c->n_maps,
		.upstream_ca_file = c->upstream_ca,
		.max_connections = c->limits[SNAPCELL_LIMIT_NET_CONNECTIONS],
		.max_bytes = c->limits[SNAPCELL_LIMIT_NET_BYTES],
		.connect_timeout_ms = c->limits[SNAPCELL_LIMIT_NET_CONNECT_MS],
		.idle_timeout_ms = c->limits[SNAPCELL_LIMIT_NET_IDLE_MS],
	};
	return sc__gate_new(&o, &sb->gate, err);
}

/* The mechanism this sandbox's cells are made by (isolate/cell.h), the one place it is
 * chosen: namespaces where the host can make them and mount inside (its prepare raises the
 * level to cgroups where it can make a memory cgroup), else rlimits (the helper in the
 * caller's namespaces, confined by Landlock, seccomp and rlimits), refused when the config
 * requires namespaces or has network entries (the gate needs each cell's own network
 * namespace: Landlock rules name ports, not addresses). */
static int choose_level(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	static const char *const steps[SC_NS_STEPS] = {
		[SC_NS_USER] = "user namespaces",     [SC_NS_MOUNT] = "mount namespaces",
		[SC_NS_PID] = "pid namespaces",	      [SC_NS_NET] = "network namespaces",
		[SC_NS_IPC] = "ipc namespaces",	      [SC_NS_UTS] = "uts namespaces",
		[SC_NS_CGROUP] = "cgroup namespaces", [SC_NS_MOUNT_INSIDE] = "user namespaces",
	};
	struct sc_ns_check c;
	int rc = sc__ns_check_once(&c);
	if (rc < 0)
		return sc__err(err, rc, "check for namespaces in a child process");
	sc__cells_init(&sb->cells, c.ok ? &sc__cells_namespaces : &sc__cells_rlimits);
	if (c.ok)
		return 0;
	const char *step = steps[c.failed];
	if (sb->cfg->required >= SNAPCELL_ISOLATION_NAMESPACES)
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "isolation level '%s' required, this host gives 'rlimits': %s: %s",
			       snapcell_isolation_name(sb->cfg->required), step, c.why);
	if (sb->cfg->allowed.n > 0)
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "network entries need level 'namespaces' (a network namespace per "
			       "cell); this host gives 'rlimits': %s: %s",
			       step, c.why);
	int abi = sc__landlock_version();
	if (abi <= 0)
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "no isolation level on this host: 'rlimits' needs Landlock (Linux "
			       "5.13+, lsm=landlock), absent; 'namespaces': %s: %s",
			       step, c.why);
	return 0;
}

int snapcell_sandbox_new(const struct snapcell_config *cfg, struct snapcell_sandbox **out,
			 struct snapcell_error *err)
{
	if (!cfg || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "sandbox_new: NULL argument");
	struct snapcell_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return sc__err(err, -ENOMEM, "sandbox");
	sb->ctl = sb->helper_pidfd = sb->out_fd = sb->lock_fd = sb->ids.lock_fd = -1;
	pthread_mutex_init(&sb->lock, NULL);
	pthread_mutex_init(&sb->ask_lock, NULL);
	sb->asks_tail = &sb->asks;
	pthread_cond_init(&sb->paused_cond, NULL);
	pthread_condattr_t monotonic;
	pthread_condattr_init(&monotonic);
	pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
	pthread_cond_init(&sb->received, &monotonic);
	pthread_cond_init(&sb->reaper_wake, &monotonic);
	pthread_condattr_destroy(&monotonic);
	int rc = sc__config_copy(cfg, &sb->cfg);
	if (rc < 0)
		sc__err(err, rc, "copy config");
	if (rc == 0 && (rc = sc__prefault_new(sb)) < 0)
		sc__err(err, rc, "sandbox");
	if (rc == 0)
		rc = choose_level(sb, err);
	if (rc == 0)
		rc = sc__ids_take(sb->cfg->uid_first, sb->cfg->uid_count, sb->cfg->uid_range_set,
				  &sb->ids, err);
	if (rc == 0)
		rc = sc__workdir_make(sb, err);
	if (rc == 0)
		rc = prepare_cells(sb, err);
	if (rc == 0)
		rc = start_gate(sb, err);
	if (rc == 0)
		rc = sc__python_resolve(sb->cfg, &sb->python, err);
	if (rc == 0)
		rc = sc__template_start(sb, err);
	if (rc == 0 && (rc = sc__ids_bind(&sb->ids, sb->helper_pid)) < 0)
		sc__err(err, rc, "record the template in the lock of uid %u",
			(unsigned)sb->ids.uid);
	if (rc == 0)
		rc = sc__template_handshake(sb, err);
	/* From here the helper's stderr is nobody's: the template ignores SIGPIPE, so what it
	 * writes there later fails with EPIPE, as quietly as /dev/null took it before. */
	sc__helper_stderr_free(sb->helper_stderr);
	sb->helper_stderr = NULL;
	if (rc < 0) {
		snapcell_sandbox_free(sb);
		return rc;
	}
	*out = sb;
	return 0;
}

static void stop_helper(struct snapcell_sandbox *sb)
{
	if (sb->ctl >= 0)
		close(sb->ctl); /* the template exits on EOF; its cells die with it (pid 1) */
	if (sb->helper_pidfd < 0)
		return;
	if (sc__wait_fd(sb->helper_pidfd, POLLIN, sc__deadline_ms(2000)) < 0)
		syscall(SYS_pidfd_send_signal, sb->helper_pidfd, SIGKILL, NULL, 0);
	siginfo_t si;
	while (waitid((idtype_t)P_PIDFD, (id_t)sb->helper_pidfd, &si, WEXITED) < 0 &&
	       errno == EINTR)
		;
	close(sb->helper_pidfd);
}

void snapcell_sandbox_free(struct snapcell_sandbox *sb)
{
	if (!sb)
		return;
	sc__paused_end_all(sb);
	sc__sessions_orphan(sb);
	sc__prefault_free(sb); /* its learner may hold a cell to retire */
	stop_helper(sb);
	sweep(sb, true);
	if (sb->cells.ops)
		sb->cells.ops->free(&sb->cells); /* the template and its cells are gone */
	free(sb->dying);
	for (size_t i = 0; i < sb->n_ready; i++)
		sc__cell_close(&sb->ready[i]);
	free(sb->ready);
	for (size_t i = 0; i < sb->n_resetting; i++)
		sc__cell_close(&sb->resetting[i]);
	free(sb->resetting);
	for (size_t i = 0; i < sb->n_reset_ready; i++)
		sc__cell_close(&sb->reset_ready[i]);
	free(sb->reset_ready);
	while (sb->asks) { /* questions abandoned unanswered */
		struct sc_files_ask *next = sb->asks->next;
		free(sb->asks);
		sb->asks = next;
	}
	sc__gate_free(sb->gate);
	if (sb->out_fd >= 0)
		close(sb->out_fd);
	if (sb->workdir) {
		char *slash = strrchr(sb->workdir, '/');
		*slash = 0;
		int parent =
			open(*sb->workdir ? sb->workdir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (parent >= 0) {
			sc__remove_tree(parent, slash + 1, 0);
			close(parent);
		}
		free(sb->workdir);
	}
	if (sb->lock_fd >= 0)
		close(sb->lock_fd); /* after the tree is gone: a reaper may take it now */
	/* After the template was waited for: a pid namespace's init is reaped only once all its
	 * processes are, so nothing runs as the uid any more when the next sandbox takes it. */
	sc__ids_release(&sb->ids);
	pthread_mutex_destroy(&sb->lock);
	pthread_mutex_destroy(&sb->ask_lock);
	pthread_cond_destroy(&sb->paused_cond);
	pthread_cond_destroy(&sb->received);
	pthread_cond_destroy(&sb->reaper_wake);
	sc__python_clear(&sb->python);
	free(sb->setup);
	snapcell_config_free(sb->cfg);
	free(sb);
}

enum snapcell_isolation snapcell_sandbox_isolation(const struct snapcell_sandbox *sb)
{
	return sb ? sb->cells.level : SNAPCELL_ISOLATION_NONE;
}

static int mark_broken(struct snapcell_sandbox *sb, const char *why, struct snapcell_error *err)
{
	sb->broken = true;
	snprintf(sb->broken_msg, sizeof(sb->broken_msg), "%s", why);
	return sc__err(err, SNAPCELL_E_TEMPLATE, "%s", why);
}

static int no_cell(struct snapcell_error *err)
{
	return sc__err(err, SNAPCELL_E_TEMPLATE, "no cell from the template in %d ms",
		       TAKE_TIMEOUT_MS);
}

/* Reads one CELL or RUN_CELL message from the control socket; called without the lock, by the
 * one thread that is receiving. *type is the message's; a RUN_CELL's *status is its own, 0 or
 * why the template has no cell for the run (no fds, *cell untouched). *why, when the template
 * is gone or broke its protocol: the sandbox is then broken, and the caller marks it so under
 * the lock. */
static int read_cell(struct snapcell_sandbox *sb, uint64_t deadline, struct sc_cell *cell,
		     uint32_t *type, int *status, const char **why, struct snapcell_error *err)
{
	int rc = sc__wait_fd(sb->ctl, POLLIN, deadline);
	if (rc == -ETIMEDOUT)
		return no_cell(err);
	struct sc_ctl_msg m;
	int fds[SC_CTL_MAX_FDS];
	size_t n_fds = 0, want = SC_CELL_NFDS + (sb->gate ? sc__gate_cell_fds(sb->gate) : 0);
	if (rc == 0)
		rc = sc__ctl_recv(sb->ctl, &m, fds, &n_fds);
	*type = rc == 0 || rc == -EMFILE ? m.type : 0;
	*status = 0;
	if (rc == -EMFILE && m.type == SC_CTL_CELL) {
		/* This process is out of descriptors: the kernel dropped the cell's, so that cell
		 * reads EOF and exits. The template still counts it parked: a TAKE makes it park
		 * a replacement, and the sandbox lives on for when descriptors are free again. */
		struct sc_ctl_msg take = {.type = SC_CTL_TAKE};
		if (sc__ctl_send(sb->ctl, &take, NULL, 0) < 0)
			*why = "control socket failed";
		return sc__err(err, -EMFILE, "receive a cell from the template");
	}
	if (rc == -EMFILE && m.type == SC_CTL_RUN_CELL) {
		/* The run's cell, forked for it alone, reads EOF and exits likewise. */
		*status = -EMFILE;
		return 0;
	}
	if (rc < 0) {
		*why = rc == -EPIPE ? "the template exited" : "control socket failed";
		return SNAPCELL_E_TEMPLATE;
	}
	if (m.type == SC_CTL_RUN_CELL && m.status < 0 && n_fds == 0) {
		*status = m.status;
		return 0;
	}
	if (m.type == SC_CTL_RESET && n_fds == 0) { /* the answer to sc__sandbox_reset_cell */
		*status = m.status;
		*cell = (struct sc_cell){.id = m.cell_id, .cpu_base_us = m.cpu_us};
		return 0;
	}
	if ((m.type != SC_CTL_CELL && m.type != SC_CTL_RUN_CELL) || n_fds != want) {
		for (size_t i = 0; i < n_fds; i++)
			close(fds[i]);
		*why = "the template sent a malformed cell message";
		return SNAPCELL_E_TEMPLATE;
	}
	*cell = (struct sc_cell){.id = m.cell_id, .n_net = n_fds - SC_CELL_NFDS};
	memcpy(cell->fds, fds, sizeof(cell->fds));
	memcpy(cell->net, fds + SC_CELL_NFDS, cell->n_net * sizeof(int));
	return 0;
}

/* Queues a received cell; the lock is held. */
static int queue_cell(struct snapcell_sandbox *sb, struct sc_cell *cell, struct snapcell_error *err)
{
	if (SC_ARRAY_RESERVE(sb->ready, sb->cap_ready, sb->n_ready + 1, SC_ARRAY_NO_CAP) < 0) {
		sc__cell_close(cell);
		return sc__err(err, -ENOMEM, "cell queue");
	}
	sb->ready[sb->n_ready++] = *cell;
	return 0;
}

/* Hands a RUN_CELL answer to the oldest FILES question (the template answers them in order);
 * the lock is held. A question whose thread gave up waiting is freed here, its cell killed. */
static int answer_files(struct snapcell_sandbox *sb, struct sc_cell *cell, int status)
{
	struct sc_files_ask *ask = sb->asks;
	if (!ask) {
		if (status == 0)
			retire_locked(sb, cell);
		mark_broken(sb, "the template sent a run's cell nobody asked for", NULL);
		return SNAPCELL_E_TEMPLATE;
	}
	sb->asks = ask->next;
	if (!sb->asks)
		sb->asks_tail = &sb->asks;
	if (ask->abandoned) {
		if (status == 0)
			retire_locked(sb, cell);
		free(ask);
		return 0;
	}
	ask->status = status;
	if (status == 0)
		ask->cell = *cell;
	ask->answered = true;
	return 0;
}

/* The template's answer to a reset (read_cell: answer's id, status, cpu_base_us); the lock is
 * held. A cell reset goes to the fresh runs' queue with its CPU so far; one that was not is
 * retired (the template killed it), and so is one the template reset but the host refuses
 * (its frame socket shut or holding frames): a reset cell is none of the template's spares,
 * so nothing is owed to it. */
static void answer_reset(struct snapcell_sandbox *sb, const struct sc_cell *answer, int status)
{
	size_t i = 0;
	while (i < sb->n_resetting && sb->resetting[i].id != answer->id)
		i++;
	if (i == sb->n_resetting)
		return; /* not asked (the template's word alone cannot add a cell) */
	struct sc_cell cell = sb->resetting[i];
	sb->resetting[i] = sb->resetting[--sb->n_resetting];
	cell.cpu_base_us = answer->cpu_base_us;
	cell.reused = true;
	/* The reset cannot see a frame socket the run shut for writing (only this end shows
	 * it), and the next run's frames would never come: checked here, where nothing of the
	 * run can act any more. Frames left unread are no next run's either. */
	struct pollfd rpc = {cell.fds[SC_CELL_RPC], POLLIN | POLLRDHUP, 0};
	if (status == 0 && (poll(&rpc, 1, 0) != 0 || rpc.revents))
		status = -EPIPE;
	if (status == 0 && SC_ARRAY_RESERVE(sb->reset_ready, sb->cap_reset_ready,
					    sb->n_reset_ready + 1, SC_ARRAY_NO_CAP) == 0)
		sb->reset_ready[sb->n_reset_ready++] = cell;
	else
		retire_locked(sb, &cell);
}

/* What a thread waits for: want parked cells, want parked or reset ones (a fresh run's), or
 * the end of a reset under way. */
enum await_for { PARKED, PARKED_OR_RESET, RESET };

/* Whether a thread that wants cells must wait; the lock is held. */
static bool short_of(const struct snapcell_sandbox *sb, size_t want, enum await_for what)
{
	if (what == RESET)
		return !sb->n_reset_ready && sb->n_resetting;
	return sb->n_ready + (what == PARKED_OR_RESET ? sb->n_reset_ready : 0) < want;
}

/* Reads one message from the control socket and files it (a parked cell, a run's cell, a
 * reset's answer); called with the lock held, by the one thread that is receiving (it sets and
 * clears receiving), which it lets go while it reads. */
static int receive_one(struct snapcell_sandbox *sb, uint64_t deadline, struct snapcell_error *err)
{
	sb->receiving = true;
	pthread_mutex_unlock(&sb->lock);
	struct sc_cell cell;
	uint32_t type = 0;
	int status = 0;
	const char *why = NULL;
	int rc = read_cell(sb, deadline, &cell, &type, &status, &why, err);
	pthread_mutex_lock(&sb->lock);
	sb->receiving = false;
	pthread_cond_broadcast(&sb->received);
	if (why)
		rc = mark_broken(sb, why, err);
	else if (rc == 0 && type == SC_CTL_RUN_CELL && answer_files(sb, &cell, status) < 0)
		rc = sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg);
	else if (rc == 0 && type == SC_CTL_CELL)
		rc = queue_cell(sb, &cell, err);
	else if (rc == 0 && type == SC_CTL_RESET)
		answer_reset(sb, &cell, status);
	return rc;
}

/* Until want cells are parked, or with ask, until the template answered it (or the sandbox is
 * broken). Called and returns with the lock held, which it lets go while it waits: one thread
 * reads the control socket, handing each RUN_CELL to the question it answers, and the others
 * wait on received, so a slow template delays only the threads that need a cell from it, never
 * a run that retires its cell, pauses or resumes meanwhile. A question left unanswered is
 * marked abandoned: its answer is then the reader's to free. */
static int await_some(struct snapcell_sandbox *sb, size_t want, struct sc_files_ask *ask,
		      enum await_for what, uint64_t wait_ms, struct snapcell_error *err)
{
	uint64_t deadline = sc__deadline_ms(wait_ms); /* a waiter's: as long as a read */
	struct timespec at = {(time_t)(deadline / 1000000), (long)(deadline % 1000000) * 1000};
	int rc = 0;
	while (rc == 0 && (ask ? !ask->answered : short_of(sb, want, what))) {
		if (sb->broken) {
			rc = sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg);
			break;
		}
		if (sb->receiving) {
			if (pthread_cond_timedwait(&sb->received, &sb->lock, &at) == ETIMEDOUT &&
			    (ask ? !ask->answered : short_of(sb, want, what)) && !sb->broken)
				rc = no_cell(err);
			continue;
		}
		rc = receive_one(sb, deadline, err);
	}
	if (rc < 0 && ask && !ask->answered)
		ask->abandoned = true;
	return rc;
}

/* Files what the template already sent (answers to resets above all), without waiting, so a
 * take sees every cell reset by now; the lock is held. A thread already receiving files it. */
static void receive_pending(struct snapcell_sandbox *sb)
{
	struct pollfd p = {sb->ctl, POLLIN, 0};
	while (!sb->broken && !sb->receiving && poll(&p, 1, 0) == 1 &&
	       receive_one(sb, sc__deadline_ms(0), NULL) == 0)
		;
}

static int await_cells(struct snapcell_sandbox *sb, size_t want, struct sc_files_ask *ask,
		       struct snapcell_error *err)
{
	return await_some(sb, want, ask, PARKED, TAKE_TIMEOUT_MS, err);
}

/* A cell for take: with fresh, a reset cell when one is ready; else a parked one while fewer
 * than SC_REUSE_ROTATION cells are being reset (the previous runs' cells: so back-to-back runs
 * alternate between cells, and one's reset runs on the template while the next run runs,
 * instead of each run waiting for the reset of the one before); else the end of a reset under
 * way (cheaper than a parked cell, which the template replaces), RESET_WAIT_MS at most (a slow
 * template must not hold up runs while cells are parked), else a parked one. The lock is held. */
static int await_reset_then(struct snapcell_sandbox *sb, bool fresh, struct snapcell_error *err)
{
	if (fresh && short_of(sb, 0, RESET))
		receive_pending(sb);
	if (fresh && short_of(sb, 0, RESET) && sb->n_resetting >= SC_REUSE_ROTATION &&
	    await_some(sb, 0, NULL, RESET, RESET_WAIT_MS, NULL) < 0 && sb->broken)
		return sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg);
	return await_some(sb, 1, NULL, fresh ? PARKED_OR_RESET : PARKED, TAKE_TIMEOUT_MS, err);
}

/* A parked cell (with fresh, a cell reset in place first) and the template told to park a
 * replacement. */
static int take(struct snapcell_sandbox *sb, struct sc_cell *out, bool fresh,
		struct snapcell_error *err)
{
	int rc = 0;
	pthread_mutex_lock(&sb->lock);
	if (sb->broken)
		rc = sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg);
	/* Cells already received die with their template: do not hand out a dead one. */
	struct pollfd gone = {sb->helper_pidfd, POLLIN, 0};
	if (rc == 0 && poll(&gone, 1, 0) == 1)
		rc = mark_broken(sb, "the template exited", err);
	sweep(sb, false);
	if (rc == 0)
		rc = await_reset_then(sb, fresh, err);
	bool reset = rc == 0 && fresh && sb->n_reset_ready;
	if (reset) {
		*out = sb->reset_ready[--sb->n_reset_ready];
	} else if (rc == 0) {
		*out = sb->ready[0];
		memmove(sb->ready, sb->ready + 1, --sb->n_ready * sizeof(*sb->ready));
	}
	pthread_mutex_unlock(&sb->lock);
	/* Sent without the lock: a template that reads slowly may block it. A reset cell is
	 * none of the parked cells the template keeps up: it parks no replacement for it. */
	struct sc_ctl_msg take = {.type = SC_CTL_TAKE};
	if (rc == 0 && !reset && sc__ctl_send(sb->ctl, &take, NULL, 0) < 0) {
		pthread_mutex_lock(&sb->lock);
		mark_broken(sb, "the template exited", NULL);
		pthread_mutex_unlock(&sb->lock);
	}
	return rc;
}

int sc__sandbox_take_cell(struct snapcell_sandbox *sb, struct sc_cell *out,
			  struct snapcell_error *err)
{
	return take(sb, out, false, err);
}

int sc__sandbox_take_fresh_cell(struct snapcell_sandbox *sb, struct sc_cell *out,
				struct snapcell_error *err)
{
	return take(sb, out, true, err);
}

void sc__sandbox_reset_cell(struct snapcell_sandbox *sb, struct sc_cell *cell)
{
	pthread_mutex_lock(&sb->lock);
	/* Listed before the question goes: another thread may read the answer at once. */
	bool listed = !sb->broken && SC_ARRAY_RESERVE(sb->resetting, sb->cap_resetting,
						      sb->n_resetting + 1, SC_ARRAY_NO_CAP) == 0;
	if (!listed) {
		retire_locked(sb, cell);
		pthread_mutex_unlock(&sb->lock);
		return;
	}
	cell->cpu_base_us = 0;
	sb->resetting[sb->n_resetting++] = *cell;
	pthread_mutex_unlock(&sb->lock);
	struct sc_ctl_msg m = {.type = SC_CTL_RESET, .cell_id = cell->id};
	if (sc__ctl_send(sb->ctl, &m, NULL, 0) < 0) {
		pthread_mutex_lock(&sb->lock);
		mark_broken(sb, "the template exited", NULL);
		pthread_mutex_unlock(&sb->lock);
	}
}

int sc__sandbox_files_cell(struct snapcell_sandbox *sb, uint32_t id, struct sc_cell *out,
			   struct snapcell_error *err)
{
	struct sc_files_ask *ask = calloc(1, sizeof(*ask));
	if (!ask)
		return sc__err(err, -ENOMEM, "run files");
	/* Questions are queued in the order they are sent, which is the order of the answers;
	 * ask_lock keeps the two together, and sb->lock is not held across the send. */
	pthread_mutex_lock(&sb->ask_lock);
	pthread_mutex_lock(&sb->lock);
	int rc = sb->broken ? sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg) : 0;
	sweep(sb, false); /* as a take does: runs with files alone must not pile up the dying */
	if (rc == 0) {
		*sb->asks_tail = ask;
		sb->asks_tail = &ask->next;
	}
	pthread_mutex_unlock(&sb->lock);
	if (rc < 0) {
		pthread_mutex_unlock(&sb->ask_lock);
		free(ask);
		return rc;
	}
	struct sc_ctl_msg m = {.type = SC_CTL_FILES, .cell_id = id};
	bool sent = sc__ctl_send(sb->ctl, &m, NULL, 0) == 0;
	pthread_mutex_lock(&sb->lock);
	pthread_mutex_unlock(&sb->ask_lock);
	if (!sent) {
		rc = mark_broken(sb, "the template exited", err);
		ask->abandoned = true; /* queued: freed with the sandbox */
	} else {
		/* Unanswered there, the question is abandoned: the queue's to free. */
		rc = await_cells(sb, 0, ask, err);
	}
	pthread_mutex_unlock(&sb->lock);
	if (rc < 0)
		return rc;
	/* Answered: the question left the queue, and is this thread's again. */
	rc = ask->status < 0
		     ? sc__err(err, ask->status, "the template could not make the run's cell")
		     : 0;
	if (rc == 0)
		*out = ask->cell;
	free(ask);
	return rc;
}

static uint64_t private_bytes(int pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	FILE *f = fopen(path, "re");
	uint64_t kib = 0;
	unsigned long long v;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Private_Clean: %llu kB", &v) == 1 ||
		    sscanf(line, "Private_Dirty: %llu kB", &v) == 1)
			kib += v;
	if (f)
		fclose(f);
	return kib * 1024;
}

/* A parked cell's private memory, counted once its process is known to have lived through the
 * read (its pid was not reused meanwhile). */
static bool parked_bytes(int pidfd, uint64_t *sum)
{
	int pid = sc__pidfd_pid(pidfd);
	uint64_t bytes = pid > 0 ? private_bytes(pid) : 0;
	struct pollfd alive = {pidfd, POLLIN, 0};
	if (pid <= 0 || poll(&alive, 1, 0) != 0)
		return false;
	*sum += bytes;
	return true;
}

int snapcell_sandbox_stats(struct snapcell_sandbox *sb, struct snapcell_sandbox_stats *out,
			   struct snapcell_error *err)
{
	if (!sb || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "stats: NULL argument");
	memset(out, 0, sizeof(*out));
	int pidfds[SC_SPARE_CELLS];
	size_t n = 0;
	pthread_mutex_lock(&sb->lock);
	/* The answers to resets under way first (briefly): a cell the template discarded is
	 * retired, and its descriptors go, before the measure. Not after the wait for the
	 * parked cells: this wait lets the lock go, and a run would take one of them meanwhile. */
	if (!sb->broken && short_of(sb, 0, RESET))
		await_some(sb, 0, NULL, RESET, RESET_WAIT_MS, NULL);
	int rc = sb->broken ? sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg)
			    : await_cells(sb, SC_SPARE_CELLS, NULL, err);
	if (rc < 0)
		sc__err_wrap(err, rc, "stats");
	/* Measured without the lock, through copies of the pidfds: a run may take the cells. */
	for (size_t i = 0; rc == 0 && i < sb->n_ready && n < SC_SPARE_CELLS; i++)
		if ((pidfds[n] = fcntl(sb->ready[i].fds[SC_CELL_PIDFD], F_DUPFD_CLOEXEC, 0)) >= 0)
			n++;
	pthread_mutex_unlock(&sb->lock);
	out->template_pid = sc__pidfd_pid(sb->helper_pidfd);
	out->template_private_bytes = private_bytes(out->template_pid);
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		out->parked_cells += parked_bytes(pidfds[i], &sum);
		close(pidfds[i]);
	}
	if (out->parked_cells)
		out->parked_cell_private_bytes = sum / out->parked_cells;
	return rc;
}
