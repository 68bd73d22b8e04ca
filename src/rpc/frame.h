/* Length-prefixed frames on a byte stream, shared by the host and the cell: a 4-byte
 * little-endian length (type byte + payload), a type byte, the payload. Every reader has a hard
 * cap; a length over the cap is a protocol error, never an allocation. Not a message codec:
 * payload meaning belongs to the caller. */
#ifndef SC_RPC_FRAME_H
#define SC_RPC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SC_FRAME_HEADER_LEN  5
#define SC_FRAME_DEFAULT_CAP (16u << 20)

enum sc_frame_type {
	SC_FRAME_RUN = 'R', /* host -> cell: the code to run */
	/* host -> cell: the same, and after DONE the cell stays until the host shuts its end
	 * of the socket (it reads which pages the run touched: core/prefault.c) */
	SC_FRAME_RUN_LEARN = 'L',
	/* host -> cell, just before RUN or RUN_LEARN: the run's own tools for its `tools`
	 * module, a JSON array of [name, attribute path, description] */
	SC_FRAME_TOOLS = 'U',
	SC_FRAME_DONE = 'D', /* cell -> host: struct sc_done_payload */
	/* cell -> host, just before DONE: a byte of enum snapcell_value_state, then the last
	 * expression's JSON text when it is SNAPCELL_VALUE_PRESENT */
	SC_FRAME_VALUE = 'V',
	/* cell -> host: the call's id (4 bytes) and flags (1), tool name, NUL, arguments as
	 * a JSON object */
	SC_FRAME_CALL = 'C',
	/* host -> cell: the call's id (4 bytes), 1 byte ok, then the JSON result or a message */
	SC_FRAME_RESULT = 'A',
	/* Sessions (guest/session.c, src/core/session.c): */
	SC_FRAME_SESSION = 'S', /* host -> parked cell: become a session family's anchor */
	/* anchor or snapshot -> host: int32 pid; fds: rpc, out, err (and from the anchor, the
	 * root of the family's /tmp tmpfs) */
	SC_FRAME_WORKER = 'W',
	SC_FRAME_KILL = 'K',	 /* host -> anchor: int32 pid of a worker to kill */
	SC_FRAME_SNAPSHOT = 'P', /* host -> worker between runs: fork a snapshot */
	SC_FRAME_SNAPPED = 'Q',	 /* worker -> host: int32 pid; fd: the snapshot's socket */
	SC_FRAME_FORK = 'F',	 /* host -> snapshot: fork a new worker (answered by WORKER) */
	SC_FRAME_FREEZE = 'Z',	 /* host -> anchor: stop the family's other processes */
	SC_FRAME_FROZEN = 'z',	 /* anchor -> host: they are stopped (SIGSTOP sent to all) */
	SC_FRAME_THAW = 'T',	 /* host -> anchor: int32 pid of the one to continue (no answer) */
	/* The egress gate, on a cell's network socket (src/net/gate_resolve.c): */
	SC_FRAME_NET = 'N',	   /* cell -> host: "R name" or "C address port" */
	SC_FRAME_NET_ANSWER = 'n', /* host -> cell: '1' and the address, or '0' and why */
};

/* The cell's own report of how the code ended, sent after it flushed its output. Untrusted:
 * it describes only this cell's own result, and the host's limits (wall clock, output caps)
 * override it. It lets a run end without waiting for the cell's teardown. */
/* In sc_done_payload.flags: cpu_us and maxrss_kib are only the reaped children's; the host adds
 * the cell's own, which it reads itself (a cell armed for reset in place cannot read them
 * without the template: guest/counters.c). */
#define SC_DONE_HOST_FIGURES 1
struct sc_done_payload {
	uint8_t status; /* enum snapcell_status: OK, ERROR, MEMORY or SETUP_FAILURE */
	uint8_t flags;	/* SC_DONE_* */
	uint8_t pad[2];
	uint32_t limits_hit;
	int32_t exit_code;
	uint32_t pad2;
	uint64_t cpu_us;
	uint64_t maxrss_kib;
};

/* A CALL starts with this: the id the cell gave the call (its RESULT carries it back, so
 * several calls can be in flight on one socket and be answered in any order) and flags. */
