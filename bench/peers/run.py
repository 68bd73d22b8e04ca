"""Runs the same workloads on snapcell and its peers, interleaved in rounds, and writes a table.

One worker process per system (bench/peers/worker.c for snapcell's C API, worker.py for the
others) speaks the line protocol in bench/peers/README.md; each round sends every workload to
every system, in alternating order, so machine noise falls on all of them alike. Prints
key=value lines on stdout (progress on stderr) and writes a Markdown table with the machine
it ran on. It measures; it judges nothing: compare runs made back to back, not across days.

usage: run.py [--quick] [--rounds N] [--out FILE] [--python PY] [--build DIR] [--systems A,B]
              [--reuse on|off|default]
See docs/benchmarks.md."""

import argparse
import json
import os
import platform
import select
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@dataclass
class System:
    key: str
    name: str
    isolation: str
    worker: str  # "c" (the C worker) or the name worker.py takes
    needs: str = ""  # a program on PATH the system needs
    cold_n: int = 0  # cold starts per round when not the default
    quick: bool = True  # measured by --quick too
    status: str = "not run"  # "ok", or why there are no numbers
    version: str = ""
    level: str = ""  # the isolation level a snapcell worker reported
    reuse: object = None  # whether a snapcell worker's sandbox resets its cells in place
    proc: object = None
    samples: dict = field(default_factory=dict)  # workload -> [µs]
    values: dict = field(default_factory=dict)  # throughput, memory -> [per round]
    errors: dict = field(default_factory=dict)  # workload -> message
    na: dict = field(default_factory=dict)  # workload -> why the system has no such thing


SYSTEMS = [
    System("snapcell-c", "snapcell, C API", "namespaces (user, pid, mount, network, ipc, uts, "
           "cgroup), a private root with only the stdlib, seccomp allow-list, no capabilities, "
           "rlimits; each run in a cell in the state of a fresh copy-on-write one", "c"),
    System("snapcell-py", "snapcell, Python package", "the same as snapcell-c (the package wraps "
           "the C library)", "snapcell-py"),
    System("monty", "pydantic-monty", "none from the OS: a Rust interpreter of a Python subset, "
           "in a pooled `monty` worker subprocess", "monty"),
    System("bwrap", "bubblewrap + /usr/bin/python3 -I", "namespaces (bwrap --unshare-all, "
           "read-only /usr); a new process per run", "bwrap", needs="bwrap"),
    System("spawn", "/usr/bin/python3 -I -c", "none: a plain new process per run (same user, "
           "files, network)", "spawn"),
    System("fork", "/usr/bin/python3 -I forking itself", "none: a ready interpreter (json, re, "
           "datetime imported) forks a child per run, on the host with the host's user, files "
           "and network; the floor under snapcell's design", "fork"),
    System("hyperlight", "hyperlight-sandbox (wasm backend, python guest)", "micro-VM "
           "(Hyperlight on KVM) running a Wasm CPython", "hyperlight"),
    System("pyodide", "Pyodide in Node", "none: CPython compiled to Wasm inside the Node "
           "process, a new globals dict per run; `import js` reaches Node's `process`",
           "pyodide", needs="node", cold_n=1, quick=False),
]
PYODIDE = os.path.join(ROOT, "build", "peers-node", "node_modules", "pyodide", "pyodide.mjs")

# name: (what the table calls it, n per round, n per round with --quick)
WORKLOADS = {
    "fresh": ("fresh `print(1)`, back to back", 200, 10),
    "paced": ("fresh `print(1)`, 2 ms apart", 100, 5),
    "compute": ("json/re/datetime, fresh", 100, 5),
    "tools10": ("10 tool calls, one run", 50, 3),
    "tools1000": ("1,000 tool calls, one run", 5, 1),
    "cold": ("cold start to first result", 4, 1),
}
THROUGHPUT_MS = (2000, 300)
ROUNDS = (5, 2)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class WorkerGone(Exception):
    pass


