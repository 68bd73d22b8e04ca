/* Starting a sandbox's template: the helper spawned by the mechanism with the descriptors it
 * needs (control socket, Python directories, the guest module), the setup message it is sent,
 * its greeting and READY, and what the error says when it dies before READY. Not the cells it
 * parks afterwards (sandbox.c), nor anything in the guest. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core.h"
#include "net/gate.h"
#include "rpc/frame.h"
#include "rpc/setup.h"
#include "util/cleanup.h"
#include "util/util.h"

#define HELPER_NAME	 "snapcell-cell"
#define READY_TIMEOUT_MS 20000
/* The helper greets before it reads anything; a few ms normally. Past this it is no helper. */
#define HELLO_TIMEOUT_MS 10000

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

/* The Python paths (where the mechanism's cells read them at their host paths, those;
 * otherwise their host path stays the host's) and the interpreter's directories, from l. */
static int setup_paths(const struct snapcell_sandbox *sb, const struct pass_list *l,
		       bool host_paths, struct sc_setup *s)
{
	size_t n_py = l->n - l->n_paths - 2;
	s->python_paths = calloc(l->n_paths + 1, sizeof(*s->python_paths));
	s->python.dirs = calloc(n_py + 1, sizeof(*s->python.dirs));
	if (!s->python_paths || !s->python.dirs)
		return -ENOMEM;
	for (size_t i = 0; i < l->n_paths; i++)
		s->python_paths[i] =
			(struct sc_setup_path){SC_PASS_FD_FIRST + (int)i, (char *)l->site[i],
					       host_paths ? (char *)l->dirs[i] : NULL};
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
 * too, and with reuse the rotation's other cells (sandbox.c await_reset_then); /output has room for
 * the collection cap and a little more, so a cap hit can be reported. */
static void setup_limits(const struct snapcell_sandbox *sb, struct sc_setup *s)
{
	const uint64_t *l = sb->cfg->limits;
	s->spares = SC_SPARE_CELLS;
	s->tmp_bytes = l[SNAPCELL_LIMIT_TMP_BYTES];
	s->frame_cap = SC_FRAME_DEFAULT_CAP;
	s->output_bytes = l[SNAPCELL_LIMIT_OUTPUT_TOTAL_BYTES] + (1u << 20);
	s->memory_bytes = l[SNAPCELL_LIMIT_MEMORY_BYTES];
	s->cpu_ms = l[SNAPCELL_LIMIT_CPU_MS];
	s->processes = l[SNAPCELL_LIMIT_PROCESSES] + SC_SPARE_CELLS + 1 +
		       (s->reuse ? SC_REUSE_ROTATION - 1 : 0);
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

/* SNAPCELL_RESET_MAPS_TEXT=1: resets compare the mappings through the text of /proc/PID/maps,
 * as on a kernel without PROCMAP_QUERY (guest/reset.c), so that tests run that path too. The
 * same mappings are checked either way. */
static bool reuse_maps_text(void)
{
	const char *v = secure_getenv("SNAPCELL_RESET_MAPS_TEXT");
	return v && !strcmp(v, "1");
}

/* The setup message (rpc/setup.h): the work directory's parts, the mechanism's part (its
 * level, where the cells' /tmp directories go, whether cells run as the caller's own uid, its
 * memory cgroup: struct sc_cells_setup), and what setup_* fill in. */
static char *setup_message(const struct snapcell_sandbox *sb, const struct pass_list *l,
			   size_t *len)
{
	char root[PATH_MAX], out[PATH_MAX], input[PATH_MAX], tmp[PATH_MAX];
	snprintf(root, sizeof(root), "%s/root", sb->workdir);
	snprintf(out, sizeof(out), "%s/out", sb->workdir);
	snprintf(input, sizeof(input), "%s/input", sb->workdir);
	snprintf(tmp, sizeof(tmp), "%s/tmp", sb->workdir);
	struct sc_cells_setup m;
	sb->cells.ops->setup(&sb->cells, &m);
	struct sc_setup_net net = {0};
	struct sc_setup s = {.root = root,
			     .out = out,
			     .input = input,
			     .level = (int)m.level,
			     .tmp = m.cell_tmp ? tmp : NULL,
			     .own_uid = m.own_uid,
			     .reuse = sc__sandbox_reuse(sb->cfg, m.level, sb->gate != NULL),
			     .reuse_maps_text = reuse_maps_text(),
			     .cgroup = (char *)m.cgroup,
			     .net = sb->gate ? &net : NULL,
			     .network_notice = sc__network_notice(sb->cfg)};
	setup_limits(sb, &s);
	char *text = NULL;
	if (s.network_notice && setup_paths(sb, l, m.host_paths, &s) == 0 &&
	    setup_code(sb->cfg, &s) == 0 && (!sb->gate || net_setup(sb->gate, &net) == 0))
		text = sc__setup_encode(&s, len);
	setup_free(&s, &net);
	return text;
}

/* The helper starts with no environment at all: the configured variables travel in the
 * setup message and are set after the pivot, so the loader (LD_PRELOAD and friends) never
 * sees them while the host filesystem is still visible. The mechanism starts it (in
 * namespaces of its own, or not; in the sandbox's memory cgroup, or not). */
static int spawn(struct snapcell_sandbox *sb, int helper_fd, int control_fd, int stderr_fd,
		 const struct pass_list *l, struct snapcell_error *err)
{
	char *envp[] = {NULL};
	char *argv[] = {HELPER_NAME, NULL};
	struct sc_spawn spec = {.helper_fd = helper_fd,
				.argv = argv,
				.envp = envp,
				.control_fd = control_fd,
				.cgroup_fd = -1,
				.stderr_fd = stderr_fd,
				.pass_dirs = l->dirs,
				.n_pass_dirs = l->n,
				.n_pass_files = 1,
				.outside_uid = sb->ids.uid,
				.outside_gid = sb->ids.gid};
	return sb->cells.ops->start(&sb->cells, &spec, &sb->helper_pid, &sb->helper_pidfd, err);
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
	int low_end SC_AUTO_CLOSE = sp[1];
	sb->ctl = sp[0];
	return low_end < 0 ? -1 : fcntl(low_end, F_DUPFD_CLOEXEC, 10);
}

int sc__template_start(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	int rc = 0;
	int child_end SC_AUTO_CLOSE = control_pair(sb, &rc, err);
	int helper_fd SC_AUTO_CLOSE = open_helper(sb, err);
	struct pass_list *l SC_AUTO_FREE = calloc(1, sizeof(*l));
	if (rc == 0 && !l)
		rc = sc__err(err, -ENOMEM, "helper");
	if (rc == 0 && helper_fd >= 0)
		rc = list_pass_dirs(sb, l, err);
	if (rc == 0 && child_end < 0)
		rc = sc__err(err, -EMFILE, "control socket");
	if (rc == 0 && helper_fd < 0)
		rc = helper_fd;
	int stderr_end SC_AUTO_CLOSE = -1;
	if (rc == 0 && (rc = sc__helper_stderr_new(&sb->helper_stderr, &stderr_end)) < 0)
		sc__err(err, rc, "helper stderr pipe");
	if (rc == 0)
		rc = spawn(sb, helper_fd, child_end, stderr_end, l, err);
	if (rc == 0 && !(sb->setup = setup_message(sb, l, &sb->setup_len)))
		rc = sc__err(err, -ENOMEM, "setup message");
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
	if (ready->level != (int32_t)sb->cells.level)
		return sc__err(err, SNAPCELL_E_PROTOCOL, "template setup: level '%s', not '%s'",
			       snapcell_isolation_name((enum snapcell_isolation)ready->level),
			       snapcell_isolation_name(sb->cells.level));
	if (sb->cells.level < sb->cfg->required)
		return sc__err(err, SNAPCELL_E_ISOLATION,
			       "isolation level '%s' required, this host gives '%s'",
			       snapcell_isolation_name(sb->cfg->required),
			       snapcell_isolation_name(sb->cells.level));
	return 0;
}

int sc__template_handshake(struct snapcell_sandbox *sb, struct snapcell_error *err)
{
	int rc = greet(sb, err);
	if (rc < 0)
		return rc;
	ssize_t n = send(sb->ctl, sb->setup, sb->setup_len, MSG_NOSIGNAL);
	free(sb->setup);
	sb->setup = NULL;
	if (n < 0 && errno != EPIPE && errno != ECONNRESET)
		return sc__err(err, -errno, "send setup");
	/* The helper builds its root and the interpreter starts, some 7 ms: time this process
	 * would spend waiting, so the other core does the reaping meanwhile. */
	if (n >= 0)
		sc__workdir_reap(sb);
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
