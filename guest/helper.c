/* The helper, snapcell-cell: the program the host starts in the sandbox's namespaces. It greets
 * the host, reads the setup message, builds the read-only root and pivots into it, then execs
 * the chosen interpreter in isolated mode to import the guest module (guest/module.c), which
 * becomes the template. It links no Python: which CPython runs is the setup message's word.
 * Not the template: it parks no cell and runs no Python. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "guest.h"
#include "rpc/control.h"
#include "util/cleanup.h"
#include "util/util.h"

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080 /* Linux 5.6; older headers lack it */
#endif

#define CTL SC_CONTROL_FD

/* What the interpreter runs: the guest module loaded from its file, never from a sys.path
 * entry (the cells' sys.path stays the interpreter's own), with no name left in __main__.
 * `_imp.create_dynamic` is what importlib's ExtensionFileLoader calls, given a spec of the two
 * attributes it reads, without importing importlib.machinery (~1 ms of a cold start). */
#define GUEST_IMPORT                                                                               \
	"__import__('_imp').create_dynamic(type('spec', (), {'name': '" SC_GUEST_MODULE            \
	"', 'origin': '%s'})).main()"

static void report_failure(const struct snapcell_error *err)
{
	struct sc_ctl_msg m = {.type = SC_CTL_READY, .status = err->code};
	snprintf(m.message, sizeof(m.message), "%.*s", (int)sizeof(m.message) - 1, err->message);
	sc__ctl_send(CTL, &m, NULL, 0);
}

