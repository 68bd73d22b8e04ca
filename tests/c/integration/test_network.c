/* The network as the C API gives it: no entries, no network (and an error that says so);
 * entries, the egress gate (the whole list of cases is tests/cli/test_network_cli.py, which
 * has test hosts of its own). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

/* A plain HTTP server on the host's loopback, one connection at a time, each closed after
 * its answer: GET answers BIG_BYTES of 'x', POST reads its body and answers how much came.
 * Counts what it received and sent. */
#define BIG_BYTES (600u << 10)

struct origin {
	int fd;
	uint16_t port;
	pthread_t thread;
	pthread_mutex_t lock;
	uint64_t received, sent; /* body bytes */
};

static void origin_answer(struct origin *o, int c)
{
	char head[8192];
	size_t len = 0;
	char *end = NULL;
	while (!end && len < sizeof(head) - 1) {
		ssize_t n = recv(c, head + len, sizeof(head) - 1 - len, 0);
		if (n <= 0)
			return;
		len += (size_t)n;
		head[len] = 0;
		end = strstr(head, "\r\n\r\n");
	}
	if (!end)
		return;
	size_t body = len - (size_t)(end + 4 - head);
	const char *cl = strcasestr(head, "\r\ncontent-length:");
	size_t want = cl ? strtoul(cl + 17, NULL, 10) : 0;
	char buf[65536];
	while (body < want) {
		ssize_t n = recv(c, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		body += (size_t)n;
	}
	pthread_mutex_lock(&o->lock);
	o->received += body;
	pthread_mutex_unlock(&o->lock);
	char answer[128];
	bool post = !strncmp(head, "POST ", 5);
	int n = post ? snprintf(answer, sizeof(answer),
				"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Got: %zu\r\n"
				"Connection: close\r\n\r\n",
				body)
		     : snprintf(
			       answer, sizeof(answer),
			       "HTTP/1.1 200 OK\r\nContent-Length: %u\r\nConnection: close\r\n\r\n",
			       BIG_BYTES);
	if (send(c, answer, (size_t)n, MSG_NOSIGNAL) != n || post)
		return;
	memset(buf, 'x', sizeof(buf));
	for (size_t sent = 0; sent < BIG_BYTES;) {
		size_t k = BIG_BYTES - sent < sizeof(buf) ? BIG_BYTES - sent : sizeof(buf);
		ssize_t w = send(c, buf, k, MSG_NOSIGNAL);
		if (w <= 0)
			break;
		sent += (size_t)w;
		pthread_mutex_lock(&o->lock);
		o->sent += (size_t)w;
		pthread_mutex_unlock(&o->lock);
	}
}

static void *origin_main(void *arg)
{
	struct origin *o = arg;
	for (int c; (c = accept4(o->fd, NULL, NULL, SOCK_CLOEXEC)) >= 0; close(c))
		origin_answer(o, c);
	return NULL;
}

static void origin_start(struct origin *o)
{
	memset(o, 0, sizeof(*o));
	pthread_mutex_init(&o->lock, NULL);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	o->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(o->fd >= 0 && bind(o->fd, (struct sockaddr *)&a, len) == 0 &&
		  listen(o->fd, 8) == 0 && getsockname(o->fd, (struct sockaddr *)&a, &len) == 0);
	o->port = ntohs(a.sin_port);
	pthread_create(&o->thread, NULL, origin_main, o);
}

static void origin_stop(struct origin *o)
{
	shutdown(o->fd, SHUT_RDWR);
	pthread_join(o->thread, NULL);
	close(o->fd);
}

/* A sandbox whose one entry is "http://127.0.0.1:PORT/up" (served by the HTTP gate). */
static struct snapcell_sandbox *origin_sandbox(const struct origin *o, uint64_t net_bytes)
{
	char target[64];
	snprintf(target, sizeof(target), "http://127.0.0.1:%u/up", o->port);
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_allow(cfg, target, NULL, 0, NULL), 0);
	if (net_bytes)
		cr_assert_eq(
			snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_NET_BYTES, net_bytes, NULL),
			0);
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 60000, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

/* Twelve requests of 600 KiB each way, under a 1 MiB budget: each under the gate's body
 * cap, so only the budget can stop them. */
