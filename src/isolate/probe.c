/* What this host offers, tested for real in a throwaway child (an unshare that works there
 * works for the helper). Reports; changes nothing in the caller. */
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

/* In the child: 0 or errno for each namespace, the user namespace first. */
static void probe_namespaces(int fd)
{
	int res[SNAPCELL_MECH_CGROUPNS + 1];
	res[SNAPCELL_MECH_USERNS] = unshare(CLONE_NEWUSER) < 0 ? errno : 0;
	for (int m = SNAPCELL_MECH_MOUNTNS; m <= SNAPCELL_MECH_CGROUPNS; m++)
		res[m] = res[SNAPCELL_MECH_USERNS]	    ? res[SNAPCELL_MECH_USERNS]
			 : unshare(mechs[m].clone_flag) < 0 ? errno
							    : 0;
	(void)!write(fd, res, sizeof(res));
	_exit(0);
}

static void set(struct snapcell_mechanism_report *r, bool ok, const char *what, const char *why)
{
	r->available = ok;
	snprintf(r->detail, sizeof(r->detail), "%s%s", what, why);
}

static int run_ns_probe(struct snapcell_probe *out)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		probe_namespaces(p[1]);
	}
	close(p[1]);
	int res[SNAPCELL_MECH_CGROUPNS + 1];
	int rc = pid < 0 ? -errno : sc__read_all(p[0], res, sizeof(res));
	close(p[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	if (rc < 0)
		return rc;
	for (int m = 0; m <= SNAPCELL_MECH_CGROUPNS; m++)
		set(&out->mech[m], res[m] == 0, res[m] ? "unshare: " : "works",
		    res[m] ? strerror(res[m]) : "");
	return 0;
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
	int rc = run_ns_probe(out);
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
	bool ns = true;
	for (int m = 0; m <= SNAPCELL_MECH_CGROUPNS; m++) {
		ns = ns && out->mech[m].available;
		out->mech[m].used = true;
	}
	out->mech[SNAPCELL_MECH_SECCOMP].used = true;
	out->level = !ns || !out->mech[SNAPCELL_MECH_SECCOMP].available ? SNAPCELL_ISOLATION_NONE
		     : out->mech[SNAPCELL_MECH_CGROUP_LIMITS].available
			     ? SNAPCELL_ISOLATION_CGROUPS
			     : SNAPCELL_ISOLATION_NAMESPACES;
	out->mech[SNAPCELL_MECH_CGROUP_LIMITS].used = out->level == SNAPCELL_ISOLATION_CGROUPS;
	return 0;
}
