/* What the front ends say about the interpreter a config runs: the file, why it was chosen,
 * its version and what cells see of it, for `run --help`, errors, `doctor` and `mcp`. The
 * choice itself is the library's (snapcell_config_python_info); SNAPCELL_PYTHON is read here as a
 * default the options and config keys replace. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

int fe_python_check(const struct snapcell_config *cfg, const char *who)
{
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	if (snapcell_config_python_info(cfg, &info, &err) == 0)
		return 0;
	fprintf(stderr, "%s: %s\n", who, err.message);
	return -1;
}

void fe_python_print(FILE *f, const struct snapcell_config *cfg, const char *prefix)
{
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	if (snapcell_config_python_info(cfg, &info, &err) < 0) {
		fprintf(f, "%spython:    none usable: %s\n", prefix, err.message);
		return;
	}
	fprintf(f, "%spython:    %s, CPython %s (%s)\n", prefix, info.executable, info.version,
		info.chosen_by);
	fprintf(f, "%scells see: sys.executable %s, Python %s\n", prefix, info.executable,
		info.version);
	if (info.warning[0])
		fprintf(f, "%swarning:   %s\n", prefix, info.warning);
}

json_t *fe_python_json(const struct snapcell_config *cfg)
{
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	if (snapcell_config_python_info(cfg, &info, &err) < 0)
		return json_pack("{s:s}", "error", err.message);
	json_t *j = json_pack("{s:s, s:s, s:s, s:{s:s, s:s}}", "executable", info.executable,
			      "chosen_by", info.chosen_by, "version", info.version, "cells",
			      "sys_executable", info.executable, "version", info.version);
	if (j && info.warning[0])
		json_object_set_new(j, "warning", json_string(info.warning));
	if (j && info.probe_cache[0])
		json_object_set_new(j, "probe_cache", json_string(info.probe_cache));
	return j;
}

/* What snapcell_python_info's probe_cache says, as a sentence. */
static const char *cache_sentence(const char *state)
{
	static const struct {
		const char *state, *sentence;
	} sentences[] = {
		{"used", "answered from the per-user cache (the interpreter did not run)"},
		{"stored", "the interpreter ran; its answer is now in the per-user cache"},
		{"launcher", "a launcher or shim ran (its answer is never cached)"},
		{"launcher-used", "a launcher or shim ran to name its interpreter, whose answer "
				  "came from the per-user cache"},
		{"launcher-stored", "a launcher or shim named its interpreter, which ran; its "
				    "answer is now in the per-user cache"},
		{"off", "the interpreter ran (the cache is off: SNAPCELL_PROBE_CACHE=0)"},
		{"no-dir", "the interpreter ran (no cache: no usable HOME or XDG_CACHE_HOME)"},
		{"untrusted-dir", "the interpreter ran (no cache: its directory is not the "
				  "user's own with mode 0700)"},
		{"not-stored", "the interpreter ran (its answer could not be cached)"},
	};
	for (size_t i = 0; i < sizeof(sentences) / sizeof(sentences[0]); i++)
		if (strcmp(state, sentences[i].state) == 0)
			return sentences[i].sentence;
	return state;
}

void fe_python_print_probe(FILE *f, const struct snapcell_config *cfg, const char *prefix)
{
	struct snapcell_python_info info;
	if (snapcell_config_python_info(cfg, &info, NULL) == 0 && info.probe_cache[0])
		fprintf(f, "%sprobe:     %s\n", prefix, cache_sentence(info.probe_cache));
}

/* Whether the config's interpreter is still SNAPCELL_PYTHON's, a default that an explicit
 * --python or "python" replaces and a venv (which runs its own interpreter) sets aside. */
static bool python_from_env;

void fe_python_chosen(void)
{
	python_from_env = false;
}

void fe_python_venv(struct snapcell_config *cfg)
{
	if (python_from_env)
		snapcell_config_set_python(cfg, NULL, NULL);
	python_from_env = false;
}

int fe_python_env(struct snapcell_config *cfg)
{
	const char *python = getenv("SNAPCELL_PYTHON");
	struct snapcell_error err = {0};
	if (python && *python && snapcell_config_set_python(cfg, python, &err) < 0) {
		fprintf(stderr, "snapcell: SNAPCELL_PYTHON=%s: %s\n", python, err.message);
		return -1;
	}
	python_from_env = python && *python;
	return 0;
}
