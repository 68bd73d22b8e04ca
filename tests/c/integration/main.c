/* The integration binary's entry: every test here makes sandboxes, so on a host that cannot
 * make one at level namespaces the whole binary skips with the reason (exit 77, which meson
 * reports as SKIP) instead of failing each test; at level rlimits SNAPCELL_TEST_LEVEL=rlimits
 * runs it (for the rlimits suite). SNAPCELL_REQUIRE_ALL=1 (CI) runs them anyway, so a
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
	/* The suites assume namespaces (a root of the cell's own, a pid namespace per cell);
	 * the rlimits suite is what runs at that level (tests/scripts/no-userns-test.sh). */
	const char *level = getenv("SNAPCELL_TEST_LEVEL");
	if (probe.level == SNAPCELL_ISOLATION_RLIMITS && level && !strcmp(level, "rlimits"))
		return NULL;
	if (probe.level == SNAPCELL_ISOLATION_RLIMITS)
		return "this host gives level rlimits, which only the rlimits suite tests (run it "
		       "with SNAPCELL_TEST_LEVEL=rlimits --filter 'rlimits/*')";
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
