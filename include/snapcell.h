/* snapcell: run untrusted Python in isolated cells forked from a warm template.
 *
 * Typical use:
 *
 *     struct snapcell_error err;
 *     struct snapcell_config *cfg = snapcell_config_new();
 *     snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 5000, &err);
 *     struct snapcell_sandbox *sb;
 *     if (snapcell_sandbox_new(cfg, &sb, &err) < 0)
 *             fprintf(stderr, "snapcell: %s\n", err.message);
 *     snapcell_config_free(cfg);            // the sandbox keeps its own copy
 *     struct snapcell_result *res;
 *     if (snapcell_sandbox_run(sb, "print(6 * 7)", SIZE_MAX, NULL, &res, &err) == 0) {
 *             fwrite(res->stdout_buf, 1, res->stdout_len, stdout);
 *             snapcell_result_free(res);
 *     }
 *     snapcell_sandbox_free(sb);
 *
 * Errors: every function that can fail returns int, 0 or a negative code (-errno for
 * operating-system failures, SNAPCELL_E_* for our own), and takes a struct snapcell_error *
 * as its last parameter (NULL when the caller wants no message). On failure it receives the
 * code and a message naming the step and object, with the cause after a colon as it climbs
 * ("add_tool compute: schema: properties.a: unknown keyword 'if'", "mount /usr: Operation not
 * permitted"). snapcell_strerror() describes a code, snapcell_error_name() names it
 * ("SNAPCELL_E_INVAL", "ENOENT"). Getters that cannot fail return their value.
 *
 * Ownership: setters copy their inputs; objects returned through an out-pointer are owned by the
 * caller and released with the matching _free; _free(NULL) does nothing.
 *
 * Threads: a config is not thread-safe. A sandbox may be used from any number of threads at
 * once; each run gets its own cell. The library never exits, aborts or installs signal handlers
 * in the calling process; it ignores nothing and writes with MSG_NOSIGNAL. Tool callbacks run on
 * the thread whose call runs the code (snapcell_sandbox_run, snapcell_session_run, or the
 * snapcell_sandbox_resume that goes on with a paused run). A run or new session that needs a
 * parked cell when none is ready waits for the template to park one (SNAPCELL_E_TEMPLATE after
 * 20 s without), and snapcell_sandbox_stats waits for the two it keeps; no lock of the sandbox
 * is held meanwhile, so runs that have their cells, resumes and session runs go on. The
 * library starts these threads, each with every signal blocked (a signal sent to the process
 * reaches only the caller's threads), and joins them itself:
 * - a sandbox's reaper, at its first run that pauses for a decision, until snapcell_sandbox_free:
 *   it ends paused runs whose SNAPCELL_LIMIT_PAUSE_MS ran out (killing their cells);
 * - a sandbox's pre-fault learner, at the first fresh run it learns from (usually the sandbox's
 *   second), until snapcell_sandbox_free: it reads such a run's cell's page map, sends the
 *   template the pages its cells should fault in ahead of a run, and retires the cell;
 * - with network entries (snapcell_config_allow), for each run while it lasts (pauses
 *   included): one that answers the cell's name lookups and accepts its connections, and one
 *   per open connection (at most SNAPCELL_LIMIT_NET_CONNECTIONS); resolving an upstream name
 *   uses glibc's getaddrinfo_a, whose own helper threads glibc starts and ends.
 *
 * Child processes: snapcell_sandbox_new starts the sandbox's template (snapcell-cell, which
 * becomes the interpreter) as a child of the calling process, for the sandbox's life; cells and
 * session processes are the template's children, never the caller's. Creating a sandbox,
 * snapcell_probe_host and the calls that ask an interpreter what it is (once per interpreter
 * file and process: snapcell_config_set_python, snapcell_config_python_info, ...) also run
 * short-lived children, each waited for before the call returns. The library waits for each
 * child by its pid or pidfd, never with waitpid(-1), so it reaps none of the caller's; the
 * caller gets SIGCHLD when the template ends (at snapcell_sandbox_free, or if it dies) and when
 * a short-lived child does. A SIGCHLD handler that reaps with waitpid(-1) may take their
 * statuses, which the library needs only for its error messages (how a helper that failed to
 * start ended: "ended (status unknown: ...)" then); a run after the template died fails with
 * SNAPCELL_E_TEMPLATE either way. A loop that waits for every child (wait() until ECHILD) also
 * waits for each live sandbox's template, so until the sandbox is freed.
 * signal(SIGCHLD, SIG_IGN) and SA_NOCLDWAIT are fine: the kernel reaps the children, sandboxes
 * and sessions work and snapcell_sandbox_free returns; only those statuses are lost.
 *
 * File-system ids: session operations (snapcell_session_new, _run, _snapshot, _restore, _free,
 * snapcell_snapshot_new_session) move and copy the sessions' /tmp trees on the calling thread
 * with the file-system ids of the sandbox's user (setfsuid and setfsgid, which change that
 * thread only), and give the thread back the ids it had, whatever they were, before they
 * return. Both changes are checked: a thread the kernel refuses them (a root caller's thread
 * without CAP_SETUID or CAP_SETGID in effect) gets -EPERM, with its ids unchanged. Meanwhile a
 * root thread's file capabilities (CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FOWNER, ...) are out of
 * effect; the kernel puts them back from the permitted set when its fsuid returns to 0.
 *
 * The helper: sandboxes run an executable, snapcell-cell, installed with the library (in
 * libexecdir/snapcell). Its path is fixed at build time; snapcell_config_set_helper() points a
 * config elsewhere (a build tree, a Python wheel's own copy). Library and helper check that
 * they speak the same protocol when a sandbox starts.
 *
 * ABI: the exported symbols are exactly the functions declared here (a linker version script
 * keeps everything else local). While the major version is 0 every minor version may break
 * the ABI and the SONAME is libsnapcell.so.0.<minor>; from 1.0 it is libsnapcell.so.<major>.
 * Structs keep their size across versions within one SONAME, by these rules:
 * - Structs the caller fills and passes in (snapcell_run_options) start with a size member,
 *   set to sizeof the struct as the caller compiled it. The library reads only that many
 *   bytes (later fields count as zero) and refuses, with SNAPCELL_E_INVAL, a size too small
 *   for the first version or non-zero bytes in fields it does not know.
 * - Structs the caller allocates and the library fills (snapcell_sandbox_stats, snapcell_probe
 *   and its snapcell_mechanism_report, snapcell_tool_info, snapcell_allowed_info) end with
 *   reserved words that the
 *   library zeroes; later versions turn them into fields, so a field added later reads 0 from
 *   an older library.
 * - Structs the library allocates (snapcell_result) grow only at their end: never allocate
 *   one yourself. The elements of its arrays (snapcell_tool_call, snapcell_artifact,
 *   snapcell_skipped_output) and struct snapcell_error never change; new per-element data
 *   comes as new members of snapcell_result.
 * - Enums only gain values at their end (before any __COUNT).
 */
#ifndef SNAPCELL_H
#define SNAPCELL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SNAPCELL_API __attribute__((visibility("default")))

/* The version of this header. snapcell_version() gives the loaded library's. */
#define SNAPCELL_VERSION_MAJOR 0
#define SNAPCELL_VERSION_MINOR 2
#define SNAPCELL_VERSION_PATCH 0
#define SNAPCELL_VERSION       "0.2.0"

/* "MAJOR.MINOR.PATCH" of the library actually loaded (static). */
SNAPCELL_API const char *snapcell_version(void);

/* Our own error codes; all below -4095 so they never collide with -errno. */
enum snapcell_errcode {
	SNAPCELL_E_INVAL = -5000,     /* an argument is out of range or malformed */
	SNAPCELL_E_ISOLATION = -5001, /* the host cannot give the required isolation level */
	SNAPCELL_E_HELPER = -5002,    /* the sandbox helper failed to start or set up */
	SNAPCELL_E_TEMPLATE = -5003,  /* the template process died or broke its protocol */
	SNAPCELL_E_PROTOCOL = -5004,  /* a peer sent a malformed or oversized frame */
	SNAPCELL_E_TOO_BIG = -5005,   /* an input exceeds a hard cap */
	SNAPCELL_E_EXHAUSTED = -5006, /* every outside uid of the range is held by a sandbox */
};

#define SNAPCELL_ERROR_MESSAGE_LEN 256

struct snapcell_error {
	int code;
	char message[SNAPCELL_ERROR_MESSAGE_LEN];
};

/* A static description of a code from this library (SNAPCELL_E_* or -errno). */
SNAPCELL_API const char *snapcell_strerror(int code);
/* The code's name, static: "SNAPCELL_E_INVAL", "ENOENT"; "OK" for 0, "UNKNOWN" otherwise. */
SNAPCELL_API const char *snapcell_error_name(int code);

/* Isolation levels, weakest first. A sandbox reports the level it reached; a config may require
 * a minimum. */
enum snapcell_isolation {
	SNAPCELL_ISOLATION_NONE = 0,
	SNAPCELL_ISOLATION_RLIMITS = 1,	   /* seccomp + Landlock + rlimits only */
	SNAPCELL_ISOLATION_NAMESPACES = 2, /* user/mount/pid/net/ipc/uts/cgroup ns + seccomp */
	/* namespaces + seccomp + a memory cgroup per cell (cgroup v1, below the caller's own
	 * memory cgroup: root, or a delegated subtree) */
	SNAPCELL_ISOLATION_CGROUPS = 3,
};

/* "none", "rlimits", "namespaces", "cgroups"; NULL for an unknown value. */
SNAPCELL_API const char *snapcell_isolation_name(enum snapcell_isolation level);
/* The level a name spells (one snapcell_isolation_name gives): 0 and *out set, or
 * SNAPCELL_E_INVAL. */
SNAPCELL_API int snapcell_isolation_from_name(const char *name, enum snapcell_isolation *out);