class Worker:
    """A worker process and its unbuffered line reader (select() and a buffered reader do not
    mix: a line already in the buffer would wait for the next one)."""

    def __init__(self, argv, env):
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, bufsize=0, env=env, cwd="/")
        self.pid, self.buf, self.baseline_kib = self.proc.pid, b"", 0

    def read_line(self, timeout_s):
        """One line, or WorkerGone on EOF or timeout (the worker is then killed)."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.proc.stdout], [], [], left)[0]:
                self.proc.kill()
                raise WorkerGone(f"no answer in {timeout_s:.0f} s")
            chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
            if not chunk:
                raise WorkerGone(f"worker exited ({self.proc.wait()}): {self.stderr_tail()}")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def send(self, line):
        try:
            self.proc.stdin.write((line + "\n").encode())
        except OSError as e:
            raise WorkerGone(f"worker gone ({e}): {self.stderr_tail()}") from None

    def ask(self, command, timeout_s):
        """Sends one command; returns the answer's key=value pairs."""
        self.send(command)
        kv = {}
        while (line := self.read_line(timeout_s)) != "end":
            k, _, v = line.partition("=")
            kv[k] = v
        return kv

    def stderr_tail(self):
        self.err.seek(0)
        return " ".join(self.err.read()[-400:].decode(errors="replace").split())

    def stop(self):
        try:
            self.send("quit")
            self.proc.wait(timeout=30)
        except (WorkerGone, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.err.close()


def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid):
    children = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


