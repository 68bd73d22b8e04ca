/* The rlimits level's count of unlinked files a cell's processes hold (src/isolate/held.c), on a
 * process tree made here: the integration suite (test_rlimits.c) runs it against cells. */
#define _GNU_SOURCE
#include "helpers.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "core/core.h"

#define MAP_FILE_BYTES (8u << 20) /* what a file held only by a mapping counts */

/* A file of len bytes at dir/name, open for reading and writing; its allocated bytes in
 * *blocks. */
static int make_file(const char *dir, const char *name, size_t len, uint64_t *blocks)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	char *buf = malloc(len);
	if (fd < 0 || !buf)
		_exit(2);
	memset(buf, 'x', len);
	if (write(fd, buf, len) != (ssize_t)len || fsync(fd) < 0)
		_exit(2);
	free(buf);
	struct stat st;
	fstat(fd, &st);
	*blocks = (uint64_t)st.st_blocks * 512;
	return fd;
}

static void unlink_in(const char *dir, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	unlink(path);
}

/* The child's tree: it holds an unlinked file open, a linked one open (not counted: the walk
 * of names sees it), and one only mapped; its own child holds another unlinked file. It
 * writes the bytes the count must find to ready, then waits to be killed. */
static void hold(const char *dir, int ready)
{
	uint64_t open_blocks, linked_blocks, mapped_blocks, child_blocks;
	make_file(dir, "open", 1 << 20, &open_blocks);
	unlink_in(dir, "open");
	make_file(dir, "linked", 1 << 20, &linked_blocks);
	int fd = make_file(dir, "mapped", 256 << 10, &mapped_blocks);
	if (mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED)
		_exit(2);
	close(fd);
	unlink_in(dir, "mapped");
	int p[2];
	if (pipe(p) < 0)
		_exit(2);
	if (fork() == 0) {
		make_file(dir, "child", 512 << 10, &child_blocks);
		unlink_in(dir, "child");
		if (write(p[1], &child_blocks, sizeof(child_blocks)) < 0)
			_exit(2);
		pause();
		_exit(0);
	}
	if (read(p[0], &child_blocks, sizeof(child_blocks)) != sizeof(child_blocks))
		_exit(2);
	uint64_t want = open_blocks + MAP_FILE_BYTES + child_blocks;
	if (write(ready, &want, sizeof(want)) < 0)
		_exit(2);
	pause();
	_exit(0);
}

Test(held, unlinked_files_of_a_process_tree_count_once_each)
{
	char *dir = test_make_tree();
	int ready[2];
	cr_assert_eq(pipe(ready), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		setpgid(0, 0); /* so the test can kill the whole tree */
		hold(dir, ready[1]);
	}
	uint64_t want = 0;
	cr_assert_eq(read(ready[0], &want, sizeof(want)), (ssize_t)sizeof(want));
	struct stat st;
	cr_assert_eq(stat(dir, &st), 0);
	cr_expect_eq(sc__held_bytes(pid, st.st_dev, MAP_FILE_BYTES), want);
	/* Another filesystem's files are not the work directory's. */
	cr_expect_eq(sc__held_bytes(pid, st.st_dev + 1, MAP_FILE_BYTES), 0);
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	test_remove_tree(dir);
	free(dir);
}

/* A process with 60 MB of /proc/PID/maps text: one page of a file 60 directories of 250
 * characters down (a 15 KB path), mapped 4,000 times apart. */
static void map_deep(const char *dir, int ready)
{
	char name[251];
	if (chdir(dir) < 0)
		_exit(2);
	for (int i = 0; i < 60; i++) {
		memset(name, 'a' + i % 26, 250);
		name[250] = 0;
		if (mkdir(name, 0700) < 0 || chdir(name) < 0)
			_exit(2);
	}
	uint64_t blocks;
	int fd = make_file(".", "f", 8192, &blocks);
	enum { MAPS = 4000 };
	char *base = mmap(NULL, (size_t)MAPS * 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		_exit(2);
	for (size_t i = 0; i < MAPS; i++)
		if (mmap(base + i * 8192, 4096, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) ==
		    MAP_FAILED)
			_exit(2);
	if (write(ready, "x", 1) < 0)
		_exit(2);
	pause();
	_exit(0);
}

/* Reading /proc/PID/maps costs what the code chose, and the watch waits ten times a
 * measurement before the next (at most 20 ms more): past 8 MiB of it in one measurement, the
 * count is over. */
Test(held, a_bloated_maps_text_counts_as_over)
{
	char *dir = test_make_tree();
	int ready[2];
	cr_assert_eq(pipe(ready), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		map_deep(dir, ready[1]);
	char c;
	cr_assert_eq(read(ready[0], &c, 1), 1);
	struct stat st;
	cr_assert_eq(stat(dir, &st), 0);
	cr_expect_eq(sc__held_bytes(pid, st.st_dev, MAP_FILE_BYTES), UINT64_MAX);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	test_remove_tree(dir);
	free(dir);
}

static void *sleep_forever(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* A child holding an unlinked 1 MiB file (its blocks to ready) and n_fds descriptors of a
 * named one, with n_threads threads sharing its table and n_procs - 1 forked copies of it. */
static void spread(const char *dir, int ready, int n_fds, int n_threads, int n_procs)
{
	uint64_t blocks, linked;
	make_file(dir, "open", 1 << 20, &blocks);
	unlink_in(dir, "open");
	int fd = make_file(dir, "named", 4096, &linked);
	for (int i = 0; i < n_fds; i++)
		if (dup(fd) < 0)
			_exit(2);
	for (int i = 1; i < n_procs; i++)
		if (fork() == 0) {
			pause();
			_exit(0);
		}
	for (int i = 0; i < n_threads; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, sleep_forever, NULL) != 0)
			_exit(2);
	}
	if (write(ready, &blocks, sizeof(blocks)) < 0)
		_exit(2);
	pause();
	_exit(0);
}

static uint64_t held_of_spread(int n_fds, int n_threads, int n_procs, uint64_t *want)
{
	char *dir = test_make_tree();
	int ready[2];
	cr_assert_eq(pipe(ready), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		setpgid(0, 0);
		spread(dir, ready[1], n_fds, n_threads, n_procs);
	}
	cr_assert_eq(read(ready[0], want, sizeof(*want)), (ssize_t)sizeof(*want));
	usleep(100000); /* the forked copies are made before the threads */
	struct stat st;
	cr_assert_eq(stat(dir, &st), 0);
	uint64_t held = sc__held_bytes(pid, st.st_dev, MAP_FILE_BYTES);
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(ready[0]);
	close(ready[1]);
	test_remove_tree(dir);
	free(dir);
	return held;
}

/* Each descriptor read costs a stat, and the watch waits after a measurement in proportion to
 * its time: past 4,096 descriptors read in one measurement the count is over (18 processes of
 * 250 each: 4,500). A table shared by threads is read once: 40 threads sharing 200 descriptors
 * are 200 reads, not 8,200, and not over. */
Test(held, too_many_descriptors_count_as_over_but_shared_tables_once)
{
	uint64_t want;
	cr_expect_eq(held_of_spread(250, 0, 18, &want), UINT64_MAX);
	cr_expect_eq(held_of_spread(200, 40, 1, &want), want);
}
