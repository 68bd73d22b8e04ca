/* The rlimits level's filesystem and network policy: without a user namespace there is no
 * root of the cell's own, so the cell sees the host's filesystem, and a Landlock domain (one
 * per cell, since each has its own directories) is what confines it: read-only access to
 * what the namespaces level's root exposes, read and write access to the cell's own /tmp and
 * /output directories only, no TCP bind or connect (ABI 4), and from ABI 6 signals and
 * abstract AF_UNIX sockets kept within the cell's domain. Every access right this ABI knows is
 * handled, so what no rule grants is denied. */
#define _GNU_SOURCE
#include "guest.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

/* The filesystem rights of each ABI (linux/landlock.h may be older than the kernel). */
#define FS_ABI1	      ((1ULL << 13) - 1) /* EXECUTE .. MAKE_SYM */
#define FS_REFER      (1ULL << 13)	 /* ABI 2 */
#define FS_TRUNCATE   (1ULL << 14)	 /* ABI 3 */
#define FS_IOCTL_DEV  (1ULL << 15)	 /* ABI 5 */
#define FS_EXECUTE    (1ULL << 0)
#define FS_WRITE_FILE (1ULL << 1)
#define FS_READ_FILE  (1ULL << 2)
#define FS_READ_DIR   (1ULL << 3)
#define FS_MAKE_CHAR  (1ULL << 6)
#define FS_MAKE_BLOCK (1ULL << 11)
#define NET_BIND_TCP  (1ULL << 0) /* ABI 4 */
#define NET_CONNECT   (1ULL << 1)
#define SCOPE_UNIX    (1ULL << 0) /* ABI 6 */
#define SCOPE_SIGNAL  (1ULL << 1)

/* Devices a Python program opens: read and write, as in the namespaces level's /dev. */
static const char *const devices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
				      "/dev/urandom"};

static uint64_t fs_handled(int abi)
{
	uint64_t fs = FS_ABI1;
	if (abi >= 2)
		fs |= FS_REFER;
	if (abi >= 3)
		fs |= FS_TRUNCATE;
	if (abi >= 5)
		fs |= FS_IOCTL_DEV;
	return fs;
}

/* A rule for path: a directory gets access, a file only its file rights. A path the host does
 * not have is left out (the data directories are optional). */
static int add_path(int ruleset, const char *path, uint64_t access, uint64_t file_rights,
		    struct snapcell_error *err)
{
	struct landlock_path_beneath_attr rule = {
		.parent_fd = open(path, O_PATH | O_CLOEXEC),
	};
	struct stat st;
	if (rule.parent_fd < 0)
		return errno == ENOENT ? 0 : sc__err(err, -errno, "landlock: open %s", path);
	int rc = fstat(rule.parent_fd, &st) < 0 ? -errno : 0;
	rule.allowed_access = S_ISDIR(st.st_mode) ? access : access & file_rights;
	if (rc == 0 &&
	    syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0) < 0)
		rc = -errno;
	close(rule.parent_fd);
	return rc < 0 ? sc__err(err, rc, "landlock rule for %s", path) : 0;
}

int sc__hostfs_restrict(const struct sc_hostfs *fs, struct snapcell_error *err)
{
	int abi = sc__landlock_abi();
	if (abi < 1)
		return sc__err(err, SNAPCELL_E_ISOLATION, "level rlimits needs Landlock");
	struct {
		uint64_t handled_access_fs, handled_access_net, scoped;
	} attr = {.handled_access_fs = fs_handled(abi)};
	size_t size = sizeof(attr.handled_access_fs);
	if (abi >= 4) {
		attr.handled_access_net = NET_BIND_TCP | NET_CONNECT; /* no rule: no TCP */
		size = 2 * sizeof(uint64_t);
	}
	if (abi >= SC_LANDLOCK_ABI_SCOPE) {
		attr.scoped = SCOPE_UNIX | SCOPE_SIGNAL;
		size = sizeof(attr);
	}
	int rs = (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
	if (rs < 0)
		return sc__err(err, -errno, "landlock ruleset");
	uint64_t file_rights = FS_EXECUTE | FS_WRITE_FILE | FS_READ_FILE |
			       (attr.handled_access_fs & (FS_TRUNCATE | FS_IOCTL_DEV));
	uint64_t read = FS_READ_FILE | FS_READ_DIR;
	/* Everything in the cell's own directories but executing and device nodes (seccomp
	 * refuses those too). */
	uint64_t own = attr.handled_access_fs &
		       ~(FS_EXECUTE | FS_MAKE_CHAR | FS_MAKE_BLOCK | FS_IOCTL_DEV);
	uint64_t dev = FS_READ_FILE | FS_WRITE_FILE | (attr.handled_access_fs & FS_IOCTL_DEV);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < fs->n_read; i++)
		rc = add_path(rs, fs->read[i], read, file_rights, err);
	for (size_t i = 0; rc == 0 && i < SC_ARRAY_LEN(devices); i++)
		rc = add_path(rs, devices[i], dev, file_rights, err);
	if (rc == 0)
		rc = add_path(rs, fs->tmp_dir, own, file_rights, err);
	if (rc == 0)
		rc = add_path(rs, fs->out_dir, own, file_rights, err);
	/* no_new_privs is already set (sc__caps_lock), as landlock_restrict_self requires. */
	if (rc == 0 && syscall(SYS_landlock_restrict_self, rs, 0) < 0)
		rc = sc__err(err, -errno, "landlock restrict");
	close(rs);
	return rc;
}
