/* The cell's filesystem: a read-only tmpfs root holding only what CPython needs, built once in
 * the template's mount namespace, and the per-cell writable mounts. Not the place for /input
 * staging or /output collection: those are the host's (src/stage). */
#define _GNU_SOURCE
#include "guest.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/auxv.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/util.h"

/* The empty directory of the root tmpfs that tops every read-only overlay (overlay()). */
#define EMPTY_LAYER "/.snapcell/empty"
/* Entries the root tmpfs may hold (sc__rootfs_build). */
#define ROOT_INODES 4096u

static const char *const dev_nodes[] = {"null", "zero", "full", "random", "urandom"};
static const char *const root_dirs[] = {"usr",	     "etc",	      "dev",
					"tmp",	     "input",	      "output",
					".snapcell", ".snapcell/out", EMPTY_LAYER + 1};
/* System data a Python program expects, bound read-only (and noexec) when the host has it:
 * the loader's cache (extension modules' shared libraries), the time-zone database (zoneinfo,
 * pytz, pandas), the CA bundle (ssl; SC_CA_BUNDLE), MIME types (mimetypes), the C.UTF-8
 * locale, DejaVu fonts, and Debian matplotlib's mpl-data and matplotlibrc, which live outside
 * dist-packages.
 * Data only: no program, no other locale, font or configuration of the host. */
static const char *const data_binds[] = {
	"/etc/ld.so.cache",	 "/usr/share/zoneinfo",	   SC_CA_BUNDLE,
	"/etc/mime.types",	 "/usr/lib/locale/C.utf8", "/usr/share/fonts/truetype/dejavu",
	"/usr/share/matplotlib", "/etc/matplotlibrc",
};

const char *const *sc__rootfs_data_paths(size_t *n)
{
	*n = SC_ARRAY_LEN(data_binds);
	return data_binds;
}

/* The directory buf (modified and restored) and its missing parents. The deepest first: a
 * bind's parents mostly exist, and each mkdir of an existing one walks the whole path from
 * / through the root's base (~100 such calls a sandbox when every parent was made in turn). */
