"""The network through the Python package: entries reach the egress gate, results carry its
events, the keywords reach the C config, and concurrent cells of one sandbox cannot reach
each other. The whole list of the gate's cases runs through the CLI
(tests/cli/test_network_cli.py)."""
import asyncio
import http.server
import threading

import pytest

import snapcell


@pytest.fixture
def server():
    """A server on the host's loopback; counts the requests that reach it."""
    hits = []

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append((self.path, self.headers.get("Host")))
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *a):
            pass
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=s.serve_forever, daemon=True).start()
    yield s.server_address[1], hits
    s.shutdown()


def test_an_allowed_target_is_reached_and_every_attempt_listed(server):
    port, hits = server
    code = ("import urllib.request, socket\n"
            f"print(urllib.request.urlopen('http://127.0.0.1:{port}/a').read())\n"
            "try:\n"
            "    socket.getaddrinfo('elsewhere.example', 80)\n"
            "except socket.gaierror as e:\n"
            "    print(e.strerror)\n")
    with snapcell.Sandbox(allowed_domains=[f"127.0.0.1:{port}"]) as sb:
        r = sb.run(code)
    assert r.ok, r.stderr
    assert r.stdout == ("b'hello'\nelsewhere.example is not on this sandbox's allow list\n")
    assert hits == [("/a", f"127.0.0.1:{port}")]
    kinds = [(e.kind, e.allowed, e.target) for e in r.network_events]
    assert kinds == [("connect", True, "127.0.0.1"), ("resolve", False, "elsewhere.example")]
    assert r.network_events[0].bytes_in > 5 and r.network_events[0].duration > 0


def test_a_method_rule_is_checked_per_request(server):
    port, hits = server
    code = ("import urllib.request, urllib.error\n"
            f"print(urllib.request.urlopen('http://127.0.0.1:{port}/ok').status)\n"
            "try:\n"
            f"    urllib.request.urlopen(urllib.request.Request('http://127.0.0.1:{port}/', "
            "data=b'x'))\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code)\n")
    with snapcell.Sandbox(allowed_domains=[(f"127.0.0.1:{port}", "get")]) as sb:
        r = sb.run(code)
    assert r.stdout == "200\n403\n", r.stderr
    assert [p for p, _ in hits] == ["/ok"]
    assert [(e.method, e.allowed) for e in r.network_events] == [("GET", True), ("POST", False)]


def test_keywords_reach_the_config(tmp_path):
    with pytest.raises(ValueError, match="not an IPv4 or IPv6 address"):
        snapcell.Sandbox(allowed_domains=["a.example"], host_map={"a.example": "nowhere"})
    with pytest.raises(OSError):
        snapcell.Sandbox(allowed_domains=["a.example"], upstream_ca=tmp_path / "missing.pem")
    with pytest.raises(ValueError, match="net_connections"):
        snapcell.Sandbox(allowed_domains=["a.example"], max_connections=100000)
    # A private address the map gives is refused like a resolved one.
    with snapcell.Sandbox(allowed_domains=["a.example"], host_map={"a.example": "10.1.2.3"},
                          connect_timeout=2) as sb:
        r = sb.run("import socket\ntry:\n    socket.getaddrinfo('a.example', 443)\n"
                   "except socket.gaierror as e:\n    print(e.strerror)\n")
    assert r.stdout == "a.example resolves to 10.1.2.3, a private address\n"


def test_concurrent_cells_cannot_reach_each_other(server):
    port, _ = server
    listen = ("import socket, time\n"
              "s = socket.socket()\n"
              "try:\n"
              "    s.bind(('127.0.0.1', 7000))\n"
              "    s.listen()\n"
              "    print('listening')\n"
              "except PermissionError:\n"
              "    print('refused')\n"
              "time.sleep(1)\n")
    dial = ("import socket, time\n"
            "time.sleep(0.3)\n"
            "for host in ('127.0.0.1', '127.77.0.1', '127.78.0.1'):\n"
            "    try:\n"
            "        socket.create_connection((host, 7000), timeout=2)\n"
            "        print('connected')\n"
            "    except OSError:\n"
            "        print('refused')\n")

    async def both(sb):
        return await asyncio.gather(sb.run_async(listen), sb.run_async(dial))
    with snapcell.Sandbox(allowed_domains=[f"127.0.0.1:{port}", "127.0.0.1:7000"]) as sb:
        a, b = asyncio.run(both(sb))
    assert a.stdout == "refused\n", a.stderr
    assert b.stdout == "refused\nrefused\nrefused\n", b.stderr
