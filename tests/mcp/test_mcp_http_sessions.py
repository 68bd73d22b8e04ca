"""Handshake-era sessions over Streamable HTTP (Mcp-Session-Id, 2025-11-25): initialize mints
an id, later messages must carry a live one (400 without, 404 for an unknown, ended or
expired one), DELETE ends it and cancels its runs, notifications/cancelled reaches only the
session's own runs, and the table is bounded (the least recently used session ends) with an
idle expiry. The stateless era has no sessions."""
import json
import re
import subprocess
import threading
import time

import pytest

from conftest import BIG_RUN, HttpServer, big_cells, snapcell_env, wait_for
from test_mcp_protocol import ping, post, session

SID = "Mcp-Session-Id"


def call(n, code):
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": code}}}


def test_initialize_mints_a_fresh_id(http_server):
    ids = {session(http_server.url)[SID] for _ in range(3)}
    assert len(ids) == 3
    for sid in ids:
        assert re.fullmatch(r"[0-9a-f]{36}", sid)  # visible ASCII, as the spec asks


def test_messages_need_a_live_session(http_server):
    url = http_server.url
    hdr = session(url)
    # Without the header: 400, for requests and notifications alike.
    status, body = post(url, ping(1))
    assert status == 400 and json.loads(body)["error"]["code"] == -32600
    assert b"Mcp-Session-Id" in body
    assert post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"})[0] == 400
    status, body = post(url, call(2, "print(1)"))
    assert status == 400
    # An id never minted, and a minted one with its secret changed: 404 (initialize again).
    assert post(url, ping(3), {SID: "nonsense"})[0] == 404
    forged = hdr[SID][:-1] + ("0" if hdr[SID][-1] != "0" else "1")
    assert post(url, ping(4), {SID: forged})[0] == 404
    assert post(url, ping(5), {SID: "0" * 36})[0] == 404
    # The live one works, for requests, notifications and calls.
    status, body = post(url, ping(6), hdr)
    assert status == 200 and json.loads(body)["result"] == {}
    assert post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, hdr) == (202, b"")
    status, body = post(url, call(7, "print(6 * 7)"), hdr)
    assert json.loads(body)["result"]["content"][0]["text"] == "42\n"


def test_only_the_minted_spelling_finds_a_session():
    # The id's first four characters number its slot: other spellings of the same number
    # (what strtoul would take) must not find the session, even with the right secret.
    server = HttpServer()
    try:
        hdr = session(server.url)  # the first session of a fresh server: slot 0000
        sid = hdr[SID]
        assert sid.startswith("0000") and post(server.url, ping(1), hdr)[0] == 200
        for other in (" 000", "+000", "-000", "0x00", "000 "):
            assert post(server.url, ping(2), {SID: other + sid[4:]})[0] == 404, other
        if sid.upper() != sid:
            assert post(server.url, ping(3), {SID: sid.upper()})[0] == 404
    finally:
        server.stop()


def test_a_repeated_session_header_is_refused(http_server):
    import http.client
    hdr = session(http_server.url)
    conn = http.client.HTTPConnection("127.0.0.1", http_server.port, timeout=30)
    conn.putrequest("POST", "/mcp")
    body = json.dumps(ping(1)).encode()
    for name, value in (("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                        (SID, hdr[SID]), (SID, session(http_server.url)[SID])):
        conn.putheader(name, value)
    conn.endheaders(body)
    response = conn.getresponse()
    assert response.status == 400 and b"repeated" in response.read()
    conn.close()


def delete(url, headers):
    import urllib.request
    req = urllib.request.Request(url, method="DELETE", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_delete_ends_the_session(http_server):
    url = http_server.url
    hdr = session(url)
    other = session(url)
    assert delete(url, {}) == 400
    assert delete(url, hdr) == 204
    assert post(url, ping(1), hdr)[0] == 404
    assert delete(url, hdr) == 404
    # Other sessions are untouched.
    assert post(url, ping(2), other)[0] == 200


def test_delete_cancels_the_sessions_runs(http_server):
    url = http_server.url
    hdr = session(url)
    answer = {}
    t = threading.Thread(target=lambda: answer.update(r=post(url, call(9, BIG_RUN), hdr)))
    t.start()
    assert wait_for(big_cells, 20)
    assert delete(url, hdr) == 204
    t.join(30)
    status, body = answer["r"]
    assert status == 200 and json.loads(body)["error"]["code"] == -32800
    assert wait_for(lambda: not big_cells(), 10)


def test_cancel_reaches_only_the_sessions_own_runs(http_server):
    url = http_server.url
    mine, theirs = session(url), session(url)
    answer = {}
    t = threading.Thread(target=lambda: answer.update(r=post(url, call(5, BIG_RUN), mine)))
    t.start()
    assert wait_for(big_cells, 20)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    # Another client guessing the request id (they are small numbers) cannot stop the run.
    assert post(url, cancel, theirs) == (202, b"")
    time.sleep(1.5)
    assert big_cells() and t.is_alive()
    assert post(url, cancel, mine) == (202, b"")
    t.join(30)
    assert json.loads(answer["r"][1])["error"]["code"] == -32800
    assert wait_for(lambda: not big_cells(), 10)


def test_idle_sessions_expire():
    # One used every half second stays; the other idles well past 3 s. The bound is 3 s, not
    # 1: a busy machine can take a second between two of the busy session's pings.
    server = HttpServer("--http-session-idle", "3")
    try:
        idle, busy = session(server.url), session(server.url)
        start, n = time.monotonic(), 0
        while time.monotonic() - start < 5:
            time.sleep(0.5)
            n += 1
            assert post(server.url, ping(n), busy)[0] == 200
        assert post(server.url, ping(0), idle)[0] == 404
    finally:
        server.stop()


def test_the_table_is_bounded_least_recently_used_ends():
    server = HttpServer("--http-sessions", "2")
    try:
        a, b = session(server.url), session(server.url)
        assert post(server.url, ping(1), a)[0] == 200  # a is now the more recent
        c = session(server.url)
        assert post(server.url, ping(2), b)[0] == 404
        assert post(server.url, ping(3), a)[0] == 200
        assert post(server.url, ping(4), c)[0] == 200
        log = open(server.log.name).read()
        assert "HTTP sessions are live, the most allowed" in log
    finally:
        server.stop()
    assert server.proc.returncode == 0


def test_stateless_requests_need_no_session(http_server):
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}
    for extra in ({}, {SID: "not-a-session"}):
        status, raw = post(http_server.url, body, {**headers, **extra})
        assert status == 200 and json.loads(raw)["result"]["tools"][0]["name"] == "execute_code"


@pytest.mark.parametrize("args, why", [
    (["--http", "127.0.0.1:0", "--http-sessions", "0"], b"--http-sessions"),
    (["--http", "127.0.0.1:0", "--http-sessions", "65537"], b"--http-sessions"),
    (["--http", "127.0.0.1:0", "--http-session-idle", "x"], b"--http-session-idle"),
    (["--http-sessions", "4"], b"need --http"),
    (["--allow-host", "mcp.internal"], b"need --http"),
    (["--http", "127.0.0.1:0", "--allow-host", "evil.example:80"], b"--allow-host"),
    (["--http", "127.0.0.1:0", "--allow-host", "a/b"], b"--allow-host"),
])
def test_bad_session_options(args, why):
    path, env = snapcell_env()
    p = subprocess.run([path, "mcp", *args], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=30)
    assert p.returncode == 2 and why in p.stderr