#define SC_CALL_HEAD_LEN   5
#define SC_RESULT_HEAD_LEN 5 /* the id, then the ok byte */
enum sc_call_flag {
	/* Made by code awaiting it in an event loop: the host may answer it out of order, and
	 * runs it beside other such calls when the tool can (snapcell_config_set_tool_async). */
	SC_CALL_AWAITED = 1u << 0,
};
/* A cell never has more calls than this in flight at once (guest/bridge.c refuses more); a
 * host that reads more unanswered calls kills the cell. */
#define SC_CALLS_IN_FLIGHT_MAX 1024

static inline uint32_t sc__le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void sc__put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* Incremental decoder for non-blocking readers. */
struct sc_frame_reader {
	uint8_t header[SC_FRAME_HEADER_LEN];
	size_t header_got;
	uint8_t *payload;
	size_t payload_len;
	size_t payload_got;
	size_t cap;
};

void sc__frame_reader_init(struct sc_frame_reader *r, size_t cap);
void sc__frame_reader_reset(struct sc_frame_reader *r);

/* Consumes bytes from buf; *used says how many. Returns 1 when a frame is complete (type and
 * payload are then valid until the next feed or reset), 0 when more bytes are needed,
 * -EMSGSIZE for a frame over the cap or with a zero length, -ENOMEM. An error is sticky: the
 * stream cannot be resynchronised, so every later feed fails the same way until a reset. */
int sc__frame_feed(struct sc_frame_reader *r, const uint8_t *buf, size_t len, size_t *used);
uint8_t sc__frame_type(const struct sc_frame_reader *r);

void sc__frame_header(uint8_t out[SC_FRAME_HEADER_LEN], uint8_t type, size_t payload_len);

/* Blocking whole-frame write and read, for the cell. read_frame allocates the payload (caller
 * frees, NUL-terminated for convenience); -EPIPE at end of stream. */
int sc__frame_write(int fd, uint8_t type, const void *payload, size_t len);
int sc__frame_read(int fd, size_t cap, uint8_t *type, uint8_t **payload, size_t *len);

/* Waiting for a peer that answers within microseconds without sleeping: a thread that sleeps
 * is woken by the peer's CPU, and in a VM that costs tens of microseconds. A spin polls for up
 * to window_us, then the wait blocks. A spin only pays when the peer runs on another CPU: on
 * the same one (the kernel puts a woken peer beside its waker when no CPU is idle, and
 * sched_yield does not hand the CPU over across scheduling groups) it only delays the peer by
 * its window. So spins that fail back off: after a failure the next 1, 2, 4, ... waits (up to
 * SC_SPIN_MAX_BACKOFF) block at once, and one success spins every wait again. */
#define SC_SPIN_MAX_BACKOFF 64
struct sc_spin {
	uint32_t window_us; /* 0: never spin */
	uint32_t skip;	    /* waits left that block at once */
	uint32_t backoff;   /* what skip was set to at the last failure */
};

/* The end of this wait's spin (sc__now_us clock), or 0 when this wait blocks at once. */
uint64_t sc__spin_start(struct sc_spin *s);
/* After a spin: whether the peer's frame came during it. */
void sc__spin_end(struct sc_spin *s, bool caught);

/* The one frame a peer sends in answer to a request (a tool call's RESULT), like
 * sc__frame_read but on a socket and with fewer system calls: a small answer arrives in one
 * read of up to SC_FRAME_REPLY_READ bytes, and the reads spin as s says (NULL: they block).
 * More bytes than the frame are -EPROTO: the peer owes exactly one. */
#define SC_FRAME_REPLY_READ 4096
int sc__frame_read_reply(int fd, size_t cap, struct sc_spin *s, uint8_t *type, uint8_t **payload,
			 size_t *len);

/* The same, carrying up to SC_FRAME_MAX_FDS descriptors (SCM_RIGHTS on a unix socket).
 * Received fds are O_CLOEXEC; any beyond max_fds are closed. */
#define SC_FRAME_MAX_FDS 4
int sc__frame_write_fds(int fd, uint8_t type, const void *payload, size_t len, const int *fds,
			size_t n_fds);
int sc__frame_read_fds(int fd, size_t cap, uint8_t *type, uint8_t **payload, size_t *len, int *fds,
		       size_t max_fds, size_t *n_fds);

#endif
