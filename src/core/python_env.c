/* Python on the config: which interpreter runs the cells (chosen, resolved through
 * python_probe.c and judged here), a venv's site-packages and the interpreter it was made
 * from, the list of modules the template imports, and the warm-up code it runs after them.
 * The guest processes .pth files, does the imports and runs the warm-up (guest/python.c). */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "util/buf.h"
#include "util/util.h"

#define PYVENV_CFG_MAX (64u << 10)
/* Python 3.10 is the oldest the guest's Limited API calls exist in; 3.14 the newest tested. */
#define SC_PYTHON_MINOR_MIN 10
#define SC_PYTHON_MINOR_MAX 14
#define MAX_PRELOADS	    64
#define MODULE_MAX	    255
#define WARMUP_MAX	    SNAPCELL_WARMUP_MAX
/* Debian's system site directory, for a venv made with --system-site-packages. */
#define SYSTEM_SITE "/usr/lib/python3/dist-packages"

/* The value of `key = value` in pyvenv.cfg text (keys compared without case, as venv's own
 * reader does), copied into out; empty when absent. */
static void cfg_value(const char *text, const char *key, char *out, size_t out_len)
{
	size_t key_len = strlen(key);
	out[0] = 0;
	for (const char *line = text; line && *line; line = strchr(line, '\n'), line += !!line) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (strncasecmp(line, key, key_len) != 0)
			continue;
		const char *p = line + key_len;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != '=')
			continue;
		for (p++; *p == ' ' || *p == '\t'; p++)
			;
		size_t n = strcspn(p, "\r\n");
		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		snprintf(out, out_len, "%.*s", (int)n, p);
		return;
	}
}

