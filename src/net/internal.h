/* What the files of the net layer share and nobody else uses: character classes and the
 * strict target parser entries.c builds an entry on. */
#ifndef SC_NET_INTERNAL_H
#define SC_NET_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "net.h"

/* Messages quote at most this much of a user's text, so the reason always fits. */
#define SC_NET_SHOWN(n) ((int)((n) > 64 ? 64 : (n)))

static inline bool sc__net_is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static inline bool sc__net_is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static inline bool sc__net_is_hex(char c)
{
	return sc__net_is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static inline char sc__net_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* RFC 9110 token characters. */
static inline bool sc__net_is_tchar(char c)
{
	if (sc__net_is_alpha(c) || sc__net_is_digit(c))
		return true;
	for (const char *p = "!#$%&'*+-.^_`|~"; *p; p++)
		if (c == *p)
			return true;
	return false;
}

/* Why a path (n bytes, before any '?') cannot be compared with a prefix without guessing
 * (match.c), NULL when it can: what sc__net_match_request refuses under a path rule. */
const char *sc__net_path_ambiguous(const char *p, size_t n);

/* Fills e's target, kind, host, addr, ports and path from a user's target (target.c);
 * on failure e holds whatever was allocated (sc__net_entry_clear frees it). */
int sc__net_target_parse(const char *in, struct sc_net_entry *e, struct snapcell_error *err);

#endif
