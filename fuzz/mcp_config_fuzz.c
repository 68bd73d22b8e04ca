/* libFuzzer target for `snapcell mcp --config FILE` (mcp/config.c): the input is the file's
 * text. A file that parses is applied to a fresh config; the target aborts if one that was
 * accepted gives a config the library cannot describe to a model (the tool description in
 * both formats, the instructions) or text that is empty or not UTF-8, or if server options
 * come out of their documented range. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "../mcp/mcp.h"
#include "describable.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
	/* "mcp_servers" starts the commands it names and connects to its URLs while the file is
	 * applied, and "python" runs the file it names to ask what it is: a fuzzer must not run
	 * what it makes up (tests/mcp and tests/c cover those keys). */
	if (json_object_get(root, "mcp_servers") || json_object_get(root, "python")) {
		json_decref(root);
		return 0;
	}
	struct snapcell_config *cfg = root ? snapcell_config_new() : NULL;
	struct mcp_options opts = {0};
	if (cfg && mcp_config_apply("fuzz.json", root, cfg, &opts) == 0) {
		if (opts.max_runs > 4096 || opts.max_queued > MCP_QUEUED_MAX)
			abort();
		fuzz_check_describable(cfg);
	}
	/* The config first: it may hold the options' tool argvs (mcp.h). */
	snapcell_config_free(cfg);
	mcp_options_clear(&opts);
	json_decref(root);
	return 0;
}