static int mkdir_parents(char *buf)
{
	if (mkdir(buf, 0755) == 0 || errno == EEXIST)
		return 0;
	char *slash = strrchr(buf, '/');
	if (errno != ENOENT || !slash || slash == buf)
		return -errno;
	*slash = 0;
	int rc = mkdir_parents(buf);
	*slash = '/';
	if (rc < 0)
		return rc;
	return mkdir(buf, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

static int mkdir_p(const char *path)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	return mkdir_parents(buf);
}

/* mkdir_p of a path relative to the root directory rootfd. */
static int mkdir_p_at(int rootfd, const char *rel)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", rel) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (char *p = buf; *p; p++) {
		if (*p != '/' || p == buf)
			continue;
		*p = 0;
		if (mkdirat(rootfd, buf, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdirat(rootfd, buf, 0755) < 0 && errno != EEXIST ? -errno : 0;
}

/* A bind remount must repeat the flags the kernel locked on the source (nosuid, nodev,
 * noexec, ...) or it fails with EPERM inside a user namespace. */
static unsigned long locked_flags(const char *path)
{
	struct statvfs sv;
	unsigned long f = 0;
	if (statvfs(path, &sv) < 0)
		return 0;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

static int bind(const char *src, const char *dst, unsigned long extra, struct snapcell_error *err)
{
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return sc__err(err, -errno, "bind %s", src);
	unsigned long f = MS_BIND | MS_REMOUNT | MS_NOSUID | extra | locked_flags(dst);
	if (mount(NULL, dst, NULL, f, NULL) < 0)
		return sc__err(err, -errno, "remount %s", dst);
	return 0;
}

/* Appends s to the mount option text at *at (end end), a backslash before each character the
 * overlay's option parser splits on (',' between options, ':' between layers). */
static bool put_escaped(char **at, const char *end, const char *s)
{
	for (; *s; s++) {
		if ((*s == ',' || *s == ':' || *s == '\\') && *at < end)
			*(*at)++ = '\\';
		if (*at >= end)
			return false;
		*(*at)++ = *s;
	}
	return true;
}

/* The host directory src read-only at dst as an overlay of two lower layers: the root's empty
 * directory above src. statfs of an overlay reports its topmost layer's filesystem
 * (fs/overlayfs/super.c, ovl_statfs), so a cell's statvfs of the standard library, a venv or
 * /input sees the root tmpfs's size and free space, not the host disk's. A lower-only overlay
 * is read-only whatever the flags; it opens files on the layer's own mount (reads and mmap go
 * there, so the page cache stays the host's). Since Linux 5.11 a user namespace may mount one. */
static int overlay(const char *base, const char *src, const char *dst, unsigned long flags)
{
	char opts[4096], *at = opts, *end = opts + sizeof(opts) - 1;
	memcpy(at, "lowerdir=", 9);
	at += 9;
	if (!put_escaped(&at, end, base) || !put_escaped(&at, end, EMPTY_LAYER) || at >= end)
		return -ENAMETOOLONG;
	*at++ = ':';
	if (!put_escaped(&at, end, src))
		return -ENAMETOOLONG;
	*at = 0;
	return mount("overlay", dst, "overlay", flags | MS_NOSUID, opts) < 0 ? -errno : 0;
}

/* Binds a host file or directory (src) at path under base; a read-only directory goes behind
 * an overlay (above), or a plain bind where the kernel refuses one (no overlayfs; src already
 * two overlays deep, FILESYSTEM_MAX_STACK_DEPTH; mounts locked under src). */
static int bind_under(const char *base, const char *src, const char *path, unsigned long extra,
		      struct snapcell_error *err)
{
	char dst[PATH_MAX];
	struct stat st;
	if (stat(src, &st) < 0)
		return sc__err(err, -errno, "stat %s", path);
	if (snprintf(dst, sizeof(dst), "%s%s", base, path) >= (int)sizeof(dst))
		return sc__err(err, -ENAMETOOLONG, "mount %s", path);
	int rc;
	if (S_ISDIR(st.st_mode)) {
		rc = mkdir_p(dst);
	} else {
		char *slash = strrchr(dst, '/');
		*slash = 0;
		rc = mkdir_p(dst);
		*slash = '/';
		int fd = rc < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd >= 0)
			close(fd);
		else if (rc == 0)
			rc = -errno;
	}
	if (rc < 0)
		return sc__err(err, rc, "create mount point %s", dst);
	if (S_ISDIR(st.st_mode) && (extra & MS_RDONLY) && overlay(base, src, dst, extra) == 0)
		return 0;
	return bind(src, dst, extra, err);
}

/* /lib, /lib64, /bin ... are links into /usr on merged-/usr systems; recreate them. */
static void copy_top_links(int rootfd)
{
	static const char *const links[] = {"lib", "lib64", "lib32", "libx32", "bin", "sbin"};
	for (size_t i = 0; i < SC_ARRAY_LEN(links); i++) {
		char path[32], target[PATH_MAX];
		snprintf(path, sizeof(path), "/%s", links[i]);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		(void)!symlinkat(target, rootfd, links[i]);
	}
}

/* Debian's alternatives choose numpy's BLAS and LAPACK. Only the links named for a shared
 * library ("libblas.so.3-x86_64-linux-gnu") that resolve to one inside a bound library
 * directory are recreated, so the root does not list the host's other software (editors,
 * compilers, ...); the name test spares reading the other links (~400 on a desktop Debian,
 * 1-2 ms of each sandbox's start). */
static bool inside_lib_dir(const struct sc_rootfs *fs, const char *target)
{
	for (size_t i = 0; i < fs->n_lib_dirs; i++) {
		size_t len = strlen(fs->lib_dirs[i]);
		if (strncmp(target, fs->lib_dirs[i], len) == 0 && target[len] == '/' &&
		    !strstr(target, "/../") && strstr(target + len, ".so"))
			return true;
	}
	return false;
}

static int copy_alternatives(int rootfd, const struct sc_rootfs *fs, struct snapcell_error *err)
{
	DIR *d = opendir("/etc/alternatives");
	if (!d)
		return 0;
	int rc = 0, out = -1;
	if (mkdirat(rootfd, "etc/alternatives", 0755) < 0 ||
	    (out = openat(rootfd, "etc/alternatives", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		rc = sc__err(err, -errno, "mkdir /etc/alternatives");
	for (struct dirent *e; rc == 0 && (e = readdir(d));) {
		char target[PATH_MAX];
		if (!strstr(e->d_name, ".so") || (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN))
			continue;
		ssize_t n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		if (!inside_lib_dir(fs, target))
			continue;
		if (symlinkat(target, out, e->d_name) < 0)
			rc = sc__err(err, -errno, "link /etc/alternatives/%s", e->d_name);
	}
	if (out >= 0)
		close(out);
	closedir(d);
	return rc;
}

static int write_hosts(int rootfd, const char *extra)
{
	char *text;
	if (asprintf(&text, "127.0.0.1 localhost\n::1 localhost\n%s", extra ? extra : "") < 0)
		return -ENOMEM;
	int rc = sc__write_file_at(rootfd, "etc/hosts", text, 0644);
	free(text);
	return rc;
}

/* The host's public bundle (when it has one) and the sandbox's own authority after it. */
static int write_ca_bundle(const struct sc_rootfs *fs, struct snapcell_error *err)
{
	enum { BUNDLE_MAX = 2 << 20 };
	char path[PATH_MAX];
	size_t len = 0, extra = strlen(fs->extra_ca);
	char *buf = malloc(BUNDLE_MAX + extra + 2);
	if (!buf)
		return sc__err(err, -ENOMEM, "CA bundle");
	int fd = open(SC_CA_BUNDLE, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	while (fd >= 0 && len < BUNDLE_MAX && (n = read(fd, buf + len, BUNDLE_MAX - len)) > 0)
		len += (size_t)n;
	if (fd >= 0)
		close(fd);
	if (len > 0 && buf[len - 1] != '\n')
		buf[len++] = '\n';
	memcpy(buf + len, fs->extra_ca, extra + 1);
	int rc = 0;
	snprintf(path, sizeof(path), "%s/etc/ssl/certs", fs->base);
	if ((rc = mkdir_p(path)) < 0) {
		free(buf);
		return sc__err(err, rc, "mkdir %s", path);
	}
	snprintf(path, sizeof(path), "%s" SC_CA_BUNDLE, fs->base);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	rc = fd < 0 ? -errno : sc__write_all(fd, buf, len + extra);
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc < 0 ? sc__err(err, rc, "write " SC_CA_BUNDLE) : 0;
}

const char *sc__rootfs_own_loader(void)
{
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)getauxval(AT_PHDR);
	size_t n = getauxval(AT_PHNUM);
	uintptr_t bias = 0;
	const char *interp = NULL;
	for (size_t i = 0; ph && i < n; i++)
		if (ph[i].p_type == PT_PHDR)
			bias = (uintptr_t)ph - ph[i].p_vaddr;
	for (size_t i = 0; ph && i < n; i++)
		if (ph[i].p_type == PT_INTERP)
			interp = (const char *)(bias + ph[i].p_vaddr);
	return interp;
}

/* Where path lands in the root: its directory may be one of the top links copy_top_links
 * made (merged /usr: /lib64 -> usr/lib64); the file goes where that link points, which must
 * stay inside the root (relative, no ".."). */
static int root_dir_of(const char *base, const char *path, char *dir, size_t len)
{
	char link[PATH_MAX], target[PATH_MAX];
	const char *slash = strrchr(path, '/');
	if (path[0] != '/' || !slash || slash == path || strstr(path, ".."))
		return -EINVAL;
	snprintf(dir, len, "%.*s", (int)(slash - path), path);
	snprintf(link, sizeof(link), "%s%s", base, dir);
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = 0;
	if (target[0] == '/' || strstr(target, "..") || strchr(dir + 1, '/'))
		return -EINVAL;
	return snprintf(dir, len, "/%s", target) < (int)len ? 0 : -ENAMETOOLONG;
}

/* Sends all of the regular file src_fd (at most 256 MiB) to fd, in the kernel. */
static int send_file(int fd, int src_fd)
{
	struct stat st;
	if (fstat(src_fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > (256 << 20))
		return -EINVAL;
	for (off_t at = 0; at < st.st_size;) {
		ssize_t n = sendfile(fd, src_fd, &at, (size_t)(st.st_size - at));
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
	}
	return 0;
}

/* Where path lands under base (made as needed), in dst. */
static int root_place(const char *base, const char *path, char *dst, size_t len,
		      struct snapcell_error *err)
{
	char dir[PATH_MAX];
	int rc = root_dir_of(base, path, dir, sizeof(dir));
	if (rc < 0)
		return sc__err(err, rc, "place %s in the root", path);
	snprintf(dst, len, "%s%s", base, dir);
	if ((rc = mkdir_p(dst)) < 0)
		return sc__err(err, rc, "mkdir %s", dir);
	if (snprintf(dst, len, "%s%s%s", base, dir, strrchr(path, '/')) >= (int)len)
		return sc__err(err, -ENAMETOOLONG, "place %s in the root", path);
	return 0;
}

/* Copies the host file src into the root at path as mode 0111: executable, not readable
 * without the capabilities a cell lacks. */
static int put_exec_copy(const char *base, const char *path, const char *src,
			 struct snapcell_error *err)
{
	char dst[PATH_MAX];
	int rc = root_place(base, path, dst, sizeof(dst), err);
	if (rc < 0)
		return rc;
	int in SC_AUTO_CLOSE = open(src, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return sc__err(err, -errno, "read %s", src);
	int fd SC_AUTO_CLOSE =
		open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0700);
	rc = fd < 0 ? -errno : send_file(fd, in);
	if (rc == 0 && fchmod(fd, 0111) < 0)
		rc = -errno;
	return rc < 0 ? sc__err(err, rc, "copy %s into the root", path) : 0;
}

/* Binds src (a descriptor's /proc/self/fd path: the file it names, whatever its host path
 * names by now) read-only at path in the root. */
static int put_exec_bind(const char *base, const char *path, const char *src,
			 struct snapcell_error *err)
{
	char dst[PATH_MAX];
	int rc = root_place(base, path, dst, sizeof(dst), err);
	if (rc < 0)
		return rc;
	int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return sc__err(err, -errno, "create mount point %s", path);
	close(fd);
	return bind(src, dst, MS_RDONLY | MS_NODEV, err);
}

/* The ELF interpreter (PT_INTERP) a program image in buf names, or NULL (a static program, or
 * not a 64-bit ELF file we can read). Points into buf. */
static const char *image_loader(const char *buf, size_t len)
{
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)(const void *)buf;
	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phentsize != sizeof(ElfW(Phdr)) ||
	    eh->e_phoff > len || eh->e_phnum > (len - eh->e_phoff) / sizeof(ElfW(Phdr)))
		return NULL;
	for (size_t i = 0; i < eh->e_phnum; i++) {
		ElfW(Phdr) ph;
		memcpy(&ph, buf + eh->e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_INTERP || ph.p_offset >= len || ph.p_filesz == 0 ||
		    ph.p_filesz > PATH_MAX || ph.p_filesz > len - ph.p_offset ||
		    buf[ph.p_offset + ph.p_filesz - 1] != 0)
			continue;
		return buf + ph.p_offset;
	}
	return NULL;
}

/* The first bytes of src, where an ELF file keeps its program headers and PT_INTERP. */
static int read_head(const char *src, char *buf, size_t size, size_t *len,
		     struct snapcell_error *err)
{
	int fd = open(src, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, size, 0);
	int rc = n < 0 ? -errno : 0;
	if (fd >= 0)
		close(fd);
	*len = n < 0 ? 0 : (size_t)n;
	return rc < 0 ? sc__err(err, rc, "read %s", src) : 0;
}

/* The caller's extra files and links (parents made as needed); a path that exists already
 * (a link to the interpreter where it is the interpreter) is left alone. */
static int put_files(const struct sc_rootfs *fs, int rootfd, struct snapcell_error *err)
{
	char dir[PATH_MAX];
	for (size_t i = 0; i < fs->n_files; i++) {
		const struct sc_root_file *f = &fs->files[i];
		snprintf(dir, sizeof(dir), "%s", f->path + 1);
		char *slash = strrchr(dir, '/');
		int rc = slash ? (*slash = 0, mkdir_p_at(rootfd, dir)) : 0;
		if (rc == 0 && f->link && symlinkat(f->link, rootfd, f->path + 1) < 0 &&
		    errno != EEXIST)
			rc = -errno;
		if (rc == 0 && !f->link)
			rc = sc__write_file_at(rootfd, f->path + 1, f->content, 0644);
		if (rc < 0)
			return sc__err(err, rc, "make %s", f->path);
	}
	return 0;
}

/* Whether the interpreter's executable is bound rather than copied: when anyone may execute
 * it, as an installed interpreter is (the cells' uid may not be its owner's). */
static bool exe_bindable(const struct stat *st)
{
	return (st->st_mode & 0111) == 0111;
}

/* The cell's interpreter: the chosen one's ELF loader copied mode 0111, and its executable
 * bound read-only (copied likewise when exe_bindable says no). An exec of either stays
 * non-dumpable (at fs.suid_dumpable 0) though the executable is readable: the kernel marks an
 * exec so when the program or its ELF interpreter is unreadable to the process (would_dump()
 * on both in load_elf_binary), and every program a cell can exec is the unreadable loader or
 * runs through it (Landlock allows only these two files). The bind spares each sandbox a
 * copy of the executable (Debian's 6.8 MB: 2.5-7 ms of its start), and its tmpfs the room. */
static int put_interpreter(const struct sc_rootfs *fs, struct snapcell_error *err)
{
	static char head[64 << 10];
	size_t len = 0;
	/* The program headers and PT_INTERP's path sit in the first page of any usual ELF file;
	 * only a file that keeps them further on is read again, further (64 KiB copied in every
	 * sandbox's start was ~0.1 ms of it). */
	int rc = read_head(fs->interp_src, head, 4096, &len, err);
	const char *loader = rc < 0 ? NULL : image_loader(head, len);
	if (rc == 0 && !loader && len == 4096)
		rc = read_head(fs->interp_src, head, sizeof(head), &len, err);
	if (rc < 0)
		return rc;
	loader = loader ? loader : image_loader(head, len);
	if (!loader)
		return sc__err(err, -ENOEXEC, "%s names no ELF loader", fs->interp_path);
	if ((rc = put_exec_copy(fs->base, loader, loader, err)) < 0)
		return rc;
	int exe = open(fs->interp_src, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (exe < 0)
		return sc__err(err, -errno, "open %s", fs->interp_path);
	struct stat st;
	char src[32];
	snprintf(src, sizeof(src), "/proc/self/fd/%d", exe);
	rc = fstat(exe, &st) < 0 ? -errno : S_ISREG(st.st_mode) ? 0 : -ENOEXEC;
	if (rc < 0)
		sc__err(err, rc, "open %s", fs->interp_path);
	else if (exe_bindable(&st))
		rc = put_exec_bind(fs->base, fs->interp_path, src, err);
	else
		rc = put_exec_copy(fs->base, fs->interp_path, src, err);
	close(exe);
	return rc;
}

/* A system data file of at most DATA_COPY_MAX bytes is copied into the root (a bind's statfs
 * would report the host disk's figures, and a file cannot be an overlay); a directory, or a
 * bigger file, is bound. Read-only and noexec either way. */
static int put_data(const char *base, const char *path, struct snapcell_error *err)
{
	enum { DATA_COPY_MAX = 1 << 20 };
	char dst[PATH_MAX];
	struct stat st;
	if (stat(path, &st) < 0)
		return sc__err(err, -errno, "stat %s", path);
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > DATA_COPY_MAX)
		return bind_under(base, path, path, MS_RDONLY | MS_NODEV | MS_NOEXEC, err);
	snprintf(dst, sizeof(dst), "%s%s", base, path);
	char *slash = strrchr(dst, '/');
	*slash = 0;
	int rc = mkdir_p(dst);
	*slash = '/';
	int in = rc < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC);
	int fd =
		in < 0 ? -1 : open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (rc == 0)
		rc = fd < 0 ? -errno : send_file(fd, in);
	if (fd >= 0)
		close(fd);
	if (in >= 0)
		close(in);
	if (rc < 0)
		return sc__err(err, rc, "copy %s into the root", path);
	/* Bound onto itself: read-only and noexec as the binds are, the root tmpfs's figures. */
	return bind(dst, dst, MS_RDONLY | MS_NODEV | MS_NOEXEC, err);
}

static int populate(const struct sc_rootfs *fs, int rootfd, struct snapcell_error *err)
{
	char path[PATH_MAX];
	int rc;
	for (size_t i = 0; i < SC_ARRAY_LEN(root_dirs); i++)
		if (mkdirat(rootfd, root_dirs[i], 0755) < 0 && errno != EEXIST)
			return sc__err(err, -errno, "mkdir /%s", root_dirs[i]);
	fchmodat(rootfd, "tmp", 01777, 0);
	/* One tmpfs per cell serves both: POSIX shared memory lands in the cell's /tmp. */
	if (symlinkat("/tmp", rootfd, "dev/shm") < 0)
		return sc__err(err, -errno, "link /dev/shm");
	copy_top_links(rootfd);
	for (size_t i = 0; i < SC_ARRAY_LEN(dev_nodes); i++) {
		snprintf(path, sizeof(path), "/dev/%s", dev_nodes[i]);
		if ((rc = bind_under(fs->base, path, path, MS_NOEXEC, err)) < 0)
			return rc;
	}
	for (size_t i = 0; i < fs->n_ro_binds; i++) {
		const struct sc_bind *bd = &fs->ro_binds[i];
		if ((rc = bind_under(fs->base, bd->src, bd->dst, MS_RDONLY | MS_NODEV, err)) < 0)
			return rc;
	}
	for (size_t i = 0; i < SC_ARRAY_LEN(data_binds); i++)
		if ((!fs->extra_ca || strcmp(data_binds[i], SC_CA_BUNDLE) != 0) &&
		    access(data_binds[i], R_OK) == 0 &&
		    (rc = put_data(fs->base, data_binds[i], err)) < 0)
			return rc;
	if (fs->n_lib_dirs && (rc = copy_alternatives(rootfd, fs, err)) < 0)
		return rc;
	if ((rc = sc__write_file_at(rootfd, "etc/passwd",
				    "root:x:0:0:sandbox:/tmp:/nonexistent\n"
				    "nobody:x:65534:65534:nobody:/nonexistent:/nonexistent\n",
				    0644)) < 0 ||
	    (rc = sc__write_file_at(rootfd, "etc/group", "root:x:0:\nnogroup:x:65534:\n", 0644)) <
		    0 ||
	    (rc = sc__write_file_at(rootfd, "etc/hostname", "snapcell\n", 0644)) < 0 ||
	    (rc = write_hosts(rootfd, fs->hosts)) < 0 ||
	    /* Names come from /etc/hosts alone: no resolver, so no DNS packet is ever made. */
	    (rc = sc__write_file_at(rootfd, "etc/nsswitch.conf", "hosts: files\n", 0644)) < 0)
		return sc__err(err, rc, "write /etc");
	if (fs->extra_ca && (rc = write_ca_bundle(fs, err)) < 0)
		return rc;
	if (fs->interp_path && (rc = put_interpreter(fs, err)) < 0)
		return rc;
	if ((rc = put_files(fs, rootfd, err)) < 0)
		return rc;
	snprintf(path, sizeof(path), "%s" SC_OUT_BASE, fs->base);
	return bind(fs->out_dir, path, MS_NODEV | MS_NOEXEC, err);
}

int sc__rootfs_build(const struct sc_rootfs *fs, struct snapcell_error *err)
{
	/* Nothing we mount may propagate back to the host's namespace. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return sc__err(err, -errno, "make / private");
	/* 8 MiB for /etc, the mount points and the loader's copy, and room for the
	 * executable's copy where it is not bound. */
	struct stat st = {0};
	if (fs->interp_src && stat(fs->interp_src, &st) < 0)
		return sc__err(err, -errno, "stat %s", fs->interp_path);
	unsigned long long exe_bytes = exe_bindable(&st) ? 0 : (unsigned long long)st.st_size;
	/* And a fixed inode cap: tmpfs's default is half the host's pages, which statfs of the
	 * root (and of every overlay it tops) would tell a cell, the host's RAM to the page. The
	 * root holds 69 entries with a workspace and a Python path. */
	char opts[96];
	snprintf(opts, sizeof(opts), "mode=0755,size=%llu,nr_inodes=%u", (8ull << 20) + exe_bytes,
		 ROOT_INODES);
	if (mount("tmpfs", fs->base, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return sc__err(err, -errno, "mount root tmpfs on %s", fs->base);
	int rootfd = open(fs->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0)
		return sc__err(err, -errno, "open %s", fs->base);
	int rc = populate(fs, rootfd, err);
	close(rootfd);
	if (rc < 0)
		return rc;
	/* The old root goes to the root's /tmp, not under "/" (pivot_root(".", ".")), where a
	 * lookup of "/.." would reach it until it is detached (sc__rootfs_detach_host). */
	if (chdir(fs->base) < 0)
		return sc__err(err, -errno, "chdir %s", fs->base);
	if (syscall(SYS_pivot_root, ".", SC_HOST_ROOT_AT + 1) < 0)
		return sc__err(err, -errno, "pivot_root");
	if (chdir("/") < 0)
		return sc__err(err, -errno, "chdir /");
	if (mount(NULL, "/", NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
	    0)
		return sc__err(err, -errno, "remount / read-only");
	return 0;
}

int sc__rootfs_detach_host(void)
{
	return umount2(SC_HOST_ROOT_AT, MNT_DETACH) < 0 && errno != EINVAL ? -errno : 0;
}

/* One run's files over the workspace at /input: an overlay of three lower layers, the root's
 * empty directory on top (statfs reports the root tmpfs, as for /input itself), the run's
 * directory, then the /input mount as it is. Read-only like it; the host refused names that
 * clash with the workspace, so nothing of it is shadowed. Overlays stack two deep at most
 * (FILESYSTEM_MAX_STACK_DEPTH): /input is one above the work directory's filesystem, so
 * where that is an overlay too (a container's /tmp) this fails with EINVAL, and the run. */
static int overlay_input(const char *layer, struct snapcell_error *err)
{
	char opts[4096], *at = opts, *end = opts + sizeof(opts) - 1;
	memcpy(at, "lowerdir=", 9);
	at += 9;
	bool fits = put_escaped(&at, end, EMPTY_LAYER) && at < end;
	if (fits)
		*at++ = ':';
	fits = fits && put_escaped(&at, end, SC_OUT_BASE "/") && put_escaped(&at, end, layer) &&
	       at + 8 < end;
	if (!fits)
		return sc__err(err, -ENAMETOOLONG, "overlay /input");
	memcpy(at, ":/input", 8);
	if (mount("overlay", "/input", "overlay", MS_RDONLY | MS_NOSUID | MS_NODEV, opts) < 0)
		return sc__err(err, -errno, "overlay the run's files on /input");
	return 0;
}

int sc__rootfs_enter_cell(const char *out_name, uint64_t tmp_bytes, const char *tmp_live,
			  const char *input_layer, int *tmp_root, struct snapcell_error *err)
{
	char opts[96], out[PATH_MAX];
	snprintf(opts, sizeof(opts), "mode=1777,size=%llu,nr_inodes=%llu",
		 (unsigned long long)tmp_bytes, (unsigned long long)(tmp_bytes / 4096 + 64));
	/* No access times (reading never changes them): a cell reset in place gets its /tmp's
	 * times back when a run set them (guest/reset_leftovers.c), and a run that only read it
	 * must not have the reset change them, and with them the change time, for nothing. */
	if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_NOATIME, opts) <
	    0)
		return sc__err(err, -errno, "mount /tmp");
	/* The code sees only tmp_live of that tmpfs, bound over its root: the root, kept as a
	 * descriptor, can hold a session family's other /tmp trees beside it, on the same
	 * filesystem (a rename moves one in or out) and under the same size limit. */
	int fd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* Above the descriptors the cell moves to 0-5 (its own ends are above 9 too). */
	*tmp_root = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10);
	if (fd >= 0)
		close(fd);
	if (*tmp_root < 0)
		return sc__err(err, -errno, "open /tmp");
	char live[PATH_MAX];
	snprintf(live, sizeof(live), "/tmp/%s", tmp_live);
	if (mkdirat(*tmp_root, tmp_live, 0700) < 0 || fchmodat(*tmp_root, tmp_live, 01777, 0) < 0)
		return sc__err(err, -errno, "mkdir %s", live);
	/* A bind keeps the tmpfs mount's nosuid, nodev and noexec. */
	if (mount(live, "/tmp", NULL, MS_BIND, NULL) < 0)
		return sc__err(err, -errno, "bind %s", live);
	snprintf(out, sizeof(out), SC_OUT_BASE "/%s", out_name);
	int rc = bind(out, "/output", MS_NODEV | MS_NOEXEC, err);
	if (rc == 0 && input_layer)
		rc = overlay_input(input_layer, err);
	if (rc < 0)
		return rc;
	if (umount2(SC_OUT_BASE, MNT_DETACH) < 0)
		return sc__err(err, -errno, "detach " SC_OUT_BASE);
	return 0;
}