static const char budget_code[] =
	"import urllib.request, urllib.error\n"
	"def attempt(data):\n"
	"    req = urllib.request.Request('http://127.0.0.1:%u/up/x', data=data)\n"
	"    try:\n"
	"        with urllib.request.urlopen(req, timeout=20) as r:\n"
	"            return 'ok %%d' %% len(r.read())\n"
	"    except urllib.error.HTTPError as e:\n"
	"        return '%%d %%s' %% (e.code, e.read().decode().strip())\n"
	"    except Exception as e:\n"
	"        return 'cut'\n"
	"out = [attempt(%s) for _ in range(12)]\n"
	"print(out[0])\n"
	"print(out[1][:3])\n"
	"print(set(out[2:]))\n";

static void expect_budget_holds(bool upload)
{
	struct origin o;
	origin_start(&o);
	struct snapcell_sandbox *sb = origin_sandbox(&o, 1 << 20);
	char code[2048];
	snprintf(code, sizeof(code), budget_code, o.port, upload ? "b'y' * (600 << 10)" : "None");
	struct snapcell_result *res = test_run(sb, code);
	expect_ok(res);
	char want[512];
	snprintf(want, sizeof(want),
		 "%s\n%%s\n{\"403 snapcell: the run's network byte budget (net_bytes, 1048576 "
		 "bytes) is spent\"}\n",
		 upload ? "ok 0" : "ok 614400");
	char *second = strchr(res->stdout_buf, '\n');
	cr_assert(second, "%s", res->stdout_buf);
	/* The second request is cut mid-transfer: a closed connection, or the 403 when the
	 * upload was still being read. */
	cr_expect(!strncmp(second + 1, "cut\n", 4) || !strncmp(second + 1, "403\n", 4), "%s",
		  res->stdout_buf);
	char got[512];
	snprintf(got, sizeof(got), "%.*s\n%%s%s", (int)(second - res->stdout_buf), res->stdout_buf,
		 strchr(second + 1, '\n'));
	cr_expect_str_eq(got, want, "stdout: %s\nstderr: %s", res->stdout_buf, res->stderr_buf);
	cr_expect(res->net_limits_hit & SNAPCELL_NET_HIT_BYTES);
	/* What went through (a refused request's body is read and dropped, never sent on). */
	uint64_t moved = 0;
	for (size_t i = 0; i < res->n_net_events; i++)
		if (res->net_events[i].allowed)
			moved += res->net_events[i].bytes_in + res->net_events[i].bytes_out;
	cr_expect_lt(moved, (1u << 20) + (128u << 10), "%llu", (unsigned long long)moved);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	origin_stop(&o);
	/* What the origin took or gave: the first request and part of the second. */
	cr_expect_lt(upload ? o.received : o.sent, 2 * BIG_BYTES + (256u << 10), "%llu",
		     (unsigned long long)(upload ? o.received : o.sent));
}

/* The budget was charged when a request ended, and never checked in
 * the HTTP gate: 9.4 MB moved under 1 MiB. */
Test(network, the_byte_budget_holds_through_http_rules_for_downloads)
{
	expect_budget_holds(false);
}

Test(network, the_byte_budget_holds_through_http_rules_for_uploads)
{
	expect_budget_holds(true);
}

/* 10,050 refused lookups filled the 10,000-event record and the upload
 * that followed left no trace. Refusals repeat into one event's count, have a share of
 * their own, and allowed traffic always has room. */
Test(network, refusals_cannot_push_allowed_traffic_out_of_the_record)
{
	struct origin o;
	origin_start(&o);
	struct snapcell_sandbox *sb = origin_sandbox(&o, 0);
	char code[1024];
	snprintf(code, sizeof(code),
		 "import socket, urllib.request\n"
		 "for i in range(10050):\n"
		 "    try:\n"
		 "        socket.getaddrinfo('blocked%%d.example' %% (i %% 3000), 80)\n"
		 "    except OSError:\n"
		 "        pass\n"
		 "req = urllib.request.Request('http://127.0.0.1:%u/up/exfil', data=b'y' * 1000)\n"
		 "print(urllib.request.urlopen(req).headers['X-Got'])\n",
		 o.port);
	struct snapcell_result *res = test_run(sb, code);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "1000\n");
	const struct snapcell_net_event *upload = NULL, *first = NULL;
	size_t refused = 0;
	uint64_t counted = 0;
	for (size_t i = 0; i < res->n_net_events; i++) {
		const struct snapcell_net_event *e = &res->net_events[i];
		if (e->kind == SNAPCELL_NET_REQUEST && e->allowed)
			upload = e;
		if (!e->allowed)
			refused++, counted += e->count;
		if (e->target && !strcmp(e->target, "blocked0.example"))
			first = e;
	}
	cr_assert(upload, "the upload is in the record (%zu events)", res->n_net_events);
	cr_expect_str_eq(upload->path, "/up/exfil");
	cr_expect_geq(upload->bytes_out, 1000);
	cr_expect_eq(refused, 1000);
	cr_assert(first);
	cr_expect_eq(first->count, 4, "blocked0 was asked for 4 times");
	/* Every refusal is in a count, or in the dropped tally. */
	cr_expect_eq(counted + res->n_net_events_dropped, 10050);
	cr_expect(res->net_limits_hit & SNAPCELL_NET_HIT_EVENTS);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	origin_stop(&o);
}

