"""What a run paused for a decision costs while it waits: CPU of the host process, of the
sandbox's template and of the cell over the pause, and the time resume takes to answer.
Then what stopping the cell for the pause and continuing it costs (docs/approval.md): the
median CPU time of the calling thread (which runs the run's loop, the stop and the continue)
in a run up to a call that pauses, and in its resume, against the same run with a call that
needs no decision, for a cell of 1 process and 1 thread and one with 4 spinning threads and
2 spinning child processes (freeze_idle_cpu_us and freeze_busy_cpu_us: the difference).

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


# A cell with spinning threads and child processes, calling a tool once; the run ends at once.
BUSY = """
import os, threading
kids = []
for _ in range({children}):
    pid = os.fork()
    if pid == 0:
        while True: pass
    kids.append(pid)
stop = False
def spin():
    while not stop: pass
for _ in range({threads}): threading.Thread(target=spin, daemon=True).start()
call_tool("{tool}")
stop = True
for pid in kids: os.kill(pid, 9); os.waitpid(pid, 0)
"""


def median_us(samples):
    samples = sorted(samples)
    return samples[len(samples) // 2] / 1000


def freeze_cost(sb, threads, children, rounds):
    """Median CPU ns of the calling thread in run-to-pause and resume, and in run-to-end with
    an undecided call."""
    plain, enter, leave = [], [], []
    for _ in range(rounds):
        code = BUSY.format(threads=threads, children=children, tool="plain")
        t = time.thread_time_ns()
        r = sb.run(code)
        plain.append(time.thread_time_ns() - t)
        assert r.ok, r
        code = BUSY.format(threads=threads, children=children, tool="decide")
        t = time.thread_time_ns()
        r = sb.run(code)
        enter.append(time.thread_time_ns() - t)
        assert r.status == "paused", r
        t = time.thread_time_ns()
        final = sb.resume(r, approve=True)
        leave.append(time.thread_time_ns() - t)
        assert final.ok, final
    return median_us(plain), median_us(enter), median_us(leave)


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

    def plain() -> str:
        """Needs no decision."""
        return "done"

    with snapcell.Sandbox(tools=[decide, plain], approval_required={"decide"}) as sb:
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
        rounds = 3 if args.quick else 15
        costs = {
            "idle": freeze_cost(sb, 0, 0, rounds),
            "busy": freeze_cost(sb, 4, 2, rounds),
        }
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
    for name, (plain_us, enter_us, leave_us) in costs.items():
        # The paused path's extra time: the freeze, the paused result, the resume's thaw.
        print(f"run_{name}_plain_cpu_us={plain_us:.0f}")
        print(f"run_{name}_to_pause_cpu_us={enter_us:.0f}")
        print(f"run_{name}_resume_cpu_us={leave_us:.0f}")
        print(f"freeze_{name}_cpu_us={enter_us + leave_us - plain_us:.0f}")


if __name__ == "__main__":
    main()