/* Limits. Each is set with snapcell_config_set_limit(); 0 is not a valid value for any. */
enum snapcell_limit {
	SNAPCELL_LIMIT_WALL_MS, /* wall clock from code delivery (default 30,000) */
	SNAPCELL_LIMIT_CPU_MS,	/* CPU time of each cell process, rounded up to seconds (60,000) */
	/* Address space of each cell process (RLIMIT_AS) and, at isolation cgroups, the memory
	 * charged to each cell, all its processes, page tables and kernel memory together
	 * (default 512 MiB) */
	SNAPCELL_LIMIT_MEMORY_BYTES,
	SNAPCELL_LIMIT_PROCESSES,    /* tasks (processes and threads) per sandbox (default 64) */
	SNAPCELL_LIMIT_FILE_BYTES,   /* largest file a cell may write (default 64 MiB) */
	SNAPCELL_LIMIT_TMP_BYTES,    /* size of the cell's /tmp tmpfs (default 64 MiB) */
	SNAPCELL_LIMIT_STDOUT_BYTES, /* stdout kept; more ends the run (default 1 MiB) */
	SNAPCELL_LIMIT_STDERR_BYTES, /* stderr kept; more ends the run (default 1 MiB) */
	SNAPCELL_LIMIT_OPEN_FILES,   /* file descriptors per cell process (default 256) */
	SNAPCELL_LIMIT_OUTPUT_FILES, /* files collected from /output (default 1,000) */
	SNAPCELL_LIMIT_OUTPUT_FILE_BYTES,  /* bytes of one collected file (default 64 MiB) */
	SNAPCELL_LIMIT_OUTPUT_TOTAL_BYTES, /* bytes of all collected files (default 256 MiB) */
	SNAPCELL_LIMIT_OUTPUT_DEPTH,	   /* directory depth walked in /output (default 32) */
	SNAPCELL_LIMIT_OUTPUT_PATH_BYTES,  /* length of a collected path (default 1,024) */
	SNAPCELL_LIMIT_NET_CONNECTIONS,	   /* open connections of one cell (default 32) */
	SNAPCELL_LIMIT_NET_BYTES,	   /* bytes both ways per run (default 1 GiB) */
	SNAPCELL_LIMIT_NET_CONNECT_MS,	   /* resolving and connecting upstream (10,000) */
	SNAPCELL_LIMIT_NET_IDLE_MS,	   /* a connection with no byte either way (30,000) */
	/* Runs of one sandbox waiting for a decision at once (default 16); past it the call gets
	 * ToolError naming this bound and the run goes on. Apart from any limit on runs. */
	SNAPCELL_LIMIT_PAUSED_RUNS,
	SNAPCELL_LIMIT_PAUSE_MS, /* how long a run waits for a decision (default 600,000) */
	/* Awaited calls of one run that run on the host at once (default 16, at most 1,024):
	 * calls of tools with an asynchronous face (snapcell_config_set_tool_async) started and
	 * not yet answered; later calls wait their turn in order. */
	SNAPCELL_LIMIT_TOOL_CALLS,
	SNAPCELL_LIMIT__COUNT
};

/* Flags in snapcell_result.limits_hit: which limit ended or hampered the run. */
enum snapcell_limit_flag {
	SNAPCELL_HIT_WALL = 1u << 0,
	SNAPCELL_HIT_CPU = 1u << 1,
	SNAPCELL_HIT_MEMORY = 1u << 2,
	SNAPCELL_HIT_PROCESSES = 1u << 3,
	SNAPCELL_HIT_FILE_SIZE = 1u << 4,
	SNAPCELL_HIT_TMP = 1u << 5,
	SNAPCELL_HIT_STDOUT = 1u << 6,
	SNAPCELL_HIT_STDERR = 1u << 7,
};

/* ---- configuration ---- */

struct snapcell_config;

SNAPCELL_API struct snapcell_config *snapcell_config_new(void);
SNAPCELL_API void snapcell_config_free(struct snapcell_config *cfg);

/* Sets one limit. SNAPCELL_E_INVAL for an unknown limit or a zero or out-of-range value (the
 * message gives the range). */
SNAPCELL_API int snapcell_config_set_limit(struct snapcell_config *cfg, enum snapcell_limit limit,
					   uint64_t value, struct snapcell_error *err);
SNAPCELL_API uint64_t snapcell_config_get_limit(const struct snapcell_config *cfg,
						enum snapcell_limit limit);

/* The vocabulary every front end spells limits in (config files' "limits" keys, the Python
 * binding, messages): the limit's name ("wall_ms", "memory_bytes", ...), static; NULL for an
 * unknown value. Iterate from 0 to SNAPCELL_LIMIT__COUNT for the whole list. */
SNAPCELL_API const char *snapcell_limit_name(enum snapcell_limit limit);
/* The limit a name spells: 0 and *out set, or SNAPCELL_E_INVAL naming the unknown name. */
SNAPCELL_API int snapcell_limit_from_name(const char *name, enum snapcell_limit *out,
					  struct snapcell_error *err);

/* Passes an environment variable to the code (visible as os.environ[name]); name and value
 * must be UTF-8 (SNAPCELL_E_INVAL otherwise). The cell starts with no other variables but two
 * defaults these override: SSL_CERT_FILE (the root's CA bundle) and MPLBACKEND=Agg. They are set
 * inside the sandbox after its root is built, so loader variables (LD_PRELOAD, ...) have no effect
 * on the helper. A later call with the same name replaces the value. */
SNAPCELL_API int snapcell_config_set_env(struct snapcell_config *cfg, const char *name,
					 const char *value, struct snapcell_error *err);

/* Exposes a host directory read-only and appends it to sys.path, e.g. a Python environment's
 * site-packages so numpy or pandas import. Inside the cell the n-th path (from 0) appears at
 * /.snapcell/python/<n>. The path must be absolute and an existing directory when the sandbox
 * is created; at most 64. */
SNAPCELL_API int snapcell_config_add_python_path(struct snapcell_config *cfg, const char *dir,
						 struct snapcell_error *err);

/* A Python virtual environment for the cell: its site-packages is exposed read-only, appended
 * to sys.path after the python paths, and its .pth files are processed as site.addsitedir
 * does (once, in the template; lines that import run there too, and must not reach outside
 * the root: an editable install's host source tree is not exposed). With
 * include-system-site-packages in a venv of Debian's /usr/bin/python3, Debian's
 * /usr/lib/python3/dist-packages follows it. A venv made by any CPython 3.10 or newer is
 * accepted; with no snapcell_config_set_python, the interpreter it was made from runs the
 * cells. Its X.Y must be the running interpreter's, and with snapcell_config_set_python the
 * venv must have been made from that interpreter: else SNAPCELL_E_INVAL naming both (checked
 * now when both are set, and again when a sandbox is created). Resolved and checked now;
 * NULL removes it. Counts against the 64 paths of snapcell_config_add_python_path. */
SNAPCELL_API int snapcell_config_set_venv(struct snapcell_config *cfg, const char *dir,
					  struct snapcell_error *err);

/* The Python interpreter that runs the cells: path is an executable (absolute, or a name
 * looked up in $PATH now), asked once what it is (a short run of it with -I -S; answers are
 * cached per file, inode and mtime for the process's life, and a binary's also across
 * processes in the user's own cache directory unless SNAPCELL_PROBE_CACHE=0: see
 * snapcell_python_info's probe_cache) so that a pyenv shim or a symbolic link resolves to the
 * real binary. SNAPCELL_E_INVAL, with a message naming the file and the
 * cause, when it is not found or not executable, is not CPython, is older than 3.10, is a
 * free-threaded build, or lies under /tmp, /input, /output, /dev or /proc (which cells mount
 * over). A newer version than 3.14 is accepted (snapcell_config_python_info warns). NULL
 * restores the default: the venv's interpreter (snapcell_config_set_venv), else `python3` in
 * $PATH when the sandbox is created, else /usr/bin/python3. */
SNAPCELL_API int snapcell_config_set_python(struct snapcell_config *cfg, const char *path,
					    struct snapcell_error *err);

#define SNAPCELL_PYTHON_PATH_LEN 4096

/* The interpreter sandboxes made from cfg would run. */
struct snapcell_python_info {
	/* The file that runs, links and shims resolved; cells see it as sys.executable. */
	char executable[SNAPCELL_PYTHON_PATH_LEN];
	/* Why it: "snapcell_config_set_python", "the venv's interpreter", "python3 on PATH",
	 * "/usr/bin/python3". */
	char chosen_by[64];
	char version[32]; /* "3.12.1", the cells' sys.version_info */
	unsigned major, minor;
	char warning[160]; /* "", or why it may not work (newer than snapcell is tested with) */
	/* What the per-user cache of the interpreter's answers (docs/security.md, "The probe
	 * cache") did when this process first resolved it: "used" (read from it, the
	 * interpreter did not run), "stored" (it ran; its answer is kept), "launcher-used" and
	 * "launcher-stored" (the same for the binary a shim such as pyenv's named; the shim
	 * itself ran), "launcher" (a launcher ran that named no binary: never cached), "off"
	 * (SNAPCELL_PROBE_CACHE=0), "no-dir" (no HOME or XDG_CACHE_HOME to keep it in),
	 * "untrusted-dir" (the directory is not the user's own, mode 0700), "not-stored" (it could
	 * not be written). */
	char probe_cache[16];
	uint64_t reserved[2]; /* zeroed (ABI growth) */
};

/* Resolves cfg's interpreter as snapcell_sandbox_new does (running it at most once per
 * process, see snapcell_config_set_python) and fills out; the refusals of
 * snapcell_config_set_python and snapcell_config_set_venv, checked again, are
 * SNAPCELL_E_INVAL with the message sandbox creation would give. */
SNAPCELL_API int snapcell_config_python_info(const struct snapcell_config *cfg,
					     struct snapcell_python_info *out,
					     struct snapcell_error *err);

