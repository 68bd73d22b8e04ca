/* `snapcell doctor`: what isolation this host offers, and proof that a sandbox starts. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Host settings that narrow what a kernel bug reachable from a cell can do (security notes,
 * "host kernel settings"). Advice only: snapcell blocks these paths with seccomp anyway. */
static void print_hardening(void)
{
	static const struct {
		const char *sysctl;
		long want_min;
		const char *why;
	} checks[] = {
		{"kernel/unprivileged_bpf_disabled", 1, "unprivileged eBPF"},
		{"kernel/perf_event_paranoid", 2, "perf events"},
		{"kernel/io_uring_disabled", 2, "io_uring (>= 6.6)"},
		{"fs/protected_hardlinks", 1, "hard links to others' files"},
		{"fs/protected_symlinks", 1, "symlinks in sticky directories"},
	};
	puts("host hardening (advice; seccomp blocks these paths in cells either way):");
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		char path[96], buf[32] = "";
		snprintf(path, sizeof(path), "/proc/sys/%s", checks[i].sysctl);
		FILE *f = fopen(path, "re");
		bool have = f && fgets(buf, sizeof(buf), f);
		if (f)
			fclose(f);
		long v = have ? strtol(buf, NULL, 10) : -1;
		char name[96];
		snprintf(name, sizeof(name), "%s", checks[i].sysctl);
		for (char *c = name; *c; c++)
			*c = *c == '/' ? '.' : *c;
		printf("  %-34s %-8s %s\n", name,
		       have ? (v >= checks[i].want_min ? "ok" : "advise") : "absent",
		       have && v < checks[i].want_min ? checks[i].why : "");
	}
}

static int try_sandbox(void)
{
	struct snapcell_config *cfg = cli_config_new();
	struct snapcell_sandbox *sb = NULL;
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	if (!cfg)
		return -1;
	int rc = snapcell_sandbox_new(cfg, &sb, &err);
	if (rc == 0)
		rc = snapcell_sandbox_run(sb, "print(6 * 7)", (size_t)-1, NULL, &res, &err);
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
	struct snapcell_error err = {0};
	int rc = snapcell_probe_host(&p, &err);
	if (rc < 0) {
		fprintf(stderr, "snapcell: %s\n", err.message);
		return 3;
	}
	for (int m = 0; m < SNAPCELL_MECH__COUNT; m++)
		printf("%-18s %-3s %-7s %s\n", p.mech[m].name, p.mech[m].available ? "yes" : "no",
		       p.mech[m].used ? "used" : "-", p.mech[m].detail);
	printf("level:     %s\n", snapcell_isolation_name(p.level));
	print_hardening();
	return try_sandbox() < 0 || p.level == SNAPCELL_ISOLATION_NONE ? 1 : 0;
}
