/* The sandbox handle: starting the template (workdir, helper spawn, setup message, READY),
 * handing out parked cells, and tearing everything down. One run's life is in run.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "isolate/host.h"
#include "net/gate.h"
#include "rpc/frame.h"
#include "rpc/setup.h"
#include "stage/stage.h"
#include "util/buf.h"
#include "util/util.h"

#define HELPER_NAME	 "snapcell-cell"
#define SPARE_CELLS	 2
#define READY_TIMEOUT_MS 20000
#define TAKE_TIMEOUT_MS	 20000
/* The helper greets before it reads anything; a few ms normally. Past this it is no helper. */
#define HELLO_TIMEOUT_MS 10000

void sc__cell_close(struct sc_cell *cell)
{
	for (int i = 0; i < SC_CELL_NFDS; i++)
		if (cell->fds[i] >= 0) {
			close(cell->fds[i]);
			cell->fds[i] = -1;
		}
	for (size_t i = 0; i < cell->n_net; i++)
		close(cell->net[i]);
	cell->n_net = 0;
}

static void forget_cell(struct snapcell_sandbox *sb, uint32_t id)
{
	char name[16];
	snprintf(name, sizeof(name), "%u", id);
	sc__remove_tree(sb->out_fd, name, 0);
}

/* Forgets the retired cells that are gone; with wait, waits for all of them. Lock held. */
static void sweep(struct snapcell_sandbox *sb, bool wait)
{
	size_t kept = 0;
	for (size_t i = 0; i < sb->n_dying; i++) {
		if (sc__wait_fd(sb->dying[i].pidfd, POLLIN, sc__deadline_ms(wait ? 5000 : 0)) ==
		    -ETIMEDOUT) {
			sb->dying[kept++] = sb->dying[i];
			continue;
		}
		forget_cell(sb, sb->dying[i].id);
		close(sb->dying[i].pidfd);
	}
	sb->n_dying = kept;
}

/* Kills a cell and lists it as dying; the lock is held. */
static void retire_locked(struct snapcell_sandbox *sb, struct sc_cell *cell)
{
	int pidfd = cell->fds[SC_CELL_PIDFD];
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	cell->fds[SC_CELL_PIDFD] = -1;
	sc__cell_close(cell);
	if (SC_ARRAY_RESERVE(sb->dying, sb->cap_dying, sb->n_dying + 1, SC_ARRAY_NO_CAP) < 0)
		sweep(sb, true); /* no memory to defer: wait now */
	if (sb->n_dying < sb->cap_dying)
		sb->dying[sb->n_dying++] = (struct sc_dying){pidfd, cell->id};
}

void sc__sandbox_retire_cell(struct snapcell_sandbox *sb, struct sc_cell *cell)
{
	pthread_mutex_lock(&sb->lock);
	retire_locked(sb, cell);
	pthread_mutex_unlock(&sb->lock);
}

/* The configured helper, or the one installed with the library; no search, so what runs is
 * what the caller (or the packager) chose. */
static const char *helper_path(const struct snapcell_sandbox *sb)
{
	return sb->cfg->helper ? sb->cfg->helper : SNAPCELL_HELPER_DIR "/" HELPER_NAME;
}

