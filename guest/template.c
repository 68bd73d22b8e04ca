/* The template: the interpreter the helper exec'd in the root it built (guest/helper.c),
 * running the guest module (module.c). It decodes the setup message the helper handed over,
 * warms CPython, compiles the seccomp policy, then keeps a few cells parked for the host and
 * reaps them, reporting each exit status on the cell's own exit pipe. It never runs
 * untrusted code itself; the host's closing of the control socket ends it, and with it (as pid
 * 1 of the sandbox's pid namespace) every cell. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/filter.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest.h"
#include "rpc/control.h"
#include "rpc/fds.h"
#include "util/util.h"

#define CTL	  SC_CONTROL_FD
#define MAX_CELLS 4096 /* live cells per sandbox, parked or running */

struct live_cell {
	uint32_t id;
	pid_t pid;
	int exit_fd;   /* write end of the cell's exit pipe */
	unsigned slot; /* its byte in T.set_up */
};

static struct {
	struct sc_guest_config cfg;
	struct sc_bpf seccomp;
	int self_pidns;	   /* to return pid_ns_for_children after each cell */
	int self_netns;	   /* to come back after making a cell's network namespace */
	int out_fd;	   /* SC_OUT_BASE */
	int landlock_fd;   /* the cells' exec ruleset, or -1 (no exec) */
	int tmp_fd;	   /* the rlimits level: the parent of the cells' /tmp directories */
	int cgroup_fd;	   /* the sandbox's memory cgroup, or -1: cells get one each below it */
	bool unix_sockets; /* cells may listen on AF_UNIX sockets (the ruleset scopes them) */
	int sig_fd;
	uint32_t next_id;
	unsigned parked;
	struct live_cell cells[MAX_CELLS];
	size_t n_cells;
	/* One byte per live cell, shared with the cells (MAP_SHARED): a cell sets its own once
	 * set up and then unmaps the page, so only the template's reading of it says whether a
	 * cell's code may have run. free_slots is a stack of unused bytes. */
	volatile uint8_t *set_up;
	unsigned free_slots[MAX_CELLS];
	size_t n_free_slots;
	struct sc_prefault_range *prefault; /* the host's latest list, for cells parked next */
	size_t n_prefault;
} T;

static void report_ready(int status, const char *message)
{
	struct sc_ctl_msg m = {.type = SC_CTL_READY,
			       .status = status,
			       .level = status		   ? SNAPCELL_ISOLATION_NONE
					: T.cfg.rlimits	   ? SNAPCELL_ISOLATION_RLIMITS
					: T.cgroup_fd >= 0 ? SNAPCELL_ISOLATION_CGROUPS
							   : SNAPCELL_ISOLATION_NAMESPACES};
	snprintf(m.message, sizeof(m.message), "%s", message);
	sc__ctl_send(CTL, &m, NULL, 0);
}

/* The ports, addresses and names of a sandbox with network entries. */
static int config_net(struct sc_guest_config *c, const struct sc_setup_net *net)
{
	c->network = true;
	c->net_v6 = net->v6;
	c->net_addrs = net->addrs;
	c->n_net_addrs = net->n_addrs;
	c->net_ports = calloc(net->n_ports + 1, sizeof(uint16_t));
	if (!c->net_ports || net->n_ports * (net->v6 ? 2 : 1) + 1 > SC_CELL_NET_MAX)
		return -1;
	for (size_t i = 0; i < net->n_ports; i++) {
		if (net->ports[i] < 1 || net->ports[i] > 65535)
			return -1;
		c->net_ports[c->n_net_ports++] = (uint16_t)net->ports[i];
	}
	return 0;
}

/* The Python paths as sys.path sees them: bound at SC_PYTHON_PATH_BASE/<i> (not at the host
 * path: that may lie under /tmp, which each cell remounts), or at the rlimits level where
 * they are; a venv's is its site directory inside. */
static int config_paths(struct sc_guest_config *c)
{
	size_t n = c->s.n_python_paths;
	c->python_paths = calloc(n + 1, sizeof(char *));
	c->python_path_site = calloc(n + 1, sizeof(bool));
	c->python_binds = calloc(n + 1, sizeof(char *));
	if (!c->python_paths || !c->python_path_site || !c->python_binds)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct sc_setup_path *p = &c->s.python_paths[i];
		const char *site = p->site;
		if (c->rlimits ? !p->host || !(c->python_binds[i] = strdup(p->host))
			       : asprintf(&c->python_binds[i], SC_PYTHON_PATH_BASE "/%zu", i) < 0)
			return -1;
		if (site && (strstr(site, "..") || site[0] == '/'))
			return -1;
		if (asprintf(&c->python_paths[i], "%s%s%s", c->python_binds[i],
			     site && *site ? "/" : "", site ? site : "") < 0)
			return -1;
		c->python_path_site[i] = site != NULL;
		c->n_python_paths = i + 1;
	}
	return 0;
}

