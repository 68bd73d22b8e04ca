/* Host-side internals shared by the core's files: the config's layout, the sandbox handle and
 * its queue of parked cells. Front ends never include this; they use snapcell.h. */
#ifndef SC_CORE_H
#define SC_CORE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

#include "isolate/cell.h"
#include "isolate/host.h"
#include "net/net.h"
#include "rpc/control.h"
#include "snapcell.h"

struct sc_env_var {
	char *name;
	char *value;
};

struct sc_tool {
	char *name;
	char *attr; /* the code's tools.<attr>: the name's segments as identifiers */
	char *description;
	char *schema_text; /* normalised: compact, sorted keys */
	struct sc_schema *schema;
	enum snapcell_approval approval;
	bool needs_decision; /* each call waits for one (snapcell_config_set_tool_decision) */
	int describe_format; /* enum snapcell_describe_format, or -1: the one describe is given */
	snapcell_tool_fn fn;
	snapcell_tool_start_fn start; /* its asynchronous face, or NULL */
	snapcell_tool_cancel_fn cancel;
	void *user;
};

struct sc_mount {
	char *host_path;  /* resolved */
	char *mount_path; /* normalised: /input/... */
};

struct snapcell_config {
	uint64_t limits[SNAPCELL_LIMIT__COUNT];
	char *workspace; /* resolved, or NULL */
	char *helper;	 /* resolved path of snapcell-cell, or NULL for the built-in default */
	struct sc_mount *mounts;
	size_t n_mounts;
	struct sc_tool *tools;
	size_t n_tools;
	struct sc_env_var *env;
	size_t n_env;
	char **python_paths;
	size_t n_python_paths;
	char *python;	     /* snapcell_config_set_python's interpreter (absolute), or NULL */
	char *venv;	     /* resolved venv directory, or NULL */
	char *venv_site;     /* its "lib/pythonX.Y/site-packages" */
	char *venv_base;     /* the interpreter it was made from (python_env.c's guess) */
	unsigned venv_minor; /* its pyvenv.cfg's 3.Y */
	bool venv_system;    /* include-system-site-packages = true */
	char **preloads;     /* module names, in import order */
	size_t n_preloads;
	char *warmup; /* Python the template runs once after the preloads, or NULL */
	enum snapcell_isolation required;
	bool reject_links; /* staging fails on a link instead of leaving it out */
	bool reuse;	   /* snapcell_config_set_reuse: fresh cells reset in place after a run */
	struct sc_net_list allowed; /* network entries (net/net.h), enforced by net/gate.c */
	char **map_names;	    /* snapcell_config_map_host: names and their addresses */
	char **map_addresses;
	size_t n_maps;
	char *upstream_ca;  /* resolved path, or NULL for the system's bundle */
	uint32_t uid_first; /* snapcell_config_set_uid_range: root callers' outside uids */
	uint32_t uid_count;
	bool uid_range_set; /* set by the caller, not the default: failures are errors */
};

int sc__config_copy(const struct snapcell_config *src, struct snapcell_config **out);

/* python_env.c: the directories the helper binds for Python, in sys.path order: the python
 * paths, then the venv (whole: .pth files may name paths beside site-packages) and, with
 * include-system-site-packages of a Debian-python venv, Debian's dist-packages. site[i] is
 * NULL for a plain path, or the subdirectory of dirs[i] that goes on sys.path with
 * site.addsitedir's .pth processing ("" for the directory itself). SNAPCELL_E_INVAL past
 * SC_PASS_FD_MAX in all. */
int sc__python_dirs(const struct snapcell_config *cfg, const char *dirs[SC_PASS_FD_MAX],
		    const char *site[SC_PASS_FD_MAX], size_t *n, struct snapcell_error *err);

