/* Which isolation level this host can give: whether the namespaces level works here for real
 * (each namespace made, the id maps written, a mount made inside, in a throwaway child), and
 * when it does not, what is wrong and what to change, in words a user can act on. The
 * rlimits level needs only seccomp and Landlock (checked by probe.c and the helper). */
#define _GNU_SOURCE
#include "host.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

static const int ns_flags[SC_NS_STEPS] = {
	CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
	CLONE_NEWIPC,  CLONE_NEWUTS, CLONE_NEWCGROUP, 0 /* the mount inside */,
};

/* A one-line /proc/sys value, or -1 when the file is absent. */
static long sysctl_value(const char *path)
{
	char buf[32];
	if (sc__read_file_at(AT_FDCWD, path, buf, sizeof(buf)) <= 0)
		return -1;
	return strtol(buf, NULL, 10);
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	int rc = sc__write_all(fd, text, strlen(text));
	close(fd);
	return rc;
}

static int inside(const char *uid_map, const char *gid_map);

/* In the child: errno of each step in order, 0 for done, -1 for not tried; only system calls
 * (the caller may be multi-threaded), the maps formatted before the fork. */
static _Noreturn void check_child(int fd, const char *uid_map, const char *gid_map)
{
	int res[SC_NS_STEPS];
	for (int i = 0; i < SC_NS_STEPS; i++)
		res[i] = -1;
	int i = 0;
	for (; i < SC_NS_STEPS - 1; i++) {
		res[i] = unshare(ns_flags[i]) < 0 ? errno : 0;
		if (res[i])
			break;
	}
	/* What the template does first: be root of the namespace and mount. Ubuntu's AppArmor
	 * restriction lets the unshare succeed and takes the capabilities away. */
	if (i == SC_NS_STEPS - 1)
		res[i] = inside(uid_map, gid_map);
	(void)!write(fd, res, sizeof(res));
	_exit(0);
}

/* Why a user namespace cannot be made, and what to change. */
static void userns_why(int e, char *why, size_t len)
{
	long max = sysctl_value("/proc/sys/user/max_user_namespaces");
	long clone = sysctl_value("/proc/sys/kernel/unprivileged_userns_clone");
	long aa = sysctl_value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
	long filtered = -1;
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Seccomp: %ld", &filtered) == 1)
			break;
	if (f)
		fclose(f);
	if (e == ENOSPC && max == 0)
		snprintf(why, len,
			 "disabled (user.max_user_namespaces=0): set it above 0 (sysctl -w "
			 "user.max_user_namespaces=15000) for level namespaces");
	else if (e == ENOSPC)
		snprintf(why, len,
			 "none left (user.max_user_namespaces=%ld reached): raise it for level "
			 "namespaces",
			 max);
	else if ((e == EPERM || e == EACCES) && clone == 0)
		snprintf(
			why, len,
			"disabled for unprivileged users (kernel.unprivileged_userns_clone=0): set "
			"it to 1 for level namespaces");
	else if ((e == EPERM || e == EACCES) && aa == 1)
		snprintf(why, len,
			 "refused by AppArmor (kernel.apparmor_restrict_unprivileged_userns=1): "
			 "allow userns for snapcell-cell in a profile for level namespaces");
	else if ((e == EPERM || e == EACCES) && filtered > 0)
		snprintf(why, len,
			 "refused by a seccomp filter (a container's default profile, e.g. "
			 "Docker's): allow unshare/clone of user namespaces for level namespaces");
	else if (e == EINVAL)
		snprintf(why, len, "not in this kernel (CONFIG_USER_NS): no level namespaces");
	else
		snprintf(why, len, "unshare: %s", strerror(e));
}

