/* The sandbox configuration: limits with defaults, environment, Python paths, the helper's
 * path, required isolation, mounts, the outside uid range. Validation happens in the setters,
 * so a config that exists is a valid one. Tools are in tools.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "rpc/frame.h"
#include "util/buf.h"
#include "util/util.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)

static const struct {
	const char *name; /* the public name (snapcell_limit_name) */
	uint64_t def, min, max;
} limit_table[SNAPCELL_LIMIT__COUNT] = {
	[SNAPCELL_LIMIT_WALL_MS] = {"wall_ms", 30000, 1, 24ull * 3600 * 1000},
	[SNAPCELL_LIMIT_CPU_MS] = {"cpu_ms", 60000, 1, 24ull * 3600 * 1000},
	/* The forked interpreter already maps ~40 MiB of address space. */
	[SNAPCELL_LIMIT_MEMORY_BYTES] = {"memory_bytes", 512 * MIB, 96 * MIB, 1024 * GIB},
	[SNAPCELL_LIMIT_PROCESSES] = {"processes", 64, 1, 65536},
	[SNAPCELL_LIMIT_FILE_BYTES] = {"file_bytes", 64 * MIB, 1, 1024 * GIB},
	[SNAPCELL_LIMIT_TMP_BYTES] = {"tmp_bytes", 64 * MIB, 64 * KIB, 64 * GIB},
	[SNAPCELL_LIMIT_STDOUT_BYTES] = {"stdout_bytes", 1 * MIB, 1, 1 * GIB},
	[SNAPCELL_LIMIT_STDERR_BYTES] = {"stderr_bytes", 1 * MIB, 1, 1 * GIB},
	[SNAPCELL_LIMIT_OPEN_FILES] = {"open_files", 256, 16, 65536},
	[SNAPCELL_LIMIT_OUTPUT_FILES] = {"output_files", 1000, 1, 1000000},
	[SNAPCELL_LIMIT_OUTPUT_FILE_BYTES] = {"output_file_bytes", 64 * MIB, 1, 16 * GIB},
	[SNAPCELL_LIMIT_OUTPUT_TOTAL_BYTES] = {"output_total_bytes", 256 * MIB, 1, 64 * GIB},
	[SNAPCELL_LIMIT_OUTPUT_DEPTH] = {"output_depth", 32, 1, 256},
	[SNAPCELL_LIMIT_OUTPUT_PATH_BYTES] = {"output_path_bytes", 1024, 16, 4096},
	[SNAPCELL_LIMIT_NET_CONNECTIONS] = {"net_connections", 32, 1, 1024},
	[SNAPCELL_LIMIT_NET_BYTES] = {"net_bytes", 1 * GIB, 1, 1024 * GIB},
	[SNAPCELL_LIMIT_NET_CONNECT_MS] = {"net_connect_ms", 10000, 1, 600000},
	[SNAPCELL_LIMIT_NET_IDLE_MS] = {"net_idle_ms", 30000, 1, 24ull * 3600 * 1000},
	[SNAPCELL_LIMIT_PAUSED_RUNS] = {"paused_runs", 16, 1, 4096},
	[SNAPCELL_LIMIT_PAUSE_MS] = {"pause_ms", 600000, 1, 7ull * 24 * 3600 * 1000},
	[SNAPCELL_LIMIT_TOOL_CALLS] = {"tool_calls", 16, 1, SC_CALLS_IN_FLIGHT_MAX},
};

struct snapcell_config *snapcell_config_new(void)
{
	struct snapcell_config *cfg = calloc(1, sizeof(*cfg));
	if (!cfg)
		return NULL;
	for (int i = 0; i < SNAPCELL_LIMIT__COUNT; i++)
		cfg->limits[i] = limit_table[i].def;
	cfg->required = SNAPCELL_ISOLATION_NONE;
	cfg->uid_first = SNAPCELL_UID_RANGE_FIRST;
	cfg->uid_count = SNAPCELL_UID_RANGE_COUNT;
	cfg->reuse = true; /* where the kernel gives what it needs: sc__sandbox_reuse */
	return cfg;
}