/* Adds a module the template imports before it parks cells (after the python paths and the
 * venv are set up), so a run that uses it pays nothing for the import: "numpy", "pandas",
 * "matplotlib.pyplot" (the Agg backend is the default). A dotted name of identifiers, at most
 * 255 bytes; at most 64 modules, imported in the order added; adding one twice is a no-op.
 * While they import, OPENBLAS/OMP/MKL/NUMEXPR/BLIS thread counts are pinned to 1 (so BLAS
 * in cells stays single-threaded for preloaded numpy). Sandbox creation fails with
 * SNAPCELL_E_HELPER when a module fails to import (the message carries its exception and
 * innermost frames) or leaves a thread running (the template must be single-threaded when
 * it forks cells), naming the module. */
SNAPCELL_API int snapcell_config_add_preload(struct snapcell_config *cfg, const char *module,
					     struct snapcell_error *err);

/* Cap on snapcell_config_set_warmup's code, in bytes. */
#define SNAPCELL_WARMUP_MAX 65536

/* Python code the template runs once, after the preloads and before it parks cells ("priming"):
 * the first-time work of the preloaded libraries (lazy imports, caches), done there once and
 * shared copy-on-write by every cell, e.g. "import pandas as pd\npd.DataFrame({'x': [1]}).sum()".
 * It runs in a namespace of its own that is then dropped (what it imports stays imported), with
 * the preloads' thread pools pinned to 1 and its output discarded. It is the caller's code, not
 * the model's: it runs in the template, which no seccomp filter confines, so only trusted code
 * belongs here. It cannot call tools (RuntimeError) or open a network socket or
 * resolve a name (PermissionError), each saying it runs in the warm-up. Sandbox creation fails with
 * SNAPCELL_E_HELPER when it raises (the message carries its exception and innermost frames),
 * leaves a thread running, or leaves a descriptor open or closes one of the template's.
 * Valid UTF-8, at most SNAPCELL_WARMUP_MAX bytes, else SNAPCELL_E_INVAL; NULL or "" removes
 * it; a second call replaces the first. */
SNAPCELL_API int snapcell_config_set_warmup(struct snapcell_config *cfg, const char *code,
					    struct snapcell_error *err);

/* The snapcell-cell executable sandboxes made from cfg run; NULL restores the default, the
 * path fixed at build time (libexecdir/snapcell/snapcell-cell). The path is resolved now and
 * must name an executable regular file. Front ends choose how a user overrides it (the
 * snapcell CLI reads $SNAPCELL_HELPER); the library reads no environment variable for it. */
SNAPCELL_API int snapcell_config_set_helper(struct snapcell_config *cfg, const char *path,
					    struct snapcell_error *err);

/* The outside uids sandboxes of a root caller run as (ignored when the caller is not root:
 * its sandboxes run as its own uid, the only one it has). Each sandbox takes, for its life, a
 * uid of [first, first + count) that no other live sandbox on the machine holds, in any
 * process, and runs as that uid and the gid of the same number, so the kernel's per-user
 * quotas kept per uid (pipe buffers, epoll watches) are its own. The
 * reservation is an flock'ed file per uid in /run/snapcell/uids, released when the sandbox is
 * freed or its process dies. When all are held, sandbox creation fails with
 * SNAPCELL_E_EXHAUSTED naming the range. count 0 reserves nothing: every sandbox runs as
 * first (65534, 0 is what earlier versions did, sharing nobody's quotas).
 * Default: SNAPCELL_UID_RANGE_FIRST and SNAPCELL_UID_RANGE_COUNT, a range no distribution,
 * systemd or LXD allocates; when the caller's user namespace does not map all of it, or
 * /run/snapcell/uids cannot be made, the default falls back to 65534 shared, while a range
 * set here makes sandbox creation fail with the reason. SNAPCELL_E_INVAL for first 0 (root)
 * or a range that reaches 65535 or 4294967295 (the kernel's invalid ids). */
#define SNAPCELL_UID_RANGE_FIRST 2000000000u
#define SNAPCELL_UID_RANGE_COUNT 65536u
SNAPCELL_API int snapcell_config_set_uid_range(struct snapcell_config *cfg, uint32_t first,
					       uint32_t count, struct snapcell_error *err);

/* ---- files: /input and /output ---- */

/* The workspace's children appear directly under /input (read-only). The path is resolved
 * (a symlinked root is followed) and must be an existing directory; NULL clears it. Inputs
 * are copied when the sandbox is created: links, FIFOs, sockets and devices inside are left
 * out, so nothing outside the tree is reachable through them. At most 1 GiB and 100,000
 * files in all. */
SNAPCELL_API int snapcell_config_set_workspace(struct snapcell_config *cfg, const char *dir,
					       struct snapcell_error *err);
/* The resolved workspace, or NULL. Borrowed until the next change to cfg. */
SNAPCELL_API const char *snapcell_config_workspace(const struct snapcell_config *cfg);

/* With reject true, a symbolic link anywhere under the workspace or a mounted directory (or a
 * mounted link) makes sandbox creation fail with SNAPCELL_E_INVAL naming it, instead of being
 * left out of /input (the default). FIFOs, sockets and devices are left out either way. */
SNAPCELL_API int snapcell_config_set_reject_links(struct snapcell_config *cfg, bool reject,
						  struct snapcell_error *err);

/* With on true, a fresh run's cell is, after its run, brought back in place to the state it
 * was parked in and handed to a later fresh run, instead of being killed and replaced by a
 * newly forked one; any doubt that the reset is complete discards the cell, and the next run
 * gets a forked cell as without it (docs/architecture.md, "Reset in place"). Only at levels
 * namespaces and cgroups, for sandboxes without network entries, and for runs without files
 * of their own; never for sessions. Default: on (where any of those does not hold, runs fork
 * cells as with it off). 0, or SNAPCELL_E_INVAL for a NULL cfg. */
SNAPCELL_API int snapcell_config_set_reuse(struct snapcell_config *cfg, bool on,
					   struct snapcell_error *err);

/* Mounts a host file or directory at a path under /input. The host path is resolved and must
 * exist; the mount path is normalised (snapcell_normalize_mount_path). Mounts apply after the
 * workspace, in order: at the same path the later one wins, and re-adding a mount path
 * replaces that mount in place. */
SNAPCELL_API int snapcell_config_add_mount(struct snapcell_config *cfg, const char *host_path,
					   const char *mount_path, struct snapcell_error *err);
/* -ENOENT when no mount has that (normalised) path. */
SNAPCELL_API int snapcell_config_remove_mount(struct snapcell_config *cfg, const char *mount_path,
					      struct snapcell_error *err);
SNAPCELL_API size_t snapcell_config_mount_count(const struct snapcell_config *cfg);
/* Borrowed until the next change to cfg; mount_path is "/input/...". */
SNAPCELL_API int snapcell_config_mount_info(const struct snapcell_config *cfg, size_t index,
					    const char **host_path, const char **mount_path,
					    struct snapcell_error *err);

/* "/input/<path>" from a user's mount path: surrounding whitespace stripped, backslashes made
 * slashes, empty and "." parts and one leading "input" dropped. SNAPCELL_E_INVAL (with the
 * reason in err) for "..", for a path that names /input itself, or for one that is not UTF-8
 * or holds a control character (the model is told the path, as text). */
SNAPCELL_API int snapcell_normalize_mount_path(const char *in, char *out, size_t out_len,
					       struct snapcell_error *err);

/* A signature of a file or tree: relative path, size and modification time of every regular
 * file, and the path of every directory; links excluded, a symlinked root walked through its
 * target. It changes
 * when a file does, so callers can key cached sandboxes by it. 32 hex digits and a NUL. */
#define SNAPCELL_SIGNATURE_LEN 33
SNAPCELL_API int snapcell_tree_signature(const char *path, char out[SNAPCELL_SIGNATURE_LEN],
					 struct snapcell_error *err);

/* The nesting depth of a JSON text and an upper bound on the number of values it holds
 * (containers, keys and scalars), counted in one pass without parsing it, strings skipped: a
 * caller reading JSON from an untrusted peer refuses a text past its bounds before a parser
 * builds the tree (jansson spends ~150 bytes on an empty object, 80 times its text). The
 * bound holds for any text a parser accepts. Never fails; text need not be NUL-terminated. */
SNAPCELL_API void snapcell_json_measure(const char *text, size_t len, unsigned *depth,
					size_t *values);

/* ---- network allow-list ----
 *
 * Entries are stored, copied with the config, listed, shown to the model by
 * snapcell_config_describe and enforced by the egress gate. A target is one of:
 *   "host"                      ports 80 and 443 ("api.example.com")
 *   "host:port"                 that port ("127.0.0.1:8080", "[::1]:8080")
 *   "http://host", "https://host[:port]"   the scheme's port (or the one given)
 *   "https://host[:port]/prefix"  a path rule: requests whose path is the prefix or goes on
 *                               from it at a '/' ("/v1" allows "/v1", "/v1/x", "/v1?q", not
 *                               "/v10"); "host/prefix" without a scheme: ports 80 and 443
 *   "*.example.com[:port]"      its subdomains at any depth, not example.com itself
 *   an IP literal               a dotted quad, or IPv6 in brackets, with or without a port
 * Names are lower-cased and a trailing dot dropped; non-ASCII names become their IDNA
 * A-labels ("bücher.de" -> "xn--bcher-kva.de"). The normalised text (what
 * snapcell_allowed_info lists) is "host", "host:port", "*.suffix[:port]", "[v6][:port]", or
 * with a path "scheme://host[:port]/prefix" (the port only when not the scheme's) or
 * "host[:port]/prefix"; "https://h" without a path is "h:443". Refused, with the reason in
 * err (SNAPCELL_E_INVAL): credentials (user@host), a query or fragment, a backslash,
 * whitespace or control bytes inside, schemes other than http and https, bad ports (1-65535),
 * an unbracketed IPv6 address or one with a zone, IPv4 addresses not written as a dotted quad
 * ("127.1", "0x7f000001", "2130706433") and names whose last label is a number, a '*' other
 * than a leading "*." before at least two labels, and paths with "//", "." or ".." segments,
 * a backslash, non-ASCII bytes or percent-encoded '/', '.', '\', '%', NUL or characters that
 * need no encoding. Connections go only to public addresses (no loopback, private,
 * link-local, CGNAT, metadata, multicast, broadcast or unspecified address, in any spelling,
 * after resolution too) unless the entry is that IP literal. */

