"""An Agent Framework 1.23 agent using snapcell through MCP (`MCPStdioTool` starting
`snapcell mcp`, and `MCPStreamableHTTPTool` with a bearer token against `snapcell mcp --http`),
with a scripted chat client, against the build tree's CLI: the wheel installs no `snapcell`
command, so these tests skip when build/cli/snapcell is absent (scripts/build)."""

import asyncio
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
from agent_framework import Agent, MCPStdioTool, MCPStreamableHTTPTool
from scripted_chat import ScriptedChatClient

ROOT = pathlib.Path(__file__).resolve().parents[2]
CLI = ROOT / "build" / "cli" / "snapcell"
HELPER = ROOT / "build" / "snapcell-cell"

pytestmark = pytest.mark.skipif(
    not (CLI.exists() and HELPER.exists()),
    reason=f"no snapcell CLI in the build tree ({CLI} and {HELPER}): run scripts/build",
)

ADD = "import json, sys\nargs = json.load(sys.stdin)\nprint(json.dumps(args['a'] + args['b']))\n"



def _config(work_tmp):
    """A server config with one command tool, `add(a, b)`, run by this interpreter."""
    script = work_tmp / "add.py"
    script.write_text(ADD)
    config = work_tmp / "snapcell-mcp.json"
    config.write_text(json.dumps({"tools": [{
        "name": "add",
        "argv": [sys.executable, str(script)],
        "description": "Adds two integers.",
        "schema": {"type": "object",
                   "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                   "required": ["a", "b"]},
    }]}))
    return config


def _stdio_tool(config, cells, *extra):
    return MCPStdioTool(name="snapcell", command=str(CLI),
                        args=["mcp", "--config", str(config), *extra],
                        env={"SNAPCELL_HELPER": str(HELPER), "TMPDIR": str(cells)})


def test_mcp_stdio_agent_gets_42_from_call_tool(work_tmp):
    cells = work_tmp / "cells"
    cells.mkdir(mode=0o711)
    client = ScriptedChatClient('total = call_tool("add", a=20, b=22)\nprint(total)')

    async def main():
        async with _stdio_tool(_config(work_tmp), cells) as snapcell:
            assert [f.name for f in snapcell.functions] == ["execute_code"]
            assert "- add: Adds two integers." in snapcell.functions[0].description
            agent = Agent(client, instructions="Use execute_code for any computation.", tools=snapcell)
            return await agent.run("What is 20 + 22?")

    response = asyncio.run(main())
    assert response.text.strip() == "42"
    assert [t.name for t in client.requests[0][1]["tools"]] == ["execute_code"]
    assert len(client.requests) == 2  # the call, then the answer from its result
    assert list(cells.iterdir()) == []  # the server exited with stdin and left no cell behind


def _http_server(config, cells, log, token=None):
    """`snapcell mcp --http` on a free loopback port (port 0: the server picks one and logs
    it), its stderr in the file log: the process and its URL."""
    env = {**os.environ, "SNAPCELL_HELPER": str(HELPER), "TMPDIR": str(cells)}
    argv = [str(CLI), "mcp", "--http", "127.0.0.1:0", "--config", str(config)]
    if token:
        argv += ["--token", token]
    with open(log, "w") as stderr:
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=stderr)
    end = time.monotonic() + 30
    while time.monotonic() < end and proc.poll() is None:
        for line in log.read_text().splitlines():
            if "listening on http://" in line:
                return proc, line.split("listening on ", 1)[1].strip()
        time.sleep(0.05)
    proc.kill()
    pytest.fail("snapcell mcp --http did not start: " + log.read_text())


def test_mcp_streamable_http_agent_gets_42_from_call_tool(work_tmp):
    cells = work_tmp / "cells"
    cells.mkdir(mode=0o711)
    client = ScriptedChatClient('total = call_tool("add", a=20, b=22)\nprint(total)')
    proc, url = _http_server(_config(work_tmp), cells, work_tmp / "server.log")
    try:
        async def main():
            async with MCPStreamableHTTPTool(name="snapcell", url=url) as snapcell:
                assert [f.name for f in snapcell.functions] == ["execute_code"]
                assert "- add: Adds two integers." in snapcell.functions[0].description
                agent = Agent(client, instructions="Use execute_code for any computation.",
                              tools=snapcell)
                return await agent.run("What is 20 + 22?")

        response = asyncio.run(main())
    finally:
        proc.terminate()
        rc = proc.wait(timeout=15)
    assert response.text.strip() == "42"
    assert [t.name for t in client.requests[0][1]["tools"]] == ["execute_code"]
    assert len(client.requests) == 2  # the call, then the answer from its result
    assert rc == 0  # SIGTERM stops the server cleanly
    assert list(cells.iterdir()) == []  # and it left no cell behind


def test_mcp_http_agent_with_token_gets_42_from_call_tool(work_tmp):
    # docs/mcp.md's MCPStreamableHTTPTool snippet: the token goes in static_headers.
    cells = work_tmp / "cells"
    cells.mkdir(mode=0o711)
    log = work_tmp / "server.log"
    client = ScriptedChatClient('total = call_tool("add", a=20, b=22)\nprint(total)')
    proc, url = _http_server(_config(work_tmp), cells, log, token="s3cret")
    try:
        async def main():
            tool = MCPStreamableHTTPTool(name="snapcell", url=url,
                                         static_headers={"Authorization": "Bearer s3cret"})
            async with tool as snapcell:
                assert [f.name for f in snapcell.functions] == ["execute_code"]
                agent = Agent(client, instructions="Use execute_code.", tools=snapcell)
                return await agent.run("What is 20 + 22?")

        response = asyncio.run(main())
        assert response.text.strip() == "42"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert proc.returncode == 0
    assert list(cells.iterdir()) == []


@pytest.mark.parametrize("detailed", [True, False])
def test_mcp_failed_run_tells_the_cause_only_with_detailed_errors(work_tmp, detailed):
    # docs/mcp.md: Agent Framework turns an isError result into "Error: Function failed.";
    # only include_detailed_errors=True passes the server's text, with its summary, on.
    cells = work_tmp / "cells"
    cells.mkdir(mode=0o711)
    client = ScriptedChatClient("print('before')\n1/0")
    client.function_invocation_configuration["include_detailed_errors"] = detailed

    async def main():
        async with _stdio_tool(_config(work_tmp), cells) as snapcell:
            agent = Agent(client, instructions="Use execute_code.", tools=snapcell)
            return await agent.run("Divide.")

    response = asyncio.run(main())
    if detailed:
        assert "uncaught exception: ZeroDivisionError: division by zero" in response.text
        assert "before" in response.text
    else:
        assert response.text.strip() == "Error: Function failed."


def test_mcp_code_errors_as_results_reach_the_model_without_detailed_errors(work_tmp):
    cells = work_tmp / "cells"
    cells.mkdir(mode=0o711)
    client = ScriptedChatClient("print('before')\n1/0")

    async def main():
        async with _stdio_tool(_config(work_tmp), cells, "--code-errors-as-results") as snapcell:
            agent = Agent(client, instructions="Use execute_code.", tools=snapcell)
            return await agent.run("Divide.")

    response = asyncio.run(main())
    assert "uncaught exception: ZeroDivisionError: division by zero" in response.text
    assert "Function failed" not in response.text
