"""snapcell mcp at the wire: what malformed, oversized, early and unknown messages get, over
stdio and HTTP, and what happens when a client vanishes mid-run."""
import json
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import BIG_RUN, big_cells, snapcell_env, wait_for

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}}


class Stdio:
    def __init__(self, snapcell_bin, *args):
        path, env = snapcell_bin
        self.proc = subprocess.Popen([path, "mcp", *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def send(self, obj):
        line = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def recv(self):
        line = self.proc.stdout.readline()
        assert line, "the server closed stdout"
        return json.loads(line)

    def ask(self, obj):
        self.send(obj)
        return self.recv()

    def initialize(self):
        assert self.ask(INIT)["result"]["protocolVersion"] == "2025-11-25"
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self):
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=20)
        self.proc.stdout.close()
        self.proc.stderr.close()
        return rc


@pytest.fixture
def stdio(snapcell_bin):
    s = Stdio(snapcell_bin)
    yield s
    if s.proc.poll() is None:
        assert s.close() == 0


def ping(n):
    return {"jsonrpc": "2.0", "id": n, "method": "ping"}


def test_malformed_json(stdio):
    assert stdio.ask(b'{"jsonrpc": "2.0", "id": 1, "method"')["error"]["code"] == -32700
    assert stdio.ask(b"[1, 2]")["error"]["code"] == -32600
    assert stdio.ask({"jsonrpc": "1.0", "id": 7, "method": "ping"})["error"] == {
        "code": -32600, "message": 'Invalid Request: jsonrpc must be "2.0"'}
    assert stdio.ask({"jsonrpc": "2.0", "id": 8, "method": "ping", "params": [1]})["error"]["code"] == -32602
    assert stdio.ask(ping(2)) == {"jsonrpc": "2.0", "id": 2, "result": {}}


def test_unknown_method_and_discover_answer_at_once(stdio):
    start = time.monotonic()
    reply = stdio.ask({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}})
    assert reply["error"]["code"] == -32601 and reply["id"] == 1
    assert stdio.ask({"jsonrpc": "2.0", "id": "x", "method": "no/such"})["error"]["code"] == -32601
    assert time.monotonic() - start < 10  # no run or time-out stands between them


def test_calls_before_initialize(stdio):
    reply = stdio.ask({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    assert reply["error"]["code"] == -32600 and "initialize" in reply["error"]["message"]
    assert stdio.ask(ping(4))["result"] == {}
    stdio.initialize()
    assert stdio.ask({"jsonrpc": "2.0", "id": 5, "method": "tools/list"})["result"]["tools"][0]["name"] == "execute_code"
    null_cursor = {"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": {"cursor": None}}
    assert stdio.ask(null_cursor)["result"]["tools"][0]["name"] == "execute_code"
    bad_cursor = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"cursor": "x"}}
    assert stdio.ask(bad_cursor)["error"]["code"] == -32602


