/* What `snapcell run` does with a run's /output: lists it, and with --output DIR writes the
 * files there. Artifact paths come from the library's collector (no "/" or NUL inside a
 * name, never "." or ".."), and are still created one component at a time without following
 * links, so an existing link in DIR cannot redirect a write. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* Prints a name with control bytes escaped, so a hostile name cannot drive the terminal. */
static void print_name(FILE *f, const char *name)
{
	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '\\')
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
}

void cli_print_artifacts(const struct snapcell_result *res, FILE *f)
{
	for (size_t i = 0; i < res->n_artifacts; i++) {
		fputs("snapcell: artifact /output/", f);
		print_name(f, res->artifacts[i].path);
		fprintf(f, " (%s, %llu bytes)\n", res->artifacts[i].media_type,
			(unsigned long long)res->artifacts[i].size);
	}
	for (size_t i = 0; i < res->n_skipped_listed; i++) {
		fputs("snapcell: skipped /output/", f);
		print_name(f, res->skipped[i].path);
		fprintf(f, ": %s\n", res->skipped[i].reason);
	}
	if (res->n_skipped > res->n_skipped_listed)
		fprintf(f, "snapcell: ... and %zu more skipped\n",
			res->n_skipped - res->n_skipped_listed);
	if (res->output_limits_hit)
		fprintf(f, "snapcell: /output exceeded the collection caps; see --help for the "
			   "limits\n");
}

static int open_parent(int root, char *rel, char **leaf)
{
	int dfd = dup(root);
	char *slash;
	while (dfd >= 0 && (slash = strchr(rel, '/'))) {
		*slash = 0;
		if (mkdirat(dfd, rel, 0755) < 0 && errno != EEXIST) {
			close(dfd);
			return -1;
		}
		int sub = openat(dfd, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(dfd);
		dfd = sub;
		rel = slash + 1;
	}
	*leaf = rel;
	return dfd;
}

static int save_one(int root, const struct snapcell_artifact *a)
{
	char rel[PATH_MAX], *leaf;
	snprintf(rel, sizeof(rel), "%s", a->path);
	int dfd SC_AUTO_CLOSE = open_parent(root, rel, &leaf);
	int fd SC_AUTO_CLOSE =
		dfd < 0 ? -1
			: openat(dfd, leaf, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
				 0644);
	int rc = fd < 0 ? -1 : 0;
	for (uint64_t off = 0; rc == 0 && off < a->size;) {
		ssize_t n = write(fd, a->data + off, a->size - off);
		if (n < 0 && errno != EINTR)
			rc = -1;
		else if (n > 0)
			off += (uint64_t)n;
	}
	return rc; /* closing fd and dfd keeps errno for the caller's message */
}

int cli_save_artifacts(const struct snapcell_result *res, const char *dir)
{
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "snapcell: --output %s: %s\n", dir, strerror(errno));
		return -1;
	}
	int root SC_AUTO_CLOSE = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		fprintf(stderr, "snapcell: --output %s: %s\n", dir, strerror(errno));
		return -1;
	}
	int rc = 0;
	for (size_t i = 0; i < res->n_artifacts; i++) {
		if (save_one(root, &res->artifacts[i]) == 0)
			continue;
		fprintf(stderr, "snapcell: --output: cannot write %s/", dir);
		print_name(stderr, res->artifacts[i].path);
		fprintf(stderr, ": %s\n", strerror(errno));
		rc = -1;
	}
	return rc;
}
