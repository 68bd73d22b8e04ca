/* Choosing and resolving the interpreter (python_env.c, python_probe.c): the default order, a
 * shim resolved to its binary, the refusals, venvs and their interpreter, and the probe's
 * cache. Interpreters that cannot be installed here (PyPy, 3.9, free-threaded, a future 3.15)
 * are simulated by scripts that print the answer such an interpreter gives to the probe. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <glob.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "core/core.h"
#include "helpers.h"
#include "prelude.h"
#include "util/util.h"

/* Sets path as the interpreter and expects SNAPCELL_E_INVAL with a message holding path and
 * each of the words. */
static void expect_refused(const char *path, const char *w1, const char *w2)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_set_python(cfg, path, &err), SNAPCELL_E_INVAL, "%s",
		     err.message);
	cr_expect(strstr(err.message, path), "no path in: %s", err.message);
	cr_expect(strstr(err.message, w1), "no '%s' in: %s", w1, err.message);
	cr_expect(!w2 || strstr(err.message, w2), "no '%s' in: %s", w2, err.message);
	snapcell_config_free(cfg);
}

static int count_runs(const char *dir)
{
	char path[600], line[64];
	snprintf(path, sizeof(path), "%s/runs", dir);
	FILE *f = fopen(path, "r");
	int n = 0;
	while (f && fgets(line, sizeof(line), f))
		n++;
	if (f)
		fclose(f);
	return n;
}

/* An interpreter the machine has, outside the cell's mount points, or NULL. */
static const char *some_python(void)
{
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_python_info info;
	static char found[SNAPCELL_PYTHON_PATH_LEN];
	int rc = snapcell_config_python_info(cfg, &info, NULL);
	snapcell_config_free(cfg);
	if (rc < 0)
		return NULL;
	snprintf(found, sizeof(found), "%s", info.executable);
	return found;
}

Test(python, the_default_is_python3_on_path_resolved_to_the_real_binary)
{
	const char *exe = some_python();
	if (!exe)
		cr_skip_test("no python3 on PATH and no /usr/bin/python3");
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
	cr_expect_str_eq(info.chosen_by, "python3 on PATH");
	cr_expect_eq(info.major, 3);
	cr_expect_geq(info.minor, 10);
	char expect[32];
	snprintf(expect, sizeof(expect), "3.%u.", info.minor);
	cr_expect(!strncmp(info.version, expect, strlen(expect)), "%s", info.version);
	/* A pyenv python3 is a bash script; what runs is the binary it ends in. */
	char head[4] = {0};
	FILE *f = fopen(info.executable, "rb");
	cr_assert_not_null(f, "%s", info.executable);
	cr_expect_eq(fread(head, 1, 4, f), 4);
	fclose(f);
	cr_expect(!memcmp(head, "\177ELF", 4), "%s is not an ELF binary", info.executable);
	cr_expect_str_eq(info.warning, "");
	snapcell_config_free(cfg);
}

Test(python, without_python3_on_path_usr_bin_python3_is_chosen)
{
	setenv("PATH", "/nonexistent", 1);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	int rc = snapcell_config_python_info(cfg, &info, &err);
	if (access("/usr/bin/python3", X_OK) == 0) {
		cr_expect_eq(rc, 0, "%s", err.message);
		cr_expect_str_eq(info.chosen_by, "/usr/bin/python3");
	} else {
		cr_expect_eq(rc, SNAPCELL_E_INVAL);
		cr_expect(strstr(err.message, "no python3 on PATH and no /usr/bin/python3"), "%s",
			  err.message);
	}
	snapcell_config_free(cfg);
}

