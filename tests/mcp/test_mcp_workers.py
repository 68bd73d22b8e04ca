"""Who runs the calls: over stdio the thread that read a call runs it and hands reading to a
waiting thread (threads are reused, not one per call); over HTTP SSE a pool of long-lived
workers. Still as many runs at once as the cap allows, and messages are read in order
whichever thread reads them."""
import os

from gate import Gate
from test_mcp_protocol import Stdio


def call(n, code):
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": code}}}


def threads(pid):
    return set(os.listdir(f"/proc/{pid}/task"))


def test_sequential_calls_reuse_threads(snapcell_bin):
    s = Stdio(snapcell_bin)
    s.initialize()
    before = threads(s.proc.pid)
    persistent = None
    for n in range(2, 12):
        assert s.ask(call(n, "print(1)"))["result"]["content"][0]["text"] == "1\n"
        new = threads(s.proc.pid) - before
        persistent = new if persistent is None else persistent & new
    # The same thread took turns with the first at reading and running all ten calls, and is
    # still there. A thread per call leaves no thread present after every answer (each
    # call's is new, and gone soon after its answer); the library's own short-lived threads
    # (the egress gate's, per cell) come and go too.
    assert len(persistent) >= 1
    assert len(threads(s.proc.pid) - before) <= 4  # a few that take turns, not one per call
    assert s.close() == 0


def test_concurrent_calls_each_get_a_worker(snapcell_bin, tmp_path):
    gate = Gate(tmp_path)
    s = Stdio(snapcell_bin, "--config", str(gate.config), "--max-runs", "3", "--max-queued", "0")
    s.initialize()
    # All three run at once: each reaches the gate while the others wait in it, which runs
    # one after the other never would (the first would wait alone until the test gave up).
    through = "print(call_tool('gate'))"
    for n in (2, 3, 4):
        s.send(call(n, through))
    gate.wait_arrived(3)
    gate.open()
    replies = [s.recv() for _ in range(3)]
    assert sorted(r["id"] for r in replies) == [2, 3, 4]
    assert all(r["result"]["content"][0]["text"] == "through\n" for r in replies), replies
    # Three workers are idle now; the cap still holds: a fourth call is refused while three
    # run (all three in the gate), and the three are answered.
    gate.close()
    for n in (5, 6, 7):
        s.send(call(n, through))
    gate.wait_arrived(3)
    busy = s.ask(call(8, "print(1)"))
    assert busy["id"] == 8 and busy["result"]["_meta"]["snapcell/run"]["status"] == "busy"
    gate.open()
    assert sorted(s.recv()["id"] for _ in range(3)) == [5, 6, 7]
    assert s.close() == 0


def test_a_call_right_after_an_answer_finds_room(snapcell_bin):
    # The cap counts runs: once a run is over its answer may still be on its way out, but a
    # call the client sends the moment it arrives is not refused as busy.
    s = Stdio(snapcell_bin, "--max-runs", "1")
    s.initialize()
    for n in range(2, 32):
        reply = s.ask(call(n, "print(1)"))
        assert reply["result"]["_meta"]["snapcell/run"]["status"] == "ok", reply
    assert s.close() == 0


def test_pipelined_messages_are_served_in_order(snapcell_bin):
    # Calls, pings and a cancellation in one write: the bytes after a call are read by the
    # thread that took over reading, and the cancellation finds the call it names.
    import json
    s = Stdio(snapcell_bin)
    s.initialize()
    sleeper = "import time; print('start', flush=True); time.sleep(30)"
    lines = [call(2, "print(2)"), {"jsonrpc": "2.0", "id": 3, "method": "ping"},
             call(4, sleeper),
             {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}},
             call(5, "print(5)"), {"jsonrpc": "2.0", "id": 6, "method": "ping"}]
    s.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
    s.proc.stdin.flush()
    replies = {r["id"]: r for r in (s.recv() for _ in range(4))}
    assert replies[2]["result"]["content"][0]["text"] == "2\n"
    assert replies[5]["result"]["content"][0]["text"] == "5\n"
    assert replies[3]["result"] == {} and replies[6]["result"] == {}
    # The cancelled call gets no answer over stdio; the server is still serving.
    assert s.ask({"jsonrpc": "2.0", "id": 7, "method": "ping"}) == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert s.close() == 0