/* The interpreter a sandbox runs, resolved on the host by asking the interpreter itself. */
struct sc_python {
	char *executable; /* the real file (realpath of what the interpreter reports as
			   * sys.executable, so a pyenv bash shim resolves to its binary) */
	char *chosen_by;  /* why: "snapcell_config_set_python", "the venv's interpreter",
			   * "python3 on PATH", "/usr/bin/python3" */
	char *version;	  /* "3.12.1" */
	unsigned major, minor;
	char **dirs; /* host directories the interpreter loads from, each bound read-only
		      * at the SAME path in the cell's root: sys.base_prefix's stdlib and
		      * platstdlib, lib-dynload, the shared libpython's directory when
		      * Py_ENABLE_SHARED, and the system library directories its libraries
		      * load from (multiarch lib dirs). None lies under /tmp, /input,
		      * /output, /dev, /proc or /.snapcell (refused at resolve). */
	size_t n_dirs;
	/* The prelude (guest/prelude.py) as this interpreter compiled it, marshalled
	 * (prelude_len bytes), or NULL; with sys.version and the hash of the source it was
	 * compiled from, which the template checks before loading it instead of compiling the
	 * prelude itself. */
	uint8_t *prelude_code;
	size_t prelude_len;
	char *sys_version;
	uint64_t prelude_hash;
	/* What the per-user probe cache did when this process first asked (a static string,
	 * snapcell_python_info's probe_cache). */
	const char *probe_cache;
};
/* Resolves cfg's interpreter (snapcell_config_set_python's, else the venv's base interpreter,
 * else `python3` on PATH, else /usr/bin/python3), probing it once per (path, inode, mtime) per
 * process (a cache, so sandbox creation after the first pays nothing). Refuses (SNAPCELL_E_INVAL,
 * message naming the file and the cause): not CPython, < 3.10, free-threaded. */
int sc__python_resolve(const struct snapcell_config *cfg, struct sc_python *out,
		       struct snapcell_error *err);
void sc__python_clear(struct sc_python *py);

/* python_probe.c: what an interpreter says of itself when run with -I -S (py.chosen_by is
 * NULL). Answers are cached per (file, device, inode, mtime) for the process's life, and a
 * binary's in the user's probe cache (probe_cache.c); thread-safe. SNAPCELL_E_INVAL naming path
 * when it is missing, not executable, or gives no answer within a few seconds. */
struct sc_python_probe {
	char *implementation; /* sys.implementation.name: "cpython", "pypy" */
	bool gil_disabled;    /* a free-threaded build (Py_GIL_DISABLED) */
	bool loader_env;      /* LD_ variables reached it (a launcher set them): not cached */
	struct sc_python py;
};
int sc__python_probe(const char *path, struct sc_python_probe *out, struct snapcell_error *err);
void sc__python_probe_clear(struct sc_python_probe *p);

struct stat;
/* reuse_probe.c: snapcell_probe_reuse's available (asked once per process): a sandbox arms
 * its cells for reset in place only when true. */
bool sc__reuse_available(void);
/* Whether a sandbox of cfg at level, with an egress gate or not, arms its cells for reset in
 * place (the template's setup key `reuse`; snapcell_sandbox_reuse). */
bool sc__sandbox_reuse(const struct snapcell_config *cfg, enum snapcell_isolation level, bool gate);

/* probe_cache.c: the per-user cache of the probe's answers for the interpreter file real (its
 * identity st), under $XDG_CACHE_HOME/snapcell or ~/.cache/snapcell, trusted only when the
 * effective user owns it and no one else may write it; SNAPCELL_PROBE_CACHE=0 turns it off.
 * probe_hash is the probe script's. load returns the answer (malloc'd) or NULL; both set *why
 * (a static string) to what happened. */
char *sc__probe_cache_load(const char *real, const struct stat *st, uint64_t probe_hash,
			   const char **why);
void sc__probe_cache_store(const char *real, const struct stat *st, uint64_t probe_hash,
			   const char *answer, const char **why);

/* describe.c: what code that tries to connect or resolve is told (the guest raises it),
 * malloc'd; NULL on allocation failure. */
char *sc__network_notice(const struct snapcell_config *cfg);

/* tools.c */
/* A malloc'd formatted message, or NULL when out of memory. */
char *sc__message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sc__tools_free(struct snapcell_config *cfg);
int sc__tools_copy(const struct snapcell_config *src, struct snapcell_config *dst);
const struct sc_tool *sc__tool_find(const struct snapcell_config *cfg, const char *name);

