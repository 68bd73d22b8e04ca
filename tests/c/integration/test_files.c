/* Files through cells: /input staging from a workspace and mounts (order, links left out),
 * and /output collection against hostile trees. */
#define _GNU_SOURCE
#include "helpers.h"

#include <fcntl.h>
#include <sys/stat.h>

Test(files, workspace_and_mounts_staged_in_order_read_only)
{
	char *ws = test_make_tree(), *other = test_make_tree();
	test_write_file(ws, "notes.txt", "workspace notes");
	test_write_file(ws, "data/a.csv", "from workspace");
	test_write_file(other, "a.csv", "from mount");
	test_write_file(other, "single.txt", "one file");
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	char mnt[600];
	snprintf(mnt, sizeof(mnt), "%s/a.csv", other);
	cr_assert_eq(snapcell_config_set_workspace(cfg, ws, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_config_add_mount(cfg, mnt, "data/a.csv", &err), 0, "%s", err.message);
	snprintf(mnt, sizeof(mnt), "%s/single.txt", other);
	cr_assert_eq(snapcell_config_add_mount(cfg, mnt, "/input/extra/one.txt", &err), 0);
	cr_assert_eq(snapcell_config_add_mount(cfg, other, "dir", &err), 0);
	cr_assert_eq(snapcell_config_add_mount(cfg, ws, "dir", &err), 0, "re-adding replaces");
	cr_expect_eq(snapcell_config_mount_count(cfg), 3);
	const char *host, *path;
	cr_assert_eq(snapcell_config_mount_info(cfg, 2, &host, &path, NULL), 0);
	cr_expect_str_eq(path, "/input/dir");
	cr_expect_str_eq(host, ws);
	cr_expect_eq(snapcell_config_add_mount(cfg, "/nonexistent/x", "x", &err), -ENOENT);
	cr_expect_eq(snapcell_config_add_mount(cfg, ws, "../x", &err), SNAPCELL_E_INVAL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res = test_run(
		sb,
		"import os\n"
		"print(open('/input/notes.txt').read(), open('/input/data/a.csv').read(),\n"
		"      open('/input/extra/one.txt').read(), sorted(os.listdir('/input/dir')))\n"
		"try:\n    open('/input/new', 'w')\nexcept OSError as e:\n    print(e.errno)\n");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf,
			 "workspace notes from mount one file ['data', 'notes.txt']\n30\n");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	test_remove_tree(ws), test_remove_tree(other);
	free(ws), free(other);
}

/* It reads every file of the root: the interpreter's whole library directory (a pyenv
 * prefix's lib/ with its test suite and libpython) takes a while on a loaded machine. */
Test(files, links_in_inputs_never_leak, .timeout = 90)
{
	char *ws = test_make_tree(), *secret = test_make_tree();
	test_write_file(secret, "secret.txt", "TOP-SECRET-CONTENT");
	test_write_file(ws, "ok.txt", "fine");
	test_write_file(ws, "a/b/c/keep.txt", "deep");
	char target[600], link[600];
	snprintf(target, sizeof(target), "%s/secret.txt", secret);
	snprintf(link, sizeof(link), "%s/file-link", ws);
	cr_assert_eq(symlink(target, link), 0);
	snprintf(link, sizeof(link), "%s/dir-link", ws);
	cr_assert_eq(symlink(secret, link), 0);
	snprintf(link, sizeof(link), "%s/a/b/c/deep-link", ws);
	cr_assert_eq(symlink(target, link), 0);
	snprintf(link, sizeof(link), "%s/fifo", ws);
	cr_assert_eq(mkfifo(link, 0644), 0);
	/* A symlinked workspace root is followed. */
	char root_link[600];
	snprintf(root_link, sizeof(root_link), "%s-root", ws);
	cr_assert_eq(symlink(ws, root_link), 0);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_workspace(cfg, root_link, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_config_add_mount(cfg, ws, "mounted", &err), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	expect_output(sb,
		      "import os\n"
		      "found = []\n"
		      "for root, dirs, files in os.walk('/'):\n"
		      "    if root.startswith('/dev'):\n        continue\n"
		      "    for f in files + dirs:\n"
		      "        p = os.path.join(root, f)\n"
		      "        if root.startswith('/input') and os.path.islink(p):\n"
		      "            found.append('link ' + p)\n"
		      "        try:\n"
		      "            if 'TOP-SECRET' in open(p, errors='ignore').read(1 << 20):\n"
		      "                found.append('secret ' + p)\n"
		      "        except OSError:\n            pass\n"
		      "print(sorted(os.listdir('/input')), sorted(os.listdir('/input/a/b/c')))\n"
		      "print(found)\n",
		      "['a', 'mounted', 'ok.txt'] ['keep.txt']\n[]\n");
	snapcell_sandbox_free(sb);
	unlink(root_link);
	test_remove_tree(ws), test_remove_tree(secret);
	free(ws), free(secret);
}

Test(files, reject_links_refuses_a_link_at_any_depth_and_names_it)
{
	char *ws = test_make_tree();
	test_write_file(ws, "ok.txt", "fine");
	test_write_file(ws, "a/b/keep.txt", "deep");
	char link[600];
	snprintf(link, sizeof(link), "%s/a/b/deep-link", ws);
	cr_assert_eq(symlink("/etc/passwd", link), 0);
	struct snapcell_config *cfg = test_config_new();
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_config_set_workspace(cfg, ws, &err), 0, "%s", err.message);
	cr_assert_eq(snapcell_config_set_reject_links(cfg, true, &err), 0);
	struct snapcell_sandbox *sb = NULL;
	cr_expect_eq(snapcell_sandbox_new(cfg, &sb, &err), SNAPCELL_E_INVAL);
	cr_expect_null(sb);
	cr_expect(strstr(err.message, "deep-link is a symbolic link"), "%s", err.message);
	/* Off again: the link is left out, the rest staged. */
	cr_assert_eq(snapcell_config_set_reject_links(cfg, false, &err), 0);
	sb = test_sandbox(cfg);
	expect_output(sb, "import os; print(sorted(os.listdir('/input/a/b')))", "['keep.txt']\n");
	snapcell_sandbox_free(sb);
	snapcell_config_free(cfg);
	test_remove_tree(ws);
	free(ws);
}

Test(files, artifacts_are_collected_sorted_with_media_types)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res =
		test_run(sb, "import os\nos.makedirs('/output/sub')\n"
			     "open('/output/report.csv', 'w').write('a,b\\n1,2\\n')\n"
			     "open('/output/sub/data.json', 'w').write('{}')\n"
			     "open('/output/odd\\nname\\x1b', 'w').write('x')\n"
			     "open('/output/blob', 'wb').write(bytes(range(256)))\n");
	expect_ok(res);
	cr_assert_eq(res->n_artifacts, 4);
	cr_expect_str_eq(res->artifacts[0].path, "blob");
	cr_expect_str_eq(res->artifacts[0].media_type, "application/octet-stream");
	cr_expect_eq(res->artifacts[0].size, 256);
	cr_expect_eq(res->artifacts[0].data[255], 255);
	cr_expect_str_eq(res->artifacts[1].path, "odd\nname\x1b");
	cr_expect_str_eq(res->artifacts[2].path, "report.csv");
	cr_expect_str_eq(res->artifacts[2].media_type, "text/csv");
	cr_expect_eq(memcmp(res->artifacts[2].data, "a,b\n1,2\n", 8), 0);
	cr_expect_str_eq(res->artifacts[3].path, "sub/data.json");
	cr_expect_str_eq(res->artifacts[3].media_type, "application/json");
	cr_expect_eq(res->n_skipped, 0);
	snapcell_result_free(res);
	/* A file from run 1 never appears in run 2. */
	res = test_run(sb, "import os\nprint(os.listdir('/output'))");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "[]\n");
	cr_expect_eq(res->n_artifacts, 0);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(files, planted_links_fifos_and_hard_links_are_skipped_and_reported)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res =
		test_run(sb, "import os\n"
			     "open('/output/real.txt', 'w').write('real')\n"
			     "os.symlink('/etc/passwd', '/output/passwd-link')\n"
			     "os.symlink('../../../../etc', '/output/dir-link')\n"
			     "os.link('/output/real.txt', '/output/hard')\n"
			     "os.mkfifo('/output/fifo')\n"
			     "try:\n    os.link('/tmp', '/output/x')\nexcept OSError as e:\n"
			     "    print('cross-mount link', e.errno)\n");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "cross-mount link 18\n"); /* EXDEV */
	cr_expect_eq(res->n_artifacts, 0, "real.txt has two names: skipped as a hard link");
	cr_assert_eq(res->n_skipped, 5);
	const char *want[][2] = {{"dir-link", "symbolic link"},
				 {"fifo", "fifo"},
				 {"hard", "hard link"},
				 {"passwd-link", "symbolic link"},
				 {"real.txt", "hard link"}};
	for (int i = 0; i < 5; i++) {
		cr_expect_str_eq(res->skipped[i].path, want[i][0]);
		cr_expect_str_eq(res->skipped[i].reason, want[i][1]);
	}
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(files, hostile_output_trees_hit_caps_and_the_host_stays_healthy, .timeout = 120)
{
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_FILE_BYTES, 3ull << 30, NULL);
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_TMP_BYTES, 256ull << 20, NULL);
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 100000, NULL);
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_CPU_MS, 100000, NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res = test_run(
		sb, "import os\n"
		    "os.makedirs('/output/many')\n"
		    "for i in range(100000):\n"
		    "    os.close(os.open(f'/output/many/{i:06}', os.O_CREAT | os.O_WRONLY))\n"
		    "with open('/output/big', 'wb') as f:\n"
		    "    f.truncate(2 << 30)\n"
		    "os.mkfifo('/output/pipe')\n"
		    "p = '/output/deep'\n"
		    "os.mkdir(p)\n"
		    "fd = os.open(p, os.O_RDONLY)\n"
		    "for i in range(1000):\n"
		    "    os.mkdir('d', dir_fd=fd)\n"
		    "    nfd = os.open('d', os.O_RDONLY, dir_fd=fd)\n"
		    "    os.close(fd)\n"
		    "    fd = nfd\n"
		    "print('planted')\n");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "planted\n");
	cr_expect_eq(res->n_artifacts, 1000);
	cr_expect(res->output_limits_hit & SNAPCELL_OUTPUT_HIT_FILES);
	cr_expect(res->output_limits_hit & SNAPCELL_OUTPUT_HIT_FILE_BYTES);
	cr_expect(res->output_limits_hit & SNAPCELL_OUTPUT_HIT_DEPTH);
	cr_expect_gt(res->n_skipped, 99000);
	cr_expect_lt(res->n_skipped_listed, 10, "a flood is listed once, counted in full");
	bool saw_fifo = false, saw_big = false;
	for (size_t i = 0; i < res->n_skipped_listed; i++) {
		saw_fifo |= !strcmp(res->skipped[i].path, "pipe");
		saw_big |= !strcmp(res->skipped[i].path, "big") &&
			   !strcmp(res->skipped[i].reason, "over the per-file size cap");
	}
	cr_expect(saw_big, "the 2 GB file is reported");
	cr_expect(saw_fifo, "the fifo is reported");
	snapcell_result_free(res);
	res = test_run(sb, "print(1)");
	expect_ok(res);
	cr_expect_eq(res->n_artifacts, 0);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(files, session_output_is_collected_and_emptied_per_run)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_session_run(s, "open('/output/a.txt', 'w').write('1')", SIZE_MAX,
					  NULL, &res, &err),
		     0);
	cr_assert_eq(res->n_artifacts, 1);
	cr_expect_str_eq(res->artifacts[0].path, "a.txt");
	snapcell_result_free(res);
	cr_assert_eq(snapcell_session_run(s, "import os\nprint(os.listdir('/output'))", SIZE_MAX,
					  NULL, &res, &err),
		     0);
	cr_expect_str_eq(res->stdout_buf, "[]\n");
	cr_expect_eq(res->n_artifacts, 0);
	snapcell_result_free(res);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

