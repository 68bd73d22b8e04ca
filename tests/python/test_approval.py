"""Approval of each call: Sandbox(approval_required=...), paused Results, resume and its rules,
sessions, async callers, expiry, the audit."""

import asyncio
import dataclasses
import threading
import time

import pytest

import snapcell

refunds = []


def refund(order: str, amount: float) -> dict:
    """Refunds an order."""
    refunds.append((order, amount))
    return {"refunded": order, "amount": amount}


def lookup(key: str) -> str:
    """Looks a key up."""
    return key.upper()


CODE = """
print("before")
print(call_tool("lookup", key="x"))
try:
    print("got", call_tool("refund", order="A-17", amount=12.5))
except ToolError as e:
    print("refused:", e)
"""


@pytest.fixture(autouse=True)
def no_refunds():
    refunds.clear()


def sandbox(**kw):
    return snapcell.Sandbox(tools=[refund, lookup], approval_required={"refund"}, **kw)


def test_a_call_pauses_the_run_and_approve_runs_the_tool_once():
    with sandbox() as sb:
        r = sb.run(CODE)
        assert r.status == "paused" and not r.ok
        assert r.pending.name == "refund"
        assert r.pending.arguments == {"order": "A-17", "amount": 12.5}
        assert isinstance(r.pending.id, int)
        assert r.stdout == "before\nX\n"
        assert [c.name for c in r.tool_calls] == ["lookup"]
        assert refunds == []
        final = sb.resume(r, approve=True, decided_by="alice")
        assert final.ok and final.pending is None
        assert final.stdout == "before\nX\ngot {'refunded': 'A-17', 'amount': 12.5}\n"
        assert refunds == [("A-17", 12.5)]
        assert [c.name for c in final.tool_calls] == ["lookup", "refund"]
        (d,) = final.decisions
        assert (d.verdict, d.decided_by, d.name, d.arguments, d.call_index) == (
            "approved", "alice", "refund", {"order": "A-17", "amount": 12.5}, 1)
        assert abs(d.decided_at - time.time()) < 60 and d.id == r.pending.id
        # Already resumed: refused, nothing runs again.
        with pytest.raises(ValueError, match="resumed already"):
            sb.resume(r, approve=True)
        assert refunds == [("A-17", 12.5)]


def test_reject_gives_the_code_tool_error_with_the_reason():
    with sandbox() as sb:
        final = sb.resume(sb.run(CODE), approve=False, reason="over the limit")
    assert final.ok and refunds == []
    assert "refused: the call to tool 'refund' was rejected: over the limit" in final.stdout
    assert final.decisions[0].verdict == "rejected"
    assert final.decisions[0].reason == "over the limit"


def test_a_value_reaches_the_code_and_the_tool_never_runs():
    with sandbox() as sb:
        final = sb.resume(sb.run(CODE), value={"refunded": "by hand", "n": [1, 2.5, None]})
    assert final.ok and refunds == []
    assert "got {'refunded': 'by hand', 'n': [1, 2.5, None]}" in final.stdout
    assert final.decisions[0].verdict == "value"
    assert final.decisions[0].value == {"refunded": "by hand", "n": [1, 2.5, None]}


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({}, ValueError),
        ({"approve": True, "value": 1}, ValueError),
        ({"approve": False, "value": 1}, ValueError),
        ({"approve": True, "reason": "x"}, ValueError),
        ({"value": 1, "reason": "x"}, ValueError),
        ({"value": object()}, TypeError),
        ({"value": float("nan")}, TypeError),
        ({"value": {1: {2}}}, TypeError),
        ({"approve": "yes"}, TypeError),
    ],
)
def test_bad_decisions_raise_and_change_nothing(kwargs, exc):
    with sandbox() as sb:
        r = sb.run(CODE)
        with pytest.raises(exc):
            sb.resume(r, **kwargs)
        assert refunds == []
        assert sb.resume(r, approve=True).ok  # still paused, still resumable
        assert refunds == [("A-17", 12.5)]


def test_results_that_are_not_paused_or_not_ours_are_refused():
    with sandbox() as sb, sandbox() as other:
        with pytest.raises(ValueError, match="not paused"):
            sb.resume(sb.run("print(1)"), approve=True)
        r = sb.run(CODE)
        with pytest.raises(ValueError, match="another sandbox"):
            other.resume(r, approve=True)
        with pytest.raises(TypeError):
            sb.resume("a result", approve=True)
        # A copy of a paused result made without its run (asdict, a rebuilt Result) is not
        # resumable; asdict itself works as for any result.
        fields = dataclasses.asdict(r)
        assert fields["pending"]["name"] == "refund"
        with pytest.raises(ValueError, match="another sandbox"):
            sb.resume(snapcell.Result(**{**fields, "pending": r.pending, "decisions": ()}),
                      approve=True)
        assert sb.resume(r, approve=True).ok
    assert refunds == [("A-17", 12.5)]


def test_approval_required_must_name_registered_tools():
    with pytest.raises(ValueError, match="nope"):
        snapcell.Sandbox(tools=[refund], approval_required={"nope"})
    with pytest.raises(TypeError):
        snapcell.Sandbox(tools=[refund], approval_required="refund")
    with snapcell.Sandbox(tools=[refund], approval_required=set()) as sb:
        assert sb.run("call_tool('refund', order='x', amount=1)").ok


