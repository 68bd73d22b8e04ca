/* The setup message's codec (rpc/setup.h) on its own: what the host encodes decodes to the same
 * values, and a message with a key missing, unknown, duplicated or of the wrong type, or a
 * compiled prelude of another length than it announces, is refused naming the key. No sandbox
 * is started. */
#define _GNU_SOURCE
#include "helpers.h"
#include "rpc/setup.h"

/* Marshal-like bytes, NULs and high bytes included: they travel raw after the JSON. */
static const uint8_t prelude[] = {0xe3, 0, 0, 0, 0xff, '"', 0x0a};

/* The message (JSON, a NUL and the prelude's bytes), its length in *len. */
static char *sample_of(size_t *len)
{
	static char *env_names[] = {"A", "B"}, *env_values[] = {"1", "two"};
	static char *preloads[] = {"json"}, *addrs[] = {"10.0.0.1"};
	static int ports[] = {443};
	static struct sc_setup_path paths[] = {{4, NULL, NULL}, {5, "lib/site-packages", NULL}};
	static struct sc_setup_path dirs[] = {{6, NULL, "/usr/lib/python3.11"}};
	static struct sc_setup_tool tools[] = {{"add", "add", "adds"}};
	static struct sc_setup_net net = {ports, 1, true, addrs, 1, "10.0.0.1 x.test\n", "PEM"};
	struct sc_setup s = {.root = "/w/root",
			     .out = "/w/out",
			     .input = "/w/input",
			     .python_paths = paths,
			     .n_python_paths = 2,
			     .spares = 2,
			     .tmp_bytes = 1 << 20,
			     .frame_cap = 4096,
			     .output_bytes = 3,
			     .memory_bytes = 1ull << 33,
			     .cpu_ms = 5,
			     .processes = 6,
			     .file_bytes = 7,
			     .open_files = 8,
			     .env_names = env_names,
			     .env_values = env_values,
			     .n_env = 2,
			     .level = SNAPCELL_ISOLATION_NAMESPACES,
			     .cgroup = NULL,
			     .tools = tools,
			     .n_tools = 1,
			     .preloads = preloads,
			     .n_preloads = 1,
			     .warmup = "import json",
			     .net = &net,
			     .network_notice = "no network",
			     .python = {"/usr/bin/python3.11", "3.11.2", 7, dirs, 1,
					(uint8_t *)prelude, sizeof(prelude), "3.11.2 (main)",
					(1ull << 62) + 5},
			     .guest = {8, "_snapcell_guest.abi3.so"}};
	char *text = sc__setup_encode(&s, len);
	cr_assert(text);
	return text;
}

/* The message's JSON text alone (what the edits below change). */
static char *sample(void)
{
	size_t len;
	return sample_of(&len);
}

Test(setup, round_trip_keeps_every_value)
{
	size_t len;
	char *text = sample_of(&len);
	cr_assert_eq(len, strlen(text) + 1 + sizeof(prelude));
	struct sc_setup s;
	struct snapcell_error err = {0};
	cr_assert_eq(sc__setup_decode(text, len, &s, &err), 0, "%s", err.message);
	cr_expect_str_eq(s.root, "/w/root");
	cr_expect_eq(s.n_python_paths, 2);
	cr_expect_null(s.python_paths[0].site);
	cr_expect_str_eq(s.python_paths[1].site, "lib/site-packages");
	cr_expect_eq(s.python_paths[1].fd, 5);
	cr_expect_eq(s.memory_bytes, 1ull << 33);
	cr_expect_eq(s.n_env, 2);
	cr_expect_str_eq(s.env_names[1], "B");
	cr_expect_str_eq(s.env_values[1], "two");
	cr_expect_null(s.cgroup);
	cr_expect_null(s.tmp);
	cr_expect_str_eq(s.tools[0].description, "adds");
	cr_expect_str_eq(s.preloads[0], "json");
	cr_assert_not_null(s.net);
	cr_expect_eq(s.net->ports[0], 443);
	cr_expect(s.net->v6);
	cr_expect_str_eq(s.net->addrs[0], "10.0.0.1");
	cr_expect_str_eq(s.python.executable, "/usr/bin/python3.11");
	cr_expect_str_eq(s.python.dirs[0].host, "/usr/lib/python3.11");
	cr_expect_eq(s.python.exe_dir_fd, 7);
	cr_expect_eq(s.python.prelude_bytes, sizeof(prelude));
	cr_expect_arr_eq(s.python.prelude, prelude, sizeof(prelude));
	cr_expect_str_eq(s.python.sys_version, "3.11.2 (main)");
	cr_expect_eq(s.python.prelude_hash, (1ull << 62) + 5);
	cr_expect_str_eq(s.guest.file, "_snapcell_guest.abi3.so");
	sc__setup_clear(&s);
	free(text);
}

