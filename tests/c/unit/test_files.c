/* Files without a sandbox: mount path normalisation, the tree signature, and /output
 * collection on a tree made here (the integration tests collect what cells leave). */
#define _GNU_SOURCE
#include "helpers.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "stage/stage.h"
#include "util/util.h"

Test(files, mount_paths_normalise_like_the_reference)
{
	static const struct {
		const char *in, *out;
	} ok[] = {
		{"data", "/input/data"},
		{"/input/data", "/input/data"},
		{"input/a/b.csv", "/input/a/b.csv"},
		{"  a\\b\\c.txt ", "/input/a/b/c.txt"},
		{"./a//./b", "/input/a/b"},
		{"input/input/x", "/input/input/x"},
		{"données/été.csv", "/input/données/été.csv"},
	};
	char out[256];
	struct snapcell_error err = {0};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cr_expect_eq(snapcell_normalize_mount_path(ok[i].in, out, sizeof(out), &err), 0,
			     "%s: %s", ok[i].in, err.message);
		cr_expect_str_eq(out, ok[i].out);
	}
	static const char *const bad[] = {"../etc", "a/../../b", "", "  ",
					  "/input", "input/.",	 "."};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(snapcell_normalize_mount_path(bad[i], out, sizeof(out), &err),
			     SNAPCELL_E_INVAL, "'%s' accepted", bad[i]);
		cr_expect_gt(strlen(err.message), 10);
	}
}

/* Found by fuzz/cli_fuzz.c (corpus/cli/found_mount_path_not_utf8): a mount path that was not
 * UTF-8 reached the tool description, which JSON (MCP's tools/list) cannot carry; a newline
 * would have forged lines of it. */
Test(files, mount_paths_are_one_line_of_utf8_text)
{
	static const char *const bad[] = {
		"\x94\x01s",	    /* what the fuzzer found */
		"a\xc3",	    /* cut short */
		"\xc0\xaf",	    /* overlong '/' */
		"\xed\xa0\x80",	    /* a surrogate */
		"\xf4\x90\x80\x80", /* past U+10FFFF */
		"a\nNetwork: full access",
		"tab\there",
		"del\x7f",
	};
	char out[256];
	struct snapcell_error err = {0};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(snapcell_normalize_mount_path(bad[i], out, sizeof(out), &err),
			     SNAPCELL_E_INVAL, "case %zu accepted", i);
		cr_expect(strstr(err.message, "UTF-8") || strstr(err.message, "control"), "%s",
			  err.message);
	}
	cr_expect(sc__utf8_valid("\xf4\x8f\xbf\xbf \xe2\x82\xac \xc2\xa9", 11));
	cr_expect_not(sc__utf8_valid("\xf5\x80\x80\x80", 4));
}

Test(files, signature_changes_with_content_not_with_links)
{
	char *ws = test_make_tree();
	test_write_file(ws, "a.txt", "one");
	char s1[SNAPCELL_SIGNATURE_LEN], s2[SNAPCELL_SIGNATURE_LEN], s3[SNAPCELL_SIGNATURE_LEN];
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_tree_signature(ws, s1, &err), 0, "%s", err.message);
	cr_expect_eq(strlen(s1), 32);
	char link[600];
	snprintf(link, sizeof(link), "%s/link", ws);
	cr_assert_eq(symlink("/etc/passwd", link), 0);
	cr_assert_eq(snapcell_tree_signature(ws, s2, &err), 0);
	cr_expect_str_eq(s1, s2, "links are excluded");
	test_write_file(ws, "a.txt", "two!");
	cr_assert_eq(snapcell_tree_signature(ws, s3, &err), 0);
	cr_expect_str_neq(s1, s3, "a changed file changes the signature");
	cr_expect_eq(snapcell_tree_signature("/nonexistent", s3, &err), -ENOENT);
	test_remove_tree(ws);
	free(ws);
}

