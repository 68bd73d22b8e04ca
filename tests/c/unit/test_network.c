/* Network allow-list entries: the reference's host form, the entry parser (every accepted
 * form with its canonical text and port rule, every refusal with its reason, IDNA), the
 * stored list (replace, sorted, remove, copy, caps). Matching, headers and address rules are
 * in test_net_rules.c. */
#include "helpers.h"
#include "net/net.h"

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
	expect_norm("*.Example.org", "*.example.org");
	expect_norm("https://*.example.org:8443/v1", "*.example.org:8443");
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
	expect_refused("a.*.example.com", "character '*' is not allowed");
	expect_refused("*.*.example.com", "a wildcard is only a leading '*.'");
	expect_refused("*example.com", "a wildcard is only a leading '*.'");
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

/* target parses to canonical, with this kind, host, ports ("80,443") and path (or NULL). */
static void expect_entry(const char *target, const char *canonical, enum sc_net_kind kind,
			 const char *host, const char *ports, const char *path)
{
	struct sc_net_entry e;
	struct snapcell_error err = {0};
	int rc = sc__net_entry_parse(target, NULL, 0, &e, &err);
	cr_assert_eq(rc, 0, "parse '%s': %s", target, err.message);
	cr_expect_str_eq(e.target, canonical, "target of '%s'", target);
	cr_expect_eq(e.kind, kind, "kind of '%s'", target);
	cr_expect_str_eq(e.host, host, "host of '%s'", target);
	char buf[32] = "";
	for (size_t i = 0; i < e.n_ports; i++)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%u", i ? "," : "",
			 e.ports[i]);
	cr_expect_str_eq(buf, ports, "ports of '%s'", target);
	if (path)
		cr_expect(e.path && !strcmp(e.path, path), "path of '%s': %s", target,
			  e.path ? e.path : "NULL");
	else
		cr_expect_null(e.path, "path of '%s': %s", target, e.path);
	cr_expect(!e.methods && !e.headers && e.n_headers == 0);
	char norm[SC_NET_TARGET_MAX];
	cr_expect_eq(sc__net_target_normalize(target, norm, sizeof(norm), &err), 0);
	cr_expect_str_eq(norm, canonical);
	cr_expect_eq(sc__net_target_normalize(canonical, norm, sizeof(norm), &err), 0);
	cr_expect_str_eq(norm, canonical, "'%s' is its own normal form", canonical);
	sc__net_entry_clear(&e);
}

static void expect_entry_refused(const char *target, const char *why)
{
	struct sc_net_entry e;
	struct snapcell_error err = {0};
	cr_expect_eq(sc__net_entry_parse(target, NULL, 0, &e, &err), SNAPCELL_E_INVAL,
		     "'%s' accepted", target);
	cr_expect(strstr(err.message, why), "'%s': message '%s' lacks '%s'", target, err.message,
		  why);
}

Test(network, every_target_form_and_its_canonical_text)
{
	expect_entry("bing.com", "bing.com", SC_NET_NAME, "bing.com", "80,443", NULL);
	expect_entry("  API.Example.COM.  ", "api.example.com", SC_NET_NAME, "api.example.com",
		     "80,443", NULL);
	expect_entry("example.com:8443", "example.com:8443", SC_NET_NAME, "example.com", "8443",
		     NULL);
	expect_entry("example.com:08080", "example.com:8080", SC_NET_NAME, "example.com", "8080",
		     NULL);
	expect_entry("http://example.com", "example.com:80", SC_NET_NAME, "example.com", "80",
		     NULL);
	expect_entry("HTTPS://example.com/", "example.com:443", SC_NET_NAME, "example.com", "443",
		     NULL);
	expect_entry("https://example.com:8443", "example.com:8443", SC_NET_NAME, "example.com",
		     "8443", NULL);
	expect_entry("https://api.example.com/v1", "https://api.example.com/v1", SC_NET_NAME,
		     "api.example.com", "443", "/v1");
	expect_entry("https://api.example.com:443/v1/", "https://api.example.com/v1/", SC_NET_NAME,
		     "api.example.com", "443", "/v1/");
	expect_entry("http://api.example.com:8080/v1", "http://api.example.com:8080/v1",
		     SC_NET_NAME, "api.example.com", "8080", "/v1");
	expect_entry("http://api.example.com/a/b:c@d/%2a", "http://api.example.com/a/b:c@d/%2A",
		     SC_NET_NAME, "api.example.com", "80", "/a/b:c@d/%2A");
	expect_entry("api.example.com/v1", "api.example.com/v1", SC_NET_NAME, "api.example.com",
		     "80,443", "/v1");
	expect_entry("api.example.com:9000/v1", "api.example.com:9000/v1", SC_NET_NAME,
		     "api.example.com", "9000", "/v1");
	expect_entry("*.Example.com", "*.example.com", SC_NET_WILDCARD, "example.com", "80,443",
		     NULL);
	expect_entry("*.example.com:8443", "*.example.com:8443", SC_NET_WILDCARD, "example.com",
		     "8443", NULL);
	expect_entry("https://*.example.com/v1", "https://*.example.com/v1", SC_NET_WILDCARD,
		     "example.com", "443", "/v1");
	expect_entry("127.0.0.1:8080", "127.0.0.1:8080", SC_NET_IPV4, "127.0.0.1", "8080", NULL);
	expect_entry("93.184.216.34", "93.184.216.34", SC_NET_IPV4, "93.184.216.34", "80,443",
		     NULL);
	expect_entry("http://10.0.0.1/x", "http://10.0.0.1/x", SC_NET_IPV4, "10.0.0.1", "80", "/x");
	expect_entry("[::1]:8080", "[::1]:8080", SC_NET_IPV6, "::1", "8080", NULL);
	expect_entry("[2001:DB8:0:0:0:0:0:1]", "[2001:db8::1]", SC_NET_IPV6, "2001:db8::1",
		     "80,443", NULL);
	expect_entry("[::ffff:127.0.0.1]", "[::ffff:127.0.0.1]", SC_NET_IPV6, "::ffff:127.0.0.1",
		     "80,443", NULL);
	expect_entry("https://[2001:db8::1]:8443/v1", "https://[2001:db8::1]:8443/v1", SC_NET_IPV6,
		     "2001:db8::1", "8443", "/v1");
	expect_entry("my_host-1.internal", "my_host-1.internal", SC_NET_NAME, "my_host-1.internal",
		     "80,443", NULL);
}

