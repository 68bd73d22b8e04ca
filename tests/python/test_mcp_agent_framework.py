"""An Agent Framework 1.23 agent using snapcell through MCP (`MCPStdioTool` starting
`snapcell mcp`, and `MCPStreamableHTTPTool` talking to `snapcell mcp --http`), with a scripted
chat client, against the build tree's CLI: the wheel installs no `snapcell` command, so these
tests skip when build/cli/snapcell is absent (scripts/build)."""

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


def _stdio_tool(config, cells):
    return MCPStdioTool(name="snapcell", command=str(CLI), args=["mcp", "--config", str(config)],
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


def _http_server(config, cells, log):
    """snapcell mcp --http on a free loopback port (port 0: the server picks one and logs
    it); returns the process and its URL."""
    proc = subprocess.Popen([str(CLI), "mcp", "--http", "127.0.0.1:0", "--config", str(config)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                            env={**os.environ, "SNAPCELL_HELPER": str(HELPER), "TMPDIR": str(cells)})
    end = time.monotonic() + 30
    while time.monotonic() < end and proc.poll() is None:
        for line in pathlib.Path(log.name).read_text().splitlines():
            if "listening on http://" in line:
                return proc, line[line.index("http://"):].split()[0]
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    pytest.fail("snapcell mcp --http did not start: " + pathlib.Path(log.name).read_text())


def test_mcp_streamable_http_agent_gets_42_from_call_tool(work_tmp):
    cells = work_tmp / "cells"
    cells.mkdir(mode=0o711)
    client = ScriptedChatClient('total = call_tool("add", a=20, b=22)\nprint(total)')
    with open(work_tmp / "server.log", "w+") as log:
        proc, url = _http_server(_config(work_tmp), cells, log)
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