void snapcell_config_free(struct snapcell_config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->n_env; i++) {
		free(cfg->env[i].name);
		free(cfg->env[i].value);
	}
	free(cfg->env);
	for (size_t i = 0; i < cfg->n_python_paths; i++)
		free(cfg->python_paths[i]);
	free(cfg->python_paths);
	free(cfg->python);
	free(cfg->venv);
	free(cfg->venv_site);
	free(cfg->venv_base);
	for (size_t i = 0; i < cfg->n_preloads; i++)
		free(cfg->preloads[i]);
	free(cfg->preloads);
	free(cfg->warmup);
	free(cfg->workspace);
	free(cfg->helper);
	for (size_t i = 0; i < cfg->n_mounts; i++) {
		free(cfg->mounts[i].host_path);
		free(cfg->mounts[i].mount_path);
	}
	free(cfg->mounts);
	sc__tools_free(cfg);
	sc__net_list_free(&cfg->allowed);
	for (size_t i = 0; i < cfg->n_maps; i++) {
		free(cfg->map_names[i]);
		free(cfg->map_addresses[i]);
	}
	free(cfg->map_names);
	free(cfg->map_addresses);
	free(cfg->upstream_ca);
	free(cfg);
}

int snapcell_config_set_limit(struct snapcell_config *cfg, enum snapcell_limit limit,
			      uint64_t value, struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "set_limit: NULL config");
	if ((unsigned)limit >= SNAPCELL_LIMIT__COUNT)
		return sc__err(err, SNAPCELL_E_INVAL, "set_limit: unknown limit %d", (int)limit);
	if (value < limit_table[limit].min || value > limit_table[limit].max)
		return sc__err(err, SNAPCELL_E_INVAL, "set_limit %s: %llu is outside [%llu, %llu]",
			       limit_table[limit].name, (unsigned long long)value,
			       (unsigned long long)limit_table[limit].min,
			       (unsigned long long)limit_table[limit].max);
	cfg->limits[limit] = value;
	return 0;
}

uint64_t snapcell_config_get_limit(const struct snapcell_config *cfg, enum snapcell_limit limit)
{
	return cfg && (unsigned)limit < SNAPCELL_LIMIT__COUNT ? cfg->limits[limit] : 0;
}

const char *snapcell_limit_name(enum snapcell_limit limit)
{
	return (unsigned)limit < SNAPCELL_LIMIT__COUNT ? limit_table[limit].name : NULL;
}

int snapcell_limit_from_name(const char *name, enum snapcell_limit *out, struct snapcell_error *err)
{
	if (!name || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "limit name: NULL argument");
	for (int i = 0; i < SNAPCELL_LIMIT__COUNT; i++)
		if (!strcmp(name, limit_table[i].name)) {
			*out = (enum snapcell_limit)i;
			return 0;
		}
	return sc__err(err, SNAPCELL_E_INVAL, "unknown limit '%.64s'", name);
}

/* The environment travels to the sandbox as JSON, which carries only UTF-8. */
static bool valid_utf8(const char *s)
{
	json_t *j = json_string(s);
	json_decref(j);
	return j != NULL;
}

int snapcell_config_set_env(struct snapcell_config *cfg, const char *name, const char *value,
			    struct snapcell_error *err)
{
	if (!cfg || !name || !value)
		return sc__err(err, SNAPCELL_E_INVAL, "set_env: NULL argument");
	if (!*name || strchr(name, '=') || !valid_utf8(name))
		return sc__err(err, SNAPCELL_E_INVAL,
			       "set_env: a name must be non-empty UTF-8 without '='");
	if (!valid_utf8(value))
		return sc__err(err, SNAPCELL_E_INVAL, "set_env %s: the value is not UTF-8", name);
	char *v = strdup(value);
	if (!v)
		return sc__err(err, -ENOMEM, "set_env %s", name);
	for (size_t i = 0; i < cfg->n_env; i++) {
		if (strcmp(cfg->env[i].name, name) == 0) {
			free(cfg->env[i].value);
			cfg->env[i].value = v;
			return 0;
		}
	}
	char *n = strdup(name);
	if (!n || SC_ARRAY_ADD(cfg->env, cfg->n_env, SC_ARRAY_NO_CAP) < 0) {
		free(v);
		free(n);
		return sc__err(err, -ENOMEM, "set_env %s", name);
	}
	cfg->env[cfg->n_env++] = (struct sc_env_var){n, v};
	return 0;
}

int snapcell_config_add_python_path(struct snapcell_config *cfg, const char *dir,
				    struct snapcell_error *err)
{
	if (!cfg || !dir)
		return sc__err(err, SNAPCELL_E_INVAL, "add_python_path: NULL argument");
	if (dir[0] != '/' || strstr(dir, "/../") || strlen(dir) >= 4096)
		return sc__err(err, SNAPCELL_E_INVAL,
			       "add_python_path %s: must be an absolute path without '..'", dir);
	if (cfg->n_python_paths == SC_PASS_FD_MAX)
		return sc__err(err, SNAPCELL_E_INVAL, "add_python_path %s: more than %d paths", dir,
			       SC_PASS_FD_MAX);
	if (SC_ARRAY_ADD(cfg->python_paths, cfg->n_python_paths, SC_PASS_FD_MAX) < 0 ||
	    !(cfg->python_paths[cfg->n_python_paths] = strdup(dir)))
		return sc__err(err, -ENOMEM, "add_python_path %s", dir);
	cfg->n_python_paths++;
	return 0;
}

