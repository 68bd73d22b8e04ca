/* Asking an interpreter what it is: runs it once with a short script and reads the answer, as
 * nginx unit takes its paths from the interpreter's own sys.path. Judging the answer (which
 * interpreters snapcell runs) is python_env.c's; this file only asks, parses and remembers. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core.h"
#include "prelude.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/fdset.h"
#include "util/util.h"

#define PROBE_TIMEOUT_MS 5000
#define ANSWER_MAX	 (256u << 10) /* the compiled prelude (hex) is most of it: ~72 KiB */
#define STDERR_KEEP	 160
#define CACHE_MAX	 64
#define DIRS_MAX	 32

extern char **environ;

/* Run with -I -S: no site, no user or environment paths, so what it reports is the
 * interpreter's own. The extension modules are imported only so their shared libraries are
 * mapped: the system directories they load from are what a cell needs bound. A pyenv
 * `python3` is a bash shim; sys.executable names the binary it finally ran. It first names
 * that binary alone and reads whether to go on ("more"): when the per-user cache has that
 * binary's answer, the host says "enough" and takes it, so a shim (whose own start, ~150 ms of
 * bash, cannot be cached: see probe_cache.c) costs only itself. */
static const char PROBE[] =
	"import sys, os, json, sysconfig\n"
	"exe = getattr(sys, '_base_executable', '') or sys.executable\n"
	"real = lambda p: os.path.realpath(p) if p else ''\n"
	"print(json.dumps({'executable_first': real(exe)}), flush=True)\n"
	"if sys.stdin.readline() != 'more\\n':\n"
	"    sys.exit(0)\n"
	"for m in ('_ssl', '_ctypes', 'zlib', '_hashlib', '_bz2', '_lzma', '_sqlite3',\n"
	"          'pyexpat', '_decimal', '_uuid', 'readline', '_curses'):\n"
	"    try:\n"
	"        __import__(m)\n"
	"    except Exception:\n"
	"        pass\n"
	"libs = set()\n"
	"try:\n"
	"    with open('/proc/self/maps') as f:\n"
	"        for line in f:\n"
	"            f5 = line.split(None, 5)\n"
	"            p = f5[5].strip() if len(f5) == 6 else ''\n"
	"            if p.startswith('/') and '.so' in os.path.basename(p) \\\n"
	"                    and not p.endswith(' (deleted)'):\n"
	"                libs.add(os.path.dirname(os.path.realpath(p)))\n"
	"except OSError:\n"
	"    pass\n"
	"def prelude():\n"
	"    try:\n"
	"        import marshal\n"
	"        return marshal.dumps(compile(sys.argv[1], '<snapcell>', 'exec')).hex()\n"
	"    except Exception:\n"
	"        return None\n"
	"v = sysconfig.get_config_var\n"
	"dyn = [p for p in sys.path if os.path.basename(p) == 'lib-dynload']\n"
	"print(json.dumps({'implementation': sys.implementation.name,\n"
	"    'version': list(sys.version_info[:3]), 'executable': real(exe),\n"
	"    'base_prefix': real(sys.base_prefix), 'stdlib': real(sysconfig.get_path('stdlib')),\n"
	"    'platstdlib': real(sysconfig.get_path('platstdlib')),\n"
	"    'dynload': real(dyn[0] if dyn else v('DESTSHARED')),\n"
	"    'gil_disabled': bool(v('Py_GIL_DISABLED')), 'shared': bool(v('Py_ENABLE_SHARED')),\n"
	"    'libdir': real(v('LIBDIR')), 'libs': sorted(libs), 'sys_version': sys.version,\n"
	"    'loader_env': any(k.startswith('LD_') for k in os.environ),\n"
	"    'prelude': prelude()}))\n";

/* The answers so far, by the file asked (after links) and its identity: a file replaced or
 * rebuilt is asked again. Entries stay for the process's life (at most CACHE_MAX). */
struct answer {
	char *path;
	dev_t dev;
	ino_t ino;
	struct timespec mtime;
	struct sc_python_probe probe;
};
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct answer cache[CACHE_MAX];
static size_t n_cache;

