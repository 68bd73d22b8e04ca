/* `snapcell bench`: placeholder replaced by the benchmark implementation. */
#include <stdio.h>

#include "../cli/cli.h"

int cli_bench(int argc, char **argv)
{
	(void)argc, (void)argv;
	fputs("snapcell bench: not built yet\n", stderr);
	return 3;
}