/* What serving one CALL frame produced: the answer for the cell and the log entry. */
struct sc_call_outcome {
	bool ok;
	char *text; /* JSON result when ok, else the error message; malloc'd */
	struct snapcell_tool_call log;
	/* A call held for a decision (text NULL): its tool and checked arguments (malloc'd). */
	const struct sc_tool *held;
	char *held_args;
	/* An awaited call of a tool with an asynchronous face (text NULL): to be started with
	 * these checked arguments (malloc'd, in held_args). */
	bool start;
};

/* value.c: a VALUE frame's payload checked: *json (malloc'd) when it holds a value that is
 * JSON within the cap, else NULL with *state saying why. -EPROTO for a malformed payload. */
int sc__value_read(const uint8_t *payload, size_t len, char **json,
		   enum snapcell_value_state *state);

/* Serves a CALL payload (tool name, NUL, arguments JSON; NUL-terminated by the reader); the
 * callback can ask for deadline_us (sc__now_us clock) with snapcell_tool_deadline_us() and
 * for cancel_fd (the run's token, or -1) with snapcell_tool_cancel_fd().
 * -EPROTO when the payload is malformed (the cell broke the protocol), -ENOMEM, else 0. */
int sc__tool_serve(const struct snapcell_config *cfg, const struct snapcell_config *run_tools,
		   uint8_t *payload, size_t len, size_t result_cap, uint64_t deadline_us,
		   int cancel_fd, bool awaited, struct sc_call_outcome *out);
/* A run's own tools (run_tools, may be NULL) beside the sandbox's (cfg): SNAPCELL_E_INVAL
 * naming both when a name or tools.<attr> path clashes, SNAPCELL_E_TOO_BIG past 4 MiB of
 * names and descriptions. */
int sc__tools_check_run(const struct snapcell_config *cfg, const struct snapcell_config *run_tools,
			struct snapcell_error *err);
/* A copy of cfg's tools alone, in a config of its own (sc__tools_free, then free), or NULL. */
struct snapcell_config *sc__tools_dup(const struct snapcell_config *cfg);
/* What the cell's `tools` module needs of cfg's tools: [[name, attr, description], ...]
 * (malloc'd JSON text), or NULL when out of memory. */
char *sc__tools_guest_json(const struct snapcell_config *cfg);
/* Answers a held call by the verdict: runs the tool (APPROVED), the value's text (VALUE), or a
 * message (REJECTED with text as the reason, or EXPIRED); fills out's text, ok, duration. */
int sc__tool_decided(const struct sc_tool *t, const char *args, enum snapcell_verdict verdict,
		     const char *text, size_t result_cap, uint64_t deadline_us, int cancel_fd,
		     struct sc_call_outcome *out);

/* calls.c: a run's calls in flight to tools with an asynchronous face. The run's thread starts
 * them and takes their answers; any thread answers. */
struct snapcell_call;
struct sc_calls {
	pthread_mutex_t mu;
	int event_fd;			/* readable once a call was answered; -1 until the first */
	struct snapcell_call *running;	/* started, not answered (under mu) */
	struct snapcell_call *answered; /* answered, not taken, newest first (under mu) */
	unsigned n_flight;		/* started and not taken (under mu) */
	pthread_cond_t cancel_done;	/* a tool's cancel returned */
	pthread_t canceller;		/* the thread in a tool's cancel (under mu) */
};
void sc__calls_init(struct sc_calls *c);
void sc__calls_destroy(struct sc_calls *c);
/* Starts t's asynchronous face on args (checked; taken over, freed here). 0 or -errno. */
int sc__calls_start(struct sc_calls *c, const struct sc_tool *t, uint32_t id, char *args,
		    const struct snapcell_tool_call *log, uint64_t deadline_us);
/* Hands each answered call to fn (its id, 0 or -ENOMEM, its outcome: fn owns out->text) in
 * the order they were answered; returns how many. */
typedef void (*sc_calls_answer_fn)(void *ctx, uint32_t id, int rc, struct sc_call_outcome *out);
size_t sc__calls_take(struct sc_calls *c, sc_calls_answer_fn fn, void *ctx);
/* Asks every running call to end (its tool's cancel), once each. */
void sc__calls_cancel(struct sc_calls *c);
unsigned sc__calls_in_flight(struct sc_calls *c);

