/* `snapcell doctor`: what isolation this host offers, and proof that a sandbox starts. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static int try_sandbox(void)
{
	struct snapcell_config *cfg = snapcell_config_new();
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	int rc = snapcell_sandbox_new(cfg, &sb, &err);
	if (rc == 0)
		rc = snapcell_sandbox_run(sb, "print(6 * 7)", (size_t)-1, &res, &err);
	if (rc < 0)
		printf("sandbox:   FAILED: %s\n", err.message);
	else if (res->status != SNAPCELL_STATUS_OK || strcmp(res->stdout_buf, "42\n"))
		printf("sandbox:   FAILED: test run ended '%s': %s\n",
		       snapcell_status_name(res->status), res->stderr_buf),
			rc = -1;
	else
		printf("sandbox:   works at level '%s' (test run %.2f ms)\n",
		       snapcell_isolation_name(snapcell_sandbox_isolation(sb)),
		       (double)res->wall_us / 1000.0);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	snapcell_config_free(cfg);
	return rc;
}

int cli_doctor(int argc, char **argv)
{
	(void)argv;
	if (argc > 1) {
		fputs("usage: snapcell doctor\n", stderr);
		return 2;
	}
	struct snapcell_probe p;
	int rc = snapcell_probe_host(&p);
	if (rc < 0) {
		fprintf(stderr, "snapcell: probe failed: %s\n", snapcell_strerror(rc));
		return 3;
	}
	for (int m = 0; m < SNAPCELL_MECH__COUNT; m++)
		printf("%-18s %-3s %-7s %s\n", p.mech[m].name, p.mech[m].available ? "yes" : "no",
		       p.mech[m].used ? "used" : "-", p.mech[m].detail);
	printf("level:     %s\n", snapcell_isolation_name(p.level));
	return try_sandbox() < 0 || p.level == SNAPCELL_ISOLATION_NONE ? 1 : 0;
}
