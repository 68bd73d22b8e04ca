/* The setup message: what the host tells the helper (and the template the helper execs) to
 * build and run. One schema, encoded by the host (src/core/sandbox.c) and decoded by the helper
 * and the guest module (guest/) with the same table, as JSON on the control socket, capped at
 * SC_SETUP_MAX; the compiled prelude's bytes follow the JSON text and a NUL, raw (in the JSON
 * as hex they made up nearly all of the message, and encoding and decoding them three times
 * cost ~1.5 ms of CPU per sandbox). Every key is always present (an absent value is null): a
 * missing or unknown key is a protocol error, never a silent 0. Not the place for policy: only
 * the fields. */
#ifndef SC_RPC_SETUP_H
#define SC_RPC_SETUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapcell.h"

/* A directory the spawn child opened for the helper (fd, SC_PASS_FD_FIRST and up). */
struct sc_setup_path {
	int fd;
	/* A Python path (sys.path entry): NULL for a plain one, or the relative directory of a
	 * site directory inside it whose .pth files count ("" for the directory itself). */
	char *site;
	char *host; /* its host path: where it is bound, or, at the rlimits level, read */
};

struct sc_setup_tool {
	char *name;
	char *attr; /* its attribute path in the guest's `tools` module */
	char *description;
};

/* A sandbox with network entries: the listeners each cell's namespace gets, and its names. */
struct sc_setup_net {
	int *ports;
	size_t n_ports;
	bool v6;
	char **addrs; /* the entries' IP literals, put on the cells' loopback */
	size_t n_addrs;
	char *hosts; /* /etc/hosts lines */
	char *ca;    /* the gate's certificate authority (PEM) */
};

/* The interpreter the template execs (src/core: struct sc_python). */
struct sc_setup_python {
	char *executable; /* the real file, at the same path inside the root */
	char *version;	  /* "3.12.1" */
	int exe_dir_fd;	  /* its directory, opened by the spawn child */
	/* Directories it loads from, each bound read-only at its own (host) path. */
	struct sc_setup_path *dirs;
	size_t n_dirs;
	/* The prelude as the host's probe of this interpreter compiled it (marshal), or NULL;
	 * loaded only when sys.version and the hash of the guest's own prelude source
	 * (sc__prelude_hash) match. Its length is the key "prelude_bytes" (0: none); the bytes
	 * are the message's tail, after the JSON text and a NUL. */
	uint8_t *prelude;
	uint64_t prelude_bytes;
	char *sys_version;
	uint64_t prelude_hash;
};

/* The guest module (an abi3 extension beside the helper), opened by the spawn child. */
struct sc_setup_guest {
	int fd;	    /* the file itself (O_PATH) */
	char *file; /* its name, which it keeps in the root */
};

struct sc_setup {
	char *root, *out, *input; /* host paths of the work directory's parts */
	struct sc_setup_path *python_paths;
	size_t n_python_paths;
	uint64_t spares, tmp_bytes, frame_cap, output_bytes;
	uint64_t memory_bytes, cpu_ms, processes, file_bytes, open_files;
	char **env_names, **env_values; /* the code's environment */
	size_t n_env;
	int level;	      /* enum snapcell_isolation the host chose */
	char *tmp;	      /* the rlimits level: the cells' /tmp parent on the host, else NULL */
	bool own_uid;	      /* the rlimits level: cells run as the caller's own uid */
	bool reuse;	      /* fresh cells are armed to be reset in place (guest/reset.c) */
	bool reuse_maps_text; /* resets read maps's text (tests: guest/reset.c) */
	char *cgroup;	      /* the sandbox's memory cgroup directory, or NULL */
	struct sc_setup_tool *tools;
	size_t n_tools;
	char **preloads;
	size_t n_preloads;
	char *warmup;		  /* or NULL */
	struct sc_setup_net *net; /* or NULL: no entries */
	char *network_notice;	  /* the guest's network error message */
	struct sc_setup_python python;
	struct sc_setup_guest guest;
};

/* The message (malloc'd; *len bytes): compact JSON, then, when there is a compiled prelude, a
 * NUL and its bytes. NULL when out of memory. Reads s only. */
char *sc__setup_encode(const struct sc_setup *s, size_t *len);
/* Fills s (zeroed first) from buf; SNAPCELL_E_PROTOCOL naming the key on any mismatch (a key
 * missing, unknown, of the wrong type, a duplicate; a tail of another length than
 * prelude_bytes). sc__setup_clear frees what it made, also after a failure. */
int sc__setup_decode(const char *buf, size_t len, struct sc_setup *s, struct snapcell_error *err);
void sc__setup_clear(struct sc_setup *s);

#endif
