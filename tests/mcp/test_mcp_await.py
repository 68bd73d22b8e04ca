"""Awaited tool calls through snapcell mcp: top-level await and asyncio.gather in execute_code,
with a command tool the server runs on the run's thread, and what the description says."""
import json
import sys

import pytest

from test_mcp_protocol import Stdio

ADD = "import json, sys\nargs = json.load(sys.stdin)\nprint(json.dumps(args['a'] + args['b']))\n"


@pytest.fixture
def server(snapcell_bin, tmp_path):
    script = tmp_path / "add.py"
    script.write_text(ADD)
    config = tmp_path / "snapcell-mcp.json"
    config.write_text(json.dumps({
        "tools": [{"name": "add", "argv": [sys.executable, str(script)],
                   "description": "Adds two integers.",
                   "schema": {"type": "object",
                              "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                              "required": ["a", "b"]}}],
    }))
    s = Stdio(snapcell_bin, "--config", str(config))
    s.initialize()
    yield s
    assert s.close() == 0


def call(s, code):
    return s.ask({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                  "params": {"name": "execute_code", "arguments": {"code": code}}})["result"]


def test_top_level_await_and_gather_work(server):
    result = call(server, "import asyncio\n"
                          "r = await tools.add(a=1, b=1)\n"
                          "print(r, await asyncio.gather(*(tools.add(a=i, b=1) for i in range(3))))\n")
    texts = [c["text"] for c in result["content"] if c["type"] == "text"]
    assert (result["isError"], texts) == (False, ["2 [1, 2, 3]\n"]), result


def test_the_description_says_calls_in_a_loop_are_awaitables(server):
    listed = server.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]["tools"]
    assert "return awaitables" in listed[0]["description"]
    assert "`asyncio.gather(...)`" in listed[0]["description"]
