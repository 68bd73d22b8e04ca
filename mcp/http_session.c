/* The handshake era's sessions over Streamable HTTP (Mcp-Session-Id, 2025-11-25): ids minted
 * on initialize, looked up on every later request, ended by DELETE, by idling past their
 * expiry, or by eviction when the table is full. A session holds nothing but its id: the runs
 * are fresh either way, so it only scopes cancellation and proves the client initialized.
 * A bounded table of slots; an id names its slot, so a lookup is one constant-time compare. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../frontend/frontend.h"
#include "mcp.h"

#define SLOT_HEX 4 /* the slot, 4 hex digits: MCP_HTTP_SESSIONS_MAX fits */

struct slot {
	char secret[MCP_SECRET_HEX]; /* not NUL-terminated */
	uint64_t scope;		     /* 0: free */
	uint64_t last_us;
	bool elicits; /* the client declared elicitation in its initialize */
};

struct mcp_http_sessions {
	pthread_mutex_t lock;
	struct slot *slots;
	unsigned max;
	uint64_t idle_us;
	uint64_t next_scope;
};

struct mcp_http_sessions *mcp_http_sessions_new(unsigned max, unsigned idle_s)
{
	struct mcp_http_sessions *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->slots = calloc(max, sizeof(*s->slots));
	if (!s->slots) {
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->lock, NULL);
	s->max = max;
	s->idle_us = (uint64_t)idle_s * 1000000u;
	s->next_scope = 1;
	return s;
}

void mcp_http_sessions_free(struct mcp_http_sessions *s)
{
	if (!s)
		return;
	pthread_mutex_destroy(&s->lock);
	free(s->slots);
	free(s);
}

static bool expired(const struct mcp_http_sessions *s, const struct slot *e, uint64_t now)
{
	return e->scope && now - e->last_us > s->idle_us;
}

/* A free or expired slot, else the least recently used one (*evicted set). */
static unsigned pick_slot(struct mcp_http_sessions *s, uint64_t now, bool *evicted)
{
	unsigned oldest = 0;
	*evicted = false;
	for (unsigned i = 0; i < s->max; i++) {
		if (!s->slots[i].scope || expired(s, &s->slots[i], now))
			return i;
		if (s->slots[i].last_us < s->slots[oldest].last_us)
			oldest = i;
	}
	*evicted = true;
	return oldest;
}

int mcp_http_session_open(struct mcp_http_sessions *s, char id[MCP_SESSION_ID_LEN + 1],
			  uint64_t *scope, bool elicits)
{
	char secret[MCP_SECRET_HEX + 1];
	if (mcp_secret_new(secret) < 0)
		return -1;
	pthread_mutex_lock(&s->lock);
	uint64_t now = fe_now_us();
	bool evicted;
	unsigned i = pick_slot(s, now, &evicted);
	struct slot *e = &s->slots[i];
	memcpy(e->secret, secret, MCP_SECRET_HEX);
	e->scope = s->next_scope++;
	e->last_us = now;
	e->elicits = elicits;
	*scope = e->scope;
	/* i < max <= MCP_HTTP_SESSIONS_MAX: the modulo only tells the compiler it fits. */
	snprintf(id, MCP_SESSION_ID_LEN + 1, "%0*x%s", SLOT_HEX, i % MCP_HTTP_SESSIONS_MAX, secret);
	pthread_mutex_unlock(&s->lock);
	if (evicted)
		fprintf(stderr,
			"snapcell mcp: %u HTTP sessions are live, the most allowed "
			"(--http-sessions): ended the least recently used one\n",
			s->max);
	return 0;
}

/* The slot id names, when its secret matches; NULL otherwise. Called with the lock held. */
static struct slot *lookup(struct mcp_http_sessions *s, const char *id)
{
	/* Exactly the minted form: strtoul alone would also take " 001", "-001" or "0x01". */
	if (!id || strlen(id) != MCP_SESSION_ID_LEN || strspn(id, "0123456789abcdef") < SLOT_HEX)
		return NULL;
	char hex[SLOT_HEX + 1];
	memcpy(hex, id, SLOT_HEX);
	hex[SLOT_HEX] = 0;
	unsigned long i = strtoul(hex, NULL, 16);
	if (i >= s->max || !s->slots[i].scope)
		return NULL;
	struct slot *e = &s->slots[i];
	return mcp_secret_equal(id + SLOT_HEX, e->secret, MCP_SECRET_HEX) ? e : NULL;
}

uint64_t mcp_http_session_find(struct mcp_http_sessions *s, const char *id, bool *elicits)
{
	pthread_mutex_lock(&s->lock);
	struct slot *e = lookup(s, id);
	uint64_t now = fe_now_us(), scope = 0;
	if (e && expired(s, e, now)) {
		e->scope = 0;
	} else if (e) {
		e->last_us = now;
		scope = e->scope;
		if (elicits)
			*elicits = e->elicits;
	}
	pthread_mutex_unlock(&s->lock);
	return scope;
}

uint64_t mcp_http_session_close(struct mcp_http_sessions *s, const char *id)
{
	pthread_mutex_lock(&s->lock);
	struct slot *e = lookup(s, id);
	uint64_t scope = e && !expired(s, e, fe_now_us()) ? e->scope : 0;
	if (e)
		e->scope = 0;
	pthread_mutex_unlock(&s->lock);
	return scope;
}
