/* Replays fuzz corpora without libFuzzer: calls LLVMFuzzerTestOneInput on every regular file in
 * the directories (or files) named on the command line, so the ordinary test run covers them. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_INPUT_BYTES (16u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Runs one file; 1 if it was an input, 0 if skipped (not a regular file), -1 on error. */
static int replay_file(int dirfd, const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_size > MAX_INPUT_BYTES) {
		close(fd);
		return 0;
	}
	/* One spare byte so an empty file still has a valid, non-NULL buffer. */
	size_t size = (size_t)st.st_size, got = 0;
	uint8_t *buf = malloc(size + 1);
	while (buf && got < size) {
		ssize_t n = read(fd, buf + got, size - got);
		if (n <= 0 && !(n < 0 && errno == EINTR))
			break;
		got += n > 0 ? (size_t)n : 0;
	}
	close(fd);
	if (!buf || got != size) {
		fprintf(stderr, "replay: %s: short read\n", name);
		free(buf);
		return -1;
	}
	LLVMFuzzerTestOneInput(buf, size);
	free(buf);
	return 1;
}

/* Replays path (a directory's files, or one file); adds to *count; 0 or -1. */
static int replay_path(const char *path, unsigned long *count)
{
	struct stat st;
	if (stat(path, &st) < 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		int rc = replay_file(AT_FDCWD, path);
		*count += rc > 0;
		return rc < 0 ? -1 : 0;
	}
	DIR *d = opendir(path);
	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	int status = 0;
	for (struct dirent *de; (de = readdir(d));) {
		if (de->d_name[0] == '.')
			continue;
		int rc = replay_file(dirfd(d), de->d_name);
		*count += rc > 0;
		if (rc < 0)
			status = -1;
	}
	closedir(d);
	return status;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR|FILE...\n", argv[0]);
		return 2;
	}
	unsigned long count = 0;
	int status = 0;
	for (int i = 1; i < argc; i++)
		if (replay_path(argv[i], &count) < 0)
			status = 1;
	printf("replayed %lu inputs\n", count);
	if (count == 0) {
		fputs("replay: no inputs found\n", stderr);
		return 1;
	}
	return status;
}
