/* The state files through which `snapcell doctor`, a separate process, lists the running
 * `snapcell mcp` servers and their sessions: one small JSON file per server in a per-user
 * runtime directory, replaced atomically, removed at exit. It holds no secret (session handles
 * appear only as prefixes too short to use) and is not a control channel: nothing reads it
 * back into a server. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../frontend/frontend.h"
#include "mcp.h"

#define STATE_FILE_MAX (1u << 20)

/* $XDG_RUNTIME_DIR/snapcell/mcp (the user's, made 0700 by the login manager), else for root
 * /run/snapcell/mcp, else /tmp/snapcell-mcp-UID (a shared directory: checked below). */
static int state_dir(char *out, size_t len)
{
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	int n;
	if (xdg && xdg[0] == '/')
		n = snprintf(out, len, "%s/snapcell/mcp", xdg);
	else if (geteuid() == 0)
		n = snprintf(out, len, "/run/snapcell/mcp");
	else
		n = snprintf(out, len, "/tmp/snapcell-mcp-%u", (unsigned)geteuid());
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* Makes one directory 0700 unless it exists (or only looks: make false), then checks it is
 * a real directory (not a link) of ours that nobody else may write: in /tmp another user
 * could have made it first, to read or plant state files, or to have doctor remove files
 * where a link leads. */
static int own_dir(const char *path, bool make)
{
	struct stat st;
	if (make && mkdir(path, 0700) < 0 && errno != EEXIST)
		return -errno;
	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return -EPERM;
	return 0;
}

/* Every component below the base ($XDG_RUNTIME_DIR, /run or /tmp) is made and checked. */
static int make_dirs(const char *dir, bool make)
{
	char path[512];
	snprintf(path, sizeof(path), "%s", dir);
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	/* The base is $XDG_RUNTIME_DIR, or /run or /tmp (both 4 characters). */
	size_t base = xdg && xdg[0] == '/' && !strncmp(dir, xdg, strlen(xdg)) ? strlen(xdg) : 4;
	for (char *p = path + base + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int rc = own_dir(path, make);
		*p = '/';
		if (rc < 0)
			return rc;
	}
	return own_dir(path, make);
}

char *mcp_state_path(void)
{
	char dir[480], *path = NULL;
	int rc = state_dir(dir, sizeof(dir));
	if (rc == 0)
		rc = make_dirs(dir, true);
	if (rc < 0) {
		fprintf(stderr,
			"snapcell mcp: no state file for snapcell doctor: %s: %s (not ours, or "
			"writable by others)\n",
			dir, strerror(-rc));
		return NULL;
	}
	if (asprintf(&path, "%s/%ld.json", dir, (long)getpid()) < 0)
		return NULL;
	return path;
}

/* Field 22 of /proc/PID/stat, the process's start time in clock ticks: with the pid it names
 * one process, so a file whose pid was reused is seen as stale. 0 when unknown. */
static unsigned long long start_ticks(long pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "re");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

void mcp_state_write(const char *path, const json_t *doc)
{
	static bool warned;
	if (!path)
		return;
	json_t *copy = json_deep_copy(doc);
	json_object_set_new(copy, "pid", json_integer(getpid()));
	json_object_set_new(copy, "start_ticks", json_integer((json_int_t)start_ticks(getpid())));
	char *text = json_dumps(copy, JSON_COMPACT);
	json_decref(copy);
	char tmp[600];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = text ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600) : -1;
	size_t len = text ? strlen(text) : 0;
	bool ok = fd >= 0 && write(fd, text, len) == (ssize_t)len;
	if (fd >= 0)
		close(fd);
	ok = ok && rename(tmp, path) == 0;
	if (!ok) {
		if (fd >= 0)
			unlink(tmp);
		if (!warned)
			fprintf(stderr, "snapcell mcp: cannot write the state file %s: %s\n", path,
				strerror(errno));
		warned = true;
	}
	free(text);
}

static bool is_pid_name(const char *name, long *pid)
{
	char *end;
	if (!isdigit((unsigned char)name[0]))
		return false;
	*pid = strtol(name, &end, 10);
	return *pid > 0 && (!strcmp(end, ".json") || !strcmp(end, ".json.tmp"));
}

/* A state file's contents, or NULL when it is not a regular file of ours of sane size. */
static json_t *read_state(int dirfd, const char *name)
{
	int fd SC_AUTO_CLOSE = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;
	json_t *doc = NULL;
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    st.st_size < STATE_FILE_MAX)
		doc = json_loadfd(fd, 0, NULL);
	return doc;
}

/* Adds the ages doctor shows, from the wall-clock times the server wrote. */
static void add_ages(json_t *server, time_t now)
{
	json_t *s;
	size_t i;
	json_object_set_new(
		server, "uptime_s",
		json_integer(now - json_integer_value(json_object_get(server, "started_unix"))));
	json_array_foreach(json_object_get(server, "sessions"), i, s)
	{
		json_int_t created = json_integer_value(json_object_get(s, "created_unix"));
		json_int_t used = json_integer_value(json_object_get(s, "last_used_unix"));
		json_object_set_new(s, "age_s", json_integer(now - created));
		json_object_set_new(s, "idle_s", json_integer(now - used));
	}
}

json_t *mcp_servers_json(void)
{
	json_t *out = json_array();
	char dir[480];
	/* Only a directory of ours, checked as the server checks it, every component a real
	 * directory: never list files others planted, nor remove files where a link leads. */
	int fd = state_dir(dir, sizeof(dir)) == 0 && make_dirs(dir, false) == 0
			 ? open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
			 : -1;
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct stat st;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return out;
	}
	if (fstat(dirfd(d), &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		closedir(d);
		return out;
	}
	time_t now = time(NULL);
	for (struct dirent *e; (e = readdir(d));) {
		long pid;
		if (!is_pid_name(e->d_name, &pid))
			continue;
		json_t *doc = strstr(e->d_name, ".tmp") ? NULL : read_state(dirfd(d), e->d_name);
		unsigned long long ticks = start_ticks(pid);
		bool live = ticks != 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
		if (doc && live &&
		    (unsigned long long)json_integer_value(json_object_get(doc, "start_ticks")) ==
			    ticks) {
			add_ages(doc, now);
			json_array_append_new(out, doc);
			continue;
		}
		json_decref(doc);
		if (!live) /* its server was killed before it could remove it */
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
	return out;
}
