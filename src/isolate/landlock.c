/* The cell's Landlock domain: of all files, only the interpreter the root holds for it (and
 * that program's loader) may be executed. Seccomp cannot see the path execve names, so this
 * is what lets the seccomp policy allow execve at all; it also keeps the cell's AF_UNIX
 * sockets to its own where the kernel can. Not a read or write policy: the mount layout is
 * that. */
#define _GNU_SOURCE
#include "guest.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

int sc__landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
	return abi > 0 ? (int)abi : 0;
}

/* LANDLOCK_ACCESS_FS_EXECUTE is checked when the kernel opens a file for execution: the
 * program execve names and its ELF interpreter (PT_INTERP, opened the same way), not the
 * shared libraries the loader then maps, nor mmap(PROT_EXEC), which seccomp and the noexec
 * mounts leave to what code could do anyway. Handling only EXECUTE leaves every read and
 * write to the mounts. */
int sc__landlock_exec_ruleset(const char *const *paths, size_t n, bool unix_scope,
			      struct snapcell_error *err)
{
	/* struct landlock_ruleset_attr as of ABI 6; <linux/landlock.h> here may be older. The
	 * kernel reads only the size it is given, so ABI 1 gets the first field. */
	struct {
		uint64_t handled_access_fs, handled_access_net, scoped;
	} attr = {.handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE};
	size_t size = sizeof(attr.handled_access_fs);
	/* Handled with no rule: a pathname socket answers only if the cell's own domain made it,
	 * never the host's in a bound directory (a read-only mount does not stop a connect),
	 * also for datagrams sent through a socketpair with an address. */
	if (sc__landlock_abi() >= SC_LANDLOCK_ABI_UNIX_PATH)
		attr.handled_access_fs |= 1ULL << 16; /* LANDLOCK_ACCESS_FS_RESOLVE_UNIX */
	if (unix_scope) {
		/* Handled with no rule: no TCP bind at all (ABI 4). Abstract sockets: a cell
		 * connects only to those its own domain made, never another cell's (ABI 6). */
		attr.handled_access_net = 1ULL << 0; /* LANDLOCK_ACCESS_NET_BIND_TCP */
		attr.scoped = 1ULL << 0;	     /* LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET */
		size = sizeof(attr);
	}
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (rs < 0)
		return sc__err(err, -errno, "landlock ruleset");
	int high = fcntl(rs, F_DUPFD_CLOEXEC, 10);
	close(rs);
	if (high < 0)
		return sc__err(err, -errno, "landlock ruleset");
	for (size_t i = 0; i < n; i++) {
		struct landlock_path_beneath_attr rule = {
			.allowed_access = LANDLOCK_ACCESS_FS_EXECUTE,
			.parent_fd = open(paths[i], O_PATH | O_CLOEXEC)};
		int rc = rule.parent_fd < 0 ? -errno
			 : syscall(SYS_landlock_add_rule, high, LANDLOCK_RULE_PATH_BENEATH, &rule,
				   0) < 0
				 ? -errno
				 : 0;
		if (rule.parent_fd >= 0)
			close(rule.parent_fd);
		if (rc < 0) {
			close(high);
			return sc__err(err, rc, "landlock rule for %s", paths[i]);
		}
	}
	return high;
}

int sc__landlock_restrict(int ruleset_fd)
{
	/* no_new_privs is already set (sc__caps_lock), as landlock_restrict_self requires. */
	return syscall(SYS_landlock_restrict_self, ruleset_fd, 0) < 0 ? -errno : 0;
}