static int read_pyvenv_cfg(const char *dir, char **text, struct snapcell_error *err)
{
	char path[4200];
	snprintf(path, sizeof(path), "%s/pyvenv.cfg", dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return sc__err(err, -errno, "venv %s: pyvenv.cfg (not a virtual environment?)",
			       dir);
	char *buf = malloc(PYVENV_CFG_MAX + 1);
	ssize_t n = buf ? read(fd, buf, PYVENV_CFG_MAX) : -1;
	int saved = errno;
	close(fd);
	if (n < 0) {
		free(buf);
		return sc__err(err, buf ? -saved : -ENOMEM, "venv %s: read pyvenv.cfg", dir);
	}
	buf[n] = 0;
	*text = buf;
	return 0;
}

/* The 3.Y of a pyvenv.cfg version ("3.12.1", "3.12.1.final.0"); 0 when it is not 3.x. */
static unsigned venv_minor(const char *version)
{
	char *end;
	if (strncmp(version, "3.", 2) != 0 || !isdigit((unsigned char)version[2]))
		return 0;
	unsigned long minor = strtoul(version + 2, &end, 10);
	return (*end == 0 || *end == '.') && minor < 1000 ? (unsigned)minor : 0;
}

static bool executable_file(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* The interpreter a venv was made from: pyvenv.cfg's executable (3.11 and newer write it),
 * else a python in its home, else the venv's own bin/python (its sys._base_executable is the
 * base). malloc'd, or NULL when none is there any more. */
static char *venv_base(const char *venv, const char *text, unsigned minor)
{
	char exe[PATH_MAX], home[PATH_MAX], path[PATH_MAX + 64];
	cfg_value(text, "executable", exe, sizeof(exe));
	if (exe[0] == '/' && executable_file(exe))
		return strdup(exe);
	cfg_value(text, "home", home, sizeof(home));
	/* python3.Y first: python3 in a home like /usr/bin may be another version. */
	for (int i = 0; home[0] == '/' && i < 3; i++) {
		if (i == 0)
			snprintf(path, sizeof(path), "%s/python3.%u", home, minor);
		else
			snprintf(path, sizeof(path), "%s/%s", home, i == 1 ? "python3" : "python");
		if (executable_file(path))
			return strdup(path);
	}
	snprintf(path, sizeof(path), "%s/bin/python", venv);
	return executable_file(path) ? strdup(path) : NULL;
}

static int check_pair(const char *python, const char *venv, const char *base, unsigned minor,
		      struct snapcell_error *err);

int snapcell_config_set_venv(struct snapcell_config *cfg, const char *dir,
			     struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "set_venv: NULL config");
	if (!dir) {
		free(cfg->venv), free(cfg->venv_site), free(cfg->venv_base);
		cfg->venv = cfg->venv_site = cfg->venv_base = NULL;
		return 0;
	}
	char *real = realpath(dir, NULL), *text = NULL, *site = NULL, *base = NULL;
	if (!real)
		return sc__err(err, -errno, "venv %s", dir);
	int rc = read_pyvenv_cfg(real, &text, err);
	char version[64], system[16];
	unsigned minor = 0;
	if (rc == 0) {
		cfg_value(text, "version", version, sizeof(version));
		if (!version[0]) /* uv and virtualenv write version_info */
			cfg_value(text, "version_info", version, sizeof(version));
		cfg_value(text, "include-system-site-packages", system, sizeof(system));
		minor = venv_minor(version);
	}
	if (rc == 0 && !version[0])
		rc = sc__err(err, SNAPCELL_E_INVAL, "venv %s: pyvenv.cfg names no version", dir);
	else if (rc == 0 && minor < SC_PYTHON_MINOR_MIN)
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "venv %s was made by Python %s: snapcell runs CPython 3.%d or newer",
			     dir, version, SC_PYTHON_MINOR_MIN);
	else if (rc == 0 && asprintf(&site, "lib/python3.%u/site-packages", minor) < 0)
		rc = sc__err(err, -ENOMEM, "venv %s", dir), site = NULL;
	char full[PATH_MAX + 64];
	struct stat st;
	if (rc == 0) {
		snprintf(full, sizeof(full), "%s/%s", real, site);
		if (stat(full, &st) < 0 || !S_ISDIR(st.st_mode))
			rc = sc__err(err, -ENOENT, "venv %s: no %s", dir, site);
	}
	if (rc == 0 && !(base = venv_base(real, text, minor)))
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "venv %s: the interpreter it was made from is gone (pyvenv.cfg's "
			     "home, and its bin/python)",
			     dir);
	if (rc == 0 && cfg->python)
		rc = check_pair(cfg->python, dir, base, minor, err);
	free(text);
	if (rc < 0) {
		free(real), free(site), free(base);
		return rc;
	}
	free(cfg->venv), free(cfg->venv_site), free(cfg->venv_base);
	cfg->venv = real;
	cfg->venv_site = site;
	cfg->venv_base = base;
	cfg->venv_minor = minor;
	/* Debian's dist-packages is the system site of Debian's own interpreter only. */
	char *base_real = realpath(base, NULL);
	cfg->venv_system = strcasecmp(system, "true") == 0 && base_real &&
			   strncmp(base_real, "/usr/bin/", 9) == 0;
	free(base_real);
	return 0;
}

/* A dotted name of Python identifiers (ASCII; a module with a non-ASCII name can still be
 * imported by the code itself). */
static bool valid_module(const char *name)
{
	size_t len = strlen(name);
	if (len == 0 || len > MODULE_MAX)
		return false;
	bool start = true;
	for (const char *p = name; *p; p++) {
		if (*p == '.') {
			if (start)
				return false;
			start = true;
			continue;
		}
		if (!(isalpha((unsigned char)*p) || *p == '_' ||
		      (!start && isdigit((unsigned char)*p))))
			return false;
		start = false;
	}
	return !start;
}

