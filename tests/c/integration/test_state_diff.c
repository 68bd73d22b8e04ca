/* The differential test of process state, for cells reset in place instead of forked anew:
 * tests/state/probe.py describes a cell's process from inside and, through the host tool
 * state_view, from the host's /proc; two fresh cells must be alike, a planted change of every
 * kind must show, and a cell after a run that changed everything must equal the reference.
 * Not a test of the reset itself: it is written so that the reset's switch is one line in
 * state_sandbox(). */
#define _GNU_SOURCE
#include "helpers.h"

#include <fcntl.h>
#include <jansson.h>
#include <spawn.h>
#include <sys/wait.h>

#include "state_change_py.h"
#include "state_probe_py.h"

extern char **environ;

/* What the host tool saw of the cell during the last probe. */
struct view {
	json_t *outside;
};

/* The outside view's answer is at most this long (it is about 100 KiB). */
#define OUTSIDE_MAX_BYTES (16u << 20)

/* Runs `python3 -c PROBE MODE ARG ARG` on the host (the probe's --outside and --self-test)
 * and parses its answer; a python3 that fails, answers garbage or too much is recorded as
 * {"failed": ...}, which the caller turns into a test failure. */
static json_t *host_probe(const char *mode, const char *arg1, const char *arg2)
{
	char *argv[] = {"python3",    "-c", (char *)sc_state_probe_py, (char *)mode, (char *)arg1,
			(char *)arg2, NULL};
	int out[2];
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	pid_t pid;
	int rc = posix_spawnp(&pid, "python3", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(out[1]);
	cr_assert_eq(rc, 0, "spawn python3 for the probe's %s: %s", mode, strerror(rc));
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	cr_assert_not_null(buf);
	ssize_t n;
	while ((n = read(out[0], buf + len, cap - len - 1)) > 0 || (n < 0 && errno == EINTR)) {
		len += n > 0 ? (size_t)n : 0;
		if (cap - len < 4096 && cap < OUTSIDE_MAX_BYTES) {
			buf = realloc(buf, cap *= 2);
			cr_assert_not_null(buf);
		} else if (cap - len < 2) {
			break; /* too long: cut, so it fails to parse */
		}
	}
	close(out[0]);
	buf[len] = 0;
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	json_error_t jerr;
	json_t *view = json_loads(buf, 0, &jerr);
	if (!view || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		json_decref(view);
		view = json_pack("{s:s,s:s,s:i}", "failed", buf, "error", view ? "" : jerr.text,
				 "status", status);
	}
	free(buf);
	return view;
}

static int state_view(void *user, const char *args, char **result)
{
	struct view *v = user;
	json_t *a = json_loads(args, 0, NULL);
	long ns_pid = (long)json_integer_value(json_object_get(a, "pid"));
	long pipe_inode = (long)json_integer_value(json_object_get(a, "pipe"));
	json_decref(a);
	char pid_arg[32], pipe_arg[32];
	snprintf(pid_arg, sizeof(pid_arg), "%ld", ns_pid);
	snprintf(pipe_arg, sizeof(pipe_arg), "%ld", pipe_inode);
	json_decref(v->outside);
	v->outside = host_probe("--outside", pid_arg, pipe_arg);
	*result = strdup("null");
	return 0;
}

/* The one place this test's sandboxes are configured, and warmed. */
static struct snapcell_sandbox *state_sandbox_with(struct view *v, bool reuse)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_add_tool(cfg, "state_view", "", NULL, SNAPCELL_APPROVAL_NEVER,
					      state_view, v, &err),
		     0, "%s", err.message);
	/* Reset in place instead of a new fork (docs/architecture.md, "Reset in place"): the
	 * tests at the end compare reset cells with fresh ones. */
	cr_assert_eq(snapcell_config_set_reuse(cfg, reuse, &err), 0, "%s", err.message);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	cr_assert_eq(snapcell_sandbox_reuse(sb), reuse, "this host cannot reset cells in place");
	snapcell_config_free(cfg);
	/* The first cell comes before the template's second stage of preloads (architecture.md,
	 * "What the template preloads"): every later one is forked from the warmed template. */
	expect_output(sb, "pass", "");
	return sb;
}