Test(python, a_shim_resolves_to_the_interpreter_it_runs)
{
	const char *exe = some_python();
	if (!exe)
		cr_skip_test("no python3 on PATH and no /usr/bin/python3");
	char *dir = test_make_tree(), shim[600], body[SNAPCELL_PYTHON_PATH_LEN + 64];
	/* What a pyenv shim does, in short: exec the real interpreter with the arguments. */
	snprintf(body, sizeof(body), "#!/bin/sh\nexec '%s' \"$@\"\n", exe);
	test_write_file(dir, "bin/python3", body);
	snprintf(shim, sizeof(shim), "%s/bin/python3", dir);
	cr_assert_eq(chmod(shim, 0755), 0);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_python(cfg, shim, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
	cr_expect_str_eq(info.executable, exe);
	cr_expect_str_eq(info.chosen_by, "snapcell_config_set_python");
	/* A name is looked up in PATH when set. */
	char path[4096];
	snprintf(path, sizeof(path), "%s/bin:%s", dir, getenv("PATH"));
	setenv("PATH", path, 1);
	cr_assert_eq(snapcell_config_set_python(cfg, "python3", &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
	cr_expect_str_eq(info.executable, exe);
	snapcell_config_free(cfg);
	test_remove_tree(dir);
	free(dir);
}

Test(python, the_resolved_interpreter_names_the_directories_it_loads_from)
{
	const char *exe = some_python();
	if (!exe)
		cr_skip_test("no python3 on PATH and no /usr/bin/python3");
	struct snapcell_config *cfg = test_config_new();
	struct sc_python py;
	struct snapcell_error err = {0};
	cr_assert_eq(sc__python_resolve(cfg, &py, &err), 0, "%s", err.message);
	cr_expect_str_eq(py.executable, exe);
	/* The stdlib (where os.py is), lib-dynload and the C library's directory. */
	bool os_py = false, dynload = false, libc = false;
	for (size_t i = 0; i < py.n_dirs; i++) {
		char probe[600];
		cr_expect_eq(py.dirs[i][0], '/');
		cr_expect(strncmp(py.dirs[i], "/tmp/", 5) && strncmp(py.dirs[i], "/proc", 5), "%s",
			  py.dirs[i]);
		snprintf(probe, sizeof(probe), "%s/os.py", py.dirs[i]);
		os_py |= access(probe, F_OK) == 0;
		snprintf(probe, sizeof(probe), "%s/python%u.%u/os.py", py.dirs[i], py.major,
			 py.minor);
		os_py |= access(probe, F_OK) == 0;
		snprintf(probe, sizeof(probe), "%s/python%u.%u/lib-dynload", py.dirs[i], py.major,
			 py.minor);
		dynload |= access(probe, F_OK) == 0 || strstr(py.dirs[i], "lib-dynload");
		snprintf(probe, sizeof(probe), "%s/lib-dynload", py.dirs[i]);
		dynload |= access(probe, F_OK) == 0;
		snprintf(probe, sizeof(probe), "%s/libc.so.6", py.dirs[i]);
		libc |= access(probe, F_OK) == 0;
	}
	cr_expect(os_py && dynload && libc, "os.py %d, lib-dynload %d, libc %d", os_py, dynload,
		  libc);
	sc__python_clear(&py);
	sc__python_clear(&py); /* cleared twice is harmless */
	snapcell_config_free(cfg);
}

/* The probe compiles the prelude with the interpreter itself, so templates load its code
 * (marshal) instead of compiling it at each start: the code is that interpreter's, of this
 * prelude, and sys.version says which interpreter the template must be to load it. */
Test(python, the_probe_brings_the_prelude_compiled_by_the_interpreter)
{
	const char *exe = some_python();
	if (!exe)
		cr_skip_test("no python3 on PATH and no /usr/bin/python3");
	struct snapcell_config *cfg = test_config_new();
	struct sc_python py;
	struct snapcell_error err = {0};
	cr_assert_eq(sc__python_resolve(cfg, &py, &err), 0, "%s", err.message);
	cr_assert_not_null(py.prelude_code);
	cr_assert_not_null(py.sys_version);
	cr_expect_eq(py.prelude_hash, sc__prelude_hash(sc_prelude_py));
	char path[] = "/tmp/snapcell-prelude-XXXXXX";
	int fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, py.prelude_code, py.prelude_len), (ssize_t)py.prelude_len);
	close(fd);
	char cmd[1024], out[512] = {0};
	snprintf(cmd, sizeof(cmd),
		 "%s -I -S -c \"import marshal, sys; c = marshal.loads("
		 "open(sys.argv[1], 'rb').read()); print(type(c).__name__, c.co_filename, "
		 "sys.version == sys.argv[2])\" %s '%s'",
		 py.executable, path, py.sys_version);
	FILE *p = popen(cmd, "r");
	cr_assert_not_null(p);
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	pclose(p);
	out[n] = 0;
	cr_expect_str_eq(out, "code <snapcell> True\n");
	unlink(path);
	sc__python_clear(&py);
	snapcell_config_free(cfg);
}

Test(python, other_implementations_old_versions_and_free_threaded_builds_are_refused)
{
	char *dir = test_make_tree();
	char *pypy = test_python_answer("pypy", 3, 10, 14, false, "/bin/sh");
	char *old = test_python_answer("cpython", 3, 9, 18, false, "/bin/sh");
	char *ft = test_python_answer("cpython", 3, 13, 0, true, "/bin/sh");
	char *p = test_fake_python(dir, "pypy3", pypy);
	expect_refused(p, "pypy", "not CPython");
	free(p);
	p = test_fake_python(dir, "python3.9", old);
	expect_refused(p, "Python 3.9.18", "3.10 or newer");
	free(p);
	p = test_fake_python(dir, "python3.13t", ft);
	expect_refused(p, "free-threaded", "abi3");
	free(p), free(pypy), free(old), free(ft);
	test_remove_tree(dir);
	free(dir);
}

Test(python, files_that_are_not_interpreters_are_refused)
{
	char *dir = test_make_tree(), path[600];
	expect_refused("/bin/true", "did not answer", NULL);
	expect_refused(dir, "a directory", NULL);
	test_write_file(dir, "plain", "print('hi')\n");
	snprintf(path, sizeof(path), "%s/plain", dir);
	expect_refused(path, "not an executable file", NULL);
	cr_assert_eq(chmod(path, 0755), 0); /* no #! line: the kernel cannot run it */
	expect_refused(path, "not an executable program", NULL);
	test_write_file(dir, "garbage", "#!/bin/sh\necho '{\"implementation\": 1}'\n");
	snprintf(path, sizeof(path), "%s/garbage", dir);
	cr_assert_eq(chmod(path, 0755), 0);
	expect_refused(path, "did not answer", NULL);
	snprintf(path, sizeof(path), "%s/missing", dir);
	expect_refused(path, "No such file", NULL);
	expect_refused("no-such-python-anywhere", "not found on PATH", NULL);
	test_remove_tree(dir);
	free(dir);
}

Test(python, an_interpreter_that_never_answers_is_refused_in_bounded_time)
{
	char *dir = test_make_tree(), path[600];
	test_write_file(dir, "slow", "#!/bin/sh\nexec sleep 30\n");
	snprintf(path, sizeof(path), "%s/slow", dir);
	cr_assert_eq(chmod(path, 0755), 0);
	time_t start = time(NULL);
	expect_refused(path, "no answer within 5 s", NULL);
	cr_expect_leq(time(NULL) - start, 8);
	test_remove_tree(dir);
	free(dir);
}

Test(python, what_a_stuck_interpreter_started_is_killed_with_it)
{
	char *dir = test_make_tree(), path[600];
	/* It answers nothing useful and leaves a child holding its output open. */
	test_write_file(dir, "forks", "#!/bin/sh\nsleep 31.731 &\necho 'Trace\033[31m'>&2\n");
	snprintf(path, sizeof(path), "%s/forks", dir);
	cr_assert_eq(chmod(path, 0755), 0);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_set_python(cfg, path, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "no answer within 5 s"), "%s", err.message);
	/* Killed, it may take a moment to be gone. */
	int left = 0;
	uint64_t give_up = test_now_ms() + 15000;
	while ((left = system("pgrep -f 'slee[p] 31.731' >/dev/null")) == 0 &&
	       test_now_ms() < give_up)
		usleep(20000);
	cr_expect_eq(left, 256, "the child was left");
	/* An answer past its cap. */
	test_write_file(dir, "chatty", "#!/bin/sh\nhead -c 300000 /dev/zero | tr '\\0' x\n");
	snprintf(path, sizeof(path), "%s/chatty", dir);
	cr_assert_eq(chmod(path, 0755), 0);
	cr_expect_eq(snapcell_config_set_python(cfg, path, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "passed 256 KiB"), "%s", err.message);
	/* What it printed on stderr is quoted without its control bytes. */
	test_write_file(dir, "noisy", "#!/bin/sh\nprintf 'bad\\033[31m option\\n' >&2\nexit 2\n");
	snprintf(path, sizeof(path), "%s/noisy", dir);
	cr_assert_eq(chmod(path, 0755), 0);
	cr_expect_eq(snapcell_config_set_python(cfg, path, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, "bad?[31m option"), "%s", err.message);
	cr_expect(!strchr(err.message, '\033'));
	snapcell_config_free(cfg);
	test_remove_tree(dir);
	free(dir);
}

