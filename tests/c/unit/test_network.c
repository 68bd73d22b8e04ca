/* Network allow-list entries: normalisation, refusals, the stored list (replace, sorted,
 * remove, copy). */
#include "helpers.h"

static void expect_norm(const char *in, const char *want)
{
	char out[SNAPCELL_TARGET_MAX];
	struct snapcell_error err = {0};
	int rc = snapcell_normalize_domain(in, out, sizeof(out), &err);
	cr_expect_eq(rc, 0, "normalize '%s': %s", in, err.message);
	if (rc == 0)
		cr_expect_str_eq(out, want, "normalize '%s'", in);
}

/* Refused with SNAPCELL_E_INVAL and a message containing why. */
static void expect_refused(const char *in, const char *why)
{
	char out[SNAPCELL_TARGET_MAX];
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_normalize_domain(in, out, sizeof(out), &err), SNAPCELL_E_INVAL,
		     "'%s' accepted", in);
	cr_expect(strstr(err.message, why), "'%s': message '%s' lacks '%s'", in, err.message, why);
}

Test(network, targets_normalise_as_the_reference_does)
{
	expect_norm("https://api.example.com/v1", "api.example.com");
	expect_norm("API.Example.com:8443/x", "api.example.com:8443");
	expect_norm("127.0.0.1:8080", "127.0.0.1:8080");
	expect_norm("  http://Example.COM/  ", "example.com");
	expect_norm("example.com/", "example.com");
	expect_norm("example.com?q=1#frag", "example.com");
	expect_norm("HTTPS://Example.com:443/a/b?c=d", "example.com:443");
	expect_norm("[::1]:8080", "[::1]:8080");
	expect_norm("[2001:DB8::1]", "[2001:db8::1]");
	expect_norm("example.com.", "example.com");
	expect_norm("example.com:08080", "example.com:8080");
	expect_norm("my_host-1.internal", "my_host-1.internal");
	expect_norm("git+ssh://Host.example", "host.example");
}

Test(network, unclear_targets_are_refused_with_a_reason)
{
	expect_refused("", "empty target");
	expect_refused(" \t\n", "empty target");
	expect_refused("user@example.com", "user@host");
	expect_refused("https://user:secret@example.com/", "user@host");
	expect_refused("exa mple.com", "whitespace");
	expect_refused("example.com\x01", "control byte 0x01");
	expect_refused("example.com\x7f", "control byte 0x7f");
	expect_refused("b\xc3\xbc"
		       "cher.de",
		       "xn--");
	expect_refused("example.com:0", "bad port");
	expect_refused("example.com:65536", "bad port");
	expect_refused("example.com:", "bad port");
	expect_refused("example.com:80a", "bad port");
	expect_refused("example.com:123456", "bad port");
	expect_refused("::1", "brackets");
	expect_refused("[::1", "unclosed");
	expect_refused("[::1]x", "after ']'");
	expect_refused("[example.com]", "IPv6");
	expect_refused("*.example.com", "wildcards");
	expect_refused("a..b", "empty label");
	expect_refused(".", "empty label");
	expect_refused("exa%2ample.com", "character '%'");
	expect_refused("1http://example.com", "scheme");
	expect_refused("://example.com", "scheme");
	expect_refused("https:///path", "no host");
	char label[80];
	memset(label, 'a', 64);
	strcpy(label + 64, ".com");
	expect_refused(label, "label");
}

Test(network, lengths_and_buffers_are_capped)
{
	char *big = malloc(5000);
	memset(big, 'a', 4999);
	big[4999] = 0;
	expect_refused(big, "longer than 4096");
	/* a 260-byte host made of 63-byte labels */
	for (int i = 0; i < 260; i++)
		big[i] = i % 64 == 63 ? '.' : 'a';
	big[260] = 0;
	expect_refused(big, "longer than 253");
	free(big);
	char small[8];
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_normalize_domain("example.com", small, sizeof(small), &err),
		     SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "too small"), "%s", err.message);
	cr_expect_eq(snapcell_normalize_domain(NULL, small, sizeof(small), NULL), SNAPCELL_E_INVAL);
}

static void expect_methods(struct snapcell_config *cfg, size_t index, const char *target,
			   const char *joined)
{
	struct snapcell_allowed_info info;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_allowed_info(cfg, index, &info, &err), 0, "%s", err.message);
	cr_expect_str_eq(info.target, target);
	char buf[256] = "";
	if (!info.methods)
		snprintf(buf, sizeof(buf), "*");
	for (size_t i = 0; i < info.n_methods; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s", i ? "," : "",
			 info.methods[i]);
	cr_expect_str_eq(buf, joined, "methods of %s", target);
}

