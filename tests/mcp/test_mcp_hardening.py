"""Attacks on the MCP server by clients that share it: a stateless client cancelling
another's run, messages that cost the server far more than their size, connections that hold
every slot before authentication, results that would take the server's memory, one client
holding every run and queue slot, and secrets reaching the children the server starts. The
victims are the official SDK client where one is needed; the attacks are raw HTTP."""
import asyncio
import json
import socket
import threading
import time

import pytest
from mcp import Client

from conftest import HttpServer, wait_for
from gate import Gate
from test_mcp_protocol import ping, post, session

V = "2026-07-28"
STATELESS_META = {"io.modelcontextprotocol/protocolVersion": V,
                  "io.modelcontextprotocol/clientCapabilities": {}}


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def texts(result):
    return [c.text for c in result.content if c.type == "text"]


def stateless_cancel(url, request_id):
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": request_id, "_meta": STATELESS_META}}
    return post(url, body, {"MCP-Protocol-Version": V, "Mcp-Method": "notifications/cancelled"})


# ---- finding 5: cancelling another client's run ----

def test_stateless_cancel_cannot_stop_another_clients_run(http_server):
    url = http_server.url
    code = "import time\nprint('started', flush=True)\ntime.sleep(4)\nprint('done')\n"
    stop = threading.Event()

    def attack():
        # Request ids are small numbers: try them all, over and over, while the run lasts.
        while not stop.is_set():
            for n in range(0, 8):
                assert stateless_cancel(url, n)[0] == 202
                assert stateless_cancel(url, str(n))[0] == 202
            time.sleep(0.2)

    async def victim():
        async with Client(url) as client:  # mode="auto": stateless with this server
            assert client.protocol_version == V
            return await client.call_tool("execute_code", {"code": code})

    attacker = threading.Thread(target=attack)
    attacker.start()
    try:
        result = run(victim())
    finally:
        stop.set()
        attacker.join()
    assert result.is_error is False, texts(result)
    assert texts(result) == ["started\ndone\n"]
    assert result.meta["snapcell/run"]["status"] == "ok"


def test_handshake_sessions_cancel_only_their_own_runs(tmp_path):
    # The run waits in the gate while each cancel arrives: an ignored cancel cannot be one
    # that came before the run started.
    gate = Gate(tmp_path)
    server = HttpServer("--config", str(gate.config))
    try:
        url = server.url
        # Awaited: cancelling the run cancels the call, whose command is then killed.
        code = "print('started', flush=True)\nawait tools.gate()\nprint('done')\n"
        mine, theirs = session(url), session(url)
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "execute_code", "arguments": {"code": code}}}
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 5}}
        answer = {}
        t = threading.Thread(target=lambda: answer.update(r=post(url, call, theirs)))
        t.start()
        gate.wait_arrived(1)
        assert post(url, cancel, mine) == (202, b"")  # another session's cancel: ignored
        gate.open()
        t.join(30)
        reply = json.loads(answer["r"][1])
        assert reply["result"]["content"][0]["text"] == "started\ndone\n"
        # Its own cancel stops it.
        gate.close()
        t = threading.Thread(target=lambda: answer.update(r=post(url, call, mine)))
        t.start()
        gate.wait_arrived(1)
        assert post(url, cancel, mine) == (202, b"")
        t.join(30)
        assert json.loads(answer["r"][1])["error"]["code"] == -32800
    finally:
        gate.open()
        server.stop()
    assert server.proc.returncode == 0


# ---- finding 3: one message costing ~80x its size ----

def _measurable():
    """The server's environment for a test of its peak memory: under AddressSanitizer (the
    ASan build's run of this suite) freed memory is not held in quarantine, so the peak is
    what the server keeps, not what it freed."""
    import os
    asan = os.environ.get("ASAN_OPTIONS")
    return {"ASAN_OPTIONS": asan + ":quarantine_size_mb=0"} if asan else {}


def _vm_hwm(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) * 1024


def _padded(pad):
    return (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": ' + pad +
            b'}}')


