/* How a run ended, as the model is told (snapcell_result_summary): each status with its cause,
 * from results built by hand the way the host fills them. */
#include "helpers.h"

static char *summary_of(enum snapcell_status status, int exit_code, int sig, uint32_t hits,
			const char *stderr_text)
{
	struct snapcell_result res = {0};
	res.status = status;
	res.exit_code = exit_code;
	res.term_signal = sig;
	res.limits_hit = hits;
	res.stderr_buf = (char *)stderr_text;
	res.stderr_len = stderr_text ? strlen(stderr_text) : 0;
	char *text = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_result_summary(&res, &text, &err), 0, "%s", err.message);
	cr_assert_not_null(text);
	return text;
}

#define expect_has(text, part) cr_expect(strstr(text, part), "missing '%s' in:\n%s", part, text)
#define expect_lacks(text, part)                                                                   \
	cr_expect(!strstr(text, part), "unexpected '%s' in:\n%s", part, text)

Test(summary, uncaught_exception_gives_type_message_and_the_traceback_end)
{
	char *text = summary_of(SNAPCELL_STATUS_ERROR, 1, 0, 0,
				"before\nTraceback (most recent call last):\n"
				"  File \"<cell>\", line 3, in <module>\n"
				"  File \"<cell>\", line 2, in f\n"
				"ZeroDivisionError: division by zero\n");
	cr_expect_str_eq(text, "Execution failed with an uncaught exception: ZeroDivisionError: "
			       "division by zero\nThe end of its traceback:\n"
			       "Traceback (most recent call last):\n"
			       "  File \"<cell>\", line 3, in <module>\n"
			       "  File \"<cell>\", line 2, in f\n"
			       "ZeroDivisionError: division by zero");
	free(text);
}

Test(summary, a_long_traceback_shows_its_last_lines_only)
{
	char big[4096] = "Traceback (most recent call last):\n";
	for (int i = 0; i < 20; i++)
		snprintf(big + strlen(big), sizeof(big) - strlen(big),
			 "  File \"<cell>\", line %d, in f%d\n    f%d()\n", i + 1, i, i + 1);
	strcat(big, "RecursionError: deep\n");
	char *text = summary_of(SNAPCELL_STATUS_ERROR, 1, 0, 0, big);
	expect_has(text, "uncaught exception: RecursionError: deep\n");
	expect_has(text, "line 20, in f19");
	expect_lacks(text, "line 2, in f1\n");
	free(text);
}

Test(summary, syntax_error_has_no_traceback_header)
{
	char *text = summary_of(SNAPCELL_STATUS_ERROR, 1, 0, 0,
				"  File \"<cell>\", line 1\n    1/\n      ^\n"
				"SyntaxError: invalid syntax\n");
	expect_has(text, "uncaught exception: SyntaxError: invalid syntax\n");
	expect_has(text, "    1/\n");
	free(text);
}

Test(summary, exit_status_and_the_last_stderr_line)
{
	char *text = summary_of(SNAPCELL_STATUS_ERROR, 3, 0, 0, NULL);
	cr_expect_str_eq(text, "Execution failed: the code exited with status 3.");
	free(text);
	text = summary_of(SNAPCELL_STATUS_ERROR, 1, 0, 0, "warming up\nbad input file\n");
	cr_expect_str_eq(text, "Execution failed: the code exited with status 1. The last line "
			       "it wrote to stderr: bad input file");
	free(text);
}