int snapcell_config_add_preload(struct snapcell_config *cfg, const char *module,
				struct snapcell_error *err)
{
	if (!cfg || !module)
		return sc__err(err, SNAPCELL_E_INVAL, "add_preload: NULL argument");
	if (!valid_module(module))
		return sc__err(
			err, SNAPCELL_E_INVAL,
			"add_preload '%.64s': not a dotted module name (like matplotlib.pyplot)",
			module);
	for (size_t i = 0; i < cfg->n_preloads; i++)
		if (!strcmp(cfg->preloads[i], module))
			return 0;
	if (cfg->n_preloads == MAX_PRELOADS)
		return sc__err(err, SNAPCELL_E_INVAL, "add_preload %s: more than %d modules",
			       module, MAX_PRELOADS);
	if (SC_ARRAY_ADD(cfg->preloads, cfg->n_preloads, MAX_PRELOADS) < 0 ||
	    !(cfg->preloads[cfg->n_preloads] = strdup(module)))
		return sc__err(err, -ENOMEM, "add_preload %s", module);
	cfg->n_preloads++;
	return 0;
}

int snapcell_config_set_warmup(struct snapcell_config *cfg, const char *code,
			       struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "set_warmup: NULL config");
	size_t len = code ? strlen(code) : 0;
	if (len > WARMUP_MAX)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "set_warmup: %zu bytes of code; the limit is %d", len, WARMUP_MAX);
	/* Checked here, where the caller can say which file it was, not as a decode error in
	 * the template; the code's syntax is Python's to judge (a SyntaxError fails creation). */
	if (code && !sc__utf8_valid(code, len))
		return sc__err(err, SNAPCELL_E_INVAL, "set_warmup: the code is not valid UTF-8");
	char *copy = NULL;
	if (len && !(copy = strdup(code)))
		return sc__err(err, -ENOMEM, "set_warmup");
	free(cfg->warmup);
	cfg->warmup = copy;
	return 0;
}

int sc__python_dirs(const struct snapcell_config *cfg, const char *dirs[SC_PASS_FD_MAX],
		    const char *site[SC_PASS_FD_MAX], size_t *n, struct snapcell_error *err)
{
	size_t total = cfg->n_python_paths + (cfg->venv ? 1 + cfg->venv_system : 0);
	if (total > SC_PASS_FD_MAX)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "%zu python paths and venv directories: at most %d", total,
			       SC_PASS_FD_MAX);
	size_t k = 0;
	for (size_t i = 0; i < cfg->n_python_paths; i++, k++)
		dirs[k] = cfg->python_paths[i], site[k] = NULL;
	if (cfg->venv)
		dirs[k] = cfg->venv, site[k++] = cfg->venv_site;
	if (cfg->venv && cfg->venv_system)
		dirs[k] = SYSTEM_SITE, site[k++] = "";
	*n = k;
	return 0;
}

/* Where the cell mounts its own file systems: an interpreter bound there would be hidden. */
static const char *const CELL_MOUNTS[] = {"/tmp", "/input", "/output",
					  "/dev", "/proc",  "/.snapcell"};

static const char *cell_mount_over(const char *path)
{
	for (size_t i = 0; i < SC_ARRAY_LEN(CELL_MOUNTS); i++) {
		size_t len = strlen(CELL_MOUNTS[i]);
		if (strncmp(path, CELL_MOUNTS[i], len) == 0 && (!path[len] || path[len] == '/'))
			return CELL_MOUNTS[i];
	}
	return NULL;
}

/* Whether snapcell can run what path answered: a CPython of 3.10 or newer with the GIL whose
 * files a cell can be given. */
