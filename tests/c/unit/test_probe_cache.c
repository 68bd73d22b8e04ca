/* The per-user cache of the interpreter's answers (src/core/probe_cache.c): used across
 * processes, asked again when the interpreter or the entry changes, and trusted only when the
 * user alone could have written it. Each resolution that should read the cache runs in a fresh
 * child, since a process remembers its own answers. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"

/* A fake interpreter outside /tmp (cells mount over /tmp, so one there is refused) whose
 * answer names itself as the executable, as a real interpreter's does; a cache directory. */
struct fixture {
	char dir[64], cache[64], python[128], entry_dir[128];
	char *json;
};

static void fixture_make(struct fixture *f)
{
	snprintf(f->dir, sizeof(f->dir), "/var/tmp/sc-probe-XXXXXX");
	cr_assert_not_null(mkdtemp(f->dir));
	chmod(f->dir, 0755);
	snprintf(f->cache, sizeof(f->cache), "/tmp/sc-cache-XXXXXX");
	cr_assert_not_null(mkdtemp(f->cache));
	snprintf(f->python, sizeof(f->python), "%s/python3", f->dir);
	snprintf(f->entry_dir, sizeof(f->entry_dir), "%s/snapcell", f->cache);
	f->json = test_python_answer("cpython", 3, 12, 1, false, f->python);
	free(test_fake_python(f->dir, "python3", f->json));
	setenv("XDG_CACHE_HOME", f->cache, 1);
	unsetenv("SNAPCELL_PROBE_CACHE");
}

static void fixture_free(struct fixture *f)
{
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", f->dir, f->cache);
	cr_expect_eq(system(cmd), 0);
	free(f->json);
}

static int count_runs(const struct fixture *f)
{
	char path[200], line[64];
	snprintf(path, sizeof(path), "%s/runs", f->dir);
	FILE *file = fopen(path, "r");
	int n = 0;
	while (file && fgets(line, sizeof(line), file))
		n++;
	if (file)
		fclose(file);
	return n;
}

/* Resolves python in a new process; state gets its probe_cache, or "refused: <message>". */
static void resolve_in_child(const char *python, char state[300])
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct snapcell_config *cfg = snapcell_config_new();
		struct snapcell_python_info info;
		struct snapcell_error err = {0};
		char out[300];
		if (snapcell_config_set_python(cfg, python, &err) < 0 ||
		    snapcell_config_python_info(cfg, &info, &err) < 0)
			snprintf(out, sizeof(out), "refused: %.280s", err.message);
		else
			snprintf(out, sizeof(out), "%s", info.probe_cache);
		(void)!write(p[1], out, strlen(out) + 1);
		_exit(0);
	}
	close(p[1]);
	memset(state, 0, 300);
	(void)!read(p[0], state, 299);
	close(p[0]);
	waitpid(pid, NULL, 0);
}

/* The one entry in the cache directory, or "" when there is none. */
static void entry_path(const struct fixture *f, char *path, size_t len)
{
	char cmd[200];
	snprintf(cmd, sizeof(cmd), "ls '%s'/probe-*.json 2>/dev/null", f->entry_dir);
	FILE *ls = popen(cmd, "r");
	path[0] = 0;
	if (ls && fgets(path, (int)len, ls))
		path[strcspn(path, "\n")] = 0;
	if (ls)
		pclose(ls);
}

static char *read_text(const char *path)
{
	FILE *file = fopen(path, "r");
	cr_assert_not_null(file, "%s", path);
	char *text = calloc(1, 1 << 20);
	cr_assert_not_null(text);
	(void)!fread(text, 1, (1 << 20) - 1, file);
	fclose(file);
	return text;
}

static void write_text(const char *path, const char *text)
{
	FILE *file = fopen(path, "w");
	cr_assert_not_null(file, "%s", path);
	fputs(text, file);
	fclose(file);
}