def test_wrong_params(stdio):
    stdio.initialize()
    # Protocol errors: an unknown tool, arguments that break the CallToolRequest schema.
    for params in ({"name": "other", "arguments": {"code": "1"}},
                   {"name": "execute_code", "arguments": [1]}):
        reply = stdio.ask({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
        assert reply["error"]["code"] == -32602, params
    # A bad argument is a tool execution error the model can correct (2025-11-25 on).
    for params in ({"name": "execute_code", "arguments": {"code": 3}}, {"name": "execute_code"}):
        reply = stdio.ask({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params})
        result = reply["result"]
        assert result["isError"] is True and "code" in result["content"][0]["text"], params
        assert result["_meta"]["snapcell/run"]["status"] == "invalid-arguments"
        assert "resultType" not in result  # the handshake era keeps its shape


def test_versions_and_capabilities(stdio):
    old = dict(INIT, params=dict(INIT["params"], protocolVersion="2025-03-26"))
    result = stdio.ask(old)["result"]
    assert result["protocolVersion"] == "2025-03-26"
    assert result["capabilities"] == {"tools": {}, "resources": {}}  # no listChanged or subscribe: we send no such notification
    unknown = dict(INIT, params=dict(INIT["params"], protocolVersion="1999-01-01"))
    assert stdio.ask(unknown)["result"]["protocolVersion"] == "2025-11-25"


def test_huge_line_is_refused_without_buffering(stdio):
    stdio.initialize()
    chunk = b"x" * (1 << 20)

    def write():
        stdio.proc.stdin.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "')
        for _ in range(100):
            stdio.proc.stdin.write(chunk)
        stdio.proc.stdin.write(b'"}\n')
        stdio.proc.stdin.flush()

    writer = threading.Thread(target=write)
    writer.start()
    reply = stdio.recv()
    writer.join()
    assert reply["error"]["code"] == -32600 and "MiB" in reply["error"]["message"]
    with open(f"/proc/{stdio.proc.pid}/status") as f:
        peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) * 1024
    assert peak < 64 << 20, f"the server held {peak} bytes"
    assert stdio.ask(ping(2))["result"] == {}


def test_client_disappears_mid_run(snapcell_bin):
    s = Stdio(snapcell_bin)
    s.initialize()
    s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": BIG_RUN}}})
    assert wait_for(big_cells, 20)
    # A client that goes away closes both pipes: with nobody to read its answer, the run is
    # cancelled. (Only the input ending answers the calls in flight first: test_batch_...)
    s.proc.stdout.close()
    assert s.close() == 0
    assert wait_for(lambda: not big_cells(), 10)


def test_batch_input_is_answered_before_the_server_exits(snapcell_bin, tmp_path):
    # `snapcell mcp < requests.jsonl`: the input ends while the calls run; each is answered,
    # then the server exits 0.
    path, env = snapcell_bin
    calls = [{"jsonrpc": "2.0", "id": n, "method": "tools/call",
              "params": {"name": "execute_code",
                         "arguments": {"code": f"import time\ntime.sleep(1.5)\nprint({n} * 7)"}}}
             for n in (2, 3)]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("\n".join(json.dumps(m) for m in [INIT, *calls]) + "\n")
    with open(requests) as stdin:
        proc = subprocess.run([path, "mcp"], stdin=stdin, capture_output=True, env=env,
                              timeout=60)
    assert proc.returncode == 0, proc.stderr
    answers = {m["id"]: m for m in map(json.loads, proc.stdout.decode().splitlines())}
    assert sorted(answers) == [1, 2, 3]
    for n in (2, 3):
        result = answers[n]["result"]
        assert result["isError"] is False
        assert result["content"][0]["text"] == f"{n * 7}\n"


def test_busy_past_the_cap(snapcell_bin):
    s = Stdio(snapcell_bin, "--max-runs", "1", "--max-queued", "0")
    s.initialize()
    s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": "import time; time.sleep(3)"}}})
    time.sleep(0.5)
    reply = s.ask({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                   "params": {"name": "execute_code", "arguments": {"code": "print(1)"}}})
    assert reply["id"] == 3 and reply["result"]["isError"] is True
    assert "busy" in reply["result"]["content"][0]["text"]
    assert s.recv()["id"] == 2
    assert s.close() == 0


def test_calls_past_the_cap_wait_in_a_bounded_queue(snapcell_bin):
    s = Stdio(snapcell_bin, "--max-runs", "1", "--max-queued", "1")
    s.initialize()
    sleeper = "import time; print('start', flush=True); time.sleep(2); print('slept')"
    s.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": sleeper}}})
    time.sleep(0.5)
    # The queue's one place: this call waits for the run and then runs.
    s.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": "print('queued')"}}})
    time.sleep(0.2)
    # The run and the queue are full: refused at once, before either ends.
    reply = s.ask({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                   "params": {"name": "execute_code", "arguments": {"code": "print(4)"}}})
    assert reply["id"] == 4 and reply["result"]["_meta"]["snapcell/run"]["status"] == "busy"
    assert "1 runs are in progress and 1 calls wait" in reply["result"]["content"][0]["text"]
    first, second = s.recv(), s.recv()
    assert (first["id"], second["id"]) == (2, 3)
    assert first["result"]["content"][0]["text"] == "start\nslept\n"
    assert second["result"]["content"][0]["text"] == "queued\n"
    # A queued call cancelled while it waits never runs (and, over stdio, gets no answer).
    s.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": sleeper}}})
    time.sleep(0.5)
    s.send({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": "print('ran')"}}})
    time.sleep(0.2)
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 6}})
    assert s.recv()["id"] == 5
    reply = s.ask({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                   "params": {"name": "execute_code", "arguments": {"code": "print(7)"}}})
    assert reply["id"] == 7 and reply["result"]["content"][0]["text"] == "7\n"
    assert s.close() == 0


def post(url, body, headers=None):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def session(url, headers=None):
    """A handshake-era session: initialize, then the headers every later message carries."""
    req = urllib.request.Request(url, data=json.dumps(INIT).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        **(headers or {})})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert json.loads(r.read())["result"]["protocolVersion"] == "2025-11-25"
        sid = r.headers["Mcp-Session-Id"]
    return {"Mcp-Session-Id": sid, **(headers or {})}


def test_http_basics(http_server):
    url = http_server.url
    status, body = post(url, INIT)
    assert status == 200 and json.loads(body)["result"]["serverInfo"]["name"] == "snapcell"
    hdr = session(url)
    assert post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, hdr) == (202, b"")
    status, body = post(url, b"{not json")
    assert status == 400 and json.loads(body)["error"]["code"] == -32700
    status, body = post(url, {"jsonrpc": "2.0", "id": 2, "method": "server/discover"}, hdr)
    assert json.loads(body)["error"]["code"] == -32601
    status, _ = post(url, ping(3), {"MCP-Protocol-Version": "1999-01-01", **hdr})
    assert status == 400
    status, _ = post(url.replace("/mcp", "/other"), ping(4), hdr)
    assert status == 404


def test_http_bad_origin_and_host(http_server):
    url = http_server.url
    status, _ = post(url, ping(1), {"Origin": "http://evil.example"})
    assert status == 403
    status, _ = post(url, ping(1), {"Host": "evil.example"})
    assert status == 403
    status, body = post(url, ping(1), session(url, {"Origin": f"http://localhost:{http_server.port}"}))
    assert status == 200 and json.loads(body)["result"] == {}


