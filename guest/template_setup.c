/* The template's setup: the setup message the helper handed over, decoded into the
 * template's config; the cells' seccomp policy, compiled meanwhile by a child; the code's
 * environment and the interpreter. Not the root (template_root.c) nor the cells
 * (template_park.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "template.h"
#include "util/cleanup.h"
#include "util/util.h"

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

/* The Python paths as sys.path sees them, where the mechanism has them (python_bind); a
 * venv's is its site directory inside. */
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
		if (c->ops->python_bind(p, i, &c->python_binds[i]) < 0)
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
	c->tmp_dir = s->tmp, c->own_uid = s->own_uid, c->cgroup = s->cgroup;
	c->reuse = s->reuse;
	if (!(c->ops = sc_guest_ops_for(s->level)))
		return sc__err(err, SNAPCELL_E_PROTOCOL, "setup message: unknown level %d",
			       s->level);
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
	    !c->output_bytes || c->ops->check(c) < 0)
		return sc__err(err, SNAPCELL_E_PROTOCOL, "setup message: missing values");
	return 0;
}

/* The setup message the helper read, from its sealed memfd (closed here). */
static int read_setup(struct snapcell_error *err)
{
	struct stat st;
	char *buf SC_AUTO_FREE = NULL;
	int rc = fstat(SC_GUEST_SETUP_FD, &st) < 0 ? -errno : 0;
	if (rc == 0 && (st.st_size <= 0 || (size_t)st.st_size > SC_SETUP_MAX))
		rc = -EPROTO;
	if (rc == 0 && !(buf = malloc((size_t)st.st_size)))
		rc = -ENOMEM;
	if (rc == 0 && pread(SC_GUEST_SETUP_FD, buf, (size_t)st.st_size, 0) != st.st_size)
		rc = -EIO;
	close(SC_GUEST_SETUP_FD);
	if (rc < 0)
		return sc__err(err, rc, "read the setup message");
	rc = sc__setup_decode(buf, (size_t)st.st_size, &T.cfg.s, err);
	explicit_bzero(buf, (size_t)st.st_size); /* it names the host's work directory */
	return rc < 0 ? rc : config_from_setup(&T.cfg, err);
}

const struct sc_guest_ops *sc_guest_ops_for(int level)
{
	static const struct sc_guest_ops *const by_level[] = {
		[SNAPCELL_ISOLATION_RLIMITS] = &sc_plain_ops,
		[SNAPCELL_ISOLATION_NAMESPACES] = &sc_namespaces_ops,
		[SNAPCELL_ISOLATION_CGROUPS] = &sc_namespaces_ops,
	};
	return level >= 0 && (size_t)level < SC_ARRAY_LEN(by_level) ? by_level[level] : NULL;
}

const char *sc_guest_env(const struct sc_guest_config *cfg, const char *name)
{
	for (size_t i = 0; i < cfg->s.n_env; i++)
		if (strcmp(cfg->s.env_names[i], name) == 0)
			return cfg->s.env_values[i];
	return NULL;
}