static void clear_probe(struct sc_python_probe *p)
{
	free(p->implementation);
	p->implementation = NULL;
	sc__python_clear(&p->py);
}

/* The probe's first line, and the host's reply. */
struct talk {
	int in_fd;	      /* the child's stdin: a socket, so a reply to a child gone raises
			       * no SIGPIPE in the caller */
	const char *real;     /* the file run (after links) */
	char named[PATH_MAX]; /* the binary the first line named, "" when none (not our probe) */
	bool replied;
	/* A launcher's binary (named is not real): its identity, and its answer when the cache
	 * had it ("enough" then, else "more": the launcher's run answers for it). */
	struct stat named_st;
	struct sc_python_probe *out;
	const char *state;
	bool hit;
};

static bool from_cache(const char *real, const struct stat *st, struct sc_python_probe *out,
		       const char **state);

/* Once the answer has a first line: when it names a binary, "more" when that is the file run
 * (its cache entry was already missed) or a binary the cache has no answer for, "enough" when
 * it has; the line is taken out of the answer. Anything else, or stdout closing first, gets
 * the end of stdin. */
static void reply(struct talk *t, char *answer, size_t *answer_len, bool closed)
{
	static const char KEY[] = "{\"executable_first\": ";
	char *nl = memchr(answer, '\n', *answer_len);
	if (t->replied || (!nl && !closed))
		return;
	t->replied = true;
	json_t *line = nl && !strncmp(answer, KEY, strlen(KEY))
			       ? json_loadb(answer, (size_t)(nl - answer), 0, NULL)
			       : NULL;
	const char *named = json_string_value(json_object_get(line, "executable_first"));
	if (named && named[0] == '/' && strlen(named) < sizeof(t->named)) {
		snprintf(t->named, sizeof(t->named), "%s", named);
		t->hit = strcmp(named, t->real) != 0 && stat(named, &t->named_st) == 0 &&
			 S_ISREG(t->named_st.st_mode) &&
			 from_cache(named, &t->named_st, t->out, &t->state);
		const char *word = t->hit ? "enough\n" : "more\n";
		(void)!send(t->in_fd, word, strlen(word), MSG_NOSIGNAL);
		*answer_len -= (size_t)(nl + 1 - answer);
		memmove(answer, nl + 1, *answer_len);
	}
	json_decref(line);
	shutdown(t->in_fd, SHUT_WR);
}

/* Reads the child's stdout (capped), replying to its first line, and keeps the start of its
 * stderr until both close or the deadline passes; -ETIMEDOUT or -E2BIG then. */
static int collect(int out_fd, int err_fd, struct talk *t, char *answer, size_t *answer_len,
		   char *why, size_t why_len)
{
	uint64_t deadline = sc__deadline_ms(PROBE_TIMEOUT_MS);
	size_t n_why = 0;
	*answer_len = 0;
	while (out_fd >= 0 || err_fd >= 0) {
		struct pollfd p[2] = {{.fd = out_fd, .events = POLLIN},
				      {.fd = err_fd, .events = POLLIN}};
		uint64_t now = sc__now_us();
		if (now >= deadline)
			return -ETIMEDOUT;
		int r = poll(p, 2, (int)((deadline - now + 999) / 1000));
		if (r < 0 && errno != EINTR)
			return -errno;
		char junk[512];
		if (out_fd >= 0 && p[0].revents) {
			ssize_t n = read(out_fd, answer + *answer_len, ANSWER_MAX - *answer_len);
			if (n > 0 && (*answer_len += (size_t)n) == ANSWER_MAX)
				return -E2BIG;
			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
				out_fd = -1;
			reply(t, answer, answer_len, out_fd < 0);
		}
		if (err_fd >= 0 && p[1].revents) {
			ssize_t n = read(err_fd, junk, sizeof(junk));
			/* It goes into a message: no control bytes. */
			for (ssize_t i = 0; i < n && n_why + 1 < why_len; i++)
				why[n_why++] = junk[i] == '\n'		       ? ' '
					       : (unsigned char)junk[i] < 0x20 ? '?'
									       : junk[i];
			why[n_why] = 0;
			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
				err_fd = -1;
		}
	}
	return 0;
}