static int judge(const char *path, const struct sc_python_probe *p, struct snapcell_error *err)
{
	const struct sc_python *py = &p->py;
	if (strcmp(p->implementation, "cpython") != 0)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "python %s is %.32s %s, not CPython: snapcell runs CPython 3.%d or "
			       "newer",
			       path, p->implementation, py->version, SC_PYTHON_MINOR_MIN);
	if (py->major != 3 || py->minor < SC_PYTHON_MINOR_MIN)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "python %s is Python %s: snapcell runs CPython 3.%d or newer", path,
			       py->version, SC_PYTHON_MINOR_MIN);
	if (p->gil_disabled)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "python %s is a free-threaded build of Python %s (Py_GIL_DISABLED): "
			       "snapcell's guest, an abi3 module, cannot load there; use a build "
			       "with the GIL",
			       path, py->version);
	if (py->executable[0] != '/' || !executable_file(py->executable))
		return sc__err(err, SNAPCELL_E_INVAL,
			       "python %s: the interpreter it runs (%s) is not an executable file",
			       path, py->executable);
	const char *over = cell_mount_over(py->executable);
	if (over)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "python %s: %s lies under %s, which cells mount over: install the "
			       "interpreter elsewhere",
			       path, py->executable, over);
	for (size_t i = 0; i < py->n_dirs; i++)
		if (strcmp(py->dirs[i], "/") == 0)
			return sc__err(err, SNAPCELL_E_INVAL,
				       "python %s: it names / as a directory it loads from: cells "
				       "would see the whole host file system",
				       path);
	for (size_t i = 0; i < py->n_dirs; i++)
		if ((over = cell_mount_over(py->dirs[i])))
			return sc__err(
				err, SNAPCELL_E_INVAL,
				"python %s: its directory %s lies under %s, which cells mount "
				"over: install the interpreter elsewhere",
				path, py->dirs[i], over);
	return 0;
}

/* Probes and judges the interpreter at path. */
static int probe_judged(const char *path, struct sc_python_probe *out, struct snapcell_error *err)
{
	int rc = sc__python_probe(path, out, err);
	if (rc == 0 && (rc = judge(path, out, err)) < 0)
		sc__python_probe_clear(out);
	return rc;
}

/* Given both, the venv must be python's: its X.Y, and made from the same interpreter file. */
static int check_pair(const char *python, const char *venv, const char *base, unsigned minor,
		      struct snapcell_error *err)
{
	struct sc_python_probe p, b = {0};
	int rc = probe_judged(python, &p, err);
	if (rc < 0)
		return rc;
	if (p.py.minor != minor)
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "venv %s was made by Python 3.%u, but python %s is %s", venv, minor,
			     python, p.py.version);
	else if ((rc = sc__python_probe(base, &b, NULL)) < 0 ||
		 strcmp(b.py.executable, p.py.executable) != 0)
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "venv %s was made from %s, not from python %s (%s): give the venv "
			     "alone, or a venv made with that python",
			     venv, rc < 0 ? base : b.py.executable, python, p.py.executable);
	sc__python_probe_clear(&b);
	sc__python_probe_clear(&p);
	return rc;
}

/* The first executable `name` in $PATH, malloc'd, or NULL. */
static char *on_path(const char *name)
{
	const char *path = getenv("PATH");
	for (const char *p = path; p && *p; p += *p == ':') {
		size_t len = strcspn(p, ":");
		char *file = NULL;
		if (len && p[0] == '/' && asprintf(&file, "%.*s/%s", (int)len, p, name) > 0 &&
		    executable_file(file))
			return file;
		free(file);
		p += len;
	}
	return NULL;
}

int snapcell_config_set_python(struct snapcell_config *cfg, const char *path,
			       struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "set_python: NULL config");
	if (!path) {
		free(cfg->python);
		cfg->python = NULL;
		return 0;
	}
	char *abs = NULL;
	if (!path[0])
		return sc__err(err, SNAPCELL_E_INVAL, "set_python: an empty path");
	if (!strchr(path, '/') && !(abs = on_path(path)))
		return sc__err(err, SNAPCELL_E_INVAL, "python %s: not found on PATH", path);
	if (strchr(path, '/') && path[0] != '/' && !(abs = realpath(path, NULL)))
		return sc__err(err, SNAPCELL_E_INVAL, "python %s: %s", path, strerror(errno));
	if (!abs && !(abs = strdup(path)))
		return sc__err(err, -ENOMEM, "set_python");
	struct sc_python_probe p;
	int rc = probe_judged(abs, &p, err);
	if (rc == 0) {
		sc__python_probe_clear(&p);
		if (cfg->venv)
			rc = check_pair(abs, cfg->venv, cfg->venv_base, cfg->venv_minor, err);
	}
	if (rc < 0) {
		free(abs);
		return rc;
	}
	free(cfg->python);
	cfg->python = abs;
	return 0;
}