/* The template's view of the setup message, most of it borrowed from T.cfg.s. */
static int config_from_setup(struct sc_guest_config *c, struct snapcell_error *err)
{
	const struct sc_setup *s = &c->s;
	c->root_base = s->root, c->out_dir = s->out, c->input_dir = s->input;
	c->spares = (unsigned)s->spares;
	c->tmp_bytes = s->tmp_bytes, c->output_bytes = s->output_bytes;
	c->frame_cap = (size_t)s->frame_cap;
	c->limits = (struct sc_rlimits){s->memory_bytes, s->cpu_ms, s->processes, s->file_bytes,
					s->open_files};
	c->preloads = s->preloads, c->n_preloads = s->n_preloads, c->warmup = s->warmup;
	c->network_notice = s->network_notice;
	c->rlimits = s->level == SNAPCELL_ISOLATION_RLIMITS;
	c->tmp_dir = s->tmp, c->own_uid = s->own_uid, c->cgroup = s->cgroup;
	c->tool_names = calloc(s->n_tools + 1, sizeof(char *));
	c->tool_attrs = calloc(s->n_tools + 1, sizeof(char *));
	c->tool_docs = calloc(s->n_tools + 1, sizeof(char *));
	for (size_t i = 0; c->tool_names && c->tool_attrs && c->tool_docs && i < s->n_tools; i++) {
		c->tool_names[i] = s->tools[i].name;
		c->tool_attrs[i] = s->tools[i].attr;
		c->tool_docs[i] = s->tools[i].description;
		c->n_tools = i + 1;
	}
	if (c->n_tools != s->n_tools || config_paths(c) < 0)
		return sc__err(err, SNAPCELL_E_PROTOCOL,
			       "setup message: bad tools or python paths");
	if (s->net && config_net(c, s->net) < 0)
		return sc__err(err, SNAPCELL_E_PROTOCOL, "setup message: bad network section");
	if (!c->spares || !c->tmp_bytes || !c->frame_cap || !c->limits.memory_bytes ||
	    !c->output_bytes || (c->rlimits && (!c->tmp_dir || c->network)))
		return sc__err(err, SNAPCELL_E_PROTOCOL, "setup message: missing values");
	return 0;
}

/* The setup message the helper read, from its sealed memfd (closed here). */
static int read_setup(struct snapcell_error *err)
{
	struct stat st;
	char *buf = NULL;
	int rc = fstat(SC_GUEST_SETUP_FD, &st) < 0 ? -errno : 0;
	if (rc == 0 && (st.st_size <= 0 || (size_t)st.st_size > SC_SETUP_MAX))
		rc = -EPROTO;
	if (rc == 0 && !(buf = malloc((size_t)st.st_size)))
		rc = -ENOMEM;
	if (rc == 0 && pread(SC_GUEST_SETUP_FD, buf, (size_t)st.st_size, 0) != st.st_size)
		rc = -EIO;
	close(SC_GUEST_SETUP_FD);
	if (rc < 0) {
		free(buf);
		return sc__err(err, rc, "read the setup message");
	}
	rc = sc__setup_decode(buf, (size_t)st.st_size, &T.cfg.s, err);
	explicit_bzero(buf, (size_t)st.st_size); /* it names the host's work directory */
	free(buf);
	return rc < 0 ? rc : config_from_setup(&T.cfg, err);
}

const char *sc_guest_env(const struct sc_guest_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->s.n_env; i++)
		if (strcmp(cfg->s.env_names[i], name) == 0)
			return cfg->s.env_values[i];
	return NULL;
}

/* What building the root left on the stack below the caller's frame: its path buffers. */
static __attribute__((noinline)) void scrub_stack(void)
{
	char below[128 * 1024];
	explicit_bzero(below, sizeof(below));
}

/* The work directory's host path (where the root, /output and /input come from) and the
 * memory cgroup's (the template holds its descriptor) are the host's business: nothing needs
 * them once the root is built, and every cell forked from here would otherwise carry them in
 * its memory (tests/c/integration/test_isolation.c). */
static void forget_host_paths(void)
{
	char **paths[] = {&T.cfg.s.root, &T.cfg.s.out, &T.cfg.s.input, &T.cfg.s.cgroup,
			  &T.cfg.s.tmp};
	for (size_t i = 0; i < SC_ARRAY_LEN(paths); i++) {
		if (*paths[i])
			explicit_bzero(*paths[i], strlen(*paths[i]));
		free(*paths[i]);
		*paths[i] = NULL;
	}
	T.cfg.root_base = T.cfg.out_dir = T.cfg.input_dir = T.cfg.cgroup = T.cfg.tmp_dir = NULL;
	scrub_stack();
}

/* Preloaded modules may want a writable directory at import (matplotlib its config and font
 * cache under $HOME, which /etc/passwd says is /tmp). The root is read-only, so they get a
 * small tmpfs of their own, detached once they are in memory; cells mount their own /tmp. */
static int init_python(struct snapcell_error *err)
{
	bool scratch = T.cfg.n_preloads > 0 && !T.cfg.rlimits;
	if (scratch && mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			     "mode=1777,size=32m,nr_inodes=4096") < 0)
		return sc__err(err, -errno, "mount /tmp for the preload");
	int rc = sc_py_init(&T.cfg, err);
	if (scratch && umount2("/tmp", MNT_DETACH) < 0 && rc == 0)
		rc = sc__err(err, -errno, "detach the preload's /tmp");
	return rc;
}

