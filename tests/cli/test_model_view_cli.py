"""What the model is told, through the CLI: each usage example that --describe
gives runs in a real cell, `tools` needs no import, and a missing helper is explained in a CLI
user's words (no C function names)."""
import os
import re
import sys

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