/* Bytes of a target in the reference's host form, NUL included: a 253-byte host, ':' and a
 * 5-digit port. */
#define SNAPCELL_TARGET_MAX 260

/* "host" or "host:port" from a user's target, as the reference integration normalises it
 * (the Agent Framework adapter lists this form and allows it): surrounding whitespace
 * stripped, lower-cased, a scheme ("https://"), path, query, fragment and trailing '/'
 * dropped ("https://API.example.com/v1" -> "api.example.com", "127.0.0.1:8080" stays,
 * "[::1]:8080" stays bracketed, "*.Example.org" -> "*.example.org", a wildcard being a
 * leading "*." as snapcell_config_allow takes it). SNAPCELL_E_INVAL (the reason in err) for
 * an empty target, whitespace or control bytes inside, non-ASCII text (give an IDN in its
 * xn-- form), credentials (user@host), a '*' anywhere else, a bad port (1-65535), an
 * unbracketed IPv6 address, or out_len too small (SNAPCELL_TARGET_MAX always suffices). */
SNAPCELL_API int snapcell_normalize_domain(const char *in, char *out, size_t out_len,
					   struct snapcell_error *err);

/* Allows target (any form above) for the given HTTP methods: NULL for any method, else
 * n_methods >= 1 strings, each stripped and upper-cased, an HTTP token (RFC 9110) of at most
 * 32 bytes; duplicates are dropped and the rest kept sorted; at most 32 given. An entry for
 * the same normalised target replaces the earlier one (its headers included).
 * SNAPCELL_E_INVAL with the reason in err; SNAPCELL_E_TOO_BIG past 256 targets or 32
 * distinct ports over all targets. */
SNAPCELL_API int snapcell_config_allow(struct snapcell_config *cfg, const char *target,
				       const char *const *methods, size_t n_methods,
				       struct snapcell_error *err);
/* A header the host adds to every request it lets through for target's entry (which must
 * exist: -ENOENT otherwise; target is normalised first), e.g. "Authorization". The value is
 * never listed, described, logged or shown to a cell, and never travels in cleartext: the
 * host adds it only to requests it makes over TLS it verified, and refuses (403, naming the
 * entry) a request the code makes to the entry in plain HTTP; an entry allowed as
 * "http://..." takes no header (SNAPCELL_E_INVAL). In value, "${env:NAME}" is the host's
 * environment variable NAME (an error if unset), "${file:PATH}" the whole file (one trailing
 * newline dropped; an error if it is missing or larger than 8 KiB) and "$$" a '$', all read
 * now. SNAPCELL_E_INVAL for a name that is not an HTTP token, a header the host owns (Host,
 * Connection, Content-Length, Transfer-Encoding, Upgrade, TE, Trailer, Keep-Alive, Proxy-*,
 * method overrides), an empty value or control bytes in it; the same name replaces;
 * SNAPCELL_E_TOO_BIG past 16 headers or 8 KiB of value. */
SNAPCELL_API int snapcell_config_allow_header(struct snapcell_config *cfg, const char *target,
					      const char *name, const char *value,
					      struct snapcell_error *err);
/* target is normalised first; -ENOENT if no entry has it. */
SNAPCELL_API int snapcell_config_remove_allowed(struct snapcell_config *cfg, const char *target,
						struct snapcell_error *err);
SNAPCELL_API size_t snapcell_config_allowed_count(const struct snapcell_config *cfg);
struct snapcell_allowed_info {
	const char *target;	    /* normalised */
	const char *const *methods; /* sorted; NULL when any method */
	size_t n_methods;
	const char *path;     /* the path prefix ("/v1"), or NULL for any path */
	size_t n_headers;     /* headers the host adds (snapcell_config_allowed_header_name) */
	uint64_t reserved[2]; /* zeroed (ABI growth; path and n_headers took two of four) */
};
/* Entries sorted by target; the strings are borrowed until the next change to cfg. */
SNAPCELL_API int snapcell_config_allowed_info(const struct snapcell_config *cfg, size_t index,
					      struct snapcell_allowed_info *out,
					      struct snapcell_error *err);
/* The name of header h (< n_headers) of entry index, borrowed like the info; never its value. */
SNAPCELL_API int snapcell_config_allowed_header_name(const struct snapcell_config *cfg,
						     size_t index, size_t h, const char **name,
						     struct snapcell_error *err);

/* Lookups of name (a host name as snapcell_normalize_domain writes it) answer address (an
 * IPv4 or IPv6 literal) instead of DNS: for tests and private names. It replaces only the
 * lookup: the name must still be allowed, and the address rules still apply to address.
 * A later call for the same name replaces it. */
SNAPCELL_API int snapcell_config_map_host(struct snapcell_config *cfg, const char *name,
					  const char *address, struct snapcell_error *err);
/* The CA bundle (PEM file) the host verifies upstream TLS servers with, for entries whose
 * requests the host makes itself (HTTP rules); NULL for the system's. */
SNAPCELL_API int snapcell_config_set_upstream_ca(struct snapcell_config *cfg, const char *path,
						 struct snapcell_error *err);

/* ---- host tools ---- */

/* Whether running code that may call a tool needs a human's approval first. snapcell only
 * records it; front ends (agent frameworks) act on it. */
enum snapcell_approval {
	SNAPCELL_APPROVAL_NEVER,
	SNAPCELL_APPROVAL_ALWAYS,
};

/* A host tool. Called on the thread that called snapcell_sandbox_run(), with the keyword
 * arguments the code passed, as a JSON object (UTF-8, NUL-terminated, already checked against
 * the tool's parameter schema). On success return 0 and set *result to a malloc'd JSON text
 * (any JSON value); on failure return non-zero and set *result to a malloc'd UTF-8 message,
 * which the code receives as ToolError. snapcell frees *result. */
typedef int (*snapcell_tool_fn)(void *user_data, const char *args_json, char **result);

/* Inside a tool callback: the wall-clock deadline of the run that called it, in microseconds
 * of CLOCK_MONOTONIC (compare with clock_gettime(CLOCK_MONOTONIC, ...)); 0 on a thread that is
 * not in a tool callback. The run is killed as `timeout` at its deadline and a later answer
 * is dropped, so a callback that may block (a command, a request) should give up by then. */
SNAPCELL_API uint64_t snapcell_tool_deadline_us(void);
/* Inside a tool callback: a descriptor that becomes readable (POLLIN) once the run that
 * called it is cancelled (its snapcell_cancel token fired), to poll beside the callback's own
 * descriptors; -1 when the run has no token or on a thread that is not in a tool callback.
 * Poll it only: never read, write or close it. A cancelled run's answer is dropped (the
 * code never sees it) and the run ends as SNAPCELL_STATUS_CANCELLED once the callback
 * returns, so a callback that may block (a command, a request) should give up when it fires,
 * ending what it started. */
SNAPCELL_API int snapcell_tool_cancel_fd(void);

/* An asynchronous face for a tool (snapcell_config_set_tool_async): a call that code awaits
 * in an event loop (`await tools.x(...)`, asyncio.gather) is started with this, on the run's
 * thread, and answered later, from any thread, with snapcell_call_answer; up to
 * SNAPCELL_LIMIT_TOOL_CALLS of a run's calls are in flight at once. Calls made by code that does
 * not await (plain `tools.x(...)`) still go to the tool's snapcell_tool_fn, one at a time. */
struct snapcell_call;
typedef void (*snapcell_tool_start_fn)(void *user_data, struct snapcell_call *call,
				       const char *args_json);
/* Asks a started call to end early: its run is ending (the code finished, timed out, was
 * cancelled or killed). Called on the run's thread, at most once per call and only while it is
 * unanswered: an answer from another thread waits until the cancel returned (one from the
 * cancel itself does not), so the cancel may use what the answering side frees after it
 * answered. The call must still be answered, and the run returns only once every started call
 * was. */
typedef void (*snapcell_tool_cancel_fn)(void *user_data, struct snapcell_call *call);

/* Gives the registered tool `name` an asynchronous face (start; cancel may be NULL), called
 * with the tool's user_data; NULL start removes it. Registering the tool again removes it too.
 * -ENOENT when no tool has that name. */
SNAPCELL_API int snapcell_config_set_tool_async(struct snapcell_config *cfg, const char *name,
						snapcell_tool_start_fn start,
						snapcell_tool_cancel_fn cancel,
						struct snapcell_error *err);
/* Answers a started call, exactly once, from any thread: ok with a JSON text, or not ok with
 * a UTF-8 message the code receives as ToolError (NULL: a generic one). text is copied. The
 * call is gone afterwards. */
SNAPCELL_API void snapcell_call_answer(struct snapcell_call *call, bool ok, const char *text);
/* The deadline of the call's run (as snapcell_tool_deadline_us gives it). */
SNAPCELL_API uint64_t snapcell_call_deadline_us(const struct snapcell_call *call);
/* A pointer of the tool's own, kept with the call until it is answered (NULL at first). */
SNAPCELL_API void snapcell_call_set_data(struct snapcell_call *call, void *data);
SNAPCELL_API void *snapcell_call_data(const struct snapcell_call *call);

#define SNAPCELL_TOOL_NAME_MAX 128