static int set_up_slots_init(struct snapcell_error *err)
{
	void *map =
		mmap(NULL, MAX_CELLS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return sc__err(err, -errno, "map the cells' set-up bytes");
	T.set_up = map;
	for (unsigned i = 0; i < MAX_CELLS; i++)
		T.free_slots[T.n_free_slots++] = MAX_CELLS - 1 - i;
	return 0;
}

static unsigned seccomp_flags(void)
{
	return (T.cfg.network ? SC_SECCOMP_NETWORK : 0) | (T.cfg.exec ? SC_SECCOMP_EXEC : 0) |
	       (T.unix_sockets ? SC_SECCOMP_UNIX : 0) | (T.cfg.rlimits ? SC_SECCOMP_HOST : 0) |
	       (T.cfg.rlimits ? SC_SECCOMP_NO_PATH_ATTRS : 0) |
	       (T.cfg.rlimits && sc__landlock_abi() >= SC_LANDLOCK_ABI_SCOPE
			? SC_SECCOMP_SIGNALS_SCOPED
			: 0);
}

/* libseccomp takes about 2 ms to compile the policy; a child does it meanwhile and sends the
 * program back on a pipe (sc__seccomp_compile_to). At the namespaces level that child is the
 * helper's, forked before it built the root (guest/helper.c), so the compile overlaps the root,
 * the exec and the interpreter's start, and the fork copies a small C program rather than an
 * initialised interpreter, whose every write while the child lives would be a copy-on-write
 * fault; the template takes it over at SC_GUEST_SECCOMP_FD. At the rlimits level the template
 * forks one itself (still single-threaded, so the fork is safe). Where the child cannot be
 * had, fails, or compiled for other flags than seccomp_flags() says, the template compiles
 * the policy itself, which also gives the error its message. */
static struct {
	pid_t pid;
	int fd;
} compiler = {-1, -1};

static void seccomp_compile_start(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return;
	pid_t pid = fork();
	if (pid == 0)
		_exit(sc__seccomp_compile_to(p[1], seccomp_flags()) == 0 ? 0 : 1);
	close(p[1]);
	if (pid < 0) {
		close(p[0]);
		return;
	}
	compiler.pid = pid;
	compiler.fd = p[0];
}

/* The helper's compiling child, when it left one. */
static void seccomp_compile_adopt(void)
{
	if (fcntl(SC_GUEST_SECCOMP_FD, F_SETFD, FD_CLOEXEC) == 0)
		compiler.fd = SC_GUEST_SECCOMP_FD;
}

static int seccomp_compile_join(struct snapcell_error *err)
{
	pid_t pid = -1;
	unsigned flags = 0;
	unsigned short len = 0;
	int status = -1;
	bool got = compiler.fd >= 0 && sc__read_all(compiler.fd, &pid, sizeof(pid)) == 0;
	if (compiler.pid < 0 && got && pid > 1)
		compiler.pid = pid;
	got = got && sc__read_all(compiler.fd, &flags, sizeof(flags)) == 0 &&
	      sc__read_all(compiler.fd, &len, sizeof(len)) == 0 && len && pid == compiler.pid;
	size_t bytes = (size_t)len * sizeof(struct sock_filter);
	void *filter = got ? malloc(bytes) : NULL;
	got = filter && sc__read_all(compiler.fd, filter, bytes) == 0;
	if (compiler.fd >= 0)
		close(compiler.fd);
	while (compiler.pid > 0 && waitpid(compiler.pid, &status, 0) < 0 && errno == EINTR)
		;
	if (got && WIFEXITED(status) && WEXITSTATUS(status) == 0 && flags == seccomp_flags()) {
		T.seccomp = (struct sc_bpf){filter, len};
		return 0;
	}
	free(filter);
	return sc__seccomp_compile(&T.seccomp, seccomp_flags(), err);
}

/* The host's root detached before anything else: the helper's compiling child started on it
 * while the interpreter started (guest/helper.c), so this finds it gone (EINVAL, also while
 * the child still waits for the grace period: the mounts left the namespace first), or
 * detaches it where the child has not yet. */
static int host_root_detached(struct snapcell_error *err)
{
	int rc = sc__rootfs_detach_host();
	return rc < 0 ? sc__err(err, rc, "detach the host's root") : 0;
}

/* The guest module's bind detached, by the helper's compiling child or here; EINVAL (not a
 * mount point) says the child did it. */
static int module_detached(struct snapcell_error *err)
{
	char module[PATH_MAX];
	snprintf(module, sizeof(module), SC_GUEST_DIR "/%s", T.cfg.s.guest.file);
	if (umount2(module, MNT_DETACH) < 0 && errno != EINVAL)
		return sc__err(err, -errno, "detach %s", module);
	return 0;
}

/* The namespaces level: the cells' pid and network namespaces to come back to (opened by the
 * helper before the pivot), the root it built, and the exec ruleset when Landlock offers one. */
static int setup_namespaces(struct snapcell_error *err)
{
	T.self_pidns = SC_GUEST_PIDNS_FD;
	T.self_netns = T.cfg.network ? SC_GUEST_NETNS_FD : -1;
	if (fcntl(T.self_pidns, F_SETFD, FD_CLOEXEC) < 0 ||
	    (T.cfg.network && fcntl(T.self_netns, F_SETFD, FD_CLOEXEC) < 0))
		return sc__err(err, -errno, "the helper's namespace descriptors");
	/* Landlock is what confines execve to the cell's interpreter; without it cells exec
	 * nothing (seccomp) and sys.executable stays empty. AF_UNIX listeners (multiprocessing's
	 * forkserver) need the ruleset's scope, and no network: with TCP sockets, seccomp could not
	 * keep listen and accept to AF_UNIX. And no pathname socket of the host in reach: a
	 * read-only bind does not stop a connect, so before Landlock keeps pathname sockets to the
	 * cell's own (ABI 9), only when the root binds no directory of the caller's (Python paths,
	 * the venv), where its processes may listen (sc__seccomp_namespaces_flags, which the
	 * helper's compiling child used too). */
	unsigned flags = sc__seccomp_namespaces_flags(T.cfg.network, T.cfg.n_python_paths,
						      sc__landlock_abi());
	T.cfg.exec = flags & SC_SECCOMP_EXEC;
	T.unix_sockets = flags & SC_SECCOMP_UNIX;
	seccomp_compile_adopt();
	int rc = host_root_detached(err);
	if (rc < 0)
		return rc;
	forget_host_paths();
	/* Loaded: the cells need not see the module's file. The helper's compiling child
	 * detaches it meanwhile (guest/helper.c); module_detached makes sure before any cell. */
	if (compiler.fd < 0 ||
	    send(compiler.fd, (char[]){SC_GUEST_DETACH_MODULE}, 1, MSG_NOSIGNAL) != 1) {
		if ((rc = module_detached(err)) < 0)
			return rc;
	}
	T.landlock_fd = -1;
	if (T.cfg.exec) {
		const char *exe[] = {T.cfg.s.python.executable, sc__rootfs_own_loader()};
		if ((T.landlock_fd = sc__landlock_exec_ruleset(exe, SC_ARRAY_LEN(exe),
							       T.unix_sockets, err)) < 0)
			return T.landlock_fd;
	}
	if (sethostname("snapcell", 8) < 0)
		return sc__err(err, -errno, "sethostname");
	T.out_fd = open(SC_OUT_BASE, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (T.out_fd < 0)
		return sc__err(err, -errno, "open " SC_OUT_BASE);
	return 0;
}

/* The rlimits level: no root to build, no namespace to return to; cells neither exec nor
 * listen (plain.c, hostfs.c). */
static int setup_plain(struct snapcell_error *err)
{
	T.self_pidns = T.self_netns = T.landlock_fd = -1;
	close(SC_GUEST_MODULE_FD); /* the module is loaded */
	return sc_plain_template_setup(&T.cfg, &T.out_fd, &T.tmp_fd, err);
}

/* The code's environment, set through os.environ (the interpreter started with none), and
 * the defaults it overrides. */
static int set_environment(struct snapcell_error *err)
{
	for (size_t i = 0; i < T.cfg.s.n_env; i++)
		if (sc_py_setenv(T.cfg.s.env_names[i], T.cfg.s.env_values[i], true) < 0)
			return sc__err(err, -errno, "setenv %s", T.cfg.s.env_names[i]);
	/* Defaults the code's own environment overrides: the CA bundle for ssl, and matplotlib's
	 * file backend (no display; it would otherwise probe for GUI toolkits). */
	bool bundle = access(SC_CA_BUNDLE, R_OK) == 0;
	/* requests reads certifi's file unless REQUESTS_CA_BUNDLE names another: the same. */
	if ((bundle && (sc_py_setenv("SSL_CERT_FILE", SC_CA_BUNDLE, false) < 0 ||
			sc_py_setenv("REQUESTS_CA_BUNDLE", getenv("SSL_CERT_FILE"), false) < 0)) ||
	    sc_py_setenv("MPLBACKEND", "Agg", false) < 0)
		return sc__err(err, -errno, "setenv defaults");
	/* Where the code finds its files, at every level (the rlimits level's cells set their
	 * own, plain.c). */
	if (!T.cfg.rlimits && (sc_py_setenv("SNAPCELL_INPUT", "/input", true) < 0 ||
			       sc_py_setenv("SNAPCELL_OUTPUT", "/output", true) < 0 ||
			       sc_py_setenv("SNAPCELL_TMP", "/tmp", true) < 0))
		return sc__err(err, -errno, "setenv SNAPCELL_*");
	return 0;
}

static int setup(struct snapcell_error *err)
{
	T.cgroup_fd = -1;
	int rc = read_setup(err);
	if (rc < 0)
		return rc;
	if (T.cfg.cgroup)
		T.cgroup_fd = SC_GUEST_CGROUP_FD;
	if (T.cfg.cgroup && fcntl(T.cgroup_fd, F_SETFD, FD_CLOEXEC) < 0)
		return sc__err(err, -errno, "the memory cgroup's descriptor");
	rc = T.cfg.rlimits ? setup_plain(err) : setup_namespaces(err);
	if (rc == 0)
		rc = set_environment(err);
	if (rc == 0 && T.cfg.rlimits)
		seccomp_compile_start();
	if (rc == 0)
		rc = set_up_slots_init(err);
	if (rc == 0)
		rc = sc__caps_lock(err);
	if (rc == 0)
		rc = init_python(err);
	if (rc == 0)
		rc = seccomp_compile_join(err);
	if (rc == 0 && !T.cfg.rlimits)
		rc = module_detached(err);
	if (rc < 0)
		return rc;
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	T.sig_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (T.sig_fd < 0)
		return sc__err(err, -errno, "signalfd");
	return 0;
}

static void close_all(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Makes the descriptors of one cell above fd 9, where the cell's dup2 to 0-3 cannot clobber
 * them. host[] travel to the host; cell[] are the cell's ends; exit_w stays here. */
static int make_fds(int host[SC_CELL_NFDS], int cell[3], int *exit_w)
{
	int h[3], c[3], e[2];
	host[SC_CELL_PIDFD] = -1;
	host[SC_CELL_OUTPUT] = -1;
	int rc = sc__channels_new(h, c);
	if (rc < 0)
		return rc;
	if (pipe2(e, O_CLOEXEC) < 0) {
		rc = -errno;
		close_all(h, 3), close_all(c, 3);
		return rc;
	}
	int raw[8] = {h[0], h[1], h[2], e[0], c[1], c[2], c[0], e[1]};
	int moved[8];
	for (int i = 0; i < 8; i++) {
		moved[i] = fcntl(raw[i], F_DUPFD_CLOEXEC, 10);
		close(raw[i]);
	}
	host[SC_CELL_RPC] = moved[0];
	host[SC_CELL_STDOUT] = moved[1];
	host[SC_CELL_STDERR] = moved[2];
	host[SC_CELL_EXIT] = moved[3];
	cell[0] = moved[4];
	cell[1] = moved[5];
	cell[2] = moved[6];
	*exit_w = moved[7];
	for (int i = 0; i < 8; i++)
		if (moved[i] < 0) {
			close_all(moved, 8);
			return -EMFILE;
		}
	return 0;
}

/* The cell's network socket: the host's end and the cell's, above fd 9. */
static int make_net_socket(int *host, int *cell)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	*host = fcntl(sv[0], F_DUPFD_CLOEXEC, 10);
	*cell = fcntl(sv[1], F_DUPFD_CLOEXEC, 10);
	close(sv[0]), close(sv[1]);
	if (*host < 0 || *cell < 0) {
		if (*host >= 0)
			close(*host);
		if (*cell >= 0)
			close(*cell);
		return -EMFILE;
	}
	return 0;
}

/* The rlimits level: a plain fork (no namespace to make). */
static pid_t fork_plain_cell(const struct sc_cell_plan *plan)
{
	sc_py_before_fork();
	pid_t pid = fork();
	if (pid == 0)
		sc_cell_main(plan);
	int saved = errno;
	sc_py_after_fork_parent();
	return pid < 0 ? -saved : pid;
}

static pid_t fork_cell(const struct sc_cell_plan *plan)
{
	if (T.cfg.rlimits)
		return fork_plain_cell(plan);
	/* The next child becomes pid 1 of a new pid namespace; then the template's own
	 * namespace is made the children's namespace again for the following cell. */
	if (unshare(CLONE_NEWPID) < 0)
		return -errno;
	sc_py_before_fork();
	pid_t pid = fork();
	if (pid == 0) {
		/* Into its memory cgroup before it makes a page or a namespace of its own. */
		if (plan->cgroup_fd >= 0 && sc__cgroup_cell_enter(plan->cgroup_fd) < 0)
			_exit(126);
		if (unshare(CLONE_NEWNS) < 0)
			_exit(126);
		sc_cell_main(plan);
	}
	int saved = errno;
	sc_py_after_fork_parent();
	if (setns(T.self_pidns, CLONE_NEWPID) < 0 && pid > 0) {
		/* Without this no further cell could be made; end the sandbox loudly. */
		kill(pid, SIGKILL);
		exit(3);
	}
	return pid < 0 ? -saved : pid;
}

/* Each cell's /output is a tmpfs of its own, capped in size and inodes, so code cannot fill
 * the host's disk or memory through it. The host reads it through the descriptor sent with
 * the cell; the mount is detached when the cell is reaped and freed when the host closes
 * that descriptor, so nothing needs removing file by file. */
static int mount_output(const char *name)
{
	if (T.cfg.rlimits)
		return sc_plain_cell_dirs(T.out_fd, T.tmp_fd, name);
	char path[64], opts[96];
	snprintf(path, sizeof(path), SC_OUT_BASE "/%s", name);
	snprintf(opts, sizeof(opts), "mode=0755,size=%llu,nr_inodes=%u",
		 (unsigned long long)T.cfg.output_bytes, SC_OUTPUT_INODES);
	if (mkdirat(T.out_fd, name, 0755) < 0 && errno != EEXIST)
		return -errno;
	if (mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts) < 0)
		return -errno;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int rc = -errno;
		umount2(path, MNT_DETACH);
		return rc;
	}
	int high = fcntl(fd, F_DUPFD_CLOEXEC, 10);
	close(fd);
	if (high < 0)
		umount2(path, MNT_DETACH);
	return high < 0 ? -EMFILE : high;
}

