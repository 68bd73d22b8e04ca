/* Collecting /output: the code's files are hostile input to the host (security-notes §2.11).
 * Every step opens relative to a directory descriptor with O_NOFOLLOW, classifies with fstat
 * on what was opened, reads at most the cap (never trusting st_size), and bounds the count,
 * the depth, the path length and the total. Links, FIFOs, sockets, devices and files with
 * more than one name are skipped and reported, never followed. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "stage.h"
#include "util/buf.h"
#include "util/cleanup.h"
#include "util/util.h"

#define MAX_SKIPPED_LISTED 100
/* The first read's size, and the least each later one asks room for. */
#define READ_CHUNK 65536

struct walk {
	const struct sc_collect_caps *caps;
	struct snapcell_result *res;
	size_t cap_artifacts;
	uint64_t total;
	uint64_t visited;
	bool stopped; /* a walk bound was hit: nothing more is visited */
};

static void skip(struct walk *w, const char *path, const char *reason)
{
	struct snapcell_result *r = w->res;
	r->n_skipped++;
	if (r->n_skipped_listed == MAX_SKIPPED_LISTED)
		return;
	if (!r->skipped && !(r->skipped = calloc(MAX_SKIPPED_LISTED, sizeof(*r->skipped))))
		return;
	char *copy = strdup(path);
	if (copy)
		r->skipped[r->n_skipped_listed++] = (struct snapcell_skipped_output){copy, reason};
}

static const char *kind(mode_t mode)
{
	return S_ISLNK(mode)			? "symbolic link"
	       : S_ISFIFO(mode)			? "fifo"
	       : S_ISSOCK(mode)			? "socket"
	       : S_ISCHR(mode) || S_ISBLK(mode) ? "device"
						: "not a regular file";
}

/* Reads at most cap + 1 bytes, so an over-cap file is detected whatever st_size says. NULL
 * when memory runs out (a file cut short must not pass as the whole file). */
static uint8_t *read_capped(int fd, uint64_t cap, uint64_t *len)
{
	struct sc_buf b;
	sc__buf_init(&b, (size_t)cap + 1);
	ssize_t room;
	char *at;
	while ((room = sc__buf_space(&b, READ_CHUNK, &at)) > 0) {
		ssize_t n = read(fd, at, (size_t)room);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		sc__buf_commit(&b, (size_t)n);
	}
	if (room < 0) {
		sc__buf_free(&b);
		return NULL;
	}
	size_t got;
	uint8_t *data = (uint8_t *)sc__buf_take(&b, &got);
	*len = got;
	return data;
}

static void add_file(struct walk *w, int fd, const char *path)
{
	const struct sc_collect_caps *c = w->caps;
	struct snapcell_result *r = w->res;
	if (r->n_artifacts == c->files) {
		/* Listed once, counted always: a flood must not crowd the list. */
		if (r->output_limits_hit & SNAPCELL_OUTPUT_HIT_FILES) {
			r->n_skipped++;
			return;
		}
		r->output_limits_hit |= SNAPCELL_OUTPUT_HIT_FILES;
		return skip(w, path, "over the file-count cap (and every later file)");
	}
	uint64_t room = c->total_bytes - w->total;
	uint64_t cap = c->file_bytes < room ? c->file_bytes : room;
	uint64_t len;
	uint8_t *data = read_capped(fd, cap, &len);
	if (!data)
		return skip(w, path, "out of memory");
	if (len > cap) {
		free(data);
		r->output_limits_hit |= cap == c->file_bytes ? SNAPCELL_OUTPUT_HIT_FILE_BYTES
							     : SNAPCELL_OUTPUT_HIT_TOTAL_BYTES;
		return skip(w, path,
			    cap == c->file_bytes ? "over the per-file size cap"
						 : "over the total size cap");
	}
	/* Within the file-count cap: checked above. */
	if (SC_ARRAY_RESERVE(r->artifacts, w->cap_artifacts, r->n_artifacts + 1, c->files) < 0) {
		free(data);
		return skip(w, path, "out of memory");
	}
	char *p = strdup(path);
	if (!p) {
		free(data);
		return skip(w, path, "out of memory");
	}
	const char *base = strrchr(p, '/');
	r->artifacts[r->n_artifacts++] =
		(struct snapcell_artifact){p, sc__media_type(base ? base + 1 : p), len, data};
	w->total += len;
}

static void walk_dir(struct walk *w, int dfd, char *path, size_t path_len, unsigned depth);