static struct snapcell_sandbox *state_sandbox(struct view *v)
{
	return state_sandbox_with(v, false);
}

/* The run's stdout as JSON; fails the test unless the run ended ok with one JSON value. */
static json_t *parse_output(struct snapcell_result *res, const char *what)
{
	cr_assert_eq(res->status, SNAPCELL_STATUS_OK, "%s: status %s, stderr: %s", what,
		     snapcell_status_name(res->status), res->stderr_buf);
	json_error_t jerr;
	json_t *j = json_loads(res->stdout_buf, JSON_DISABLE_EOF_CHECK, &jerr);
	cr_assert_not_null(j, "%s: not JSON (%s): %.300s", what, jerr.text, res->stdout_buf);
	snapcell_result_free(res);
	return j;
}

static struct snapcell_result *session_result(struct snapcell_session *s, const char *code)
{
	struct snapcell_result *res = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_run(s, code, SIZE_MAX, NULL, &res, &err), 0, "%s",
		     err.message);
	return res;
}

/* {"inside": ..., "outside": ...} from the run's print and the host tool's view. With
 * SNAPCELL_TEST_STATE_DIR set, each description is also written there, one file each, to
 * read or diff by hand. */
static json_t *with_outside(json_t *desc, struct view *v)
{
	cr_assert_not_null(v->outside, "the probe never called state_view");
	json_t *failed = json_object_get(v->outside, "failed");
	cr_assert_null(failed, "the outside view failed (%s, wait status %d): %.2000s",
		       json_string_value(json_object_get(v->outside, "error")),
		       (int)json_integer_value(json_object_get(v->outside, "status")),
		       json_string_value(failed));
	json_object_set_new(desc, "outside", v->outside);
	v->outside = NULL;
	const char *dir = getenv("SNAPCELL_TEST_STATE_DIR");
	static int n;
	if (dir) {
		char path[4096];
		snprintf(path, sizeof(path), "%s/state-%d-%d.json", dir, (int)getpid(), n++);
		json_dump_file(desc, path, JSON_INDENT(1) | JSON_SORT_KEYS);
	}
	return desc;
}

static json_t *probe_fresh(struct snapcell_sandbox *sb, struct view *v)
{
	return with_outside(parse_output(test_run(sb, sc_state_probe_py), "probe"), v);
}

static json_t *probe_session(struct snapcell_session *s, struct view *v)
{
	return with_outside(parse_output(session_result(s, sc_state_probe_py), "probe"), v);
}

/* Differences between two descriptions (compare()): how many key paths differ, and the first
 * 40 of them with both values, for the failure message. */
struct diff {
	char text[8192];
	size_t len;
	int n;
};

static void note(struct diff *d, const char *path, json_t *a, json_t *b)
{
	if (d->n++ >= 40)
		return;
	char *as = a ? json_dumps(a, JSON_ENCODE_ANY | JSON_COMPACT) : strdup("(absent)");
	char *bs = b ? json_dumps(b, JSON_ENCODE_ANY | JSON_COMPACT) : strdup("(absent)");
	int w = snprintf(d->text + d->len, sizeof(d->text) - d->len, "\n  %s: %.160s != %.160s",
			 path, as, bs);
	if (w > 0)
		d->len = d->len + (size_t)w < sizeof(d->text) ? d->len + (size_t)w
							      : sizeof(d->text) - 1;
	free(as);
	free(bs);
}

/* Notes in d every path under which a and b differ; keys named skip (per-run values) are left
 * out. Arrays of one length are compared item by item, others whole. */
static void compare(struct diff *d, const char *path, json_t *a, json_t *b, const char *skip)
{
	char sub[512];
	if (a && b && json_is_object(a) && json_is_object(b)) {
		const char *k;
		json_t *x;
		json_object_foreach(a, k, x)
		{
			if (skip && strcmp(k, skip) == 0)
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", path, k);
			compare(d, sub, x, json_object_get(b, k), skip);
		}
		json_object_foreach(b, k, x)
		{
			snprintf(sub, sizeof(sub), "%s/%s", path, k);
			if (!json_object_get(a, k) && !(skip && strcmp(k, skip) == 0))
				note(d, sub, NULL, x);
		}
		return;
	}
	if (a && b && json_is_array(a) && json_is_array(b) &&
	    json_array_size(a) == json_array_size(b)) {
		for (size_t i = 0; i < json_array_size(a); i++) {
			snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
			compare(d, sub, json_array_get(a, i), json_array_get(b, i), skip);
		}
		return;
	}
	if (!a || !b || !json_equal(a, b))
		note(d, path, a, b);
}