static int open_helper(const struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	const char *path = helper_path(sb);
	int fd = open(path, O_PATH | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	int rc = -errno;
	if (sb->cfg->helper)
		return sc__err(err, rc, "sandbox helper %s (set by snapcell_config_set_helper)",
			       path);
	return sc__err(err, rc,
		       "sandbox helper %s, where this library was built to find it: install "
		       "snapcell, or give its path to snapcell_config_set_helper()",
		       path);
}

/* $TMPDIR when set; else /dev/shm when it is a tmpfs of at least 1 GiB, since creating and
 * removing a directory per cell there costs microseconds, against tens to hundreds on ext4
 * (docs/performance.md); else /tmp. */
static const char *workdir_parent(void)
{
	const char *tmp = getenv("TMPDIR");
	if (tmp && *tmp == '/')
		return tmp;
	struct statfs fs;
	if (statfs("/dev/shm", &fs) == 0 && fs.f_type == TMPFS_MAGIC &&
	    (uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize >= (1ull << 30) &&
	    access("/dev/shm", W_OK | X_OK) == 0)
		return "/dev/shm";
	return "/tmp";
}

/* Stage copies what the config names; it knows nothing of the config's layout. */
static int stage_inputs(const struct snapcell_config *cfg, int input, struct snapcell_error *err)
{
	struct sc_stage_mount *mounts = calloc(cfg->n_mounts + 1, sizeof(*mounts));
	if (!mounts)
		return sc__err(err, -ENOMEM, "stage /input");
	for (size_t i = 0; i < cfg->n_mounts; i++)
		mounts[i] = (struct sc_stage_mount){cfg->mounts[i].host_path,
						    cfg->mounts[i].mount_path};
	int rc = sc__stage_input(cfg->workspace, mounts, cfg->n_mounts, cfg->reject_links, input,
				 err);
	free(mounts);
	return rc;
}

/* Work directories whose owner died without snapcell_sandbox_free (a crash, a kill, _exit)
 * would keep their staged inputs in memory (/dev/shm) for ever. Each work directory holds a
 * "lock" file its sandbox keeps flock'ed, renamed into place only once locked; a directory of
 * this uid whose lock can be taken has no live owner, and is removed here, at sandbox
 * creation. A directory without a lock (being made, or by an older library) is left alone.
 * Bounded: at most 64 removals and 1 s per creation; failures are ignored. */
#define REAP_MAX	 64
#define REAP_DEADLINE_MS 1000
#define WORKDIR_NAME_LEN 15 /* "snapcell-XXXXXX" */

static void reap_stale_workdirs(const char *parent_path)
{
	int parent = open(parent_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (parent < 0)
		return;
	int scan = dup(parent);
	DIR *d = scan >= 0 ? fdopendir(scan) : NULL;
	if (!d) {
		if (scan >= 0)
			close(scan);
		close(parent);
		return;
	}
	uint64_t deadline = sc__deadline_ms(REAP_DEADLINE_MS);
	unsigned reaped = 0;
	struct dirent *e;
	while (reaped < REAP_MAX && sc__now_us() < deadline && (e = readdir(d))) {
		if (strncmp(e->d_name, "snapcell-", 9) || strlen(e->d_name) != WORKDIR_NAME_LEN)
			continue;
		struct stat st;
		if (fstatat(parent, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		int dir =
			openat(parent, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dir < 0)
			continue;
		int lock = openat(dir, "lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		close(dir);
		if (lock < 0)
			continue;
		/* Held until the tree is gone, so two creating sandboxes never race on it. */
		if (flock(lock, LOCK_EX | LOCK_NB) == 0 &&
		    sc__remove_tree(parent, e->d_name, deadline) == 0)
			reaped++;
		close(lock);
	}
	closedir(d);
	close(parent);
}

/* The lock file is made under another name, locked, then renamed into place, so a reaper
 * never sees an unlocked "lock" of a live sandbox. */
static int lock_workdir(int dfd)
{
	int fd = openat(dfd, "lock.new", O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0 || renameat(dfd, "lock.new", dfd, "lock") < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	return fd;
}

static int make_workdir(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	const char *tmp = workdir_parent();
	reap_stale_workdirs(tmp);
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/snapcell-XXXXXX", tmp);
	if (!mkdtemp(path))
		return sc__err(err, -errno, "create work directory in %s", tmp);
	if (!(sb->workdir = strdup(path)))
		return -ENOMEM;
	uid_t uid = sb->ids.uid;
	gid_t gid = sb->ids.gid;
	/* The sandbox uid must reach the root mount point and own the output tree. */
	int dfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0 && (sb->lock_fd = lock_workdir(dfd)) < 0) {
		int rc = sc__err(err, sb->lock_fd, "lock work directory %s", path);
		close(dfd);
		return rc;
	}
	/* At the rlimits level the cells' /tmp directories live here too (tmp/<cell id>). */
	bool cell_tmp = sb->level == SNAPCELL_ISOLATION_RLIMITS;
	if (dfd < 0 || fchmod(dfd, 0711) < 0 || mkdirat(dfd, "root", 0755) < 0 ||
	    mkdirat(dfd, "input", 0755) < 0 || mkdirat(dfd, "out", 0700) < 0 ||
	    fchownat(dfd, "out", uid, gid, 0) < 0 || (cell_tmp && mkdirat(dfd, "tmp", 0700) < 0) ||
	    (cell_tmp && fchownat(dfd, "tmp", uid, gid, 0) < 0)) {
		int rc = sc__err(err, -errno, "prepare work directory %s", path);
		if (dfd >= 0)
			close(dfd);
		return rc;
	}
	sb->out_fd = openat(dfd, "out", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int input = openat(dfd, "input", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	close(dfd);
	if (sb->out_fd < 0 || input < 0) {
		if (input >= 0)
			close(input);
		return sc__err(err, -errno, "open %s", path);
	}
	int rc = stage_inputs(sb->cfg, input, err);
	close(input);
	return rc;
}

/* A memory cgroup for the sandbox where this process may make one (docs/architecture.md,
 * "Limits"): each cell then gets one below it, bounded and measured by the kernel, and the
 * sandbox runs at level cgroups. Where none can be had it runs at namespaces, unless the
 * config requires cgroups. */
static int make_cgroup(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	struct snapcell_error why = {0};
	if (sb->level == SNAPCELL_ISOLATION_RLIMITS)
		return 0; /* choose_level refused a requirement above it */
	if (sc__cgroup_sandbox_new(&sb->cgroup, sb->ids.uid, sb->ids.gid, &why) == 0) {
		sb->level = SNAPCELL_ISOLATION_CGROUPS;
		return 0;
	}
	if (sb->cfg->required < SNAPCELL_ISOLATION_CGROUPS)
		return 0;
	return sc__err(err, SNAPCELL_E_ISOLATION,
		       "isolation level 'cgroups' required: %s (see `snapcell doctor`)",
		       why.message);
}

/* What the template needs to give each cell its network namespace and trust the gate
 * (borrowed from the gate, but for the two arrays, which the caller frees). */
static int net_setup(const struct sc_gate *g, struct sc_setup_net *net)
{
	const uint16_t *ports;
	const char *const *addrs;
	net->n_ports = sc__gate_ports(g, &ports);
	net->n_addrs = sc__gate_addresses(g, &addrs);
	net->ports = calloc(net->n_ports + 1, sizeof(int));
	net->addrs = calloc(net->n_addrs + 1, sizeof(char *));
	if (!net->ports || !net->addrs)
		return -ENOMEM;
	for (size_t i = 0; i < net->n_ports; i++)
		net->ports[i] = ports[i];
	for (size_t i = 0; i < net->n_addrs; i++)
		net->addrs[i] = (char *)addrs[i];
	net->v6 = sc__gate_v6(g);
	net->hosts = (char *)sc__gate_hosts(g);
	net->ca = (char *)sc__gate_ca_pem(g);
	return 0;
}

/* A sandbox with entries runs the egress gate for its cells. */
static int start_gate(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	const struct snapcell_config *c = sb->cfg;
	if (c->allowed.n == 0)
		return 0;
	struct sc_gate_options o = {
		.list = &c->allowed,
		.map_names = (const char *const *)c->map_names,
		.map_addresses = (const char *const *)c->map_addresses,
		.n_maps = c->n_maps,
		.upstream_ca_file = c->upstream_ca,
		.max_connections = c->limits[SNAPCELL_LIMIT_NET_CONNECTIONS],
		.max_bytes = c->limits[SNAPCELL_LIMIT_NET_BYTES],
		.connect_timeout_ms = c->limits[SNAPCELL_LIMIT_NET_CONNECT_MS],
		.idle_timeout_ms = c->limits[SNAPCELL_LIMIT_NET_IDLE_MS],
	};
	return sc__gate_new(&o, &sb->gate, err);
}

/* What the spawn child opens for the helper, as fds SC_PASS_FD_FIRST + index: the Python
 * paths and venv directories (sc__python_dirs), the interpreter's directories, the
 * interpreter's own directory (the helper copies the executable from it), and last the
 * guest module beside the helper, a file (opened itself: its directory may be private). */
struct pass_list {
	const char *dirs[SC_PASS_FD_MAX], *site[SC_PASS_FD_MAX];
	size_t n_paths, n; /* the Python paths are dirs[0, n_paths) */
	char exe_dir[PATH_MAX], module[PATH_MAX];
};

#define GUEST_MODULE_FILE "_snapcell_guest.abi3.so"

static int list_pass_dirs(const struct snapcell_sandbox *sb, struct pass_list *l,
			  struct snapcell_error *err)
{
	const struct sc_python *py = &sb->python;
	int rc = sc__python_dirs(sb->cfg, l->dirs, l->site, &l->n_paths, err);
	if (rc < 0)
		return rc;
	if (l->n_paths + py->n_dirs + 2 > SC_PASS_FD_MAX)
		return sc__err(
			err, SNAPCELL_E_INVAL,
			"%zu python paths and %zu interpreter directories: at most %d in all",
			l->n_paths, py->n_dirs, SC_PASS_FD_MAX - 2);
	l->n = l->n_paths;
	for (size_t i = 0; i < py->n_dirs; i++)
		l->dirs[l->n] = py->dirs[i], l->site[l->n++] = NULL;
	snprintf(l->exe_dir, sizeof(l->exe_dir), "%s", py->executable);
	*strrchr(l->exe_dir, '/') = 0;
	const char *helper = helper_path(sb), *slash = strrchr(helper, '/');
	int dir_len = slash ? (int)(slash - helper) + 1 : 0;
	if (snprintf(l->module, sizeof(l->module), "%.*s" GUEST_MODULE_FILE, dir_len, helper) >=
	    (int)sizeof(l->module))
		return sc__err(err, -ENAMETOOLONG, "guest module beside %s", helper);
	l->dirs[l->n] = *l->exe_dir ? l->exe_dir : "/", l->site[l->n++] = NULL;
	l->dirs[l->n] = l->module, l->site[l->n++] = NULL;
	return 0;
}

/* The Python paths (at the rlimits level the cells read them where they are; otherwise their
 * host path stays the host's) and the interpreter's directories, from l. */
static int setup_paths(const struct snapcell_sandbox *sb, const struct pass_list *l,
		       struct sc_setup *s)
{
	bool plain = sb->level == SNAPCELL_ISOLATION_RLIMITS;
	size_t n_py = l->n - l->n_paths - 2;
	s->python_paths = calloc(l->n_paths + 1, sizeof(*s->python_paths));
	s->python.dirs = calloc(n_py + 1, sizeof(*s->python.dirs));
	if (!s->python_paths || !s->python.dirs)
		return -ENOMEM;
	for (size_t i = 0; i < l->n_paths; i++)
		s->python_paths[i] =
			(struct sc_setup_path){SC_PASS_FD_FIRST + (int)i, (char *)l->site[i],
					       plain ? (char *)l->dirs[i] : NULL};
	for (size_t i = 0; i < n_py; i++) {
		size_t k = l->n_paths + i;
		s->python.dirs[i] =
			(struct sc_setup_path){SC_PASS_FD_FIRST + (int)k, NULL, (char *)l->dirs[k]};
	}
	s->n_python_paths = l->n_paths;
	s->python.n_dirs = n_py;
	s->python.executable = sb->python.executable;
	s->python.version = sb->python.version;
	s->python.prelude = sb->python.prelude_code;
	s->python.prelude_bytes = sb->python.prelude_code ? sb->python.prelude_len : 0;
	s->python.sys_version = sb->python.sys_version;
	s->python.prelude_hash = sb->python.prelude_hash;
	s->python.exe_dir_fd = SC_PASS_FD_FIRST + (int)l->n - 2;
	s->guest = (struct sc_setup_guest){SC_PASS_FD_FIRST + (int)l->n - 1, GUEST_MODULE_FILE};
	return 0;
}

/* The limits and sizes: the template itself and its parked cells count against RLIMIT_NPROC
 * too; /output has room for the collection cap and a little more, so a cap hit can be
 * reported. */
static void setup_limits(const struct snapcell_sandbox *sb, struct sc_setup *s)
{
	const uint64_t *l = sb->cfg->limits;
	s->spares = SPARE_CELLS;
	s->tmp_bytes = l[SNAPCELL_LIMIT_TMP_BYTES];
	s->frame_cap = SC_FRAME_DEFAULT_CAP;
	s->output_bytes = l[SNAPCELL_LIMIT_OUTPUT_TOTAL_BYTES] + (1u << 20);
	s->memory_bytes = l[SNAPCELL_LIMIT_MEMORY_BYTES];
	s->cpu_ms = l[SNAPCELL_LIMIT_CPU_MS];
	s->processes = l[SNAPCELL_LIMIT_PROCESSES] + SPARE_CELLS + 1;
	s->file_bytes = l[SNAPCELL_LIMIT_FILE_BYTES];
	s->open_files = l[SNAPCELL_LIMIT_OPEN_FILES];
}

/* The code's environment, tools and preloads, borrowed from the config. */
static int setup_code(const struct snapcell_config *c, struct sc_setup *s)
{
	s->env_names = calloc(c->n_env + 1, sizeof(char *));
	s->env_values = calloc(c->n_env + 1, sizeof(char *));
	s->tools = calloc(c->n_tools + 1, sizeof(*s->tools));
	if (!s->env_names || !s->env_values || !s->tools)
		return -ENOMEM;
	for (size_t i = 0; i < c->n_env; i++)
		s->env_names[i] = c->env[i].name, s->env_values[i] = c->env[i].value;
	s->n_env = c->n_env;
	for (size_t i = 0; i < c->n_tools; i++)
		s->tools[i] = (struct sc_setup_tool){c->tools[i].name, c->tools[i].attr,
						     c->tools[i].description};
	s->n_tools = c->n_tools;
	s->preloads = c->preloads;
	s->n_preloads = c->n_preloads;
	s->warmup = c->warmup;
	return 0;
}

static void setup_free(struct sc_setup *s, struct sc_setup_net *net)
{
	free(s->python_paths);
	free(s->python.dirs);
	free(s->env_names);
	free(s->env_values);
	free(s->tools);
	free(s->network_notice);
	free(net->ports);
	free(net->addrs);
}

/* The setup message (rpc/setup.h): the work directory's parts, the level (at the rlimits
 * level: where the cells' /tmp directories go, and whether cells run as the caller's own uid,
 * which makes seccomp refuse path-based chmod, chown and utimes: Landlock does not cover them,
 * and the caller's files are that uid's), and what setup_* fill in. */
static char *setup_message(const struct snapcell_sandbox *sb, const struct pass_list *l,
			   size_t *len)
{
	char root[PATH_MAX], out[PATH_MAX], input[PATH_MAX], tmp[PATH_MAX];
	snprintf(root, sizeof(root), "%s/root", sb->workdir);
	snprintf(out, sizeof(out), "%s/out", sb->workdir);
	snprintf(input, sizeof(input), "%s/input", sb->workdir);
	snprintf(tmp, sizeof(tmp), "%s/tmp", sb->workdir);
	bool plain = sb->level == SNAPCELL_ISOLATION_RLIMITS;
	struct sc_setup_net net = {0};
	struct sc_setup s = {.root = root,
			     .out = out,
			     .input = input,
			     .level = (int)sb->level,
			     .tmp = plain ? tmp : NULL,
			     .own_uid = plain && sb->ids.uid == geteuid(),
			     .cgroup = sb->cgroup.dir_fd >= 0 ? (char *)sb->cgroup.path : NULL,
			     .net = sb->gate ? &net : NULL,
			     .network_notice = sc__network_notice(sb->cfg)};
	setup_limits(sb, &s);
	char *text = NULL;
	if (s.network_notice && setup_paths(sb, l, &s) == 0 && setup_code(sb->cfg, &s) == 0 &&
	    (!sb->gate || net_setup(sb->gate, &net) == 0))
		text = sc__setup_encode(&s, len);
	setup_free(&s, &net);
	return text;
}

/* The helper starts with no environment at all: the configured variables travel in the
 * setup message and are set after the pivot, so the loader (LD_PRELOAD and friends) never
 * sees them while the host filesystem is still visible. */
static int spawn(struct snapcell_sandbox *sb, int helper_fd, int control_fd, int cgroup_fd,
		 int stderr_fd, const struct pass_list *l, struct snapcell_error *err)
{
	char *envp[] = {NULL};
	char *argv[] = {HELPER_NAME, NULL};
	struct sc_spawn spec = {.helper_fd = helper_fd,
				.argv = argv,
				.envp = envp,
				.control_fd = control_fd,
				.cgroup_fd = cgroup_fd,
				.stderr_fd = stderr_fd,
				.pass_dirs = l->dirs,
				.n_pass_dirs = l->n,
				.n_pass_files = 1,
				.outside_uid = sb->ids.uid,
				.outside_gid = sb->ids.gid,
				.namespaces = sb->level != SNAPCELL_ISOLATION_RLIMITS};
	return sc__spawn_helper(&spec, &sb->helper_pid, &sb->helper_pidfd, err);
}

/* The control socket: sb->ctl, and the helper's end, returned (-1 on failure, with rc). */
static int control_pair(struct snapcell_sandbox *sb, int *rc, struct snapcell_error *err)
{
	int sp[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		*rc = sc__err(err, -errno, "control socketpair");
		sp[0] = sp[1] = -1;
	}
	/* Keep the helper's end clear of 0-3, which the spawn child overwrites. */
	int child_end = sp[1] < 0 ? -1 : fcntl(sp[1], F_DUPFD_CLOEXEC, 10);
	if (sp[1] >= 0)
		close(sp[1]);
	sb->ctl = sp[0];
	return child_end;
}

static int start_helper(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	int rc = 0;
	int child_end = control_pair(sb, &rc, err);
	int helper_fd = open_helper(sb, err);
	/* At level cgroups the template moves itself into the sandbox's cgroup (cgroup.c). */
	int cgroup_fd = -1;
	if (rc == 0 && helper_fd >= 0 && sb->cgroup.dir_fd >= 0 &&
	    (cgroup_fd = sc__cgroup_tasks_open(&sb->cgroup, err)) < 0)
		rc = cgroup_fd;
	struct pass_list *l = calloc(1, sizeof(*l));
	if (rc == 0 && !l)
		rc = sc__err(err, -ENOMEM, "helper");
	if (rc == 0 && helper_fd >= 0)
		rc = list_pass_dirs(sb, l, err);
	if (rc == 0 && child_end < 0)
		rc = sc__err(err, -EMFILE, "control socket");
	if (rc == 0 && helper_fd < 0)
		rc = helper_fd;
	int stderr_end = -1;
	if (rc == 0 && (rc = sc__helper_stderr_new(&sb->helper_stderr, &stderr_end)) < 0)
		sc__err(err, rc, "helper stderr pipe");
	if (rc == 0)
		rc = spawn(sb, helper_fd, child_end, cgroup_fd, stderr_end, l, err);
	if (helper_fd >= 0)
		close(helper_fd);
	if (cgroup_fd >= 0)
		close(cgroup_fd);
	if (child_end >= 0)
		close(child_end);
	if (stderr_end >= 0)
		close(stderr_end);
	if (rc == 0 && !(sb->setup = setup_message(sb, l, &sb->setup_len)))
		rc = sc__err(err, -ENOMEM, "setup message");
	free(l);
	return rc;
}

/* How the helper ended, "exited with status 127" or "was killed by signal 11", into buf, left
 * as it is when the helper has not ended within a second (a closed control socket and its
 * exit are not quite simultaneous); true when a signal ended it. It stays a zombie for
 * stop_helper to reap, unless this process ignores SIGCHLD (the kernel reaps it) or a handler
 * of the caller's reaped it with waitpid(-1): then its status is gone, and buf says so. */
static bool helper_end(struct snapcell_sandbox *sb, char *buf, size_t len)
{
	siginfo_t si = {0};
	if (sc__wait_fd(sb->helper_pidfd, POLLIN, sc__deadline_ms(1000)) < 0)
		return false;
	int rc =
		waitid((idtype_t)P_PIDFD, (id_t)sb->helper_pidfd, &si, WEXITED | WNOHANG | WNOWAIT);
	if (rc < 0 && errno == ECHILD)
		snprintf(buf, len, "ended (status unknown: SIGCHLD ignored or reaped)");
	if (rc < 0 || si.si_pid == 0)
		return false;
	if (si.si_code == CLD_EXITED)
		snprintf(buf, len, "exited with status %d", si.si_status);
	else
		snprintf(buf, len, "was killed by signal %d", si.si_status);
	return si.si_code != CLD_EXITED;
}

/* err becomes head, then, when the helper wrote to its stderr, ": " and its last lines, as
 * many as fit: a helper that cannot start says why there (the dynamic loader's "error while
 * loading shared libraries", a missing file), and the message is all the caller sees. */
static int helper_failed(struct snapcell_sandbox *sb, struct snapcell_error *err, const char *head)
{
	char words[SNAPCELL_ERROR_MESSAGE_LEN];
	size_t used = strlen(head) + 2;
	sc__helper_stderr_drain(sb->helper_stderr);
	words[0] = 0;
	if (used < sizeof(words))
		sc__helper_stderr_words(sb->helper_stderr, words, sizeof(words) - used);
	if (words[0])
		return sc__err(err, SNAPCELL_E_HELPER, "%s: %s", head, words);
	return sc__err(err, SNAPCELL_E_HELPER, "%s", head);
}

/* The helper's greeting says which protocol it speaks: a mismatch (a helper from another
 * snapcell version) ends here, clearly and before any setup, instead of as a confused
 * exchange later. */
static int greet(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	const char *path = helper_path(sb);
	char head[SNAPCELL_ERROR_MESSAGE_LEN], end[64] = "";
	uint32_t protocol = 0;
	int rc = sc__helper_stderr_wait(sb->helper_stderr, sb->ctl,
					sc__deadline_ms(HELLO_TIMEOUT_MS));
	if (rc == 0)
		rc = sc__hello_recv(sb->ctl, &protocol);
	bool killed = false;
	if (rc == -EPIPE) { /* gone: all it wrote is in the pipe now */
		killed = helper_end(sb, end, sizeof(end));
		sc__helper_stderr_drain(sb->helper_stderr);
	}
	if (rc == -ETIMEDOUT)
		snprintf(head, sizeof(head),
			 "helper %s sent no greeting in %d ms: not a snapcell-cell of protocol "
			 "%d (this library, %s)",
			 path, HELLO_TIMEOUT_MS, SC_PROTOCOL_VERSION, SNAPCELL_VERSION);
	else if (rc == -EPIPE && end[0] && (killed || sb->helper_stderr->len > 0))
		snprintf(head, sizeof(head), "helper %s %s before its greeting", path, end);
	else if (rc < 0)
		snprintf(head, sizeof(head),
			 "helper %s %s: not a snapcell-cell of protocol %d (this library, %s)",
			 path, rc == -EPIPE ? "exited without a greeting" : "sent no greeting",
			 SC_PROTOCOL_VERSION, SNAPCELL_VERSION);
	if (rc < 0)
		return helper_failed(sb, err, head);
	if (protocol != SC_PROTOCOL_VERSION)
		return sc__err(
			err, SNAPCELL_E_HELPER,
			"helper %s speaks protocol %u, this library (%s) speaks protocol %d: "
			"use the snapcell-cell built with this library",
			path, protocol, SNAPCELL_VERSION, SC_PROTOCOL_VERSION);
	return 0;
}

/* The template's READY: set up, at the level this sandbox chose, one the config accepts. */
static int check_ready(const struct snapcell_sandbox *sb, const struct sc_ctl_msg *ready,
		       struct snapcell_error *err)
{
	if (ready->type != SC_CTL_READY)
		return sc__err(err, SNAPCELL_E_PROTOCOL, "template setup: unexpected message");
	if (ready->status != 0) {
		sc__err(err, SNAPCELL_E_HELPER, "template setup: %s", ready->message);
		return SNAPCELL_E_HELPER;
	}
	if (ready->level != (int32_t)sb->level)
		return sc__err(err, SNAPCELL_E_PROTOCOL, "template setup: level '%s', not '%s'",
			       snapcell_isolation_name((enum snapcell_isolation)ready->level),
			       snapcell_isolation_name(sb->level));
	if (sb->level < sb->cfg->required)
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "isolation level '%s' required, this host gives '%s'",
			       snapcell_isolation_name(sb->cfg->required),
			       snapcell_isolation_name(sb->level));
	return 0;
}

static int handshake(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	int rc = greet(sb, err);
	if (rc < 0)
		return rc;
	ssize_t n = send(sb->ctl, sb->setup, sb->setup_len, MSG_NOSIGNAL);
	free(sb->setup);
	sb->setup = NULL;
	if (n < 0 && errno != EPIPE && errno != ECONNRESET)
		return sc__err(err, -errno, "send setup");
	rc = n < 0 ? -EPIPE
		   : sc__helper_stderr_wait(sb->helper_stderr, sb->ctl,
					    sc__deadline_ms(READY_TIMEOUT_MS));
	struct sc_ctl_msg ready;
	if (rc == 0)
		rc = sc__ctl_recv(sb->ctl, &ready, NULL, NULL);
	if (rc == -ECONNRESET) /* it died with the setup unread */
		rc = -EPIPE;
	if (rc < 0) {
		char head[96], end[64] = "exited";
		if (rc == -EPIPE)
			helper_end(sb, end, sizeof(end));
		snprintf(head, sizeof(head), "template setup: %s%s", rc == -EPIPE ? "helper " : "",
			 rc == -EPIPE ? end : snapcell_strerror(rc));
		return helper_failed(sb, err, head);
	}
	return check_ready(sb, &ready, err);
}

/* The level this sandbox runs at: namespaces where the host can make them and mount inside,
 * else rlimits (the helper in the caller's namespaces, confined by Landlock, seccomp and
 * rlimits), refused when the config requires namespaces or has network entries (the gate
 * needs each cell's own network namespace: Landlock rules name ports, not addresses). */
static int choose_level(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	static const char *const steps[SC_NS_STEPS] = {
		[SC_NS_USER] = "user namespaces",     [SC_NS_MOUNT] = "mount namespaces",
		[SC_NS_PID] = "pid namespaces",	      [SC_NS_NET] = "network namespaces",
		[SC_NS_IPC] = "ipc namespaces",	      [SC_NS_UTS] = "uts namespaces",
		[SC_NS_CGROUP] = "cgroup namespaces", [SC_NS_MOUNT_INSIDE] = "user namespaces",
	};
	struct sc_ns_check c;
	int rc = sc__ns_check_once(&c);
	if (rc < 0)
		return sc__err(err, rc, "check for namespaces in a child process");
	sb->level = c.ok ? SNAPCELL_ISOLATION_NAMESPACES : SNAPCELL_ISOLATION_RLIMITS;
	if (c.ok)
		return 0;
	const char *step = steps[c.failed];
	if (sb->cfg->required >= SNAPCELL_ISOLATION_NAMESPACES)
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "isolation level '%s' required, this host gives 'rlimits': %s: %s",
			       snapcell_isolation_name(sb->cfg->required), step, c.why);
	if (sb->cfg->allowed.n > 0)
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "network entries need level 'namespaces' (a network namespace per "
			       "cell); this host gives 'rlimits': %s: %s",
			       step, c.why);
	int abi = sc__landlock_version();
	if (abi <= 0)
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "no isolation level on this host: 'rlimits' needs Landlock (Linux "
			       "5.13+, lsm=landlock), absent; 'namespaces': %s: %s",
			       step, c.why);
	return 0;
}

int snapcell_sandbox_new(const struct snapcell_config *cfg, struct snapcell_sandbox **out,
			 struct snapcell_error *err)
{
	if (!cfg || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "sandbox_new: NULL argument");
	struct snapcell_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb)
		return sc__err(err, -ENOMEM, "sandbox");
	sb->ctl = sb->helper_pidfd = sb->out_fd = sb->lock_fd = sb->ids.lock_fd = -1;
	sb->cgroup.dir_fd = -1;
	pthread_mutex_init(&sb->lock, NULL);
	pthread_mutex_init(&sb->ask_lock, NULL);
	sb->asks_tail = &sb->asks;
	pthread_cond_init(&sb->paused_cond, NULL);
	pthread_condattr_t monotonic;
	pthread_condattr_init(&monotonic);
	pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
	pthread_cond_init(&sb->received, &monotonic);
	pthread_cond_init(&sb->reaper_wake, &monotonic);
	pthread_condattr_destroy(&monotonic);
	int rc = sc__config_copy(cfg, &sb->cfg);
	if (rc < 0)
		sc__err(err, rc, "copy config");
	if (rc == 0 && (rc = sc__prefault_new(sb)) < 0)
		sc__err(err, rc, "sandbox");
	if (rc == 0)
		rc = choose_level(sb, err);
	if (rc == 0)
		rc = sc__ids_take(sb->cfg->uid_first, sb->cfg->uid_count, sb->cfg->uid_range_set,
				  &sb->ids, err);
	if (rc == 0)
		rc = make_workdir(sb, err);
	if (rc == 0)
		rc = make_cgroup(sb, err);
	if (rc == 0)
		rc = start_gate(sb, err);
	if (rc == 0)
		rc = sc__python_resolve(sb->cfg, &sb->python, err);
	if (rc == 0)
		rc = start_helper(sb, err);
	if (rc == 0 && (rc = sc__ids_bind(&sb->ids, sb->helper_pid)) < 0)
		sc__err(err, rc, "record the template in the lock of uid %u",
			(unsigned)sb->ids.uid);
	if (rc == 0)
		rc = handshake(sb, err);
	/* From here the helper's stderr is nobody's: the template ignores SIGPIPE, so what it
	 * writes there later fails with EPIPE, as quietly as /dev/null took it before. */
	sc__helper_stderr_free(sb->helper_stderr);
	sb->helper_stderr = NULL;
	if (rc < 0) {
		snapcell_sandbox_free(sb);
		return rc;
	}
	*out = sb;
	return 0;
}

static void stop_helper(struct snapcell_sandbox *sb)
{
	if (sb->ctl >= 0)
		close(sb->ctl); /* the template exits on EOF; its cells die with it (pid 1) */
	if (sb->helper_pidfd < 0)
		return;
	if (sc__wait_fd(sb->helper_pidfd, POLLIN, sc__deadline_ms(2000)) < 0)
		syscall(SYS_pidfd_send_signal, sb->helper_pidfd, SIGKILL, NULL, 0);
	siginfo_t si;
	while (waitid((idtype_t)P_PIDFD, (id_t)sb->helper_pidfd, &si, WEXITED) < 0 &&
	       errno == EINTR)
		;
	close(sb->helper_pidfd);
}

void snapcell_sandbox_free(struct snapcell_sandbox *sb)
{
	if (!sb)
		return;
	sc__paused_end_all(sb);
	sc__sessions_orphan(sb);
	sc__prefault_free(sb); /* its learner may hold a cell to retire */
	stop_helper(sb);
	sweep(sb, true);
	sc__cgroup_sandbox_free(&sb->cgroup); /* the template and its cells are gone */
	free(sb->dying);
	for (size_t i = 0; i < sb->n_ready; i++)
		sc__cell_close(&sb->ready[i]);
	free(sb->ready);
	while (sb->asks) { /* questions abandoned unanswered */
		struct sc_files_ask *next = sb->asks->next;
		free(sb->asks);
		sb->asks = next;
	}
	sc__gate_free(sb->gate);
	if (sb->out_fd >= 0)
		close(sb->out_fd);
	if (sb->workdir) {
		char *slash = strrchr(sb->workdir, '/');
		*slash = 0;
		int parent =
			open(*sb->workdir ? sb->workdir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (parent >= 0) {
			sc__remove_tree(parent, slash + 1, 0);
			close(parent);
		}
		free(sb->workdir);
	}
	if (sb->lock_fd >= 0)
		close(sb->lock_fd); /* after the tree is gone: a reaper may take it now */
	/* After the template was waited for: a pid namespace's init is reaped only once all its
	 * processes are, so nothing runs as the uid any more when the next sandbox takes it. */
	sc__ids_release(&sb->ids);
	pthread_mutex_destroy(&sb->lock);
	pthread_mutex_destroy(&sb->ask_lock);
	pthread_cond_destroy(&sb->paused_cond);
	pthread_cond_destroy(&sb->received);
	pthread_cond_destroy(&sb->reaper_wake);
	sc__python_clear(&sb->python);
	free(sb->setup);
	snapcell_config_free(sb->cfg);
	free(sb);
}

enum snapcell_isolation snapcell_sandbox_isolation(const struct snapcell_sandbox *sb)
{
	return sb ? sb->level : SNAPCELL_ISOLATION_NONE;
}

static int mark_broken(struct snapcell_sandbox *sb, const char *why, struct snapcell_error *err)
{
	sb->broken = true;
	snprintf(sb->broken_msg, sizeof(sb->broken_msg), "%s", why);
	return sc__err(err, SNAPCELL_E_TEMPLATE, "%s", why);
}

static int no_cell(struct snapcell_error *err)
{
	return sc__err(err, SNAPCELL_E_TEMPLATE, "no cell from the template in %d ms",
		       TAKE_TIMEOUT_MS);
}

/* Reads one CELL or RUN_CELL message from the control socket; called without the lock, by the
 * one thread that is receiving. *type is the message's; a RUN_CELL's *status is its own, 0 or
 * why the template has no cell for the run (no fds, *cell untouched). *why, when the template
 * is gone or broke its protocol: the sandbox is then broken, and the caller marks it so under
 * the lock. */
static int read_cell(struct snapcell_sandbox *sb, struct sc_cell *cell, uint32_t *type, int *status,
		     const char **why, struct snapcell_error *err)
{
	int rc = sc__wait_fd(sb->ctl, POLLIN, sc__deadline_ms(TAKE_TIMEOUT_MS));
	if (rc == -ETIMEDOUT)
		return no_cell(err);
	struct sc_ctl_msg m;
	int fds[SC_CTL_MAX_FDS];
	size_t n_fds = 0, want = SC_CELL_NFDS + (sb->gate ? sc__gate_cell_fds(sb->gate) : 0);
	if (rc == 0)
		rc = sc__ctl_recv(sb->ctl, &m, fds, &n_fds);
	*type = rc == 0 || rc == -EMFILE ? m.type : 0;
	*status = 0;
	if (rc == -EMFILE && m.type == SC_CTL_CELL) {
		/* This process is out of descriptors: the kernel dropped the cell's, so that cell
		 * reads EOF and exits. The template still counts it parked: a TAKE makes it park
		 * a replacement, and the sandbox lives on for when descriptors are free again. */
		struct sc_ctl_msg take = {.type = SC_CTL_TAKE};
		if (sc__ctl_send(sb->ctl, &take, NULL, 0) < 0)
			*why = "control socket failed";
		return sc__err(err, -EMFILE, "receive a cell from the template");
	}
	if (rc == -EMFILE && m.type == SC_CTL_RUN_CELL) {
		/* The run's cell, forked for it alone, reads EOF and exits likewise. */
		*status = -EMFILE;
		return 0;
	}
	if (rc < 0) {
		*why = rc == -EPIPE ? "the template exited" : "control socket failed";
		return SNAPCELL_E_TEMPLATE;
	}
	if (m.type == SC_CTL_RUN_CELL && m.status < 0 && n_fds == 0) {
		*status = m.status;
		return 0;
	}
	if ((m.type != SC_CTL_CELL && m.type != SC_CTL_RUN_CELL) || n_fds != want) {
		for (size_t i = 0; i < n_fds; i++)
			close(fds[i]);
		*why = "the template sent a malformed cell message";
		return SNAPCELL_E_TEMPLATE;
	}
	*cell = (struct sc_cell){.id = m.cell_id, .n_net = n_fds - SC_CELL_NFDS};
	memcpy(cell->fds, fds, sizeof(cell->fds));
	memcpy(cell->net, fds + SC_CELL_NFDS, cell->n_net * sizeof(int));
	return 0;
}

/* Queues a received cell; the lock is held. */
static int queue_cell(struct snapcell_sandbox *sb, struct sc_cell *cell, struct snapcell_error *err)
{
	if (SC_ARRAY_RESERVE(sb->ready, sb->cap_ready, sb->n_ready + 1, SC_ARRAY_NO_CAP) < 0) {
		sc__cell_close(cell);
		return sc__err(err, -ENOMEM, "cell queue");
	}
	sb->ready[sb->n_ready++] = *cell;
	return 0;
}

/* Hands a RUN_CELL answer to the oldest FILES question (the template answers them in order);
 * the lock is held. A question whose thread gave up waiting is freed here, its cell killed. */
static int answer_files(struct snapcell_sandbox *sb, struct sc_cell *cell, int status)
{
	struct sc_files_ask *ask = sb->asks;
	if (!ask) {
		if (status == 0)
			retire_locked(sb, cell);
		mark_broken(sb, "the template sent a run's cell nobody asked for", NULL);
		return SNAPCELL_E_TEMPLATE;
	}
	sb->asks = ask->next;
	if (!sb->asks)
		sb->asks_tail = &sb->asks;
	if (ask->abandoned) {
		if (status == 0)
			retire_locked(sb, cell);
		free(ask);
		return 0;
	}
	ask->status = status;
	if (status == 0)
		ask->cell = *cell;
	ask->answered = true;
	return 0;
}

/* Until want cells are parked, or with ask, until the template answered it (or the sandbox is
 * broken). Called and returns with the lock held, which it lets go while it waits: one thread
 * reads the control socket, handing each RUN_CELL to the question it answers, and the others
 * wait on received, so a slow template delays only the threads that need a cell from it, never
 * a run that retires its cell, pauses or resumes meanwhile. A question left unanswered is
 * marked abandoned: its answer is then the reader's to free. */
static int await_cells(struct snapcell_sandbox *sb, size_t want, struct sc_files_ask *ask,
		       struct snapcell_error *err)
{
	uint64_t deadline = sc__deadline_ms(TAKE_TIMEOUT_MS); /* a waiter's: as long as a read */
	struct timespec at = {(time_t)(deadline / 1000000), (long)(deadline % 1000000) * 1000};
	int rc = 0;
	while (rc == 0 && (ask ? !ask->answered : sb->n_ready < want)) {
		if (sb->broken) {
			rc = sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg);
			break;
		}
		if (sb->receiving) {
			if (pthread_cond_timedwait(&sb->received, &sb->lock, &at) == ETIMEDOUT &&
			    (ask ? !ask->answered : sb->n_ready < want) && !sb->broken)
				rc = no_cell(err);
			continue;
		}
		sb->receiving = true;
		pthread_mutex_unlock(&sb->lock);
		struct sc_cell cell;
		uint32_t type = 0;
		int status = 0;
		const char *why = NULL;
		rc = read_cell(sb, &cell, &type, &status, &why, err);
		pthread_mutex_lock(&sb->lock);
		sb->receiving = false;
		pthread_cond_broadcast(&sb->received);
		if (why)
			rc = mark_broken(sb, why, err);
		else if (rc == 0 && type == SC_CTL_RUN_CELL && answer_files(sb, &cell, status) < 0)
			rc = sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg);
		else if (rc == 0 && type == SC_CTL_CELL)
			rc = queue_cell(sb, &cell, err);
	}
	if (rc < 0 && ask && !ask->answered)
		ask->abandoned = true;
	return rc;
}

int sc__sandbox_take_cell(struct snapcell_sandbox *sb, struct sc_cell *out,
			  struct snapcell_error *err)
{
	int rc = 0;
	pthread_mutex_lock(&sb->lock);
	if (sb->broken)
		rc = sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg);
	/* Cells already received die with their template: do not hand out a dead one. */
	struct pollfd gone = {sb->helper_pidfd, POLLIN, 0};
	if (rc == 0 && poll(&gone, 1, 0) == 1)
		rc = mark_broken(sb, "the template exited", err);
	sweep(sb, false);
	if (rc == 0)
		rc = await_cells(sb, 1, NULL, err);
	if (rc == 0) {
		*out = sb->ready[0];
		memmove(sb->ready, sb->ready + 1, --sb->n_ready * sizeof(*sb->ready));
	}
	pthread_mutex_unlock(&sb->lock);
	/* Sent without the lock: a template that reads slowly may block it. */
	struct sc_ctl_msg take = {.type = SC_CTL_TAKE};
	if (rc == 0 && sc__ctl_send(sb->ctl, &take, NULL, 0) < 0) {
		pthread_mutex_lock(&sb->lock);
		mark_broken(sb, "the template exited", NULL);
		pthread_mutex_unlock(&sb->lock);
	}
	return rc;
}

int sc__sandbox_files_cell(struct snapcell_sandbox *sb, uint32_t id, struct sc_cell *out,
			   struct snapcell_error *err)
{
	struct sc_files_ask *ask = calloc(1, sizeof(*ask));
	if (!ask)
		return sc__err(err, -ENOMEM, "run files");
	/* Questions are queued in the order they are sent, which is the order of the answers;
	 * ask_lock keeps the two together, and sb->lock is not held across the send. */
	pthread_mutex_lock(&sb->ask_lock);
	pthread_mutex_lock(&sb->lock);
	int rc = sb->broken ? sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg) : 0;
	sweep(sb, false); /* as a take does: runs with files alone must not pile up the dying */
	if (rc == 0) {
		*sb->asks_tail = ask;
		sb->asks_tail = &ask->next;
	}
	pthread_mutex_unlock(&sb->lock);
	if (rc < 0) {
		pthread_mutex_unlock(&sb->ask_lock);
		free(ask);
		return rc;
	}
	struct sc_ctl_msg m = {.type = SC_CTL_FILES, .cell_id = id};
	bool sent = sc__ctl_send(sb->ctl, &m, NULL, 0) == 0;
	pthread_mutex_lock(&sb->lock);
	pthread_mutex_unlock(&sb->ask_lock);
	if (!sent) {
		rc = mark_broken(sb, "the template exited", err);
		ask->abandoned = true; /* queued: freed with the sandbox */
	} else {
		/* Unanswered there, the question is abandoned: the queue's to free. */
		rc = await_cells(sb, 0, ask, err);
	}
	pthread_mutex_unlock(&sb->lock);
	if (rc < 0)
		return rc;
	/* Answered: the question left the queue, and is this thread's again. */
	rc = ask->status < 0
		     ? sc__err(err, ask->status, "the template could not make the run's cell")
		     : 0;
	if (rc == 0)
		*out = ask->cell;
	free(ask);
	return rc;
}

