"""Ctrl-C (SIGINT) or SIGTERM while `snapcell run` waits in a plain command tool call: the run
is cancelled, the command's process group (which the terminal's SIGINT never reaches: it has
a group of its own) is killed and reaped, the output so far is printed, and snapcell then
dies of the signal as it always did."""
import os
import signal
import subprocess
import time

import pytest

# Marks its arrival with its shell's pid, then waits (60 s at most) for a gate that never opens.
GATE = 'echo $$ > "$GATE_DIR/in"; n=0; while [ $n -lt 3000 ]; do sleep 0.02; n=$((n+1)); done; echo 1'


def group_alive(pgid):
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[2]) == pgid:
                        return True
            except (OSError, ValueError, IndexError):
                pass
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_a_command_tool_call_cancels_the_run_and_kills_the_command(
        snapcell_paths, tmp_path, sig):
    path, helper = snapcell_paths
    code = tmp_path / "code.py"
    code.write_text("print('started', flush=True)\ncall_tool('gate')\nprint('done')\n")
    env = {**os.environ, "SNAPCELL_HELPER": helper, "GATE_DIR": str(tmp_path)}
    proc = subprocess.Popen([path, "run", "--tool-env", "GATE_DIR", "--tool", "gate=" + GATE,
                             str(code)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        marker = tmp_path / "in"
        end = time.monotonic() + 30
        while not (marker.exists() and marker.read_text().strip()):
            assert time.monotonic() < end and proc.poll() is None, proc.stderr.read()
            time.sleep(0.02)
        pid = int(marker.read_text())
        start = time.monotonic()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        assert time.monotonic() - start < 20  # long before the gate's 60 s
        assert proc.returncode == -sig, err
        assert out == b"started\n", err
        assert b"cancel" in err, err
        # The command and its children are gone (reaped: not even zombies are left).
        end = time.monotonic() + 5
        while group_alive(pid) and time.monotonic() < end:
            time.sleep(0.05)
        assert not group_alive(pid), "the tool command lives on"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