/* The subtree at a path such as "inside/prctl/name"; NULL when absent. */
static json_t *at(json_t *desc, const char *path)
{
	char copy[256], *save = NULL;
	snprintf(copy, sizeof(copy), "%s", path);
	json_t *j = desc;
	for (char *k = strtok_r(copy, "/", &save); j && k; k = strtok_r(NULL, "/", &save))
		j = json_object_get(j, k);
	return j;
}

/* A change report's key: "path", or ["path", "text"]. NULL when it is neither. */
static const char *key_path(json_t *key)
{
	return json_string_value(json_is_array(key) ? json_array_get(key, 0) : key);
}

/* Whether j, as JSON text, contains text. */
static bool contains(json_t *j, const char *text)
{
	char *s = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
	bool found = s && strstr(s, text);
	free(s);
	return found;
}

/* Whether the host could read the cell's /proc. Root always can: there, not reading it fails
 * the test; otherwise only the inside keys are checked, saying so. */
static bool outside_available(json_t *desc)
{
	const char *why = json_string_value(at(desc, "outside/unavailable"));
	if (!why)
		return true;
	cr_expect_neq(geteuid(), 0, "as root: %s", why);
	cr_log_warn("no outside view (%s): only the inside keys are checked", why);
	return false;
}

/* Every key the change program says it changed differs between before and after; a probe
 * that cannot see its own planted change fails here. Logs what could not be changed. */
static void expect_changes_seen(json_t *report, json_t *before, json_t *after, const char *where)
{
	bool outside = outside_available(before) && outside_available(after);
	struct diff unseen = {.n = 0};
	const char *item;
	json_t *keys, *why;
	json_object_foreach(json_object_get(report, "changed"), item, keys)
	{
		size_t i;
		json_t *key;
		json_array_foreach(keys, i, key)
		{
			const char *path = key_path(key);
			const char *needle = json_string_value(json_array_get(key, 1));
			cr_assert_not_null(path, "%s: a bad key in the change report", item);
			if (!outside && strncmp(path, "outside/", 8) == 0)
				continue;
			json_t *a = at(before, path), *b = at(after, path);
			cr_expect(a || b, "%s: %s names %s, which no description has", where, item,
				  path);
			bool seen = needle ? contains(b, needle) && !contains(a, needle)
					   : !(a && b && json_equal(a, b));
			if (!seen) {
				char label[384];
				snprintf(label, sizeof(label), "%s (%s%s%s)", path, item,
					 needle ? ": " : "", needle ? needle : "");
				note(&unseen, label, a, b);
			}
		}
	}
	cr_expect_eq(unseen.n, 0, "%s: %d planted changes the probe did not see:%s", where,
		     unseen.n, unseen.text);
	json_object_foreach(json_object_get(report, "refused"), item, why)
		cr_log_info("%s: could not change %s: %s", where, item, json_string_value(why));
}

/* What the host undoes between a session's runs (change.py's "changed_in_run") is undone. */
static void expect_undone(json_t *report, json_t *before, json_t *after)
{
	const char *item;
	json_t *keys, *key;
	size_t i;
	json_object_foreach(json_object_get(report, "changed_in_run"), item, keys)
	{
		json_array_foreach(keys, i, key)
		{
			const char *path = key_path(key);
			cr_assert_not_null(path, "%s: a bad key in the change report", item);
			cr_expect(json_equal(at(before, path), at(after, path)),
				  "session: %s outlived its run (%s)", item, path);
		}
	}
}

static void expect_alike(json_t *ref, json_t *got, const char *what)
{
	struct diff d = {.n = 0};
	compare(&d, "", ref, got, "per_run");
	cr_expect_eq(d.n, 0, "%s: %d keys differ from the reference:%s", what, d.n, d.text);
	json_t *a = at(ref, "inside/per_run/random"), *b = at(got, "inside/per_run/random");
	cr_expect(json_is_null(a) || !json_equal(a, b),
		  "%s: the random generator's state is the reference's (not re-seeded)", what);
}