Test(python, an_interpreter_where_cells_mount_their_own_file_systems_is_refused)
{
	char *dir = test_make_tree();
	/* One under /tmp, say a build unpacked there: /tmp is the cell's own tmpfs. */
	char *self = NULL, *json;
	cr_assert(asprintf(&self, "%s/python3", dir) > 0);
	json = test_python_answer("cpython", 3, 12, 1, false, self);
	char *p = test_fake_python(dir, "python3", json);
	expect_refused(p, "lies under /tmp", "cells mount over");
	free(p), free(json);
	/* One whose standard library is under /proc. */
	cr_assert(
		asprintf(&json,
			 "{\"implementation\": \"cpython\", \"version\": [3, 12, 1], "
			 "\"executable\": \"/bin/sh\", \"stdlib\": \"/proc/sys\", \"libs\": []}") >
		0);
	p = test_fake_python(dir, "python3-proc", json);
	expect_refused(p, "/proc/sys lies under /proc", NULL);
	free(p), free(json), free(self);
	test_remove_tree(dir);
	free(dir);
}

Test(python, a_version_newer_than_snapcell_knows_runs_with_a_warning)
{
	char *dir = test_make_tree();
	char *json = test_python_answer("cpython", 3, 15, 0, false, "/bin/sh");
	char *p = test_fake_python(dir, "python3.15", json);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_python(cfg, p, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
	cr_expect_str_eq(info.version, "3.15.0");
	cr_expect_str_eq(info.executable, "/bin/sh"); /* what it said it is */
	cr_expect(strstr(info.warning, "newer than 3.14"), "%s", info.warning);
	snapcell_config_free(cfg);
	free(p), free(json);
	test_remove_tree(dir);
	free(dir);
}

Test(python, an_interpreter_is_asked_once_per_file_version_from_any_thread)
{
	char *dir = test_make_tree();
	char *json = test_python_answer("cpython", 3, 12, 1, false, "/bin/sh");
	char *p = test_fake_python(dir, "python3", json);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_python(cfg, p, &err), 0, "%s", err.message);
	cr_expect_eq(count_runs(dir), 1);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
	cr_expect_eq(count_runs(dir), 1, "a second resolution ran the interpreter again");
	/* A rebuilt interpreter (another mtime) is asked again. */
	struct timespec times[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_sec = 1000000000}};
	cr_assert_eq(utimensat(AT_FDCWD, p, times, 0), 0);
	cr_assert_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
	cr_expect_eq(count_runs(dir), 2);
	snapcell_config_free(cfg);
	free(p), free(json);
	test_remove_tree(dir);
	free(dir);
}