/* The caller's environment without the dynamic loader's variables (LD_PRELOAD,
 * LD_LIBRARY_PATH, ...): the template's interpreter starts with none, so a library they load
 * is none of a cell's, and its directory (a home, say) must not be bound for the cells. A
 * malloc'd array of the caller's own strings, or NULL. */
static char **loader_free_environment(void)
{
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 1, sizeof(*env));
	for (size_t i = 0; env && i < n; i++)
		if (strncmp(environ[i], "LD_", 3) != 0)
			env[k++] = environ[i];
	return env;
}

/* Runs path -I -S -c PROBE with the caller's environment (a pyenv shim reads PYENV_*) but the
 * loader's variables, for at most PROBE_TIMEOUT_MS; *answer is its stdout after the first line,
 * NUL-terminated, malloc'd. t->real is path after links; t->named gets the binary the first
 * line names. why gets the start of its stderr, or what went wrong. */
static int run(const char *path, struct talk *t, char **answer, char *why, size_t why_len)
{
	struct sc_fdset fds SC_AUTO_FDSET = SC_FDSET_INIT; /* six members: always room */
	int out[2], errp[2], in[2];
	char *buf SC_AUTO_FREE = malloc(ANSWER_MAX + 1);
	char **env SC_AUTO_FREE = loader_free_environment();
	why[0] = 0;
	if (!buf || !env)
		return -ENOMEM;
	int rc = sc__fdset_pipe(&fds, out, O_CLOEXEC);
	if (rc == 0)
		rc = sc__fdset_pipe(&fds, errp, O_CLOEXEC);
	if (rc == 0 && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) < 0)
		rc = -errno;
	if (rc < 0)
		return rc;
	sc__fdset_add(&fds, in[0]);
	sc__fdset_add(&fds, in[1]);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[1], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	posix_spawn_file_actions_adddup2(&fa, errp[1], 2);
	posix_spawnattr_t attr;
	posix_spawnattr_init(&attr);
	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	/* Its own process group, so a shim's children die with it at the deadline. */
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
						POSIX_SPAWN_SETPGROUP);
	/* The prelude's source is the script's argument: it compiles it (the same flags as
	 * the template's: -I -S, no -O), so templates load its code instead of compiling it. */
	char *argv[] = {(char *)path, "-I", "-S", "-c", (char *)PROBE, (char *)sc_prelude_py, NULL};
	pid_t pid;
	rc = -posix_spawn(&pid, path, &fa, &attr, argv, env);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	sc__fdset_close(&fds, out[1]);
	sc__fdset_close(&fds, errp[1]);
	sc__fdset_close(&fds, in[1]);
	*t = (struct talk){.in_fd = in[0], .real = t->real, .out = t->out};
	size_t len = 0;
	if (rc == 0) {
		rc = collect(out[0], errp[0], t, buf, &len, why, why_len);
		if (rc < 0)
			kill(-pid, SIGKILL);
		/* 0 when it cannot be known (a caller that ignores SIGCHLD has it reaped). */
		int status = 0;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !why[0])
			snprintf(why, why_len, "it exited with status %d",
				 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
	}
	if (rc < 0)
		return rc;
	buf[len] = 0;
	*answer = SC_STEAL_PTR(buf);
	return 0;
}

/* Whether dir is already covered: the same directory or one beneath a listed one. */
static bool covered(char **dirs, size_t n, const char *dir)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = strlen(dirs[i]);
		if (strncmp(dir, dirs[i], len) == 0 &&
		    (dir[len] == 0 || dir[len] == '/' || (len == 1 && dirs[i][0] == '/')))
			return true;
	}
	return false;
}

/* Adds dir (absolute, existing, not yet covered) to py->dirs, as the host resolves it (the
 * answer's "/usr/.." is "/" when judged); drops listed dirs it covers. */
