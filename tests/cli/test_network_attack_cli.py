"""The egress gate against hostile cells, end to end through the CLI: what a cell's code
could do to the host (CPU, memory) or past the allow-list with bytes the gate reads. Test
hosts as in test_network_cli.py (tests/net/testnet.py, names mapped, never DNS). Needs root."""
import json
import os
import resource

import pytest


pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="test hosts need root")


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@pytest.fixture
def run(snapcell, net, tmp_path):
    """Runs code with the given CLI options and the test CA trusted; the result, with the CPU
    seconds the run's processes (the CLI, the gate in it, the cells) used as "cpu_s"."""
    def go(code, *options):
        (tmp_path / "ca.pem").write_bytes(net.ca.read_bytes())
        script = tmp_path / "code.py"
        script.write_text(code)
        extra = ["--input", f"{tmp_path / 'ca.pem'}:ca.pem", "--env", "SSL_CERT_FILE=/input/ca.pem"]
        before = children_cpu_s()
        r = snapcell("run", "--json", *extra, *net.map_args(), *options, script)
        assert r.stdout, r.stderr.decode()
        result = json.loads(r.stdout)
        result["cpu_s"] = children_cpu_s() - before
        return result
    return go


def lines(result):
    assert result["status"] == "ok", result["stderr"]
    return result["stdout"].splitlines()


HALF_HELLOS = """
import socket, time
held = []
for i in range(4):
    s = socket.create_connection(("api.example.test", 443))
    s.sendall(bytes.fromhex("16030102000100") + b"\\x01\\xfc\\x03\\x03")
    held.append(s)
time.sleep(4)
print("held", len(held))
"""


def test_half_a_client_hello_does_not_spin_the_gate(run):
    # A hello cut short leaves the gate waiting for the rest; waiting must not mean polling a
    # socket that stays readable with bytes it already peeked (4 threads at 100% CPU).
    r = run(HALF_HELLOS, "--allow", "api.example.test")
    assert lines(r) == ["held 4"]
    assert r["cpu_s"] < 1.5, r["cpu_s"]
    connects = [e for e in r["network_events"] if e["kind"] == "connect"]
    # Identical refusals are one event with a count.
    assert sum(e["count"] for e in connects) == 4 and not any(e["allowed"] for e in connects)


BIG_BODIES = """
import json, socket, time, urllib.request
N, SIZE = 8, 60 << 20
chunk = b"x" * (1 << 20)
socks = []
for i in range(N):
    s = socket.create_connection(("api.example.test", 80))
    s.sendall(b"POST /up HTTP/1.1\\r\\nHost: api.example.test\\r\\n"
              b"Content-Length: %d\\r\\n\\r\\n" % SIZE)
    for _ in range(SIZE // len(chunk) - 1):
        s.sendall(chunk)
    s.sendall(chunk[:-1])  # one byte short: the request stays open
    socks.append(s)
for s in socks:
    s.close()
time.sleep(0.5)
d = json.load(urllib.request.urlopen("http://api.example.test/after", data=b"y" * 1000))
print(d["method"], d["body_bytes"])
"""


def test_request_bodies_stream_without_growing_the_host(run):
    # A body is streamed upstream as it arrives: eight connections each one byte short of
    # 60 MiB must not make the host hold 480 MiB.
    r = run(BIG_BODIES, "--allow", "http://api.example.test", "--timeout", "60")
    assert lines(r) == ["POST 1000"]
    peak_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert peak_mib < 300, peak_mib


OVERRIDES = """
import urllib.request, urllib.error
for what, path in (("query", "/v1/x?_method=DELETE"), ("encoded query", "/v1/x?%5Fmethod=DELETE"),
                   ("php query", "/v1/x?a=1&.method=DELETE"), ("plain", "/v1/x?method=1")):
    req = urllib.request.Request("http://api.example.test" + path, data=b"a=1", method="POST")
    try:
        print(what, urllib.request.urlopen(req).status)
    except urllib.error.HTTPError as e:
        print(what, e.code)
"""


def test_method_overrides_in_encoded_queries_are_refused(run):
    # PHP decodes "%5Fmethod" and ".method" to "_method", and frameworks take it from the
    # query: an allowed POST would become a DELETE at the origin. (A form body's _method is
    # not read: bodies stream upstream unread; docs/security.md.)
    r = run(OVERRIDES, "--allow", "http://api.example.test/v1=POST")
    assert lines(r) == ["query 403", "encoded query 403", "php query 403", "plain 200"]


@pytest.fixture
def run_gate(snapcell, net, tmp_path, monkeypatch):
    """Runs code through entries the HTTP gate serves: the cell trusts the sandbox's own CA
    (its default bundle), the host verifies the test server with the test CA."""
    monkeypatch.setenv("SC_TEST_TOKEN", "tok-3b9f0d")

    def go(code, *options):
        script = tmp_path / "code.py"
        script.write_text(code)
        r = snapcell("run", "--json", "--upstream-ca", net.ca, *net.map_args(), *options,
                     script)
        assert r.stdout, r.stderr.decode()
        return json.loads(r.stdout)
    return go


