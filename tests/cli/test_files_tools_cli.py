"""`snapcell run` with host tools, a workspace, mounts and /output, as the README's main job."""
import json
import pathlib
import subprocess
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_readme_main_job(snapcell, tmp_path):
    out = tmp_path / "out"
    r = snapcell("run", "--workspace", ROOT / "examples" / "data",
                 "--tool", f"fx_rate=python3 {ROOT / 'examples' / 'tools' / 'fx_rate.py'}",
                 "--output", out, ROOT / "examples" / "report.py")
    assert r.returncode == 0, r.stderr
    assert b"4 regions, 3258.26 USD in total" in r.stdout
    assert (out / "summary.csv").read_text().splitlines()[1:] == [
        "east,571.82", "north,1371.64", "south,980.00", "west,334.80"]
    assert b"artifact /output/summary.csv (text/csv" in r.stderr


def test_command_tool_errors_raise_tool_error(snapcell):
    r = snapcell("run", "--tool", "bad=echo 'no such customer' >&2; exit 4", "-",
                 stdin=b"try:\n    call_tool('bad', id=1)\nexcept ToolError as e:\n    print(e)\n")
    assert (r.returncode, r.stdout) == (0, b"no such customer\n")


def test_a_command_tool_is_killed_at_the_runs_deadline(snapcell):
    # The marker names the command's own child, which the kill must take too.
    start = time.monotonic()
    r = snapcell("run", "--json", "--timeout", "1", "--tool", "slow=sleep 30.0317; echo late",
                 "-", stdin=b"print(call_tool('slow'))")
    elapsed = time.monotonic() - start
    result = json.loads(r.stdout)
    assert result["status"] == "timeout", result
    assert result["stdout"] == ""
    # Long before the command's 30 s (start-up included: a slow machine takes seconds).
    assert elapsed < 15, f"the run took {elapsed:.2f} s with --timeout 1"
    left = subprocess.run(["pgrep", "-f", "sleep 30.0317"], capture_output=True)
    assert left.stdout == b"", "the tool command's child outlived the run"


def test_tool_gets_keyword_arguments_as_json(snapcell):
    r = snapcell("run", "--json", "--tool", "echo=cat", "-",
                 stdin=b"print(call_tool('echo', a=1, s='\xc3\xbc'))")
    result = json.loads(r.stdout)
    assert result["stdout"] == "{'a': 1, 's': '\u00fc'}\n"
    assert result["tool_calls"][0]["name"] == "echo"
    assert result["tool_calls"][0]["ok"] is True


def test_bad_tool_names_are_usage_errors(snapcell):
    r = snapcell("run", "--tool", "not an identifier=cat", "-", stdin=b"")
    assert r.returncode == 2 and b"[A-Za-z0-9_.-]" in r.stderr


def test_mcp_style_tool_names_reach_the_tools_namespace(snapcell):
    code = (b"import tools\n"
            b"print(tools.fx.rate_v2(a=1), call_tool('fx.rate-v2', a=2))\n"
            b"print(tools.fx._1st(b=3), tools.fx.class_(c=4))\n")
    r = snapcell("run", "--tool", "fx.rate-v2=cat", "--tool", "fx.1st=cat", "--tool",
                 "fx.class=cat", "-", stdin=code)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"{'a': 1} {'a': 2}\n{'b': 3} {'c': 4}\n"


def test_tool_names_that_clash_in_the_namespace_are_refused(snapcell):
    r = snapcell("run", "--tool", "fx.rate-v2=cat", "--tool", "fx.rate_v2=cat", "-", stdin=b"")
    assert r.returncode == 2
    assert b"tools.fx.rate_v2, which clashes with tool fx.rate-v2" in r.stderr


def test_inputs_and_mount_order(snapcell, tmp_path):
    ws = tmp_path / "ws"
    (ws / "data").mkdir(parents=True)
    (ws / "data" / "a.txt").write_text("workspace")
    other = tmp_path / "other.txt"
    other.write_text("mount")
    (ws / "link").symlink_to("/etc/hostname")
    for p in (tmp_path, ws, ws / "data"):
        p.chmod(0o755)
    r = snapcell("run", "--workspace", ws, "--input", f"{other}:data/a.txt", "-",
                 stdin=b"import os\nprint(open('/input/data/a.txt').read(), sorted(os.listdir('/input')))")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"mount ['data']\n"


def test_bad_input_flags(snapcell, tmp_path):
    r = snapcell("run", "--input", f"{tmp_path}:../escape", "-", stdin=b"")
    assert r.returncode == 2 and b"'..'" in r.stderr
    r = snapcell("run", "--workspace", tmp_path / "missing", "-", stdin=b"")
    assert r.returncode == 2 and b"No such file" in r.stderr


def test_output_json_and_hostile_names(snapcell, tmp_path):
    code = (b"import os\nopen('/output/a.txt', 'w').write('hi')\n"
            b"open('/output/evil\\n\\x1b[2J.txt', 'w').write('x')\n"
            b"os.symlink('/etc/passwd', '/output/leak')\n")
    r = snapcell("run", "--json", "--output", tmp_path / "out", "-", stdin=code)
    result = json.loads(r.stdout)
    assert [a["path"] for a in result["artifacts"]] == ["/output/a.txt",
                                                        "/output/evil\n\x1b[2J.txt"]
    assert result["artifacts"][0]["base64"] == "aGk="
    assert result["skipped"] == [{"path": "leak", "reason": "symbolic link"}]
    assert (tmp_path / "out" / "a.txt").read_text() == "hi"
    assert not (tmp_path / "out" / "leak").exists()
    plain = snapcell("run", "-", stdin=code)
    assert b"\x1b" not in plain.stderr and b"evil\\x0a\\x1b[2J.txt" in plain.stderr


def test_tool_command_that_ignores_its_input_does_not_kill_the_cli(snapcell):
    code = b"print(call_tool('t', s='a' * 300000))"
    r = snapcell("run", "--tool", "t=echo 1", "-", stdin=code)
    assert (r.returncode, r.stdout) == (0, b"1\n"), r.stderr