static int add_dir(struct sc_python *py, const char *answered)
{
	char dir[PATH_MAX];
	struct stat st;
	if (!answered || answered[0] != '/' || !realpath(answered, dir) || stat(dir, &st) < 0 ||
	    !S_ISDIR(st.st_mode) || covered(py->dirs, py->n_dirs, dir))
		return 0;
	size_t k = 0, len = strlen(dir);
	for (size_t i = 0; i < py->n_dirs; i++) {
		bool inside = strncmp(py->dirs[i], dir, len) == 0 && py->dirs[i][len] == '/';
		if (inside)
			free(py->dirs[i]);
		else
			py->dirs[k++] = py->dirs[i];
	}
	py->n_dirs = k;
	if (py->n_dirs == DIRS_MAX)
		return -E2BIG;
	if (SC_ARRAY_ADD(py->dirs, py->n_dirs, DIRS_MAX) < 0 ||
	    !(py->dirs[py->n_dirs] = strdup(dir)))
		return -ENOMEM;
	py->n_dirs++;
	return 0;
}

static const char *str(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* Fills out from the probe's JSON; -EPROTO when it is not an answer to our question. */
/* The probe's compiled prelude (hex) as the bytes the setup message carries, decoded once per
 * interpreter here rather than in every template; text that is not even-length lowercase hex
 * leaves none (templates then compile the prelude themselves). */
static int unhex(const char *hex, struct sc_python *py)
{
	static const char digits[] = "0123456789abcdef";
	size_t n = strlen(hex);
	if (n == 0 || n % 2 || strspn(hex, digits) != n)
		return 0;
	uint8_t *bytes = malloc(n / 2);
	if (!bytes)
		return -ENOMEM;
	for (size_t i = 0; i < n / 2; i++)
		bytes[i] = (uint8_t)((strchr(digits, hex[2 * i]) - digits) << 4 |
				     (strchr(digits, hex[2 * i + 1]) - digits));
	py->prelude_code = bytes;
	py->prelude_len = n / 2;
	return 0;
}

static int parse(const char *text, struct sc_python_probe *out)
{
	json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
	json_t *v = json_object_get(o, "version"), *libs = json_object_get(o, "libs");
	int rc = 0;
	if (!json_is_object(o) || !str(o, "implementation") || !str(o, "executable") ||
	    json_array_size(v) != 3 || !json_is_integer(json_array_get(v, 0)) ||
	    !json_is_integer(json_array_get(v, 1)) || !json_is_integer(json_array_get(v, 2)) ||
	    (libs && !json_is_array(libs)))
		rc = -EPROTO;
	json_int_t ver[3] = {0};
	for (int i = 0; rc == 0 && i < 3; i++)
		if ((ver[i] = json_integer_value(json_array_get(v, i))) < 0 || ver[i] > 999)
			rc = -EPROTO;
	struct sc_python *py = &out->py;
	if (rc == 0) {
		py->major = (unsigned)ver[0], py->minor = (unsigned)ver[1];
		out->gil_disabled = json_is_true(json_object_get(o, "gil_disabled"));
		out->loader_env = !json_is_false(json_object_get(o, "loader_env"));
		out->implementation = strdup(str(o, "implementation"));
		py->executable = strdup(str(o, "executable"));
		if (asprintf(&py->version, "%u.%u.%u", py->major, py->minor, (unsigned)ver[2]) < 0)
			py->version = NULL;
		if (!out->implementation || !py->executable || !py->version)
			rc = -ENOMEM;
	}
	/* Without either (an interpreter that could not compile it), templates compile it. */
	const char *code = str(o, "prelude"), *sys_version = str(o, "sys_version");
	if (rc == 0 && code && sys_version && (rc = unhex(code, py)) == 0 && py->prelude_code) {
		py->sys_version = strdup(sys_version);
		py->prelude_hash = sc__prelude_hash(sc_prelude_py);
		if (!py->sys_version)
			rc = -ENOMEM;
	}
	static const char *const keys[] = {"stdlib", "platstdlib", "dynload"};
	for (size_t i = 0; rc == 0 && i < SC_ARRAY_LEN(keys); i++)
		rc = add_dir(py, str(o, keys[i]));
	for (size_t i = 0; rc == 0 && i < json_array_size(libs); i++)
		rc = add_dir(py, json_string_value(json_array_get(libs, i)));
	json_decref(o);
	if (rc < 0)
		clear_probe(out);
	return rc;
}

static int copy_probe(const struct sc_python_probe *src, struct sc_python_probe *dst)
{
	*dst = (struct sc_python_probe){.gil_disabled = src->gil_disabled};
	dst->py.major = src->py.major, dst->py.minor = src->py.minor;
	dst->implementation = strdup(src->implementation);
	dst->py.executable = strdup(src->py.executable);
	dst->py.version = strdup(src->py.version);
	dst->py.dirs = calloc(src->py.n_dirs + 1, sizeof(char *));
	dst->py.prelude_hash = src->py.prelude_hash;
	dst->py.probe_cache = src->py.probe_cache;
	bool ok = dst->implementation && dst->py.executable && dst->py.version && dst->py.dirs;
	if (ok && src->py.prelude_code) {
		dst->py.prelude_code = malloc(src->py.prelude_len);
		dst->py.sys_version = strdup(src->py.sys_version);
		ok = dst->py.prelude_code && dst->py.sys_version;
		if (ok)
			memcpy(dst->py.prelude_code, src->py.prelude_code, src->py.prelude_len);
		dst->py.prelude_len = ok ? src->py.prelude_len : 0;
	}
	for (size_t i = 0; ok && i < src->py.n_dirs; i++, dst->py.n_dirs++)
		ok = (dst->py.dirs[i] = strdup(src->py.dirs[i])) != NULL;
	if (!ok)
		clear_probe(dst);
	return ok ? 0 : -ENOMEM;
}

static struct answer *cached(const char *real, const struct stat *st)
{
	for (size_t i = 0; i < n_cache; i++)
		if (!strcmp(cache[i].path, real) && cache[i].dev == st->st_dev &&
		    cache[i].ino == st->st_ino && cache[i].mtime.tv_sec == st->st_mtim.tv_sec &&
		    cache[i].mtime.tv_nsec == st->st_mtim.tv_nsec)
			return &cache[i];
	return NULL;
}

static void remember(const char *real, const struct stat *st, const struct sc_python_probe *p)
{
	if (n_cache == CACHE_MAX)
		return;
	struct answer *a = &cache[n_cache];
	*a = (struct answer){.dev = st->st_dev, .ino = st->st_ino, .mtime = st->st_mtim};
	if (!(a->path = strdup(real)) || copy_probe(p, &a->probe) < 0) {
		free(a->path);
		return;
	}
	n_cache++;
}

/* Runs file, naming path (as the caller gave it) in errors; *answer is its stdout after the
 * first line (malloc'd). */
static int run_probe(const char *path, const char *file, struct talk *t, char **answer, char *why,
		     size_t why_len, struct snapcell_error *err)
{
	int rc = run(file, t, answer, why, why_len);
	if (rc == -ETIMEDOUT)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "python %s: no answer within %d s to snapcell's query (is it a "
			       "Python interpreter?)",
			       path, PROBE_TIMEOUT_MS / 1000);
	if (rc == -ENOEXEC || rc == -EACCES)
		return sc__err(err, SNAPCELL_E_INVAL, "python %s: not an executable program", path);
	if (rc == -E2BIG)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "python %s: not a CPython 3 interpreter (its answer to snapcell's "
			       "query passed %u KiB)",
			       path, ANSWER_MAX >> 10);
	if (rc < 0)
		return sc__err(err, rc, "python %s: running it", path);
	return 0;
}