static void *resolve_thread(void *arg)
{
	struct sc_python py;
	intptr_t rc = sc__python_resolve(arg, &py, NULL);
	if (rc == 0)
		sc__python_clear(&py);
	return (void *)rc;
}

Test(python, concurrent_first_resolutions_ask_once)
{
	char *dir = test_make_tree();
	char *json = test_python_answer("cpython", 3, 12, 1, false, "/bin/sh");
	char *p = test_fake_python(dir, "python3", json);
	/* Found on PATH, so no setter has asked it yet. */
	char path[4096];
	snprintf(path, sizeof(path), "%s:%s", dir, getenv("PATH"));
	setenv("PATH", path, 1);
	struct snapcell_config *cfg = test_config_new();
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		cr_assert_eq(pthread_create(&t[i], NULL, resolve_thread, cfg), 0);
	for (int i = 0; i < 4; i++) {
		void *rc;
		pthread_join(t[i], &rc);
		cr_expect_eq((intptr_t)rc, 0);
	}
	cr_expect_eq(count_runs(dir), 1);
	snapcell_config_free(cfg);
	free(p), free(json);
	test_remove_tree(dir);
	free(dir);
}

/* A venv as venv writes it: pyvenv.cfg and lib/python3.Y/site-packages. */
static char *make_venv(const char *dir, const char *name, const char *cfg_text, unsigned minor)
{
	char *venv, rel[600];
	cr_assert(asprintf(&venv, "%s/%s", dir, name) > 0);
	snprintf(rel, sizeof(rel), "%s/pyvenv.cfg", name);
	test_write_file(dir, rel, cfg_text);
	snprintf(rel, sizeof(rel), "%s/lib/python3.%u/site-packages/.keep", name, minor);
	test_write_file(dir, rel, "");
	return venv;
}

