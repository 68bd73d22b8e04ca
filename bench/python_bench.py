"""What the Python layers add over the C API, measured in one run.

Prints key=value lines: fresh runs through the raw binding (`_native`, the C API plus one
dict), through `snapcell.Sandbox.run`, and through the Agent Framework adapter's
`ExecuteCodeTool.invoke`, interleaved in rounds so machine noise hits all alike; tool calls
with a Python callback; and, when `snapcell` (the CLI) is found, the C bench's figures from
the same run. Usage: python bench/python_bench.py [--runs N] [--snapcell PATH]"""

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import time

import snapcell


def p50(xs):
    return statistics.median(xs)


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def timed(fn):
    t = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t) / 1000


def c_figures(binary):
    """fresh_p50_us and tool_call_p50_us of `snapcell bench --quick`, or {}."""
    if not binary:
        return {}
    env = dict(os.environ)
    beside = os.path.join(os.path.dirname(os.path.abspath(binary)), "..", "snapcell-cell")
    if "SNAPCELL_HELPER" not in env and os.path.exists(beside):
        env["SNAPCELL_HELPER"] = os.path.abspath(beside)  # a build tree's CLI
    out = subprocess.run(
        [binary, "bench", "--quick"], capture_output=True, text=True, check=True, env=env
    ).stdout
    kv = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return {f"c_{k}": kv[k] for k in ("fresh_p50_us", "fresh_paced_p50_us", "tool_call_p50_us") if k in kv}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--snapcell", default=os.environ.get("SNAPCELL_BIN") or shutil.which("snapcell"))
    args = ap.parse_args()

    def noop(x: int = 0) -> int:
        return x

    sb = snapcell.Sandbox(tools=[noop])
    native = sb._native
    from snapcell.agent_framework import ExecuteCodeTool

    af = ExecuteCodeTool()
    loop = asyncio.new_event_loop()

    def af_run():
        loop.run_until_complete(af.invoke(arguments={"code": "print(1)"}))

    series = {"native_fresh": [], "py_fresh": [], "af_invoke": []}
    runs = {
        "native_fresh": lambda: native.run("print(1)", None),
        "py_fresh": lambda: sb.run("print(1)"),
        "af_invoke": af_run,
    }
    for fn in runs.values():  # warm every path once (the adapter builds its sandbox here)
        fn()
    print(f"measuring {args.runs} rounds of fresh runs...", file=sys.stderr)
    order = list(runs)
    for i in range(args.runs):
        for name in order if i % 2 == 0 else reversed(order):
            series[name].append(timed(runs[name]))

    print(f"measuring {args.calls} tool calls...", file=sys.stderr)
    code = f"for i in range({args.calls}): call_tool('noop', x=i)"
    base = [timed(lambda: sb.run("pass")) for _ in range(20)]
    loops = [timed(lambda: sb.run(code)) for _ in range(5)]
    tool_call_us = (p50(loops) - p50(base)) / args.calls

    print(f"isolation={sb.isolation}")
    print(f"runs={args.runs}")
    for name, xs in series.items():
        print(f"{name}_p50_us={p50(xs):.1f}")
        print(f"{name}_p99_us={p99(xs):.1f}")
    print(f"py_layer_fresh_us={p50(series['py_fresh']) - p50(series['native_fresh']):.1f}")
    print(f"af_layer_fresh_us={p50(series['af_invoke']) - p50(series['native_fresh']):.1f}")
    print(f"py_tool_call_p50_us={tool_call_us:.1f}")
    figures = c_figures(args.snapcell)
    for k, v in figures.items():
        print(f"{k}={v}")
    if "c_tool_call_p50_us" in figures:
        print(f"py_tool_call_over_c_us={tool_call_us - float(figures['c_tool_call_p50_us']):.1f}")
    af.close()
    sb.close()
    loop.close()


if __name__ == "__main__":
    main()