/* schema.c: registering a parameter schema (the subset is listed in snapcell.h). */
struct sc_schema;
/* 0 when schema is in the supported subset, else -1 with a reason naming the path
 * ("properties.a: unknown keyword 'if'"). */
int sc__schema_validate(const json_t *schema, char *why, size_t why_len);
/* Validates schema, resolves its $refs and compiles its patterns; on success *out holds a
 * reference to schema, which must not be modified afterwards. -EINVAL with why, or -ENOMEM. */
int sc__schema_compile(json_t *schema, struct sc_schema **out, char *why, size_t why_len);
void sc__schema_free(struct sc_schema *schema);
/* schema_check.c: 0 when value satisfies the schema (its root; $refs resolve against it), else
 * -1 with a reason naming the path ("items[2].qty: must be >= 1"). Safe from many threads. */
int sc__schema_check(const struct sc_schema *schema, const json_t *value, char *why,
		     size_t why_len);
/* The JSON text again with every non-integer number rewritten as the shortest text of the
 * double it parsed to, so a reader gets exactly the value that was checked; malloc'd, or NULL
 * when out of memory. text must be valid JSON. */
char *sc__json_exact_numbers(const char *text, size_t len);

/* A FILES question to the template (sc__sandbox_files_cell), queued until its RUN_CELL
 * answer: the asking thread's, or, once abandoned (it gave up waiting), the queue's, whose
 * reader kills the cell that answers it. */
struct sc_files_ask {
	struct sc_files_ask *next;
	bool answered, abandoned;
	int status; /* the answer's: 0 (cell is the run's) or -errno */
	struct sc_cell cell;
};

/* A session family (session.c); the sandbox lists its live ones. */
struct sc_family;

struct snapcell_sandbox {
	struct snapcell_config *cfg;
	pid_t helper_pid;
	int helper_pidfd;
	int ctl;
	char *workdir;
	int out_fd;  /* workdir/out: one directory per cell, named by its id */
	int lock_fd; /* workdir/lock, flock'ed while the sandbox lives (stale-directory reaping) */
	struct sc_outside_ids ids; /* what the sandbox runs as outside, and its uid's lock */
	struct sc_cells cells;	   /* the mechanism that makes its cells (isolate/cell.h) */
	struct sc_gate *gate;	   /* with network entries: net/gate.h */
	struct sc_python python;   /* the interpreter its template execs */
	char *setup;		   /* the setup message, from the helper's start until it is sent */
	size_t setup_len;	   /* its bytes (JSON, and the compiled prelude after a NUL) */

	/* Guards the fields below; never held across a wait for the template (or a cell, or the
	 * caller's code), so no run queues behind a slow one. */
	pthread_mutex_t lock;
	struct sc_cell *ready;
	size_t n_ready, cap_ready;
	/* Reset in place (snapcell_config_set_reuse): cells whose reset was asked for, until the
	 * template's answer, and those reset, which only fresh runs take (never sessions). */
	struct sc_cell *resetting, *reset_ready;
	size_t n_resetting, cap_resetting, n_reset_ready, cap_reset_ready;
	/* One thread at a time reads the control socket for cells, without the lock (receiving
	 * set); the others wait on received, signalled when its read ends either way. */
	bool receiving;
	pthread_cond_t received;
	/* FILES questions sent and not yet answered, oldest first (the template answers in
	 * order); ask_lock, taken before lock, keeps a question's queueing and sending together. */
	struct sc_files_ask *asks, **asks_tail;
	pthread_mutex_t ask_lock;
	bool broken;
	char broken_msg[SNAPCELL_ERROR_MESSAGE_LEN];
	struct sc_family *families; /* live session families (session.c's lock, not this one) */
	unsigned n_paused_slots;    /* runs holding a call for a decision (run.c) */
	struct sc_paused *paused;   /* paused fresh runs, and expired ones with their result */
	pthread_cond_t paused_cond; /* an expiring entry of paused ended */
	/* pause.c's reaper: ends runs whose pause expired (reaper_wake: CLOCK_MONOTONIC). */
	pthread_t reaper;
	bool reaper_started, reaper_stop;
	pthread_cond_t reaper_wake;
	struct sc_dying {
		int pidfd;
		uint32_t id;
	} * dying; /* retired cells not yet known to be gone */
	size_t n_dying, cap_dying;
	struct sc_prefault *prefault;		/* prefault.c: what runs touched; its own lock */
	struct sc_helper_stderr *helper_stderr; /* until the handshake ends, then NULL */
};