def test_a_message_of_many_empty_objects_is_refused_unbuilt():
    server = HttpServer(env=_measurable())
    try:
        # 15 MiB of empty objects: jansson would spend ~1.2 GiB on its tree.
        body = _padded(b"[" + b"{}," * (5 << 20) + b"{}]")
        status, raw = post(server.url, body)
        reply = json.loads(raw)
        assert status == 400 and reply["error"]["code"] == -32600
        assert "more than 65536 JSON values" in reply["error"]["message"]
        assert _vm_hwm(server.proc.pid) < 160 << 20
        # Deep nesting, under jansson's own limit of 2048.
        status, raw = post(server.url, _padded(b"[" * 1000 + b"]" * 1000))
        reply = json.loads(raw)
        assert status == 400 and "nested deeper than 64 levels" in reply["error"]["message"]
        # The server still serves.
        assert post(server.url, ping(2), session(server.url))[0] == 200
    finally:
        server.stop()


def test_a_deep_or_wide_message_over_stdio_is_refused(snapcell_bin):
    from test_mcp_protocol import Stdio
    s = Stdio(snapcell_bin)
    try:
        s.initialize()
        reply = s.ask(_padded(b"[" + b"[]," * 100000 + b"[]]"))
        assert reply["error"]["code"] == -32600 and "JSON values" in reply["error"]["message"]
        assert s.ask(ping(3))["result"] == {}
    finally:
        assert s.close() == 0


def test_messages_in_flight_are_bounded_by_the_request_budget():
    # 64 MiB for bodies in flight: three declared 16 MiB bodies fit, a fourth gets 503 before
    # any of it is read, and the server answers again once they are gone.
    server = HttpServer("--http-request-memory", "64M")
    try:
        held = []
        head = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 16777216\r\n\r\n")
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", server.port))
            s.sendall(head + b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "')
            held.append(s)
        time.sleep(0.5)
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(head)
        answer = s.recv(65536).decode()
        s.close()
        assert answer.startswith("HTTP/1.1 503"), answer
        assert "Retry-After: 1" in answer and "--http-request-memory" in answer
        for s in held:
            s.close()
        assert wait_for(lambda: post(server.url, ping(2), session(server.url))[0] == 200, 10)
    finally:
        server.stop()


# ---- finding 2: locked out before authentication ----

def _get(port, path, method="GET", timeout=5):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, headers={"Host": "10.1.2.3:8765"})  # a probe's Host
        r = conn.getresponse()
        return r.status, r.read()
    except OSError:
        return 0, b""  # refused, closed or no answer in time: no slot
    finally:
        conn.close()


def _trickle(port, n, stop):
    """n connections each sending one header byte a second: they never finish a head."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        socks.append(s)
    while not stop.is_set():
        for s in list(socks):
            try:
                s.sendall(b"X")
            except OSError:
                socks.remove(s)  # cut by the server
        stop.wait(1)
    for s in socks:
        s.close()


def test_trickling_heads_do_not_lock_out_a_client_past_the_head_deadline():
    # 260 connections each sending a header byte a second (the library's idle timer restarts
    # with every byte) kept every client out for as long as they kept going.
    server = HttpServer("--token", "s3cret")
    stop = threading.Event()
    attacker = threading.Thread(target=_trickle, args=(server.port, 260, stop))
    try:
        start = time.monotonic()
        attacker.start()
        time.sleep(1)
        auth = {"Authorization": "Bearer s3cret"}
        served = None
        while time.monotonic() - start < 45:
            try:
                served = post(server.url, ping(1), session(server.url, auth))[0]
                break
            except OSError:
                time.sleep(0.2)
        took = time.monotonic() - start
        # In after about the 10 s head deadline; kept out for good before (a slow machine
        # under ASan takes seconds more to cut 260 connections).
        assert served == 200 and took < 10 + 20, took
    finally:
        stop.set()
        attacker.join()
        server.stop()


def _reconnect(port, stop):
    """A connection that sends half a head and, once cut, comes back at once."""
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                s.recv(10)
        except OSError:
            pass


def test_reconnecting_heads_do_not_lock_out_a_client_for_long():
    # 40 connections for 8 slots, each back as soon as it is cut: real clients waited in the
    # listen queue behind them for the whole head deadline of each turn (two connections, an
    # initialize and a ping: ~80 s at a 10 s deadline). With every slot taken a head now gets
    # a second.
    server = HttpServer("--token", "s3cret", "--http-max-connections", "8")
    stop = threading.Event()
    attackers = [threading.Thread(target=_reconnect, args=(server.port, stop))
                 for _ in range(40)]
    try:
        for t in attackers:
            t.start()
        time.sleep(2)
        auth = {"Authorization": "Bearer s3cret"}
        start, served = time.monotonic(), None
        while served is None and time.monotonic() - start < 40:
            try:
                served = post(server.url, ping(1), session(server.url, auth))[0]
            except OSError:
                pass
        took = time.monotonic() - start
        assert served == 200 and took < 25, took
    finally:
        stop.set()
        for t in attackers:
            t.join()
        server.stop()


def _half_heads(port, n):
    """n connections that send half a request head and wait."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        socks.append(s)
    return socks


