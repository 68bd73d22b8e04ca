"""`snapcell run` with awaited tool calls: top-level await and asyncio.gather over command
tools, which run at once (each on a thread of its own) and are killed when the run ends."""
import json
import subprocess
import time


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


# Each command notes itself in $GATE_DIR and waits (20 s at most) until all four are there:
# commands run one at a time never see four and fail.
GATE = ('touch "$GATE_DIR/$$"; n=0; '
        'while [ "$(ls "$GATE_DIR" | wc -l)" -lt 4 ] && [ $n -lt 1000 ]; do '
        'sleep 0.02; n=$((n+1)); done; '
        '[ "$(ls "$GATE_DIR" | wc -l)" -ge 4 ] || { echo "not run together" >&2; exit 1; }; cat')


def test_gathered_command_tools_run_at_once(snapcell, tmp_path):
    code = (b"import asyncio\n"
            b"rs = await asyncio.gather(*(tools.slow(i=i) for i in range(4)))\n"
            b"print([r['i'] for r in rs])\n")
    r = snapcell("run", "--tool-env", "GATE_DIR", "--tool", "slow=" + GATE, "-", stdin=code,
                 env={"GATE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"[0, 1, 2, 3]\n", r.stdout


def test_a_timeout_kills_every_gathered_command(snapcell):
    start = time.monotonic()
    r = snapcell("run", "--json", "--timeout", "1", "--tool", "slow=sleep 30.0419; echo late",
                 "-", stdin=b"import asyncio\n"
                            b"await asyncio.gather(*(tools.slow(i=i) for i in range(3)))\n")
    elapsed = time.monotonic() - start
    result = json.loads(r.stdout)
    assert result["status"] == "timeout", result
    # Long before the commands' 30 s (start-up included: a slow machine takes seconds).
    assert elapsed < 15, f"the run took {elapsed:.2f} s with --timeout 1"
    assert len(result["tool_calls"]) == 3
    left = subprocess.run(["pgrep", "-f", "sleep 30.0419"], capture_output=True)
    assert left.stdout == b"", "a tool command's child outlived the run"