def seen(net):
    """What the test server was asked, in order: (method, path)."""
    import ssl
    import urllib.request
    ctx = ssl.create_default_context(cafile=str(net.ca))
    with urllib.request.urlopen(f"https://{net.peer}/_seen", context=ctx) as r:
        return [tuple(x) for x in json.load(r)]


TOKEN = "Authorization: Bearer ${env:SC_TEST_TOKEN}"

PLAIN_TO_443 = """
import socket
s = socket.create_connection(("api.example.test", 443))
s.sendall(b"GET /v1/leak HTTP/1.1\\r\\nHost: api.example.test:443\\r\\nConnection: close\\r\\n\\r\\n")
data = b""
while chunk := s.recv(4096):
    data += chunk
head, _, body = data.partition(b"\\r\\n\\r\\n")
print(head.split(b"\\r\\n")[0].decode())
print(body.decode().strip())
"""


def test_plain_http_to_an_https_entry_never_carries_its_credential(run_gate, net):
    # Plain HTTP to port 443 of an https:// entry had the host make the
    # request in plain HTTP, the entry's credential added, with no certificate check.
    before = len(seen(net))
    r = run_gate(PLAIN_TO_443, "--allow", "https://api.example.test/v1=GET",
                 "--allow-header", "https://api.example.test/v1=" + TOKEN)
    out = lines(r)
    assert out[0] == "HTTP/1.1 403 Forbidden", out
    assert out[1] == ("snapcell: https://api.example.test/v1 was allowed as https://: plain "
                      "HTTP to it is refused (use https://)")
    assert seen(net)[before:] == []
    req = [e for e in r["network_events"] if e["kind"] == "request"]
    assert len(req) == 1 and not req[0]["allowed"] and not req[0]["header_added"]
    assert req[0]["upstream_tls"] is False


REDIRECT_TO_HTTP = """
import json, urllib.request, urllib.error
try:
    urllib.request.urlopen("https://api.example.test/redirect?to=http://api.example.test:443/x")
    print("followed")
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
d = json.load(urllib.request.urlopen("https://api.example.test/ok"))
print(d["headers"]["authorization"], d["tls"])
"""


def test_a_redirect_to_http_does_not_take_the_credential_along(run_gate, net):
    # An upstream 302 to http://host:443 is passed back to the cell; the cell follows it in
    # plain HTTP, which the https:// entry refuses.
    before = len(seen(net))
    r = run_gate(REDIRECT_TO_HTTP, "--allow", "https://api.example.test",
                 "--allow-header", "https://api.example.test=" + TOKEN)
    out = lines(r)
    assert out[0] == ("403 snapcell: api.example.test:443 was allowed as https://: plain HTTP "
                      "to it is refused (use https://)"), out
    assert out[1] == "Bearer tok-3b9f0d True"
    assert seen(net)[before:] == [("GET", "/ok")]
    req = [(e["path"], e["allowed"], e["http_status"], e["upstream_tls"])
           for e in r["network_events"] if e["kind"] == "request"]
    assert req == [("/redirect", True, 302, True), ("/x", False, 0, False),
                   ("/ok", True, 200, True)]


BARE_HOST = """
import json, urllib.request, urllib.error
try:
    urllib.request.urlopen("http://api.example.test/plain")
    print("passed")
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
d = json.load(urllib.request.urlopen("https://api.example.test/tls"))
print(d["headers"]["authorization"], d["tls"])
"""


def test_a_bare_hosts_headers_go_over_tls_only(run_gate, net):
    before = len(seen(net))
    r = run_gate(BARE_HOST, "--allow", "api.example.test",
                 "--allow-header", "api.example.test=" + TOKEN)
    out = lines(r)
    assert out[0] == ("403 snapcell: api.example.test adds headers, which go over TLS only: "
                      "plain HTTP to it is refused (use https://)"), out
    assert out[1] == "Bearer tok-3b9f0d True"
    assert seen(net)[before:] == [("GET", "/tls")]
    req = [(e["path"], e["allowed"], e["header_added"], e["upstream_tls"])
           for e in r["network_events"] if e["kind"] == "request"]
    assert req == [("/plain", False, False, False), ("/tls", True, True, True)]