Test(python, a_venv_of_any_supported_python_runs_its_own_interpreter)
{
	char *dir = test_make_tree(), text[1200];
	char *json = test_python_answer("cpython", 3, 12, 1, false, "/bin/sh");
	char *base = test_fake_python(dir, "py312/bin/python3.12", json);
	snprintf(text, sizeof(text), "home = %s/py312/bin\nversion = 3.12.1\n", dir);
	char *venv = make_venv(dir, "venv", text, 12);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_venv(cfg, venv, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
	cr_expect_str_eq(info.chosen_by, "the venv's interpreter");
	cr_expect_str_eq(info.version, "3.12.1");
	/* Its site-packages is the one of its own X.Y. */
	const char *dirs[64], *site[64];
	size_t n;
	cr_assert_eq(sc__python_dirs(cfg, dirs, site, &n, &err), 0);
	cr_assert_eq(n, 1);
	cr_expect_str_eq(site[0], "lib/python3.12/site-packages");
	/* The same interpreter named too is fine; a copy of the config (what a sandbox keeps)
	 * keeps both. */
	cr_expect_eq(snapcell_config_set_python(cfg, base, &err), 0, "%s", err.message);
	struct snapcell_config *copy;
	cr_assert_eq(sc__config_copy(cfg, &copy), 0);
	cr_assert_eq(snapcell_config_python_info(copy, &info, &err), 0, "%s", err.message);
	cr_expect_str_eq(info.chosen_by, "snapcell_config_set_python");
	cr_assert_eq(sc__python_dirs(copy, dirs, site, &n, &err), 0);
	cr_expect_str_eq(site[0], "lib/python3.12/site-packages");
	snapcell_config_free(copy);
	snapcell_config_free(cfg);
	free(venv), free(base), free(json);
	test_remove_tree(dir);
	free(dir);
}

Test(python, a_venv_of_python_older_than_3_10_is_refused)
{
	char *dir = test_make_tree();
	char *venv = make_venv(dir, "venv", "home = /usr/bin\nversion = 3.9.18\n", 9);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_expect_eq(snapcell_config_set_venv(cfg, venv, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, venv) && strstr(err.message, "3.9.18") &&
			  strstr(err.message, "3.10 or newer"),
		  "%s", err.message);
	snapcell_config_free(cfg);
	free(venv);
	test_remove_tree(dir);
	free(dir);
}

Test(python, a_venv_not_made_from_the_given_python_is_refused_naming_both)
{
	char *dir = test_make_tree(), text[1200];
	char *j312 = test_python_answer("cpython", 3, 12, 1, false, "/bin/sh");
	char *j312b = test_python_answer("cpython", 3, 12, 3, false, "/bin/true");
	char *j313 = test_python_answer("cpython", 3, 13, 0, false, "/bin/sh");
	char *base = test_fake_python(dir, "a/python3.12", j312);
	char *other = test_fake_python(dir, "b/python3.12", j312b);
	char *newer = test_fake_python(dir, "c/python3.13", j313);
	snprintf(text, sizeof(text), "home = /nowhere\nversion = 3.12.1\nexecutable = %s\n", base);
	char *venv = make_venv(dir, "venv", text, 12);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	/* python first, then the venv; and the other way round. */
	cr_assert_eq(snapcell_config_set_python(cfg, other, &err), 0, "%s", err.message);
	cr_expect_eq(snapcell_config_set_venv(cfg, venv, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, venv) && strstr(err.message, other), "%s", err.message);
	cr_assert_eq(snapcell_config_set_python(cfg, NULL, &err), 0);
	cr_assert_eq(snapcell_config_set_venv(cfg, venv, &err), 0, "%s", err.message);
	cr_expect_eq(snapcell_config_set_python(cfg, newer, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, venv) && strstr(err.message, newer) &&
			  strstr(err.message, "3.12") && strstr(err.message, "3.13.0"),
		  "%s", err.message);
	cr_expect_eq(snapcell_config_set_python(cfg, other, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, venv) && strstr(err.message, other), "%s", err.message);
	snapcell_config_free(cfg);
	free(venv), free(base), free(other), free(newer), free(j312), free(j312b), free(j313);
	test_remove_tree(dir);
	free(dir);
}

Test(python, a_venv_whose_interpreter_changed_version_is_refused_at_resolve)
{
	char *dir = test_make_tree(), text[1200];
	char *j312 = test_python_answer("cpython", 3, 12, 1, false, "/bin/sh");
	char *j313 = test_python_answer("cpython", 3, 13, 0, false, "/bin/sh");
	char *base = test_fake_python(dir, "bin/python3", j312);
	snprintf(text, sizeof(text), "home = %s/bin\nversion = 3.12.1\n", dir);
	char *venv = make_venv(dir, "venv", text, 12);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_venv(cfg, venv, &err), 0, "%s", err.message);
	/* The interpreter in its home is replaced by a 3.13 (a new file: another inode). */
	cr_assert_eq(unlink(base), 0);
	free(test_fake_python(dir, "bin/python3", j313));
	cr_expect_eq(snapcell_config_python_info(cfg, &info, &err), SNAPCELL_E_INVAL);
	cr_expect(strstr(err.message, venv) && strstr(err.message, "3.13.0"), "%s", err.message);
	snapcell_config_free(cfg);
	free(venv), free(base), free(j312), free(j313);
	test_remove_tree(dir);
	free(dir);
}

