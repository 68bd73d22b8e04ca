/* What code in a cell gets when it tries the network before the gate, with and without
 * configured entries. */
#include "helpers.h"

static const char network_probe[] =
	"import socket, _socket, urllib.request\n"
	"def attempt(f):\n"
	"    try:\n"
	"        f()\n"
	"    except OSError as e:\n"
	"        return f'{type(e).__name__}|{isinstance(e, PermissionError)}|{e}'\n"
	"    return 'connected'\n"
	"print(attempt(lambda: socket.create_connection(('127.0.0.1', 80), timeout=1)))\n"
	"print(attempt(lambda: socket.getaddrinfo('example.com', 443)))\n"
	"print(attempt(lambda: _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)))\n"
	"print(attempt(lambda: urllib.request.urlopen('http://example.com/', timeout=1)))\n"
	"a, b = socket.socketpair()\n"
	"a.sendall(b'x'); print(b.recv(1))\n";

Test(network, code_gets_a_clear_error_instead_of_the_network)
{
	struct snapcell_sandbox *sb = test_sandbox(NULL);
	struct snapcell_result *res = test_run(sb, network_probe);
	expect_ok(res);
	const char *want = "network access is not available in this sandbox yet\n";
	char expected[2048];
	snprintf(expected, sizeof(expected),
		 "NetworkUnavailableError|True|[Errno 13] cannot open a network socket: %s"
		 "NetworkUnavailableError|True|[Errno 13] cannot resolve 'example.com': %s"
		 "NetworkUnavailableError|True|[Errno 13] cannot open a network socket: %s"
		 "URLError|False|<urlopen error [Errno 13] cannot resolve 'example.com': %.*s>\n"
		 "b'x'\n",
		 want, want, want, (int)strlen(want) - 1, want);
	cr_expect_str_eq(res->stdout_buf, expected, "stderr: %s", res->stderr_buf);
	snapcell_result_free(res);
	/* Uncaught, the traceback names it too. */
	res = test_run(sb, "import socket\nsocket.create_connection(('10.0.0.1', 80))\n");
	cr_expect_eq(res->status, SNAPCELL_STATUS_ERROR);
	cr_expect(strstr(res->stderr_buf, "socket.NetworkUnavailableError: [Errno 13] cannot open "
					  "a network socket: network access is not available"),
		  "%s", res->stderr_buf);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}

Test(network, configured_entries_are_named_as_recorded_not_granted)
{
	struct snapcell_config *cfg = test_config_new();
	const char *methods[] = {"post", "GET"};
	cr_assert_eq(snapcell_config_allow(cfg, "https://api.example.com/v1", methods, 2, NULL), 0);
	cr_assert_eq(snapcell_config_allow(cfg, "127.0.0.1:8080", NULL, 0, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	/* the sandbox's copy outlives the caller's config */
	snapcell_config_free(cfg);
	struct snapcell_result *res =
		test_run(sb, "import socket\ntry:\n    socket.create_connection(('127.0.0.1', "
			     "8080))\nexcept OSError as e:\n    print(e)\n");
	expect_ok(res);
	cr_expect_str_eq(
		res->stdout_buf,
		"[Errno 13] cannot open a network socket: network access is not "
		"available in this sandbox yet: the allowed targets 127.0.0.1:8080 (all "
		"methods); https://api.example.com/v1 (GET, POST) are recorded but not yet "
		"enforced, "
		"so no connection is granted\n");
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
}