static uint64_t private_bytes(int pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	FILE *f = fopen(path, "re");
	uint64_t kib = 0;
	unsigned long long v;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Private_Clean: %llu kB", &v) == 1 ||
		    sscanf(line, "Private_Dirty: %llu kB", &v) == 1)
			kib += v;
	if (f)
		fclose(f);
	return kib * 1024;
}

/* The pid behind a pidfd, in our namespace, from /proc/self/fdinfo. */
int sc__pidfd_pid(int pidfd)
{
	char path[64], line[128];
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	FILE *f = fopen(path, "re");
	int pid = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "Pid: %d", &pid) == 1)
			break;
	if (f)
		fclose(f);
	return pid;
}

/* A parked cell's private memory, counted once its process is known to have lived through the
 * read (its pid was not reused meanwhile). */
static bool parked_bytes(int pidfd, uint64_t *sum)
{
	int pid = sc__pidfd_pid(pidfd);
	uint64_t bytes = pid > 0 ? private_bytes(pid) : 0;
	struct pollfd alive = {pidfd, POLLIN, 0};
	if (pid <= 0 || poll(&alive, 1, 0) != 0)
		return false;
	*sum += bytes;
	return true;
}

int snapcell_sandbox_stats(struct snapcell_sandbox *sb, struct snapcell_sandbox_stats *out,
			   struct snapcell_error *err)
{
	if (!sb || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "stats: NULL argument");
	memset(out, 0, sizeof(*out));
	int pidfds[SPARE_CELLS];
	size_t n = 0;
	pthread_mutex_lock(&sb->lock);
	int rc = sb->broken ? sc__err(err, SNAPCELL_E_TEMPLATE, "%s", sb->broken_msg)
			    : await_cells(sb, SPARE_CELLS, NULL, err);
	if (rc < 0)
		sc__err_wrap(err, rc, "stats");
	/* Measured without the lock, through copies of the pidfds: a run may take the cells. */
	for (size_t i = 0; rc == 0 && i < sb->n_ready && n < SPARE_CELLS; i++)
		if ((pidfds[n] = fcntl(sb->ready[i].fds[SC_CELL_PIDFD], F_DUPFD_CLOEXEC, 0)) >= 0)
			n++;
	pthread_mutex_unlock(&sb->lock);
	out->template_pid = sc__pidfd_pid(sb->helper_pidfd);
	out->template_private_bytes = private_bytes(out->template_pid);
	uint64_t sum = 0;
	for (size_t i = 0; i < n; i++) {
		out->parked_cells += parked_bytes(pidfds[i], &sum);
		close(pidfds[i]);
	}
	if (out->parked_cells)
		out->parked_cell_private_bytes = sum / out->parked_cells;
	return rc;
}
