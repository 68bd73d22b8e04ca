"""The official Python MCP SDK client (mcp==2.3.0, requirements-dev.txt) against snapcell mcp,
over stdio and Streamable HTTP, in the handshake-only mode="legacy" and the default
mode="auto" (which probes server/discover first and so speaks the stateless 2026-07-28
revision with this server)."""
import asyncio
import base64

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import BIG_RUN, big_cells, wait_for

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==")


@pytest.fixture(params=["stdio", "http"])
def transport(request, snapcell_bin):
    if request.param == "stdio":
        path, env = snapcell_bin
        return StdioServerParameters(command=path, args=["mcp"], env=env)
    return request.getfixturevalue("http_server").url


@pytest.fixture(params=["legacy", "auto"])
def mode(request):
    return request.param


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


def texts(result):
    return [c.text for c in result.content if c.type == "text"]


def test_era_negotiated(transport, mode):
    async def go():
        async with Client(transport, mode=mode) as client:
            return client.protocol_version, client.server_info, client.instructions

    version, info, instructions = run(go())
    assert version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    assert info.name == "snapcell"
    assert "execute_code" in instructions


def test_lists_execute_code(transport, mode):
    async def go():
        async with Client(transport, mode=mode) as client:
            return (await client.list_tools()).tools

    tools = run(go())
    assert [t.name for t in tools] == ["execute_code"]
    assert tools[0].input_schema["required"] == ["code"]
    assert "call_tool" in tools[0].description or "Python" in tools[0].description


def test_call_prints(transport, mode):
    async def go():
        async with Client(transport, mode=mode) as client:
            return await client.call_tool("execute_code", {"code": "print(6 * 7)"})

    result = run(go())
    assert result.is_error is False
    assert texts(result) == ["42\n"]
    assert result.structured_content is None
    assert result.meta["snapcell/run"]["status"] == "ok"


def test_artifacts(transport, mode):
    code = (f"import base64\nopen('/output/dot.png', 'wb').write(base64.b64decode({base64.b64encode(PNG).decode()!r}))\n"
            "open('/output/report.txt', 'w').write('all good')\n")

    async def go():
        async with Client(transport, mode=mode) as client:
            return await client.call_tool("execute_code", {"code": code})

    result = run(go())
    assert not result.is_error
    images = [c for c in result.content if c.type == "image"]
    resources = [c for c in result.content if c.type == "resource"]
    assert len(images) == 1 and base64.b64decode(images[0].data) == PNG
    assert images[0].mime_type == "image/png"
    assert len(resources) == 1
    assert str(resources[0].resource.uri) == "file:///output/report.txt"
    assert resources[0].resource.text == "all good"
    # Each file's item names it, images too; one text names them all for clients that show
    # a file's text or image without its URI.
    assert images[0].meta == {"snapcell/path": "dot.png"}
    assert resources[0].meta == {"snapcell/path": "report.txt"}
    # The code's last line is an expression (write's count): its value comes last.
    assert texts(result) == [f"files in /output: dot.png ({len(PNG)} bytes, image/png), "
                             "report.txt (8 bytes, text/plain)", "value: 8"]


def test_error_is_error(transport, mode):
    async def go():
        async with Client(transport, mode=mode) as client:
            return await client.call_tool("execute_code", {"code": "raise ValueError('nope')"})

    result = run(go())
    assert result.is_error is True
    assert any("ValueError: nope" in t for t in texts(result))
    assert result.meta["snapcell/run"]["status"] == "error"


def test_last_expression_value(transport, mode):
    """The value of the code's last expression is the last text item and in the run's record;
    when there is none the record says why, and the model is told only what it can use."""
    codes = ["print('a')\n1+1", "x = 3", "None", "object()", "list(range(100000))",
             "print('b')\n1/0"]

    async def go():
        async with Client(transport, mode=mode) as client:
            return [await client.call_tool("execute_code", {"code": c}) for c in codes]

    value, assignment, none, obj, huge, failed = run(go())
    assert value.is_error is False
    assert texts(value) == ["a\n", "value: 2"]
    run_meta = value.meta["snapcell/run"]
    assert run_meta["value"] == 2 and run_meta["value_absent"] is None
    assert texts(assignment) == ["(no output)"]
    assert assignment.meta["snapcell/run"]["value_absent"] == "no_expression"
    assert texts(none) == ["(no output)"]
    assert none.meta["snapcell/run"]["value_absent"] == "none"
    assert [t.startswith("value: not shown") and "JSON" in t for t in texts(obj)] == [True]
    assert obj.meta["snapcell/run"]["value_absent"] == "not_json"
    assert "over 262144 bytes" in texts(huge)[-1]
    assert huge.meta["snapcell/run"]["value"] is None
    assert huge.meta["snapcell/run"]["value_absent"] == "too_large"
    assert failed.is_error is True
    assert texts(failed)[0] == "b\n" and not any(t.startswith("value:") for t in texts(failed))
    assert failed.meta["snapcell/run"]["value_absent"] == "not_evaluated"


def test_cancellation_kills_the_cell(transport, mode):
    async def go():
        async with Client(transport, mode=mode) as client:
            with anyio.move_on_after(30) as outer:
                async with anyio.create_task_group() as tg:
                    scope = anyio.CancelScope()

                    async def call():
                        with scope:
                            await client.call_tool("execute_code", {"code": BIG_RUN})

                    tg.start_soon(call)
                    assert await anyio.to_thread.run_sync(lambda: wait_for(big_cells, 20))
                    scope.cancel()
            assert not outer.cancelled_caught
            # The cell is gone while the server stays up and answers.
            assert await anyio.to_thread.run_sync(lambda: wait_for(lambda: not big_cells(), 10))
            # The SDK's HTTP transport fails at close if the abandoned request's answer (the
            # server must answer every POST) lands after it closed its read stream.
            await anyio.sleep(2)  # seconds for an ASan server on a busy machine
            again = await client.call_tool("execute_code", {"code": "print('still here')"})
            assert texts(again) == ["still here\n"]

    run(go())


def test_progress(transport, mode):
    seen = []

    async def progress(value, total, message):
        seen.append((value, message))

    async def go():
        async with Client(transport, mode=mode) as client:
            return await client.call_tool("execute_code", {"code": "import time\ntime.sleep(2.5)\nprint('done')"},
                                          progress_callback=progress)

    result = run(go())
    assert texts(result) == ["done\n"]
    assert len(seen) >= 1
    assert [v for v, _ in seen] == sorted(v for v, _ in seen)
    assert seen[0][0] >= 1.0
