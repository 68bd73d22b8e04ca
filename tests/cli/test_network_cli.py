"""The egress gate end to end through the CLI: test hosts in a network
namespace of the test's own (tests/net/testnet.py), names mapped to them with --map-host,
never DNS. Needs root (CI runs as root)."""
import http.server
import json
import os
import threading

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="test hosts need root")


@pytest.fixture
def run(snapcell, net, tmp_path):
    """Runs code with the given CLI options and the test CA at /input/ca.pem; the result."""
    def go(code, *options, trust_test_ca=True):
        (tmp_path / "ca.pem").write_bytes(net.ca.read_bytes())
        script = tmp_path / "code.py"
        script.write_text(code)
        extra = ["--input", f"{tmp_path / 'ca.pem'}:ca.pem"]
        if trust_test_ca:
            extra += ["--env", "SSL_CERT_FILE=/input/ca.pem"]
        r = snapcell("run", "--json", *extra, *net.map_args(), *options, script)
        assert r.stdout, r.stderr.decode()
        return json.loads(r.stdout)
    return go


def lines(result):
    assert result["status"] == "ok", result["stderr"]
    return result["stdout"].splitlines()


def test_https_passes_through_with_the_cells_own_verification(run, net):
    r = run("import json, urllib.request\n"
            "d = json.load(urllib.request.urlopen('https://api.example.test/x?y=1'))\n"
            "print(d['path'], d['tls'], d['headers']['host'])\n",
            "--allow", "api.example.test")
    assert lines(r) == ["/x?y=1 True api.example.test"]
    connects = [e for e in r["network_events"] if e["kind"] == "connect"]
    assert connects and connects[0]["allowed"] and connects[0]["address"] == net.peer
    assert connects[0]["port"] == 443 and connects[0]["rule"] == "api.example.test"
    resolves = [e for e in r["network_events"] if e["kind"] == "resolve"]
    assert resolves[0]["target"] == "api.example.test" and resolves[0]["allowed"]


def test_an_untrusted_server_fails_the_cells_verification(run):
    r = run("import ssl, urllib.request\n"
            "try:\n"
            "    urllib.request.urlopen('https://api.example.test/')\n"
            "except Exception as e:\n"
            "    print('refused', 'CERTIFICATE_VERIFY_FAILED' in str(e))\n",
            "--allow", "api.example.test", trust_test_ca=False)
    assert lines(r) == ["refused True"]


def test_raw_socket_module_and_create_connection(run):
    code = ("import _socket, socket, ssl\n"
            "info = _socket.getaddrinfo('api.example.test', 443, _socket.AF_INET, "
            "_socket.SOCK_STREAM)\n"
            "s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)\n"
            "s.connect(info[0][4])\n"
            "s.close()\n"
            "ctx = ssl.create_default_context()\n"
            "with socket.create_connection(('api.example.test', 443)) as raw:\n"
            "    with ctx.wrap_socket(raw, server_hostname='api.example.test') as t:\n"
            "        t.sendall(b'GET /raw HTTP/1.1\\r\\nHost: api.example.test\\r\\n"
            "Connection: close\\r\\n\\r\\n')\n"
            "        print(t.recv(100).split(b'\\r\\n')[0].decode())\n")
    assert lines(run(code, "--allow", "api.example.test")) == ["HTTP/1.1 200 OK"]


REFUSALS = """
import socket
def attempt(what, fn):
    try:
        fn()
        print(what, "connected")
    except OSError as e:
        print(what, type(e).__name__, e.strerror if e.strerror else e)
attempt("unlisted", lambda: socket.create_connection(("evil.example", 443), timeout=5))
attempt("port", lambda: socket.create_connection(("api.example.test", 8443), timeout=5))
attempt("sub", lambda: socket.create_connection(("a.example.test", 443), timeout=5).close())
attempt("deep", lambda: socket.create_connection(("x.b.example.test", 443), timeout=5).close())
attempt("apex", lambda: socket.create_connection(("example.test", 443), timeout=5))
"""


