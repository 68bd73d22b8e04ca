"""Cancelling a run while its code waits in a plain (not awaited) call of a downstream MCP
tool: snapcell stops waiting at once, sends the downstream server notifications/cancelled for
that request (the server, written with the official SDK, cancels the tool's task: the test
sees the mark it leaves), and the run ends promptly. The client is the official SDK, over
stdio and HTTP; the downstream is snapcell's stdio child or a streamable HTTP server."""
import asyncio
import json
import sys
import time

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import HttpServer, snapcell_env, wait_for
from test_mcp_downstream import (SERVER, HttpDownstream, broken_server,  # noqa: F401
                                  texts)

CODE = ("import tools\nprint('started', flush=True)\n"
        "tools.notes.wait(seconds=60, id='{id}')\nprint('done')\n")
NEXT = "import tools\nprint(tools.notes.add(a=2, b=2))\n"


@pytest.fixture(params=["stdio-downstream", "http-downstream"])
def marks_and_config(request, tmp_path):
    """The directory the downstream's wait tool marks, and a config that offers its tools
    with one run at a time (so the next call starts only once the cancelled run ended)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    if request.param == "stdio-downstream":
        notes = {"command": sys.executable, "args": [SERVER], "env": {"NOTES_DIR": str(marks)}}
    else:
        downstream = HttpDownstream(tmp_path, env={"NOTES_DIR": str(marks)})
        request.addfinalizer(downstream.stop)
        notes = {"url": downstream.url}
    config = tmp_path / "snapcell.json"
    config.write_text(json.dumps({"mcp_servers": {"notes": notes}, "max_concurrent_runs": 1,
                                  "limits": {"wall_ms": 50000}}))
    return marks, str(config)


@pytest.fixture(params=["stdio", "http"])
def transport(request, marks_and_config):
    _, config = marks_and_config
    if request.param == "stdio":
        path, env = snapcell_env()
        yield StdioServerParameters(command=path, args=["mcp", "--config", config], env=env)
        return
    server = HttpServer("--config", config)
    try:
        yield server.url
    finally:
        server.stop()
    assert server.proc.returncode == 0


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_cancel_during_a_plain_downstream_call_cancels_it_downstream(marks_and_config,
                                                                      transport, mode):
    marks, _ = marks_and_config

    async def go():
        async with Client(transport, mode=mode) as client:
            with anyio.move_on_after(30) as outer:
                async with anyio.create_task_group() as tg:
                    scope = anyio.CancelScope()

                    async def call():
                        with scope:
                            await client.call_tool("execute_code",
                                                   {"code": CODE.format(id="first")})

                    tg.start_soon(call)
                    assert await anyio.to_thread.run_sync(
                        lambda: wait_for((marks / "arrived.first").exists, 20)), \
                        "the downstream call never started"
                    start = time.monotonic()
                    scope.cancel()
            assert not outer.cancelled_caught
            # The downstream server was told: the SDK cancelled the tool's task, which
            # would otherwise sleep for a minute.
            assert await anyio.to_thread.run_sync(
                lambda: wait_for((marks / "cancelled.first").exists, 10)), \
                "the downstream server was not sent notifications/cancelled"
            # The run ended at once: the next call (one run at a time) runs now, and the
            # downstream still serves it.
            again = await client.call_tool("execute_code", {"code": NEXT})
            assert texts(again) == ["{'result': 4}\n"]
            assert time.monotonic() - start < 10

    asyncio.run(asyncio.wait_for(go(), 90))


def write_config(tmp_path, notes, **extra):
    config = tmp_path / "snapcell.json"
    config.write_text(json.dumps({"mcp_servers": {"notes": notes}, **extra}))
    return str(config)


def test_a_run_cancelled_while_another_runs_request_holds_the_server_ends_at_once(tmp_path):
    """A stdio server takes one request at a time: a run waiting for another's to end stops
    waiting when it is cancelled, and its slot is free for the next call."""
    marks = tmp_path / "marks"
    marks.mkdir()
    notes = {"command": sys.executable, "args": [SERVER], "env": {"NOTES_DIR": str(marks)}}
    config = write_config(tmp_path, notes, max_concurrent_runs=2, limits={"wall_ms": 50000})
    path, env = snapcell_env()

    async def go():
        async with Client(StdioServerParameters(command=path, args=["mcp", "--config", config],
                                                env=env), mode="legacy") as client:
            with anyio.move_on_after(40) as outer:
                async with anyio.create_task_group() as tg:
                    holder, waiter = anyio.CancelScope(), anyio.CancelScope()

                    async def call(scope, code):
                        with scope:
                            await client.call_tool("execute_code", {"code": code})

                    tg.start_soon(call, holder, CODE.format(id="holder"))
                    assert await anyio.to_thread.run_sync(
                        lambda: wait_for((marks / "arrived.holder").exists, 20))
                    tg.start_soon(call, waiter, CODE.format(id="waiter"))
                    await anyio.sleep(1.5)  # the waiter's code is in its call, at the lock
                    assert not (marks / "arrived.waiter").exists()
                    start = time.monotonic()
                    waiter.cancel()
                    # Both run slots were taken: this one runs only once the waiter ended.
                    again = await client.call_tool("execute_code", {"code": "print('next')"})
                    took = time.monotonic() - start
                    holder.cancel()
            assert not outer.cancelled_caught
            assert texts(again) == ["next\n"]
            assert took < 10, took
            assert not (marks / "arrived.waiter").exists()

    asyncio.run(asyncio.wait_for(go(), 90))


def test_a_cancelled_run_sends_the_http_downstream_notifications_cancelled(tmp_path,
                                                                          broken_server):
    """The SDK server above may also stop a task when its client hangs up; this double only
    records what it is sent: the notification, naming the request and why."""
    url = f"http://127.0.0.1:{broken_server.server_address[1]}/mcp"
    config = write_config(tmp_path, {"url": url}, limits={"wall_ms": 50000})
    path, env = snapcell_env()

    async def go():
        async with Client(StdioServerParameters(command=path, args=["mcp", "--config", config],
                                                env=env), mode="legacy") as client:
            with anyio.move_on_after(30) as outer:
                async with anyio.create_task_group() as tg:
                    scope = anyio.CancelScope()

                    async def call():
                        with scope:
                            await client.call_tool("execute_code",
                                                   {"code": "import tools\ntools.notes.hang()\n"})

                    tg.start_soon(call)
                    assert await anyio.to_thread.run_sync(
                        lambda: wait_for(lambda: "hang" in broken_server.calls, 20))
                    scope.cancel()
            assert not outer.cancelled_caught
            assert await anyio.to_thread.run_sync(
                lambda: wait_for(lambda: broken_server.cancelled, 5))
            assert broken_server.cancelled == [{"requestId": broken_server.calls["hang"],
                                                "reason": "the calling run was cancelled"}]

    asyncio.run(asyncio.wait_for(go(), 60))
