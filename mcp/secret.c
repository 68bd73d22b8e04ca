/* Unguessable names for what the MCP server hands out (HTTP session ids, session and snapshot
 * handles): random bytes from the kernel spelt as lowercase hex, and a comparison whose time
 * does not depend on where two secrets differ. Not a general cryptography helper. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <sys/random.h>

#include "mcp.h"

int mcp_secret_new(char out[MCP_SECRET_HEX + 1])
{
	unsigned char raw[MCP_SECRET_BYTES];
	size_t got = 0;
	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
		if (n < 0 && errno != EINTR)
			return -errno;
		got += n > 0 ? (size_t)n : 0;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

bool mcp_secret_equal(const char *a, const char *b, size_t n)
{
	unsigned char diff = 0;
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}