Test(probe_cache, a_second_process_reads_the_answer_instead_of_running_the_interpreter)
{
	struct fixture f;
	fixture_make(&f);
	char state[300], entry[300];
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "stored");
	cr_expect_eq(count_runs(&f), 1);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "used");
	cr_expect_eq(count_runs(&f), 1, "the second process ran the interpreter");
	/* The directory is made the user's own, mode 0700; the entry 0600. */
	struct stat st;
	cr_assert_eq(stat(f.entry_dir, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0700);
	cr_expect_eq(st.st_uid, geteuid());
	entry_path(&f, entry, sizeof(entry));
	cr_assert_eq(stat(entry, &st), 0, "%s", entry);
	cr_expect_eq(st.st_mode & 0777, 0600);
	fixture_free(&f);
}

Test(probe_cache, an_interpreter_changed_since_is_asked_again)
{
	struct fixture f;
	fixture_make(&f);
	char state[300];
	resolve_in_child(f.python, state);
	struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000000000}};
	cr_assert_eq(utimensat(AT_FDCWD, f.python, times, 0), 0);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "stored");
	cr_expect_eq(count_runs(&f), 2, "a touched interpreter was answered from the cache");
	/* A change of mode changes its ctime: asked again too. */
	cr_assert_eq(chmod(f.python, 0750), 0);
	resolve_in_child(f.python, state);
	cr_expect_eq(count_runs(&f), 3, "a chmod'ed interpreter was answered from the cache");
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "used");
	cr_expect_eq(count_runs(&f), 3);
	fixture_free(&f);
}

Test(probe_cache, a_corrupt_entry_is_ignored_and_rewritten)
{
	struct fixture f;
	fixture_make(&f);
	char state[300], entry[300];
	resolve_in_child(f.python, state);
	entry_path(&f, entry, sizeof(entry));
	char *good = read_text(entry);
	/* Garbage, then the right key with its answer cut short. */
	write_text(entry, "not a cache entry at all\n");
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "stored");
	cr_expect_eq(count_runs(&f), 2);
	char *again = read_text(entry);
	cr_expect_str_eq(again, good, "the entry was not rewritten");
	free(again);
	char *cut = strdup(good);
	cut[strlen(cut) - 40] = 0;
	write_text(entry, cut);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "stored");
	cr_expect_eq(count_runs(&f), 3);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "used");
	cr_expect_eq(count_runs(&f), 3);
	free(cut), free(good);
	fixture_free(&f);
}

Test(probe_cache, a_cached_answer_is_judged_like_a_fresh_one)
{
	struct fixture f;
	fixture_make(&f);
	char state[300], entry[300];
	resolve_in_child(f.python, state);
	entry_path(&f, entry, sizeof(entry));
	/* The user edits their own entry so it names /tmp (where cells mount theirs). */
	char *text = read_text(entry), *at = strstr(text, "\"stdlib\": \"/usr/lib\"");
	cr_assert_not_null(at, "%s", text);
	memcpy(at, "\"stdlib\": \"/tmp\"    ", 20);
	write_text(entry, text);
	resolve_in_child(f.python, state);
	cr_expect(strstr(state, "refused: ") && strstr(state, "lies under /tmp"), "%s", state);
	cr_expect_eq(count_runs(&f), 1);
	free(text);
	fixture_free(&f);
}

static uid_t nobody(void)
{
	struct passwd *pw = getpwnam("nobody");
	return pw ? pw->pw_uid : 65534;
}

/* Whether this process may give a file to nobody: root with CAP_CHOWN, and nobody mapped in its
 * user namespace (a simulated host's `unshare -U -r` maps only root). */
static bool can_give_to_nobody(void)
{
	char path[] = "/tmp/snapcell-chown-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return false;
	bool ok = fchown(fd, nobody(), (gid_t)-1) == 0;
	close(fd);
	unlink(path);
	return ok;
}

