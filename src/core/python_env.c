/* Python environments and preloaded modules on the config: finding a venv's site-packages and
 * checking it was made for the embedded interpreter, the list of modules the template
 * imports, and the warm-up code it runs after them. The guest processes .pth files, does the
 * imports and runs the warm-up (guest/python.c). */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "util/util.h"

#define PYVENV_CFG_MAX (64u << 10)
#define MAX_PRELOADS   64
#define MODULE_MAX     255
#define WARMUP_MAX     SNAPCELL_WARMUP_MAX
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

/* Whether version ("3.11.2", "3.11.2.final.0") is the embedded X.Y. */
static bool same_minor(const char *version)
{
	size_t n = strlen(SC_PY_VERSION);
	return strncmp(version, SC_PY_VERSION, n) == 0 && !isdigit((unsigned char)version[n]);
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

int snapcell_config_set_venv(struct snapcell_config *cfg, const char *dir,
			     struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "set_venv: NULL config");
	if (!dir) {
		free(cfg->venv);
		cfg->venv = NULL;
		return 0;
	}
	char *real = realpath(dir, NULL), *text = NULL, *site = NULL;
	if (!real)
		return sc__err(err, -errno, "venv %s", dir);
	int rc = read_pyvenv_cfg(real, &text, err);
	char version[64], system[16];
	if (rc == 0) {
		cfg_value(text, "version", version, sizeof(version));
		if (!version[0]) /* uv and virtualenv write version_info */
			cfg_value(text, "version_info", version, sizeof(version));
		cfg_value(text, "include-system-site-packages", system, sizeof(system));
	}
	struct stat st;
	if (rc == 0 && !version[0])
		rc = sc__err(err, SNAPCELL_E_INVAL, "venv %s: pyvenv.cfg names no version", dir);
	else if (rc == 0 && !same_minor(version))
		rc = sc__err(err, SNAPCELL_E_INVAL,
			     "venv %s was made for Python %s, but snapcell embeds Python %s "
			     "(Debian's): make it with /usr/bin/python3 -m venv",
			     dir, version, SC_PY_VERSION);
	else if (rc == 0 && asprintf(&site, "%s/" SC_VENV_SITE, real) < 0)
		rc = sc__err(err, -ENOMEM, "venv %s", dir), site = NULL;
	else if (rc == 0 && (stat(site, &st) < 0 || !S_ISDIR(st.st_mode)))
		rc = sc__err(err, -ENOENT, "venv %s: no lib/python%s/site-packages", dir,
			     SC_PY_VERSION);
	free(text);
	free(site);
	if (rc < 0) {
		free(real);
		return rc;
	}
	free(cfg->venv);
	cfg->venv = real;
	cfg->venv_system = strcasecmp(system, "true") == 0;
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
	char **grown = realloc(cfg->preloads, (cfg->n_preloads + 1) * sizeof(*grown));
	if (!grown)
		return sc__err(err, -ENOMEM, "add_preload %s", module);
	cfg->preloads = grown;
	if (!(grown[cfg->n_preloads] = strdup(module)))
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
		dirs[k] = cfg->venv, site[k++] = SC_VENV_SITE;
	if (cfg->venv && cfg->venv_system)
		dirs[k] = SYSTEM_SITE, site[k++] = "";
	*n = k;
	return 0;
}