/* Registers a tool, or replaces the one with the same name. The name is MCP-style: 1 to
 * SNAPCELL_TOOL_NAME_MAX characters of [A-Za-z0-9_.-] ("fx_rate", "docs.search-v2"). The code
 * calls it as call_tool("docs.search-v2", ...) or tools.docs.search_v2(...): in the `tools`
 * module each dot-separated segment becomes an identifier (other characters turn into '_', a
 * leading digit or an empty segment gets a '_' before it, a Python keyword one after it). A
 * name whose attribute path is another tool's, or holds or lies inside another's ("a.b" with
 * "a.b.c"), is SNAPCELL_E_INVAL naming both. user_data is passed through untouched.
 * params_schema is a JSON Schema object (NULL for "any object"), as pydantic derives from
 * annotations or an MCP server lists. Checked before the callback runs:
 *   type (incl. lists), enum, const; properties, required, additionalProperties,
 *   patternProperties, propertyNames, minProperties, maxProperties; items (a schema, or the
 *   pre-2020 tuple array with additionalItems), prefixItems, contains, minItems, maxItems,
 *   uniqueItems; minLength, maxLength (in code points), pattern; minimum, maximum,
 *   exclusiveMinimum, exclusiveMaximum (a number, or draft 4's boolean), multipleOf; anyOf,
 *   oneOf, allOf, not; boolean schemas; $ref to a local JSON pointer ("#", "#/$defs/X",
 *   "#/definitions/X", with ~0 ~1 and %XX escapes) beside $defs and definitions.
 * Accepted but not checked (annotations): title, description, default, examples, format,
 * deprecated, readOnly, writeOnly, discriminator (oneOf still decides), contentEncoding,
 * contentMediaType, $comment, $schema, and $id at the root only.
 * Any other keyword (if/then/else, dependentRequired, unevaluatedProperties, $anchor, ...), a
 * remote $ref, a $ref to something that is not a schema, or a pattern PCRE2 cannot compile is
 * SNAPCELL_E_INVAL: a schema never silently checks less than it says.
 * Patterns are PCRE2 (ECMA-262-like: unanchored, UTF-8, \d and \w ASCII, $ only at the end,
 * \uXXXX escapes), compiled once here. Equality (enum, const, uniqueItems) is by JSON value:
 * 1 equals 1.0, key order does not matter. Numbers compare exactly (a 64-bit integer against
 * a double without rounding); integers must fit in 64 bits, and "integer" also admits a
 * fraction-free double in that range. multipleOf is exact for integers and within a relative
 * 1e-9 otherwise. One call's check is bounded (nesting, steps, pattern steps) and a bound hit
 * refuses the call. The callback receives the arguments as the code sent them except that each
 * non-integer number is respelt as the shortest text of the double that was checked (the
 * text 0.99999999999999999 arrives as 1.0). SNAPCELL_E_INVAL for a bad name or schema; the
 * message says which and why ("add_tool compute: schema: properties.a: unknown keyword 'if'"). */
SNAPCELL_API int snapcell_config_add_tool(struct snapcell_config *cfg, const char *name,
					  const char *description, const char *params_schema,
					  enum snapcell_approval approval, snapcell_tool_fn fn,
					  void *user_data, struct snapcell_error *err);

/* -ENOENT when no tool has that name. */
SNAPCELL_API int snapcell_config_remove_tool(struct snapcell_config *cfg, const char *name,
					     struct snapcell_error *err);

/* Tools in registration order (a replaced tool keeps its place). The strings are borrowed
 * until the next change to cfg; schema is the normalised JSON text. */
struct snapcell_tool_info {
	const char *name;
	const char *description;
	const char *params_schema;
	enum snapcell_approval approval;
	uint64_t reserved[4]; /* zeroed (ABI growth) */
};
SNAPCELL_API size_t snapcell_config_tool_count(const struct snapcell_config *cfg);
SNAPCELL_API int snapcell_config_tool_info(const struct snapcell_config *cfg, size_t index,
					   struct snapcell_tool_info *out,
					   struct snapcell_error *err);

/* ---- what the model is told ----
 *
 * One wording for every front end (CLI, MCP server, the Python agent integration): the
 * description of the `execute_code` tool and the instructions a provider adds to the system
 * prompt, both built from the config. The text is deterministic for a given config. */

enum snapcell_describe_format {
	SNAPCELL_DESCRIBE_COMPACT, /* one line per parameter; JSON Schema only where needed */
	SNAPCELL_DESCRIBE_JSON,	   /* each tool's parameters as its JSON Schema */
	/* OR'd into either format: the tool keeps one interpreter between its calls (a session),
	 * and the text says that state persists */
	SNAPCELL_DESCRIBE_STATEFUL = 1 << 8,
};

/* The execute_code tool description: how to call tools from the code (`call_tool(name,
 * **kwargs)` and `tools.<name>(**kwargs)`, both built-ins, ToolError, and one example call of
 * a registered tool), each registered tool with its description and
 * parameters (compact: type, required or optional, default, per parameter; a tool with a
 * parameter that is not a scalar or an array of scalars, optionally "or null" (an object,
 * an array of objects, a wider union, a $ref), is shown as its JSON Schema instead), the
 * files (/input and each mounted path, /output for artifacts; or none), and the network
 * targets with their methods (or no network access). *out is malloc'd (release with free()).
 * SNAPCELL_E_TOO_BIG when the text would pass 256 KiB. */
SNAPCELL_API int snapcell_config_describe(const struct snapcell_config *cfg,
					  enum snapcell_describe_format format, char **out,
					  struct snapcell_error *err);

/* Describes the registered tool `name` in this format whatever format describe is given (the
 * reference integration's per-tool tool_description_format); until the tool is registered
 * again. -ENOENT when no tool has that name. */
SNAPCELL_API int snapcell_config_set_tool_describe_format(struct snapcell_config *cfg,
							  const char *name,
							  enum snapcell_describe_format format,
							  struct snapcell_error *err);

/* The provider instructions (system-prompt text): execute_code is the primary tool, the code
 * must print its answer, with files configured large results go to /output/<file>, and
 * with registered tools that they are called from the code.
 * They name no other tool and leave tools, files and network to the description. *out is
 * malloc'd (free()). */
SNAPCELL_API int snapcell_config_instructions(const struct snapcell_config *cfg, char **out,
					      struct snapcell_error *err);

enum snapcell_instructions_flag {
	/* the front end also offers the model some of the registered tools directly (not
	 * only through execute_code): the text asks to prefer execute_code to combine them */
	SNAPCELL_INSTRUCTIONS_TOOLS_VISIBLE = 1u << 0,
};

/* snapcell_config_instructions with SNAPCELL_INSTRUCTIONS_* flags (0: the same text). With
 * registered tools, the text says whether they are also offered directly. SNAPCELL_E_INVAL
 * for an unknown flag. */
SNAPCELL_API int snapcell_config_instructions_with(const struct snapcell_config *cfg,
						   unsigned flags, char **out,
						   struct snapcell_error *err);

/* The approval execute_code needs: ALWAYS when base is ALWAYS or any registered tool requires
 * approval, else NEVER. */
SNAPCELL_API enum snapcell_approval snapcell_config_approval(const struct snapcell_config *cfg,
							     enum snapcell_approval base);

/* Fails sandbox creation with SNAPCELL_E_ISOLATION when the host cannot reach this level; the
 * message names the level the host gives, what stops a higher one and what to change. A host
 * without usable user namespaces gives SNAPCELL_ISOLATION_RLIMITS (docs/architecture.md,
 * "Isolation levels"), where network entries fail creation the same way. */
SNAPCELL_API int snapcell_config_require_isolation(struct snapcell_config *cfg,
						   enum snapcell_isolation level,
						   struct snapcell_error *err);

/* ---- sandbox ---- */

struct snapcell_sandbox;

/* Starts the template: a helper process in its own namespaces (or, at level rlimits, under
 * Landlock in the caller's) with CPython initialised and the common standard library
 * imported. The config is copied; it may be freed afterwards. A helper that cannot be found
 * fails with -ENOENT naming its path; one that speaks another protocol (from another snapcell
 * version) or is no snapcell-cell at all fails with SNAPCELL_E_HELPER naming both protocol
 * versions, within seconds. */
SNAPCELL_API int snapcell_sandbox_new(const struct snapcell_config *cfg,
				      struct snapcell_sandbox **out, struct snapcell_error *err);

/* Ends the template and every cell it started (running ones are killed) and removes the
 * sandbox's temporary directory. Must not race with a run on the same sandbox. */
SNAPCELL_API void snapcell_sandbox_free(struct snapcell_sandbox *sb);

SNAPCELL_API enum snapcell_isolation snapcell_sandbox_isolation(const struct snapcell_sandbox *sb);
/* Whether sb's fresh cells are armed for reset in place: its config asks for reuse, its level
 * is namespaces or cgroups, it has no network entries, and the kernel gives what reuse needs
 * (snapcell_probe_reuse). False: every run gets a newly forked cell. */
SNAPCELL_API bool snapcell_sandbox_reuse(const struct snapcell_sandbox *sb);
/* What snapcell_config_set_reuse last set on cfg (false for NULL): asked for, not in use. */
SNAPCELL_API bool snapcell_config_reuse(const struct snapcell_config *cfg);

/* Memory a sandbox holds while idle, from /proc/PID/smaps_rollup (private = pages no other
 * process shares: what the sandbox really costs). */
struct snapcell_sandbox_stats {
	int template_pid; /* in the caller's pid namespace */
	uint64_t template_private_bytes;
	unsigned parked_cells;		    /* cells forked ahead and waiting for code */
	uint64_t parked_cell_private_bytes; /* mean over the parked cells */
	uint64_t reserved[4];		    /* zeroed (ABI growth) */
};

/* Waits until the template has parked its spare cells (and, at most 200 ms, for the answers to
 * resets in place under way), then measures; cells reset in place are not among parked_cells.
 * 0, SNAPCELL_E_INVAL,
 * or SNAPCELL_E_TEMPLATE when the template is gone. */
SNAPCELL_API int snapcell_sandbox_stats(struct snapcell_sandbox *sb,
					struct snapcell_sandbox_stats *out,
					struct snapcell_error *err);

/* ---- running code ---- */