static void mount_why(int e, char *why, size_t len)
{
	long aa = sysctl_value("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
	if (e == EPERM || e == EACCES)
		snprintf(why, len,
			 "no capabilities inside a user namespace (%s)%s: lift that for level "
			 "namespaces",
			 strerror(e),
			 aa == 1 ? ", AppArmor's restriction "
				   "(kernel.apparmor_restrict_unprivileged_userns=1)"
				 : ", as under Ubuntu's AppArmor restriction");
	else
		snprintf(why, len, "mount inside a user namespace: %s", strerror(e));
}

/* Be root of the namespaces the clone made and mount, as the template does first. */
static int inside(const char *uid_map, const char *gid_map)
{
	if (write_file("/proc/self/setgroups", "deny") < 0 && errno != ENOENT)
		return errno;
	if (write_file("/proc/self/uid_map", uid_map) < 0 ||
	    write_file("/proc/self/gid_map", gid_map) < 0)
		return errno;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k") < 0)
		return errno;
	return 0;
}

/* What the helper's spawn does, at once: a raw clone into every namespace (which works from a
 * multi-threaded caller too, where unshare(CLONE_NEWUSER) would not), then the maps and a
 * mount. 0 when all worked; otherwise the steps are tried one by one to say which failed. */
static int clone_check(const char *uid_map, const char *gid_map)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return errno;
	long pid = syscall(SYS_clone,
			   CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
				   CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | SIGCHLD,
			   NULL, NULL, NULL, 0);
	if (pid == 0) {
		int e = inside(uid_map, gid_map);
		(void)!write(p[1], &e, sizeof(e));
		_exit(0);
	}
	int e = pid < 0 ? errno : -1;
	close(p[1]);
	if (pid > 0 && sc__read_all(p[0], &e, sizeof(e)) < 0)
		e = EPIPE;
	close(p[0]);
	if (pid > 0)
		waitpid((pid_t)pid, NULL, 0);
	return e;
}

int sc__ns_check(struct sc_ns_check *out)
{
	memset(out, 0, sizeof(*out));
	char uid_map[32], gid_map[32];
	snprintf(uid_map, sizeof(uid_map), "0 %u 1\n", (unsigned)geteuid());
	snprintf(gid_map, sizeof(gid_map), "0 %u 1\n", (unsigned)getegid());
	int clone_err = clone_check(uid_map, gid_map);
	if (clone_err == 0) {
		out->ok = true;
		out->failed = -1;
		return 0;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		check_child(p[1], uid_map, gid_map);
	}
	int saved = errno;
	close(p[1]);
	int rc = pid < 0 ? -saved : sc__read_all(p[0], out->err, sizeof(out->err));
	close(p[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	if (rc < 0)
		return rc;
	out->failed = -1;
	for (int i = 0; i < SC_NS_STEPS && out->failed < 0; i++)
		if (out->err[i] != 0)
			out->failed = i;
	if (out->failed < 0) { /* each step worked alone, the clone of them all did not */
		snprintf(out->why, sizeof(out->why), "clone into new namespaces: %s",
			 clone_err > 0 ? strerror(clone_err) : "no report");
		out->failed = SC_NS_USER;
		return 0;
	}
	int e = out->err[out->failed];
	if (out->failed == SC_NS_USER)
		userns_why(e, out->why, sizeof(out->why));
	else if (out->failed == SC_NS_MOUNT_INSIDE || e == EPERM || e == EACCES)
		mount_why(e, out->why, sizeof(out->why)); /* a user namespace without caps */
	else
		snprintf(out->why, sizeof(out->why), "unshare: %s",
			 e > 0 ? strerror(e) : "not tried");
	return 0;
}

int sc__landlock_version(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1 /* _VERSION */);
	return abi > 0 ? (int)abi : 0;
}

int sc__ns_check_once(struct sc_ns_check *out)
{
	/* Namespaces that worked once keep working (a later failure is the spawn's clear
	 * error); a host without them is checked again each time, for 0.3 ms. */
	static _Atomic bool worked;
	if (worked) {
		memset(out, 0, sizeof(*out));
		out->ok = true;
		out->failed = -1;
		return 0;
	}
	int rc = sc__ns_check(out);
	if (rc == 0 && out->ok)
		worked = true;
	return rc;
}
