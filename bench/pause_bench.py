"""What a run paused for a decision costs while it waits: CPU of the host process, of the
sandbox's template and of the cell over the pause, and the time resume takes to answer.

Prints key=value lines; the goal is under 10 ms of CPU in all over a 10 s pause
(pause_cpu_ok=true). Usage: python bench/pause_bench.py [--pause SECONDS] [--quick]"""

import argparse
import os
import resource
import time

import snapcell

CODE = """
import resource, time
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
before = cpu()
call_tool("decide")
print(f"{(cpu() - before) * 1e6:.0f}")
"""


def host_cpu_us():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return (r.ru_utime + r.ru_stime) * 1e6


def process_cpu_us(pid):
    """CPU time of a process, all its threads, from the scheduler's nanosecond counts (the
    tick-sampled utime and stime would round a quiet process to 0 or 10 ms)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/schedstat") as f:
            total += int(f.read().split()[0])
    return total / 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pause", type=float, default=10.0, help="seconds to stay paused")
    ap.add_argument("--quick", action="store_true", help="a 1 s pause: it works, not its numbers")
    args = ap.parse_args()
    pause = 1.0 if args.quick else args.pause

    def decide() -> str:
        """Decided by the host."""
        return "done"

    with snapcell.Sandbox(tools=[decide], approval_required={"decide"}) as sb:
        sb.run("print(1)")  # the template warm, a cell parked
        template = sb.stats()["template_pid"]
        r = sb.run(CODE)
        assert r.status == "paused", r
        host0, tmpl0 = host_cpu_us(), process_cpu_us(template)
        time.sleep(pause)
        host1, tmpl1 = host_cpu_us(), process_cpu_us(template)
        t = time.perf_counter_ns()
        final = sb.resume(r, approve=True)
        resume_us = (time.perf_counter_ns() - t) / 1000
    assert final.ok, final
    # The cell's own figure spans the whole call: the pause, its decision and the answer.
    cell_us = float(final.stdout.split()[-1])
    host_us, tmpl_us = host1 - host0, tmpl1 - tmpl0
    total_ms = (host_us + tmpl_us + cell_us) / 1000
    print(f"pause_s={pause:g}")
    print(f"host_cpu_us={host_us:.0f}")
    print(f"template_cpu_us={tmpl_us:.0f}")
    print(f"cell_cpu_us={cell_us:.0f}")
    print(f"pause_cpu_ms={total_ms:.3f}")
    print(f"resume_us={resume_us:.0f}")
    print(f"pause_cpu_ok={'true' if total_ms < 10 else 'false'}")


if __name__ == "__main__":
    main()