class Runner:
    def __init__(self, args):
        self.args = args
        self.quick = 1 if args.quick else 0
        self.timeout_s = 60 if args.quick else 600
        self.c_worker = os.path.join(args.build, "bench", "peers", "snapcell-peer-worker")
        # The C worker runs from a build tree, with its helper; the Python package finds the
        # helper installed beside it.
        self.env = dict(os.environ)
        helper = os.path.abspath(os.path.join(args.build, "snapcell-cell"))
        if "SNAPCELL_HELPER" not in self.env and os.path.exists(helper):
            self.env["SNAPCELL_HELPER"] = helper
        if args.reuse != "default":  # read by worker.c and worker.py's snapcell
            self.env["SNAPCELL_PEER_REUSE"] = "1" if args.reuse == "on" else "0"

    def argv(self, s):
        if s.worker == "c":
            return [self.c_worker]
        if s.worker == "pyodide":
            return ["node", os.path.join(HERE, "worker.mjs"), self.args.pyodide]
        return [self.args.python, "-I", os.path.join(HERE, "worker.py"), s.worker]

    def spawn(self, s):
        """A started worker, or None with s.status saying why."""
        if s.worker == "c" and not os.access(self.c_worker, os.X_OK):
            s.status = f"not installed: no {self.c_worker} (scripts/build)"
            return None
        if s.needs and not shutil.which(s.needs):
            s.status = f"not installed: no `{s.needs}` on PATH"
            return None
        if s.worker == "pyodide" and not os.path.exists(self.args.pyodide):
            s.status = f"not installed: no {self.args.pyodide} (bench/peers/run installs it)"
            return None
        w = Worker(self.argv(s), self.env if s.worker == "c" else None)
        try:
            hello = w.read_line(self.timeout_s)
            if not hello.startswith("hello pid="):
                raise WorkerGone(f"said {hello!r}")
            w.baseline_kib = pss_kib(w.pid)
            w.send("start")
            line = w.read_line(self.timeout_s)
        except WorkerGone as e:
            line = f"error {e}"
        word, _, rest = line.partition(" ")
        if word == "ready":
            info = json.loads(rest)
            s.version = info.get("version", "")
            s.level = info.get("isolation", "")
            s.reuse = info.get("reuse")
            s.status = "ok"
            return w
        s.status = ("not installed: " if word == "missing" else "does not start: ") + rest
        w.stop()
        return None

    def workload(self, s, name, n):
        if name in s.errors:
            return
        try:
            kv = s.proc.ask(f"{name} {n}", self.timeout_s)
        except WorkerGone as e:
            kv = {"error": str(e)}
        if "na" in kv:
            s.na[name] = kv["na"]
        elif "error" in kv:
            s.errors[name] = kv["error"]
            log(f"  {s.key} {name}: {kv['error']}")
        elif "us" in kv:
            s.samples.setdefault(name, []).extend(float(x) for x in kv["us"].split(","))
        elif "runs_per_s" in kv:
            s.values.setdefault(name, []).append(float(kv["runs_per_s"]))
        else:
            s.errors[name] = f"answer without figures: {kv}"

    def memory(self, s):
        """A fresh worker with one ready sandbox: the PSS of every process it added, plus its
        own growth since before the system was loaded."""
        status = s.status
        w = self.spawn(s)
        if w is None:
            s.errors["memory"] = f"its worker: {s.status}"
            s.status = status
            return
        try:
            kv = w.ask("memory", self.timeout_s)
            if "error" in kv:
                s.errors["memory"] = kv["error"]
            else:
                time.sleep(0.2)  # let spares and pools settle
                kids = descendants(w.pid)
                kib = pss_kib(w.pid) - w.baseline_kib + sum(map(pss_kib, kids))
                s.values.setdefault("memory", []).append(kib)
                s.values.setdefault("processes", []).append(len(kids))
        except WorkerGone as e:
            s.errors["memory"] = str(e)
        w.stop()

    def run(self):
        systems = [s for s in SYSTEMS if not self.args.systems or s.key in self.args.systems]
        for s in systems:
            if self.quick and not s.quick:
                s.status = "skipped: not in --quick (it takes seconds to load)"
                continue
            log(f"starting {s.key}...")
            s.proc = self.spawn(s)
            if s.proc is None:
                log(f"  {s.status}")
        live = [s for s in systems if s.proc]
        rounds = self.args.rounds or ROUNDS[self.quick]
        for r in range(rounds):
            order = live if r % 2 == 0 else live[::-1]
            log(f"round {r + 1}/{rounds}: {' '.join(s.key for s in order)}")
            if r == 0 or not self.quick:
                for s in order:
                    self.memory(s)
            for name, (_, n_full, n_quick) in WORKLOADS.items():
                for s in order:
                    n = n_quick if self.quick else n_full
                    self.workload(s, name, s.cold_n if name == "cold" and s.cold_n else n)
            for s in order:
                self.workload(s, "throughput", THROUGHPUT_MS[self.quick])
        for s in live:
            s.proc.stop()
        return systems