static void unmount_output(uint32_t id)
{
	char path[64], name[16];
	snprintf(path, sizeof(path), SC_OUT_BASE "/%u", id);
	snprintf(name, sizeof(name), "%u", id);
	if (T.cfg.rlimits) {
		sc_plain_cell_forget(T.tmp_fd, name);
		return;
	}
	umount2(path, MNT_DETACH);
	unlinkat(T.out_fd, name, AT_REMOVEDIR); /* the host's retire may find it gone */
}

/* An address of the entries on loopback, so a connection to it stays in the namespace and
 * reaches a listener. */
static int add_address(int s4, int s6, unsigned index, const char *text)
{
	struct ifreq ifr = {0};
	struct sockaddr_in *sin = (struct sockaddr_in *)&ifr.ifr_addr;
	if (inet_pton(AF_INET, text, &sin->sin_addr) == 1) {
		if ((ntohl(sin->sin_addr.s_addr) >> 24) == 127)
			return 0; /* loopback's own already */
		snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo:%u", index);
		sin->sin_family = AF_INET;
		if (ioctl(s4, SIOCSIFADDR, &ifr) < 0)
			return -errno;
		inet_pton(AF_INET, "255.255.255.255", &sin->sin_addr);
		return ioctl(s4, SIOCSIFNETMASK, &ifr) < 0 ? -errno : 0;
	}
	struct { /* struct in6_ifreq of <linux/ipv6.h>, which clashes with <netinet/in.h> */
		struct in6_addr addr;
		uint32_t prefixlen;
		int ifindex;
	} r6 = {.prefixlen = 128, .ifindex = (int)if_nametoindex("lo")};
	if (inet_pton(AF_INET6, text, &r6.addr) != 1 || r6.ifindex == 0)
		return -EINVAL;
	return ioctl(s6, SIOCSIFADDR, &r6) < 0 && errno != EEXIST ? -errno : 0;
}