Test(python, system_site_packages_are_debian_s_only_for_a_debian_python_venv)
{
	char *dir = test_make_tree(), text[1200];
	char *json = test_python_answer("cpython", 3, 12, 1, false, "/bin/sh");
	char *base = test_fake_python(dir, "bin/python3.12", json);
	snprintf(text, sizeof(text),
		 "home = %s/bin\ninclude-system-site-packages = true\nversion = 3.12.1\n", dir);
	char *venv = make_venv(dir, "venv", text, 12);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_venv(cfg, venv, &err), 0, "%s", err.message);
	const char *dirs[64], *site[64];
	size_t n;
	cr_assert_eq(sc__python_dirs(cfg, dirs, site, &n, &err), 0);
	cr_expect_eq(n, 1, "a pyenv-like venv got Debian's dist-packages");
	snapcell_config_free(cfg);
	free(venv), free(base), free(json);
	test_remove_tree(dir);
	free(dir);
}

/* Makes a venv with the interpreter at python (-m venv --without-pip), or skips. */
static char *real_venv(const char *dir, const char *python, const char *flags)
{
	char *venv, cmd[SNAPCELL_PYTHON_PATH_LEN + 700];
	cr_assert(asprintf(&venv, "%s/venv", dir) > 0);
	snprintf(cmd, sizeof(cmd), "'%s' -m venv --without-pip %s '%s' 2>/dev/null", python, flags,
		 venv);
	if (system(cmd) != 0)
		cr_skip_test("%s cannot make a venv", python);
	return venv;
}