/* /output collection on a tree made here, no sandbox: what a cell could leave. */
static void put(int dfd, const char *name, const char *text)
{
	int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	cr_assert(fd >= 0, "create %s: %s", name, strerror(errno));
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

Test(files, collect_on_a_prepared_tree_takes_files_sorted_and_reports_the_rest)
{
	char dir[] = "/tmp/snapcell-collect-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert(dfd >= 0);
	cr_assert_eq(mkdirat(dfd, "sub", 0755), 0);
	put(dfd, "b.csv", "x,y\n");
	put(dfd, "sub/a.json", "{}");
	put(dfd, "big.txt", "0123456789");
	cr_assert_eq(symlinkat("/etc/passwd", dfd, "link"), 0);
	cr_assert_eq(mkfifoat(dfd, "fifo", 0644), 0);
	cr_assert_eq(linkat(dfd, "b.csv", dfd, "b-again.csv", 0), 0);
	put(dfd, "c.txt", "c");
	struct sc_collect_caps caps = {.files = 100,
				       .file_bytes = 5,
				       .total_bytes = 1 << 20,
				       .depth = 8,
				       .path_bytes = 256};
	struct snapcell_result res = {0};
	cr_assert_eq(sc__collect(dfd, &caps, &res), 0);
	cr_assert_eq(res.n_artifacts, 2, "c.txt and sub/a.json");
	cr_expect_str_eq(res.artifacts[0].path, "c.txt");
	cr_expect_str_eq(res.artifacts[1].path, "sub/a.json");
	cr_expect_str_eq(res.artifacts[1].media_type, "application/json");
	cr_expect_eq(res.artifacts[1].size, 2);
	cr_expect(res.output_limits_hit & SNAPCELL_OUTPUT_HIT_FILE_BYTES,
		  "big.txt is over 5 bytes");
	const char *want[][2] = {{"b-again.csv", "hard link"},
				 {"b.csv", "hard link"},
				 {"big.txt", NULL},
				 {"fifo", "fifo"},
				 {"link", "symbolic link"}};
	cr_assert_eq(res.n_skipped, 5);
	for (int i = 0; i < 5; i++) {
		cr_expect_str_eq(res.skipped[i].path, want[i][0]);
		if (want[i][1])
			cr_expect_str_eq(res.skipped[i].reason, want[i][1]);
	}
	sc__artifacts_free(&res);
	cr_expect_eq(sc__remove_tree(AT_FDCWD, dir, 0), 0);
	close(dfd);
}

/* /proc, /sys and cgroup files are read whole with one read: a cut to the buffer, always a
 * string, and the open's errno for a missing file. */
Test(files, read_file_at_reads_a_small_file_as_a_string)
{
	char *dir = test_make_tree();
	test_write_file(dir, "n", "12345\n");
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(dfd, 0);
	char buf[16];
	cr_expect_eq(sc__read_file_at(dfd, "n", buf, sizeof(buf)), 6);
	cr_expect_str_eq(buf, "12345\n");
	char small[4];
	cr_expect_eq(sc__read_file_at(dfd, "n", small, sizeof(small)), 3);
	cr_expect_str_eq(small, "123");
	memset(buf, 'x', sizeof(buf));
	cr_expect_eq(sc__read_file_at(dfd, "absent", buf, sizeof(buf)), -ENOENT);
	cr_expect_str_eq(buf, "");
	cr_expect_gt(sc__read_file_at(AT_FDCWD, "/proc/self/stat", buf, sizeof(buf)), 0);
	cr_expect_eq(strlen(buf), sizeof(buf) - 1);
	close(dfd);
	test_remove_tree(dir);
	free(dir);
}

/* A writer still alive while a tree is removed (a dead cell's leftover process at level
 * rlimits, where every cell's directories share the work directory's filesystem) moves the
 * directory the walk is emptying out of the tree, up beside it. Climbing by ".." from there
 * used to land outside the tree and go on removing there, under the names listed for the
 * levels above: here the moved directory itself and a sibling of the tree. */
struct mover {
	char from[256], to[256], probe[256];
};

static void *move_while_emptied(void *arg)
{
	struct mover *m = arg;
	struct stat st;
	uint64_t deadline = test_now_ms() + 20000;
	/* The directory's files are links to the probe: until the walk starts unlinking them. */
	while (stat(m->probe, &st) == 0 && st.st_nlink > 40000 && test_now_ms() < deadline)
		;
	cr_expect_eq(rename(m->from, m->to), 0, "move %s: %s", m->from, strerror(errno));
	return NULL;
}

Test(files, remove_tree_stays_in_a_tree_rearranged_under_it, .timeout = 60)
{
	char *root = test_make_tree();
	char path[512];
	struct mover m;
	/* root/tree/a/b full of links, root/tree/a/v made after b; root/v the victim. */
	snprintf(path, sizeof(path), "%s/tree", root);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/tree/a", root);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(m.from, sizeof(m.from), "%s/tree/a/b", root);
	snprintf(m.to, sizeof(m.to), "%s/b", root);
	cr_assert_eq(mkdir(m.from, 0700), 0);
	snprintf(path, sizeof(path), "%s/tree/a/v", root);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/v", root);
	cr_assert_eq(mkdir(path, 0700), 0);
	test_write_file(path, "secret", "host data\n");
	test_write_file(root, "probe", "");
	snprintf(m.probe, sizeof(m.probe), "%s/probe", root);
	for (int i = 0; i < 40000; i++) {
		snprintf(path, sizeof(path), "%s/f%d", m.from, i);
		cr_assert_eq(link(m.probe, path), 0, "%s", strerror(errno));
	}
	struct stat st;
	pthread_t t;
	cr_assert_eq(pthread_create(&t, NULL, move_while_emptied, &m), 0);
	int rc = sc__remove_tree(AT_FDCWD, strcat(strcpy(path, root), "/tree"), 0);
	pthread_join(t, NULL);
	cr_expect_eq(rc, -EXDEV, "the walk went on after its directory moved: %s", strerror(-rc));
	cr_expect_eq(stat(m.to, &st), 0, "the moved directory, outside the tree, was removed");
	snprintf(path, sizeof(path), "%s/v/secret", root);
	cr_expect_eq(stat(path, &st), 0, "a file outside the tree was removed");
	test_remove_tree(root);
	free(root);
}

/* A session's /tmp trees are moved by the host as the family's uid (src/core/session.c), and a
 * directory the code made read-only is given write permission for the move. Where the family
 * cannot be stopped (level rlimits below Landlock ABI 6) its code can swap that directory for
 * a symbolic link between the check and the chmod: a chmod that followed it changed the mode
 * of whatever file of that uid the link names, to one the code chose. */
static volatile int swapping = 1;

static void *swap_dir_and_link(void *arg)
{
	int from = *(int *)arg;
	while (swapping)
		syscall(SYS_renameat2, from, "x", from, "spare", 2 /* RENAME_EXCHANGE */);
	return NULL;
}

static int race_moves(const char *root)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/victim", root);
	if (close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) < 0 || chmod(path, 0600) < 0)
		return 2;
	snprintf(path, sizeof(path), "%s/from", root);
	int from = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/to", root);
	int to = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/victim", root);
	if (from < 0 || to < 0 || mkdirat(from, "x", 0557) < 0 ||
	    symlinkat(path, from, "spare") < 0)
		return 2;
	pthread_t t;
	pthread_create(&t, NULL, swap_dir_and_link, &from);
	struct stat st = {.st_mode = 0600};
	uint64_t deadline = test_now_ms() + 3000;
	while (test_now_ms() < deadline && (st.st_mode & 07777) == 0600) {
		sc__tree_move_entries(from, to);
		sc__tree_move_entries(to, from);
		if (stat(path, &st) < 0)
			return 2;
	}
	swapping = 0;
	pthread_join(t, NULL);
	return (st.st_mode & 07777) == 0600 ? 0 : 1;
}