enum snapcell_status {
	SNAPCELL_STATUS_OK,	       /* the code ran to its end, or SystemExit(0) */
	SNAPCELL_STATUS_ERROR,	       /* uncaught exception, SyntaxError, or non-zero exit */
	SNAPCELL_STATUS_TIMEOUT,       /* wall clock or CPU time limit */
	SNAPCELL_STATUS_MEMORY,	       /* the memory limit (MemoryError, or the cell's memory
					* cgroup's out-of-memory kill) */
	SNAPCELL_STATUS_KILLED,	       /* a signal ended the cell (seccomp tripwire, OOM, ...) */
	SNAPCELL_STATUS_OUTPUT_LIMIT,  /* stdout or stderr exceeded its limit */
	SNAPCELL_STATUS_SETUP_FAILURE, /* the cell could not be set up; the code did not run */
	SNAPCELL_STATUS_CANCELLED,     /* the run's cancellation token fired (see below) */
	SNAPCELL_STATUS_PAUSED,	       /* waiting for a decision on result->pending ("decisions") */
	SNAPCELL_STATUS_EXPIRED,       /* no decision came within SNAPCELL_LIMIT_PAUSE_MS */
};

/* "ok", "error", "timeout", "memory", "killed", "output-limit", "setup-failure",
 * "cancelled", "paused", "expired"; NULL for an unknown value. */
SNAPCELL_API const char *snapcell_status_name(enum snapcell_status status);

/* The value of the code's last statement, when that statement is an expression (as an
 * interactive interpreter would show it, but never printed): the cell evaluates it and sends
 * its JSON (json.dumps with allow_nan=False: tuples become arrays, dict keys strings). Why a
 * result has none: */
enum snapcell_value_state {
	SNAPCELL_VALUE_NOT_EVALUATED, /* the run did not end ok (an exception, sys.exit, a limit,
				       * a kill, a cancellation) or is paused */
	SNAPCELL_VALUE_PRESENT,	      /* value_json holds it */
	SNAPCELL_VALUE_NO_EXPRESSION, /* the last statement is not an expression (x = 3) */
	SNAPCELL_VALUE_NONE,	      /* its value is None (print(...) too) */
	/* not representable as JSON: an object json cannot encode, NaN or infinity, a cycle,
	 * nesting past 64 levels, a string that is not valid Unicode, duplicate keys */
	SNAPCELL_VALUE_NOT_JSON,
	SNAPCELL_VALUE_TOO_LARGE, /* its JSON is over SNAPCELL_VALUE_MAX_BYTES */
};

/* The cap on a value's JSON text, in bytes. */
#define SNAPCELL_VALUE_MAX_BYTES 262144

/* "not_evaluated", "present", "no_expression", "none", "not_json", "too_large"; NULL for an
 * unknown value. */
SNAPCELL_API const char *snapcell_value_state_name(enum snapcell_value_state state);

struct snapcell_tool_call;
struct snapcell_pending_call;
struct snapcell_decision;

struct snapcell_result {
	enum snapcell_status status;
	int exit_code;	     /* the cell's exit status; 1 for an uncaught exception */
	int term_signal;     /* the signal that ended the cell, or 0 */
	uint32_t limits_hit; /* SNAPCELL_HIT_* */
	char *stdout_buf;    /* NUL-terminated for convenience; may contain NULs */
	size_t stdout_len;
	bool stdout_truncated;
	char *stderr_buf; /* holds the traceback of an uncaught exception */
	size_t stderr_len;
	bool stderr_truncated;
	uint64_t wall_us; /* code delivery to the cell's end */
	uint64_t cpu_us;  /* user + system time of the cell and its reaped children */
	/* The peak of the memory charged to the host for the cell, all its processes together,
	 * page tables and kernel memory included: its memory cgroup's figure, at isolation
	 * SNAPCELL_ISOLATION_CGROUPS. 0 when no cgroup measured the run (a lower level, or a
	 * session's run): peak_rss_bytes is then the only figure, and not this one. */
	uint64_t peak_memory_bytes;
	enum snapcell_isolation isolation;
	struct snapcell_tool_call *tool_calls; /* in call order */
	size_t n_tool_calls;
	size_t n_tool_calls_dropped; /* calls past the log's cap (100,000) */
	/* What the code left in /output: regular files only, sorted by path. */
	struct snapcell_artifact *artifacts;
	size_t n_artifacts;
	/* Entries not collected (links, FIFOs, sockets, over a cap), with why; the list keeps at
	 * most 100, n_skipped counts them all. */
	struct snapcell_skipped_output *skipped;
	size_t n_skipped_listed, n_skipped;
	uint32_t output_limits_hit; /* SNAPCELL_OUTPUT_HIT_* */
	/* Every network attempt of the run (a name asked, a connection, an HTTP request), in
	 * order. Room for 10,000 allowed events is kept whatever is refused (traffic past them
	 * is refused, never unrecorded); refusals keep 1,000 events of their own, and a refusal
	 * or lookup like one listed adds to its count. n_net_events_dropped counts the
	 * refusals past that share. */
	struct snapcell_net_event *net_events;
	size_t n_net_events, n_net_events_dropped;
	uint32_t net_limits_hit; /* SNAPCELL_NET_HIT_* */
	/* The largest resident set of one cell process (getrusage's ru_maxrss), as the cell's
	 * first process or the template saw it: resident peak, not the memory charged to the
	 * host (page tables, kernel memory and the sum over processes are not in it), and the
	 * code's to understate when it ended the run itself. */
	uint64_t peak_rss_bytes;
	/* SNAPCELL_STATUS_PAUSED: the call waiting for a decision; NULL otherwise. */
	struct snapcell_pending_call *pending;
	/* Every decision of the run so far, in order (see "decisions"). */
	struct snapcell_decision *decisions;
	size_t n_decisions;
	/* The last expression's value as JSON text (one value, valid UTF-8, no duplicate keys,
	 * at most SNAPCELL_VALUE_MAX_BYTES, NUL-terminated), or NULL; value_state says why it is
	 * NULL. Only a run that ended ok has one. */
	char *value_json;
	enum snapcell_value_state value_state;
};

/* The names the result's record (snapcell_result_to_json) and every front end give a single
 * flag of a result's sets, static; NULL for a value that is not exactly one known flag:
 * limits_hit ("wall", "cpu", "memory", ...), output_limits_hit ("files", "file_bytes", ...),
 * net_limits_hit ("connections", ...); snapcell_net_kind_name (below) names an event's kind. */
SNAPCELL_API const char *snapcell_limit_flag_name(uint32_t flag);
SNAPCELL_API const char *snapcell_output_limit_flag_name(uint32_t flag);
SNAPCELL_API const char *snapcell_net_hit_name(uint32_t flag);

/* One network attempt, as the host's egress gate saw it. */
enum snapcell_net_kind {
	SNAPCELL_NET_RESOLVE, /* the code asked for a name */
	SNAPCELL_NET_CONNECT, /* a TCP stream, passed through (TLS stays end to end) */
	SNAPCELL_NET_REQUEST, /* one HTTP request through an entry with HTTP rules */
};

/* "resolve", "connect", "request" (the record's "kind"); NULL for an unknown value. */
SNAPCELL_API const char *snapcell_net_kind_name(enum snapcell_net_kind kind);

struct snapcell_net_event {
	enum snapcell_net_kind kind;
	bool allowed;
	const char *target;  /* what the code asked for: a name, or an address */
	const char *address; /* the upstream address (pinned after resolution), or NULL */
	uint16_t port;	     /* 0 for a name */
	const char *method;  /* SNAPCELL_NET_REQUEST; NULL otherwise */
	const char *path;
	int http_status;   /* the upstream's, or 0 */
	bool header_added; /* the entry's headers went upstream (values are never shown) */
	/* The entry that allowed it, or why it was refused ("evil.example is not on this
	 * sandbox's allow list"). */
	const char *rule;
	uint64_t bytes_out; /* from the code towards the upstream */
	uint64_t bytes_in;
	uint64_t started_us; /* from the run's start; the list is in this order */
	uint64_t duration_us;
	/* SNAPCELL_NET_REQUEST: the host made (or tried to make) the request upstream over TLS
	 * it verifies, so nothing of it crossed in cleartext; false when it was refused before
	 * going upstream or went as plain HTTP. SNAPCELL_NET_CONNECT: the stream passed through
	 * began with a TLS ClientHello (end to end; the cell verifies). */
	bool upstream_tls;
	/* The attempts this event stands for: 1, or more for a refusal repeated with the same
	 * kind, target, port and rule (coalesced so refusals cannot crowd out the record). */
	uint64_t count;
};

/* Network limits a run hit (their attempts are in the list, refused). */
enum snapcell_net_hit {
	SNAPCELL_NET_HIT_CONNECTIONS = 1u << 0, /* more open connections than the cap */
	SNAPCELL_NET_HIT_BYTES = 1u << 1,	/* the run's byte budget (charged as bytes move) */
	SNAPCELL_NET_HIT_NAMES = 1u << 2,	/* more distinct names than the cap (256) */
	SNAPCELL_NET_HIT_EVENTS = 1u << 3,	/* the list's caps (allowed or refused) */
};

/* A file the code wrote under /output. path is relative to /output, as raw bytes (any byte
 * but '/' and NUL may occur in a name), NUL-terminated. */
struct snapcell_artifact {
	char *path;
	const char *media_type; /* guessed from the name; static */
	uint64_t size;
	uint8_t *data; /* size bytes */
};

struct snapcell_skipped_output {
	char *path;
	const char *reason; /* static: "symbolic link", "fifo", "file over the size cap", ... */
};

enum snapcell_output_limit_flag {
	SNAPCELL_OUTPUT_HIT_FILES = 1u << 0,	  /* more files than the file-count cap */
	SNAPCELL_OUTPUT_HIT_FILE_BYTES = 1u << 1, /* a file over the per-file cap */
	SNAPCELL_OUTPUT_HIT_TOTAL_BYTES = 1u << 2,
	SNAPCELL_OUTPUT_HIT_DEPTH = 1u << 3,
	SNAPCELL_OUTPUT_HIT_NAME = 1u << 4, /* a path longer than the name cap */
	/* the walk stopped early: its visit budget (twice the /output inode cap) or deadline
	 * (5 s) ran out, which a tree that stands still (it is read once every process that
	 * could write it is dead or stopped) should never cause; what was collected before is
	 * kept */
	SNAPCELL_OUTPUT_HIT_WALK = 1u << 5,
};

