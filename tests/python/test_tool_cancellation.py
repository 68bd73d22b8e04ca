"""A tool learns that its run was cancelled: snapcell.tool_cancellation() (built on the C
library's snapcell_tool_cancel_fd for plain calls, on the call's cancel for awaited ones), and a
plain call of an async tool has its task cancelled, so a cancelled run_async ends at once
instead of waiting for the tool."""

import asyncio
import os
import select
import threading
import time

import pytest

import snapcell

PLAIN = "print('started', flush=True)\nprint(tools.{name}())\n"
AWAITED = ("import asyncio\nasync def main():\n    return await tools.{name}()\n"
           "asyncio.run(main())\n")


async def cancel_when(sb, code, started, tools=None):
    """run_async(code) cancelled once started is set; how long the cancelled task took to end."""
    task = asyncio.create_task(sb.run_async(code, tools=tools))
    while not started.is_set():
        assert not task.done(), task.result()
        await asyncio.sleep(0.01)
    t = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return time.monotonic() - t


def test_a_plain_call_of_a_sync_tool_sees_the_cancel():
    started, seen = threading.Event(), {}

    def hold() -> str:
        c = snapcell.tool_cancellation()
        seen["before"] = c.is_set()
        seen["fd"] = c.fileno()
        started.set()
        t = time.monotonic()
        seen["waited"] = c.wait(30)
        seen["took"] = time.monotonic() - t
        seen["after"] = c.is_set()
        seen["object"] = c
        return "late"

    async def main():
        with snapcell.Sandbox(tools=[hold]) as sb:
            took = await cancel_when(sb, PLAIN.format(name="hold"), started)
            # The sandbox goes on serving.
            r = await sb.run_async("print(1)")
            return took, r

    took, r = asyncio.run(main())
    assert took < 15, took
    assert (r.status, r.stdout) == ("ok", "1\n")
    assert seen["before"] is False and seen["fd"] >= 0
    assert seen["waited"] is True and seen["after"] is True and seen["took"] < 15
    # Kept after the call returned: its state then, and no descriptor any more.
    assert seen["object"].is_set() and seen["object"].fileno() == -1


def test_the_descriptor_polls_beside_the_tools_own():
    started, seen = threading.Event(), {}

    def hold() -> str:
        c = snapcell.tool_cancellation()
        r, w = os.pipe()  # the tool's own descriptor, never readable here
        started.set()
        try:
            ready, _, _ = select.select([r, c], [], [], 30)  # c has fileno()
        finally:
            os.close(r)
            os.close(w)
        seen["ready"] = [x is c for x in ready]
        return "late"

    async def main():
        with snapcell.Sandbox(tools=[hold]) as sb:
            return await cancel_when(sb, PLAIN.format(name="hold"), started)

    assert asyncio.run(main()) < 15
    assert seen["ready"] == [True]


def test_a_plain_call_of_an_async_tool_has_its_task_cancelled():
    started, seen = threading.Event(), []

    async def hold() -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append(("cancelled", snapcell.tool_cancellation().is_set()))
            raise
        return "late"

    async def main():
        with snapcell.Sandbox(tools=[hold]) as sb:
            return await cancel_when(sb, PLAIN.format(name="hold"), started)

    took = asyncio.run(main())
    assert took < 15, took  # it used to wait the 30 s out
    assert seen == [("cancelled", True)]


def test_an_awaited_call_of_a_sync_tool_sees_its_run_end():
    started, seen = threading.Event(), {}

    def hold() -> str:
        started.set()
        seen["waited"] = snapcell.tool_cancellation().wait(30)
        return "late"

    async def main():
        with snapcell.Sandbox(tools=[hold]) as sb:
            return await cancel_when(sb, AWAITED.format(name="hold"), started)

    assert asyncio.run(main()) < 15  # a running pool call used to be waited for
    assert seen["waited"] is True
    assert [t for t in threading.enumerate() if t.name.startswith("snapcell-tool")] == []


def test_an_awaited_sync_call_sees_the_timeout_too():
    seen = {}

    def hold() -> str:
        c = snapcell.tool_cancellation()
        seen["waited"] = c.wait(30)
        return "late"

    with snapcell.Sandbox(tools=[hold], timeout=1) as sb:
        t = time.monotonic()
        r = sb.run(AWAITED.format(name="hold"))
    assert r.status == "timeout"
    assert time.monotonic() - t < 15
    assert seen["waited"] is True


def test_a_run_that_is_not_cancelled_leaves_it_unset():
    seen = {}

    def look() -> int:
        c = snapcell.tool_cancellation()
        seen["plain"] = (c.is_set(), c.wait(0.01))
        return 1

    async def alook() -> int:
        c = snapcell.tool_cancellation()
        seen["async"] = (c.is_set(), c.wait(0.01))
        return 2

    async def main():
        with snapcell.Sandbox(tools=[look, alook]) as sb:
            return await sb.run_async(
                "print(tools.look(), tools.alook())\n"
                "import asyncio\n"
                "async def m():\n"
                "    return await asyncio.gather(tools.look(), tools.alook())\n"
                "print(asyncio.run(m()))\n")

    r = asyncio.run(main())
    assert (r.status, r.stdout) == ("ok", "1 2\n[1, 2]\n"), r.stderr
    assert seen == {"plain": (False, False), "async": (False, False)}


def test_a_blocking_run_has_nothing_to_cancel_it():
    seen = {}

    def look() -> int:
        c = snapcell.tool_cancellation()
        seen["state"] = (c.is_set(), c.fileno(), c.wait(0.01))
        with pytest.raises(RuntimeError, match="never return"):
            c.wait()
        return 1

    with snapcell.Sandbox(tools=[look]) as sb:
        r = sb.run("print(tools.look())")
    assert (r.status, r.stdout) == ("ok", "1\n"), r.stderr
    assert seen["state"] == (False, -1, False)


def test_outside_a_tool_call_it_is_never_set():
    c = snapcell.tool_cancellation()
    assert isinstance(c, snapcell.ToolCancellation)
    assert not c and c.is_set() is False and c.fileno() == -1 and c.wait(0.01) is False
    with pytest.raises(RuntimeError, match="never return"):
        c.wait()
