/* libFuzzer target for how a run's end is worded (src/core/summary.c), whose traceback reader
 * parses the code's own stderr: the first byte picks the status, the rest is stderr. The text
 * must be short (at most a few KiB whatever stderr holds), hold no NUL, and for an error that
 * ends in a traceback carry its exception line. Builds without libFuzzer too, for
 * fuzz/replay.c. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <snapcell.h>

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "summary_fuzz: %s:%d: check failed: %s\n", __FILE__,       \
				__LINE__, #cond);                                                  \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define SUMMARY_MAX 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1 || size > (4u << 20))
		return 0;
	struct snapcell_result res = {0};
	res.status = (enum snapcell_status)(data[0] % 9); /* 8 is no status the host gives */
	res.exit_code = data[0];
	res.term_signal = data[0] % 70;
	res.limits_hit = (uint32_t)data[0] * 0x01010101u;
	res.stderr_buf = malloc(size);
	CHECK(res.stderr_buf);
	memcpy(res.stderr_buf, data + 1, size - 1);
	res.stderr_buf[size - 1] = 0;
	res.stderr_len = size - 1;
	char *text = NULL;
	CHECK(snapcell_result_summary(&res, &text, NULL) == 0);
	size_t n = strlen(text);
	CHECK(n > 0 && n < SUMMARY_MAX);
	if (res.status == SNAPCELL_STATUS_ERROR &&
	    !strncmp(text, "Execution failed with an uncaught exception: ", 45))
		CHECK(strstr(text, "\nThe end of its traceback:\n"));
	free(text);
	free(res.stderr_buf);
	return 0;
}
