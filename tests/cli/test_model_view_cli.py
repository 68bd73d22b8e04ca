"""What the model is told, through the CLI: each usage example that --describe
gives runs in a real cell, `tools` needs no import, a missing helper is explained in a CLI
user's words (no C function names), and a run a limit or a signal ended is told in the words
the MCP server gives the model for it."""
import os
import re
import sys

import pytest

ADD = ("add=" + sys.executable +
       " -c 'import json,sys; a=json.load(sys.stdin); print(json.dumps(a[\"a\"] + a[\"b\"]))'")
ADD_SCHEMA = ('add={"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},'
              '"required":["a","b"]}')


def test_each_usage_example_runs(snapcell):
    r = snapcell("run", "--tool", ADD, "--tool-schema", ADD_SCHEMA, "--describe")
    assert r.returncode == 0, r.stderr
    text = r.stdout.decode()
    assert "`call_tool(name, **kwargs)`" in text and "no import needed" in text
    examples = [s for s in re.findall(r"`([^`]+)`", text) if re.match(r"(call_tool\(\"|tools\.)\w", s)]
    assert examples == ['call_tool("add", a=1, b=1)', "tools.add(a=1, b=1)"], text
    for example in examples:
        r = snapcell("run", "--tool", ADD, "-", stdin=f"print({example})".encode())
        assert (r.returncode, r.stdout) == (0, b"2\n"), (example, r.stderr)


def test_tools_needs_no_import_and_import_still_works(snapcell):
    code = b"print(tools.add(a=20, b=22))\nimport tools as t\nprint(t.add(a=1, b=2))\n"
    r = snapcell("run", "--tool", ADD, "-", stdin=code)
    assert (r.returncode, r.stdout) == (0, b"42\n3\n"), r.stderr


def test_missing_default_helper_speaks_to_a_cli_user(snapcell_paths):
    import subprocess
    path, _ = snapcell_paths
    env = {k: v for k, v in os.environ.items() if k != "SNAPCELL_HELPER"}
    r = subprocess.run([path, "run", "-"], input=b"print(1)", capture_output=True, env=env,
                       timeout=30)
    if r.returncode == 0:
        import pytest
        pytest.skip("snapcell is installed here: the default helper exists")
    err = r.stderr.decode()
    assert r.returncode == 3
    assert "snapcell: cannot start the sandbox helper /" in err and "No such file" in err
    assert "set SNAPCELL_HELPER to the snapcell-cell executable" in err
    assert "snapcell_config" not in err and "()" not in err


def mcp_call(snapcell_paths, config, code):
    """The text items of the MCP server's answer to one execute_code call, over stdio, with
    the same --config file `snapcell run` read."""
    import json
    import subprocess
    path, helper = snapcell_paths
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "execute_code", "arguments": {"code": code}}},
    ]
    r = subprocess.run([path, "mcp", "--config", str(config)],
                       input="".join(json.dumps(m) + "\n" for m in messages).encode(),
                       capture_output=True, timeout=60, env={**os.environ, "SNAPCELL_HELPER": helper})
    answers = [json.loads(line) for line in r.stdout.splitlines()]
    result = next(a["result"] for a in answers if a.get("id") == 2)
    return [c["text"] for c in result["content"] if c["type"] == "text"]


# A run the code did not end itself: its limit, its signal.
ENDED_FOR_IT = [
    ({"wall_ms": 500}, "while True:\n    pass", 124),
    ({"memory_bytes": 256 << 20}, "b = []\nwhile True:\n    b.append(bytearray(16 << 20))", 1),
    ({"stdout_bytes": 1024}, "print('x' * 5000)", 125),
    ({}, "import ctypes\nctypes.string_at(0)", 139),
]


@pytest.mark.parametrize("limits, code, status", ENDED_FOR_IT,
                         ids=["timeout", "memory", "output", "signal"])
def test_a_run_ended_for_it_is_told_in_the_library_s_words(snapcell, snapcell_paths, tmp_path,
                                                           limits, code, status):
    """`snapcell run`'s last stderr lines are the summary the MCP server gives the model for
    the same run (snapcell_result_summary), each after "snapcell: ": no wording of its own."""
    import json
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"limits": limits}))
    r = snapcell("run", "--config", config, "-", stdin=code.encode())
    assert r.returncode == status, r.stderr
    summary = mcp_call(snapcell_paths, config, code)[-1]
    assert summary.startswith("Execution stopped: "), summary
    told = "".join(f"snapcell: {line}\n" for line in summary.split("\n")).encode()
    assert r.stderr.endswith(told), (r.stderr, told)


def test_a_timeout_s_line_names_the_limit_as_the_library_does(snapcell):
    r = snapcell("run", "--timeout", "0.5", "-", stdin=b"while True: pass")
    assert r.returncode == 124
    assert r.stderr.endswith(b"snapcell: Execution stopped: the run reached the wall-clock time "
                             b"limit.\n"), r.stderr


def test_an_exception_is_told_by_its_traceback_alone(snapcell, snapcell_paths, tmp_path):
    """The cell's stderr already holds the traceback the summary quotes: no line of ours."""
    config = tmp_path / "config.json"
    config.write_text("{}")
    r = snapcell("run", "--config", config, "-", stdin=b"1/0")
    assert r.returncode == 1
    assert r.stderr.endswith(b"ZeroDivisionError: division by zero\n"), r.stderr
    assert b"snapcell:" not in r.stderr
    assert mcp_call(snapcell_paths, config, "1/0")[-1].startswith(
        "Execution failed with an uncaught exception: ZeroDivisionError")