def test_names_ports_and_wildcards_are_refused_by_rule(run):
    r = run(REFUSALS, "--allow", "api.example.test", "--allow", "*.example.test")
    out = lines(r)
    assert out[0] == ("unlisted NetworkDeniedError evil.example is not on this sandbox's "
                      "allow list")
    assert out[1] == ("port NetworkDeniedError api.example.test:8443 is not on this "
                      "sandbox's allow list")
    assert out[2] == "sub connected"
    assert out[3] == "deep connected"
    assert out[4].startswith("apex NetworkDeniedError example.test is not on")
    denied = [e for e in r["network_events"] if "allow list" in (e["rule"] or "")]
    assert {e["target"] for e in denied} == {"evil.example", "api.example.test", "example.test"}
    # The two that connected closed before sending anything: nothing went upstream.
    silent = [e for e in r["network_events"] if e["kind"] == "connect" and e["target"] in
              ("a.example.test", "x.b.example.test")]
    assert len(silent) == 2 and all(e["rule"] in ("the code closed the connection first",
                                                  "the run ended before the code sent anything")
                                    for e in silent)


def test_a_name_that_resolves_to_a_private_address_is_refused(run):
    r = run("import socket\n"
            "try:\n"
            "    socket.getaddrinfo('rebind.example.test', 443)\n"
            "except socket.gaierror as e:\n"
            "    print(e.strerror)\n",
            "--allow", "rebind.example.test", "--map-host", "rebind.example.test=10.0.0.5")
    assert lines(r) == ["rebind.example.test resolves to 10.0.0.5, a private address"]


@pytest.fixture
def loopback_server():
    """A server on the host's own loopback that counts what reaches it."""
    hits = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], hits
    server.shutdown()


LOOPBACK = """
import ctypes, socket, struct
port = {port}
for host in ["127.0.0.1", "127.1", "0x7f000001", "2130706433", "017700000001", "0.0.0.0",
             "localhost", "::1", "::ffff:127.0.0.1"]:
    try:
        socket.create_connection((host, port), timeout=3).sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
        print(host, "connected")
    except OSError as e:
        print(host, "refused")
# Past the wrapper: socket(2) and connect(2) through libc.
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.socket(2, 1, 0)
addr = struct.pack("<HH4s8x", 2, socket.htons(port), bytes([127, 0, 0, 1]))
rc = libc.connect(fd, addr, len(addr))
sent = libc.send(fd, b"GET /raw HTTP/1.0\\r\\n\\r\\n", 22, 0) if rc == 0 else -1
print("raw", rc, sent)
"""


def test_every_loopback_spelling_is_refused_and_raw_calls_gain_nothing(run, loopback_server):
    port, hits = loopback_server
    r = run(LOOPBACK.format(port=port), "--allow", "api.example.test")
    out = lines(r)
    assert all(line.endswith("refused") for line in out[:-1]), out
    # The raw connect lands at the gate (the cell's only way out), which refuses the stream.
    assert hits == []


def test_no_entries_reach_nothing(run, net, loopback_server):
    port, hits = loopback_server
    r = run("import socket\n"
            "for host in ['127.0.0.1', 'api.example.test', '" + net.peer + "']:\n"
            "    try:\n"
            "        socket.create_connection((host, %d), timeout=3)\n"
            "        print(host, 'connected')\n"
            "    except OSError as e:\n"
            "        print(host, type(e).__name__)\n" % port)
    assert all(not line.endswith("connected") for line in lines(r))
    assert hits == [] and r["network_events"] == []


def test_udp_raw_and_listening_sockets_are_denied(run):
    r = run("import socket\n"
            "for args in [(socket.AF_INET, socket.SOCK_DGRAM), (socket.AF_INET, socket.SOCK_RAW, 1),"
            " (socket.AF_INET6, socket.SOCK_DGRAM), (socket.AF_NETLINK, socket.SOCK_RAW, 0),"
            " (socket.AF_PACKET, socket.SOCK_RAW, 0)]:\n"
            "    try:\n"
            "        s = socket.socket(*args)\n"
            "        s.sendto(b'x', ('198.51.100.2', 53))\n"
            "        print('sent')\n"
            "    except OSError as e:\n"
            "        print(type(e).__name__)\n"
            "s = socket.socket()\n"
            "for step in (lambda: s.bind(('127.0.0.1', 9999)), lambda: s.listen()):\n"
            "    try:\n"
            "        step()\n"
            "        print('ok')\n"
            "    except OSError as e:\n"
            "        print(type(e).__name__)\n",
            "--allow", "api.example.test")
    assert lines(r) == ["PermissionError"] * 7