/* Past 10,000 allowed events the gate refuses rather than let traffic go unrecorded. */
Test(network, traffic_the_record_has_no_room_for_is_refused, .timeout = 120)
{
	struct greeter g;
	greeter_start(&g);
	char target[32], code[1024];
	snprintf(target, sizeof(target), "127.0.0.1:%u", g.port);
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_allow(cfg, target, NULL, 0, NULL), 0);
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_WALL_MS, 100000, NULL), 0);
	/* Threads of closed connections may lag a busy host: not the cap under test. */
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_NET_CONNECTIONS, 1024, NULL), 0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	snprintf(code, sizeof(code),
		 "import socket\n"
		 "ok, why = 0, set()\n"
		 "for i in range(10010):\n"
		 "    try:\n"
		 "        with socket.create_connection(('127.0.0.1', %u)) as s:\n"
		 "            if s.recv(5) == b'hello':\n"
		 "                ok += 1\n"
		 "    except OSError as e:\n"
		 "        why.add(type(e).__name__)\n"
		 "print(ok, sorted(why))\n",
		 g.port);
	struct snapcell_result *res = test_run(sb, code);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "10000 ['ConnectionResetError']\n");
	size_t allowed = 0;
	const struct snapcell_net_event *full = NULL;
	for (size_t i = 0; i < res->n_net_events; i++) {
		allowed += res->net_events[i].allowed;
		if (!res->net_events[i].allowed)
			full = &res->net_events[i];
	}
	cr_expect_eq(allowed, 10000);
	cr_assert(full);
	cr_expect_str_eq(full->rule, "this run's network record is full (10000 allowed events)");
	cr_expect_eq(full->count, 10);
	cr_expect(res->net_limits_hit & SNAPCELL_NET_HIT_EVENTS);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	greeter_stop(&g);
}

/* A server that takes whatever each connection sends until it closes, and counts it. */
struct sink {
	int fd;
	uint16_t port;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t gone; /* signalled when a connection's thread ends */
	int n_live;	     /* connection threads not yet ended */
	uint64_t received;
};

static void *sink_conn(void *arg)
{
	struct sink *k = ((void **)arg)[0];
	int c = (int)(intptr_t)((void **)arg)[1];
	free(arg);
	char buf[65536];
	for (ssize_t n; (n = recv(c, buf, sizeof(buf), 0)) > 0;) {
		pthread_mutex_lock(&k->lock);
		k->received += (uint64_t)n;
		pthread_mutex_unlock(&k->lock);
	}
	close(c);
	pthread_mutex_lock(&k->lock);
	k->n_live--;
	pthread_cond_signal(&k->gone);
	pthread_mutex_unlock(&k->lock);
	return NULL;
}

static void *sink_main(void *arg)
{
	struct sink *k = arg;
	for (int c; (c = accept4(k->fd, NULL, NULL, SOCK_CLOEXEC)) >= 0;) {
		void **a = malloc(2 * sizeof(void *));
		pthread_t t;
		a[0] = k, a[1] = (void *)(intptr_t)c;
		pthread_mutex_lock(&k->lock);
		k->n_live++;
		pthread_mutex_unlock(&k->lock);
		if (pthread_create(&t, NULL, sink_conn, a) == 0) {
			pthread_detach(t);
			continue;
		}
		close(c), free(a);
		pthread_mutex_lock(&k->lock);
		k->n_live--;
		pthread_mutex_unlock(&k->lock);
	}
	return NULL;
}

