"""`snapcell run` with awaited tool calls: top-level await and asyncio.gather over a command
tool, which the CLI runs on the run's thread, one call at a time."""
import json


def test_top_level_await_and_gather_over_a_command_tool(snapcell):
    code = (b"import asyncio\n"
            b"r = await tools.echo(x=1)\n"
            b"rs = await asyncio.gather(*(call_tool('echo', i=i) for i in range(3)))\n"
            b"print(r, rs)\n")
    r = snapcell("run", "--json", "--tool", "echo=cat", "-", stdin=code)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["stdout"] == "{'x': 1} [{'i': 0}, {'i': 1}, {'i': 2}]\n", result
    assert [c["name"] for c in result["tool_calls"]] == ["echo"] * 4


def test_plain_code_is_unchanged(snapcell):
    r = snapcell("run", "--tool", "echo=cat", "-", stdin=b"print(tools.echo(a=1))\n")
    assert (r.returncode, r.stdout) == (0, b"{'a': 1}\n"), r.stderr