Test(summary, limits_by_name)
{
	char *text = summary_of(SNAPCELL_STATUS_TIMEOUT, 0, 9, SNAPCELL_HIT_WALL, NULL);
	cr_expect_str_eq(text, "Execution stopped: the run reached the wall-clock time limit.");
	free(text);
	text = summary_of(SNAPCELL_STATUS_TIMEOUT, 0, 9, SNAPCELL_HIT_CPU, NULL);
	expect_has(text, "the CPU time limit");
	free(text);
	text = summary_of(SNAPCELL_STATUS_MEMORY, 0, 9, SNAPCELL_HIT_MEMORY, NULL);
	cr_expect_str_eq(text, "Execution stopped: the run reached the memory limit.");
	free(text);
	text = summary_of(SNAPCELL_STATUS_OUTPUT_LIMIT, 0, 9, SNAPCELL_HIT_STDOUT, NULL);
	cr_expect_str_eq(text,
			 "Execution stopped: the run wrote more than the stdout limit allows.");
	free(text);
	text = summary_of(SNAPCELL_STATUS_ERROR, 1, 0, SNAPCELL_HIT_FILE_SIZE | SNAPCELL_HIT_TMP,
			  "Traceback (most recent call last):\n  File \"<cell>\", line 1, in "
			  "<module>\nOSError: [Errno 27] File too large\n");
	expect_has(text, "OSError: [Errno 27] File too large\n");
	expect_has(text, "\nLimits reached: the file size limit and the /tmp size limit.");
	free(text);
}

Test(summary, signal_cancel_setup_and_ok)
{
	char *text = summary_of(SNAPCELL_STATUS_KILLED, 0, 31, 0, NULL);
	cr_expect_str_eq(text, "Execution stopped: the cell was killed by signal 31 (SIGSYS).");
	free(text);
	text = summary_of(SNAPCELL_STATUS_CANCELLED, 0, 9, 0, NULL);
	expect_has(text, "Execution cancelled");
	free(text);
	text = summary_of(SNAPCELL_STATUS_SETUP_FAILURE, 0, 0, 0, NULL);
	expect_has(text, "the code did not run");
	free(text);
	text = summary_of(SNAPCELL_STATUS_OK, 0, 0, 0, "a warning\n");
	cr_expect_str_eq(text, "Execution succeeded: the code ran to its end.");
	free(text);
}

Test(summary, paused_and_expired_name_the_waiting_call)
{
	struct snapcell_pending_call pending = {.id = 7, .name = "refund"};
	struct snapcell_decision expired = {
		.pending_id = 7, .name = "refund", .verdict = SNAPCELL_VERDICT_EXPIRED};
	struct snapcell_result res = {.status = SNAPCELL_STATUS_PAUSED, .pending = &pending};
	char *text = NULL;
	struct snapcell_error err = {0};
	cr_assert_eq(snapcell_result_summary(&res, &text, &err), 0, "%s", err.message);
	cr_expect_str_eq(text,
			 "Execution paused: the code waits for a decision on its call to tool "
			 "'refund'.");
	free(text);
	res = (struct snapcell_result){
		.status = SNAPCELL_STATUS_EXPIRED, .decisions = &expired, .n_decisions = 1};
	cr_assert_eq(snapcell_result_summary(&res, &text, &err), 0, "%s", err.message);
	cr_expect_str_eq(text, "Execution expired: no decision on its call to tool 'refund' came "
			       "within the approval timeout; the tool did not run and the run was "
			       "ended.");
	free(text);
}

Test(summary, nul_bytes_and_a_cut_message_stay_text)
{
	char msg[3000] = "Traceback (most recent call last):\n  File \"<cell>\", line 1, in x\n"
			 "ValueError: ";
	size_t n = strlen(msg);
	memset(msg + n, 'v', 2000);
	msg[n + 2000] = 0;
	char *text = summary_of(SNAPCELL_STATUS_ERROR, 1, 0, 0, msg);
	expect_has(text, "vvv...");
	cr_expect_lt(strlen(text), 4000);
	free(text);
	struct snapcell_result res = {.status = SNAPCELL_STATUS_ERROR, .exit_code = 1};
	res.stderr_buf = "a\0b\n";
	res.stderr_len = 4;
	char *out = NULL;
	cr_assert_eq(snapcell_result_summary(&res, &out, NULL), 0);
	expect_has(out, "stderr: a b");
	free(out);
	cr_expect_eq(snapcell_result_summary(NULL, &out, NULL), SNAPCELL_E_INVAL);
}