Test(files, output_is_capped_in_size_so_code_cannot_fill_the_host)
{
	struct snapcell_config *cfg = test_config_new();
	snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_OUTPUT_TOTAL_BYTES, 8u << 20, NULL);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res =
		test_run(sb, "written = 0\n"
			     "try:\n"
			     "    for i in range(300):\n"
			     "        open(f'/output/f{i}', 'wb').write(b'x' * (1 << 20))\n"
			     "        written += 1\n"
			     "except OSError as e:\n"
			     "    print(written, e.errno)\n");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "9 28\n", "ENOSPC after the cap and 1 MiB of slack");
	cr_expect(res->output_limits_hit & SNAPCELL_OUTPUT_HIT_TOTAL_BYTES);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(files, a_session_output_thousands_deep_is_emptied_with_few_descriptors, .timeout = 60)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	struct snapcell_result *res = NULL;
	cr_assert_eq(snapcell_session_run(
			     s,
			     "import os\n"
			     "fd = os.open('/output', os.O_RDONLY)\n"
			     "for i in range(5000):\n"
			     "    os.mkdir('d', dir_fd=fd)\n"
			     "    nfd = os.open('d', os.O_RDONLY, dir_fd=fd)\n"
			     "    os.close(fd)\n"
			     "    fd = nfd\n"
			     "os.close(os.open('leaf', os.O_CREAT | os.O_WRONLY, dir_fd=fd))\n",
			     SIZE_MAX, NULL, &res, &err),
		     0, "%s", err.message);
	expect_ok(res);
	cr_expect(res->output_limits_hit & SNAPCELL_OUTPUT_HIT_DEPTH);
	snapcell_result_free(res);
	cr_assert_eq(snapcell_session_run(s, "import os\nprint(os.listdir('/output'))", SIZE_MAX,
					  NULL, &res, &err),
		     0);
	cr_expect_str_eq(res->stdout_buf, "[]\n", "the 5,000-deep tree is gone");
	snapcell_result_free(res);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}

Test(files, a_wide_session_output_is_emptied_in_linear_time, .timeout = 60)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_session *s = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_session_new(sb, &s, &err), 0, "%s", err.message);
	struct snapcell_result *res = NULL;
	cr_assert_eq(
		snapcell_session_run(s,
				     "import os\nos.mkdir('/output/w')\n"
				     "for i in range(20000):\n    os.mkdir(f'/output/w/{i}')\n",
				     SIZE_MAX, NULL, &res, &err),
		0, "%s", err.message);
	expect_ok(res);
	snapcell_result_free(res);
	cr_assert_eq(snapcell_session_run(s, "import os\nprint(os.listdir('/output'))", SIZE_MAX,
					  NULL, &res, &err),
		     0, "%s", err.message);
	cr_expect_str_eq(res->stdout_buf, "[]\n");
	snapcell_result_free(res);
	snapcell_session_free(s);
	snapcell_sandbox_free(sb);
}
