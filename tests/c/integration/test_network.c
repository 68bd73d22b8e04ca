/* The network as the C API gives it: no entries, no network (and an error that says so);
 * entries, the egress gate (the whole list of cases is tests/cli/test_network_cli.py, which
 * has test hosts of its own). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

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
	const char *want =
		"network access is not available in this sandbox: its configuration allows no "
		"network target\n";
	char expected[2048];
	snprintf(expected, sizeof(expected),
		 "NetworkUnavailableError|True|[Errno 13] cannot open a network socket: %s"
		 "NetworkUnavailableError|True|[Errno 13] cannot resolve 'example.com': %s"
		 "NetworkUnavailableError|True|[Errno 13] cannot open a network socket: %s"
		 "URLError|False|<urlopen error [Errno 13] cannot resolve 'example.com': %.*s>\n"
		 "b'x'\n",
		 want, want, want, (int)strlen(want) - 1, want);
	cr_expect_str_eq(res->stdout_buf, expected, "stderr: %s", res->stderr_buf);
	cr_expect_eq(res->n_net_events, 0);
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

/* A loopback server on the host that greets each connection and closes it. */
struct greeter {
	int fd;
	uint16_t port;
	pthread_t thread;
};

static void *greet(void *arg)
{
	struct greeter *g = arg;
	for (int c; (c = accept(g->fd, NULL, NULL)) >= 0; close(c))
		(void)!write(c, "hello", 5);
	return NULL;
}

static void greeter_start(struct greeter *g)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	g->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(g->fd >= 0 && bind(g->fd, (struct sockaddr *)&a, len) == 0 &&
		  listen(g->fd, 8) == 0 && getsockname(g->fd, (struct sockaddr *)&a, &len) == 0);
	g->port = ntohs(a.sin_port);
	pthread_create(&g->thread, NULL, greet, g);
}

static void greeter_stop(struct greeter *g)
{
	shutdown(g->fd, SHUT_RDWR);
	pthread_join(g->thread, NULL);
	close(g->fd);
}

Test(network, an_allowed_literal_is_reached_through_the_gate_and_audited)
{
	struct greeter g;
	greeter_start(&g);
	char target[32], code[512];
	snprintf(target, sizeof(target), "127.0.0.1:%u", g.port);
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_allow(cfg, target, NULL, 0, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg); /* the sandbox's copy outlives the caller's config */
	snprintf(code, sizeof(code),
		 "import socket\n"
		 "s = socket.create_connection(('127.0.0.1', %u))\n"
		 "print(s.recv(16))\n"
		 "try:\n"
		 "    socket.create_connection(('127.0.0.1', %u))\n"
		 "except PermissionError as e:\n"
		 "    print(e.strerror)\n",
		 g.port, g.port + 1 == 65536 ? 1 : g.port + 1);
	struct snapcell_result *res = test_run(sb, code);
	expect_ok(res);
	char want[256];
	snprintf(want, sizeof(want), "b'hello'\n127.0.0.1:%u is not on this sandbox's allow list\n",
		 g.port + 1 == 65536 ? 1 : g.port + 1);
	cr_expect_str_eq(res->stdout_buf, want, "stderr: %s", res->stderr_buf);
	cr_assert_eq(res->n_net_events, 2);
	/* In the order they started: the connection (ended last), then the refusal. */
	const struct snapcell_net_event *ok = &res->net_events[0], *refused = &res->net_events[1];
	cr_expect(!refused->allowed && refused->kind == SNAPCELL_NET_CONNECT);
	cr_expect(ok->allowed && ok->kind == SNAPCELL_NET_CONNECT);
	cr_expect_str_eq(ok->target, "127.0.0.1");
	cr_expect_str_eq(ok->address, "127.0.0.1");
	cr_expect_str_eq(ok->rule, target);
	cr_expect_eq(ok->port, g.port);
	cr_expect_eq(ok->bytes_in, 5);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	greeter_stop(&g);
}

Test(network, a_cell_that_floods_its_network_socket_loses_it_not_the_host)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_allow(cfg, "127.0.0.1:9", NULL, 0, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	/* Questions never read back, a malformed frame, then a normal run in a fresh cell. */
	struct snapcell_result *res =
		test_run(sb, "import os\n"
			     "q = b'R a.example\\x00'\n"
			     "frame = (len(q) + 1).to_bytes(4, 'little') + b'N' + q\n"
			     "os.set_blocking(4, False)\n"
			     "for _ in range(100000):\n"
			     "    try:\n"
			     "        os.write(4, frame)\n"
			     "    except BlockingIOError:\n"
			     "        break\n"
			     "try:\n"
			     "    os.write(4, b'\\xff\\xff\\xff\\x7fN')\n"
			     "except BlockingIOError:\n"
			     "    pass\n"
			     "print('done')\n");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "done\n");
	snapcell_result_free(res);
	expect_output(sb, "print(1)", "1\n");
	snapcell_sandbox_free(sb);
}