int snapcell_config_set_helper(struct snapcell_config *cfg, const char *path,
			       struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "set_helper: NULL config");
	char *real = NULL;
	if (path) {
		struct stat st;
		if (!(real = realpath(path, NULL)))
			return sc__err(err, -errno, "set_helper %s", path);
		int rc = stat(real, &st) < 0	  ? -errno
			 : !S_ISREG(st.st_mode)	  ? -EACCES
			 : access(real, X_OK) < 0 ? -errno
						  : 0;
		if (rc < 0) {
			free(real);
			return sc__err(err, rc, "set_helper %s: not an executable file", path);
		}
	}
	free(cfg->helper);
	cfg->helper = real;
	return 0;
}

int snapcell_config_require_isolation(struct snapcell_config *cfg, enum snapcell_isolation level,
				      struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "require_isolation: NULL config");
	if ((unsigned)level > SNAPCELL_ISOLATION_CGROUPS)
		return sc__err(err, SNAPCELL_E_INVAL, "require_isolation: unknown level %d",
			       (int)level);
	cfg->required = level;
	return 0;
}

/* 0 is root; 65535 and 4294967295 are (uid_t)-1 in 16 and 32 bits, which setresuid and chown
 * read as "leave unchanged". */
int snapcell_config_set_uid_range(struct snapcell_config *cfg, uint32_t first, uint32_t count,
				  struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "set_uid_range: NULL config");
	uint64_t last = (uint64_t)first + (count ? count - 1 : 0);
	if (first == 0 || last >= UINT32_MAX || (first <= 65535 && last >= 65535))
		return sc__err(err, SNAPCELL_E_INVAL,
			       "set_uid_range %u:%u: the range must leave out 0, 65535 and "
			       "4294967295",
			       (unsigned)first, (unsigned)count);
	cfg->uid_first = first;
	cfg->uid_count = count;
	cfg->uid_range_set = true;
	return 0;
}

static int add_mount(struct snapcell_config *cfg, const char *host, const char *mount)
{
	char *h = strdup(host), *m = strdup(mount);
	if (!h || !m) {
		free(h), free(m);
		return -ENOMEM;
	}
	for (size_t i = 0; i < cfg->n_mounts; i++) {
		if (!strcmp(cfg->mounts[i].mount_path, m)) {
			free(cfg->mounts[i].host_path);
			free(m);
			cfg->mounts[i].host_path = h;
			return 0;
		}
	}
	if (SC_ARRAY_ADD(cfg->mounts, cfg->n_mounts, SC_ARRAY_NO_CAP) < 0) {
		free(h), free(m);
		return -ENOMEM;
	}
	cfg->mounts[cfg->n_mounts++] = (struct sc_mount){h, m};
	return 0;
}

int snapcell_config_set_reject_links(struct snapcell_config *cfg, bool reject,
				     struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "set_reject_links: NULL config");
	cfg->reject_links = reject;
	return 0;
}

int snapcell_config_set_reuse(struct snapcell_config *cfg, bool on, struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "set_reuse: NULL config");
	cfg->reuse = on;
	return 0;
}

int snapcell_config_set_workspace(struct snapcell_config *cfg, const char *dir,
				  struct snapcell_error *err)
{
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "workspace: NULL config");
	char *real = NULL;
	if (dir) {
		struct stat st;
		if (!(real = realpath(dir, NULL)))
			return sc__err(err, -errno, "workspace %s", dir);
		if (stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
			free(real);
			return sc__err(err, -ENOTDIR, "workspace %s", dir);
		}
	}
	free(cfg->workspace);
	cfg->workspace = real;
	return 0;
}

const char *snapcell_config_workspace(const struct snapcell_config *cfg)
{
	return cfg ? cfg->workspace : NULL;
}

int snapcell_config_add_mount(struct snapcell_config *cfg, const char *host_path,
			      const char *mount_path, struct snapcell_error *err)
{
	char norm[PATH_MAX];
	if (!cfg || !host_path)
		return sc__err(err, SNAPCELL_E_INVAL, "mount: NULL argument");
	int rc = snapcell_normalize_mount_path(mount_path, norm, sizeof(norm), err);
	if (rc < 0)
		return sc__err_wrap(err, rc, "mount %s", host_path);
	char *real = realpath(host_path, NULL);
	if (!real)
		return sc__err(err, -errno, "mount %s", host_path);
	rc = add_mount(cfg, real, norm);
	free(real);
	return rc < 0 ? sc__err(err, rc, "mount %s", host_path) : 0;
}

