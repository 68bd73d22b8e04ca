"""The MCP config's "reuse" and `snapcell mcp --reuse/--no-reuse`: with reuse, a later run finds
the cell an earlier one had (reset in place), and still nothing an earlier run left."""
import json
import subprocess

import pytest
from test_mcp_protocol import Stdio

# Which cell ran: its /tmp and /output, tmpfs mounts made for it (tests/c/integration/
# test_reset.c), and whether a module attribute an earlier run set is still there.
IDENTITY = ("import os, sys\n"
            "print([(s.st_dev, s.st_ino, s.st_ctime_ns) for s in "
            "(os.stat('/tmp'), os.stat('/output'))], getattr(sys, 'left_behind', None))\n"
            "sys.left_behind = 'secret'\n")


def identities(snapcell_bin, tmp_path, config, *args, runs=8):
    path = tmp_path / "snapcell.json"
    path.write_text(json.dumps(config))
    exe, env = snapcell_bin
    s = Stdio((exe, env), "--config", str(path), *args)
    s.initialize()
    out = []
    for i in range(runs):
        result = s.ask({"jsonrpc": "2.0", "id": 10 + i, "method": "tools/call",
                        "params": {"name": "execute_code", "arguments": {"code": IDENTITY}}})
        text = result["result"]["content"][0]["text"]
        assert text.endswith(" None\n"), text  # nothing of an earlier run
        out.append(text)
    assert s.close() == 0
    return out


def reused(ids):
    """Whether some run had a cell an earlier run had (a reset cell goes back among the
    parked ones, which take turns)."""
    return len(set(ids)) < len(ids)


def doctor_report(snapcell_bin):
    exe, env = snapcell_bin
    r = subprocess.run([exe, "doctor", "--json", "--reuse"], capture_output=True, env=env,
                       timeout=120)
    return json.loads(r.stdout)


def test_reuse_true_in_the_config_resets_cells_in_place(snapcell_bin, tmp_path):
    report = doctor_report(snapcell_bin)
    if not report["reuse"].get("in_use"):
        pytest.skip(f"reuse unavailable here: {report['reuse']['mode']}")
    assert reused(identities(snapcell_bin, tmp_path, {"reuse": True}))


def test_reuse_is_on_by_default(snapcell_bin, tmp_path):
    report = doctor_report(snapcell_bin)
    if not report["reuse"].get("in_use"):
        pytest.skip(f"reuse unavailable here: {report['reuse']['mode']}")
    assert reused(identities(snapcell_bin, tmp_path, {}))


def test_reuse_false_and_no_reuse_fork_a_cell_for_each_run(snapcell_bin, tmp_path):
    assert not reused(identities(snapcell_bin, tmp_path, {"reuse": False}))
    # The option wins over the file.
    assert not reused(identities(snapcell_bin, tmp_path, {"reuse": True}, "--no-reuse"))


def test_the_option_turns_reuse_on_over_the_file(snapcell_bin, tmp_path):
    report = doctor_report(snapcell_bin)
    if not report["reuse"].get("in_use"):
        pytest.skip(f"reuse unavailable here: {report['reuse']['mode']}")
    assert reused(identities(snapcell_bin, tmp_path, {"reuse": False}, "--reuse"))


def test_reuse_must_be_a_boolean(snapcell_bin, tmp_path):
    path = tmp_path / "snapcell.json"
    path.write_text(json.dumps({"reuse": "yes"}))
    exe, env = snapcell_bin
    r = subprocess.run([exe, "mcp", "--config", str(path)], capture_output=True, env=env,
                       stdin=subprocess.DEVNULL, timeout=30)
    assert r.returncode == 2 and b"reuse: must be true or false" in r.stderr, r.stderr
