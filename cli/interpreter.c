/* What the front ends say about the interpreter a config runs: the file, why it was chosen,
 * its version and what cells see of it, for `run --help`, errors, `doctor` and `mcp`. The
 * choice itself is the library's (snapcell_config_python_info). */
#include <stdio.h>

#include "cli.h"

int cli_python_check(const struct snapcell_config *cfg, const char *who)
{
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	if (snapcell_config_python_info(cfg, &info, &err) == 0)
		return 0;
	fprintf(stderr, "%s: %s\n", who, err.message);
	return -1;
}

void cli_python_print(FILE *f, const struct snapcell_config *cfg, const char *prefix)
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

json_t *cli_python_json(const struct snapcell_config *cfg)
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
	return j;
}
