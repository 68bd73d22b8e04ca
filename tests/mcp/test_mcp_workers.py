"""The server's run workers: long-lived threads that take one call after another (a pool),
not a thread per call, and still as many runs at once as the cap allows."""
import os
import time

from test_mcp_protocol import Stdio


def call(n, code):
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": code}}}


def threads(pid):
    return set(os.listdir(f"/proc/{pid}/task"))


def test_sequential_calls_reuse_one_worker(snapcell_bin):
    s = Stdio(snapcell_bin)
    s.initialize()
    before = threads(s.proc.pid)
    persistent = None
    for n in range(2, 12):
        assert s.ask(call(n, "print(1)"))["result"]["content"][0]["text"] == "1\n"
        new = threads(s.proc.pid) - before
        persistent = new if persistent is None else persistent & new
    # One worker ran all ten calls and is still there. A thread per call leaves no thread
    # present after every answer (each call's is new, and gone soon after its answer); the
    # library's own short-lived threads (the egress gate's, per cell) come and go too.
    assert len(persistent) == 1
    assert s.close() == 0


def test_concurrent_calls_each_get_a_worker(snapcell_bin):
    s = Stdio(snapcell_bin, "--max-runs", "3")
    s.initialize()
    for n in (2, 3, 4):
        s.send(call(n, "import time; time.sleep(2); print('done')"))
    replies = [s.recv() for _ in range(3)]
    assert sorted(r["id"] for r in replies) == [2, 3, 4]
    assert all(r["result"]["content"][0]["text"] == "done\n" for r in replies)
    # Three workers are idle now; the cap still holds: a fourth call is refused while three
    # run, and the three are answered.
    s.send(call(5, "import time; time.sleep(2)"))
    s.send(call(6, "import time; time.sleep(2)"))
    s.send(call(7, "import time; time.sleep(2)"))
    time.sleep(0.5)
    busy = s.ask(call(8, "print(1)"))
    assert busy["id"] == 8 and busy["result"]["_meta"]["snapcell/run"]["status"] == "busy"
    assert sorted(s.recv()["id"] for _ in range(3)) == [5, 6, 7]
    assert s.close() == 0