/* (a) Two cells forked from one template are alike: this is the reference. */
Test(state_diff, two_fresh_cells_are_alike, .timeout = 120)
{
	struct view v = {0};
	struct snapcell_sandbox *sb = state_sandbox(&v);
	json_t *ref = probe_fresh(sb, &v), *again = probe_fresh(sb, &v);
	cr_expect(json_object_size(json_object_get(ref, "inside")) > 30);
	outside_available(ref);
	expect_alike(ref, again, "a second fresh cell");
	json_decref(ref);
	json_decref(again);
	snapcell_sandbox_free(sb);
}

/* A copy of desc without the mappings: in a process kept between runs, each run's allocations
 * may move the heap's end and add arenas (a reset puts them back; a session does not). */
static json_t *without_maps(json_t *desc)
{
	json_t *copy = json_deep_copy(desc);
	json_object_del(json_object_get(copy, "outside"), "maps");
	return copy;
}

/* (b) Each probe catches a planted difference: in a session, whose worker keeps one process
 * between runs, the change program's work shows in the next probe. The probe runs twice
 * first: the second is the baseline (the first imports what the probe needs, which stays),
 * and must equal a third but for the mappings, so the probe itself changes nothing else it
 * sees. Mappings are checked by address (change.py's [key, text] items). */
