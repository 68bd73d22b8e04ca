"""Awaited tool calls against the same calls in sequence: N calls of a tool that sleeps
(10 ms by default), made one after another from synchronous code, then gathered in the cell
(`await asyncio.gather(...)`), once with a synchronous tool (the run's pool of tool_threads
threads) and once with an async one (tasks on the caller's event loop, Sandbox.run_async).

Prints key=value lines; gathered calls overlap on the host, so sync_ratio approaches
min(N, tool_threads) and async_ratio approaches N (up to max_concurrent_tool_calls).
Usage: python bench/gather_bench.py [--calls N] [--sleep-ms MS] [--threads T] [--quick]"""

import argparse
import asyncio
import time

import snapcell

SEQUENTIAL = """
import time
t = time.perf_counter()
for i in range({n}):
    tools.{tool}(i=i)
print(time.perf_counter() - t)
"""

GATHERED = """
import asyncio, time
t = time.perf_counter()
await asyncio.gather(*(tools.{tool}(i=i) for i in range({n})))
print(time.perf_counter() - t)
"""


def best(runs):
    """The fastest of the runs' own timings (seconds, as the cell measured them)."""
    return min(float(r.stdout) for r in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=32, help="calls per run")
    ap.add_argument("--sleep-ms", type=float, default=10.0, help="how long each call sleeps")
    ap.add_argument("--threads", type=int, default=4, help="tool_threads: the sync tools' pool")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each kind (the best counts)")
    ap.add_argument("--quick", action="store_true", help="8 calls, 2 runs: it works, not its numbers")
    args = ap.parse_args()
    n, repeat = (8, 2) if args.quick else (args.calls, args.repeat)
    delay = args.sleep_ms / 1000

    def sleepy(i: int) -> int:
        """Sleeps, then answers."""
        time.sleep(delay)
        return i

    async def asleepy(i: int) -> int:
        """Sleeps on the loop, then answers."""
        await asyncio.sleep(delay)
        return i

    limit = max(n, 16)
    with snapcell.Sandbox(tools=[sleepy, asleepy], tool_threads=args.threads,
                          max_concurrent_tool_calls=min(limit, 1024)) as sb:

        def runs(code, tool, use_loop=False):
            text = code.format(n=n, tool=tool)
            out = []
            for _ in range(repeat):
                r = asyncio.run(sb.run_async(text)) if use_loop else sb.run(text)
                assert r.status == "ok", r.stderr
                out.append(r)
            return best(out)

        sequential = runs(SEQUENTIAL, "sleepy")
        gathered_sync = runs(GATHERED, "sleepy")
        gathered_async = runs(GATHERED, "asleepy", use_loop=True)

    print(f"calls={n}")
    print(f"tool_sleep_ms={args.sleep_ms:g}")
    print(f"tool_threads={args.threads}")
    print(f"sequential_ms={sequential * 1e3:.1f}")
    print(f"gathered_sync_ms={gathered_sync * 1e3:.1f}")
    print(f"gathered_async_ms={gathered_async * 1e3:.1f}")
    print(f"sync_ratio={sequential / gathered_sync:.2f}")
    print(f"async_ratio={sequential / gathered_async:.2f}")


if __name__ == "__main__":
    main()
