"""`snapcell run --approve NAME`: each call of the tool is asked about on the controlling
terminal (a pseudo-terminal here), the answer decides it, no terminal refuses it, and what the
code puts in the arguments cannot take over the terminal."""
import fcntl
import json
import os
import select
import subprocess
import termios
import time

import pytest

CODE = b"""
print("before")
try:
    print("got", call_tool("refund", order="A-17", amount=12.5))
except ToolError as e:
    print("refused:", e)
"""


def tool_args(tmp_path):
    marker = tmp_path / "ran"
    return ["--tool", f"refund=touch {marker}; cat", "--approve", "refund"], marker


def run_on_pty(snapcell_paths, args, code, answers, timeout=60):
    """Runs snapcell with a fresh pseudo-terminal as its controlling terminal and the code on
    stdin; each time the question appears, types the next answer. Returns (process result,
    everything shown on the terminal)."""
    path, helper = snapcell_paths
    master, slave = os.openpty()

    def take_terminal():
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([path, "run", *args, "-"], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(slave,),
                         preexec_fn=take_terminal,
                         env={**os.environ, "SNAPCELL_HELPER": helper})
    os.close(slave)
    p.stdin.write(code)
    p.stdin.close()
    shown, asked = b"", 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and p.poll() is None:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                shown += os.read(master, 65536)
            except OSError:
                break
        if shown.count(b"[y/N] ") > asked:
            answer = answers[asked]
            os.write(master, answer(shown) if callable(answer) else answer)
            asked += 1
    p.wait(timeout=max(deadline - time.monotonic(), 1))
    out, err = p.stdout.read(), p.stderr.read()
    p.stdout.close()
    p.stderr.close()
    os.close(master)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err), shown


def test_y_on_the_terminal_approves_and_the_tool_runs(snapcell_paths, tmp_path):
    args, marker = tool_args(tmp_path)
    r, shown = run_on_pty(snapcell_paths, [*args, "--json"], CODE, [b"y\n"])
    assert r.returncode == 0, r.stderr
    assert b"the code calls tool refund with {\"order\":\"A-17\",\"amount\":12.5}" in shown
    j = json.loads(r.stdout)
    assert j["status"] == "ok"
    assert j["stdout"] == "before\ngot {'order': 'A-17', 'amount': 12.5}\n"
    assert marker.exists()
    (d,) = j["decisions"]
    assert d["verdict"] == "approved" and d["decided_by"] == "terminal"
    assert d["name"] == "refund" and d["arguments"] == {"order": "A-17", "amount": 12.5}
    assert d["call_index"] == 0 and abs(d["decided_at_ms"] / 1000 - time.time()) < 120
    assert [c["name"] for c in j["tool_calls"]] == ["refund"]


@pytest.mark.parametrize("answer", [b"n\n", b"yes please\n", b"\n", b"Y es\n"])
def test_anything_else_rejects_and_the_tool_never_runs(snapcell_paths, tmp_path, answer):
    args, marker = tool_args(tmp_path)
    r, _ = run_on_pty(snapcell_paths, [*args, "--json"], CODE, [answer])
    j = json.loads(r.stdout)
    assert j["status"] == "ok", r.stderr
    assert "refused: the call to tool 'refund' was rejected: declined at the terminal" in j["stdout"]
    assert not marker.exists()
    assert j["decisions"][0]["verdict"] == "rejected"


def test_each_call_is_asked_about(snapcell_paths, tmp_path):
    args, marker = tool_args(tmp_path)
    code = b"for o in 'AB':\n    try: print(call_tool('refund', order=o, amount=1))\n" \
           b"    except ToolError: print('no', o)\n"
    r, shown = run_on_pty(snapcell_paths, args, code, [b"n\n", b"y\n"])
    assert r.returncode == 0, r.stderr
    assert shown.count(b"allow this call?") == 2
    assert r.stdout == b"no A\n{'order': 'B', 'amount': 1}\n"


def test_without_a_terminal_the_call_is_refused_with_the_reason(snapcell_paths, tmp_path):
    args, marker = tool_args(tmp_path)
    path, helper = snapcell_paths
    # A new session: no controlling terminal, whatever pytest itself runs under.
    r = subprocess.run([path, "run", *args, "--json", "-"], input=CODE, capture_output=True,
                       timeout=60, start_new_session=True,
                       env={**os.environ, "SNAPCELL_HELPER": helper})
    j = json.loads(r.stdout)
    assert j["status"] == "ok"
    assert "approval was not possible: no terminal to ask on (/dev/tty: " in j["stdout"]
    assert b"a call of refund was refused: approval was not possible" in r.stderr
    assert not marker.exists()
    assert j["decisions"][0]["verdict"] == "rejected"


def test_the_code_cannot_write_to_the_terminal_through_the_arguments(snapcell_paths, tmp_path):
    args, marker = tool_args(tmp_path)
    code = b"call_tool('refund', order='\\x1b[2J\\x1b]0;pwned\\x07\\u202e\\x7f\\x9b1m', amount=1)"
    r, shown = run_on_pty(snapcell_paths, args, code, [b"n\n"])
    question = shown[shown.index(b"the code calls"):]
    assert b"\x1b" not in question and b"\x07" not in question and b"\x7f" not in question
    assert "\u202e".encode() not in question and "\x9b".encode() not in question
    assert b"\\u001b[2j" in question.lower() and b"\\u202e" in question.lower()
    assert not marker.exists()


def test_a_nul_in_the_arguments_does_not_hide_them(snapcell_paths, tmp_path):
    # The host takes a string with \u0000 in it; the question showed "(arguments not shown:
    # out of memory)" for it, so the person approved what they were not shown.
    args, marker = tool_args(tmp_path)
    code = b"call_tool('refund', order='A-17\\x00', amount=99999)"
    r, shown = run_on_pty(snapcell_paths, [*args, "--json"], code, [b"n\n"])
    question = shown[shown.index(b"the code calls"):]
    assert b"not shown" not in question
    assert b'"order":"A-17\\u0000"' in question and b'"amount":99999' in question
    assert not marker.exists()
    # The audit keeps them too.
    decision = json.loads(r.stdout)["decisions"][0]
    assert decision["arguments"] == {"order": "A-17\x00", "amount": 99999}


def test_an_answer_after_the_approval_timeout_finds_the_run_expired(snapcell_paths, tmp_path):
    args, marker = tool_args(tmp_path)

    def late(shown_so_far):
        time.sleep(1.5)
        return b"y\n"

    r, _ = run_on_pty(snapcell_paths, [*args, "--approval-timeout", "0.5"], CODE, [late])
    assert r.returncode == 3
    assert r.stdout == b"before\n"
    assert (b"snapcell: Execution expired: no decision on its call to tool 'refund' came within "
            b"the approval timeout") in r.stderr, r.stderr
    assert not marker.exists()


def test_approve_needs_the_tool_before_it(snapcell):
    r = snapcell("run", "--approve", "refund", "--tool", "refund=cat", "-", stdin=b"")
    assert r.returncode == 2
    assert b"--approve refund: no --tool refund=COMMAND before it" in r.stderr