Test(probe_cache, a_directory_others_own_or_may_write_is_not_used)
{
	if (!can_give_to_nobody())
		cr_skip_test("needs root that may give the cache directory to another user");
	struct fixture f;
	fixture_make(&f);
	char state[300];
	resolve_in_child(f.python, state);
	cr_assert_eq(chown(f.entry_dir, nobody(), (gid_t)-1), 0);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "untrusted-dir");
	resolve_in_child(f.python, state);
	cr_expect_eq(count_runs(&f), 3, "a directory nobody owns was trusted");
	cr_assert_eq(chown(f.entry_dir, 0, (gid_t)-1), 0);
	cr_assert_eq(chmod(f.entry_dir, 0770), 0);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "untrusted-dir");
	cr_expect_eq(count_runs(&f), 4, "a group-writable directory was trusted");
	/* A link in the directory's place is not followed. */
	char moved[200];
	snprintf(moved, sizeof(moved), "%s/elsewhere", f.cache);
	cr_assert_eq(chmod(f.entry_dir, 0700), 0);
	cr_assert_eq(rename(f.entry_dir, moved), 0);
	cr_assert_eq(symlink(moved, f.entry_dir), 0);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "no-dir");
	cr_expect_eq(count_runs(&f), 5, "a linked directory was used");
	fixture_free(&f);
}

Test(probe_cache, an_entry_others_own_may_write_or_that_is_a_link_is_refused)
{
	if (!can_give_to_nobody())
		cr_skip_test("needs root that may give an entry to another user");
	struct fixture f;
	fixture_make(&f);
	char state[300], entry[300], copy[300];
	resolve_in_child(f.python, state);
	entry_path(&f, entry, sizeof(entry));
	cr_assert_eq(chown(entry, nobody(), (gid_t)-1), 0);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "stored");
	cr_expect_eq(count_runs(&f), 2, "an entry nobody owns was trusted");
	struct stat st;
	cr_assert_eq(lstat(entry, &st), 0);
	cr_expect_eq(st.st_uid, 0, "the replaced entry is not the user's");
	cr_assert_eq(chmod(entry, 0620), 0);
	resolve_in_child(f.python, state);
	cr_expect_eq(count_runs(&f), 3, "a group-writable entry was trusted");
	/* A link to a good entry of the user's own is still refused. */
	snprintf(copy, sizeof(copy), "%s/copy.json", f.cache);
	cr_assert_eq(rename(entry, copy), 0);
	cr_assert_eq(symlink(copy, entry), 0);
	resolve_in_child(f.python, state);
	cr_expect_eq(count_runs(&f), 4, "a linked entry was followed");
	cr_assert_eq(lstat(entry, &st), 0);
	cr_expect(S_ISREG(st.st_mode), "the link was not replaced by a file");
	fixture_free(&f);
}

Test(probe_cache, it_can_be_turned_off_and_needs_a_home)
{
	struct fixture f;
	fixture_make(&f);
	char state[300];
	setenv("SNAPCELL_PROBE_CACHE", "0", 1);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "off");
	resolve_in_child(f.python, state);
	cr_expect_eq(count_runs(&f), 2);
	struct stat st;
	cr_expect_neq(stat(f.entry_dir, &st), 0, "the cache was made though off");
	unsetenv("SNAPCELL_PROBE_CACHE");
	unsetenv("XDG_CACHE_HOME");
	setenv("HOME", "relative", 1);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "no-dir");
	unsetenv("HOME");
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "no-dir");
	cr_expect_eq(count_runs(&f), 4);
	/* HOME alone: ~/.cache/snapcell. */
	setenv("HOME", f.cache, 1);
	resolve_in_child(f.python, state);
	cr_expect_str_eq(state, "stored");
	char dir[200];
	snprintf(dir, sizeof(dir), "%s/.cache/snapcell", f.cache);
	cr_expect_eq(stat(dir, &st), 0, "%s", dir);
	fixture_free(&f);
}

Test(probe_cache, a_launcher_s_answer_is_never_cached)
{
	struct fixture f;
	fixture_make(&f);
	char state[300], shim[200], body[300];
	/* What a pyenv shim is: a script whose answer names another file, chosen by more than
	 * the script (PYENV_VERSION, .python-version files, ...). */
	snprintf(shim, sizeof(shim), "%s/shim", f.dir);
	snprintf(body, sizeof(body), "#!/bin/sh\nexec '%s' \"$@\"\n", f.python);
	write_text(shim, body);
	cr_assert_eq(chmod(shim, 0755), 0);
	resolve_in_child(shim, state);
	cr_expect_str_eq(state, "launcher");
	resolve_in_child(shim, state);
	cr_expect_str_eq(state, "launcher");
	cr_expect_eq(count_runs(&f), 2);
	char entry[300];
	entry_path(&f, entry, sizeof(entry));
	cr_expect_str_eq(entry, "", "a launcher's answer was stored: %s", entry);
	fixture_free(&f);
}