int snapcell_config_remove_mount(struct snapcell_config *cfg, const char *mount_path,
				 struct snapcell_error *err)
{
	char norm[PATH_MAX];
	if (!cfg)
		return sc__err(err, SNAPCELL_E_INVAL, "remove_mount: NULL config");
	int rc = snapcell_normalize_mount_path(mount_path, norm, sizeof(norm), err);
	if (rc < 0)
		return sc__err_wrap(err, rc, "remove_mount");
	for (size_t i = 0; i < cfg->n_mounts; i++) {
		if (!strcmp(cfg->mounts[i].mount_path, norm)) {
			free(cfg->mounts[i].host_path);
			free(cfg->mounts[i].mount_path);
			memmove(&cfg->mounts[i], &cfg->mounts[i + 1],
				(cfg->n_mounts - i - 1) * sizeof(*cfg->mounts));
			cfg->n_mounts--;
			return 0;
		}
	}
	return sc__err(err, -ENOENT, "remove_mount %s", norm);
}

size_t snapcell_config_mount_count(const struct snapcell_config *cfg)
{
	return cfg ? cfg->n_mounts : 0;
}

int snapcell_config_mount_info(const struct snapcell_config *cfg, size_t index,
			       const char **host_path, const char **mount_path,
			       struct snapcell_error *err)
{
	if (!cfg || index >= cfg->n_mounts)
		return sc__err(err, SNAPCELL_E_INVAL, "mount_info: no mount %zu (there are %zu)",
			       index, cfg ? cfg->n_mounts : 0);
	if (host_path)
		*host_path = cfg->mounts[index].host_path;
	if (mount_path)
		*mount_path = cfg->mounts[index].mount_path;
	return 0;
}

int sc__config_copy(const struct snapcell_config *src, struct snapcell_config **out)
{
	struct snapcell_config *c = snapcell_config_new();
	if (!c)
		return -ENOMEM;
	memcpy(c->limits, src->limits, sizeof(c->limits));
	c->required = src->required;
	c->reject_links = src->reject_links;
	c->reuse = src->reuse;
	c->uid_first = src->uid_first;
	c->uid_count = src->uid_count;
	c->uid_range_set = src->uid_range_set;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < src->n_env; i++)
		rc = snapcell_config_set_env(c, src->env[i].name, src->env[i].value, NULL);
	for (size_t i = 0; rc == 0 && i < src->n_python_paths; i++)
		rc = snapcell_config_add_python_path(c, src->python_paths[i], NULL);
	if (rc == 0 && src->python && !(c->python = strdup(src->python)))
		rc = -ENOMEM;
	if (rc == 0 && src->venv &&
	    (!(c->venv = strdup(src->venv)) || !(c->venv_site = strdup(src->venv_site)) ||
	     !(c->venv_base = strdup(src->venv_base))))
		rc = -ENOMEM;
	c->venv_minor = src->venv_minor;
	c->venv_system = src->venv_system;
	for (size_t i = 0; rc == 0 && i < src->n_preloads; i++)
		rc = snapcell_config_add_preload(c, src->preloads[i], NULL);
	if (rc == 0 && src->warmup && !(c->warmup = strdup(src->warmup)))
		rc = -ENOMEM;
	if (rc == 0)
		rc = sc__tools_copy(src, c);
	if (rc == 0 && src->workspace && !(c->workspace = strdup(src->workspace)))
		rc = -ENOMEM;
	if (rc == 0 && src->helper && !(c->helper = strdup(src->helper)))
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < src->n_mounts; i++)
		rc = add_mount(c, src->mounts[i].host_path, src->mounts[i].mount_path);
	if (rc == 0)
		rc = sc__net_list_copy(&src->allowed, &c->allowed);
	if (rc == 0 && src->n_maps &&
	    (!(c->map_names = calloc(src->n_maps, sizeof(char *))) ||
	     !(c->map_addresses = calloc(src->n_maps, sizeof(char *)))))
		rc = -ENOMEM;
	for (size_t i = 0; rc == 0 && i < src->n_maps; i++, c->n_maps++)
		if (!(c->map_names[i] = strdup(src->map_names[i])) ||
		    !(c->map_addresses[i] = strdup(src->map_addresses[i])))
			rc = -ENOMEM;
	if (rc == 0 && src->upstream_ca && !(c->upstream_ca = strdup(src->upstream_ca)))
		rc = -ENOMEM;
	if (rc < 0) {
		snapcell_config_free(c);
		return rc;
	}
	*out = c;
	return 0;
}