static int set_up_slots_init(struct snapcell_error *err)
{
	void *map =
		mmap(NULL, MAX_CELLS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		return sc__err(err, -errno, "map the cells' set-up bytes");
	T.set_up = map;
	/* before the preloads: python.c checks what they map */
	sc_shared_maps_init(map, MAX_CELLS);
	for (unsigned i = 0; i < MAX_CELLS; i++)
		T.free_slots[T.n_free_slots++] = MAX_CELLS - 1 - i;
	return 0;
}

static unsigned seccomp_flags(void)
{
	return (T.cfg.network ? SC_SECCOMP_NETWORK : 0) | (T.cfg.exec ? SC_SECCOMP_EXEC : 0) |
	       (T.unix_sockets ? SC_SECCOMP_UNIX : 0) |
	       (T.cfg.s.reuse ? SC_SECCOMP_NO_LAZY_FREE : 0) | T.cfg.ops->seccomp_flags();
}

/* libseccomp takes about 2 ms to compile the policy; a child does it meanwhile and sends the
 * program back on a pipe (sc__seccomp_compile_to). At the namespaces level that child is the
 * helper's, forked before it built the root (guest/helper.c), so the compile overlaps the root,
 * the exec and the interpreter's start, and the fork copies a small C program rather than an
 * initialised interpreter, whose every write while the child lives would be a copy-on-write
 * fault; the template takes it over at SC_GUEST_SECCOMP_FD (sc_template_compile_adopt). At the
 * rlimits level the template forks one itself (sc_template_compile_start, still
 * single-threaded, so the fork is safe). Where the child cannot be
 * had, fails, or compiled for other flags than seccomp_flags() says, the template compiles
 * the policy itself, which also gives the error its message. */
static struct {
	pid_t pid;
	int fd;
} compiler = {-1, -1};

void sc_template_compile_start(void)
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
void sc_template_compile_adopt(void)
{
	if (fcntl(SC_GUEST_SECCOMP_FD, F_SETFD, FD_CLOEXEC) == 0)
		compiler.fd = SC_GUEST_SECCOMP_FD;
}

/* Waits for the helper's compiling child's word (SC_GUEST_HOST_DETACHED): whether it came. */
bool sc_template_compile_heard(char word)
{
	char got = 0;
	ssize_t n;
	do
		n = compiler.fd >= 0 ? read(compiler.fd, &got, 1) : 0;
	while (n < 0 && errno == EINTR);
	return n == 1 && got == word;
}

/* Word (SC_GUEST_DETACH_MODULE) to the helper's compiling child: whether it was sent. */
bool sc_template_compile_tell(char word)
{
	return compiler.fd >= 0 && send(compiler.fd, &word, 1, MSG_NOSIGNAL) == 1;
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
	/* Where the code finds its files, over the code's own settings. */
	return T.cfg.ops->environ(err);
}

/* A process the preloads or the warm-up started and left running (os.fork, a server) has the
 * template's capabilities and no seccomp filter: it could open every cell's /proc/<pid>/mem
 * and carry one run's data into another's. The template's only child so far was the seccomp
 * compiler, joined by now; at the namespaces level the template is its pid namespace's init,
 * so a double fork's orphan is its child too. Dead ones are reaped. */
static int no_process_left(struct snapcell_error *err)
{
	for (;;) {
		pid_t pid = waitpid(-1, NULL, WNOHANG);
		if (pid < 0 && errno == EINTR)
			continue;
		if (pid < 0)
			return errno == ECHILD
				       ? 0
				       : sc__err(err, -errno, "wait for the template's children");
		if (pid == 0)
			return sc__err(err, SNAPCELL_E_HELPER,
				       "the preloads or the warm-up leave a process running, which "
				       "could reach every cell; the template must start none that "
				       "outlives them");
	}
}

int sc_template_setup(struct snapcell_error *err)
{
	T.cgroup_fd = -1;
	int rc = read_setup(err);
	if (rc < 0)
		return rc;
	if (T.cfg.cgroup)
		T.cgroup_fd = SC_GUEST_CGROUP_FD;
	if (T.cfg.cgroup && fcntl(T.cgroup_fd, F_SETFD, FD_CLOEXEC) < 0)
		return sc__err(err, -errno, "the memory cgroup's descriptor");
	sc_reuse_init();
	rc = T.cfg.ops->setup(err);
	if (rc == 0)
		rc = set_environment(err);
	if (rc == 0)
		rc = set_up_slots_init(err);
	if (rc == 0)
		rc = sc__caps_lock(err);
	if (rc == 0)
		rc = T.cfg.ops->python_init(err);
	if (rc == 0)
		rc = seccomp_compile_join(err);
	if (rc == 0)
		rc = no_process_left(err);
	if (rc < 0)
		return rc;
	/* A caller that ignores SIGCHLD passes that on through fork and exec: the kernel would
	 * reap the cells itself (no exit record) and report none of their stops (reset.c). */
	signal(SIGCHLD, SIG_DFL);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigaddset(&chld, SC_REUSE_CPU_SIGNAL); /* a reusable cell's run used its CPU limit */
	sigprocmask(SIG_BLOCK, &chld, NULL);
	T.sig_fd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
	if (T.sig_fd < 0)
		return sc__err(err, -errno, "signalfd");
	return 0;
}
