"""Attacks on the MCP server by clients that share it (issue 21): a stateless client cancelling
another's run, messages that cost the server far more than their size, connections that hold
every slot before authentication, results that would take the server's memory, one client
holding every run and queue slot, and secrets reaching the children the server starts. The
victims are the official SDK client where one is needed; the attacks are raw HTTP."""
import asyncio
import json
import socket
import threading
import time
import urllib.request

import pytest
from mcp import Client

from conftest import HttpServer, wait_for
from test_mcp_protocol import INIT, ping, post, session

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


def test_handshake_sessions_cancel_only_their_own_runs(http_server):
    url = http_server.url
    code = "import time\nprint('started', flush=True)\ntime.sleep(3)\nprint('done')\n"
    mine, theirs = session(url), session(url)
    call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": code}}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}}
    answer = {}
    t = threading.Thread(target=lambda: answer.update(r=post(url, call, theirs)))
    t.start()
    time.sleep(1)
    assert post(url, cancel, mine) == (202, b"")  # another session's cancel: ignored
    t.join(30)
    reply = json.loads(answer["r"][1])
    assert reply["result"]["content"][0]["text"] == "started\ndone\n"
    # Its own cancel stops it.
    t = threading.Thread(target=lambda: answer.update(r=post(url, call, mine)))
    t.start()
    time.sleep(1)
    assert post(url, cancel, mine) == (202, b"")
    t.join(30)
    assert json.loads(answer["r"][1])["error"]["code"] == -32800
