/* The public contract where a sandbox fills it: the ABI room in library-filled structs, and
 * run options checked by size. */
#include "helpers.h"

static int no_tool(void *user, const char *args, char **result)
{
	*result = strdup("null");
	return 0;
}

Test(contract, library_filled_structs_have_their_reserved_words_zeroed)
{
	struct snapcell_config *cfg = snapcell_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "t", "d", NULL, SNAPCELL_APPROVAL_NEVER, no_tool,
					      NULL, NULL),
		     0);
	struct snapcell_tool_info info;
	memset(&info, 0xa5, sizeof(info));
	cr_assert_eq(snapcell_config_tool_info(cfg, 0, &info, NULL), 0);
	cr_expect_str_eq(info.name, "t");
	for (size_t i = 0; i < sizeof(info.reserved) / sizeof(info.reserved[0]); i++)
		cr_expect_eq(info.reserved[i], 0);
	snapcell_config_free(cfg);

	static struct snapcell_probe p;
	memset(&p, 0xa5, sizeof(p));
	cr_assert_eq(snapcell_probe_host(&p, NULL), 0);
	for (int m = 0; m < SNAPCELL_MECH_SLOTS; m++) {
		cr_expect_eq(p.mech[m].name == NULL, m >= SNAPCELL_MECH__COUNT, "slot %d", m);
		cr_expect_eq(p.mech[m].reserved[0] | p.mech[m].reserved[1], 0);
	}
	for (size_t i = 0; i < sizeof(p.reserved) / sizeof(p.reserved[0]); i++)
		cr_expect_eq(p.reserved[i], 0);
}

Test(contract, sandbox_stats_reserved_words_are_zeroed)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_sandbox_stats st;
	struct snapcell_error err = {0};
	memset(&st, 0xa5, sizeof(st));
	cr_assert_eq(snapcell_sandbox_stats(sb, &st, &err), 0, "%s", err.message);
	for (size_t i = 0; i < sizeof(st.reserved) / sizeof(st.reserved[0]); i++)
		cr_expect_eq(st.reserved[i], 0);
	cr_expect_eq(snapcell_sandbox_stats(sb, NULL, &err), SNAPCELL_E_INVAL);
	cr_expect_str_eq(err.message, "stats: NULL argument");
	snapcell_sandbox_free(sb);
}

/* Run options from a newer header: larger, with fields this library does not know. */
struct newer_run_options {
	struct snapcell_run_options v1;
	uint64_t future_field;
};

Test(contract, run_options_are_checked_by_size)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	struct snapcell_run_options unsized = {0};
	cr_expect_eq(snapcell_sandbox_run(sb, "print(1)", SIZE_MAX, &unsized, &res, &err),
		     SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "sizeof(struct snapcell_run_options)"), "%s", err.message);
	struct newer_run_options newer = {{.size = sizeof(newer)}, 7};
	cr_expect_eq(snapcell_sandbox_run(sb, "print(1)", SIZE_MAX, &newer.v1, &res, &err),
		     SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "does not know"), "%s", err.message);
	newer.future_field = 0; /* unset fields of a newer header are fine */
	cr_assert_eq(snapcell_sandbox_run(sb, "print(1)", SIZE_MAX, &newer.v1, &res, &err), 0, "%s",
		     err.message);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "1\n");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}
