/* The name rule of a run's own files (sc__run_file_name_check), without a sandbox: what a
 * name under /input may be, and the reason each refused one gets. */
#include "helpers.h"

#include "core/core.h"

Test(run_file_names, plain_relative_utf8_paths_pass)
{
	const char *good[] = {
		"a",	"report.csv", "data/2024.json", "d\xc3\xa9j\xc3\xa0/vu.txt", ".hidden",
		"a..b", "...",	      "x/y/z/w"};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		cr_expect_eq(sc__run_file_name_check(good[i], NULL), 0, "%s", good[i]);
	char deep[200] = "";
	for (int i = 0; i < 31; i++)
		strcat(deep, "d/");
	strcat(deep, "f");
	cr_expect_eq(sc__run_file_name_check(deep, NULL), 0, "32 parts");
}

Test(run_file_names, escapes_and_odd_bytes_are_refused_with_the_reason)
{
	struct {
		const char *name, *said;
	} bad[] = {
		{"", "an empty name"},
		{"/etc/passwd", "an absolute name"},
		{"..", "'..' part"},
		{"../x", "'..' part"},
		{"a/../../x", "'..' part"},
		{"a/.", "'..' part"},
		{"a//b", "'..' part"},
		{"a/", "'..' part"},
		{"tab\there", "a control byte (0x09)"},
		{"del\x7f", "a control byte (0x7f)"},
		{"\xc0\xaf", "not UTF-8"},	   /* an overlong '/' */
		{"\xed\xa0\x80", "not UTF-8"},	   /* a surrogate */
		{"\xf4\x90\x80\x80", "not UTF-8"}, /* past U+10FFFF */
		{"\xe2\x82", "not UTF-8"},	   /* cut short */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct snapcell_error err = {0};
		cr_expect_eq(sc__run_file_name_check(bad[i].name, &err), SNAPCELL_E_INVAL, "%zu",
			     i);
		cr_expect(strstr(err.message, bad[i].said), "%zu: %s", i, err.message);
	}
	char deep[200] = "";
	for (int i = 0; i < 32; i++)
		strcat(deep, "d/");
	strcat(deep, "f");
	struct snapcell_error err = {0};
	cr_expect_eq(sc__run_file_name_check(deep, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "33 parts; at most 32"), "%s", err.message);
	char long_part[300];
	memset(long_part, 'x', 256);
	long_part[256] = 0;
	cr_expect_eq(sc__run_file_name_check(long_part, &err), SNAPCELL_E_INVAL);
	char too_long[1100];
	memset(too_long, 'y', 1025);
	too_long[1025] = 0;
	cr_expect_eq(sc__run_file_name_check(too_long, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "1025 bytes; at most 1024"), "%s", err.message);
}
