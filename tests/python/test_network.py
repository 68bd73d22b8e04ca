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
            body = b"x" * 300000 if self.path == "/big" else b"hello"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

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
    # Plain bytes to a literal: nothing went upstream over TLS; each event is one attempt.
    assert [(e.upstream_tls, e.count) for e in r.network_events] == [(False, 1), (False, 1)]


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
            "        s = socket.create_connection((host, 7000), timeout=2)\n"
            "        s.sendall(b'hello?')\n"
            "        print('answered' if s.recv(10) else 'refused')\n"
            "    except OSError:\n"
            "        print('refused')\n")

    async def both(sb):
        return await asyncio.gather(sb.run_async(listen), sb.run_async(dial))
    with snapcell.Sandbox(allowed_domains=[f"127.0.0.1:{port}", "127.0.0.1:7000"]) as sb:
        a, b = asyncio.run(both(sb))
    assert a.stdout == "refused\n", a.stderr
    # The gate may accept the allowed 127.0.0.1:7000 before it learns that nothing upstream
    # listens; then the stream ends unanswered. Nothing of the other cell is ever reached.
    assert b.stdout == "refused\nrefused\nrefused\n", b.stderr


def test_the_byte_budget_and_the_connection_cap_are_reported(server):
    port, _ = server
    code = ("import socket, urllib.request\n"
            "try:\n"
            f"    print(len(urllib.request.urlopen('http://127.0.0.1:{port}/big').read()))\n"
            "except Exception as e:\n"
            "    print('cut', type(e).__name__)\n")
    with snapcell.Sandbox(allowed_domains=[f"127.0.0.1:{port}"], max_network_bytes=100000) as sb:
        r = sb.run(code)
    assert r.stdout.startswith("cut"), r.stdout + r.stderr
    assert r.network_limits_hit == {"bytes"}
    assert r.network_events[0].bytes_in <= 100000 + 65536
    code = ("import socket\n"
            f"held = [socket.create_connection(('127.0.0.1', {port})) for _ in range(3)]\n"
            "try:\n"
            "    held[2].sendall(b'GET / HTTP/1.0\\r\\n\\r\\n')\n"
            "    print(held[2].recv(10))\n"
            "except OSError as e:\n"
            "    print(type(e).__name__)\n"
            "print(held[0].sendall(b'GET / HTTP/1.0\\r\\n\\r\\n') or held[0].recv(12))\n")
    with snapcell.Sandbox(allowed_domains=[f"127.0.0.1:{port}"], max_connections=2) as sb:
        r = sb.run(code)
    assert r.ok, r.stderr
    assert r.stdout.splitlines() in (["ConnectionResetError", "b'HTTP/1.0 200'"],
                                     ["b''", "b'HTTP/1.0 200'"]), r.stdout
    assert r.network_limits_hit == {"connections"}


def test_the_reference_forms_reach_the_network_through_agent_framework(server):
    """("127.0.0.1:8080", "get") as the reference's users write it: listed in its host form,
    enforced by the gate (GET passes, POST is refused)."""
    pytest.importorskip("agent_framework")
    from snapcell.agent_framework import AllowedDomain, ExecuteCodeTool
    port, hits = server
    t = ExecuteCodeTool(allowed_domains=[(f"127.0.0.1:{port}", "get")])
    assert t.get_allowed_domains() == [AllowedDomain(f"127.0.0.1:{port}", ("GET",))]
    code = ("import _socket, urllib.request, urllib.error\n"
            f"info = _socket.getaddrinfo('127.0.0.1', {port}, _socket.AF_INET, _socket.SOCK_STREAM)\n"
            "s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)\n"
            "s.connect(info[0][4])\n"
            "s.sendall(b'GET /raw HTTP/1.1\\r\\nHost: 127.0.0.1:" + str(port) + "\\r\\n"
            "Connection: close\\r\\n\\r\\n')\n"
            "print(s.recv(12))\n"
            "try:\n"
            f"    urllib.request.urlopen('http://127.0.0.1:{port}/', data=b'x')\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code)\n")
    with t:  # ends the sandbox the tool keeps for its configuration
        out = asyncio.run(t.invoke(arguments={"code": code}))
    assert [c.text for c in out if c.type == "text"] == ["b'HTTP/1.1 200'\n403\n"]
    assert [p for p, _ in hits] == ["/raw"]


def test_repeated_refusals_are_one_event_with_a_count(server):
    port, _ = server
    code = ("import socket\n"
            "for i in range(3):\n"
            "    try:\n"
            "        socket.getaddrinfo('elsewhere.example', 80)\n"
            "    except socket.gaierror:\n"
            "        pass\n")
    with snapcell.Sandbox(allowed_domains=[f"127.0.0.1:{port}"]) as sb:
        r = sb.run(code)
    assert r.ok, r.stderr
    assert [(e.kind, e.allowed, e.count) for e in r.network_events] == [("resolve", False, 3)]