Test(files, tree_moves_change_no_mode_through_a_link, .timeout = 30)
{
	char *root = test_make_tree();
	char path[512];
	/* As the family's uid, without the capabilities that skip the EACCES: root drops to
	 * 65534, where it has that uid. */
	bool as_root = geteuid() == 0;
	if (as_root && chown(root, 65534, 65534) < 0) {
		test_remove_tree(root);
		free(root);
		criterion_skip_test("root without uid 65534 (a user namespace mapping only root): "
				    "its capabilities would skip the read-only directory's EACCES");
	}
	snprintf(path, sizeof(path), "%s/from", root);
	cr_assert_eq(mkdir(path, 0700), 0);
	cr_assert_eq(!as_root || chown(path, 65534, 65534) == 0, 1);
	snprintf(path, sizeof(path), "%s/to", root);
	cr_assert_eq(mkdir(path, 0700), 0);
	cr_assert_eq(!as_root || chown(path, 65534, 65534) == 0, 1);
	pid_t pid = fork();
	if (pid == 0)
		_exit(as_root && (setresgid(65534, 65534, 65534) < 0 ||
				  setresuid(65534, 65534, 65534) < 0)
			      ? 2
			      : race_moves(root));
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "status %#x: 1 is the host file's mode changed through the link", status);
	test_remove_tree(root);
	free(root);
}

/* Staging that fails part way (a tree too deep, a link refused) leaves no descriptor open:
 * every step's descriptors close on its error path. */
Test(files, staging_that_fails_part_way_leaves_no_descriptor_open)
{
	char *src = test_make_tree(), *dst = test_make_tree();
	char rel[4096] = "", *p = rel;
	for (int i = 0; i < 70; i++) /* deeper than staging takes (64) */
		p += sprintf(p, "%sd", i ? "/" : "");
	test_write_file(src, rel, "x");
	test_write_file(src, "linked/plain", "y");
	char link[PATH_MAX];
	snprintf(link, sizeof(link), "%s/linked/deeper/to_plain", src);
	test_write_file(src, "linked/deeper/placeholder", "");
	cr_assert_eq(symlink("../plain", link), 0);
	int root = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(root, 0);
	int before = test_open_fds();
	struct snapcell_error err = {0};
	int rc = sc__stage_input(src, NULL, 0, false, root, &err);
	cr_expect_eq(rc, SNAPCELL_E_TOO_BIG, "%d: %s", rc, err.message);
	cr_expect(strstr(err.message, "deeper than"), "%s", err.message);
	cr_expect_eq(test_open_fds(), before, "descriptors left open after a failed staging");
	char mount_dir[PATH_MAX];
	snprintf(mount_dir, sizeof(mount_dir), "%s/linked", src);
	const struct sc_stage_mount m = {.host_path = mount_dir, .mount_path = "/input/m"};
	rc = sc__stage_input(NULL, &m, 1, true, root, &err);
	cr_expect_eq(rc, SNAPCELL_E_INVAL, "%d: %s", rc, err.message);
	cr_expect(strstr(err.message, "symbolic link"), "%s", err.message);
	cr_expect_eq(test_open_fds(), before, "descriptors left open after a refused link");
	close(root);
	test_remove_tree(src);
	test_remove_tree(dst);
	free(src);
	free(dst);
}
