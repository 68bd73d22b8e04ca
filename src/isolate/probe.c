/* What this host offers, tested for real in a throwaway child (an unshare that works there
 * works for the helper; level.c), and the level a sandbox gets: namespaces, else rlimits
 * (seccomp and Landlock), else none. Reports; changes nothing in the caller. */
#define _GNU_SOURCE
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

static const struct {
	const char *name;
	int clone_flag;
} mechs[SNAPCELL_MECH__COUNT] = {
	[SNAPCELL_MECH_USERNS] = {"user namespace", CLONE_NEWUSER},
	[SNAPCELL_MECH_MOUNTNS] = {"mount namespace", CLONE_NEWNS},
	[SNAPCELL_MECH_PIDNS] = {"pid namespace", CLONE_NEWPID},
	[SNAPCELL_MECH_NETNS] = {"network namespace", CLONE_NEWNET},
	[SNAPCELL_MECH_IPCNS] = {"ipc namespace", CLONE_NEWIPC},
	[SNAPCELL_MECH_UTSNS] = {"uts namespace", CLONE_NEWUTS},
	[SNAPCELL_MECH_CGROUPNS] = {"cgroup namespace", CLONE_NEWCGROUP},
	[SNAPCELL_MECH_SECCOMP] = {"seccomp filter", 0},
	[SNAPCELL_MECH_LANDLOCK] = {"landlock", 0},
	[SNAPCELL_MECH_CGROUP_LIMITS] = {"cgroup limits", 0},
};

static void set(struct snapcell_mechanism_report *r, bool ok, const char *what, const char *why)
{
	r->available = ok;
	snprintf(r->detail, sizeof(r->detail), "%s%s", what, why);
}

/* Each namespace as level.c found it; a mount that failed inside them is the mount
 * namespace's failure, and the first failure carries what to change. */
static int run_ns_probe(struct snapcell_probe *out, bool *ns_ok)
{
	struct sc_ns_check c;
	int rc = sc__ns_check(&c);
	if (rc < 0)
		return rc;
	for (int m = 0; m <= SNAPCELL_MECH_CGROUPNS; m++) {
		int e = c.err[m];
		if (m == SNAPCELL_MECH_MOUNTNS && e == 0 && c.failed == SC_NS_MOUNT_INSIDE)
			set(&out->mech[m], false, "", c.why);
		else if (m == c.failed)
			set(&out->mech[m], false, "", c.why);
		else
			set(&out->mech[m], e == 0, e == 0 ? "works" : "not tried: ",
			    e == 0 ? "" : "an earlier step failed");
	}
	*ns_ok = c.ok;
	return 0;
}

/* What the rlimits level does with this Landlock ABI, and what it lacks. */
static void landlock_rlimits_detail(struct snapcell_mechanism_report *r, long abi)
{
	const char *what =
		abi < 4	  ? "level rlimits: host files by allow-list; missing: TCP rules (ABI 4), "
			    "signal scoping (ABI 6, Linux 6.12)"
		: abi < 6 ? "level rlimits: host files by allow-list, no TCP; missing: signal and "
			    "abstract-socket scoping (ABI 6, Linux 6.12)"
			  : "level rlimits: host files by allow-list, no TCP, signals and "
			    "abstract sockets scoped to the cell";
	snprintf(r->detail, sizeof(r->detail), "ABI %d; %.140s", (int)(abi % 1000), what);
}

/* Memory cgroups as sandboxes get them (cgroup.c): one is made and removed to know. */
static void probe_cgroups(struct snapcell_mechanism_report *r)
{
	char detail[sizeof(r->detail)];
	r->available = sc__cgroup_probe(detail, sizeof(detail)) == 0;
	snprintf(r->detail, sizeof(r->detail), "%.126s%s", detail,
		 r->available ? "" : "; RLIMIT_AS per process stands in");
}

_Static_assert(SNAPCELL_MECH__COUNT <= SNAPCELL_MECH_SLOTS, "struct snapcell_probe is full");

int snapcell_probe_host(struct snapcell_probe *out, struct snapcell_error *err)
{
	if (!out)
		return sc__err(err, SNAPCELL_E_INVAL, "probe: NULL argument");
	memset(out, 0, sizeof(*out));
	for (int m = 0; m < SNAPCELL_MECH__COUNT; m++)
		out->mech[m].name = mechs[m].name;
	bool ns = false;
	int rc = run_ns_probe(out, &ns);
	if (rc < 0)
		return sc__err(err, rc, "probe namespaces in a child process");
	int sec = prctl(PR_GET_SECCOMP, 0, 0, 0, 0);
	set(&out->mech[SNAPCELL_MECH_SECCOMP], sec >= 0, "filter mode ",
	    sec == 0 ? "available" : "available, stacked on this process's own filter");
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	char v[32];
	snprintf(v, sizeof(v), "ABI %ld; ", abi);
	set(&out->mech[SNAPCELL_MECH_LANDLOCK], abi > 0, abi > 0 ? v : "",
	    abi <= 0  ? strerror(errno)
	    : abi < 6 ? "confines exec to the cell's python3; no AF_UNIX listeners (needs ABI 6)"
	    : abi < 9 ? "confines exec to the cell's python3 and AF_UNIX sockets to their cell; "
			"no AF_UNIX listeners with Python paths or a venv (needs ABI 9)"
		      : "confines exec to the cell's python3 and AF_UNIX sockets to their cell");
	out->mech[SNAPCELL_MECH_LANDLOCK].used = abi > 0;
	probe_cgroups(&out->mech[SNAPCELL_MECH_CGROUP_LIMITS]);
	bool seccomp = out->mech[SNAPCELL_MECH_SECCOMP].available;
	/* Without user namespaces, the rlimits level: Landlock confines the cells instead. */
	bool cgroups = out->mech[SNAPCELL_MECH_CGROUP_LIMITS].available;
	out->level = !seccomp	     ? SNAPCELL_ISOLATION_NONE
		     : ns && cgroups ? SNAPCELL_ISOLATION_CGROUPS
		     : ns	     ? SNAPCELL_ISOLATION_NAMESPACES
		     : abi > 0	     ? SNAPCELL_ISOLATION_RLIMITS
				     : SNAPCELL_ISOLATION_NONE;
	for (int m = 0; m <= SNAPCELL_MECH_CGROUPNS; m++)
		out->mech[m].used = out->level != SNAPCELL_ISOLATION_RLIMITS;
	out->mech[SNAPCELL_MECH_SECCOMP].used = true;
	out->mech[SNAPCELL_MECH_CGROUP_LIMITS].used = out->level == SNAPCELL_ISOLATION_CGROUPS;
	if (out->level == SNAPCELL_ISOLATION_RLIMITS)
		landlock_rlimits_detail(&out->mech[SNAPCELL_MECH_LANDLOCK], abi);
	return 0;
}