Test(network, addresses_are_parsed_into_bytes)
{
	struct sc_net_entry e;
	cr_assert_eq(sc__net_entry_parse("203.0.113.5", NULL, 0, &e, NULL), 0);
	cr_expect_eq(memcmp(e.addr, "\xcb\x00\x71\x05", 4), 0);
	sc__net_entry_clear(&e);
	cr_assert_eq(sc__net_entry_parse("[::ffff:1.2.3.4]", NULL, 0, &e, NULL), 0);
	cr_expect_eq(memcmp(e.addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff\x01\x02\x03\x04", 16), 0);
	sc__net_entry_clear(&e);
}

Test(network, international_names_become_a_labels)
{
	expect_entry("b\xc3\xbc"
		     "cher.de",
		     "xn--bcher-kva.de", SC_NET_NAME, "xn--bcher-kva.de", "80,443", NULL);
	expect_entry("B\xc3\x9c"
		     "CHER.DE",
		     "xn--bcher-kva.de", SC_NET_NAME, "xn--bcher-kva.de", "80,443", NULL);
	expect_entry("https://\xe4\xbe\x8b\xe3\x81\x88.jp/v1", "https://xn--r8jz45g.jp/v1",
		     SC_NET_NAME, "xn--r8jz45g.jp", "443", "/v1");
	expect_entry("*.b\xc3\xbc"
		     "cher.de",
		     "*.xn--bcher-kva.de", SC_NET_WILDCARD, "xn--bcher-kva.de", "80,443", NULL);
	/* the ideographic full stop is a dot to IDNA, as to browsers */
	expect_entry("example\xe3\x80\x82"
		     "com",
		     "example.com", SC_NET_NAME, "example.com", "80,443", NULL);
	expect_entry("xn--bcher-kva.de", "xn--bcher-kva.de", SC_NET_NAME, "xn--bcher-kva.de",
		     "80,443", NULL);
	/* a fullwidth solidus maps to '/': still not a host character */
	expect_entry_refused("ex\xef\xbc\x8f"
			     "ample.com",
			     "not allowed in a host");
	expect_entry_refused("\xff\xfe.com", "not an international domain name");
	expect_entry_refused("https://example.com/\xc3\xbc", "percent-encode");
}

Test(network, ambiguous_targets_are_refused_with_a_reason)
{
	expect_entry_refused("", "empty target");
	expect_entry_refused("allowed@evil", "user@host");
	expect_entry_refused("https://user:pw@example.com/", "user@host");
	expect_entry_refused("evil#@allowed", "fragment");
	expect_entry_refused("evil\\@allowed", "backslash");
	expect_entry_refused("https://example.com\\x", "backslash");
	expect_entry_refused("example.com?q=1", "query");
	expect_entry_refused("%65xample.com", "character '%'");
	expect_entry_refused("exa mple.com", "whitespace");
	expect_entry_refused("example.com\x01", "control byte 0x01");
	expect_entry_refused("ftp://example.com",
			     "scheme 'ftp' is not supported (http:// or https://");
	expect_entry_refused("git+ssh://example.com", "scheme 'git+ssh'");
	expect_entry_refused("https://", "no host");
	expect_entry_refused("https:///v1", "no host");
	expect_entry_refused("example.com:0", "bad port");
	expect_entry_refused("example.com:65536", "bad port");
	expect_entry_refused("example.com:", "bad port");
	expect_entry_refused("example.com:443x", "bad port");
	expect_entry_refused("::1", "brackets");
	expect_entry_refused("[::1", "unclosed");
	expect_entry_refused("[::1]x", "after ']'");
	expect_entry_refused("[example.com]", "bad IPv6");
	expect_entry_refused("[1.2.3.4]", "bad IPv6");
	expect_entry_refused("[fe80::1%eth0]", "zone");
	expect_entry_refused("a..b", "empty label");
	expect_entry_refused(".", "empty label");
	expect_entry_refused("*", "wildcard");
	expect_entry_refused("*.com", "at least two labels");
	expect_entry_refused("*example.com", "wildcard is '*.'");
	expect_entry_refused("a.*.example.com", "wildcard is '*.'");
	expect_entry_refused("*.*.example.com", "wildcard is '*.'");
	expect_entry_refused("*.127.0.0.1", "last label is a number");
	char label[80];
	memset(label, 'a', 64);
	strcpy(label + 64, ".com");
	expect_entry_refused(label, "label");
}

Test(network, ipv4_addresses_must_be_dotted_quads)
{
	expect_entry_refused("127.1", "dotted quad (127.0.0.1)");
	expect_entry_refused("0x7f000001", "dotted quad (127.0.0.1)");
	expect_entry_refused("2130706433", "dotted quad (127.0.0.1)");
	expect_entry_refused("017700000001", "dotted quad (127.0.0.1)");
	expect_entry_refused("0177.0.0.1", "dotted quad (127.0.0.1)");
	expect_entry_refused("127.000.000.001", "dotted quad (127.0.0.1)");
	expect_entry_refused("http://0x7f.1:8080/x", "dotted quad (127.0.0.1)");
	expect_entry_refused("1.2.3.256", "last label is a number");
	expect_entry_refused("1.2.3.4.5", "last label is a number");
	expect_entry_refused("example.123", "last label is a number");
	expect_entry_refused("example.0x1f", "last label is a number");
}

Test(network, path_rules_are_strict)
{
	expect_entry_refused("https://x.example/a%2fb", "percent-encodes '/'");
	expect_entry_refused("https://x.example/a%2Fb", "percent-encodes '/'");
	expect_entry_refused("https://x.example/%2e%2e/a", "percent-encodes");
	expect_entry_refused("https://x.example/a%5cb", "percent-encodes");
	expect_entry_refused("https://x.example/a%00", "percent-encodes");
	expect_entry_refused("https://x.example/a%252f", "percent-encodes");
	expect_entry_refused("https://x.example/%7euser", "needs no encoding");
	expect_entry_refused("https://x.example/%41", "needs no encoding");
	expect_entry_refused("https://x.example/a%2", "two hex digits");
	expect_entry_refused("https://x.example/a%zz", "two hex digits");
	expect_entry_refused("https://x.example/a/../b", "'..' segment");
	expect_entry_refused("https://x.example/a/./b", "'..' segment");
	expect_entry_refused("https://x.example/a/..", "'..' segment");
	expect_entry_refused("https://x.example/a/..;x/b", "'..' segment");
	expect_entry_refused("https://x.example/a;b", "';'");
	expect_entry_refused("https://x.example/a%3bb", "';'");
	expect_entry_refused("https://x.example/a%C0%AE", "not UTF-8");
	expect_entry_refused("https://x.example/a%EF%BC%8F", "folds to");
	expect_entry_refused("https://x.example//a", "empty path segment");
	expect_entry_refused("https://x.example/a//b", "empty path segment");
	expect_entry_refused("https://x.example/a b", "whitespace");
	expect_entry_refused("https://x.example/a\"b", "character '\"'");
	expect_entry_refused("https://x.example/a<b", "character '<'");
	char *big = malloc(1100);
	strcpy(big, "https://x.example/");
	memset(big + 18, 'a', 1050);
	big[1068] = 0;
	expect_entry_refused(big, "path longer than 1024");
	free(big);
}

Test(network, methods_go_with_any_form)
{
	const char *m[] = {"get", "Post", "GET"};
	struct sc_net_entry e;
	struct snapcell_error err = {0};
	cr_assert_eq(sc__net_entry_parse("https://api.example.com/v1", m, 3, &e, &err), 0, "%s",
		     err.message);
	cr_expect_eq(e.n_methods, 2);
	cr_expect_str_eq(e.methods[0], "GET");
	cr_expect_str_eq(e.methods[1], "POST");
	cr_expect(sc__net_entry_http(&e));
	sc__net_entry_clear(&e);
	cr_assert_eq(sc__net_entry_parse("example.com", NULL, 0, &e, &err), 0);
	cr_expect(!sc__net_entry_http(&e));
	sc__net_entry_clear(&e);
}

Test(network, info_lists_path_and_headers)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_allow(cfg, "https://API.example.com/v1", NULL, 0, &err), 0);
	cr_assert_eq(snapcell_config_allow(cfg, "example.org", NULL, 0, &err), 0);
	cr_assert_eq(snapcell_config_allow_header(cfg, "https://api.example.com:443/v1", "X-Key",
						  "k", &err),
		     0, "%s", err.message);
	struct snapcell_allowed_info info;
	cr_assert_eq(snapcell_config_allowed_info(cfg, 1, &info, &err), 0);
	cr_expect_str_eq(info.target, "https://api.example.com/v1");
	cr_expect_str_eq(info.path, "/v1");
	cr_expect_eq(info.n_headers, 1);
	const char *name = NULL;
	cr_expect_eq(snapcell_config_allowed_header_name(cfg, 1, 0, &name, &err), 0);
	cr_expect_str_eq(name, "X-Key");
	cr_expect_eq(snapcell_config_allowed_header_name(cfg, 1, 1, &name, &err), SNAPCELL_E_INVAL);
	cr_expect_eq(snapcell_config_allowed_header_name(cfg, 2, 0, &name, &err), SNAPCELL_E_INVAL);
	cr_assert_eq(snapcell_config_allowed_info(cfg, 0, &info, &err), 0);
	cr_expect_null(info.path);
	cr_expect_eq(info.n_headers, 0);
	cr_expect_eq(info.reserved[0], 0);
	cr_expect_eq(info.reserved[1], 0);
	cr_expect_eq(sizeof(struct snapcell_allowed_info), 3 * sizeof(void *) + 4 * 8,
		     "the struct keeps its size");
	/* the same target replaces, headers included */
	cr_assert_eq(snapcell_config_allow(cfg, "https://api.example.com/v1", NULL, 0, &err), 0);
	cr_assert_eq(snapcell_config_allowed_info(cfg, 1, &info, &err), 0);
	cr_expect_eq(info.n_headers, 0);
	cr_expect_eq(snapcell_config_remove_allowed(cfg, "HTTPS://api.example.com/v1", &err), 0);
	cr_expect_eq(snapcell_config_allowed_count(cfg), 1);
	snapcell_config_free(cfg);
}

