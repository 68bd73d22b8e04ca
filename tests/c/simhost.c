/* Runs a command as it would run on a host where snapcell's peers refuse to start, for the
 * rlimits level's tests (tests/scripts/no-userns-test.sh). Each option narrows this process
 * (and everything it starts) the way such a host does:
 *   --docker-seccomp  a filter shaped like Docker's default profile: unshare and clone with any
 *                     CLONE_NEW* flag fail with EPERM (clone3 with ENOSYS, so glibc falls back
 *                     to clone, whose flags a filter can see)
 *   --userns-nocaps   user namespaces allowed, but nothing a capability inside one would allow:
 *                     unshare of any other namespace, mount, umount2 and pivot_root fail with
 *                     EPERM (how Ubuntu 24.04's AppArmor restriction leaves them; this kernel
 *                     has no AppArmor)
 *   --no-sys-admin    CAP_SYS_ADMIN dropped from every set, bounding included (root in a
 *                     container without it)
 *   --no-landlock     the Landlock calls fail with ENOSYS (a kernel without Landlock)
 *   --no-userfaultfd  userfaultfd fails with ENOSYS (a kernel built without it)
 *   --no-pagemap-scan the PAGEMAP_SCAN ioctl fails with ENOTTY (a kernel before 6.7, whose
 *                     pagemap has no ioctls)
 *   --no-procmap-query the PROCMAP_QUERY ioctl fails with ENOTTY (a kernel before 6.11, whose
 *                     maps has no ioctls)
 * Usage: simhost [OPTION]... -- COMMAND [ARG]... */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

/* <linux/fs.h> since 6.7 (src/util/pagemap_scan.h): _IOWR('f', 16, struct pm_scan_arg). */
#ifndef PAGEMAP_SCAN
#define PAGEMAP_SCAN _IOWR('f', 16, uint64_t[12])
#endif
/* Since 6.11: _IOWR('f', 17, struct procmap_query). */
#ifndef PROCMAP_QUERY
#define PROCMAP_QUERY _IOWR('f', 17, uint64_t[13])
#endif

#define NEW_NS                                                                                     \
	(CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | \
	 CLONE_NEWCGROUP | 0x00000080 /* CLONE_NEWTIME */)

static int docker_rules(scmp_filter_ctx ctx)
{
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 0);
	for (unsigned bit = 1; rc == 0 && bit; bit <<= 1)
		if (NEW_NS & bit)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
					      SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit));
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	return rc;
}

static int nocaps_rules(scmp_filter_ctx ctx)
{
	unsigned others = NEW_NS & ~(unsigned)CLONE_NEWUSER;
	int rc = 0;
	for (unsigned bit = 1; rc == 0 && bit; bit <<= 1)
		if (others & bit) {
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(unshare), 1,
					      SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit));
			if (rc == 0)
				rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone),
						      1, SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit));
		}
	static const char *const calls[] = {"mount",   "umount2",   "pivot_root", "fsopen",
					    "fsmount", "open_tree", "move_mount", "mount_setattr"};
	for (size_t i = 0; rc == 0 && i < sizeof(calls) / sizeof(calls[0]); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
				      seccomp_syscall_resolve_name(calls[i]), 0);
	if (rc == 0)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	return rc;
}

static int drop_sys_admin(void)
{
	cap_value_t admin = CAP_SYS_ADMIN;
	cap_t caps = cap_get_proc();
	int rc = caps ? 0 : -1;
	if (rc == 0)
		rc = cap_set_flag(caps, CAP_EFFECTIVE, 1, &admin, CAP_CLEAR) |
		     cap_set_flag(caps, CAP_PERMITTED, 1, &admin, CAP_CLEAR) |
		     cap_set_flag(caps, CAP_INHERITABLE, 1, &admin, CAP_CLEAR);
	if (rc == 0)
		rc = prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0);
	if (rc == 0)
		rc = cap_set_proc(caps);
	if (caps)
		cap_free(caps);
	return rc;
}

int main(int argc, char **argv)
{
	int i = 1;
	bool docker = false, nocaps = false, noadmin = false, nolandlock = false, nouffd = false,
	     noscan = false, noquery = false;
	for (; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "--docker-seccomp"))
			docker = true;
		else if (!strcmp(argv[i], "--userns-nocaps"))
			nocaps = true;
		else if (!strcmp(argv[i], "--no-sys-admin"))
			noadmin = true;
		else if (!strcmp(argv[i], "--no-landlock"))
			nolandlock = true;
		else if (!strcmp(argv[i], "--no-userfaultfd"))
			nouffd = true;
		else if (!strcmp(argv[i], "--no-pagemap-scan"))
			noscan = true;
		else if (!strcmp(argv[i], "--no-procmap-query"))
			noquery = true;
		else
			break;
	}
	if (i >= argc - 1 || strcmp(argv[i], "--")) {
		fprintf(stderr, "usage: simhost [--docker-seccomp] [--userns-nocaps] "
				"[--no-sys-admin] [--no-landlock] [--no-userfaultfd] "
				"[--no-pagemap-scan] [--no-procmap-query] -- COMMAND [ARG]...\n");
		return 2;
	}
	if (noadmin && drop_sys_admin() < 0) {
		perror("simhost: drop CAP_SYS_ADMIN");
		return 1;
	}
	if (docker || nocaps || nolandlock || nouffd || noscan || noquery) {
		scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
		int rc = ctx ? 0 : -ENOMEM;
		if (rc == 0 && docker)
			rc = docker_rules(ctx);
		if (rc == 0 && nocaps)
			rc = nocaps_rules(ctx);
		if (rc == 0 && nolandlock)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS),
					      SCMP_SYS(landlock_create_ruleset), 0);
		if (rc == 0 && nouffd)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(userfaultfd),
					      0);
		if (rc == 0 && noscan)
			rc = seccomp_rule_add(
				ctx, SCMP_ACT_ERRNO(ENOTTY), SCMP_SYS(ioctl), 1,
				SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)PAGEMAP_SCAN));
		if (rc == 0 && noquery)
			rc = seccomp_rule_add(
				ctx, SCMP_ACT_ERRNO(ENOTTY), SCMP_SYS(ioctl), 1,
				SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, (uint32_t)PROCMAP_QUERY));
		if (rc == 0)
			rc = seccomp_load(ctx); /* sets no_new_privs, as a container runtime does */
		if (ctx)
			seccomp_release(ctx);
		if (rc < 0) {
			fprintf(stderr, "simhost: seccomp: %s\n", strerror(-rc));
			return 1;
		}
	}
	execvp(argv[i + 1], argv + i + 1);
	perror("simhost: exec");
	return 127;
}