def _cut_within(socks, since, low, high):
    """Each connection is closed by the server between low and high seconds after since."""
    for s in socks:
        s.settimeout(high + 3)
        assert s.recv(100) == b""
        s.close()
    took = time.monotonic() - since
    assert low < took < high, took


def test_the_head_deadline_is_configurable_and_healthz_reports_slots():
    server = HttpServer("--token", "s3cret", "--http-max-connections", "4",
                        "--http-head-timeout", "6")
    try:
        # No token and any Host: the probe sees whether the server can take a request.
        assert _get(server.port, "/healthz") == (200, b"ok\n")
        assert _get(server.port, "/healthz", "HEAD")[0] == 200
        assert _get(server.port, "/healthz", "POST")[0] == 405
        # Six seconds after accept the heads are late: their connections are closed (not
        # at the default 10 s; the upper bound leaves a slow machine 3 s). A slot is left
        # all along.
        sent = time.monotonic()
        held = _half_heads(server.port, 2)
        time.sleep(0.3)
        assert _get(server.port, "/healthz")[0] == 200
        _cut_within(held, sent, 5.8, 9)
        # The probe takes the last slot: every slot was taken while these heads waited, so
        # each gets a second, not the 6 s.
        sent = time.monotonic()
        held = _half_heads(server.port, 3)
        time.sleep(0.3)
        status, body = _get(server.port, "/healthz")
        assert status == 503 and b"no free connection slot" in body
        _cut_within(held, sent, 0.9, 4.5)
        # A probe waiting in the listen queue behind four such heads gets a slot once they
        # are cut, a second after their accept.
        held = _half_heads(server.port, 4)
        began = time.monotonic()
        assert wait_for(lambda: _get(server.port, "/healthz", timeout=8)[0] == 200, 8)
        assert time.monotonic() - began < 4.5
        for s in held:
            s.close()
    finally:
        server.stop()


def test_heads_waiting_when_every_slot_was_taken_keep_the_short_deadline():
    # One head, then three more half a second later fill the four slots. The first is cut a
    # second after its accept and its slot stays free; the other three waited while every
    # slot was taken, so they are cut a second after theirs too. The server used to decide
    # by the slots taken at each check: once the first was cut they kept theirs for the
    # whole 6 s deadline, and a probe coming and going meanwhile got 503 (the three heads
    # and the probe took every slot) without making the server cut them.
    server = HttpServer("--token", "s3cret", "--http-max-connections", "4",
                        "--http-head-timeout", "6")
    try:
        sent = time.monotonic()
        first = _half_heads(server.port, 1)
        time.sleep(0.5)
        rest = _half_heads(server.port, 3)
        _cut_within(first, sent, 0.9, 4)
        _cut_within(rest, sent, 1.4, 4)
        assert _get(server.port, "/healthz")[0] == 200
    finally:
        server.stop()