def test_plain_bytes_to_an_https_ip_entry_are_refused(run, net):
    # An IP-literal https:// entry passes its stream through unread: it must start with a
    # TLS ClientHello. An attack pass found one byte enough: 0x16 and then plain
    # HTTP went through, recorded as upstream_tls.
    code = ("import socket, ssl\n"
            "for first in (b'GET / HTTP/1.0\\r\\n\\r\\n', b'\\x16GET / HTTP/1.0\\r\\n\\r\\n'):\n"
            "    s = socket.create_connection(('%s', 443))\n"
            "    s.sendall(first)\n"
            "    try:\n"
            "        print('read', s.recv(100))\n"
            "    except OSError as e:\n"
            "        print('reset')\n"
            "ctx = ssl.create_default_context()\n"
            "with ctx.wrap_socket(socket.create_connection(('%s', 443)),\n"
            "                     server_hostname='%s') as t:\n"
            "    print('tls', t.version() is not None)\n") % (net.peer, net.peer, net.peer)
    r = run(code, "--allow", f"https://{net.peer}")
    out = lines(r)
    assert out[0] in ("read b''", "reset") and out[1] in ("read b''", "reset"), out
    assert out[2] == "tls True"
    conns = [(e["allowed"], e["upstream_tls"], e["rule"]) for e in r["network_events"]
             if e["kind"] == "connect"]
    assert conns == [(False, False, f"{net.peer}:443 was allowed as https://: a stream that "
                      "does not start TLS is refused"),
                     (False, False, "not a TLS ClientHello the gate can read"),
                     (True, True, f"{net.peer}:443")]


PATHS = """
import socket, urllib.request, urllib.error
for path in ("/v1/caf%C3%A9", "/v1/%EF%BC%8E%EF%BC%8E/admin", "/v1/%C0%AE%C0%AE/admin",
             "/v1/..;/admin", "/v1/..%3b/admin", "/v1%E2%88%95admin", "/v1/%EF%B8%B0/admin"):
    try:
        print(path, urllib.request.urlopen("http://api.example.test" + path).status)
    except urllib.error.HTTPError as e:
        print(path, e.code)
s = socket.create_connection(("api.example.test", 80))
s.sendall(b"GET /v1/x HTTP/1.1\\r\\nHost: api.example.test\\r\\nContent-Length: 44\\r\\n\\r\\n"
          b"GET /admin HTTP/1.1\\r\\nHost: api.example.test\\r\\n\\r\\n")
print(s.recv(4096).split(b"\\r\\n")[0].decode())
"""


def test_paths_that_fold_into_separators_and_bodies_on_get_are_refused(run, net):
    # Defence in depth for what a server behind the gate decodes or
    # normalises after the gate compared the path, and for a CL.0 desync upstream.
    before = len(seen(net))
    r = run(PATHS, "--allow", "http://api.example.test/v1")
    assert lines(r) == ["/v1/caf%C3%A9 200", "/v1/%EF%BC%8E%EF%BC%8E/admin 403",
                        "/v1/%C0%AE%C0%AE/admin 403", "/v1/..;/admin 403",
                        "/v1/..%3b/admin 403", "/v1%E2%88%95admin 403",
                        "/v1/%EF%B8%B0/admin 403",  # U+FE30 folds to ".." (attack pass)
                        "HTTP/1.1 400 Bad Request"]
    assert seen(net)[before:] == [("GET", "/v1/caf%C3%A9")]


def test_repeated_lookups_are_one_event_with_a_count(run):
    # Repeats add to one event's count, so they cannot fill the record.
    r = run("import socket\n"
            "for i in range(50):\n"
            "    socket.getaddrinfo('a.example.test', 443)\n"
            "    try:\n"
            "        socket.getaddrinfo('evil.example', 443)\n"
            "    except OSError:\n"
            "        pass\n"
            "print('done')\n", "--allow", "*.example.test")
    assert lines(r) == ["done"]
    resolves = [(e["target"], e["allowed"], e["count"]) for e in r["network_events"]
                if e["kind"] == "resolve"]
    assert resolves == [("a.example.test", True, 50), ("evil.example", False, 50)]
    assert r["network_events_dropped"] == 0 and r["network_limits_hit"] == []


HOST_FORMS = r"""
import socket, ssl
def first_line(port, head, tls=False):
    s = socket.create_connection(("api.example.test", port), timeout=10)
    if tls:
        s = ssl.create_default_context().wrap_socket(s, server_hostname="api.example.test")
    s.sendall(head)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data.split(b"\r\n")[0].decode(), data.count(b"tok-3b9f0d")
close = b"Connection: close\r\n\r\n"
for host in (b"API.EXAMPLE.TEST:443", b"api.example.test", b"api.example.test.",
             b"api.example.test.:443", b"PEER", b"127.77.0.1:443",
             b"api.example.test:80", b"x@api.example.test:443"):
    print(host.decode(), *first_line(443, b"GET /v1/h HTTP/1.1\r\nHost: " + host + b"\r\n" + close))
print("absolute", *first_line(443, b"GET http://api.example.test:443/v1/a HTTP/1.1\r\n"
                              b"Host: api.example.test:443\r\n" + close))
print("1.0", *first_line(443, b"GET /v1/b HTTP/1.0\r\nHost: api.example.test:443\r\n\r\n"))
print("1.0 no host", *first_line(443, b"GET /v1/c HTTP/1.0\r\n\r\n"))
pipe = (b"GET /v1/one HTTP/1.1\r\nHost: api.example.test\r\n\r\n"
        b"GET /v2/out HTTP/1.1\r\nHost: api.example.test\r\n\r\n"
        b"GET /v1/two HTTP/1.1\r\nHost: evil.example\r\n" + close)
print("tls pipeline", *first_line(443, pipe, tls=True))
"""


