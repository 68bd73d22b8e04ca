"""Awaited tool calls: inside an event loop in the cell (asyncio.run, top-level await) the code's
tool calls are awaitables that run at once on the host, async tools as tasks on the caller's loop
and others on a bounded pool of threads per run; synchronous code keeps plain calls."""

import asyncio
import contextvars
import threading
import time

import pytest

import snapcell


def tool_threads():
    return [t for t in threading.enumerate() if t.name.startswith("snapcell-tool")]


class Meter:
    """Counts a tool's calls running at once, and the most seen."""

    def __init__(self):
        self.lock = threading.Lock()
        self.now = self.most = self.started = 0
        self.threads = set()

    def __enter__(self):
        with self.lock:
            self.now += 1
            self.started += 1
            self.most = max(self.most, self.now)
            self.threads.add(threading.current_thread().name)

    def __exit__(self, *exc):
        with self.lock:
            self.now -= 1


class Gathering:
    """An awaitable barrier for tasks on one loop: `await all_in(n)` returns once n calls are
    in it together and raises TimeoutError when they never are (calls run one after another)."""

    def __init__(self):
        self.n = 0
        self.event = None

    async def __call__(self, n):
        if self.event is None:
            self.event = asyncio.Event()
        self.n += 1
        if self.n >= n:
            self.event.set()
        await asyncio.wait_for(self.event.wait(), 30)


GATHER = (
    "import asyncio\n"
    "async def main():\n"
    "    return await asyncio.gather(*(tools.add(a=i, b=1) for i in range({n})))\n"
    "print(asyncio.run(main()))\n"
)


def test_gathered_calls_give_their_results_in_order():
    def add(a: int, b: int) -> int:
        return a + b

    with snapcell.Sandbox(tools=[add]) as sb:
        r = sb.run(GATHER.format(n=3))
        assert r.status == "ok", r.stderr
        assert r.stdout == "[1, 2, 3]\n"
        assert [c.name for c in r.tool_calls] == ["add"] * 3


def test_top_level_await_works_and_makes_calls_awaitable():
    def add(a: int, b: int) -> int:
        return a + b

    with snapcell.Sandbox(tools=[add]) as sb:
        r = sb.run("r = await tools.add(a=1, b=1)\n"
                   "s = await call_tool('add', a=2, b=2)\n"
                   "import asyncio\n"
                   "print(r, s, asyncio.iscoroutine(c := tools.add(a=0, b=0)), await c)\n")
        assert (r.status, r.stdout) == ("ok", "2 4 True 0\n"), r.stderr
        # A syntax error elsewhere is still reported as the code's own.
        r = sb.run("x = await tools.add(a=1, b=1)\ndef f(:\n")
        assert r.status == "error"
        assert "SyntaxError" in r.stderr and "line 2" in r.stderr, r.stderr


def test_synchronous_code_calls_on_the_runs_thread_as_before():
    seen = []

    def add(a: int, b: int) -> int:
        seen.append(threading.current_thread())
        return a + b

    with snapcell.Sandbox(tools=[add]) as sb:
        r = sb.run("print(tools.add(a=20, b=22), call_tool('add', a=1, b=1))\n"
                   "import threading\n"
                   "t = threading.Thread(target=lambda: print(tools.add(a=3, b=3)))\n"
                   "t.start(); t.join()\n")
        assert (r.status, r.stdout) == ("ok", "42 2\n6\n"), r.stderr
    assert seen == [threading.current_thread()] * 3


@pytest.mark.parametrize("threads, n, expect", [(None, 8, 4), (2, 6, 2)])
def test_sync_tools_run_on_a_bounded_pool_per_run(threads, n, expect):
    meter = Meter()
    # Each round of `expect` calls waits until all of them are in: a pool smaller than that
    # breaks the barrier (the calls fail), a bigger one lets more than `expect` in at once.
    together = threading.Barrier(expect, timeout=30)

    def add(a: int, b: int) -> int:
        with meter:
            together.wait()
        return a + b

    kwargs = {} if threads is None else {"tool_threads": threads}
    with snapcell.Sandbox(tools=[add], **kwargs) as sb:
        r = sb.run(GATHER.format(n=n))
        assert r.status == "ok", r.stderr
        assert r.stdout == f"{list(range(1, n + 1))}\n"
    assert meter.most == expect
    assert all(name.startswith("snapcell-tool") for name in meter.threads)
    assert tool_threads() == []


def test_the_c_bound_on_calls_in_flight_holds_async_tools_too():
    meter = Meter()

    async def add(a: int, b: int) -> int:
        with meter:
            await asyncio.sleep(0.05)
        return a + b

    async def main():
        with snapcell.Sandbox(tools=[add], max_concurrent_tool_calls=3) as sb:
            return await sb.run_async(GATHER.format(n=9))

    r = asyncio.run(main())
    assert r.stdout == f"{list(range(1, 10))}\n", r.stderr
    assert meter.most == 3


def test_async_tools_run_together_on_the_callers_loop():
    loops = []
    where = contextvars.ContextVar("where", default="unset")

    async def add(a: int, b: int) -> int:
        loops.append((asyncio.get_running_loop(), where.get()))
        await all_in(5)
        return a + b

    def mul(a: int, b: int) -> int:
        loops.append((None, where.get()))
        return a * b

    async def main():
        where.set("caller")
        with snapcell.Sandbox(tools=[add, mul]) as sb:
            code = GATHER.format(n=5) + ("async def m():\n    return await tools.mul(a=3, b=4)\n"
                                          "print(asyncio.run(m()))\n")
            r = await sb.run_async(code)
            return asyncio.get_running_loop(), r

    all_in = Gathering()
    loop, r = asyncio.run(main())
    assert r.status == "ok", r.stderr
    assert r.stdout == "[1, 2, 3, 4, 5]\n12\n"
    assert len(loops) == 6
    assert all(lp is loop and w == "caller" for lp, w in loops[:5])
    assert loops[5] == (None, "caller")  # a pool thread, in the caller's context