def test_http_token():
    from conftest import HttpServer
    server = HttpServer("--token", "s3cret")
    try:
        assert post(server.url, ping(1))[0] == 401
        assert post(server.url, ping(1), {"Authorization": "Bearer wrong"})[0] == 401
        auth = {"Authorization": "Bearer s3cret"}
        assert post(server.url, ping(1), session(server.url, auth))[0] == 200
        # The session id is no credential: without the token it gets nowhere.
        assert post(server.url, ping(1), {"Mcp-Session-Id": session(server.url, auth)["Mcp-Session-Id"]})[0] == 401
    finally:
        server.stop()
    assert server.proc.returncode == 0


def test_http_origin_must_be_this_server(http_server):
    # No CORS headers are sent, so a page on another loopback port is never a client; it
    # could otherwise send a text/plain "simple" POST that needs no preflight.
    for origin in ("http://localhost:1", "http://127.0.0.1", f"http://localhost:{http_server.port}x",
                   f"http://localhost:{http_server.port}@evil.example"):
        status, _ = post(http_server.url, ping(1), {"Origin": origin, "Content-Type": "text/plain"})
        assert status == 403, origin
    status, _ = post(http_server.url, ping(1), session(http_server.url, {"Origin": f"http://[::1]:{http_server.port}"}))
    assert status == 200


def test_http_allow_host_names_a_balancers_host():
    # Behind a balancer or a Kubernetes Service clients send its name; --allow-host vouches
    # for that name (any port: the balancer's), and nothing else gets through with it.
    from conftest import HttpServer
    server = HttpServer("--allow-host", "mcp.internal")
    try:
        url = server.url
        named = session(url, {"Host": "mcp.internal:8080"})
        assert post(url, ping(1), named)[0] == 200
        assert post(url, ping(2), {**named, "Origin": "https://mcp.internal"})[0] == 200
        for host in ("evil.example", "mcp.internal.evil.example", "xmcp.internal"):
            assert post(url, ping(3), {**named, "Host": host})[0] == 403, host
        for origin in ("http://evil.example", "http://mcp.internal:80@evil.example",
                       "http://mcp.internal/x", "null"):
            assert post(url, ping(4), {**named, "Origin": origin})[0] == 403, origin
    finally:
        server.stop()


def test_http_empty_token_is_refused():
    path, env = snapcell_env()
    proc = subprocess.run([path, "mcp", "--http", "127.0.0.1:0", "--token", ""], env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert proc.returncode == 2 and b"non-empty" in proc.stderr


def _vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) * 1024


def test_http_unauthenticated_body_is_not_kept():
    # Host, Origin and the token are checked before the body is read: 24 clients without the
    # token sending 15 MiB each made the server hold 0.6 GB before.
    import socket
    from conftest import HttpServer
    server = HttpServer("--token", "s3cret")
    try:
        socks = []
        for _ in range(24):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 15728640\r\n\r\n")
            socks.append(s)

        def fill(s):
            try:
                for _ in range(15):
                    s.sendall(b"x" * (1 << 20))
            except OSError:
                pass  # refused early and closed: what we want

        threads = [threading.Thread(target=fill, args=(s,)) for s in socks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for s in socks:
            s.close()
        assert _vm_hwm(server.proc.pid) < 128 << 20
        auth = {"Authorization": "Bearer s3cret"}
        assert post(server.url, ping(1), session(server.url, auth))[0] == 200
    finally:
        server.stop()


def test_http_idle_connections_do_not_hold_every_slot():
    # 256 connections that send half a request and stop used to lock every client out.
    import socket
    from conftest import HttpServer
    server = HttpServer()
    try:
        socks = []
        for _ in range(260):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            socks.append(s)
        time.sleep(0.5)
        data = json.dumps(INIT).encode()
        req = urllib.request.Request(server.url, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=40) as r:
            assert r.status == 200
        for s in socks:
            s.close()
    finally:
        server.stop()


def test_http_huge_body(http_server):
    status, body = post(http_server.url, b'{"pad": "' + b"x" * (20 << 20) + b'"}')
    assert status == 413 and json.loads(body)["error"]["code"] == -32600


def test_http_stream_client_disappears_mid_run(http_server):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", http_server.port, timeout=30)
    body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                       "params": {"name": "execute_code", "arguments": {"code": BIG_RUN},
                                  "_meta": {"progressToken": "p"}}})
    conn.request("POST", "/mcp", body, {"Content-Type": "application/json",
                                        "Accept": "application/json, text/event-stream",
                                        **session(http_server.url)})
    response = conn.getresponse()
    assert response.status == 200
    assert response.getheader("Content-Type") == "text/event-stream"
    assert wait_for(big_cells, 20)
    assert b"notifications/progress" in response.read(200)  # after keep-alive comments, if any
    conn.sock.close()
    conn.close()
    # The next progress write fails; the run is cancelled and its cell killed.
    assert wait_for(lambda: not big_cells(), 15)
    status, body = post(http_server.url, ping(8), session(http_server.url))
    assert status == 200