def test_answers_to_clients_without_the_token_close_their_connection():
    # A head deadline counts from the previous answer on a kept-alive connection: a client
    # without the token that kept its connections by asking twice a second (a probe, a 401,
    # a 403, a 404) would hold every slot with no head ever late. Each such answer closes.
    server = HttpServer("--token", "s3cret", "--http-max-connections", "4")
    asks = [b"GET /healthz HTTP/1.1\r\nHost: 10.1.2.3\r\n\r\n",
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}",
            b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            b"GET /other HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            b"POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 2\r\n\r\n{}"]
    try:
        for ask in asks:
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                s.sendall(ask)
                got = b""
                while chunk := s.recv(4096):  # until the server closes
                    got += chunk
                assert got.startswith(b"HTTP/1.1 ") and b"Connection: close" in got, got
    finally:
        server.stop()


# ---- finding 12: one client holding every run and queue slot ----

SLEEP = "import time\ntime.sleep({})\nprint('slept')\n"


def _legacy_call(url, hdr, n, code):
    body = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": code}}}
    status, raw = post(url, body, hdr)
    return json.loads(raw)["result"]


def _stateless_call(url, n, code):
    from test_mcp_stateless import headers, request
    body = request(n, "tools/call", {"name": "execute_code", "arguments": {"code": code}})
    status, raw = post(url, body, headers(body))
    data = [l[6:] for l in raw.decode().splitlines() if l.startswith("data: ")]
    return json.loads(data[-1] if data else raw)["result"]  # an SSE stream, or plain JSON


def _status(result):
    return result["_meta"]["snapcell/run"]["status"]


def test_a_session_gets_its_share_and_no_more():
    # One run and one queue slot; a session's share is half of the two: one call.
    server = HttpServer("--max-runs", "1", "--max-queued", "1")
    try:
        hog = session(server.url)
        first = {}
        t = threading.Thread(target=lambda: first.update(r=_legacy_call(server.url, hog, 1,
                                                                          SLEEP.format(10))))
        t.start()
        time.sleep(1.5)
        # Its second call is over its share: busy at once (not after the first run's 10 s),
        # and the queue slot stays free.
        began = time.monotonic()
        second = _legacy_call(server.url, hog, 2, "print(2)")
        assert _status(second) == "busy" and time.monotonic() - began < 5
        assert "busy for this client" in second["content"][0]["text"]

        async def other():
            async with Client(server.url, mode="legacy") as client:
                return await client.call_tool("execute_code", {"code": "print('mine')"})

        result = run(other())  # another client's call waits in the queue and runs
        assert result.is_error is False and texts(result) == ["mine\n"]
        t.join(30)
        assert _status(first["r"]) == "ok"
    finally:
        server.stop()


def test_a_sessions_calls_waiting_for_room_keep_to_its_share():
    # Its share was checked once, before a call waited for room: a session's calls sent
    # together while the server was full all waited, then all got in past the share.
    server = HttpServer("--max-runs", "1", "--max-queued", "1", "--queue-wait", "20")
    try:
        hogs = [threading.Thread(target=_stateless_call, args=(server.url, n, SLEEP.format(3)))
                for n in (1, 2)]
        for t in hogs:
            t.start()
            time.sleep(0.5)  # the first runs, the second takes the queue slot
        hdr = session(server.url)
        results = []
        mine = [threading.Thread(target=lambda n=n: results.append(
                    _legacy_call(server.url, hdr, n, SLEEP.format(1)))) for n in (3, 4, 5)]
        for t in mine:
            t.start()
        for t in hogs + mine:
            t.join(60)
        statuses = sorted(_status(r) for r in results)
        assert statuses == ["busy", "busy", "ok"], statuses
        assert all("busy for this client" in r["content"][0]["text"]
                   for r in results if _status(r) == "busy")
    finally:
        server.stop()


def test_a_stateless_call_waits_for_room_before_it_is_busy():
    server = HttpServer("--max-runs", "1", "--max-queued", "1", "--queue-wait", "20")
    try:
        done = []
        hogs = [threading.Thread(target=lambda n=n: done.append(
                    _status(_stateless_call(server.url, n, SLEEP.format(3))))) for n in (1, 2)]
        for t in hogs:
            t.start()
            time.sleep(0.5)  # the first runs, the second takes the queue slot

        async def other():
            async with Client(server.url) as client:  # stateless: no identity to share by
                return await client.call_tool("execute_code", {"code": "print('mine')"})

        began = time.monotonic()
        result = run(other())
        assert result.is_error is False and texts(result) == ["mine\n"]
        assert time.monotonic() - began > 1  # it waited for the hogs' runs
        for t in hogs:
            t.join(30)
        assert done == ["ok", "ok"]
    finally:
        server.stop()


