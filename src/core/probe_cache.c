/* The per-user cache of interpreters' answers to the probe (python_probe.c), so a process that
 * resolves an interpreter the user already ran pays no interpreter start and no prelude compile.
 * It keeps the answer's text only: python_probe.c parses and judges a cached answer exactly as a
 * fresh one (its directories resolved and checked again). Entries are keyed by the binary an
 * answer is of, never by a shim or launcher script: which binary those run depends on more
 * than their file (see docs/security.md, "The probe cache"). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "prelude.h"
#include "util/cleanup.h"
#include "util/util.h"

#define ENTRY_MAX (320u << 10) /* the key and an answer (the probe caps answers at 256 KiB) */
#define MAGIC	  "snapcell-probe-cache 1\n"

/* The directory ($XDG_CACHE_HOME/snapcell, else $HOME/.cache/snapcell), created 0700 when
 * missing and opened without following a link; -1 with *why when there is none to trust: it
 * must be a directory the effective user owns that no one else may enter or write. */
static int open_dir(const char **why)
{
	const char *off = getenv("SNAPCELL_PROBE_CACHE");
	if (off && (!strcmp(off, "0") || !strcmp(off, "off"))) {
		*why = "off";
		return -1;
	}
	/* secure_getenv: a set-id program is given no cache rather than one a caller names. */
	const char *xdg = secure_getenv("XDG_CACHE_HOME"), *home = secure_getenv("HOME");
	char dir[4096];
	int n;
	if (xdg && xdg[0] == '/') {
		mkdir(xdg, 0700);
		n = snprintf(dir, sizeof(dir), "%s/snapcell", xdg);
	} else if (home && home[0] == '/') {
		n = snprintf(dir, sizeof(dir), "%s/.cache", home);
		if (n > 0 && (size_t)n < sizeof(dir))
			mkdir(dir, 0700);
		n = snprintf(dir, sizeof(dir), "%s/.cache/snapcell", home);
	} else {
		*why = "no-dir";
		return -1;
	}
	if (n < 0 || (size_t)n >= sizeof(dir)) {
		*why = "no-dir";
		return -1;
	}
	mkdir(dir, 0700);
	int fd SC_AUTO_CLOSE = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		*why = "no-dir";
		return -1;
	}
	if (st.st_uid != geteuid() || (st.st_mode & 077)) {
		*why = "untrusted-dir";
		return -1;
	}
	return SC_STEAL_FD(fd);
}

/* What an answer depends on besides the probe's own text: the interpreter file's identity, the
 * dynamic loader's cache (which directories its libraries load from), this library. */
static void make_key(const char *real, const struct stat *st, uint64_t probe_hash, char *key,
		     size_t key_len)
{
	struct stat ld = {0};
	stat("/etc/ld.so.cache", &ld);
	snprintf(key, key_len,
		 "%s\ndev %ju ino %ju size %jd mtime %jd.%09ld ctime %jd.%09ld\n"
		 "ld.so.cache %ju %jd.%09ld\nprobe %016" PRIx64 " prelude %016" PRIx64
		 " snapcell %s\n",
		 real, (uintmax_t)st->st_dev, (uintmax_t)st->st_ino, (intmax_t)st->st_size,
		 (intmax_t)st->st_mtim.tv_sec, st->st_mtim.tv_nsec, (intmax_t)st->st_ctim.tv_sec,
		 st->st_ctim.tv_nsec, (uintmax_t)ld.st_ino, (intmax_t)ld.st_mtim.tv_sec,
		 ld.st_mtim.tv_nsec, probe_hash, sc__prelude_hash(sc_prelude_py), SNAPCELL_VERSION);
}

/* One file per interpreter path, so a stale entry is replaced, not kept beside. */
static void entry_name(const char *real, char *name, size_t len)
{
	snprintf(name, len, "probe-%016" PRIx64 ".json", sc__prelude_hash(real));
}

char *sc__probe_cache_load(const char *real, const struct stat *st, uint64_t probe_hash,
			   const char **why)
{
	int dfd = open_dir(why);
	if (dfd < 0)
		return NULL;
	char name[64], key[4608];
	entry_name(real, name, sizeof(name));
	make_key(real, st, probe_hash, key, sizeof(key));
	*why = "missed";
	/* O_NOFOLLOW: a link is refused, not followed to a file someone else wrote. */
	int fd SC_AUTO_CLOSE = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	close(dfd);
	if (fd < 0)
		return NULL;
	struct stat fst;
	char *buf SC_AUTO_FREE = NULL;
	size_t head = strlen(MAGIC) + strlen(key);
	if (fstat(fd, &fst) < 0 || !S_ISREG(fst.st_mode) || fst.st_uid != geteuid() ||
	    (fst.st_mode & 022)) {
		*why = "untrusted";
		return NULL;
	}
	*why = "stale";
	if (fst.st_size > (off_t)head && fst.st_size <= ENTRY_MAX &&
	    (buf = malloc((size_t)fst.st_size + 1)) &&
	    sc__read_all(fd, buf, (size_t)fst.st_size) == 0) {
		buf[fst.st_size] = 0;
		if (strncmp(buf, MAGIC, strlen(MAGIC)) == 0 &&
		    strncmp(buf + strlen(MAGIC), key, strlen(key)) == 0) {
			memmove(buf, buf + head, (size_t)fst.st_size - head + 1);
			*why = "used";
			return SC_STEAL_PTR(buf);
		}
	}
	return NULL;
}

void sc__probe_cache_store(const char *real, const struct stat *st, uint64_t probe_hash,
			   const char *answer, const char **why)
{
	int dfd = open_dir(why);
	if (dfd < 0)
		return;
	char name[64], tmp[96], key[4608];
	entry_name(real, name, sizeof(name));
	make_key(real, st, probe_hash, key, sizeof(key));
	snprintf(tmp, sizeof(tmp), ".%s.%d.tmp", name, (int)getpid());
	/* A temporary file renamed over the entry: a reader sees the old entry or the new one,
	 * never a half-written one; O_EXCL and O_NOFOLLOW make no file someone planted ours. */
	unlinkat(dfd, tmp, 0);
	int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	bool ok = fd >= 0 && sc__write_all(fd, MAGIC, strlen(MAGIC)) == 0 &&
		  sc__write_all(fd, key, strlen(key)) == 0 &&
		  sc__write_all(fd, answer, strlen(answer)) == 0;
	if (fd >= 0 && close(fd) < 0)
		ok = false;
	if (fd >= 0 && (!ok || renameat(dfd, tmp, dfd, name) < 0)) {
		unlinkat(dfd, tmp, 0);
		ok = false;
	}
	*why = ok ? "stored" : "not-stored";
	close(dfd);
}
