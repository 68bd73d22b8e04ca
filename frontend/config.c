/* What both front ends start from: a config with the helper and interpreter the environment
 * names, and the sizes their options and config files take. No command-line parsing here. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend.h"

struct snapcell_config *fe_config_new(void)
{
	struct snapcell_config *cfg = snapcell_config_new();
	if (!cfg) {
		fputs("snapcell: out of memory\n", stderr);
		return NULL;
	}
	const char *helper = getenv("SNAPCELL_HELPER");
	struct snapcell_error err = {0};
	if (helper && *helper && snapcell_config_set_helper(cfg, helper, &err) < 0) {
		/* The library's message names its function; the user set a variable. */
		const char *why = err.message;
		size_t n = strlen("set_helper ") + strlen(helper);
		if (!strncmp(why, "set_helper ", 11) &&
		    !strncmp(why + 11, helper, strlen(helper)) && !strncmp(why + n, ": ", 2))
			why += n + 2;
		fprintf(stderr,
			"snapcell: SNAPCELL_HELPER=%s: %s\n"
			"snapcell: set SNAPCELL_HELPER to the snapcell-cell executable (in a build "
			"tree: build/snapcell-cell), or unset it to use the installed one\n",
			helper, why);
		snapcell_config_free(cfg);
		return NULL;
	}
	if (fe_python_env(cfg) < 0) {
		snapcell_config_free(cfg);
		return NULL;
	}
	return cfg;
}

int fe_parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0 || !isfinite(v))
		return -1;
	double mult = 1;
	switch (*end) {
	case 'k':
	case 'K':
		mult = 1024.0;
		end++;
		break;
	case 'm':
	case 'M':
		mult = 1024.0 * 1024;
		end++;
		break;
	case 'g':
	case 'G':
		mult = 1024.0 * 1024 * 1024;
		end++;
		break;
	}
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end || v * mult > 1e18)
		return -1;
	*out = (uint64_t)(v * mult);
	return 0;
}
