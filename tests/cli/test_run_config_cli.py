"""`snapcell run --config FILE`: the file `snapcell mcp --config` reads, applied to one run;
the server's own keys are refused by name rather than ignored."""
import json
import sys


def write(tmp_path, config):
    path = tmp_path / "snapcell.json"
    path.write_text(json.dumps(config))
    return path


def test_config_with_tools_and_limits_runs(snapcell, tmp_path):
    tool = [sys.executable, "-c", "import json,sys; a=json.load(sys.stdin); print(json.dumps(a['x'] * 2))"]
    config = write(tmp_path, {
        "limits": {"wall_ms": 2500, "stdout_bytes": 4096},
        "env": {"GREETING": "hello"},
        "tools": [{"name": "double", "argv": tool, "description": "Doubles x.",
                   "schema": {"type": "object", "properties": {"x": {"type": "integer"}},
                              "required": ["x"]}}],
    })
    code = b"import os\nprint(os.environ['GREETING'], call_tool('double', x=21))\n"
    r = snapcell("run", "--config", config, "--json", "-", stdin=code)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["stdout"] == "hello 42\n"
    assert [(c["name"], c["ok"]) for c in out["tool_calls"]] == [("double", True)]
    # the file's wall_ms (2.5 s: a busy machine can take a second to start the tool's Python)
    # ends a run that would take longer
    r = snapcell("run", "--config", config, "-", stdin=b"import time; time.sleep(20)")
    assert r.returncode == 124, r.stderr
    # later options win over the file
    r = snapcell("run", "--config", config, "--timeout", "10", "-",
                 stdin=b"import time; time.sleep(3); print('slept')")
    assert (r.returncode, r.stdout) == (0, b"slept\n"), r.stderr


def test_server_only_keys_are_refused_by_name(snapcell, tmp_path):
    config = write(tmp_path, {"limits": {"wall_ms": 1000}, "replica": "r1",
                              "sessions": {"enabled": True}})
    r = snapcell("run", "--config", config, "-", stdin=b"print('ran')")
    assert r.returncode == 2 and r.stdout == b""
    err = r.stderr.decode()
    assert f"snapcell run: --config {config}: replica, sessions:" in err, err
    assert "`snapcell mcp` only" in err
    config = write(tmp_path, {"mcp_servers": {"s": {"command": ["/bin/false"]}}})
    r = snapcell("run", "--config", config, "-", stdin=b"print('ran')")
    assert r.returncode == 2 and "mcp_servers: this key is for `snapcell mcp` only" in r.stderr.decode()


def test_bad_keys_name_the_command_and_the_key(snapcell, tmp_path):
    r = snapcell("run", "--config", write(tmp_path, {"limits": {"wall": 5}}), "-", stdin=b"")
    assert r.returncode == 2
    assert b"snapcell run: --config" in r.stderr and b"limits.wall: unknown key" in r.stderr
    r = snapcell("run", "--config", tmp_path / "missing.json", "-", stdin=b"")
    assert r.returncode == 2 and b"snapcell run: --config" in r.stderr
