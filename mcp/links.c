/* Results kept after their answer went out, so resources/read can serve the items the answer
 * gave as resource links (an SSE event holds at most MCP_EVENT_MAX; a link's read is one JSON
 * body, whatever its size). A kept result is named by a capability, "snapcell://result/" and
 * 128 random bits in hex, then "/stdout", "/stderr" or "/output/<path>": no client can guess
 * one, and the transport's token still guards every read. It is readable only from the scope
 * that made it (a handshake-era HTTP session; scope 0, stdio and stateless requests, is every
 * client of the server), until it expires. What it holds stays charged to the server's result
 * memory until then. Not a catalogue: resources/list names none of them. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../frontend/frontend.h"
#include "mcp.h"

#define SCHEME "snapcell://result/"

struct mcp_kept {
	char secret[MCP_SECRET_HEX + 1];
	uint64_t scope;
	uint64_t expires_us;
	struct snapcell_result *res;
	size_t charged;
	int refs; /* the store's, while listed, and each reader's */
	struct mcp_kept *next;
};

struct mcp_links {
	pthread_mutex_t lock;
	unsigned ttl_s;
	struct mcp_kept *list;
};

struct mcp_links *mcp_links_new(unsigned ttl_s)
{
	struct mcp_links *l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	pthread_mutex_init(&l->lock, NULL);
	l->ttl_s = ttl_s ? ttl_s : MCP_LINK_TTL_S_DEFAULT;
	return l;
}

static void unref(struct mcp_kept *k)
{
	if (--k->refs)
		return;
	snapcell_result_free(k->res);
	free(k);
}

void mcp_links_free(struct mcp_links *l)
{
	if (!l)
		return;
	while (l->list) {
		struct mcp_kept *k = l->list;
		l->list = k->next;
		unref(k);
	}
	pthread_mutex_destroy(&l->lock);
	free(l);
}

unsigned mcp_links_ttl(const struct mcp_links *l)
{
	return l->ttl_s;
}

static bool expired(const struct mcp_kept *k, uint64_t now_us)
{
	return now_us >= k->expires_us;
}

static bool of_scope(const struct mcp_kept *k, uint64_t scope)
{
	return scope && k->scope == scope;
}

/* Ends the links for which ends(link, arg) holds; returns what they had charged. */
static size_t end_where(struct mcp_links *l, bool (*ends)(const struct mcp_kept *, uint64_t),
			uint64_t arg)
{
	size_t freed = 0;
	pthread_mutex_lock(&l->lock);
	for (struct mcp_kept **p = &l->list; *p;) {
		struct mcp_kept *k = *p;
		if (!ends(k, arg)) {
			p = &k->next;
			continue;
		}
		*p = k->next;
		freed += k->charged;
		unref(k);
	}
	pthread_mutex_unlock(&l->lock);
	return freed;
}

size_t mcp_links_sweep(struct mcp_links *l)
{
	return end_where(l, expired, fe_now_us());
}

size_t mcp_links_forget(struct mcp_links *l, uint64_t scope)
{
	return end_where(l, of_scope, scope);
}

int mcp_links_base(char base[MCP_LINK_BASE_MAX])
{
	char secret[MCP_SECRET_HEX + 1];
	if (mcp_secret_new(secret) < 0)
		return -1;
	memcpy(base, SCHEME, sizeof(SCHEME) - 1);
	memcpy(base + sizeof(SCHEME) - 1, secret, MCP_SECRET_HEX);
	base[sizeof(SCHEME) - 1 + MCP_SECRET_HEX] = '/';
	base[sizeof(SCHEME) + MCP_SECRET_HEX] = 0;
	return 0;
}

struct mcp_kept *mcp_links_keep(struct mcp_links *l, struct snapcell_result *res, uint64_t scope,
				size_t charged, const char *base)
{
	struct mcp_kept *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	memcpy(k->secret, base + sizeof(SCHEME) - 1, MCP_SECRET_HEX);
	k->scope = scope;
	k->expires_us = fe_now_us() + (uint64_t)l->ttl_s * 1000000u;
	k->res = res;
	k->charged = charged;
	k->refs = 2; /* the list's and the caller's */
	pthread_mutex_lock(&l->lock);
	k->next = l->list;
	l->list = k;
	pthread_mutex_unlock(&l->lock);
	return k;
}

void mcp_links_drop(struct mcp_links *l, struct mcp_kept *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&l->lock);
	unref(k);
	pthread_mutex_unlock(&l->lock);
}

const struct snapcell_result *mcp_kept_result(const struct mcp_kept *k)
{
	return k->res;
}

struct mcp_kept *mcp_links_find(struct mcp_links *l, const char *uri, uint64_t scope,
				const char **item)
{
	size_t n = sizeof(SCHEME) - 1;
	if (strncmp(uri, SCHEME, n) || strlen(uri + n) < MCP_SECRET_HEX + 1 ||
	    uri[n + MCP_SECRET_HEX] != '/')
		return NULL;
	uint64_t now = fe_now_us();
	struct mcp_kept *found = NULL;
	pthread_mutex_lock(&l->lock);
	/* Every kept secret is compared in full: how long a refusal takes says nothing. */
	for (struct mcp_kept *k = l->list; k; k = k->next)
		if (mcp_secret_equal(k->secret, uri + n, MCP_SECRET_HEX) && now < k->expires_us &&
		    (!k->scope || k->scope == scope))
			found = k;
	if (found)
		found->refs++;
	pthread_mutex_unlock(&l->lock);
	*item = uri + n + MCP_SECRET_HEX + 1;
	return found;
}
