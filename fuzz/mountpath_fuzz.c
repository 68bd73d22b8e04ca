/* libFuzzer target for mount-path normalisation: whatever the user (or a model) passes, the
 * result is either refused or a clean path strictly beneath /input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "snapcell.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1), out[4096];
	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = 0;
	struct snapcell_error err;
	if (snapcell_normalize_mount_path(in, out, sizeof(out), &err) == 0) {
		size_t n = strlen(out);
		if (strncmp(out, "/input/", 7) || n < 8 || out[n - 1] == '/' || strstr(out, "//") ||
		    strstr(out, "/../") || strstr(out, "/./") || strchr(out, '\\') ||
		    (n >= 3 && !strcmp(out + n - 3, "/..")) ||
		    (n >= 2 && !strcmp(out + n - 2, "/.")))
			abort();
	}
	free(in);
	return 0;
}