/* prefault.c: learning which template pages fresh runs touch, so parked cells fault them in
 * before a run instead of during it. wants: whether the next run, in cell cell_id, is one to
 * learn from (the first few, then one in a while, and only while the learner is idle; never
 * the sandbox's first cell). learn: takes over a
 * finished run's cell, which must still be there (lingering after DONE), and retires it once
 * its pages are read, on the learner's own thread; the template gets the new list when it
 * changed. free: stops the learner (before the template goes). */
int sc__prefault_new(struct snapcell_sandbox *sb);
void sc__prefault_free(struct snapcell_sandbox *sb);
bool sc__prefault_wants(struct snapcell_sandbox *sb, uint32_t cell_id);
void sc__prefault_learn(struct snapcell_sandbox *sb, struct sc_cell *cell);
/* inflight.c, for the files watch of a mechanism that has one (struct sc_files_bounds'
 * in_flight_over, level rlimits): whether sb's uid has more descriptors in flight in AF_UNIX
 * queues than room holds at file_bytes each (beyond its template's parked cells'). False when
 * it cannot tell: a caller that is not root, or a sandbox without a uid of its own. */
bool sc__inflight_over(const struct snapcell_sandbox *sb, uint64_t room, uint64_t file_bytes);

/* helper_stderr.c: the last SC_HELPER_STDERR_MAX bytes the helper wrote to its stderr (a
 * pipe) before READY, for the error when it dies first. new: the host's end (CLOEXEC,
 * non-blocking) in *out and the helper's (CLOEXEC) in *write_end, 0 or -errno. drain: reads
 * what is there now, without blocking. wait: until fd is readable (or hung up) or the
 * deadline (sc__now_us clock), draining meanwhile: 0, -ETIMEDOUT or -errno. words: the last
 * lines, NUL-terminated in out (out_len bytes at most), with every control byte but the
 * newlines between them as \xNN and bytes that are not UTF-8 too; when they do not fit,
 * the last whole lines that do, else "..." and the end of the last one. Its length. */
#define SC_HELPER_STDERR_MAX 4096
struct sc_helper_stderr {
	int fd;	  /* -1 once every writer is gone */
	bool cut; /* bytes were dropped before tail */
	size_t len;
	char tail[SC_HELPER_STDERR_MAX];
};
int sc__helper_stderr_new(struct sc_helper_stderr **out, int *write_end);
void sc__helper_stderr_free(struct sc_helper_stderr *h);
void sc__helper_stderr_drain(struct sc_helper_stderr *h);
int sc__helper_stderr_wait(struct sc_helper_stderr *h, int fd, uint64_t deadline_us);
size_t sc__helper_stderr_words(const struct sc_helper_stderr *h, char *out, size_t out_len);

/* What one run is asked to do. */
struct sc_run_request {
	const char *code;
	size_t code_len;
	int cancel_fd; /* a snapcell_cancel's eventfd, or -1 */
	/* The run's own tools (the caller's; sc__run_start copies them), or NULL. */
	const struct snapcell_config *tools;
	/* A fresh cell whose pages the sandbox reads after DONE (prefault.c): sent RUN_LEARN,
	 * it lingers instead of exiting. */
	bool learn;
};

/* What a run drives: a fresh cell (run.c) or a session's worker (session.c). The run loop
 * knows only this. */