def test_no_host_form_or_pipeline_takes_an_https_credential_into_cleartext(run_gate, net):
    # Cleartext credentials, attacked: every Host spelling on plain HTTP to port 443
    # is refused before anything goes upstream, and over TLS a pipelined request is checked
    # on its own (only the first, allowed, request reaches the server, with the credential).
    before = len(seen(net))
    r = run_gate(HOST_FORMS.replace("PEER", net.peer), "--allow", "https://api.example.test/v1",
                 "--allow-header", "https://api.example.test/v1=" + TOKEN)
    out = lines(r)
    assert out[:8] == [h + " HTTP/1.1 403 Forbidden 0" for h in (
        "API.EXAMPLE.TEST:443", "api.example.test", "api.example.test.",
        "api.example.test.:443", net.peer, "127.77.0.1:443", "api.example.test:80",
        "x@api.example.test:443")], out
    assert out[8:] == ["absolute HTTP/1.1 400 Bad Request 0", "1.0 HTTP/1.1 403 Forbidden 0",
                       "1.0 no host HTTP/1.1 400 Bad Request 0",
                       "tls pipeline HTTP/1.1 200 OK 1"], out
    assert seen(net)[before:] == [("GET", "/v1/one")]
    req = [(e["path"], e["allowed"], e["header_added"], e["upstream_tls"])
           for e in r["network_events"] if e["kind"] == "request"]
    assert [x for x in req if x[1]] == [("/v1/one", True, True, True)]
    assert not any(x[2] for x in req if not x[1])


CL0_SERVER = r"""
import json, socket, ssl, sys, threading
host, port, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
listener = socket.create_server((host, port))
def serve(c):
    try:
        c = ctx.wrap_socket(c, server_side=True)
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                data = c.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            path = lines[0].split(b" ")[1].decode()
            fields = {}
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                fields[name.strip().lower()] = value.strip().decode()
            if not path.startswith("/v1/static"):  # a static route ignores the body: CL.0
                n = int(fields.get(b"content-length", "0"))
                while len(buf) < n:
                    buf += c.recv(65536)
                buf = buf[n:]
            out = json.dumps({"path": path, "auth": fields.get(b"authorization", "")}).encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(out) + out)
    except (OSError, ValueError, IndexError):
        pass
    finally:
        c.close()
print("ready", flush=True)
while True:
    threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()
"""

CL0_CELL = r"""
import http.client, json, ssl
c = http.client.HTTPSConnection("api.example.test", 8444, context=ssl.create_default_context())
c.request("POST", "/v1/static", body=b"GET /admin HTTP/1.1\r\nX-Absorb: ")
print(json.loads(c.getresponse().read())["path"])
c.request("GET", "/v1/x")
d = json.loads(c.getresponse().read())
print(d["path"], d["auth"])
"""


@pytest.fixture
def cl0_server(net):
    """An upstream with a CL.0 flaw (a route that ignores a request's body, leaving it to be
    read as the start of the next request on the connection), on the test host's port 8444."""
    import subprocess
    p = subprocess.Popen(["ip", "netns", "exec", net.ns, "/usr/bin/python3", "-c", CL0_SERVER,
                          net.peer, "8444", str(net.dir / "trusted.pem"),
                          str(net.dir / "trusted.key")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready", p.stderr.read()
    yield
    p.kill()
    p.wait()


def test_a_body_an_upstream_ignores_cannot_take_the_next_requests_credential(run_gate, cl0_server):
    # Found by an attack pass on the CL.0 fix: refusing bodies on GET and HEAD left
    # CL.0 open for every method that carries one. The body of an allowed POST the upstream
    # ignores became the head of a request outside the path rule, and curl's next request on
    # the kept-alive upstream connection completed it, credential included: the cell read
    # /admin's answer as its GET /v1/x's. An upstream connection that carried a body is not
    # reused.
    r = run_gate(CL0_CELL, "--allow", "https://api.example.test:8444/v1=GET,POST",
                 "--allow-header", "https://api.example.test:8444/v1=" + TOKEN)
    assert lines(r) == ["/v1/static", "/v1/x Bearer tok-3b9f0d"]