def test_a_stateless_call_is_busy_once_its_wait_is_over():
    server = HttpServer("--max-runs", "1", "--max-queued", "0", "--queue-wait", "1")
    try:
        hog = threading.Thread(target=_stateless_call, args=(server.url, 1, SLEEP.format(12)))
        hog.start()
        time.sleep(1)
        began = time.monotonic()
        result = _stateless_call(server.url, 2, "print(2)")
        waited = time.monotonic() - began
        # Its 1 s wait, not the hog's run (10 s more at least).
        assert _status(result) == "busy" and 1 <= waited < 7, waited
        hog.join(30)
    finally:
        server.stop()


# ---- finding 8: secrets in the children the server starts ----

PRINT_ENV = ["import json, os, sys", "sys.stdin.read()", "print(json.dumps(dict(os.environ)))"]
SERVER = str(__import__("pathlib").Path(__file__).with_name("downstream_server.py"))
SECRETS = {"SNAPCELL_MCP_TOKEN": "t0ken-s3cret", "API_KEY": "k3y-s3cret",
           "UNLISTED": "not-for-children", "KEEP": "passed-on", "LC_TIME": "C"}


def _child_config(tmp_path, **server_extra):
    import sys
    config = {
        "allow": [{"target": "https://api.example.com",
                   "headers": {"Authorization": "Bearer ${env:API_KEY}"}}],
        "tools": [{"name": "printenv", "argv": [sys.executable, "-c", "\n".join(PRINT_ENV)],
                   "inherit_env": ["KEEP"]}],
        "mcp_servers": {"notes": {"command": sys.executable, "args": [SERVER],
                                  "env": {"NOTES_VARIANT": "environ"},
                                  "inherit_env": ["KEEP"], **server_extra}},
    }
    path = tmp_path / "snapcell.json"
    path.write_text(json.dumps(config))
    return str(path)


def test_children_start_with_an_explicit_environment(tmp_path, snapcell_bin):
    from mcp import StdioServerParameters
    path, env = snapcell_bin
    # The token is in the server's environment as a deployment passes it.
    params = StdioServerParameters(command=path, args=["mcp", "--config", _child_config(tmp_path)],
                                   env={**env, **SECRETS})
    code = ("import json, tools\n"
            "print(json.dumps([call_tool('printenv'), tools.notes.environ()]))\n")

    async def go():
        async with Client(params) as c:
            return await c.call_tool("execute_code", {"code": code})

    result = run(go())
    assert result.is_error is False, texts(result)
    tool_env, server_env = json.loads(texts(result)[0])
    for seen in (tool_env, server_env):
        assert "SNAPCELL_MCP_TOKEN" not in seen and "API_KEY" not in seen
        assert "UNLISTED" not in seen
        assert not any("s3cret" in v for v in seen.values())
        assert seen["KEEP"] == "passed-on" and seen["LC_TIME"] == "C" and seen["PATH"]
    assert server_env["NOTES_VARIANT"] == "environ"


@pytest.mark.parametrize("name, why", [
    ("SNAPCELL_MCP_TOKEN", "it holds the MCP server's token"),
    ("API_KEY", "an allow-list header reads it"),
])
def test_inherit_env_never_names_a_secret(tmp_path, snapcell_bin, name, why):
    import subprocess
    path, env = snapcell_bin
    config = _child_config(tmp_path, inherit_env=[name])
    r = subprocess.run([path, "mcp", "--config", config], capture_output=True, timeout=60,
                       stdin=subprocess.DEVNULL, env={**env, **SECRETS})
    assert r.returncode == 2
    assert f"mcp_servers.notes: \"inherit_env\": {name} is never passed on: {why}".encode() \
        in r.stderr, r.stderr