/* The message as it came (the template decodes it again from SC_GUEST_SETUP_FD) and s. */
static int read_setup(char **raw, size_t *len, struct sc_setup *s, struct snapcell_error *err)
{
	char *buf SC_AUTO_FREE = malloc(SC_SETUP_MAX);
	if (!buf)
		return sc__err(err, -ENOMEM, "setup buffer");
	ssize_t n;
	do
		n = recv(CTL, buf, SC_SETUP_MAX, MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	int rc = n < 0 ? sc__err(err, -errno, "read setup")
		 : n == 0 || n > (ssize_t)SC_SETUP_MAX
			 ? sc__err(err, SNAPCELL_E_PROTOCOL, "setup message: %zd bytes", n)
			 : sc__setup_decode(buf, (size_t)n, s, err);
	if (rc < 0)
		return rc;
	*raw = SC_STEAL_PTR(buf);
	*len = (size_t)n;
	return 0;
}

/* fd moved above the pass descriptors (which close_pass_fds closes); -1 stays -1. */
static int high(int fd)
{
	if (fd < 0)
		return fd;
	int moved = fcntl(fd, F_DUPFD_CLOEXEC, SC_CGROUP_FD + 1);
	close(fd);
	if (moved < 0)
		errno = EMFILE;
	return moved;
}

/* A sealed memfd holding the setup message, for the template. */
static int setup_memfd(const char *raw, size_t len, struct snapcell_error *err)
{
	int fd SC_AUTO_CLOSE =
		high(memfd_create("snapcell-setup", MFD_CLOEXEC | MFD_ALLOW_SEALING));
	int rc = fd < 0 ? -errno : sc__write_all(fd, raw, len);
	if (rc == 0 && fcntl(fd, F_ADD_SEALS, SC_GUEST_SETUP_SEALS) < 0)
		rc = -errno;
	if (rc < 0)
		return sc__err(err, rc, "setup memfd");
	return SC_STEAL_FD(fd);
}

/* Where fd's directory is reachable whatever the sandbox uid may walk. */
static void fd_path(char *buf, size_t len, int fd, const char *file)
{
	snprintf(buf, len, "/proc/self/fd/%d%s%s", fd, file ? "/" : "", file ? file : "");
}

#define MAX_BINDS (2 + 2 * SC_PASS_FD_MAX)

/* The read-only binds: /input, the Python paths at SC_PYTHON_PATH_BASE/<i> (the host path may
 * lie under /tmp, which each cell remounts), the interpreter's directories at their own paths,
 * and the guest module (the file alone: its directory may be a whole build tree) in
 * SC_GUEST_DIR. */
static size_t list_binds(const struct sc_setup *s, struct sc_bind *binds, char (*src)[32],
			 char (*dst)[48])
{
	size_t n = 0;
	binds[n++] = (struct sc_bind){s->input, "/input"};
	for (size_t i = 0; i < s->n_python_paths && n < MAX_BINDS; i++, n++) {
		fd_path(src[n], sizeof(src[n]), s->python_paths[i].fd, NULL);
		snprintf(dst[n], sizeof(dst[n]), SC_PYTHON_PATH_BASE "/%zu", i);
		binds[n] = (struct sc_bind){src[n], dst[n]};
	}
	for (size_t i = 0; i < s->python.n_dirs && n < MAX_BINDS; i++, n++) {
		fd_path(src[n], sizeof(src[n]), s->python.dirs[i].fd, NULL);
		binds[n] = (struct sc_bind){src[n], s->python.dirs[i].host};
	}
	static char module_src[PATH_MAX], module_dst[PATH_MAX];
	fd_path(module_src, sizeof(module_src), s->guest.fd, NULL);
	snprintf(module_dst, sizeof(module_dst), SC_GUEST_DIR "/%s", s->guest.file);
	binds[n] = (struct sc_bind){module_src, module_dst};
	return n + 1;
}

/* The Python paths for an interpreter a cell execs: a .pth line each, the plain ones as
 * directories, the site ones (a venv's) through site.addsitedir, as the template added them. */
static char *paths_pth(const struct sc_setup *s)
{
	size_t len = 1;
	for (size_t i = 0; i < s->n_python_paths; i++)
		len += 80 + strlen(SC_PYTHON_PATH_BASE) + 2 * PATH_MAX;
	char *text = calloc(1, len), *at = text;
	for (size_t i = 0; text && i < s->n_python_paths; i++) {
		const char *site = s->python_paths[i].site;
		if (!site)
			at += sprintf(at, SC_PYTHON_PATH_BASE "/%zu\n", i);
		else if (!strchr(site, '\'') && !strchr(site, '\\') && !strchr(site, '\n'))
			at += sprintf(at,
				      "import site; site.addsitedir('" SC_PYTHON_PATH_BASE
				      "/%zu%s%s')\n",
				      i, *site ? "/" : "", site);
	}
	return text;
}

/* What the root links to the interpreter: /usr/bin/python3 and python, and with Python paths
 * a venv (SC_VENV_DIR) whose site-packages names them in a .pth file, so an interpreter a cell
 * execs sees what the cell sees; without, the links point at the interpreter itself. */
static size_t root_files(const struct sc_setup *s, struct sc_root_file *f, char *pth)
{
	static char cfg[PATH_MAX + 128], site[PATH_MAX];
	static const char *python = SC_VENV_DIR "/bin/python3";
	unsigned major = 3, minor = 0;
	sscanf(s->python.version, "%u.%u", &major, &minor);
	const char *target = pth ? python : s->python.executable;
	size_t n = 0;
	f[n++] = (struct sc_root_file){"/usr/bin/python3", NULL, target};
	f[n++] = (struct sc_root_file){"/usr/bin/python", NULL, target};
	if (!pth)
		return n;
	snprintf(cfg, sizeof(cfg),
		 "home = %.*s\ninclude-system-site-packages = false\nversion = %s\n",
		 (int)(strrchr(s->python.executable, '/') - s->python.executable),
		 s->python.executable, s->python.version);
	snprintf(site, sizeof(site), SC_VENV_DIR "/lib/python%u.%u/site-packages/_snapcell.pth",
		 major, minor);
	f[n++] = (struct sc_root_file){SC_VENV_DIR "/pyvenv.cfg", cfg, NULL};
	f[n++] = (struct sc_root_file){python, NULL, s->python.executable};
	f[n++] = (struct sc_root_file){SC_VENV_DIR "/bin/python", NULL, "python3"};
	f[n++] = (struct sc_root_file){site, pth, NULL};
	return n;
}

static int build_root(const struct sc_setup *s, struct snapcell_error *err)
{
	static struct sc_bind binds[MAX_BINDS + 1];
	static char src[MAX_BINDS + 1][32], dst[MAX_BINDS + 1][48], exe[PATH_MAX];
	const char *lib_dirs[SC_PASS_FD_MAX];
	struct sc_root_file files[6];
	char *pth = s->n_python_paths ? paths_pth(s) : NULL;
	if (s->n_python_paths && !pth)
		return sc__err(err, -ENOMEM, "python paths");
	for (size_t i = 0; i < s->python.n_dirs && i < SC_PASS_FD_MAX; i++)
		lib_dirs[i] = s->python.dirs[i].host;
	fd_path(exe, sizeof(exe), s->python.exe_dir_fd, strrchr(s->python.executable, '/') + 1);
	struct sc_rootfs fs = {.base = s->root,
			       .out_dir = s->out,
			       .ro_binds = binds,
			       .n_ro_binds = list_binds(s, binds, src, dst),
			       .lib_dirs = lib_dirs,
			       .n_lib_dirs = s->python.n_dirs,
			       .hosts = s->net ? s->net->hosts : NULL,
			       .extra_ca = s->net ? s->net->ca : NULL,
			       .interp_src = exe,
			       .interp_path = s->python.executable,
			       .files = files,
			       .n_files = root_files(s, files, pth)};
	int rc = sc__rootfs_build(&fs, err);
	free(pth);
	return rc;
}

/* Whether path is absolute, has no "..", and base is a plain file name. */
static bool sane_paths(const struct sc_setup *s)
{
	const char *exe = s->python.executable, *slash = strrchr(exe, '/');
	const char *file = s->guest.file;
	return exe[0] == '/' && !strstr(exe, "/..") && slash && slash[1] && file[0] &&
	       strspn(file, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") ==
		       strlen(file) &&
	       file[0] != '.';
}

/* Moves fd to target (without CLOEXEC, so it crosses the exec); -1 stays absent. */
static int hand_over(int fd, int target)
{
	if (fd < 0 || fd == target)
		return fd < 0 ? 0 : (fcntl(fd, F_SETFD, 0) < 0 ? -errno : 0);
	int rc = dup2(fd, target) < 0 ? -errno : 0;
	close(fd);
	return rc;
}

/* Descriptors the template needs and the helper must open before the pivot (/proc goes). */
struct handoff {
	int setup, pidns, netns, cgroup, guest_module, seccomp, proc, self_proc;
};

/* One word from the socket fd, or 0 at its end or on an error. */
static char read_word(int fd)
{
	char word = 0;
	ssize_t n;
	do
		n = read(fd, &word, 1);
	while (n < 0 && errno == EINTR);
	return n == 1 ? word : 0;
}

/* A child that does what the template would otherwise wait for (its socket's end for the
 * template, or -1: the helper and the template then do it all themselves). Forked before the
 * root is built, it keeps nothing of the helper's but the socket, and is in this mount
 * namespace: the pivot moves its root too. It detaches the host's root once the helper
 * pivoted and the guest module's bind once the template loaded it; an unmount waits for an
 * RCU grace period (sc__rootfs_detach_host), which the interpreter's start and then the
 * template's set-up overlap (the template's own umount2 of each then finds it gone, EINVAL,
 * or unmounts it where the child has not yet). Between the two it compiles the cells'
 * seccomp policy and sends the program (guest/template_setup.c says why), while the
 * interpreter starts. */
static int start_compiler(const struct sc_setup *s)
{
	unsigned flags = sc__seccomp_namespaces_flags(s->net != NULL, s->n_python_paths,
						      sc__landlock_abi(), s->reuse);
	char module[PATH_MAX];
	snprintf(module, sizeof(module), SC_GUEST_DIR "/%s", s->guest.file);
	int p[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		syscall(SYS_close_range, 0, (unsigned)p[1] - 1, 0);
		syscall(SYS_close_range, (unsigned)p[1] + 1, ~0u, 0);
		if (read_word(p[1]) != SC_GUEST_PIVOTED)
			_exit(1);
		sc__rootfs_detach_host();
		if (send(p[1], (char[]){SC_GUEST_HOST_DETACHED}, 1, MSG_NOSIGNAL) != 1)
			_exit(1);
		int rc = sc__seccomp_compile_to(p[1], flags);
		if (read_word(p[1]) == SC_GUEST_DETACH_MODULE)
			umount2(module, MNT_DETACH);
		_exit(rc == 0 ? 0 : 1);
	}
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return -1;
	}
	return high(p[0]);
}

#ifndef FSOPEN_CLOEXEC
#define FSOPEN_CLOEXEC 0x1
#endif
#ifndef FSCONFIG_CMD_CREATE
#define FSCONFIG_CMD_CREATE 6
#endif
#ifndef FSMOUNT_CLOEXEC
#define FSMOUNT_CLOEXEC 0x1
#endif

/* Reset in place (guest/reset.c): a procfs of this pid namespace (the sandbox's) for the
 * template, which reads its cells' /proc files through it. A mount never attached to any tree
 * (fsmount), made here while the host's /proc is still visible (the kernel refuses a procfs
 * in a mount namespace that shows none); the cells, which close every descriptor but theirs
 * before code runs, never see it. -1 when the kernel cannot: the template then resets
 * nothing. */
static int proc_of_sandbox(void)
{
	int fs = (int)syscall(SYS_fsopen, "proc", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -1;
	int mnt = syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0
			  ? (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, 0)
			  : -1;
	close(fs);
	return mnt < 0 ? -1 : high(mnt);
}

static int open_namespaces(const struct sc_setup *s, struct handoff *h, struct snapcell_error *err)
{
	h->pidns = high(open("/proc/self/ns/pid", O_RDONLY | O_CLOEXEC));
	if (h->pidns < 0)
		return sc__err(err, -errno, "open /proc/self/ns/pid");
	h->netns = s->net ? high(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) : -1;
	if (s->net && h->netns < 0)
		return sc__err(err, -errno, "open /proc/self/ns/net");
	/* Also where the template checks what preloads and warm-up map (template_shared.c). */
	bool config_code = s->n_preloads || s->warmup || s->n_python_paths;
	if (s->reuse || config_code)
		h->proc = proc_of_sandbox();
	/* Where the kernel refuses one (a container's /proc with masked paths), that check reads
	 * the template's maps through this process's directory in the host's procfs (the same
	 * process after the exec), opened while the host's /proc is still visible. */
	if (h->proc < 0 && config_code &&
	    (h->self_proc = high(open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC))) < 0)
		return sc__err(err, -errno, "open /proc/self");
	return 0;
}

/* The pass descriptors (SC_PASS_FD_FIRST and up) are done with once the root is built (the
 * rlimits level keeps a copy of the guest module's directory: it loads the module through
 * it). */
static void close_pass_fds(void)
{
	for (int fd = SC_PASS_FD_FIRST; fd < SC_PASS_FD_FIRST + SC_PASS_FD_MAX; fd++)
		close(fd);
}

/* The module's descriptor (O_PATH, or /dev/null for a file the spawn could not open) names a
 * regular file the sandbox uid may read. */
static bool module_readable(int fd)
{
	char path[32];
	struct stat st;
	fd_path(path, sizeof(path), fd, NULL);
	int readable SC_AUTO_CLOSE = open(path, O_RDONLY | O_CLOEXEC);
	return readable >= 0 && fstat(readable, &st) == 0 && S_ISREG(st.st_mode);
}

/* Cells count CLOCK_MONOTONIC and CLOCK_BOOTTIME (and /proc/uptime) from about their
 * sandbox's start, not from the host's boot, which gave the host's uptime away: a time
 * namespace for this process's children (and for the interpreter it execs, where the kernel
 * moves an exec into it), its offsets written before any process enters it (the kernel
 * refuses them after) and while the host's /proc is still here. No time point crosses between
 * the host and the template or cells (the frames carry durations). Best effort: a kernel
 * without time namespaces (before 5.6, or CONFIG_TIME_NS off) leaves the host's clocks. */
static void time_namespace(void)
{
	struct timespec mono, boot;
	char offsets[96];
	if (unshare(CLONE_NEWTIME) < 0 || clock_gettime(CLOCK_MONOTONIC, &mono) < 0 ||
	    clock_gettime(CLOCK_BOOTTIME, &boot) < 0)
		return;
	int len = snprintf(offsets, sizeof(offsets), "monotonic %lld 0\nboottime %lld 0\n",
			   -(long long)mono.tv_sec, -(long long)boot.tv_sec);
	int fd SC_AUTO_CLOSE = open("/proc/self/timens_offsets", O_WRONLY | O_CLOEXEC);
	if (fd >= 0)
		(void)!write(fd, offsets, (size_t)len);
}

/* What the helper does differently per isolation mechanism, picked once from the setup
 * message's level (helper_ops_for), as the template picks its own (struct sc_guest_ops). */
struct helper_ops {
	/* After the checks every level makes: what the interpreter is exec'd into. */
	int (*prepare)(const struct sc_setup *s, struct handoff *h, struct snapcell_error *err);
	/* Where the interpreter loads the guest module from. */
	void (*module_path)(const struct sc_setup *s, char *buf, size_t len);
	/* The exec of the interpreter failed (errno): err says why. */
	int (*exec_failed)(const struct sc_setup *s, struct snapcell_error *err);
};

/* The namespaces level: the namespaces to come back to, the seccomp compiler started, the
 * time namespace, the root built and pivoted into. */
static int prepare_namespaces(const struct sc_setup *s, struct handoff *h,
			      struct snapcell_error *err)
{
	int rc = open_namespaces(s, h, err);
	if (rc < 0)
		return rc;
	h->seccomp = start_compiler(s);
	time_namespace();
	rc = build_root(s, err);
	if (rc == 0 && (h->seccomp < 0 ||
			send(h->seccomp, (char[]){SC_GUEST_PIVOTED}, 1, MSG_NOSIGNAL) != 1)) {
		/* No child to detach it: neither it nor the template waits for the other's word. */
		if (h->seccomp >= 0)
			close(h->seccomp);
		h->seccomp = -1;
		rc = sc__rootfs_detach_host();
		if (rc < 0)
			sc__err(err, rc, "detach the host's root");
	}
	return rc;
}

static void module_in_root(const struct sc_setup *s, char *buf, size_t len)
{
	snprintf(buf, len, SC_GUEST_DIR "/%s", s->guest.file);
}

static int exec_failed(const struct sc_setup *s, struct snapcell_error *err)
{
	return sc__err(err, -errno, "execute %s", s->python.executable);
}

/* The rlimits level: no root to build; the module is read through its descriptor. */
static int prepare_plain(const struct sc_setup *s, struct handoff *h, struct snapcell_error *err)
{
	h->guest_module = fcntl(s->guest.fd, F_DUPFD_CLOEXEC, SC_CGROUP_FD + 1);
	return 0;
}

static void module_by_fd(const struct sc_setup *s, char *buf, size_t len)
{
	fd_path(buf, len, SC_GUEST_MODULE_FD, NULL);
}

static int exec_failed_plain(const struct sc_setup *s, struct snapcell_error *err)
{
	if (errno == EACCES)
		return sc__err(err, -errno,
			       "execute %s: at level rlimits the sandbox's uid (%u) runs it where "
			       "it is, and cannot reach it",
			       s->python.executable, (unsigned)getuid());
	return exec_failed(s, err);
}

static const struct helper_ops *helper_ops_for(int level)
{
	static const struct helper_ops namespaces = {prepare_namespaces, module_in_root,
						     exec_failed};
	static const struct helper_ops plain = {prepare_plain, module_by_fd, exec_failed_plain};
	static const struct helper_ops *const by_level[] = {
		[SNAPCELL_ISOLATION_RLIMITS] = &plain,
		[SNAPCELL_ISOLATION_NAMESPACES] = &namespaces,
		[SNAPCELL_ISOLATION_CGROUPS] = &namespaces,
	};
	return level >= 0 && (size_t)level < SC_ARRAY_LEN(by_level) ? by_level[level] : NULL;
}

static int prepare(const struct helper_ops *ops, const struct sc_setup *s, struct handoff *h,
		   struct snapcell_error *err)
{
	int moved = sc__cgroup_cell_enter(SC_CGROUP_FD);
	if (s->cgroup && moved < 0)
		return sc__err(err, moved, "move into memory cgroup %s", s->cgroup);
	/* Before the pivot, while the host's cgroup mount is in this mount namespace. */
	if (s->cgroup && (h->cgroup = high(open(s->cgroup, O_PATH | O_DIRECTORY | O_CLOEXEC))) < 0)
		return sc__err(err, -errno, "open memory cgroup %s", s->cgroup);
	if (setsid() < 0)
		return sc__err(err, -errno, "setsid");
	if (!sane_paths(s))
		return sc__err(err, SNAPCELL_E_PROTOCOL, "setup message: bad interpreter or guest");
	if (!module_readable(s->guest.fd))
		return sc__err(err, -ENOENT,
			       "the guest module %s beside the helper: missing or unreadable",
			       s->guest.file);
	int rc = ops->prepare(s, h, err);
	close_pass_fds();
	return rc;
}

/* Execs the interpreter with the descriptors at their SC_GUEST_* numbers. Returns only on
 * failure. */
static int exec_guest(const struct helper_ops *ops, const struct sc_setup *s, struct handoff *h,
		      struct snapcell_error *err)
{
	char code[PATH_MAX + 512], module[PATH_MAX];
	ops->module_path(s, module, sizeof(module));
	snprintf(code, sizeof(code), GUEST_IMPORT, module);
	int rc = hand_over(h->setup, SC_GUEST_SETUP_FD);
	if (rc == 0)
		rc = hand_over(h->pidns, SC_GUEST_PIDNS_FD);
	if (rc == 0)
		rc = hand_over(h->netns, SC_GUEST_NETNS_FD);
	if (rc == 0)
		rc = hand_over(h->cgroup, SC_GUEST_CGROUP_FD);
	if (rc == 0)
		rc = hand_over(h->guest_module, SC_GUEST_MODULE_FD);
	if (rc == 0)
		rc = hand_over(h->seccomp, SC_GUEST_SECCOMP_FD);
	if (rc == 0)
		rc = hand_over(h->proc, SC_GUEST_PROC_FD);
	if (rc == 0)
		rc = hand_over(h->self_proc, SC_GUEST_SELF_FD);
	if (rc < 0)
		return sc__err(err, rc, "hand over descriptors");
	/* Isolated (no environment variables, no user site, no script directory), no site
	 * module (the template adds site directories itself), UTF-8 whatever the locale (the
	 * root has only C.UTF-8), and no bytecode written (the root is read-only). */
	char *argv[] = {s->python.executable, "-I", "-S", "-B", "-X", "utf8", "-c", code, NULL};
	char *envp[] = {SC_GUEST_ENV "=" SC_GUEST_MARK, NULL};
	execve(s->python.executable, argv, envp);
	return ops->exec_failed(s, err);
}

int main(void)
{
	struct snapcell_error err = {0};
	struct sc_setup s;
	struct handoff h = {-1, -1, -1, -1, -1, -1, -1, -1};
	char *raw = NULL;
	size_t len = 0;
	/* The host spawns this process with every signal blocked (src/isolate/spawn.c: its
	 * child shares the caller's memory until the exec), so the mask is this process's own
	 * from here, not the caller's thread's; the interpreter and its cells inherit it. */
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* First, before reading anything: the host checks the protocol before it sends setup. */
	if (sc__hello_send(CTL) < 0)
		return 1;
	int rc = read_setup(&raw, &len, &s, &err);
	if (rc == 0 && (h.setup = setup_memfd(raw, len, &err)) < 0)
		rc = h.setup;
	free(raw);
	const struct helper_ops *ops = rc == 0 ? helper_ops_for(s.level) : NULL;
	if (rc == 0 && !ops)
		rc = sc__err(&err, SNAPCELL_E_PROTOCOL, "setup message: unknown level %d", s.level);
	if (rc == 0)
		rc = prepare(ops, &s, &h, &err);
	if (rc == 0)
		exec_guest(ops, &s, &h, &err);
	report_failure(&err);
	return 1;
}
