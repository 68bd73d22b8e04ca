/* How a run ended, in the words every front end gives the model after a failed run: the status
 * and its cause (an uncaught exception with the end of its traceback, the limit that stopped
 * the run, the exit status, the signal), and the last expression's value as the model is told
 * it. It reads the result only; it changes nothing. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "util/util.h"

#define TRACEBACK_LINES_MAX   8	   /* the end of a traceback: the innermost frames and the error */
#define EXCEPTION_BYTES_MAX   1000 /* the exception line(s): type and message */
#define TRACEBACK_BYTES_MAX   2000 /* the traceback's end, as shown */
#define STDERR_LINE_BYTES_MAX 300  /* the last stderr line of an exit without a traceback */

static const struct {
	uint32_t flag;
	const char *name;
} limit_names[] = {
	{SNAPCELL_HIT_WALL, "the wall-clock time limit"},
	{SNAPCELL_HIT_CPU, "the CPU time limit"},
	{SNAPCELL_HIT_MEMORY, "the memory limit"},
	{SNAPCELL_HIT_PROCESSES, "the process limit"},
	{SNAPCELL_HIT_FILE_SIZE, "the file size limit"},
	{SNAPCELL_HIT_TMP, "the /tmp size limit"},
	{SNAPCELL_HIT_STDOUT, "the stdout limit"},
	{SNAPCELL_HIT_STDERR, "the stderr limit"},
};

/* "the memory limit and the process limit": the flags set, in the enum's order. */
static void put_limits(FILE *f, uint32_t hits)
{
	size_t n = 0, total = 0;
	for (size_t i = 0; i < SC_ARRAY_LEN(limit_names); i++)
		total += (hits & limit_names[i].flag) != 0;
	for (size_t i = 0; i < SC_ARRAY_LEN(limit_names); i++) {
		if (!(hits & limit_names[i].flag))
			continue;
		n++;
		fprintf(f, "%s%s", n == 1 ? "" : n == total ? " and " : ", ", limit_names[i].name);
	}
}

/* The stderr text as lines: [start, end) offsets of the line that ends before `end`. */
static size_t line_start(const char *s, size_t end)
{
	while (end > 0 && s[end - 1] != '\n')
		end--;
	return end;
}

/* The end of the last traceback in stderr (CPython's format: frames as `  File "...", line N`
 * lines, then the exception at column 0, its message possibly on several lines; a SyntaxError
 * has one File line and no "Traceback" header). Sets *exc to the offset of the exception's
 * first line and *tail to where the shown end starts; false when stderr ends otherwise. */
static bool find_traceback(const char *s, size_t len, size_t *exc, size_t *tail)
{
	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	size_t last_frame = SIZE_MAX;
	for (size_t at = len; at > 0;) {
		size_t start = line_start(s, at);
		if (at - start >= 8 && !strncmp(s + start, "  File \"", 8)) {
			last_frame = start;
			break;
		}
		at = start > 0 ? start - 1 : 0;
	}
	if (last_frame == SIZE_MAX)
		return false;
	/* The exception starts at the first line after the frame that is not indented. */
	size_t at = last_frame;
	while (at < len) {
		const char *nl = memchr(s + at, '\n', len - at);
		at = nl ? (size_t)(nl - s) + 1 : len;
		if (at < len && s[at] != ' ' && s[at] != '\t' && s[at] != '\n')
			break;
	}
	if (at >= len)
		return false;
	*exc = at;
	/* The traceback's block: its indented lines before the last frame, and the header. */
	size_t block = last_frame;
	while (block > 0) {
		size_t prev = line_start(s, block - 1);
		bool header = !strncmp(s + prev, "Traceback (", 11);
		if (s[prev] != ' ' && !header)
			break;
		block = prev;
		if (header)
			break;
	}
	/* The shown end: up to TRACEBACK_LINES_MAX lines before the end, within the block. */
	size_t start = len, lines = 0;
	while (start > block && lines < TRACEBACK_LINES_MAX) {
		start = line_start(s, start - 1);
		lines++;
	}
	*tail = start;
	return true;
}

/* Text from the run, at most max bytes, never half a UTF-8 character; NULs shown as spaces. */
static void put_text(FILE *f, const char *s, size_t len, size_t max)
{
	while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
		len--;
	bool cut = len > max;
	if (cut) {
		len = max;
		while (len > 0 && ((unsigned char)s[len] & 0xC0) == 0x80)
			len--;
	}
	for (size_t i = 0; i < len; i++)
		fputc(s[i] ? s[i] : ' ', f);
	if (cut)
		fputs("...", f);
}

static void put_error(FILE *f, const struct snapcell_result *res)
{
	const char *err = res->stderr_buf ? res->stderr_buf : "";
	size_t len = res->stderr_buf ? res->stderr_len : 0, exc, tail;
	if (find_traceback(err, len, &exc, &tail)) {
		fputs("Execution failed with an uncaught exception: ", f);
		put_text(f, err + exc, len - exc, EXCEPTION_BYTES_MAX);
		fputs("\nThe end of its traceback:\n", f);
		put_text(f, err + tail, len - tail, TRACEBACK_BYTES_MAX);
		return;
	}
	fprintf(f, "Execution failed: the code exited with status %d.", res->exit_code);
	while (len > 0 && (err[len - 1] == '\n' || err[len - 1] == '\r'))
		len--;
	if (len > 0) {
		size_t start = line_start(err, len);
		fputs(" The last line it wrote to stderr: ", f);
		put_text(f, err + start, len - start, STDERR_LINE_BYTES_MAX);
	}
}