static int listen_on(int family, uint16_t port)
{
	int s = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
	struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(port)};
	struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	int rc = s < 0 ? -errno : 0;
	if (rc == 0 && family == AF_INET6 &&
	    setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
		rc = -errno;
	if (rc == 0 && (family == AF_INET ? bind(s, (struct sockaddr *)&a4, sizeof(a4))
					  : bind(s, (struct sockaddr *)&a6, sizeof(a6))) < 0)
		rc = -errno;
	if (rc == 0 && listen(s, 128) < 0)
		rc = -errno;
	int high = rc == 0 ? fcntl(s, F_DUPFD_CLOEXEC, 10) : -1;
	if (rc == 0 && high < 0)
		rc = -EMFILE;
	if (s >= 0)
		close(s);
	return rc < 0 ? rc : high;
}

/* Moves the template into a new network namespace for the next cell (the caller comes back
 * with setns) and makes what the cell's connections land on: loopback up, the entries'
 * addresses on it, one listener per port and family, appended to fds. */
static int net_enter(int *fds, size_t *n)
{
	if (unshare(CLONE_NEWNET) < 0)
		return -errno;
	int s4 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int s6 = T.cfg.net_v6 ? socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0) : -1;
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	int rc = s4 < 0 || (T.cfg.net_v6 && s6 < 0) ? -errno : 0;
	if (rc == 0 && ioctl(s4, SIOCGIFFLAGS, &ifr) < 0)
		rc = -errno;
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (rc == 0 && ioctl(s4, SIOCSIFFLAGS, &ifr) < 0)
		rc = -errno;
	for (size_t i = 0; rc == 0 && i < T.cfg.n_net_addrs; i++)
		rc = add_address(s4, s6, (unsigned)i, T.cfg.net_addrs[i]);
	for (size_t i = 0; rc == 0 && i < T.cfg.n_net_ports; i++)
		for (int v6 = 0; rc == 0 && v6 <= (T.cfg.net_v6 ? 1 : 0); v6++) {
			int fd = listen_on(v6 ? AF_INET6 : AF_INET, T.cfg.net_ports[i]);
			if (fd < 0)
				rc = fd;
			else
				fds[(*n)++] = fd;
		}
	if (s4 >= 0)
		close(s4);
	if (s6 >= 0)
		close(s6);
	return rc;
}

