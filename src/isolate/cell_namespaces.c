/* The cell interface at levels namespaces and cgroups: the helper starts as pid 1 of new
 * user, mount, pid, net, ipc, uts and cgroup namespaces (spawn.c), each cell is pid 1 of a pid
 * namespace of its own with its own mount namespace and tmpfs /tmp and /output; where this
 * process can make a memory cgroup (cgroup.c), each cell also gets one, and the sandbox runs
 * at level cgroups. What the guest does is guest/; this file is only the host's side. */
#define _GNU_SOURCE
#include "cell.h"

#include <unistd.h>

#include "util/util.h"

/* A memory cgroup for the sandbox where this process may make one (docs/architecture.md,
 * "Limits"): each cell then gets one below it, bounded and measured by the kernel, and the
 * sandbox runs at level cgroups. Where none can be had it runs at namespaces, unless the
 * config requires cgroups. */
static int prepare(struct sc_cells *c, int workdir, enum snapcell_isolation required,
		   struct snapcell_error *err)
{
	(void)workdir;
	struct snapcell_error why = {0};
	if (sc__cgroup_sandbox_new(&c->cgroup, c->uid, c->gid, &why) == 0) {
		c->ops = &sc__cells_cgroups;
		c->level = SNAPCELL_ISOLATION_CGROUPS;
		return 0;
	}
	if (required < SNAPCELL_ISOLATION_CGROUPS)
		return 0;
	return sc__err(err, SNAPCELL_E_ISOLATION,
		       "isolation level 'cgroups' required: %s (see `snapcell doctor`)",
		       why.message);
}

/* At level cgroups the template moves itself into the sandbox's cgroup (cgroup.c). */
static int start(struct sc_cells *c, struct sc_spawn *spec, pid_t *pid, int *pidfd,
		 struct snapcell_error *err)
{
	spec->namespaces = true;
	spec->cgroup_fd = -1;
	if (c->cgroup.dir_fd >= 0 && (spec->cgroup_fd = sc__cgroup_tasks_open(&c->cgroup, err)) < 0)
		return spec->cgroup_fd;
	int rc = sc__spawn_helper(spec, pid, pidfd, err);
	if (spec->cgroup_fd >= 0)
		close(spec->cgroup_fd);
	spec->cgroup_fd = -1;
	return rc;
}

static void setup(const struct sc_cells *c, struct sc_cells_setup *out)
{
	*out = (struct sc_cells_setup){
		.level = c->level,
		.cgroup = c->cgroup.dir_fd >= 0 ? c->cgroup.path : NULL,
	};
}

static void cells_free(struct sc_cells *c)
{
	sc__cgroup_sandbox_free(&c->cgroup);
}

static int usage(const struct sc_cells *c, uint32_t id, int kept[SC_CGROUP_USAGE_FILES],
		 struct sc_cgroup_usage *out)
{
	return sc__cgroup_cell_usage(&c->cgroup, id, kept, out);
}

const struct sc_cell_ops sc__cells_namespaces = {
	.name = "namespaces",
	.level = SNAPCELL_ISOLATION_NAMESPACES,
	.prepare = prepare,
	.start = start,
	.setup = setup,
	.free = cells_free,
	.kill = sc__cell_pidfd_kill,
	.wait_gone = sc__cell_pidfd_wait_gone,
	.pid = sc__cell_pidfd_pid,
	.freeze = sc__cell_pidfd_freeze,
	.thaw = sc__cell_thaw,
	.frozen_free = sc__cell_frozen_free,
};

const struct sc_cell_ops sc__cells_cgroups = {
	.name = "cgroups",
	.level = SNAPCELL_ISOLATION_CGROUPS,
	.prepare = prepare,
	.start = start,
	.setup = setup,
	.free = cells_free,
	.kill = sc__cell_pidfd_kill,
	.wait_gone = sc__cell_pidfd_wait_gone,
	.pid = sc__cell_pidfd_pid,
	.freeze = sc__cell_pidfd_freeze,
	.thaw = sc__cell_thaw,
	.frozen_free = sc__cell_frozen_free,
	.usage = usage,
};
