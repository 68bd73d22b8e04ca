/* libFuzzer target for the HTTP session table's id lookup (mcp/http_session.c): arbitrary
 * bytes as an Mcp-Session-Id header value against a small table holding live sessions. It
 * aborts if a value that is not exactly a minted id finds a session, if a minted id stops
 * finding its own, or if ending an unknown id ends a live one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../mcp/mcp.h"

#define LIVE 3

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mcp_http_sessions *table;
	static char ids[LIVE][MCP_SESSION_ID_LEN + 1];
	static uint64_t scopes[LIVE];
	if (!table) {
		table = mcp_http_sessions_new(4, 3600);
		for (int i = 0; i < LIVE; i++)
			if (!table || mcp_http_session_open(table, ids[i], &scopes[i], false) < 0)
				abort();
	}
	char *value = malloc(size + 1);
	if (!value)
		return 0;
	memcpy(value, data, size);
	value[size] = 0;
	int match = -1;
	for (int i = 0; i < LIVE; i++)
		if (!strcmp(value, ids[i]))
			match = i;
	uint64_t found = mcp_http_session_find(table, value, NULL);
	if (found != (match >= 0 ? scopes[match] : 0))
		abort();
	if (match < 0 && mcp_http_session_close(table, value))
		abort();
	for (int i = 0; i < LIVE; i++)
		if (mcp_http_session_find(table, ids[i], NULL) != scopes[i])
			abort();
	free(value);
	return 0;
}
