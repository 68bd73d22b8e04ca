"""snapcell.fastmcp against the real FastMCP (pinned in requirements-dev.txt): a FastMCP server
with code mode (CodeMode) over SnapcellSandboxProvider, called through FastMCP's own Client
(in memory) as a model's MCP client would call it: the code mode's ``execute`` tool runs in a
cell, and its ``call_tool`` reaches the server's tools on the host."""

import asyncio
import json
import os

import pytest

from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.experimental.transforms.code_mode import CodeMode

import snapcell
from snapcell.fastmcp import SnapcellSandboxProvider

HOST_PID = os.getpid()


def server(sb):
    mcp = FastMCP("shop")

    @mcp.tool
    def price(sku: str, quantity: int = 1) -> float:
        """The price of some items."""
        return {"apple": 0.5, "pear": 0.75}[sku] * quantity

    @mcp.tool
    def where() -> int:
        """The server's process id."""
        return os.getpid()

    mcp.add_transform(CodeMode(sandbox_provider=SnapcellSandboxProvider(sb)))
    return mcp


def execute(sb, code, **kw):
    async def go():
        async with Client(server(sb)) as client:
            return await client.call_tool("execute", {"code": code}, **kw)
    return asyncio.run(go())


def value(result):
    """What execute returned: FastMCP sends a dict as structured content, a scalar as text."""
    return result.data if result.data is not None else json.loads(result.content[0].text)


def test_code_mode_code_calls_the_servers_tools_on_the_host():
    code = """
import os
total = 0
for sku in ["apple", "pear"]:
    total += (await call_tool("price", {"sku": sku, "quantity": 2}))["result"]
host = (await call_tool("where", {}))["result"]  # code mode gives a tool's structured content
return {"total": total, "same_process": host == os.getpid(), "host": host}
"""
    with snapcell.Sandbox() as sb:
        r = execute(sb, code)
    assert value(r) == {"total": 2.5, "same_process": False, "host": HOST_PID}


def test_plain_code_returns_its_last_expression_or_what_it_printed():
    with snapcell.Sandbox() as sb:
        assert value(execute(sb, "x = 6\nx * 7")) == 42
        printed = execute(sb, "print('hello')")
        assert printed.content[0].text == "hello\n"
        # gathered calls, in a function of the code's own
        code = "import asyncio\nasync def main():\n    return await asyncio.gather(*(call_tool('price', {'sku': 'apple', 'quantity': q}) for q in (1, 2)))\nasyncio.run(main())"
        assert value(execute(sb, code)) == [{"result": 0.5}, {"result": 1.0}]


def test_a_failure_is_a_tool_error_with_the_runs_cause_at_the_models_line():
    with snapcell.Sandbox(timeout=1) as sb:
        with pytest.raises(ToolError) as failed:
            execute(sb, "print('before')\nx = 1\n1/0")
        text = str(failed.value)
        assert text.startswith("before\n") and "ZeroDivisionError" in text
        assert 'line 3' in text  # the model's own line number
        with pytest.raises(ToolError) as tool_failed:
            execute(sb, "await call_tool('price', {'sku': 'plum'})")
        assert "call_tool('price') failed" in str(tool_failed.value)
        with pytest.raises(ToolError) as stopped:
            execute(sb, "while True: pass")
        assert sb.run("while True: pass").summary in str(stopped.value)


def test_runs_share_one_template():
    with snapcell.Sandbox() as sb:
        template = sb.stats()["template_pid"]
        for i in range(3):
            assert value(execute(sb, f"return {i}")) == i
        assert sb.stats()["template_pid"] == template


def test_inputs_become_variables_and_line_numbers_stay_the_models():
    with snapcell.Sandbox() as sb:
        provider = SnapcellSandboxProvider(sb)
        assert asyncio.run(provider.run("x + 1", inputs={"x": 41})) == 42
        assert asyncio.run(provider.run("y = 2\nreturn x * y", inputs={"x": 21})) == 42
        with pytest.raises(ToolError, match=r'line 2\b'):
            asyncio.run(provider.run("a = 1\nb = a +", inputs={"x": 1}))  # a syntax error
        assert asyncio.run(provider.run("")) is None