struct sc_run_target {
	struct sc_cell *cell; /* rpc, stdout, stderr; a fresh cell's pidfd and exit pipe too */
	/* Whether the template reports the target's exit on the exit pipe (a fresh cell). A
	 * target without one ends when its socket and pipes close, and one killed whose pipes
	 * stay open is given up on after a grace period. */
	bool reports_exit;
	/* Kills the target and everything it started; asynchronous, may run more than once. */
	void (*kill)(const struct sc_run_target *t);
	/* After the run: collects /output into res (NULL: the caller does, as a session does
	 * once its family is stopped). */
	int (*collect)(const struct sc_run_target *t, struct snapcell_sandbox *sb,
		       struct snapcell_result *res);
	void *ctx; /* the target's own (a session) */
	/* For the files watch (sc_cell_ops.files_over): the cell whose /tmp and /output the
	 * run's files are in (a session's family shares its anchor's); NULL: the target's own. */
	const struct sc_cell *files;
	/* Before a paused run is listed (so before anyone can resume it); NULL for nothing. */
	void (*pausing)(const struct sc_run_target *t);
	/* A session worker's family anchor: the trusted process the worker's processes hang
	 * from, left running when they are stopped for a pause (freeze.c); NULL: the cell is
	 * the root of its own processes and is stopped with them. */
	const struct sc_cell *anchor;
};

/* What the owner of a run does when it ended (rc 0 and its result res, or a failure): alive
 * says whether the target is still there to run more (a session's worker). */
typedef void (*sc_run_finish)(struct snapcell_sandbox *sb, void *ctx, int rc, bool alive,
			      struct snapcell_result *res);

/* Runs code in the target (copied; its cell must outlive the run). When the run ends, finish
 * is called (on the thread that ended it) before this or the resume returns; when it pauses
 * at a call needing a decision, this returns the paused result and the run waits on the
 * sandbox's list for snapcell_sandbox_resume, which goes on with it (and calls finish at its
 * end). finish is called on every path, failures included. */
int sc__run_start(struct snapcell_sandbox *sb, const struct sc_run_target *t,
		  const struct sc_run_request *req, sc_run_finish finish, void *ctx,
		  struct snapcell_result **out, struct snapcell_error *err);

/* Checks code and options and fills req; 1 (with *out a cancelled result) when the token had
 * fired already, so the run must not start; 0 to go on; or a negative code. */
int sc__run_prepare(const struct snapcell_sandbox *sb, const char *code, size_t code_len,
		    const struct snapcell_run_options *opts, struct sc_run_request *req,
		    struct snapcell_result **out, struct snapcell_error *err);

/* cancel.c: whether the token behind fd fired; the cancel fd of opts (-1 for none) and its
 * run tools (NULL for none), after checking opts' size and unknown fields. */
bool sc__cancel_fired(int fd);
int sc__run_options(const struct snapcell_run_options *opts, int *cancel_fd,
		    const struct snapcell_config **tools, struct snapcell_error *err);
/* The run's files in opts (checked by sc__run_options first): their count, 0 for none. */
size_t sc__run_options_files(const struct snapcell_run_options *opts,
			     const struct snapcell_run_file **files);

/* run_files.c: a run's own files (snapcell_run_options.files) in the work directory's
 * out/in-<id>, which the template's root sees at SC_OUT_BASE/in-<id>. sc__run_files_stage
 * checks them against the caps, the name rule and the staged workspace, writes them, and
 * sets *id (> 0); sc__run_files_remove removes that directory again. */
int sc__run_files_stage(const struct snapcell_sandbox *sb, const struct snapcell_run_file *files,
			size_t n, uint32_t *id, struct snapcell_error *err);
void sc__run_files_remove(const struct snapcell_sandbox *sb, uint32_t id);
/* The name rule alone: 0, or SNAPCELL_E_INVAL naming what is wrong with name. */
int sc__run_file_name_check(const char *name, struct snapcell_error *err);

/* /output, for the targets' collect: whether out_fd holds anything (an empty one costs one
 * readdir), and collecting it into res under the sandbox's caps. */
bool sc__output_pending(int out_fd);
void sc__output_collect(const struct snapcell_sandbox *sb, int out_fd, struct snapcell_result *res);

/* pause.c: the sandbox's runs paused for a decision (struct sc_run is run.c's). add: lists
 * r, waiting with pending id id until expires_us (sc__now_us clock), owned by ctx; -ENOMEM.
 * take: the run waiting with id, off the list (*r), or the final result of one that expired
 * (*ended, *r NULL); -ENOENT when there is neither. sweep: ends the runs whose time is up,
 * keeping their results for their resumes. end_all: ends every one, and the reaper, for a
 * sandbox being freed (before its template goes). end_ctx: ends (as closed) those owned by
 * ctx, a session being freed. decisions_copy/free: a result's decisions, deep. */