/* The answer cached for the file real, parsed as a fresh one would be, when it is the
 * interpreter's own (its executable is real itself: never a shim's, see probe_cache.c). */
static bool from_cache(const char *real, const struct stat *st, struct sc_python_probe *out,
		       const char **state)
{
	char *answer = sc__probe_cache_load(real, st, sc__prelude_hash(PROBE), state);
	if (!answer)
		return false;
	int rc = parse(answer, out);
	free(answer);
	if (rc == 0 && strcmp(out->py.executable, real) == 0)
		return true;
	if (rc == 0)
		clear_probe(out);
	*state = "stale";
	return false;
}

/* Runs file (path as the caller named it, real after links) and parses its answer. The answer
 * is kept in the cache for the binary it is of (real itself, or the binary a launcher named)
 * when it depends on that binary alone: its executable is that binary and no LD_ variable
 * reached it (a launcher may set them; -I makes the interpreter ignore the rest). */
static int answer_of(const char *path, const char *file, const char *real, const struct stat *st,
		     struct sc_python_probe *out, const char **state, struct snapcell_error *err)
{
	char *answer = NULL, why[STDERR_KEEP];
	struct talk t = {.real = real, .out = out};
	int rc = run_probe(path, file, &t, &answer, why, sizeof(why), err);
	if (rc < 0 && t.hit)
		clear_probe(out);
	if (rc < 0)
		return rc;
	if (t.hit) {
		free(answer);
		*state = "launcher-used";
		return 0;
	}
	rc = parse(answer, out);
	if (rc == -E2BIG)
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "python %s: it loads from more than %d directories", path, DIRS_MAX);
	else if (rc == -ENOMEM)
		rc = sc__err(err, rc, "python %s", path);
	else if (rc < 0)
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "python %s: not a CPython 3 interpreter (it did not answer "
			     "snapcell's query%s%.120s)",
			     path, why[0] ? ": " : "", why);
	bool launched = t.named[0] && strcmp(t.named, real) != 0;
	const char *binary = launched ? t.named : real;
	*state = "launcher";
	if (rc == 0 && !out->loader_env && strcmp(out->py.executable, binary) == 0 &&
	    (!launched || S_ISREG(t.named_st.st_mode))) {
		sc__probe_cache_store(binary, launched ? &t.named_st : st, sc__prelude_hash(PROBE),
				      answer, state);
		if (launched && strcmp(*state, "stored") == 0)
			*state = "launcher-stored";
	}
	free(answer);
	return rc;
}