/* One entry of a run's tool-call log. */
struct snapcell_tool_call {
	/* as the code sent it, in printable ASCII: other bytes (a NUL, non-UTF-8) and '\\' as
	 * \xNN, cut with "..." past the array */
	char name[SNAPCELL_TOOL_NAME_MAX + 1];
	size_t args_bytes;
	uint64_t duration_us;
	bool ok; /* false: unknown tool, invalid arguments or the tool failed */
};

/* ---- decisions ----
 *
 * A tool can need a decision on each call (snapcell_config_set_tool_decision). When code calls
 * it and the arguments pass the schema, the run pauses: the cell stays blocked in the call,
 * the wall-clock limit stops counting (it counts only running time) and the run returns a
 * result with status SNAPCELL_STATUS_PAUSED, the output so far (stdout and stderr from the
 * start, the tool calls so far; artifacts come with the final result only) and result->pending.
 * snapcell_sandbox_resume, from any thread, gives the decision: approve (the tool runs, once,
 * on the resuming thread), reject (the code gets ToolError with the reason) or a value (the
 * tool does not run; the code gets the value). The run then goes on and may pause again. Calls
 * from several threads of the code wait for each other (the cell serialises them in call
 * order), so each is its own pause, one at a time, in that order; a frame the code writes on its
 * socket while its call waits gets the cell killed at the resume, and nothing it asked for runs. At
 * most SNAPCELL_LIMIT_PAUSED_RUNS runs of a sandbox wait at once (past it the call gets ToolError
 * naming the bound); one that waits past SNAPCELL_LIMIT_PAUSE_MS ends as SNAPCELL_STATUS_EXPIRED
 * and its cell is killed (by a thread the sandbox starts at its first pause, which only does that
 * and, at level rlimits, measures paused runs' /tmp and /output); freeing the sandbox ends every
 * paused run. A session's run pauses the same way and keeps its family's turn: while it waits,
 * another run, snapshot or restore of any session of the family fails with -EBUSY (instead of
 * waiting for minutes), and freeing the session ends the run; one that expires ends the session's
 * process (as a timeout does). The egress gate's deadline is not moved by pauses: a run with
 * network entries cannot connect once SNAPCELL_LIMIT_WALL_MS has passed since its start, pauses
 * included. */

struct snapcell_run_options;

struct snapcell_pending_call {
	uint64_t id; /* unique in the process; names the run to snapcell_sandbox_resume */
	char name[SNAPCELL_TOOL_NAME_MAX + 1];
	char *arguments; /* the validated arguments, a JSON object (as the tool would get them) */
};

enum snapcell_verdict {
	SNAPCELL_VERDICT_APPROVED, /* the tool ran */
	SNAPCELL_VERDICT_REJECTED, /* the code got ToolError */
	SNAPCELL_VERDICT_VALUE,	   /* the code got a value the host supplied */
	SNAPCELL_VERDICT_EXPIRED,  /* no decision in time: the run ended */
	SNAPCELL_VERDICT_CLOSED,   /* the sandbox ended while the run waited */
};

/* "approved", "rejected", "value", "expired", "closed"; NULL for an unknown value. */
SNAPCELL_API const char *snapcell_verdict_name(enum snapcell_verdict verdict);

/* One decision, in a result's decisions. */
struct snapcell_decision {
	uint64_t pending_id;
	char name[SNAPCELL_TOOL_NAME_MAX + 1];
	char *arguments; /* as in the pending call */
	enum snapcell_verdict verdict;
	char *text;		/* the reason (rejected) or the value's JSON (value); else NULL */
	char *decided_by;	/* the caller's word ("alice", "terminal"), or NULL */
	uint64_t decided_at_ms; /* CLOCK_REALTIME, milliseconds since the epoch */
	uint64_t waited_us;	/* from the pause to the decision */
	size_t call_index;	/* its entry in tool_calls; SIZE_MAX when it has none */
};

/* Marks tool name (registered: -ENOENT otherwise) as needing a decision on each call, or not.
 * Apart from its snapcell_approval: a tool that needs a decision per call does not make
 * execute_code need approval (snapcell_config_approval) unless its approval says so. Adding the
 * tool again keeps the mark. */
SNAPCELL_API int snapcell_config_set_tool_decision(struct snapcell_config *cfg, const char *name,
						   bool needed, struct snapcell_error *err);
SNAPCELL_API bool snapcell_config_tool_needs_decision(const struct snapcell_config *cfg,
						      const char *name);

/* Gives the decision on the paused run whose pending call has id pending_id. text: for
 * REJECTED the reason (NULL for a stock one), for VALUE a JSON text (any value; required);
 * else ignored. decided_by (may be NULL) is recorded as is. opts as for a run (a cancellation
 * token for what follows). Returns 0 and the run's next result (paused again, or final; one
 * that expired before the decision is final with status SNAPCELL_STATUS_EXPIRED and the tool
 * never ran). -ENOENT when no run of this sandbox waits with that id (already resumed, by
 * another thread too: exactly one caller wins; or never this sandbox's), SNAPCELL_E_INVAL
 * for a bad verdict or value; both change nothing. */
SNAPCELL_API int snapcell_sandbox_resume(struct snapcell_sandbox *sb, uint64_t pending_id,
					 enum snapcell_verdict verdict, const char *text,
					 const char *decided_by,
					 const struct snapcell_run_options *opts,
					 struct snapcell_result **out, struct snapcell_error *err);

/* ---- cancellation ----
 *
 * A token that ends runs from outside: another thread, a signal handler, an event loop. It is
 * one-shot: once fired it stays fired, and every run given it (at once or later) ends as
 * SNAPCELL_STATUS_CANCELLED. A run in progress has its cell killed, as at the wall-clock limit,
 * and returns within milliseconds with the output so far; a tool callback already running is
 * not interrupted (the run ends when it returns, and its answer is dropped), but it can watch
 * snapcell_tool_cancel_fd() and give up early. A run started with a fired token is
 * cancelled before it starts: no cell is used and the code never runs. One token may serve
 * any number of runs at once; free it only after they returned. */
struct snapcell_cancel;

SNAPCELL_API int snapcell_cancel_new(struct snapcell_cancel **out, struct snapcell_error *err);
/* Thread-safe and async-signal-safe; c == NULL does nothing. */
SNAPCELL_API void snapcell_cancel_fire(struct snapcell_cancel *c);
SNAPCELL_API void snapcell_cancel_free(struct snapcell_cancel *c);

/* Options of one run; see the ABI rules at the top for size. opts == NULL means defaults. */
struct snapcell_run_options {
	size_t size;			/* sizeof(struct snapcell_run_options) */
	struct snapcell_cancel *cancel; /* NULL for none */
	/* Tools for this run only, added to the sandbox's: a config's tools, with their schemas
	 * and decision marks (snapcell_config_add_tool, snapcell_config_set_tool_decision; its
	 * other settings are not used). NULL for none. Copied when the run starts (a paused run
	 * keeps its copy; snapcell_sandbox_resume takes none). The code calls them like the
	 * sandbox's, and `tools` has them for this run only (a session's later runs do not).
	 * A name, or tools.<attr> path, that clashes with one of the sandbox's tools fails the
	 * run before it starts with SNAPCELL_E_INVAL naming both. No new template or cell
	 * setup: the cell learns them with the code. */
	const struct snapcell_config *tools;
	/* Files for this run only (snapcell_sandbox_run; a session's run and a resume refuse
	 * them with SNAPCELL_E_INVAL): n_files entries, read-only at /input/<name> beside the
	 * workspace's, gone for the next run. See struct snapcell_run_file. */
	const struct snapcell_run_file *files;
	size_t n_files;
};

/* Caps on one run's files: how many, and their bytes in all (SNAPCELL_E_TOO_BIG past them). */
#define SNAPCELL_RUN_FILES_MAX	     256
#define SNAPCELL_RUN_FILES_BYTES_MAX (64u << 20)

/* One file of a run (snapcell_run_options.files). name is where the code finds it under
 * /input: a relative path of UTF-8 parts, none empty, "." or "..", without control bytes, at
 * most 1,024 bytes, 32 parts and 255 bytes a part ("report.csv", "data/2024.json"); its parent
 * directories are made, and may be directories of the workspace (they then hold both). A name that
 * is a file or directory of the workspace, or has a file of it as a parent, or another file of the
 * run given twice or as a parent, is SNAPCELL_E_INVAL: the run's files add to the workspace, never
 * shadow it. The content is data (data_len bytes, copied when the run starts) or, when data is
 * NULL, the regular file at host_path, opened with O_NOFOLLOW (a link as its last part is refused,
 * as is anything but a regular file) and read when the run starts. The code sees them read-only
 * (mode 0444), in a cell the template forks for that run, whose /input is an overlay of the
 * run's directory over the workspace: no new template, and runs without files keep taking
 * parked cells. Level namespaces and cgroups only (SNAPCELL_E_ISOLATION at rlimits). */
struct snapcell_run_file {
	const char *name;
	const void *data; /* or NULL: host_path */
	size_t data_len;
	const char *host_path; /* used when data is NULL */
};

/* Runs code in a fresh cell of the template. code_len may be SIZE_MAX for a NUL-terminated
 * string; opts may be NULL. Returns 0 and a result whatever the code did (its status says how
 * it ended); a negative code only when the run could not happen (template gone, bad
 * argument). */
SNAPCELL_API int snapcell_sandbox_run(struct snapcell_sandbox *sb, const char *code,
				      size_t code_len, const struct snapcell_run_options *opts,
				      struct snapcell_result **out, struct snapcell_error *err);

SNAPCELL_API void snapcell_result_free(struct snapcell_result *res);