/* text with the first occurrence of from replaced by to. */
static char *edited(const char *text, const char *from, const char *to)
{
	const char *at = strstr(text, from);
	cr_assert_not_null(at, "%s not in %s", from, text);
	char *out = NULL;
	cr_assert_geq(asprintf(&out, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from)), 0);
	return out;
}

static void expect_refused(const char *from, const char *to, const char *message)
{
	char *text = sample(), *bad = edited(text, from, to);
	struct sc_setup s;
	struct snapcell_error err = {0};
	cr_expect_eq(sc__setup_decode(bad, strlen(bad), &s, &err), SNAPCELL_E_PROTOCOL, "%s", bad);
	cr_expect(strstr(err.message, message), "%s: %s", bad, err.message);
	sc__setup_clear(&s);
	free(bad);
	free(text);
}

Test(setup, a_missing_key_is_an_error_not_a_zero)
{
	expect_refused("\"cpu_ms\":5,", "", "missing key cpu_ms");
	expect_refused("\"cgroup\":null,", "", "missing key cgroup");
	expect_refused("\"exe_dir_fd\":7,", "", "python: missing key exe_dir_fd");
}

Test(setup, an_unknown_or_duplicate_key_is_an_error)
{
	expect_refused("\"cpu_ms\":5,", "\"cpu_ms\":5,\"cpu_seconds\":5,",
		       "unknown key cpu_seconds");
	expect_refused("\"fd\":4,", "\"fd\":4,\"bind\":1,", "python_paths: unknown key bind");
	expect_refused("\"cpu_ms\":5,", "\"cpu_ms\":5,\"cpu_ms\":6,", "duplicate");
}

static void expect_tail_refused(const char *msg, size_t len, const char *message)
{
	struct sc_setup s;
	struct snapcell_error err = {0};
	cr_expect_eq(sc__setup_decode(msg, len, &s, &err), SNAPCELL_E_PROTOCOL, "%zu bytes", len);
	cr_expect(strstr(err.message, message), "%zu bytes: %s", len, err.message);
	cr_expect_null(s.python.prelude);
	sc__setup_clear(&s);
}

Test(setup, a_prelude_of_another_length_than_announced_is_an_error)
{
	size_t len;
	char *text = sample_of(&len), *json = strdup(text);
	expect_tail_refused(text, strlen(text), "prelude_bytes 7, 0 bytes follow");
	expect_tail_refused(text, len - 1, "prelude_bytes 7, 6 bytes follow");
	char *longer = malloc(len + 1);
	memcpy(longer, text, len);
	longer[len] = 'x';
	expect_tail_refused(longer, len + 1, "prelude_bytes 7, 8 bytes follow");
	/* None announced: nothing may follow, not even the NUL. */
	char *none = edited(json, "\"prelude_bytes\":7", "\"prelude_bytes\":0");
	size_t n = strlen(none);
	char *with_tail = malloc(n + 2);
	memcpy(with_tail, none, n + 1);
	with_tail[n + 1] = 'x';
	expect_tail_refused(with_tail, n + 2, "prelude_bytes 0, 1 bytes follow");
	expect_tail_refused(with_tail, n + 1, "prelude_bytes 0, 0 bytes follow");
	struct sc_setup s;
	struct snapcell_error err = {0};
	cr_expect_eq(sc__setup_decode(none, n, &s, &err), 0, "%s", err.message);
	cr_expect_null(s.python.prelude);
	sc__setup_clear(&s);
	free(with_tail), free(none), free(longer), free(json), free(text);
}

Test(setup, a_value_of_the_wrong_type_is_an_error)
{
	expect_refused("\"cpu_ms\":5", "\"cpu_ms\":-5", "cpu_ms: not an integer in range");
	expect_refused("\"root\":\"/w/root\"", "\"root\":null", "root: not a string");
	expect_refused("\"v6\":true", "\"v6\":1", "v6: not a boolean");
	expect_refused("\"preloads\":[\"json\"]", "\"preloads\":[1]", "preloads: not a string");
	expect_refused("\"B\":\"two\"", "\"B\":2", "env: not a string");
}