/* Asks the interpreter at path (absolute) under the cache's lock: the process's answers, then
 * the user's cache, then the interpreter itself. */
static int ask(const char *path, const char *real, const struct stat *st,
	       struct sc_python_probe *out, struct snapcell_error *err)
{
	struct answer *hit = cached(real, st);
	if (hit)
		return copy_probe(&hit->probe, out) < 0 ? sc__err(err, -ENOMEM, "python %s", path)
							: 0;
	const char *state = NULL;
	if (!from_cache(real, st, out, &state)) {
		int rc = answer_of(path, path, real, st, out, &state, err);
		if (rc < 0)
			return rc;
	}
	out->py.probe_cache = state;
	remember(real, st, out);
	return 0;
}

int sc__python_probe(const char *path, struct sc_python_probe *out, struct snapcell_error *err)
{
	*out = (struct sc_python_probe){0};
	struct stat st;
	char *real = realpath(path, NULL);
	if (!real || stat(real, &st) < 0) {
		int e = errno;
		free(real);
		return sc__err(err, SNAPCELL_E_INVAL, "python %s: %s", path, strerror(e));
	}
	int rc;
	if (S_ISDIR(st.st_mode))
		rc = sc__err(err, SNAPCELL_E_INVAL, "python %s: a directory, not an interpreter",
			     path);
	else if (!S_ISREG(st.st_mode) || access(real, X_OK) < 0)
		rc = sc__err(err, SNAPCELL_E_INVAL, "python %s: not an executable file", path);
	else {
		pthread_mutex_lock(&cache_lock);
		rc = ask(path, real, &st, out, err);
		pthread_mutex_unlock(&cache_lock);
	}
	free(real);
	return rc;
}

void sc__python_probe_clear(struct sc_python_probe *p)
{
	clear_probe(p);
}

void sc__python_clear(struct sc_python *py)
{
	if (!py)
		return;
	free(py->executable);
	free(py->chosen_by);
	free(py->version);
	for (size_t i = 0; i < py->n_dirs; i++)
		free(py->dirs[i]);
	free(py->dirs);
	free(py->prelude_code);
	free(py->sys_version);
	*py = (struct sc_python){0};
}
