/* The template: the interpreter the helper exec'd in the root it built (guest/helper.c),
 * running the guest module (module.c). After its setup (template_setup.c) it keeps a few cells
 * parked for the host and reaps them (template_park.c), and serves the host's control
 * messages; this file is that life, from READY to the end. It never runs untrusted code
 * itself; the host's closing of the control socket ends it, and with it (as pid 1 of the
 * sandbox's pid namespace) every cell. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "counters.h"
#include "template.h"
#include "util/util.h"

struct sc_template T;

static void report_ready(int status, const char *message)
{
	struct sc_ctl_msg m = {.type = SC_CTL_READY,
			       .status = status,
			       .level = status ? SNAPCELL_ISOLATION_NONE : T.cfg.ops->level()};
	snprintf(m.message, sizeof(m.message), "%s", message);
	sc__ctl_send(CTL, &m, NULL, 0);
}

/* A cell for one run with files of its own (SC_CTL_FILES): forked now, off the parked ones,
 * its /input showing SC_OUT_BASE/in-<id>. The host waits for the answer either way. */
static void run_cell(uint32_t files_id)
{
	char layer[32];
	snprintf(layer, sizeof(layer), "in-%u", files_id);
	int rc = T.cfg.ops->files_cell(layer);
	struct sc_ctl_msg m = {.type = SC_CTL_RUN_CELL, .status = rc};
	if (rc < 0) /* files_cell sent nothing: it fails only before its send */
		sc__ctl_send(CTL, &m, NULL, 0);
}

/* The host's list of pages to fault in, from the memfd it sent: it replaces the one before.
 * Only its shape is checked; the cells treat the ranges as hints (guest/cell.c). */
static void take_prefault(int fd)
{
	struct stat st;
	size_t max = SC_PREFAULT_MAX_RANGES * sizeof(struct sc_prefault_range);
	struct sc_prefault_range *list = NULL;
	size_t n = 0;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && (size_t)st.st_size <= max &&
	    st.st_size % sizeof(*list) == 0 && (list = malloc((size_t)st.st_size)) &&
	    pread(fd, list, (size_t)st.st_size, 0) == st.st_size)
		n = (size_t)st.st_size / sizeof(*list);
	for (size_t i = 0; i < n; i++)
		if (list[i].start % 4096 || !list[i].pages)
			n = 0;
	if (n == 0) {
		free(list); /* a list that is not one: the cells keep the one before */
		return;
	}
	free(T.prefault);
	T.prefault = list;
	T.n_prefault = n;
}

/* How long the template leaves the CPUs to the sandbox's first cell before it warms up. */
#define WARM_DELAY_MS 50

/* The poll timeout: until the warm-up may begin (or at once), or retry_ms when warm. */
static int poll_timeout(bool warming, bool warm_now, uint64_t warm_at, int retry_ms)
{
	if (!warming)
		return retry_ms;
	uint64_t now = sc__now_us();
	if (warm_now || now >= warm_at)
		return 0;
	int until = (int)((warm_at - now + 999) / 1000);
	return retry_ms >= 0 && retry_ms < until ? retry_ms : until;
}

/* Returns when the host closes the control socket. The sandbox's first cell is parked before
 * the template imports and warms up the common standard library (sc_py_warm_template), so
 * the first run, usually right after READY, waits for none of it. The warm-up begins once
 * that cell is gone, or WARM_DELAY_MS after it was parked, so it does not compete with it for
 * the CPUs; it goes a step (a few ms) at a time between the host's messages. Every later cell
 * is forked from the warmed template. */
static void serve(void)
{
	int retry_ms = -1;
	bool warming = true;
	uint64_t warm_at = 0;
	for (;;) {
		unsigned want = !warming ? T.cfg.spares : T.next_id == 0 ? 1 : 0;
		while (T.parked < want) {
			if (sc_template_park_cell(NULL) < 0) {
				retry_ms = 50; /* out of processes or fds: try again soon */
				break;
			}
			T.parked++;
			retry_ms = -1;
		}
		if (warming && !warm_at)
			warm_at = sc__deadline_ms(WARM_DELAY_MS);
		bool warm_now = warming && (T.n_cells == 0 || sc__now_us() >= warm_at);
		struct pollfd pf[3] = {{CTL, POLLIN, 0},
				       {T.sig_fd, POLLIN, 0},
				       {sc_counters_poll_fd(), POLLIN, 0}};
		int ready = poll(pf, 3, poll_timeout(warming, warm_now, warm_at, retry_ms));
		if (ready < 0 && errno != EINTR)
			return;
		if (ready == 0 && warm_now) {
			warming = sc_py_warm_template();
			continue;
		}
		if (pf[1].revents)
			sc_template_reap();
		if (pf[2].revents)
			sc_counters_serve();
		if (pf[0].revents) {
			struct sc_ctl_msg m;
			int fds[SC_CTL_MAX_FDS];
			size_t n_fds = 0;
			if (sc__ctl_recv(CTL, &m, fds, &n_fds) < 0)
				return;
			if (m.type == SC_CTL_TAKE && T.parked > 0)
				T.parked--;
			if (m.type == SC_CTL_PREFAULT && n_fds == 1)
				take_prefault(fds[0]);
			if (m.type == SC_CTL_FILES)
				run_cell(m.cell_id);
			if (m.type == SC_CTL_RESET)
				sc_reuse_reset(m.cell_id);
			close_all(fds, n_fds);
		}
	}
}

int sc_template_main(void)
{
	struct snapcell_error err = {0};
	signal(SIGPIPE, SIG_IGN);
	if (sc_template_setup(&err) < 0) {
		report_ready(err.code, err.message);
		return 1;
	}
	report_ready(0, "ready");
	serve();
	T.cfg.ops->end();
	return 0;
}