def test_a_server_that_fails_at_start_shows_its_stderr(tmp_path, snapcell_bin):
    # A server that relied on an inherited variable fails now; its stderr says why.
    import subprocess
    import sys
    needs = ("import os, sys\n"
             "sys.exit('notes: UNLISTED is not set' if 'UNLISTED' not in os.environ\n"
             "         else 'notes: started with UNLISTED')\n")
    config = tmp_path / "snapcell.json"
    config.write_text(json.dumps({"mcp_servers": {"notes": {"command": sys.executable,
                                                            "args": ["-c", needs]}}}))
    path, env = snapcell_bin
    r = subprocess.run([path, "mcp", "--config", str(config)], capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL, env={**env, **SECRETS})
    assert r.returncode == 2
    assert b"notes: UNLISTED is not set" in r.stderr, r.stderr
    assert b"mcp_servers.notes" in r.stderr


# ---- finding 6: what results cost the server ----

WRITE_FILES = ("import hashlib, os\n"
               "digests = {{}}\n"
               "for name, size in {files!r}:\n"
               "    data = os.urandom(size)\n"
               "    open('/output/' + name, 'wb').write(data)\n"
               "    digests[name] = hashlib.sha256(data).hexdigest()\n"
               "print(digests)\n")


@pytest.mark.parametrize("over", ["stdio", "http"])
def test_results_of_several_mib_reach_the_client_at_the_defaults(over, snapcell_bin, http_server):
    # Over HTTP the SDK's handshake mode gets a JSON answer: its SSE reader refuses events
    # past 1 MiB, which a stateless call's streamed answer of this size would be.
    import ast
    import base64
    import hashlib
    from mcp import StdioServerParameters
    code = WRITE_FILES.format(files=[("blob.bin", 6 << 20), ("noise.png", 3 << 20)])
    path, env = snapcell_bin
    target = (StdioServerParameters(command=path, args=["mcp"], env=env) if over == "stdio"
              else http_server.url)

    async def go():
        async with Client(target, mode="auto" if over == "stdio" else "legacy") as client:
            return await client.call_tool("execute_code", {"code": code})

    result = run(go())
    assert result.is_error is False, texts(result)
    digests = ast.literal_eval(texts(result)[0])
    (image,) = [c for c in result.content if c.type == "image"]
    (blob,) = [c for c in result.content if c.type == "resource"]
    assert hashlib.sha256(base64.b64decode(image.data)).hexdigest() == digests["noise.png"]
    assert hashlib.sha256(base64.b64decode(blob.resource.blob)).hexdigest() == digests["blob.bin"]
    assert str(blob.resource.uri) == "file:///output/blob.bin"


def _raw_call(url, code, n=1):
    body = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": code}}}
    return post(url, body, session(url))


@pytest.mark.parametrize("answer", ["json", "stateless"])
def test_a_large_result_costs_the_server_its_base64_once(answer):
    # 40 MiB left in /output cost the server 160 MiB more (the base64 built, copied into the
    # tree, copied with the record, copied into the text): now the file and its base64,
    # written once into the answer's text, 94 MiB. Both eras' calls without a progressToken
    # are answered as one JSON body.
    server = HttpServer(env=_measurable())
    big = WRITE_FILES.format(files=[("big.bin", 40 << 20)])
    try:
        assert _raw_call(server.url, "print(1)")[0] == 200
        before = _vm_hwm(server.proc.pid)
        if answer == "json":
            status, raw = _raw_call(server.url, big)
            assert status == 200 and len(raw) > 40 << 20
        else:
            result = _stateless_call(server.url, 2, big)
            assert result["isError"] is False and len(result["content"]) == 3  # stdout, names, file
        grew = _vm_hwm(server.proc.pid) - before
        assert grew < int(2.6 * (40 << 20)), grew >> 20
    finally:
        server.stop()