Test(python, a_real_venv_runs_the_interpreter_it_was_made_from)
{
	const char *exe = some_python();
	if (!exe)
		cr_skip_test("no python3 on PATH and no /usr/bin/python3");
	char *dir = test_make_tree(), *venv = real_venv(dir, exe, "");
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_python_info info;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_venv(cfg, venv, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
	cr_expect_str_eq(info.executable, exe);
	cr_expect_str_eq(info.chosen_by, "the venv's interpreter");
	/* Its own bin/python, named as the interpreter, is the same file. */
	char bin[700];
	snprintf(bin, sizeof(bin), "%s/bin/python", venv);
	cr_expect_eq(snapcell_config_set_python(cfg, bin, &err), 0, "%s", err.message);
	/* Python 3.10 writes no `executable` to pyvenv.cfg: then `home` finds it. */
	char cfg_path[700], text[SNAPCELL_PYTHON_PATH_LEN + 100], home[SNAPCELL_PYTHON_PATH_LEN];
	snprintf(home, sizeof(home), "%s", exe);
	*strrchr(home, '/') = 0;
	snprintf(cfg_path, sizeof(cfg_path), "%s/pyvenv.cfg", venv);
	snprintf(text, sizeof(text),
		 "home = %s\ninclude-system-site-packages = false\n"
		 "version = %s\n",
		 home, info.version);
	FILE *f = fopen(cfg_path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
	cr_assert_eq(snapcell_config_set_python(cfg, NULL, &err), 0);
	cr_assert_eq(snapcell_config_set_venv(cfg, venv, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
	cr_expect_str_eq(info.executable, exe);
	snapcell_config_free(cfg);
	free(venv);
	test_remove_tree(dir);
	free(dir);
}

Test(python, a_debian_python_venv_with_system_site_packages_gets_dist_packages)
{
	if (access("/usr/bin/python3", X_OK) != 0 || access("/usr/lib/python3/dist-packages", F_OK))
		cr_skip_test("no Debian /usr/bin/python3 with dist-packages");
	char *dir = test_make_tree();
	char *venv = real_venv(dir, "/usr/bin/python3", "--system-site-packages");
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_venv(cfg, venv, &err), 0, "%s", err.message);
	const char *dirs[64], *site[64];
	size_t n;
	cr_assert_eq(sc__python_dirs(cfg, dirs, site, &n, &err), 0);
	cr_assert_eq(n, 2);
	cr_expect_str_eq(dirs[1], "/usr/lib/python3/dist-packages");
	snapcell_config_free(cfg);
	free(venv);
	test_remove_tree(dir);
	free(dir);
}

Test(python, venvs_of_every_cpython_here_are_accepted)
{
	/* pyenv's builds where the machine has them (3.10 to 3.13 on the project's). */
	glob_t g;
	const char *root = getenv("PYENV_ROOT");
	char pattern[600];
	snprintf(pattern, sizeof(pattern), "%s/versions/3.1[0-9]*/bin/python3",
		 root && *root ? root : "/root/.pyenv");
	if (glob(pattern, 0, NULL, &g) != 0)
		cr_skip_test("no pyenv CPython 3.10 or newer at %s", pattern);
	for (size_t i = 0; i < g.gl_pathc; i++) {
		char *dir = test_make_tree(), *venv = real_venv(dir, g.gl_pathv[i], "");
		struct snapcell_config *cfg = test_config_new();
		struct snapcell_python_info info;
		struct snapcell_error err = {0};
		cr_expect_eq(snapcell_config_set_venv(cfg, venv, &err), 0, "%s: %s", g.gl_pathv[i],
			     err.message);
		cr_expect_eq(snapcell_config_python_info(cfg, &info, &err), 0, "%s", err.message);
		char *real = realpath(g.gl_pathv[i], NULL);
		cr_expect_str_eq(info.executable, real);
		free(real);
		snapcell_config_free(cfg);
		free(venv);
		test_remove_tree(dir);
		free(dir);
	}
	globfree(&g);
}