static void sink_start(struct sink *k, const char *address, uint16_t port)
{
	memset(k, 0, sizeof(*k));
	pthread_mutex_init(&k->lock, NULL);
	pthread_cond_init(&k->gone, NULL);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
	socklen_t len = sizeof(a);
	cr_assert_eq(inet_pton(AF_INET, address, &a.sin_addr), 1);
	k->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(k->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	cr_assert(k->fd >= 0 && bind(k->fd, (struct sockaddr *)&a, len) == 0 &&
		  listen(k->fd, 64) == 0 && getsockname(k->fd, (struct sockaddr *)&a, &len) == 0);
	k->port = ntohs(a.sin_port);
	pthread_create(&k->thread, NULL, sink_main, k);
}

/* What the sink took, once the gate has closed every connection (the run is over) and each
 * connection's thread has read to its end. */
static uint64_t sink_stop(struct sink *k)
{
	shutdown(k->fd, SHUT_RDWR);
	pthread_join(k->thread, NULL);
	close(k->fd);
	pthread_mutex_lock(&k->lock);
	while (k->n_live > 0)
		pthread_cond_wait(&k->gone, &k->lock);
	uint64_t got = k->received;
	pthread_mutex_unlock(&k->lock);
	pthread_cond_destroy(&k->gone);
	return got;
}

#define PASS_BUDGET (256u << 10)

/* A sandbox allowed target under a PASS_BUDGET byte budget. */
static struct snapcell_sandbox *budget_sandbox(const char *target)
{
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_allow(cfg, target, NULL, 0, NULL), 0);
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_NET_BYTES, PASS_BUDGET, NULL),
		     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	return sb;
}

/* The uploads below can all fit in their sockets' buffers before the gate moves a byte (a slow
 * host, a sanitized build): the run then waits (10 s at most) until the gate has cut every
 * connection, as it does at the budget, rather than end them itself. */
#define UNTIL_CUT                                                                                  \
	"import time\n"                                                                            \
	"end = time.monotonic() + 10\n"                                                            \
	"while socks and time.monotonic() < end:\n"                                                \
	"    for s in select.select(socks, [], [], 1)[0]:\n"                                       \
	"        try:\n"                                                                           \
	"            gone = not s.recv(65536)\n"                                                   \
	"        except OSError:\n"                                                                \
	"            gone = True\n"                                                                \
	"        if gone:\n"                                                                       \
	"            socks.remove(s)\n"

/* Sixteen connections upload at once through a pass-through entry under a 256 KiB budget:
 * the chunk that crossed the budget used to go on anyway, one per connection. */
Test(network, the_byte_budget_holds_for_racing_pass_through_uploads)
{
	struct sink k;
	sink_start(&k, "127.0.0.1", 0);
	char target[32], code[2048];
	snprintf(target, sizeof(target), "127.0.0.1:%u", k.port);
	struct snapcell_sandbox *sb = budget_sandbox(target);
	snprintf(code, sizeof(code),
		 "import select, socket\n"
		 "socks = [socket.create_connection(('127.0.0.1', %u)) for _ in range(16)]\n"
		 "left = {s: 2 << 20 for s in socks}\n"
		 "for s in socks:\n"
		 "    s.setblocking(False)\n"
		 "while left:\n"
		 "    _, ready, _ = select.select([], list(left), [], 5)\n"
		 "    if not ready:\n"
		 "        break\n"
		 "    for s in ready:\n"
		 "        try:\n"
		 "            left[s] -= s.send(b'u' * 65536)\n"
		 "        except OSError:\n"
		 "            left[s] = 0\n"
		 "        if left[s] <= 0:\n"
		 "            del left[s]\n" UNTIL_CUT "print('done')\n",
		 k.port);
	struct snapcell_result *res = test_run(sb, code);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "done\n");
	cr_expect(res->net_limits_hit & SNAPCELL_NET_HIT_BYTES);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	uint64_t got = sink_stop(&k);
	cr_expect_leq(got, PASS_BUDGET, "%llu bytes reached the server", (unsigned long long)got);
}

/* A ClientHello of the cell's making, its SNI the name: the gate reads it to check the name
 * and sends it on; its bytes were never charged, so a hello full of data per connection
 * moved ~16 KiB each past any budget. The server is on an address of a network namespace
 * this test makes (a documentation address: public to the address rules, routed nowhere). */