/* Forks a cell and hands it to the host: a parked one (CELL), or with input_layer, one made
 * for a run's files (RUN_CELL). */
static int park_cell(const char *input_layer)
{
	if (T.n_cells == MAX_CELLS)
		return -EAGAIN;
	int host[SC_CTL_MAX_FDS], cell[3] = {-1, -1, -1}, exit_w = -1, net_cell = -1;
	size_t n_host = SC_CELL_NFDS;
	int rc = make_fds(host, cell, &exit_w);
	if (rc < 0)
		return rc;
	if (T.cfg.network && (rc = make_net_socket(&host[n_host++], &net_cell)) < 0) {
		n_host--;
		close_all(host, SC_CELL_NFDS), close_all(cell, 3), close(exit_w);
		return rc;
	}
	uint32_t id = T.next_id++;
	char name[16];
	snprintf(name, sizeof(name), "%u", id);
	unsigned slot = T.free_slots[T.n_free_slots - 1]; /* n_cells < MAX_CELLS: one is free */
	T.set_up[slot] = 0;
	struct sc_cell_plan plan = {.cfg = &T.cfg,
				    .seccomp = &T.seccomp,
				    .set_up = T.set_up + slot,
				    .set_up_map = (void *)T.set_up,
				    .set_up_len = MAX_CELLS,
				    .id = id,
				    .stdout_fd = cell[0],
				    .stderr_fd = cell[1],
				    .rpc_fd = cell[2],
				    .net_fd = net_cell,
				    .landlock_fd = T.landlock_fd,
				    .prefault = T.prefault,
				    .n_prefault = T.n_prefault,
				    .cgroup_fd = -1,
				    .input_layer = input_layer};
	pid_t pid = -1;
	if ((host[SC_CELL_OUTPUT] = mount_output(name)) < 0)
		rc = host[SC_CELL_OUTPUT];
	if (rc == 0 && T.cgroup_fd >= 0 &&
	    (plan.cgroup_fd = sc__cgroup_cell_make(T.cgroup_fd, id, T.cfg.limits.memory_bytes)) < 0)
		rc = plan.cgroup_fd;
	if (rc == 0 && T.cfg.network)
		rc = net_enter(host, &n_host);
	if (rc == 0 && (pid = fork_cell(&plan)) < 0)
		rc = pid;
	if (plan.cgroup_fd >= 0)
		close(plan.cgroup_fd);
	if (plan.cgroup_fd >= 0 && pid <= 0)
		sc__cgroup_cell_drop(T.cgroup_fd, id); /* no cell will be removed to take it */
	if (T.cfg.network && setns(T.self_netns, CLONE_NEWNET) < 0) {
		/* Every later cell would share this one's namespace; end the sandbox loudly. */
		if (pid > 0)
			kill(pid, SIGKILL);
		exit(3);
	}
	close_all(cell, 3);
	if (net_cell >= 0)
		close(net_cell);
	if (rc == 0) {
		host[SC_CELL_PIDFD] = (int)syscall(SYS_pidfd_open, pid, 0);
		struct sc_ctl_msg m = {.type = input_layer ? SC_CTL_RUN_CELL : SC_CTL_CELL,
				       .cell_id = id};
		rc = host[SC_CELL_PIDFD] < 0 ? -errno : sc__ctl_send(CTL, &m, host, n_host);
	}
	if (pid > 0) {
		T.cells[T.n_cells++] = (struct live_cell){id, pid, exit_w, slot};
		T.n_free_slots--;
	} else {
		close(exit_w);
		if (host[SC_CELL_OUTPUT] >= 0)
			unmount_output(id); /* no cell will be reaped to do it */
	}
	if (rc < 0 && pid > 0)
		kill(pid, SIGKILL);
	close_all(host, n_host);
	return rc;
}