def test_racing_resumes_have_exactly_one_winner():
    with sandbox() as sb:
        r = sb.run(CODE)
        results, errors = [], []
        start = threading.Barrier(6)

        def go():
            start.wait()
            try:
                results.append(sb.resume(r, approve=True))
            except ValueError as e:
                errors.append(e)

        threads = [threading.Thread(target=go) for _ in range(6)]
        [t.start() for t in threads]
        [t.join() for t in threads]
    assert len(results) == 1 and len(errors) == 5 and results[0].ok
    assert refunds == [("A-17", 12.5)]


def test_many_pauses_and_threads_take_turns():
    code = """
import threading
out = []
ts = [threading.Thread(target=lambda o=o: out.append(call_tool("refund", order=o, amount=1)))
      for o in "ABC"]
[t.start() for t in ts]; [t.join() for t in ts]
print(sorted(r["refunded"] for r in out))
"""
    with sandbox() as sb:
        r = sb.run(code)
        seen = []
        while r.status == "paused":
            seen.append(r.pending.arguments["order"])
            r = sb.resume(r, approve=True)
    assert r.ok and r.stdout == "['A', 'B', 'C']\n"
    assert sorted(seen) == ["A", "B", "C"] and len(r.decisions) == 3


def test_awaited_calls_pause_one_at_a_time_in_call_order():
    """Calls gathered in the cell's event loop that need a decision pause the run one at a
    time, in the order the code made them; each runs once, after its own approval."""
    code = """
import asyncio
async def main():
    return await asyncio.gather(*(tools.refund(order=o, amount=1) for o in "ABC"))
print([r["refunded"] for r in asyncio.run(main())])
"""
    with sandbox() as sb:
        r = sb.run(code)
        seen = []
        while r.status == "paused":
            seen.append(r.pending.arguments["order"])
            assert len(refunds) == len(seen) - 1
            r = sb.resume(r, approve=True)
    assert r.ok and r.stdout == "['A', 'B', 'C']\n"
    assert seen == ["A", "B", "C"] and [o for o, _ in refunds] == ["A", "B", "C"]
    assert len(r.decisions) == 3


def test_an_expired_run_returns_its_final_result_and_never_runs_the_tool():
    with sandbox(approval_timeout=0.2) as sb:
        r = sb.run(CODE)
        time.sleep(0.4)
        final = sb.resume(r, approve=True)
    assert final.status == "expired" and not final.ok
    assert final.stdout == "before\nX\n" and refunds == []
    assert final.decisions[-1].verdict == "expired"


def test_past_the_bound_the_call_gets_tool_error_naming_it():
    with sandbox(max_paused_runs=1) as sb:
        first = sb.run(CODE)
        second = sb.run(CODE)
        assert first.status == "paused" and second.ok
        assert "paused_runs bound" in second.stdout
        assert sb.resume(first, approve=True).ok


def test_sessions_inherit_it_and_are_busy_while_paused():
    with sandbox() as sb:
        s = sb.session()
        assert s.run("x = 41").ok
        r = s.run("r = call_tool('refund', order='s', amount=2)\nx += 1\nprint(x)")
        assert r.status == "paused"
        with pytest.raises(RuntimeError, match="busy"):
            s.run("print(x)")
        with pytest.raises(ValueError, match="another sandbox or session"):
            sb.session().resume(r, approve=True)
        final = s.resume(r, approve=True)
        assert final.ok and final.stdout == "42\n"
        assert s.run("print(x, r['refunded'])").stdout == "42 s\n"
        # The sandbox may resume its sessions' runs too.
        r = s.run("call_tool('refund', order='t', amount=3)\nprint('on')")
        assert sb.resume(r, approve=False).status == "error"  # the ToolError was not caught
        s.close()


def test_async_resume_and_a_paused_run_outlives_its_event_loop():
    async def tool_async(order: str) -> str:
        await asyncio.sleep(0)
        refunds.append((order, 0))
        return "async " + order

    with snapcell.Sandbox(tools=[tool_async], approval_required={"tool_async"}) as sb:
        paused = asyncio.run(sb.run_async("print('in'); print(call_tool('tool_async', order='q'))"))
        assert paused.status == "paused"  # that loop is gone; the run waits on

        async def decide():
            return await sb.resume_async(paused, approve=True, decided_by="ui")

        final = asyncio.run(decide())
    assert final.ok and final.stdout == "in\nasync q\n"
    assert refunds == [("q", 0)] and final.decisions[0].decided_by == "ui"


def test_closing_the_sandbox_ends_paused_runs():
    sb = sandbox()
    r = sb.run(CODE)
    sb.close()
    with pytest.raises(Exception):
        sb.resume(r, approve=True)
    assert refunds == []


def test_code_that_did_not_wait_in_its_call_stands_still_while_paused():
    """An awaited call leaves the code running in its event loop; while the run waits for the
    decision the cell is stopped, so the loop's spinning sees the whole pause as one gap and
    does no work in it (docs/approval.md)."""
    code = """
import asyncio, time
async def main():
    last = time.monotonic()
    call = tools.refund(order="A", amount=1)  # sent now; the code goes on
    gap, end = 0.0, last + 5
    while last < end and gap < 1:  # until the pause has passed (or 5 s, when it never came)
        now = time.monotonic()
        gap, last = max(gap, now - last), now
    await call
    return gap
print(f"{asyncio.run(main()):.2f}")
"""
    with sandbox() as sb:
        r = sb.run(code)
        assert r.status == "paused", r
        time.sleep(1.5)
        final = sb.resume(r, approve=True)
    assert final.ok, final
    assert float(final.stdout) >= 1.2, f"the code ran during the pause: {final.stdout}"
