#define _GNU_SOURCE
/* The config's warm-up (snapcell_config_set_warmup): what it leaves in the template reaches
 * every fresh cell, its namespace and output do not; a warm-up that raises, leaves a thread or
 * a descriptor behind, calls a tool or opens a network socket fails creation, saying why. */
#include <string.h>

#include "helpers.h"

/* Creation with this warm-up: 0, or the error code with err filled in. */
static int make(const char *warmup, struct snapcell_config *cfg, struct snapcell_sandbox **sb,
		struct snapcell_error *err)
{
	struct snapcell_config *own = cfg ? NULL : test_config_new();
	cfg = cfg ? cfg : own;
	cr_assert_eq(snapcell_config_set_warmup(cfg, warmup, err), 0, "%s", err->message);
	*sb = NULL;
	int rc = snapcell_sandbox_new(cfg, sb, err);
	snapcell_config_free(own);
	return rc;
}

/* Creation must fail with SNAPCELL_E_HELPER and a message containing want. */
static void expect_refused(const char *warmup, struct snapcell_config *cfg, const char *want)
{
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	int rc = make(warmup, cfg, &sb, &err);
	cr_expect_eq(rc, SNAPCELL_E_HELPER, "rc %d for %s", rc, warmup);
	cr_expect(strstr(err.message, want), "want '%s' in '%s'", want, err.message);
	if (rc == 0)
		snapcell_sandbox_free(sb);
}

Test(warmup, what_it_leaves_reaches_every_fresh_cell_but_not_its_namespace_or_output)
{
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	cr_assert_eq(make("import json, sys\n"
			  "json.primed = [n * 2 for n in range(3)]\n"
			  "leftover = 1\n"
			  "print('from the warm-up'); print('to stderr', file=sys.stderr)\n",
			  NULL, &sb, &err),
		     0, "%s", err.message);
	for (int i = 0; i < 3; i++) /* each run a fresh cell */
		expect_output(sb,
			      "import json\nprint(json.primed, 'leftover' in globals())\n"
			      "json.primed = None\n",
			      "[0, 2, 4] False\n");
	snapcell_sandbox_free(sb);
}

/* A stream kept from the warm-up (logging.basicConfig holds sys.stderr, then its sink) must
 * not hand a run what the warm-up printed: the caller's output, maybe the caller's secrets. */
Test(warmup, its_output_stays_out_of_reach_of_a_stream_it_kept)
{
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	cr_assert_eq(make("import logging, sys\n"
			  "logging.basicConfig()\n"
			  "logging.warning('warm-up secret')\n"
			  "print('printed secret')\n"
			  "sys.kept = (sys.stdout, sys.stderr)\n",
			  NULL, &sb, &err),
		     0, "%s", err.message);
	const char *probe = "import logging, sys\n"
			    "streams = [h.stream for h in logging.root.handlers]\n"
			    "streams += list(sys.kept)\n"
			    "got = ''.join(getattr(s, 'getvalue', lambda: '')() for s in streams)\n"
			    "print('secret' in got, repr(got)[:60])\n";
	for (int i = 0; i < 2; i++) /* the first cell (parked before the warm steps) and a later */
		expect_output(sb, probe, "False ''\n");
	snapcell_sandbox_free(sb);
}

/* Text the warm-up leaves in a buffer of the real stdout (Python's sys.__stdout__, C's stdio)
 * would be inherited by every cell and written to its output at its next flush. */
Test(warmup, its_buffered_output_reaches_no_cell)
{
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	cr_assert_eq(make("import ctypes, sys\n"
			  "sys.__stdout__.write('python secret\\n')\n"
			  "ctypes.CDLL(None).printf(b'C secret\\n')\n",
			  NULL, &sb, &err),
		     0, "%s", err.message);
	for (int i = 0; i < 2; i++) /* the first cell (parked before the warm steps) and a later */
		expect_output(sb,
			      "import ctypes, sys\nsys.__stdout__.flush()\n"
			      "ctypes.CDLL(None).fflush(None)\nprint('cell')\n",
			      "cell\n");
	snapcell_sandbox_free(sb);
}

Test(warmup, an_exception_fails_creation_with_its_line)
{
	expect_refused(
		"x = 1\ndef f():\n    return x / 0\nf()\n", NULL,
		"warm-up: ZeroDivisionError: division by zero (at <warmup>:3 `return x / 0`)");
	expect_refused("import json\njson.loads('{')\n", NULL,
		       "warm-up: JSONDecodeError: Expecting property name enclosed in double "
		       "quotes: line 1 column 2 (char 1) (at <warmup>:2 `json.loads('{')`, in ");
	expect_refused("def (", NULL, "warm-up: SyntaxError: invalid syntax (<warmup>, line 1)");
	expect_refused("raise SystemExit(0)", NULL, "warm-up: SystemExit: 0");
}

Test(warmup, a_thread_left_running_is_refused)
{
	expect_refused("import threading, time\n"
		       "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n",
		       NULL, "warm-up: leaves threads running");
}

Test(warmup, a_descriptor_left_open_is_refused)
{
	expect_refused("import os, sys\nsys.kept = open(os.__file__)\n", NULL,
		       "warm-up: leaves descriptor ");
	expect_refused("import os\nos.pipe()\n", NULL, "warm-up: leaves descriptor ");
	/* poll() cannot see an O_PATH descriptor; the check asks those again. */
	expect_refused("import os\nos.open('/', os.O_PATH)\n", NULL, "warm-up: leaves descriptor ");
	/* Closing one of the template's own (not fd 3, its control socket, which would end the
	 * template before it could say why) is refused too. */
	expect_refused("import os\n"
		       "for fd in range(4, 64):\n"
		       "    try:\n"
		       "        os.fstat(fd)\n"
		       "    except OSError:\n"
		       "        continue\n"
		       "    os.close(fd)\n"
		       "    break\n",
		       NULL, "which the template needs");
	/* One it drops is closed by the collector before the check: allowed. */
	struct snapcell_sandbox *sb;
	struct snapcell_error err = {0};
	cr_assert_eq(make("import os\nf = open(os.__file__)\n", NULL, &sb, &err), 0, "%s",
		     err.message);
	expect_output(sb, "print(2)", "2\n");
	snapcell_sandbox_free(sb);
}

static int called;

static int count_call(void *user, const char *args, char **result)
{
	called++;
	*result = strdup("1");
	return 0;
}

/* The template's fd 3 is its control socket: a call there would break the sandbox. */
Test(warmup, a_tool_call_is_refused_and_reaches_no_tool)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_add_tool(cfg, "count", "Counts.", NULL,
					      SNAPCELL_APPROVAL_NEVER, count_call, NULL, NULL),
		     0);
	called = 0;
	expect_refused("call_tool('count')", cfg,
		       "warm-up: RuntimeError: call_tool is not available in the warm-up");
	expect_refused("import _snapcell\n_snapcell.call('count', b'{}')", cfg,
		       "call_tool is not available in the warm-up");
	cr_expect_eq(called, 0);
	snapcell_config_free(cfg);
}

Test(warmup, a_network_socket_or_lookup_is_refused)
{
	expect_refused("import socket\nsocket.create_connection(('192.0.2.1', 80), timeout=1)\n",
		       NULL, "warm-up: PermissionError: [Errno 13] no network in the warm-up");
	expect_refused("import socket\nsocket.getaddrinfo('example.com', 443)\n", NULL,
		       "no network in the warm-up");
	expect_refused("import _socket\n_socket.socket(_socket.AF_INET6, _socket.SOCK_DGRAM)\n",
		       NULL, "no network in the warm-up");
}