def test_tls_for_another_name_on_an_allowed_address_is_refused(run):
    r = run("import socket, ssl\n"
            "ctx = ssl.create_default_context()\n"
            "ctx.check_hostname = False\n"
            "raw = socket.create_connection(('api.example.test', 443), timeout=5)\n"
            "try:\n"
            "    ctx.wrap_socket(raw, server_hostname='other.example.test').sendall(b'x')\n"
            "    print('passed')\n"
            "except OSError as e:\n"
            "    print('refused')\n",
            "--allow", "api.example.test")
    assert lines(r) == ["refused"]
    refused = [e for e in r["network_events"] if e["kind"] == "connect" and not e["allowed"]]
    assert refused[0]["rule"] == ("TLS for other.example.test on a connection to "
                                  "api.example.test")


def test_the_audit_counts_the_bytes(run):
    r = run("import urllib.request\n"
            "print(len(urllib.request.urlopen('https://api.example.test/bytes/300000').read()))\n",
            "--allow", "api.example.test")
    assert lines(r) == ["300000"]
    conn = [e for e in r["network_events"] if e["kind"] == "connect"][0]
    assert 300000 < conn["bytes_in"] < 300000 + 8192
    assert 100 < conn["bytes_out"] < 4096


HTTP_RULES = ["--allow", "https://api.example.test/v1=GET",
              "--allow-header", "https://api.example.test/v1=Authorization: Bearer ${env:SC_TEST_TOKEN}",
              "--allow", "http://api.example.test"]


@pytest.fixture
def run_rules(run, net, monkeypatch):
    monkeypatch.setenv("SC_TEST_TOKEN", "tok-3b9f0d")
    return lambda code, *more: run(code, *HTTP_RULES, "--upstream-ca", net.ca, *more,
                                   trust_test_ca=False)


def seen(net):
    import urllib.request
    ctx = __import__("ssl").create_default_context(cafile=str(net.ca))
    with urllib.request.urlopen(f"https://{net.peer}/_seen", context=ctx) as r:
        return [tuple(x) for x in json.load(r)]


METHOD_RULE = """
import json, urllib.request, urllib.error
d = json.load(urllib.request.urlopen("https://api.example.test/v1/items?page=2"))
print(d["method"], d["path"], d["tls"])
for method, path in (("POST", "/v1/items"), ("GET", "/v10"), ("GET", "/v2/x"), ("DELETE", "/v1")):
    try:
        urllib.request.urlopen(urllib.request.Request("https://api.example.test" + path,
                                                      data=b"x" if method == "POST" else None,
                                                      method=method))
        print(method, path, "passed")
    except urllib.error.HTTPError as e:
        print(method, path, e.code, e.read().decode().strip())
"""


def test_https_with_a_method_rule_is_checked_per_request(run_rules, net):
    before = len(seen(net))
    r = run_rules(METHOD_RULE)
    out = lines(r)
    # The cell's TLS ends at the host (the sandbox's own CA, in the cell's bundle), and the
    # host verified the upstream with --upstream-ca.
    assert out[0] == "GET /v1/items?page=2 True"
    assert out[1].startswith("POST /v1/items 403") and "POST is not allowed" in out[1]
    assert out[2].startswith("GET /v10 403") and out[3].startswith("GET /v2/x 403")
    assert out[4].startswith("DELETE /v1 403")
    # Only the allowed request reached the server.
    assert seen(net)[before:] == [("GET", "/v1/items?page=2")]
    requests = [e for e in r["network_events"] if e["kind"] == "request"]
    assert [(e["method"], e["allowed"]) for e in requests] == [
        ("GET", True), ("POST", False), ("GET", False), ("GET", False), ("DELETE", False)]
    assert requests[0]["http_status"] == 200 and requests[0]["rule"] == "https://api.example.test/v1"
    assert requests[0]["bytes_in"] > 100


