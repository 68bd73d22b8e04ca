/* libFuzzer target for the lookup of results' resource links (mcp/links.c): arbitrary bytes
 * as a resources/read URI, the first byte choosing the reader's scope, against a store holding
 * results of three scopes. It aborts if a URI finds a result without starting with that
 * result's exact base, if it finds another session's result, if the item it points to is not
 * the rest of the URI, or if a result's own base stops finding it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../mcp/mcp.h"

#define LIVE 3

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint64_t scopes[LIVE] = {0, 7, 9};
/* Two bases the corpus can name (a server's are random): the lookup must not care. */
static const char *const fixed[LIVE] = {NULL, "snapcell://result/0123456789abcdef0123456789abcdef/",
					"snapcell://result/fedcba9876543210fedcba9876543210/"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mcp_links *links;
	static char bases[LIVE][MCP_LINK_BASE_MAX];
	static struct mcp_kept *kept[LIVE];
	if (!links) {
		if (!(links = mcp_links_new(3600)))
			abort();
		for (int i = 0; i < LIVE; i++) {
			if (fixed[i])
				strcpy(bases[i], fixed[i]);
			else if (mcp_links_base(bases[i]) < 0)
				abort();
			if (!(kept[i] = mcp_links_keep(links, NULL, scopes[i], 0, bases[i])))
				abort();
			mcp_links_drop(links, kept[i]); /* the store keeps it for an hour */
		}
	}
	if (!size)
		return 0;
	uint64_t scope = data[0] % 3 == 0 ? 0 : data[0] % 3 == 1 ? 7 : 8;
	char *uri = malloc(size);
	if (!uri)
		return 0;
	memcpy(uri, data + 1, size - 1);
	uri[size - 1] = 0;
	int want = -1;
	for (int i = 0; i < LIVE; i++)
		if (!strncmp(uri, bases[i], strlen(bases[i])) && (!scopes[i] || scopes[i] == scope))
			want = i;
	const char *item = NULL;
	struct mcp_kept *k = mcp_links_find(links, uri, scope, &item);
	if ((want < 0) != !k || (k && (k != kept[want] || item != uri + strlen(bases[want]))))
		abort();
	mcp_links_drop(links, k);
	for (int i = 0; i < LIVE; i++) {
		k = mcp_links_find(links, bases[i], scopes[i], &item);
		if (k != kept[i])
			abort();
		mcp_links_drop(links, k);
	}
	free(uri);
	return 0;
}