struct sc_run;
int sc__paused_add(struct snapcell_sandbox *sb, struct sc_run *r, uint64_t id, uint64_t expires_us,
		   void *ctx);
int sc__paused_take(struct snapcell_sandbox *sb, uint64_t id, struct sc_run **r,
		    struct snapcell_result **ended);
void sc__paused_sweep(struct snapcell_sandbox *sb);
void sc__paused_end_all(struct snapcell_sandbox *sb);
void sc__paused_end_ctx(struct snapcell_sandbox *sb, void *ctx);
int sc__decisions_copy(const struct snapcell_decision *src, size_t n,
		       struct snapcell_decision **out);
void sc__decisions_free(struct snapcell_decision *d, size_t n);
/* run.c: ends a paused run without a decision (EXPIRED or CLOSED): its cell is killed, the
 * result final; frees r. */
int sc__run_end_paused(struct snapcell_sandbox *sb, struct sc_run *r, enum snapcell_verdict why,
		       struct snapcell_result **out, struct snapcell_error *err);

/* session.c: ends every family of a sandbox being freed. */
void sc__sessions_orphan(struct snapcell_sandbox *sb);

/* The cells the template keeps parked (its setup message's spares, and what stats wait for). */
#define SC_SPARE_CELLS 2
/* With reuse, the cells being reset past which a fresh run waits for a reset rather than take
 * a parked cell (sandbox.c await_reset_then): a run's cell is reset while the next one runs. */
#define SC_REUSE_ROTATION 2

/* workdir.c: makes the sandbox's work directory (sb->workdir, locked in sb->lock_fd, its out/
 * in sb->out_fd) with the inputs staged; reap removes those of dead owners beside it (called
 * while the template starts, off the cold start's path). */
int sc__workdir_make(struct snapcell_sandbox *sb, struct snapcell_error *err);
void sc__workdir_reap(const struct snapcell_sandbox *sb);

/* template_start.c: start spawns the helper through the mechanism (sc_cell_ops.start) and
 * prepares the setup message; handshake takes its greeting, sends the setup and waits for
 * READY, the error naming what the helper wrote to its stderr when it dies first. */
int sc__template_start(struct snapcell_sandbox *sb, struct snapcell_error *err);
int sc__template_handshake(struct snapcell_sandbox *sb, struct snapcell_error *err);

/* Takes a parked cell (waiting for one if none is ready, without the sandbox's lock) and tells
 * the template to park a replacement. */
int sc__sandbox_take_cell(struct snapcell_sandbox *sb, struct sc_cell *out,
			  struct snapcell_error *err);
/* As sc__sandbox_take_cell, for a fresh run: a cell reset in place first, when one is. */
int sc__sandbox_take_fresh_cell(struct snapcell_sandbox *sb, struct sc_cell *out,
				struct snapcell_error *err);
/* Asks the template to reset a fresh cell in place after its run (its DONE came, its output
 * was collected); the cell comes back among the fresh runs' cells when the template says it
 * is, else it is retired. */
void sc__sandbox_reset_cell(struct snapcell_sandbox *sb, struct sc_cell *cell);
/* Asks the template for a cell of one run whose /input shows the run's files (out/in-<id>,
 * sc__run_files_stage) over the workspace, and waits for it; parked cells are not touched. */
int sc__sandbox_files_cell(struct snapcell_sandbox *sb, uint32_t id, struct sc_cell *out,
			   struct snapcell_error *err);

/* Kills a finished cell and forgets it: its output directory is removed once its first
 * process is gone (which the kernel allows only after the rest of its namespace is), checked
 * without waiting at each take and with waiting at sandbox_free, so teardown (a few hundred
 * microseconds to milliseconds) stays off the run's path. Closes the cell's fds. */
void sc__sandbox_retire_cell(struct snapcell_sandbox *sb, struct sc_cell *cell);

#endif