/* A cell for one run with files of its own (SC_CTL_FILES): forked now, off the parked ones,
 * its /input showing SC_OUT_BASE/in-<id>. The host waits for the answer either way. */
static void run_cell(uint32_t files_id)
{
	char layer[32];
	snprintf(layer, sizeof(layer), "in-%u", files_id);
	int rc = T.cfg.rlimits ? -EOPNOTSUPP : park_cell(layer);
	struct sc_ctl_msg m = {.type = SC_CTL_RUN_CELL, .status = rc};
	if (rc < 0) /* park_cell sent nothing: it fails only before its send */
		sc__ctl_send(CTL, &m, NULL, 0);
}

/* The rlimits level: what dead cells left (no pid namespace ended it with them). */
static void kill_orphans(void)
{
	pid_t live[MAX_CELLS];
	for (size_t i = 0; i < T.n_cells; i++)
		live[i] = T.cells[i].pid;
	sc_plain_kill_orphans(live, T.n_cells);
}

static void reap(void)
{
	struct signalfd_siginfo si;
	while (read(T.sig_fd, &si, sizeof(si)) > 0)
		;
	for (;;) {
		int status;
		struct rusage ru;
		pid_t pid = wait4(-1, &status, WNOHANG, &ru);
		if (pid <= 0)
			return;
		/* First, before the dead cell's /tmp is removed (up to 2 s): what it left must
		 * not write there meanwhile, nor outlive a host that stops waiting for us. */
		if (T.cfg.rlimits)
			kill_orphans();
		for (size_t i = 0; i < T.n_cells; i++) {
			if (T.cells[i].pid != pid)
				continue;
			struct sc_exit_record rec = {
				.wait_status = status,
				.cpu_us = (uint64_t)ru.ru_utime.tv_sec * 1000000 +
					  ru.ru_utime.tv_usec +
					  (uint64_t)ru.ru_stime.tv_sec * 1000000 +
					  ru.ru_stime.tv_usec,
				.maxrss_kib = (uint64_t)ru.ru_maxrss};
			if (!T.set_up[T.cells[i].slot])
				rec.flags |= SC_EXIT_NOT_SET_UP;
			/* The cgroup goes here, off the host's path; a host that finds it gone
			 * waits for this record, which carries its figures. */
			if (T.cgroup_fd >= 0 &&
			    sc__cgroup_cell_release(T.cgroup_fd, T.cells[i].id,
						    &rec.charged_peak_bytes, &rec.oom_kills) == 0)
				rec.flags |= SC_EXIT_CGROUP;
			T.free_slots[T.n_free_slots++] = T.cells[i].slot;
			sc__write_all(T.cells[i].exit_fd, &rec, sizeof(rec));
			close(T.cells[i].exit_fd);
			unmount_output(T.cells[i].id);
			T.cells[i] = T.cells[--T.n_cells];
			break;
		}
	}
}

