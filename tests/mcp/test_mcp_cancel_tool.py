"""Cancelling a run while its code waits in a plain (not awaited) call of a command tool: the
run ends cancelled at once, the command's process group is killed and reaped, and the tool's
late answer reaches nobody. The client is the official SDK (stdio and HTTP, both eras) or,
for a handshake session's own notifications/cancelled, raw HTTP."""
import asyncio
import json
import os
import threading
import time

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import HttpServer, wait_for
from gate import Gate
from test_mcp_protocol import post, session

CODE = "print('started', flush=True)\ncall_tool('gate')\nprint('done')\n"


def texts(result):
    return [c.text for c in result.content if c.type == "text"]


def gate_pids(gate):
    """The shells of the gate calls that arrived ($$ of each)."""
    return [int(p.name.split(".")[1]) for p in gate.dir.iterdir() if p.name.startswith("in.")]


def group_alive(pgid):
    """Whether any process (a zombie too) is still in process group pgid."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            return True
    return False


@pytest.fixture(params=["stdio", "http"])
def gated(request, tmp_path, snapcell_bin):
    gate = Gate(tmp_path)
    if request.param == "stdio":
        path, env = snapcell_bin
        yield gate, StdioServerParameters(command=path, args=["mcp", "--config", str(gate.config)],
                                          env=env)
        gate.open()
        return
    server = HttpServer("--config", str(gate.config))
    try:
        yield gate, server.url
    finally:
        gate.open()
        server.stop()
    assert server.proc.returncode == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_cancel_during_a_plain_command_tool_call_ends_the_run(gated, mode):
    gate, transport = gated

    async def go():
        async with Client(transport, mode=mode) as client:
            with anyio.move_on_after(30) as outer:
                async with anyio.create_task_group() as tg:
                    scope = anyio.CancelScope()

                    async def call():
                        with scope:
                            await client.call_tool("execute_code", {"code": CODE})

                    tg.start_soon(call)
                    await anyio.to_thread.run_sync(gate.wait_arrived, 1)
                    scope.cancel()
            assert not outer.cancelled_caught
            (pid,) = gate_pids(gate)
            # The gate would wait 60 s: the command and what it started are killed and
            # reaped within seconds, with the gate still shut.
            assert await anyio.to_thread.run_sync(
                lambda: wait_for(lambda: not group_alive(pid), 10)), "the command lives on"
            # The abandoned request's answer lands first (seconds for an ASan server
            # on a busy machine; the client has no event to wait for).
            await anyio.sleep(2)
            # The server is free for the next call, which waits in no gate left behind.
            again = await client.call_tool("execute_code", {"code": "print('still here')"})
            assert texts(again) == ["still here\n"]

    asyncio.run(asyncio.wait_for(go(), 60))


def test_handshake_sessions_own_cancel_answers_at_once(tmp_path):
    # The report: over handshake-era HTTP a session's own notifications/cancelled for a run
    # waiting in a plain command tool call got no answer within 30 s.
    gate = Gate(tmp_path)
    server = HttpServer("--config", str(gate.config))
    try:
        url, mine = server.url, session(server.url)
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "execute_code", "arguments": {"code": CODE}}}
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": 5}}
        answer = {}
        t = threading.Thread(target=lambda: answer.update(r=post(url, call, mine)))
        t.start()
        gate.wait_arrived(1)
        start = time.monotonic()
        assert post(url, cancel, mine) == (202, b"")
        t.join(10)
        assert not t.is_alive(), "no answer to the cancelled call"
        assert time.monotonic() - start < 10
        assert json.loads(answer["r"][1])["error"]["code"] == -32800
        (pid,) = gate_pids(gate)
        assert wait_for(lambda: not group_alive(pid), 5), "the command lives on"
        # The same session runs on.
        call["id"] = 6
        call["params"]["arguments"]["code"] = "print('still here')"
        reply = json.loads(post(url, call, mine)[1])
        assert reply["result"]["content"][0]["text"] == "still here\n"
    finally:
        gate.open()
        server.stop()
    assert server.proc.returncode == 0