def test_a_result_past_the_result_memory_is_a_clear_error():
    server = HttpServer("--result-memory", "64M")
    try:
        status, raw = _raw_call(server.url, WRITE_FILES.format(files=[("big.bin", 40 << 20)]))
        result = json.loads(raw)["result"]
        assert status == 200 and result["isError"] is True
        assert _status(result) == "result-too-large"
        text = result["content"][0]["text"]
        assert "too large for this server to send at all" in text and "--result-memory" in text
        # Nothing stays charged: a result that fits still goes out.
        status, raw = _raw_call(server.url, WRITE_FILES.format(files=[("small.bin", 4 << 20)]),
                                n=2)
        result = json.loads(raw)["result"]
        assert result["isError"] is False and len(result["content"]) == 3  # stdout, names, file
    finally:
        server.stop()


def test_results_held_for_slow_readers_count_until_sent():
    # A client that does not read its 30 MiB answer keeps it held (and counted); another
    # result that does not fit beside it is busy, and fits once the first is gone.
    server = HttpServer("--result-memory", "100M")
    code = WRITE_FILES.format(files=[("big.bin", 30 << 20)])
    try:
        hdr = session(server.url)
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "execute_code", "arguments": {"code": code}}})
        slow = socket.create_connection(("127.0.0.1", server.port))
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        slow.sendall((f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      f"Accept: application/json\r\nMcp-Session-Id: {hdr['Mcp-Session-Id']}\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n{body}").encode())
        slow.settimeout(30)
        assert slow.recv(1) == b"H"  # it ran; the rest of its answer waits for the reader
        _, raw = _raw_call(server.url, code, n=2)
        result = json.loads(raw)["result"]
        assert _status(result) == "busy", result["content"][0]["text"]
        assert "answers in flight hold the rest" in result["content"][0]["text"]
        slow.close()
        assert wait_for(lambda: json.loads(_raw_call(server.url, code, n=3)[1])["result"]
                        ["isError"] is False, 20)
    finally:
        server.stop()


def test_a_session_runs_files_reach_the_client(tmp_path, snapcell_bin):
    # Session runs' results go through the same single base64 pass as fresh runs.
    import ast
    import base64
    import hashlib
    from mcp import StdioServerParameters
    config = tmp_path / "snapcell.json"
    config.write_text(json.dumps({"sessions": {"enabled": True}}))
    path, env = snapcell_bin
    params = StdioServerParameters(command=path, args=["mcp", "--config", str(config)],
                                   env={**env, "XDG_RUNTIME_DIR": str(tmp_path)})
    code = WRITE_FILES.format(files=[("chart.png", 200000), ("data.bin", 300000)])

    async def go():
        async with Client(params, mode="legacy") as client:
            r = await client.call_tool("session_new", {})
            handle = r.meta["snapcell/session"]["session"]
            return await client.call_tool("execute_code", {"code": code, "session": handle})

    result = run(go())
    assert result.is_error is False, texts(result)
    digests = ast.literal_eval(texts(result)[0])
    (image,) = [c for c in result.content if c.type == "image"]
    (blob,) = [c for c in result.content if c.type == "resource"]
    assert hashlib.sha256(base64.b64decode(image.data)).hexdigest() == digests["chart.png"]
    assert hashlib.sha256(base64.b64decode(blob.resource.blob)).hexdigest() == digests["data.bin"]


def test_a_downstream_message_of_many_empty_objects_is_refused_unbuilt(tmp_path):
    # A downstream server's messages were parsed with no bound on their values: one 15 MiB
    # line of empty objects (a server passing on JSON a run asked it to fetch) took the
    # client's server to over a GiB, like finding 3's messages from clients.
    import sys
    config = tmp_path / "snapcell.json"
    config.write_text(json.dumps({"mcp_servers": {"notes": {
        "command": sys.executable, "args": [SERVER]}}}))
    server = HttpServer("--config", str(config), env=_measurable())
    try:
        code = ("import tools\ntry:\n    tools.notes.bomb()\nexcept ToolError as e:\n"
                "    print(e)\nprint(tools.notes.add(a=1, b=1))\n")
        result = _stateless_call(server.url, 1, code)
        out, peak = result["content"][0]["text"], _vm_hwm(server.proc.pid)
        assert peak < 300 << 20, peak >> 20
        assert "server 'notes' sent a line that is not JSON-RPC 2.0" in out, out
        assert "{'result': 2}" in out, out
    finally:
        server.stop()