/* The host's list of pages to fault in, from the memfd it sent: it replaces the one before.
 * Only its shape is checked; the cells treat the ranges as hints (guest/cell.c). */
static void take_prefault(int fd)
{
	struct stat st;
	size_t max = SC_PREFAULT_MAX_RANGES * sizeof(struct sc_prefault_range);
	struct sc_prefault_range *list = NULL;
	size_t n = 0;
	if (fstat(fd, &st) == 0 && st.st_size > 0 && (size_t)st.st_size <= max &&
	    st.st_size % sizeof(*list) == 0 && (list = malloc((size_t)st.st_size)) &&
	    pread(fd, list, (size_t)st.st_size, 0) == st.st_size)
		n = (size_t)st.st_size / sizeof(*list);
	for (size_t i = 0; i < n; i++)
		if (list[i].start % 4096 || !list[i].pages)
			n = 0;
	if (n == 0) {
		free(list); /* a list that is not one: the cells keep the one before */
		return;
	}
	free(T.prefault);
	T.prefault = list;
	T.n_prefault = n;
}

/* How long the template leaves the CPUs to the sandbox's first cell before it warms up. */
#define WARM_DELAY_MS 50

/* The poll timeout: until the warm-up may begin (or at once), or retry_ms when warm. */
static int poll_timeout(bool warming, bool warm_now, uint64_t warm_at, int retry_ms)
{
	if (!warming)
		return retry_ms;
	uint64_t now = sc__now_us();
	if (warm_now || now >= warm_at)
		return 0;
	int until = (int)((warm_at - now + 999) / 1000);
	return retry_ms >= 0 && retry_ms < until ? retry_ms : until;
}

/* Returns when the host closes the control socket. The sandbox's first cell is parked before
 * the template imports and warms up the common standard library (sc_py_warm_template), so
 * the first run, usually right after READY, waits for none of it. The warm-up begins once
 * that cell is gone, or WARM_DELAY_MS after it was parked, so it does not compete with it for
 * the CPUs; it goes a step (a few ms) at a time between the host's messages. Every later cell
 * is forked from the warmed template. */
static void serve(void)
{
	int retry_ms = -1;
	bool warming = true;
	uint64_t warm_at = 0;
	for (;;) {
		unsigned want = !warming ? T.cfg.spares : T.next_id == 0 ? 1 : 0;
		while (T.parked < want) {
			if (park_cell(NULL) < 0) {
				retry_ms = 50; /* out of processes or fds: try again soon */
				break;
			}
			T.parked++;
			retry_ms = -1;
		}
		if (warming && !warm_at)
			warm_at = sc__deadline_ms(WARM_DELAY_MS);
		bool warm_now = warming && (T.n_cells == 0 || sc__now_us() >= warm_at);
		struct pollfd pf[2] = {{CTL, POLLIN, 0}, {T.sig_fd, POLLIN, 0}};
		int ready = poll(pf, 2, poll_timeout(warming, warm_now, warm_at, retry_ms));
		if (ready < 0 && errno != EINTR)
			return;
		if (ready == 0 && warm_now) {
			warming = sc_py_warm_template();
			continue;
		}
		if (pf[1].revents)
			reap();
		if (pf[0].revents) {
			struct sc_ctl_msg m;
			int fds[SC_CTL_MAX_FDS];
			size_t n_fds = 0;
			if (sc__ctl_recv(CTL, &m, fds, &n_fds) < 0)
				return;
			if (m.type == SC_CTL_TAKE && T.parked > 0)
				T.parked--;
			if (m.type == SC_CTL_PREFAULT && n_fds == 1)
				take_prefault(fds[0]);
			if (m.type == SC_CTL_FILES)
				run_cell(m.cell_id);
			close_all(fds, n_fds);
		}
	}
}

int sc_template_main(void)
{
	struct snapcell_error err = {0};
	signal(SIGPIPE, SIG_IGN);
	if (setup(&err) < 0) {
		report_ready(err.code, err.message);
		return 1;
	}
	report_ready(0, "ready");
	serve();
	if (T.cfg.rlimits)
		sc_plain_kill_all();
	return 0;
}