/* Resolves python in a new process; exe gets the executable it resolved to. */
static void resolve_exe_in_child(const char *python, char state[300], char exe[300])
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct snapcell_config *cfg = snapcell_config_new();
		struct snapcell_python_info info;
		struct snapcell_error err = {0};
		char out[600] = {0};
		if (snapcell_config_set_python(cfg, python, &err) < 0 ||
		    snapcell_config_python_info(cfg, &info, &err) < 0)
			snprintf(out, 300, "refused: %.280s", err.message);
		else {
			snprintf(out, 300, "%s", info.probe_cache);
			snprintf(out + 300, 300, "%.290s", info.executable);
		}
		(void)!write(p[1], out, sizeof(out));
		_exit(0);
	}
	close(p[1]);
	char in[600] = {0};
	(void)!read(p[0], in, sizeof(in));
	close(p[0]);
	waitpid(pid, NULL, 0);
	memcpy(state, in, 300), memcpy(exe, in + 300, 300);
	state[299] = exe[299] = 0;
}

/* Two real interpreters of the machine (Debian's and a pyenv build), resolved; or skip. */
static void two_pythons(char a[300], char b[300])
{
	static const char *const candidates[] = {"/usr/bin/python3",
						 "/root/.pyenv/versions/3.12.1/bin/python3.12",
						 "/root/.pyenv/versions/3.13.0/bin/python3.13"};
	int n = 0;
	for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]) && n < 2; i++) {
		char *real = realpath(candidates[i], NULL);
		if (real && access(real, X_OK) == 0)
			snprintf(n++ ? b : a, 300, "%s", real);
		free(real);
	}
	if (n < 2)
		cr_skip_test("needs two CPython interpreters (Debian's, pyenv's 3.12 or 3.13)");
}

Test(probe_cache, a_shim_runs_each_time_and_the_binary_it_names_is_cached)
{
	struct fixture f;
	fixture_make(&f);
	char a[300], b[300], shim[200], body[400], state[300], exe[300];
	two_pythons(a, b);
	/* A pyenv-like shim: which binary it runs depends on the environment. */
	snprintf(shim, sizeof(shim), "%s/shim", f.dir);
	snprintf(body, sizeof(body),
		 "#!/bin/sh\necho run >> '%s/runs'\n"
		 "[ -n \"$SC_LD\" ] && export LD_LIBRARY_PATH=$SC_LD\nexec \"$SC_WHICH\" \"$@\"\n",
		 f.dir);
	write_text(shim, body);
	cr_assert_eq(chmod(shim, 0755), 0);
	setenv("SC_WHICH", a, 1);
	resolve_exe_in_child(shim, state, exe);
	cr_expect_str_eq(state, "launcher-stored");
	cr_expect_str_eq(exe, a);
	resolve_exe_in_child(shim, state, exe);
	cr_expect_str_eq(state, "launcher-used");
	cr_expect_str_eq(exe, a);
	cr_expect_eq(count_runs(&f), 2, "the shim did not run each time");
	/* The same shim choosing another binary answers for that one, not from a's entry. */
	setenv("SC_WHICH", b, 1);
	resolve_exe_in_child(shim, state, exe);
	cr_expect_str_eq(exe, b);
	cr_expect_str_eq(state, "launcher-stored");
	/* The binary itself, asked directly, reads the entry the shim's run left. */
	resolve_exe_in_child(b, state, exe);
	cr_expect_str_eq(state, "used");
	/* A launcher that sets the loader's variables: its answer is not kept. */
	char entry_cmd[300];
	snprintf(entry_cmd, sizeof(entry_cmd), "rm -f '%s'/probe-*.json", f.entry_dir);
	cr_assert_eq(system(entry_cmd), 0);
	setenv("SC_LD", "/nonexistent", 1);
	resolve_exe_in_child(shim, state, exe);
	cr_expect_str_eq(state, "launcher");
	char entry[300];
	entry_path(&f, entry, sizeof(entry));
	cr_expect_str_eq(entry, "", "an answer the loader's variables reached was kept");
	fixture_free(&f);
}