static void put_entry(struct sc_net_list *l, const char *target, int want)
{
	struct sc_net_entry e;
	struct snapcell_error err = {0};
	cr_assert_eq(sc__net_entry_parse(target, NULL, 0, &e, &err), 0, "%s", err.message);
	cr_expect_eq(sc__net_list_put(l, &e, &err), want, "put %s: %s", target, err.message);
	if (want)
		cr_expect(strstr(err.message, "distinct ports"), "%s", err.message);
}

Test(network, ports_are_listed_and_capped)
{
	struct sc_net_list l = {0};
	put_entry(&l, "a.example:8080", 0);
	put_entry(&l, "b.example", 0);
	put_entry(&l, "https://c.example/v1", 0);
	put_entry(&l, "d.example:22", 0);
	uint16_t ports[SC_NET_MAX_PORTS];
	cr_expect_eq(sc__net_list_ports(&l, ports), 4);
	cr_expect(ports[0] == 22 && ports[1] == 80 && ports[2] == 443 && ports[3] == 8080);
	char t[64];
	for (int p = 1; p <= 28; p++) {
		snprintf(t, sizeof(t), "p.example:%d", 9000 + p);
		put_entry(&l, t, 0);
	}
	cr_expect_eq(sc__net_list_ports(&l, ports), 32);
	put_entry(&l, "q.example:7000", SNAPCELL_E_TOO_BIG);
	put_entry(&l, "r.example:9001", 0); /* a port already counted */
	put_entry(&l, "d.example:22", 0);   /* the same target replaces */
	put_entry(&l, "p.example:9001", 0);
	cr_expect_eq(l.n, 33);
	struct sc_net_list copy = {0};
	cr_expect_eq(sc__net_list_copy(&l, &copy), 0);
	cr_expect_eq(copy.n, l.n);
	sc__net_list_free(&copy);
	sc__net_list_free(&l);
}
