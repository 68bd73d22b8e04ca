"""What the model sees through snapcell mcp: a failed run stays isError and its
content ends with the library's summary of the cause; `tools` needs no import; each usage
example of the description runs in a real cell."""
import json
import re
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
        "limits": {"wall_ms": 1500, "memory_bytes": 134217728},
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


def call(s, code, n=[10]):
    n[0] += 1
    return s.ask({"jsonrpc": "2.0", "id": n[0], "method": "tools/call",
                  "params": {"name": "execute_code", "arguments": {"code": code}}})["result"]


def texts(result):
    return [c["text"] for c in result["content"] if c["type"] == "text"]


@pytest.mark.parametrize("code, cause", [
    ("print('before')\n1/0", "Execution failed with an uncaught exception: ZeroDivisionError: "
                             "division by zero\nThe end of its traceback:\n"),
    ("import sys\nsys.exit(3)", "Execution failed: the code exited with status 3."),
    ("while True:\n    pass", "Execution stopped: the run reached the wall-clock time limit."),
    ("b = []\nwhile True:\n    b.append(bytearray(16 << 20))",
     "Execution stopped: the run reached the memory limit."),
])
def test_failed_run_is_an_error_whose_content_ends_with_the_cause(server, code, cause):
    result = call(server, code)
    assert result["isError"] is True
    assert texts(result)[-1].startswith(cause), texts(result)
    if "before" in code:
        assert texts(result)[0] == "before\n" and texts(result)[1].startswith("stderr:\n")


def test_ok_run_has_no_summary(server):
    result = call(server, "print(tools.add(a=20, b=22))")
    assert result["isError"] is False and texts(result) == ["42\n"]


def test_each_usage_example_runs(server):
    listed = server.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["result"]["tools"]
    description = listed[0]["description"]
    assert "`call_tool(name, **kwargs)`" in description
    examples = [s for s in re.findall(r"`([^`]+)`", description)
                if re.match(r"(call_tool\(\"|tools\.)\w", s)]
    assert examples == ['call_tool("add", a=1, b=1)', "tools.add(a=1, b=1)"], description
    for example in examples:
        result = call(server, f"print({example})")
        assert (result["isError"], texts(result)) == (False, ["2\n"]), example
    result = call(server, "import tools\nprint(tools.add(a=20, b=22))")
    assert texts(result) == ["42\n"]


@pytest.mark.parametrize("how", ["flag", "config"])
def test_code_errors_as_results_is_opt_in_and_keeps_infrastructure_errors(snapcell_bin, tmp_path, how):
    config = tmp_path / "snapcell-mcp.json"
    config.write_text(json.dumps({"limits": {"wall_ms": 1500},
                                  **({"code_errors_as_results": True} if how == "config" else {})}))
    args = ["--config", str(config)] + (["--code-errors-as-results"] if how == "flag" else [])
    s = Stdio(snapcell_bin, *args)
    s.initialize()
    try:
        for code, cause in [("1/0", "ZeroDivisionError"), ("import sys; sys.exit(3)", "status 3"),
                            ("while True: pass", "wall-clock time limit")]:
            result = call(s, code)
            assert result["isError"] is False, result
            assert cause in texts(result)[-1]
            assert result["_meta"]["snapcell/run"]["status"] != "ok"
        assert call(s, "print(1)")["isError"] is False
    finally:
        assert s.close() == 0


def test_code_errors_stay_errors_by_default(server):
    assert call(server, "1/0")["isError"] is True


def test_code_errors_as_results_must_be_a_boolean(snapcell_bin, tmp_path):
    import subprocess
    config = tmp_path / "snapcell-mcp.json"
    config.write_text(json.dumps({"code_errors_as_results": "yes"}))
    path, env = snapcell_bin
    r = subprocess.run([path, "mcp", "--config", str(config)], input=b"", capture_output=True,
                       env=env, timeout=30)
    assert r.returncode == 2 and b"code_errors_as_results: must be true or false" in r.stderr