def test_an_upstream_from_an_untrusted_ca_is_refused(run_rules):
    r = run_rules("import urllib.request, urllib.error\n"
                  "try:\n"
                  "    urllib.request.urlopen('https://api.example.test:8443/v1/x')\n"
                  "    print('passed')\n"
                  "except urllib.error.HTTPError as e:\n"
                  "    print(e.code)\n",
                  "--allow", "https://api.example.test:8443/v1=GET")
    assert lines(r) == ["502"]
    req = [e for e in r["network_events"] if e["kind"] == "request"][0]
    assert not req["allowed"] or req["http_status"] == 0


def test_an_added_header_reaches_the_server_and_never_the_code(run_rules):
    r = run_rules("import gc, json, os, urllib.request\n"
                  "d = json.load(urllib.request.urlopen('https://api.example.test/v1/whoami'))\n"
                  "print(d['headers'].get('authorization'))\n"
                  "secret = 'tok-' + '3b9f0d'\n"
                  "found = [k for k, v in os.environ.items() if secret in v]\n"
                  "for top in ('/etc', '/input', '/tmp', '/.snapcell', '/output'):\n"
                  "    for dirpath, _, files in os.walk(top):\n"
                  "        for f in files:\n"
                  "            try:\n"
                  "                if secret.encode() in open(os.path.join(dirpath, f), 'rb').read():\n"
                  "                    found.append(f)\n"
                  "            except OSError:\n"
                  "                pass\n"
                  "found += [1 for o in gc.get_objects() if isinstance(o, (str, bytes)) and "
                  "o != secret and ('tok-3b9f0d' in o if isinstance(o, str) else b'tok-3b9f0d' in o)]\n"
                  "print(found)\n")
    assert lines(r) == ["Bearer tok-3b9f0d", "[]"]
    assert "tok-3b9f0d" not in json.dumps(r["network_events"])
    assert [e["header_added"] for e in r["network_events"] if e["kind"] == "request"] == [True]


def test_a_redirect_to_a_host_not_on_the_list_is_refused(run_rules):
    r = run_rules("import urllib.request\n"
                  "try:\n"
                  "    urllib.request.urlopen('http://api.example.test/redirect?to=http://evil.example/x')\n"
                  "except OSError as e:\n"
                  "    print(e.reason)\n")
    assert lines(r) == ["[Errno -2] evil.example is not on this sandbox's allow list"]
    assert [e["http_status"] for e in r["network_events"] if e["kind"] == "request"] == [302]


LIBRARIES = """
import asyncio, json
import requests, httpx, aiohttp
print(requests.get("https://api.example.test/v1/r").json()["path"])
print(httpx.get("https://api.example.test/v1/h").json()["path"])
async def main():
    async with aiohttp.ClientSession() as s:
        async with s.get("https://api.example.test/v1/a") as r:
            print((await r.json())["path"])
asyncio.run(main())
"""


def test_requests_httpx_and_aiohttp_work_unchanged(run_rules):
    r = run_rules(LIBRARIES, "--python-path", "/usr/lib/python3/dist-packages")
    assert lines(r) == ["/v1/r", "/v1/h", "/v1/a"]


def test_a_client_hello_sent_in_pieces_passes(run):
    r = run("import socket, ssl, time\n"
            "ctx = ssl.create_default_context()\n"
            "inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()\n"
            "tls = ctx.wrap_bio(inc, out, server_hostname='api.example.test')\n"
            "try:\n"
            "    tls.do_handshake()\n"
            "except ssl.SSLWantReadError:\n"
            "    pass\n"
            "hello = out.read()\n"
            "s = socket.create_connection(('api.example.test', 443), timeout=5)\n"
            "for i in range(0, len(hello), 7):\n"
            "    s.sendall(hello[i:i + 7])\n"
            "    time.sleep(0.002)\n"
            "print(s.recv(5)[:1] == b'\\x16')\n",
            "--allow", "api.example.test")
    assert lines(r) == ["True"]
