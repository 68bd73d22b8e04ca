/* The integration binary's entry: every test here makes sandboxes, so on a host that cannot
 * make one at any level the whole binary skips with the reason (exit 77, which meson reports
 * as SKIP) instead of failing each test. SNAPCELL_REQUIRE_ALL=1 (CI) runs them anyway, so a
 * missing feature fails. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapcell.h"

/* Why no sandbox can be made here, or NULL; static storage. */
static const char *no_sandbox_reason(void)
{
	static char why[512];
	struct snapcell_probe probe;
	struct snapcell_error err = {0};
	if (snapcell_probe_host(&probe, &err) < 0) {
		snprintf(why, sizeof(why), "host probe failed: %s", err.message);
		return why;
	}
	if (probe.level >= SNAPCELL_ISOLATION_NAMESPACES)
		return NULL;
	for (int m = 0; m < SNAPCELL_MECH__COUNT; m++)
		if (probe.mech[m].used && !probe.mech[m].available) {
			snprintf(why, sizeof(why), "no sandbox at any level on this host: %s: %s",
				 probe.mech[m].name, probe.mech[m].detail);
			return why;
		}
	return "no sandbox at any level on this host";
}

int main(int argc, char *argv[])
{
	struct criterion_test_set *tests = criterion_initialize();
	int result = 0;
	if (criterion_handle_args(argc, argv, true)) {
		const char *why = no_sandbox_reason();
		const char *strict = getenv("SNAPCELL_REQUIRE_ALL");
		if (why && !(strict && !strcmp(strict, "1"))) {
			printf("SKIP: %s (set SNAPCELL_REQUIRE_ALL=1 to run and fail instead)\n",
			       why);
			criterion_finalize(tests);
			return 77;
		}
		if (why)
			fprintf(stderr, "required feature missing: %s\n", why);
		result = !criterion_run_all_tests(tests);
	}
	criterion_finalize(tests);
	return result;
}