Test(network, methods_are_stripped_upper_cased_unique_and_sorted)
{
	struct snapcell_config *cfg = test_config_new();
	const char *get[] = {"get"};
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_allow(cfg, "127.0.0.1:8080", get, 1, &err), 0, "%s",
		     err.message);
	expect_methods(cfg, 0, "127.0.0.1:8080", "GET");
	const char *many[] = {" post ", "GET", "get", "Patch", "m-search", "PATCH"};
	cr_assert_eq(snapcell_config_allow(cfg, "https://api.example.com/v1", many, 6, &err), 0);
	expect_methods(cfg, 1, "https://api.example.com/v1", "GET,M-SEARCH,PATCH,POST");
	cr_assert_eq(snapcell_config_allow(cfg, "any.example.com", NULL, 0, &err), 0);
	expect_methods(cfg, 1, "any.example.com", "*");
	snapcell_config_free(cfg);
}

static void expect_allow_refused(const char *const *methods, size_t n, const char *why)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_allow(cfg, "example.com", methods, n, &err), SNAPCELL_E_INVAL,
		     "methods accepted (%s)", why);
	cr_expect(strstr(err.message, why), "message '%s' lacks '%s'", err.message, why);
	cr_expect_eq(snapcell_config_allowed_count(cfg), 0);
	snapcell_config_free(cfg);
}

Test(network, bad_methods_are_refused_with_a_reason)
{
	const char *empty[] = {"GET", "  "}, *space[] = {"GE T"}, *slash[] = {"GET/1"};
	const char *ctl[] = {"G\x01T"}, *colon[] = {"GET:"}, *null_method[] = {"GET", NULL};
	const char *some[] = {"GET"};
	const char *lots[33];
	for (size_t i = 0; i < 33; i++)
		lots[i] = "GET";
	expect_allow_refused(empty, 2, "empty method");
	expect_allow_refused(space, 1, "whitespace");
	expect_allow_refused(slash, 1, "not an HTTP token");
	expect_allow_refused(colon, 1, "not an HTTP token");
	expect_allow_refused(ctl, 1, "control byte 0x01");
	expect_allow_refused(null_method, 2, "method 1 is NULL");
	expect_allow_refused(some, 0, "pass NULL for any method");
	expect_allow_refused(NULL, 2, "n_methods 2");
	expect_allow_refused(lots, 33, "more than 32");
	const char *longm[] = {"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG"};
	expect_allow_refused(longm, 1, "longer than 32");
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_allow(NULL, "example.com", NULL, 0, &err), SNAPCELL_E_INVAL);
}

Test(network, the_same_target_replaces_and_the_list_stays_sorted)
{
	struct snapcell_config *cfg = test_config_new();
	const char *get[] = {"GET"}, *post[] = {"POST"};
	cr_assert_eq(snapcell_config_allow(cfg, "zeta.example", NULL, 0, NULL), 0);
	cr_assert_eq(snapcell_config_allow(cfg, " Alpha.Example. ", get, 1, NULL), 0);
	cr_assert_eq(snapcell_config_allow(cfg, "mid.example:81", NULL, 0, NULL), 0);
	cr_assert_eq(snapcell_config_allow(cfg, "ALPHA.example", post, 1, NULL), 0);
	cr_assert_eq(snapcell_config_allowed_count(cfg), 3);
	expect_methods(cfg, 0, "alpha.example", "POST");
	expect_methods(cfg, 1, "mid.example:81", "*");
	expect_methods(cfg, 2, "zeta.example", "*");
	struct snapcell_allowed_info info;
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_allowed_info(cfg, 3, &info, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "index 3 of 3"), "%s", err.message);
	snapcell_config_free(cfg);
}

Test(network, remove_normalises_first_and_reports_a_missing_target)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_allow(cfg, "api.example.com", NULL, 0, NULL), 0);
	cr_assert_eq(snapcell_config_allow(cfg, "b.example", NULL, 0, NULL), 0);
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_remove_allowed(cfg, "API.Example.com.", &err), 0, "%s",
		     err.message);
	cr_expect_eq(snapcell_config_remove_allowed(cfg, "api.example.com", &err), -ENOENT);
	cr_expect(strstr(err.message, "api.example.com"), "%s", err.message);
	cr_expect_eq(snapcell_config_remove_allowed(cfg, "user@x", &err), SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_allowed_count(cfg), 1);
	expect_methods(cfg, 0, "b.example", "*");
	snapcell_config_free(cfg);
}

Test(network, the_list_is_capped)
{
	struct snapcell_config *cfg = test_config_new();
	char host[32];
	for (int i = 0; i < 256; i++) {
		snprintf(host, sizeof(host), "h%03d.example", i);
		cr_assert_eq(snapcell_config_allow(cfg, host, NULL, 0, NULL), 0);
	}
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_allow(cfg, "one-more.example", NULL, 0, &err),
		     SNAPCELL_E_TOO_BIG);
	cr_expect(strstr(err.message, "more than 256"), "%s", err.message);
	cr_expect_eq(snapcell_config_allow(cfg, "h000.example", NULL, 0, &err), 0,
		     "replacing stays possible at the cap");
	cr_expect_eq(snapcell_config_allowed_count(cfg), 256);
	snapcell_config_free(cfg);
}