/* The interpreter cfg chooses and why; *path is malloc'd. */
static int choose(const struct snapcell_config *cfg, char **path, const char **why)
{
	if (cfg->python)
		*path = strdup(cfg->python), *why = "snapcell_config_set_python";
	else if (cfg->venv)
		*path = strdup(cfg->venv_base), *why = "the venv's interpreter";
	else if ((*path = on_path("python3")))
		*why = "python3 on PATH";
	else
		*path = strdup("/usr/bin/python3"), *why = "/usr/bin/python3";
	return *path ? 0 : -ENOMEM;
}

int sc__python_resolve(const struct snapcell_config *cfg, struct sc_python *out,
		       struct snapcell_error *err)
{
	*out = (struct sc_python){0};
	char *path;
	const char *why;
	if (choose(cfg, &path, &why) < 0)
		return sc__err(err, -ENOMEM, "python");
	struct sc_python_probe p;
	int rc = probe_judged(path, &p, err);
	if (rc < 0 && !cfg->python && !cfg->venv && !strcmp(why, "/usr/bin/python3") &&
	    access(path, F_OK) < 0)
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "no python3 on PATH and no /usr/bin/python3: name the interpreter "
			     "(snapcell_config_set_python, --python)");
	else if (rc < 0)
		sc__err_wrap(err, rc, "the interpreter (%s)", why);
	if (rc == 0 && cfg->venv && p.py.minor != cfg->venv_minor)
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "venv %s was made by Python 3.%u, but its interpreter %s is now %s",
			     cfg->venv, cfg->venv_minor, path, p.py.version);
	if (rc == 0 && cfg->python && cfg->venv)
		rc = check_pair(cfg->python, cfg->venv, cfg->venv_base, cfg->venv_minor, err);
	if (rc == 0 && !(p.py.chosen_by = strdup(why)))
		rc = sc__err(err, -ENOMEM, "python");
	free(path);
	if (rc < 0) {
		if (p.implementation)
			sc__python_probe_clear(&p);
		return rc;
	}
	free(p.implementation);
	*out = p.py;
	return 0;
}

static void copy_field(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

int snapcell_config_python_info(const struct snapcell_config *cfg, struct snapcell_python_info *out,
				struct snapcell_error *err)
{
	if (!cfg || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "python_info: NULL argument");
	*out = (struct snapcell_python_info){0};
	struct sc_python py;
	int rc = sc__python_resolve(cfg, &py, err);
	if (rc < 0)
		return rc;
	if (strlen(py.executable) >= sizeof(out->executable))
		rc = sc__err(err, SNAPCELL_E_INVAL, "python %.64s...: path too long",
			     py.executable);
	copy_field(out->executable, sizeof(out->executable), py.executable);
	copy_field(out->chosen_by, sizeof(out->chosen_by), py.chosen_by);
	copy_field(out->version, sizeof(out->version), py.version);
	copy_field(out->probe_cache, sizeof(out->probe_cache), py.probe_cache);
	out->major = py.major;
	out->minor = py.minor;
	if (py.minor > SC_PYTHON_MINOR_MAX)
		snprintf(out->warning, sizeof(out->warning),
			 "Python %s is newer than 3.%d, the newest snapcell is tested with: it may "
			 "not work",
			 py.version, SC_PYTHON_MINOR_MAX);
	sc__python_clear(&py);
	return rc;
}