static void put_signal(FILE *f, int sig)
{
	const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
	if (abbrev)
		fprintf(f, "signal %d (SIG%s)", sig, abbrev);
	else
		fprintf(f, "signal %d", sig);
}

static void put_summary(FILE *f, const struct snapcell_result *res)
{
	uint32_t hits = res->limits_hit;
	switch (res->status) {
	case SNAPCELL_STATUS_OK:
		fputs("Execution succeeded: the code ran to its end.", f);
		return;
	case SNAPCELL_STATUS_ERROR:
		put_error(f, res);
		break;
	case SNAPCELL_STATUS_TIMEOUT:
		fputs("Execution stopped: the run reached ", f);
		put_limits(f, hits & (SNAPCELL_HIT_WALL | SNAPCELL_HIT_CPU)
				      ? hits & (SNAPCELL_HIT_WALL | SNAPCELL_HIT_CPU)
				      : SNAPCELL_HIT_WALL);
		fputs(".", f);
		hits &= ~(SNAPCELL_HIT_WALL | SNAPCELL_HIT_CPU);
		break;
	case SNAPCELL_STATUS_MEMORY:
		fputs("Execution stopped: the run reached the memory limit.", f);
		hits &= ~SNAPCELL_HIT_MEMORY;
		break;
	case SNAPCELL_STATUS_KILLED:
		fputs("Execution stopped: the cell was killed by ", f);
		put_signal(f, res->term_signal);
		fputs(".", f);
		break;
	case SNAPCELL_STATUS_OUTPUT_LIMIT:
		fputs("Execution stopped: the run wrote more than ", f);
		put_limits(f, hits & (SNAPCELL_HIT_STDOUT | SNAPCELL_HIT_STDERR)
				      ? hits & (SNAPCELL_HIT_STDOUT | SNAPCELL_HIT_STDERR)
				      : SNAPCELL_HIT_STDOUT);
		fputs(" allows.", f);
		hits &= ~(SNAPCELL_HIT_STDOUT | SNAPCELL_HIT_STDERR);
		break;
	case SNAPCELL_STATUS_SETUP_FAILURE:
		fputs("The sandbox could not set up the run; the code did not run.", f);
		break;
	case SNAPCELL_STATUS_CANCELLED:
		fputs("Execution cancelled: the run was stopped from outside before it ended.", f);
		break;
	case SNAPCELL_STATUS_PAUSED:
		fprintf(f,
			"Execution paused: the code waits for a decision on its call to tool '%s'.",
			res->pending ? res->pending->name : "?");
		break;
	case SNAPCELL_STATUS_EXPIRED:
		fprintf(f,
			"Execution expired: no decision on its call to tool '%s' came within the "
			"approval timeout; the tool did not run and the run was ended.",
			res->n_decisions ? res->decisions[res->n_decisions - 1].name : "?");
		break;
	default:
		fprintf(f, "Execution ended with status %d.", (int)res->status);
		break;
	}
	if (hits & ~(SNAPCELL_HIT_STDOUT | SNAPCELL_HIT_STDERR)) {
		fputs("\nLimits reached: ", f);
		put_limits(f, hits);
		fputs(".", f);
	}
}

int snapcell_result_summary(const struct snapcell_result *res, char **out,
			    struct snapcell_error *err)
{
	if (!res || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "result summary: NULL argument");
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return sc__err(err, -errno, "result summary: open_memstream");
	put_summary(f, res);
	if (fclose(f) != 0) {
		free(buf);
		return sc__err(err, -ENOMEM, "result summary");
	}
	*out = buf;
	return 0;
}

const char *snapcell_result_value_json(const struct snapcell_result *res)
{
	return res ? res->value_json : NULL;
}

int snapcell_result_value_text(const struct snapcell_result *res, char **out,
			       struct snapcell_error *err)
{
	if (!res || !out)
		return sc__err(err, SNAPCELL_E_INVAL, "result value: NULL argument");
	int n = 0;
	*out = NULL;
	if (res->value_json)
		n = asprintf(out, "value: %s", res->value_json);
	else if (res->value_state == SNAPCELL_VALUE_NOT_JSON)
		n = asprintf(out, "value: not shown: the last expression's value is not "
				  "representable as JSON (print it to see it)");
	else if (res->value_state == SNAPCELL_VALUE_TOO_LARGE)
		n = asprintf(out,
			     "value: not shown: the last expression's value is over %d bytes as "
			     "JSON (print the part you need)",
			     SNAPCELL_VALUE_MAX_BYTES);
	if (n < 0) {
		*out = NULL;
		return sc__err(err, -ENOMEM, "result value");
	}
	return 0;
}