static void visit(struct walk *w, int dfd, const char *name, char *path, size_t path_len,
		  unsigned depth)
{
	if (w->stopped)
		return;
	if ((w->caps->visits && ++w->visited > w->caps->visits) ||
	    (w->caps->deadline_us && sc__now_us() > w->caps->deadline_us)) {
		w->stopped = true;
		w->res->output_limits_hit |= SNAPCELL_OUTPUT_HIT_WALK;
		return skip(w, path_len ? path : name,
			    "collection stopped here: the walk's time or visit budget ran out");
	}
	size_t name_len = strlen(name);
	size_t len = path_len + (path_len ? 1 : 0) + name_len;
	if (len > w->caps->path_bytes) {
		w->res->output_limits_hit |= SNAPCELL_OUTPUT_HIT_NAME;
		path[path_len] = 0;
		return skip(w, path_len ? path : name, "path over the length cap");
	}
	if (path_len)
		path[path_len] = '/';
	memcpy(path + path_len + (path_len ? 1 : 0), name, name_len + 1);
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	if (fd < 0) {
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode) &&
		    !S_ISDIR(st.st_mode))
			skip(w, path, kind(st.st_mode));
		else
			skip(w, path, "unreadable");
	} else if (fstat(fd, &st) < 0) {
		skip(w, path, "unreadable");
	} else if (S_ISDIR(st.st_mode)) {
		if (depth + 1 > w->caps->depth) {
			w->res->output_limits_hit |= SNAPCELL_OUTPUT_HIT_DEPTH;
			skip(w, path, "directory over the depth cap");
		} else {
			walk_dir(w, fd, path, len, depth + 1);
			fd = -1; /* walk_dir owns it */
		}
	} else if (!S_ISREG(st.st_mode)) {
		skip(w, path, kind(st.st_mode));
	} else if (st.st_nlink > 1) {
		skip(w, path, "hard link");
	} else {
		add_file(w, fd, path);
	}
	if (fd >= 0)
		close(fd);
	path[path_len] = 0;
}

/* Takes ownership of dir_fd. Names are sorted so that caps cut the same files every time. */
static void walk_dir(struct walk *w, int dir_fd, char *path, size_t path_len, unsigned depth)
{
	int dfd SC_AUTO_CLOSE = dir_fd;
	char **names;
	size_t n;
	if (sc__sorted_names(dfd, &names, &n) < 0)
		return skip(w, path, "unreadable directory");
	for (size_t i = 0; i < n; i++)
		visit(w, dfd, names[i], path, path_len, depth);
	sc__names_free(names, n);
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct snapcell_artifact *)a)->path,
		      ((const struct snapcell_artifact *)b)->path);
}

int sc__collect(int dirfd, const struct sc_collect_caps *caps, struct snapcell_result *res)
{
	char *path = malloc(caps->path_bytes + 256 + 2);
	int dfd = path ? openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	if (dfd < 0) {
		free(path);
		return path ? -errno : -ENOMEM;
	}
	path[0] = 0;
	struct walk w = {.caps = caps, .res = res};
	walk_dir(&w, dfd, path, 0, 0);
	free(path);
	if (res->n_artifacts > 1)
		qsort(res->artifacts, res->n_artifacts, sizeof(*res->artifacts), by_path);
	return 0;
}

int sc__empty_dir(int dirfd, uint64_t deadline_us)
{
	int dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return -errno;
	}
	int rc = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			int r = sc__remove_tree(dirfd, e->d_name, deadline_us);
			if (r < 0 && rc == 0)
				rc = r;
		}
	closedir(d);
	return rc;
}

void sc__artifacts_free(struct snapcell_result *res)
{
	for (size_t i = 0; i < res->n_artifacts; i++) {
		free(res->artifacts[i].path);
		free(res->artifacts[i].data);
	}
	free(res->artifacts);
	for (size_t i = 0; i < res->n_skipped_listed; i++)
		free(res->skipped[i].path);
	free(res->skipped);
}

const char *sc__media_type(const char *name)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
		{".txt", "text/plain"},
		{".log", "text/plain"},
		{".md", "text/markdown"},
		{".csv", "text/csv"},
		{".tsv", "text/tab-separated-values"},
		{".json", "application/json"},
		{".jsonl", "application/jsonl"},
		{".html", "text/html"},
		{".htm", "text/html"},
		{".xml", "application/xml"},
		{".yaml", "application/yaml"},
		{".yml", "application/yaml"},
		{".py", "text/x-python"},
		{".png", "image/png"},
		{".jpg", "image/jpeg"},
		{".jpeg", "image/jpeg"},
		{".gif", "image/gif"},
		{".svg", "image/svg+xml"},
		{".webp", "image/webp"},
		{".pdf", "application/pdf"},
		{".zip", "application/zip"},
		{".gz", "application/gzip"},
		{".tar", "application/x-tar"},
		{".parquet", "application/vnd.apache.parquet"},
	};
	const char *dot = strrchr(name, '.');
	for (size_t i = 0; dot && i < SC_ARRAY_LEN(types); i++)
		if (!strcasecmp(dot, types[i].ext))
			return types[i].type;
	return "application/octet-stream";
}