/* How the run ended, in the words every front end gives the model (the MCP server's content,
 * the Python integration's last item): the status and its cause. For an uncaught exception,
 * its type and message and the last lines of its traceback (from stderr); for a limit, the
 * limit by name ("the wall-clock time limit", "the memory limit"); for a non-zero exit,
 * "exited with status N" and the last stderr line; for a signal, its number and name. An ok
 * run gives one sentence saying so. At most a few KiB; *out is malloc'd (free()). */
SNAPCELL_API int snapcell_result_summary(const struct snapcell_result *res, char **out,
					 struct snapcell_error *err);

/* res->value_json: the last expression's JSON, or NULL (res->value_state says why). */
SNAPCELL_API const char *snapcell_result_value_json(const struct snapcell_result *res);

/* The value in the words every front end gives the model, after the run's other items:
 * "value: <json>" when there is one, a sentence saying why it is not shown when the last
 * expression's value is not JSON or too large, else NULL (no expression, None, a run that
 * did not end ok: nothing to say). *out is malloc'd (free()). */
SNAPCELL_API int snapcell_result_value_text(const struct snapcell_result *res, char **out,
					    struct snapcell_error *err);
/* A short title for how a run with this status ended, in the words of the summary above
 * ("Execution stopped: time limit reached"), for a front end that shows a title beside it
 * (the Agent Framework tool's error item). Static; NULL for an unknown value. */
SNAPCELL_API const char *snapcell_status_headline(enum snapcell_status status);

/* Flags of snapcell_result_to_json. */
enum snapcell_json_flag {
	/* Each artifact's bytes as "base64" (`snapcell run --json`); without it, only its path,
	 * media type and size. */
	SNAPCELL_JSON_ARTIFACT_DATA = 1u << 0,
};

/* The run's record as one compact JSON object, the one every front end gives (`snapcell run
 * --json`, the MCP server's _meta["snapcell/run"], structuredContent): "status",
 * "exit_code", "signal", "limits_hit", "stdout" and "stderr" (bytes that are not UTF-8 as
 * U+FFFD) with their "_truncated" flags, timings and memory figures, "isolation",
 * "decisions", the artifacts, skipped outputs and tool calls, and the network events with
 * their limits. Names come from the functions above (snapcell_status_name,
 * snapcell_limit_flag_name, ...). flags: SNAPCELL_JSON_*. *out is malloc'd (free()),
 * NUL-terminated, without a raw NUL (a NUL in the output is escaped). */
SNAPCELL_API int snapcell_result_to_json(const struct snapcell_result *res, unsigned flags,
					 char **out, struct snapcell_error *err);

/* Flags of snapcell_execute_code_schema. */
enum snapcell_schema_flag {
	/* The code's state persists between calls (a stateful tool): its description says so. */
	SNAPCELL_SCHEMA_STATEFUL = 1u << 0,
	/* An optional "session" property: a session's handle to run in (the MCP server's). */
	SNAPCELL_SCHEMA_SESSION = 1u << 1,
};

/* The JSON Schema of an execute_code tool's arguments: an object with the required string
 * "code" and, with SNAPCELL_SCHEMA_SESSION, the optional string "session"; no other
 * property. Static, compact JSON; NULL for unknown flags. */
SNAPCELL_API const char *snapcell_execute_code_schema(unsigned flags);

/* ---- sessions and snapshots ----
 *
 * A session keeps interpreter state (variables, imports), its /tmp and its working
 * directory between its runs; SystemExit ends only the run. A snapshot freezes that state
 * between runs (the interpreter, and a copy of /tmp, made when the snapshot is taken);
 * restoring it into a session, or starting new sessions from it, gives each its own copy of
 * both (branches diverge, and no branch sees another's /tmp). Processes and threads running
 * in a session when it is snapshotted do not exist in the snapshot; descriptors the code
 * keeps open are shared with it, as after fork. A /tmp copy leaves out sockets, makes hard
 * links separate files, fails past 32 directory levels, and counts, with every other tree of
 * the family, against the one /tmp size limit (SNAPCELL_LIMIT_TMP_BYTES): one that does not
 * fit fails the snapshot or restore with -ENOSPC and leaves the session as it was.
 * A session, its snapshots and the sessions started from them form one family sharing one
 * cell namespace, one /output and the sandbox's limits. Its runs (and snapshots and
 * restores) take turns: a run waits for the family's run in progress, on another thread,
 * to end (so a tool callback must not run, snapshot or restore a session of the family whose
 * run called it). Between runs every process of the family is stopped (SIGSTOP, which the code
 * cannot catch, whatever process group or session it moved to), so nothing writes /output
 * or /tmp while no run is in progress, and /output is collected from a tree nothing
 * changes; they continue (SIGCONT) when the family's next run starts: processes the code
 * left running work on during later runs of the family (their files appear in those runs'
 * artifacts), and one the code stopped itself is continued then too. A run that is killed
 * (timeout, output limit, cancellation) ends that session's process only, and a session that
 * failed that way can be revived with snapcell_session_restore(); a run cancelled before it
 * started leaves the session as it was. A session or snapshot is used by one thread at a
 * time; the sandbox's other runs are unaffected. Freeing the sandbox ends every session and
 * snapshot: their handles then fail with SNAPCELL_E_TEMPLATE and must still be freed. */
struct snapcell_session;
struct snapcell_snapshot;

SNAPCELL_API int snapcell_session_new(struct snapcell_sandbox *sb, struct snapcell_session **out,
				      struct snapcell_error *err);
SNAPCELL_API int snapcell_session_run(struct snapcell_session *s, const char *code, size_t code_len,
				      const struct snapcell_run_options *opts,
				      struct snapcell_result **out, struct snapcell_error *err);
SNAPCELL_API int snapcell_session_snapshot(struct snapcell_session *s,
					   struct snapcell_snapshot **out,
					   struct snapcell_error *err);
/* Replaces the session's state with a copy of the snapshot's. */
SNAPCELL_API int snapcell_session_restore(struct snapcell_session *s,
					  const struct snapcell_snapshot *snap,
					  struct snapcell_error *err);
/* A new session starting from a copy of the snapshot's state. */
SNAPCELL_API int snapcell_snapshot_new_session(const struct snapcell_snapshot *snap,
					       struct snapcell_session **out,
					       struct snapcell_error *err);
/* Whether the session has a live process to run code in: false after a run that was killed
 * (timeout, output limit, cancellation) or a failed snapshot, until a restore revives it. */
SNAPCELL_API bool snapcell_session_alive(const struct snapcell_session *s);
SNAPCELL_API void snapcell_session_free(struct snapcell_session *s);
SNAPCELL_API void snapcell_snapshot_free(struct snapcell_snapshot *snap);

/* ---- host probe (what `snapcell doctor` prints) ---- */

enum snapcell_mechanism {
	SNAPCELL_MECH_USERNS,
	SNAPCELL_MECH_MOUNTNS,
	SNAPCELL_MECH_PIDNS,
	SNAPCELL_MECH_NETNS,
	SNAPCELL_MECH_IPCNS,
	SNAPCELL_MECH_UTSNS,
	SNAPCELL_MECH_CGROUPNS,
	SNAPCELL_MECH_SECCOMP,
	SNAPCELL_MECH_LANDLOCK,
	SNAPCELL_MECH_CGROUP_LIMITS,
	SNAPCELL_MECH__COUNT
};

/* Room in struct snapcell_probe: SNAPCELL_MECH__COUNT may grow up to it. */
#define SNAPCELL_MECH_SLOTS 16

struct snapcell_mechanism_report {
	const char *name; /* "user namespace", ... (static); NULL in unused slots */
	bool available;
	bool used;	      /* snapcell uses it at the reported level */
	char detail[160];     /* why not, or a version */
	uint64_t reserved[2]; /* zeroed (ABI growth) */
};

struct snapcell_probe {
	struct snapcell_mechanism_report mech[SNAPCELL_MECH_SLOTS]; /* by enum snapcell_mechanism */
	enum snapcell_isolation level; /* what a sandbox gets on this host */
	uint64_t reserved[4];	       /* zeroed (ABI growth) */
};

/* Tests each mechanism in a short-lived child process; never changes the caller. */
SNAPCELL_API int snapcell_probe_host(struct snapcell_probe *out, struct snapcell_error *err);

/* What reset in place (snapcell_config_set_reuse) needs of the kernel, as the template uses
 * it (guest/reset.c): a userfaultfd opened with UFFD_USER_MODE_ONLY that takes
 * UFFD_FEATURE_WP_ASYNC and write-protects a private mapping (Linux 6.7), the PAGEMAP_SCAN
 * ioctl of /proc/PID/pagemap that finds and re-protects written pages (Linux 6.7), and
 * PTRACE_SEIZE of a child process (Yama's ptrace_scope 3 refuses it). */
struct snapcell_reuse_probe {
	bool userfaultfd_wp_async; /* userfaultfd with asynchronous write-protection */
	bool pagemap_scan;	   /* PAGEMAP_SCAN with PM_SCAN_WP_MATCHING */
	bool ptrace_child;	   /* a parent may PTRACE_SEIZE its child (Yama) */
	bool available;		   /* all three: a sandbox with reuse on resets its cells */
	/* Not needed, cheaper: PROCMAP_QUERY (Linux 6.11), with which a reset compares a cell's
	 * mappings field by field; without it, through the text of /proc/PID/maps. */
	bool procmap_query;
	/* Empty when available, else the first feature missing and why, e.g. "userfaultfd:
	 * Function not implemented". */
	char detail[SNAPCELL_ERROR_MESSAGE_LEN];
};

/* Probes what reuse needs, once per process (later calls return the first answer), in this
 * process (a mapping and descriptors of its own, undone before it returns; Yama's
 * ptrace_scope is read, no child is forked). A sandbox whose config asks for reuse on a host where
 * available is false does not arm its cells: every run gets a forked cell, as with reuse off. 0, or
 * -EINVAL for a NULL out. */
SNAPCELL_API int snapcell_probe_reuse(struct snapcell_reuse_probe *out, struct snapcell_error *err);

#ifdef __cplusplus
}
#endif
#endif
