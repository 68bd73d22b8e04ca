/* libFuzzer target for `snapcell run`'s arguments (cli/run_args.c): the input is an argument
 * vector, NUL-separated, after "run". It parses them into a fresh config without running
 * anything, and aborts if a vector that was accepted gives a config the library cannot
 * describe to a model (the tool description in both formats and the instructions, as
 * --describe and --instructions print them), or text that is empty or not UTF-8. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/cli.h"
#include "describable.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* A copy with a NUL after every argument, the last one included. */
	char *buf = malloc(size + 1);
	char *argv[MAX_ARGS + 2];
	int argc = 0;
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	argv[argc++] = "run";
	for (char *p = buf; p <= buf + size && argc <= MAX_ARGS; p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;
	/* --python runs the file it names to ask what it is: a fuzzer must not run what it makes
	 * up (tests/cli and tests/c cover it). */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--python") || !strncmp(argv[i], "--python=", 9)) {
			free(buf);
			return 0;
		}
	struct snapcell_config *cfg = snapcell_config_new();
	struct cli_run_args args;
	if (cfg && cli_run_parse(argc, argv, cfg, &args) == 0 && !args.help)
		fuzz_check_describable(cfg);
	snapcell_config_free(cfg);
	free(buf);
	return 0;
}