def test_errors_reach_the_awaiting_code():
    def boom() -> int:
        raise ValueError("no luck")

    async def aboom() -> int:
        raise KeyError("deep")

    code = (
        "import asyncio\n"
        "async def main():\n"
        "    rs = await asyncio.gather(tools.boom(), tools.aboom(), call_tool('nope'),\n"
        "                              return_exceptions=True)\n"
        "    for r in rs:\n"
        "        print(type(r).__name__, r)\n"
        "asyncio.run(main())\n"
    )

    async def main(**kwargs):
        with snapcell.Sandbox(tools=[boom, aboom], **kwargs) as sb:
            return await sb.run_async(code)

    r = asyncio.run(main())
    assert r.stdout.splitlines()[:2] == ["ToolError no luck", "ToolError 'deep'"], r.stderr
    assert r.stdout.splitlines()[2].startswith("ToolError unknown tool 'nope'")
    r = asyncio.run(main(include_detailed_errors=False))
    assert r.stdout.splitlines()[:2] == ["ToolError Host tool execution failed."] * 2, r.stderr


def test_a_timeout_cancels_calls_in_flight_and_leaves_no_thread():
    meter = Meter()

    def slow(i: int) -> int:
        with meter:
            time.sleep(1.5)
        return i

    with snapcell.Sandbox(tools=[slow], timeout=1, tool_threads=2) as sb:
        t = time.monotonic()
        r = sb.run("import asyncio\n"
                   "async def main():\n"
                   "    await asyncio.gather(*(tools.slow(i=i) for i in range(6)))\n"
                   "asyncio.run(main())\n")
        took = time.monotonic() - t
        assert r.status == "timeout"
        # The two running calls finish (a thread cannot be interrupted); the four queued on
        # the pool never start; the run returns only after, with no pool thread left.
        assert meter.started == 2 and meter.now == 0
        assert tool_threads() == []
        # The queued calls never started (above); this bound only catches a run left hanging.
        assert took < 15, took
        assert sb.run("print(1)").stdout == "1\n"


def test_cancelling_run_async_cancels_async_tools_on_the_loop():
    events = []

    async def wait(i: int) -> int:
        events.append(("start", i))
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            events.append(("cancelled", i))
            raise
        return i

    async def main():
        with snapcell.Sandbox(tools=[wait]) as sb:
            task = asyncio.create_task(sb.run_async(
                "import asyncio\n"
                "async def main():\n"
                "    await asyncio.gather(*(tools.wait(i=i) for i in range(3)))\n"
                "asyncio.run(main())\n"))
            while len(events) < 3:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return sorted(events)

    events = asyncio.run(main())
    assert events == sorted([("start", i) for i in range(3)] + [("cancelled", i) for i in range(3)])
    assert tool_threads() == []


def test_a_session_keeps_working_after_calls_left_unawaited():
    def echo(s: str) -> str:
        return s

    with snapcell.Sandbox(tools=[echo]) as sb, sb.session() as s:
        for _ in range(3):
            r = s.run("import asyncio\n"
                      "async def main():\n"
                      "    tools.echo(s='x' * 300000)\n"
                      "    await asyncio.sleep(0.01)\n"
                      "asyncio.run(main())\n"
                      "print(len(tools.echo(s='y' * 200000)))\n")
            assert (r.status, r.stdout) == ("ok", "200000\n"), r.stderr


def test_tool_threads_must_be_a_positive_int():
    for bad in (0, -1, 1.5, True, "4"):
        with pytest.raises(ValueError, match="tool_threads"):
            snapcell.Sandbox(tool_threads=bad)


def test_agent_framework_async_tools_run_together_on_the_callers_loop():
    from agent_framework import tool

    from snapcell.agent_framework import ExecuteCodeTool

    loops = []

    @tool(approval_mode="never_require")
    async def slow_add(a: int, b: int) -> int:
        """Adds two integers once all six calls are in."""
        loops.append(asyncio.get_running_loop())
        await all_in(6)
        return a + b

    all_in = Gathering()
    code = "print(await asyncio.gather(*(tools.slow_add(a=i, b=1) for i in range(6))))\n"

    async def main():
        with ExecuteCodeTool(tools=[slow_add]) as t:
            contents = await t.invoke(arguments={"code": "import asyncio\n" + code})
            return asyncio.get_running_loop(), [c.text for c in contents if c.type == "text"]

    loop, out = asyncio.run(main())
    lines = out[0].splitlines()
    assert lines[0] == "[1, 2, 3, 4, 5, 6]", out
    assert loops == [loop] * 6
    # Six tasks at once on the loop (each waited for all six), not two rounds of the run's
    # four pool threads.


def test_the_description_states_the_rule():
    def add(a: int, b: int) -> int:
        return a + b

    with snapcell.Sandbox(tools=[add]) as sb:
        text = sb.describe()
    assert "return awaitables" in text and "`asyncio.gather(...)`" in text


def test_a_runs_own_tools_are_awaitable_and_the_last_await_is_the_value():
    meter = Meter()

    def add(a: int, b: int) -> int:
        with meter:
            time.sleep(0.1)
        return a + b

    with snapcell.Sandbox() as sb:
        r = sb.run("import asyncio\n"
                   "rs = await asyncio.gather(*(tools.add(a=i, b=1) for i in range(4)))\n"
                   "await tools.add(a=sum(rs), b=0)\n", tools=[add])
        assert r.status == "ok", r.stderr
        assert r.value == 10
    assert meter.most == 4
    assert tool_threads() == []
