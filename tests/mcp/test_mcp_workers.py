"""Who runs the calls: over stdio the thread that read a call runs it and hands reading to a
waiting thread (threads are reused, not one per call); over HTTP SSE a pool of long-lived
workers. Still as many runs at once as the cap allows, and messages are read in order
whichever thread reads them."""
import os
import time

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


def test_concurrent_calls_each_get_a_worker(snapcell_bin):
    s = Stdio(snapcell_bin, "--max-runs", "3", "--max-queued", "0")
    s.initialize()
    # Each run says when it started and ended (the wall clock is the host's in every cell):
    # all three run at once, every one starting before any ends, which one after the other
    # would not.
    timed = "import time; t0 = time.time_ns(); time.sleep(2); print(t0, time.time_ns())"
    for n in (2, 3, 4):
        s.send(call(n, timed))
    replies = [s.recv() for _ in range(3)]
    assert sorted(r["id"] for r in replies) == [2, 3, 4]
    windows = [tuple(map(int, r["result"]["content"][0]["text"].split())) for r in replies]
    assert max(start for start, _ in windows) < min(end for _, end in windows), windows
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