Test(network, a_client_hello_is_charged_to_the_byte_budget)
{
	/* An unprivileged run of this binary lacks no feature of the host: the namespace is
	 * root's to make. */
	if (geteuid() != 0)
		criterion_skip_test("making a network namespace for the test server needs root");
	if (unshare(CLONE_NEWNET) < 0 ||
	    system("ip link set lo up && ip addr add 198.51.100.77/32 dev lo") != 0) {
		test_skip_or_fail("needs a network namespace of its own (root)");
		return;
	}
	struct sink k;
	sink_start(&k, "198.51.100.77", 443);
	struct snapcell_config *cfg = test_config_new();
	cr_assert_eq(snapcell_config_allow(cfg, "sink.example", NULL, 0, NULL), 0);
	cr_assert_eq(snapcell_config_map_host(cfg, "sink.example", "198.51.100.77", NULL), 0);
	cr_assert_eq(snapcell_config_set_limit(cfg, SNAPCELL_LIMIT_NET_BYTES, PASS_BUDGET, NULL),
		     0);
	struct snapcell_sandbox *sb = test_sandbox(cfg);
	snapcell_config_free(cfg);
	struct snapcell_result *res = test_run(
		sb,
		"import socket, struct\n"
		"name = b'sink.example'\n"
		"sni = struct.pack('!HHHBH', 0, len(name) + 5, len(name) + 3, 0, len(name))"
		" + name\n"
		"data = struct.pack('!HH', 0xfe01, 16000) + b'd' * 16000\n"
		"exts = sni + data\n"
		"body = (b'\\x03\\x03' + b'r' * 32 + b'\\x00' + b'\\x00\\x02\\x13\\x01\\x01\\x00'"
		" + struct.pack('!H', len(exts)) + exts)\n"
		"hs = b'\\x01' + len(body).to_bytes(3, 'big') + body\n"
		"hello = b'\\x16\\x03\\x01' + struct.pack('!H', len(hs)) + hs\n"
		"sent = 0\n"
		"for i in range(64):\n"
		"    try:\n"
		"        with socket.create_connection(('sink.example', 443)) as s:\n"
		"            s.sendall(hello)\n"
		"            s.shutdown(socket.SHUT_WR)\n"
		"            s.recv(1)\n"
		"            sent += 1\n"
		"    except OSError:\n"
		"        pass\n"
		"print(len(hello) > 16000, sent < 64)\n");
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "True True\n", "stderr: %s", res->stderr_buf);
	cr_expect(res->net_limits_hit & SNAPCELL_NET_HIT_BYTES);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	uint64_t got = sink_stop(&k);
	cr_expect_leq(got, PASS_BUDGET, "%llu bytes reached the server", (unsigned long long)got);
}

/* The same race through the HTTP gate (a path rule), chunked so that no body is over the
 * gate's cap (which is the budget here): each body read is charged before curl sends it on.
 * The sink also counts what curl writes of its own (heads, chunk framing). */
Test(network, the_byte_budget_holds_for_racing_uploads_through_http_rules)
{
	struct sink k;
	sink_start(&k, "127.0.0.1", 0);
	char target[48], code[2048];
	snprintf(target, sizeof(target), "http://127.0.0.1:%u/up", k.port);
	struct snapcell_sandbox *sb = budget_sandbox(target);
	snprintf(code, sizeof(code),
		 "import select, socket\n"
		 "head = (b'POST /up/x HTTP/1.1\\r\\nHost: 127.0.0.1:%u\\r\\n'\n"
		 "        b'Transfer-Encoding: chunked\\r\\n\\r\\n')\n"
		 "chunk = b'10000\\r\\n' + b'u' * 65536 + b'\\r\\n'\n"
		 "socks = [socket.create_connection(('127.0.0.1', %u)) for _ in range(16)]\n"
		 "left = {}\n"
		 "for s in socks:\n"
		 "    s.sendall(head)\n"
		 "    s.setblocking(False)\n"
		 "    left[s] = 2 << 20\n"
		 "while left:\n"
		 "    _, ready, _ = select.select([], list(left), [], 5)\n"
		 "    if not ready:\n"
		 "        break\n"
		 "    for s in ready:\n"
		 "        try:\n"
		 "            left[s] -= s.send(chunk)\n"
		 "        except OSError:\n"
		 "            left[s] = 0\n"
		 "        if left[s] <= 0:\n"
		 "            del left[s]\n" UNTIL_CUT "print('done')\n",
		 k.port, k.port);
	struct snapcell_result *res = test_run(sb, code);
	expect_ok(res);
	cr_expect_str_eq(res->stdout_buf, "done\n");
	cr_expect(res->net_limits_hit & SNAPCELL_NET_HIT_BYTES);
	snapcell_result_free(res);
	snapcell_sandbox_free(sb);
	uint64_t got = sink_stop(&k);
	cr_expect_leq(got, PASS_BUDGET + 16 * 1024, "%llu bytes reached the server",
		      (unsigned long long)got);
}