Test(state_diff, every_planted_change_shows_in_a_session, .timeout = 180)
{
	struct view v = {0};
	struct snapcell_sandbox *sb = state_sandbox(&v);
	struct snapcell_session *s = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	json_decref(probe_session(s, &v));
	json_t *before = probe_session(s, &v), *again = probe_session(s, &v);
	struct diff d = {.n = 0};
	json_t *b = without_maps(before), *a = without_maps(again);
	compare(&d, "", b, a, NULL);
	json_decref(b);
	json_decref(a);
	cr_expect_eq(d.n, 0, "the probe changed what it sees in a session:%s", d.text);
	json_t *report = parse_output(session_result(s, sc_state_change_py), "change");
	cr_expect(json_object_size(json_object_get(report, "changed")) > 30, "changed too little");
	json_t *after = probe_session(s, &v);
	expect_changes_seen(report, again, after, "session");
	expect_undone(report, again, after);
	json_decref(report);
	json_decref(before);
	json_decref(again);
	json_decref(after);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

/* (b) again within one run: the change program and the probe as one run's code, against a
 * fresh reference; this sees what the host undoes between a session's runs (/output). */
Test(state_diff, every_planted_change_shows_within_a_run, .timeout = 120)
{
	struct view v = {0};
	struct snapcell_sandbox *sb = state_sandbox(&v);
	json_t *ref = probe_fresh(sb, &v);
	size_t len = strlen(sc_state_change_py) + strlen(sc_state_probe_py) + 2;
	char *code = malloc(len);
	cr_assert_not_null(code);
	snprintf(code, len, "%s\n%s", sc_state_change_py, sc_state_probe_py);
	struct snapcell_result *res = test_run(sb, code);
	free(code);
	cr_assert_eq(res->status, SNAPCELL_STATUS_OK, "status %s, stderr: %s",
		     snapcell_status_name(res->status), res->stderr_buf);
	/* Two JSON lines: the change report, then the probe's description. */
	char *second = strchr(res->stdout_buf, '\n');
	cr_assert_not_null(second, "%s", res->stdout_buf);
	*second = 0;
	json_t *report = json_loads(res->stdout_buf, 0, NULL);
	json_t *after = json_loads(second + 1, JSON_DISABLE_EOF_CHECK, NULL);
	cr_assert(report && after, "%s", res->stdout_buf);
	json_object_update(json_object_get(report, "changed"),
			   json_object_get(report, "changed_in_run"));
	with_outside(after, &v);
	expect_changes_seen(report, ref, after, "one run");
	snapcell_result_free(res);
	json_decref(report);
	json_decref(ref);
	json_decref(after);
	snapcell_sandbox_free(sb);
}

/* (b) for what a cell may not change: the probe's --self-test makes those changes in a host
 * process (as root, all of them) under the item names change.py uses, and each must show in
 * the keys it names. Every item the cell refused must be there, changed or said why not, so
 * the two lists stay in step. */
Test(state_diff, what_a_cell_may_not_change_shows_on_the_host, .timeout = 120)
{
	json_t *host = host_probe("--self-test", NULL, NULL);
	json_t *failed = json_object_get(host, "failed");
	cr_assert_null(failed, "the probe's self-test failed (%s): %.2000s",
		       json_string_value(json_object_get(host, "error")),
		       json_string_value(failed));
	expect_changes_seen(host, json_object_get(host, "before"), json_object_get(host, "after"),
			    "host");
	struct view v = {0};
	struct snapcell_sandbox *sb = state_sandbox(&v);
	json_t *cell = parse_output(test_run(sb, sc_state_change_py), "change");
	const char *item;
	json_t *why;
	json_object_foreach(json_object_get(cell, "refused"), item, why)
		cr_expect(json_object_get(json_object_get(host, "changed"), item) ||
				  json_object_get(json_object_get(host, "refused"), item),
			  "the cell refused %s (%s); the self-test neither changes it nor says why",
			  item, json_string_value(why));
	/* As root nothing is refused but what is untried by design ("not ...") and Landlock on a
	 * kernel without it. */
	json_object_foreach(json_object_get(host, "refused"), item, why)
	{
		const char *reason = json_string_value(why);
		bool by_design =
			strncmp(reason, "not ", 4) == 0 ||
			(strcmp(item, "landlock") == 0 &&
			 (strcmp(reason, "ENOSYS") == 0 || strcmp(reason, "EOPNOTSUPP") == 0));
		cr_expect(by_design || geteuid() != 0, "as root, the host refused %s: %s", item,
			  reason);
	}
	json_decref(cell);
	json_decref(host);
	snapcell_sandbox_free(sb);
}

/* (c) After a run that changed everything it could, the next run's cell equals the reference:
 * today a new fork, with reuse on the reset cell. */
Test(state_diff, a_cell_after_a_change_run_equals_the_reference, .timeout = 120)
{
	struct view v = {0};
	struct snapcell_sandbox *sb = state_sandbox(&v);
	json_t *ref = probe_fresh(sb, &v);
	json_t *report = parse_output(test_run(sb, sc_state_change_py), "change");
	json_t *next = probe_fresh(sb, &v);
	expect_alike(ref, next, "the cell after a change run");
	json_decref(report);
	json_decref(ref);
	json_decref(next);
	snapcell_sandbox_free(sb);
}

/* With reuse on, a run's code followed by a line naming its cell (its /tmp and /output mounts,
 * as tests/c/integration/test_reset.c tells cells apart: each cell is pid 1 of a namespace of
 * its own); *id gets that line. */
#define CELL_IDENTITY                                                                              \
	"\nimport os as _os\n"                                                                     \
	"print('@', *[(s.st_dev, s.st_ino, s.st_ctime_ns) for s in "                               \
	"[_os.stat('/tmp'), _os.stat('/output')]])\n"

static struct snapcell_result *run_identified(struct snapcell_sandbox *sb, const char *code,
					      char **id)
{
	char *full = NULL;
	cr_assert_gt(asprintf(&full, "%s" CELL_IDENTITY, code), 0);
	struct snapcell_result *res = test_run(sb, full);
	free(full);
	const char *at = res->stdout_buf ? strstr(res->stdout_buf, "\n@ ") : NULL;
	cr_assert_not_null(at, "no cell identity: status %s, stderr %s",
			   snapcell_status_name(res->status), res->stderr_buf);
	*id = strdup(at + 1);
	return res;
}

/* The cells a reuse test met: each one's identity and, when its first run was a probe (so
 * it was a fresh fork then), that description. */
struct cells {
	char *id[64];
	json_t *fresh[64];
	int n;
	int compared; /* probes of a reset cell compared with the same cell fresh */
};

static int cell_index(struct cells *c, char *id)
{
	for (int i = 0; i < c->n; i++)
		if (strcmp(c->id[i], id) == 0) {
			free(id);
			return i;
		}
	cr_assert_lt(c->n, 64);
	c->id[c->n] = id;
	c->fresh[c->n] = NULL;
	return c->n++;
}

/* A probe: in a cell met before (reset in place since), compared with what the same cell's
 * probe saw while fresh; a cell's first probe is its fresh description. */
static void probe_and_compare(struct snapcell_sandbox *sb, struct view *v, struct cells *c)
{
	char *id;
	json_t *got =
		with_outside(parse_output(run_identified(sb, sc_state_probe_py, &id), "probe"), v);
	int n = c->n, i = cell_index(c, id);
	if (i == n) {
		c->fresh[i] = got;
		return;
	}
	if (c->fresh[i]) {
		expect_alike(c->fresh[i], got, "a cell reset in place");
		c->compared++;
	}
	json_decref(got);
}

static void cells_free(struct cells *c)
{
	for (int i = 0; i < c->n; i++) {
		free(c->id[i]);
		json_decref(c->fresh[i]);
	}
}

/* What a reset puts back rather than discards the cell for (docs/security.md, "Reset in
 * place"): module attributes, builtins, sys.modules, the environment, the generators' use,
 * a mapping added, the heap grown, pages dropped. */
static const char restorable_change[] = "import builtins, os, sys, mmap, random, json\n"
					"builtins.planted = sys.planted = json.planted = 1\n"
					"os.environ['PLANTED'] = '1'\n"
					"random.random()\n"
					"m = mmap.mmap(-1, 1 << 20)\n"
					"m.write(b'x' * 4096)\n"
					"big = [bytearray(4096) for _ in range(4096)]\n"
					"print('changed')\n";

/* With reuse on, after each run of change: the next run's probe, in a cell reset in place,
 * equals the same cell's description when it was a fresh fork, key for key. A cell is
 * compared with itself: cells forked at different times are not alike once the template
 * holds reset images (MADV_DONTFORK mappings leave holes where a later cell's libraries
 * land), nor is the first cell, parked before the template's warm-up, like the others. */
static void expect_reset_cells_fresh(const char *change, int rounds, int probes, int at_least)
{
	struct view v = {0};
	struct snapcell_sandbox *sb = state_sandbox_with(&v, true);
	struct cells c = {0};
	for (int i = 0; i < 3; i++) /* the cells' fresh descriptions */
		probe_and_compare(sb, &v, &c);
	for (int i = 0; i < rounds; i++) {
		char *id;
		snapcell_result_free(run_identified(sb, change, &id));
		cell_index(&c, id);
		for (int j = 0; j < probes; j++)
			probe_and_compare(sb, &v, &c);
	}
	/* With Python 3.10 these runs change parked mappings (the template's answer: "its
	 * mappings differ"), so their cells are discarded and forked anew, not reset: nothing to
	 * compare there. */
	struct snapcell_result *res =
		test_run(sb, "import sys\nprint(sys.version_info >= (3, 11))");
	bool compares = strcmp(res->stdout_buf, "True\n") == 0;
	snapcell_result_free(res);
	cells_free(&c);
	snapcell_sandbox_free(sb);
	if (!compares && c.compared < at_least)
		cr_skip_test("Python 3.10's runs change the parked mappings: cells are discarded");
	cr_expect_geq(c.compared, at_least, "only %d probes ran in a reset cell met fresh before",
		      c.compared);
}

/* (d) After runs that changed what a reset restores. Most probes must land in reset cells,
 * or the test proves nothing. */
Test(state_diff, a_cell_reset_in_place_equals_itself_fresh, .timeout = 300)
{
	expect_reset_cells_fresh(restorable_change, 8, 1, 4);
}

/* (c) with reuse on: after runs that changed everything they could (most of it state a
 * reset checks rather than restores: those cells are discarded), the cells that run next,
 * reset or forked, are as fresh. Two probes a round: the second runs in the first's cell,
 * reset, when the first's was new. */
Test(state_diff, with_reuse_a_cell_after_a_change_run_equals_itself_fresh, .timeout = 300)
{
	expect_reset_cells_fresh(sc_state_change_py, 4, 2, 2);
}