def p50(xs):
    xs = sorted(xs)
    return xs[(len(xs) - 1) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def p99(xs):
    xs = sorted(xs)
    return xs[max(0, (len(xs) * 99 + 99) // 100 - 1)]


def figures(s):
    """{metric: value} for one system; latencies in µs, memory in KiB."""
    f = {}
    for name, xs in s.samples.items():
        f[f"{name}.n"] = len(xs)
        f[f"{name}.p50_us"] = p50(xs)
        f[f"{name}.p99_us"] = p99(xs)
    if "tools10.p50_us" in f and "tools1000.p50_us" in f:
        f["per_call.us"] = (f["tools1000.p50_us"] - f["tools10.p50_us"]) / 990
    for name in ("throughput", "memory", "processes"):
        if s.values.get(name):
            f[{"throughput": "throughput.runs_per_s", "memory": "memory.pss_kib",
               "processes": "memory.processes"}[name]] = p50(s.values[name])
    return f


def machine(args):
    def sh(*cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
        except OSError:
            return ""

    model = next((line.split(":", 1)[1].strip() for line in sh("lscpu").splitlines()
                  if line.startswith("Model name")), platform.processor())
    osname = next((line.split("=", 1)[1].strip().strip('"') for line in open("/etc/os-release")
                   if line.startswith("PRETTY_NAME=")), "")
    return {  # key=value name: (table label, value)
        "cpu": ("CPU", f"{model}, {os.cpu_count()} CPUs"),
        "kernel": ("kernel", platform.release()),
        "os": ("OS", osname),
        "python_driver": ("Python (driver)", f"{platform.python_version()} {sys.executable}"),
        "python_workers": ("Python (workers)", sh(args.python, "-c", "import sys; "
                                                  "print(sys.version.split()[0], sys.executable)")),
        "usr_bin_python3": ("/usr/bin/python3 (spawn, bwrap, snapcell's cells)",
                            sh("/usr/bin/python3", "-c", "import sys; print(sys.version.split()[0])")),
        "commit": ("commit", sh("git", "-C", ROOT, "describe", "--always", "--dirty")),
        "date": ("date", time.strftime("%Y-%m-%d %H:%M %Z")),
    }


def fmt_us(us):
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    return f"{us / 1000:.3g} ms" if us >= 1000 else f"{us:.3g} µs"


def ratio(x, base):
    return f" ({x / base:.2g}×)" if base else ""


def missing(s, name):
    """The cell of a figure a system does not have."""
    if name in s.na:
        return f"n/a: {s.na[name]}"
    return f"error: {s.errors[name]}" if name in s.errors else "—"


def cells(s, f, base):
    """The table cells of one system's row, after name and isolation."""
    out = []
    for name in WORKLOADS:
        if f.get(f"{name}.p50_us") is not None:
            p = f[f"{name}.p50_us"]
            out.append(f"{fmt_us(p)} / {fmt_us(f[f'{name}.p99_us'])}"
                       f"{ratio(p, base.get(f'{name}.p50_us'))}")
        else:
            out.append(missing(s, name))
    pc = f.get("per_call.us")
    out.append(f"{fmt_us(pc)}{ratio(pc, base.get('per_call.us'))}" if pc is not None else "—")
    t = f.get("throughput.runs_per_s")
    out.append(f"{t:.0f}/s{ratio(t, base.get('throughput.runs_per_s'))}" if t is not None else
               missing(s, "throughput"))
    m = f.get("memory.pss_kib")
    procs = f.get("memory.processes", 0)
    out.append(f"{m / 1024:.1f} MiB ({procs:.0f} process{'es' if procs != 1 else ''} + host growth)"
               f"{ratio(m, base.get('memory.pss_kib'))}" if m is not None else
               missing(s, "memory"))
    return out


def isolation(s):
    """The system's isolation, with what a snapcell worker reported (each round's worker
    reports it again): whether its cells are reset in place, and the level where it differs
    from the namespaces level the text describes."""
    text = s.isolation
    if s.reuse is not None:
        text += ("; cells reset in place between runs (reuse on)" if s.reuse
                 else "; a newly forked cell per run (reuse off)")
    if s.level == "cgroups":
        return text + "; a memory cgroup per cell (this host gave level cgroups)"
    if s.level and s.level != "namespaces":
        return text + f" (this host gave only: {s.level})"
    return text


def table(systems, info, args):
    lines = ["# snapcell and its peers", ""]
    lines += [f"- {label}: {v}" for label, v in info.values()]
    mode = "quick (smoke: too few samples to compare)" if args.quick else "full"
    lines += [f"- mode: {mode}; rounds: {args.rounds or ROUNDS[1 if args.quick else 0]}, "
              "systems in alternating order", ""]
    lines += ["Latency cells: p50 / p99 of the host-side wall time of one call (ratio of the "
              "p50 to snapcell-c's). Per tool call: (1,000-call run − 10-call run) / 990, p50s. "
              "Throughput: `print(1)` runs per second with one thread per CPU on one "
              "sandbox (ratio > 1 is better than snapcell-c). Memory: PSS of every process one "
              "ready sandbox adds, plus the host process's growth (median over rounds).", ""]
    counts = {}  # figure -> {samples: [systems]}
    for sys_ in systems:
        for name, xs in list(sys_.samples.items()) + list(sys_.values.items()):
            if name != "processes":
                counts.setdefault(name, {}).setdefault(len(xs), []).append(sys_.key)
    if counts:
        def said(by_n):
            most = max(by_n, key=lambda n: len(by_n[n]))
            rest = [f"{' '.join(keys)} {n}" for n, keys in by_n.items() if n != most]
            return f"{most}" + (f" ({', '.join(rest)})" if rest else "")
        lines += ["Samples per system: " + ", ".join(f"{name} {said(by_n)}"
                                                     for name, by_n in counts.items()) + ".", ""]
    head = (["system", "version", "isolation"] + [WORKLOADS[w][0] for w in WORKLOADS] +
            ["per tool call", "throughput", "memory (PSS)"])
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    base = figures(next((s for s in systems if s.key == "snapcell-c"), System("", "", "", "")))
    for s in systems:
        row = [f"{s.name} (`{s.key}`)", s.version or "—", isolation(s)]
        if s.status == "ok":
            row += cells(s, figures(s), base)
        else:
            row += [s.status] + ["—"] * (len(head) - 4)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row) + " |")
    return "\n".join(lines) + "\n"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smoke: few samples, < 60 s")
    ap.add_argument("--rounds", type=int, default=0, help="rounds (default 5, quick 2)")
    ap.add_argument("--out", default=os.path.join(HERE, "results.md"), help="the Markdown table")
    ap.add_argument("--python", default=sys.executable,
                    help="interpreter for the Python-side workers (default: this one)")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"), help="the meson build dir")
    ap.add_argument("--pyodide", default=PYODIDE, help="Pyodide's pyodide.mjs (npm package)")
    ap.add_argument("--reuse", choices=("on", "off", "default"), default="default",
                    help="snapcell's reset in place (snapcell_config_set_reuse) for its rows")
    ap.add_argument("--systems", type=lambda v: v.split(","), default=None,
                    help="comma-separated subset: " + ",".join(s.key for s in SYSTEMS))
    args = ap.parse_args()
    unknown = set(args.systems or ()) - {s.key for s in SYSTEMS}
    if unknown:
        ap.error(f"unknown system {', '.join(sorted(unknown))}")
    return args


def main():
    args = parse_args()
    start = time.monotonic()
    load = os.getloadavg()[0]
    systems = Runner(args).run()
    info = machine(args)
    info["load"] = ("load average (1 min) before / after",
                    f"{load:.2f} / {os.getloadavg()[0]:.2f}")
    info["duration"] = ("duration", f"{time.monotonic() - start:.0f} s")
    info["reuse"] = ("snapcell's reset in place (--reuse)", args.reuse)
    for k, (_, v) in info.items():
        print(f"machine.{k}={v}")
    base = figures(systems[0]) if systems[0].key == "snapcell-c" else {}
    for s in systems:
        print(f"{s.key}.status={s.status}")
        print(f"{s.key}.version={s.version}")
        if s.reuse is not None:
            print(f"{s.key}.reuse={'true' if s.reuse else 'false'}")
        for k, v in figures(s).items():
            counted = k.endswith((".n", ".processes"))
            print(f"{s.key}.{k}={v:.0f}" if counted else f"{s.key}.{k}={v:.1f}")
            if base.get(k) and not counted and s is not systems[0]:
                print(f"{s.key}.{k}.over_snapcell_c={v / base[k]:.3f}")
        for k, v in s.errors.items():
            print(f"{s.key}.{k}.error={v}")
        for k, v in s.na.items():
            print(f"{s.key}.{k}.na={v}")
    with open(args.out, "w") as f:
        f.write(table(systems, info, args))
    log(f"wrote {args.out}")
    return 0 if any(s.status == "ok" for s in systems) else 1


if __name__ == "__main__":
    sys.exit(main())
