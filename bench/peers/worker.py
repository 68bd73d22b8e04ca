"""The Python-side workers of the peer comparison (bench/peers/run.py): one system per process,
driven over stdin/stdout by the line protocol in bench/peers/README.md.

`worker.py SYSTEM`, SYSTEM one of snapcell-py, monty, bwrap, spawn, fork, hyperlight. Each run is
timed around the call that makes it and checked against the output it must print; samples go
back raw, statistics are the driver's job. The system's module is imported only after "start",
so the driver's memory baseline excludes it. Not a benchmark on its own."""

import json
import os
import subprocess
import sys
import threading
import time

PACE_S = 0.002
PYTHON = "/usr/bin/python3"  # Debian's; the python3 on PATH is a slow pyenv shim
TOOL_ANSWER = {"ok": True, "n": 3}

# The workloads' code and expected output; bench/peers/worker.c and worker.mjs have the same
# text.
COMPUTE = """import json, re, datetime
d = {'items': [{'id': i, 'name': 'item%d' % i, 'tags': ['a', 'b']} for i in range(50)]}
s = json.dumps(d)
back = json.loads(s)
words = re.findall(r'item(\\d+)', s)
day = datetime.date(2024, 1, 1) + datetime.timedelta(days=len(words))
print(len(back['items']), len(words), day.isoformat())
"""
COMPUTE_WANT = "50 50 2024-02-20\n"
TOOLS = """for i in range({n}):
    r = call_tool('echo', d={{'a': 1, 'b': [1, 2]}})
assert r == {{'ok': True, 'n': 3}}
print(i + 1)
"""


class Failed(Exception):
    pass


def check(what, out, want):
    if out != want:
        raise Failed(f"{what}: printed {out[:80]!r}, want {want!r}")


def echo(d: dict) -> dict:
    """Returns {"ok": true, "n": 3}."""
    return dict(TOOL_ANSWER)


class SnapcellPy:
    """snapcell through its Python package: one Sandbox, each run a fresh cell."""

    def start(self):
        import snapcell

        self.mod = snapcell
        self.sb = self.new()
        return {"version": snapcell.__version__, "isolation": self.sb.isolation}

    def new(self):
        reuse = os.environ.get("SNAPCELL_PEER_REUSE")  # run.py --reuse
        extra = {"reuse": reuse != "0"} if reuse else {}
        sb = self.mod.Sandbox(tools=[echo], **extra)
        r = sb.run("print(1)")
        if r.status != "ok" or r.stdout != "1\n":
            sb.close()
            raise Failed(f"print(1): {r.status} {r.stdout!r} {r.stderr[-300:]!r}")
        return sb

    def run(self, code, want, tools):
        r = self.sb.run(code)
        if r.status != "ok":
            raise Failed(f"status {r.status}: {r.stderr[-300:]!r}")
        check("run", r.stdout, want)

    def cold(self):
        self.new().close()

    def close(self):
        self.sb.close()


class Monty:
    """pydantic-monty: a Rust interpreter of a Python subset in pooled `monty` worker
    processes; a fresh run is a checkout (new session state) plus feed_run."""

    def start(self):
        import pydantic_monty

        self.pm = pydantic_monty
        self.pool = self.new()
        return {"version": pydantic_monty.__version__}

    def new(self):
        pool = self.pm.Monty(min_processes=1)
        pool.__enter__()
        try:
            self.run_in(pool, "print(1)", "1\n", False)
        except BaseException:
            pool.__exit__(None, None, None)
            raise
        return pool

    def run_in(self, pool, code, want, tools):
        out = self.pm.CollectString()
        with pool.checkout() as session:
            if tools:  # the faster of monty's two tool paths: feed_start and resume
                snap = session.feed_start(code, print_callback=out)
                while not isinstance(snap, self.pm.MontyComplete):
                    snap = snap.resume({"return_value": echo(*snap.args, **snap.kwargs)})
            else:
                session.feed_run(code, print_callback=out)
        check("run", out.output, want)

    def run(self, code, want, tools):
        self.run_in(self.pool, code.replace("call_tool('echo', ", "echo("), want, tools)

    def cold(self):
        self.new().__exit__(None, None, None)

    def close(self):
        self.pool.__exit__(None, None, None)


# In a spawned interpreter, tool calls are JSON lines: a request on stdout, the answer on stdin.
SPAWN_TOOL_PRELUDE = """import sys, json
def call_tool(name, **kw):
    sys.stdout.write(json.dumps({'tool': name, 'args': kw}) + '\\n')
    sys.stdout.flush()
    return json.loads(sys.stdin.readline())
"""
HOLD_CODE = "import sys; print('ready', flush=True); sys.stdin.read()"


class Spawn:
    """A new /usr/bin/python3 -I process per run; tools over JSON lines on its stdin/stdout."""

    prefix = []

    def start(self):
        v = subprocess.run([PYTHON, "-c", "import sys; print(sys.version.split()[0])"],
                           capture_output=True, text=True, check=True).stdout.strip()
        info = {"version": f"python {v}"}
        self.run("print(1)", "1\n", False)
        return info

    def argv(self, code):
        return self.prefix + [PYTHON, "-I", "-c", code]

    def run(self, code, want, tools):
        if tools:
            code = SPAWN_TOOL_PRELUDE + code
        p = subprocess.Popen(self.argv(code), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        out = []
        answer = (json.dumps(TOOL_ANSWER) + "\n").encode()
        for line in p.stdout:
            if tools and line.startswith(b'{"tool": '):
                p.stdin.write(answer)
                p.stdin.flush()
            else:
                out.append(line)
        p.stdin.close()
        err = p.stderr.read()
        p.stderr.close()
        p.stdout.close()
        if p.wait() != 0:
            raise Failed(f"exit {p.returncode}: {err[-300:]!r}")
        check("run", b"".join(out).decode(), want)

    def cold(self):
        self.run("print(1)", "1\n", False)

    def hold(self):
        """A ready interpreter waiting on stdin, for the driver to measure."""
        self.held = subprocess.Popen(self.argv(HOLD_CODE), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        check("hold", self.held.stdout.readline().decode(), "ready\n")

    def close(self):
        held = getattr(self, "held", None)
        if held:
            held.stdin.close()
            held.wait()


class Bwrap(Spawn):
    """bubblewrap: new namespaces around a new /usr/bin/python3 -I per run."""

    prefix = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session",
              "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
              "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin",
              "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--"]

    def start(self):
        info = super().start()
        v = subprocess.run(["bwrap", "--version"], capture_output=True, text=True)
        info["version"] = f"{v.stdout.strip()}, {info['version']}"
        return info


# The fork row's server: a ready /usr/bin/python3 -I that forks itself per run, the child
# running the code with its stdout on a pipe; the server answers the child's tool calls (JSON
# lines, as for spawn) as a host would, and reports the output as one JSON line.
FORK_SERVER = """import json, os, sys, re, datetime
answer = (json.dumps(%r) + '\\n').encode()
for line in sys.stdin.buffer:
    code = compile(json.loads(line), '<run>', 'exec')
    out_r, out_w = os.pipe()
    in_r, in_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.dup2(out_w, 1)
        os.dup2(in_r, 0)
        for fd in (out_r, out_w, in_r, in_w):
            os.close(fd)
        try:
            exec(code, {'__name__': '__main__'})
            sys.stdout.flush()
            os._exit(0)
        except BaseException:
            import traceback
            traceback.print_exc()
            os._exit(1)
    os.close(out_w)
    os.close(in_r)
    out = []
    with os.fdopen(out_r, 'rb') as r:
        for got in r:
            if got.startswith(b'{"tool": '):
                os.write(in_w, answer)
            else:
                out.append(got)
    os.close(in_w)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    sys.stdout.write(json.dumps([status, b''.join(out).decode()]) + '\\n')
    sys.stdout.flush()
""" % (TOOL_ANSWER,)


class Fork:
    """CPython forking itself per run, with no isolation: the floor under snapcell's design (a
    fresh copy-on-write copy of a ready interpreter per run). One server per thread."""

    def start(self):
        self.local, self.servers = threading.local(), []
        v = subprocess.run([PYTHON, "-c", "import sys; print(sys.version.split()[0])"],
                           capture_output=True, text=True, check=True).stdout.strip()
        self.run("print(1)", "1\n", False)
        return {"version": f"python {v}"}

    def server(self):
        p = getattr(self.local, "server", None)
        if p is None:
            p = subprocess.Popen([PYTHON, "-I", "-c", FORK_SERVER], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE)
            self.local.server = p
            self.servers.append(p)
        return p

    def run(self, code, want, tools):
        p = self.server()
        p.stdin.write((json.dumps(SPAWN_TOOL_PRELUDE + code if tools else code) + "\n").encode())
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise Failed(f"the fork server ended ({p.wait()})")
        status, out = json.loads(line)
        if status != 0:
            raise Failed(f"exit {status}")
        check("run", out, want)

    def cold(self):
        old = getattr(self.local, "server", None)
        self.local.server = None
        self.run("print(1)", "1\n", False)
        self.stop(self.local.server)
        self.servers.remove(self.local.server)
        self.local.server = old

    @staticmethod
    def stop(p):
        p.stdin.close()
        p.wait()

    def close(self):
        for p in self.servers:
            self.stop(p)


class Hyperlight:
    """hyperlight-sandbox with its Wasm backend and packaged Python guest (a micro-VM)."""

    def start(self):
        from importlib.metadata import version

        import hyperlight_sandbox

        self.mod = hyperlight_sandbox
        self.sb = self.new()
        return {"version": version("hyperlight-sandbox")}

    def new(self):
        sb = self.mod.Sandbox(backend="wasm", module="python_guest.path")
        sb.register_tool("echo", lambda d=None: dict(TOOL_ANSWER))
        check("print(1)", sb.run("print(1)").stdout, "1\n")
        return sb

    def run(self, code, want, tools):
        check("run", self.sb.run(code).stdout, want)

    def cold(self):
        self.new()

    def close(self):
        pass


SYSTEMS = {"snapcell-py": SnapcellPy, "monty": Monty, "bwrap": Bwrap, "spawn": Spawn,
           "fork": Fork, "hyperlight": Hyperlight}

WORKLOADS = {  # name: (code, want, uses tools, pause before each run)
    "fresh": ("print(1)", "1\n", False, 0),
    "paced": ("print(1)", "1\n", False, PACE_S),
    "compute": (COMPUTE, COMPUTE_WANT, False, 0),
    "tools10": (TOOLS.format(n=10), "10\n", True, 0),
    "tools1000": (TOOLS.format(n=1000), "1000\n", True, 0),
}


def answer(**kv):
    for k, v in kv.items():
        sys.stdout.write(f"{k}={' '.join(str(v).split())}\n")
    sys.stdout.write("end\n")
    sys.stdout.flush()


def series(system, name, n):
    samples = []
    for _ in range(n):
        if name == "cold":
            t0 = time.perf_counter_ns()
            system.cold()
        else:
            code, want, tools, pace = WORKLOADS[name]
            if pace:
                time.sleep(pace)
            t0 = time.perf_counter_ns()
            system.run(code, want, tools)
        samples.append((time.perf_counter_ns() - t0) / 1e3)
    return {"us": ",".join(f"{x:.1f}" for x in samples)}


def throughput(system, duration_ms):
    """One thread per CPU running print(1) on the one system for duration_ms."""
    n = os.cpu_count() or 1
    stop = threading.Event()
    done, errors = [0] * n, []

    def loop(i):
        try:
            while not stop.is_set():
                system.run("print(1)", "1\n", False)
                done[i] += 1
        except Exception as e:  # reported below
            errors.append(e)
            stop.set()

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    stop.wait(duration_ms / 1000)
    stop.set()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return {"runs_per_s": f"{sum(done) / (time.perf_counter() - t0):.1f}", "threads": n}


def serve(system):
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        name, n = words[0], int(words[1]) if len(words) > 1 else 0
        try:
            if name in WORKLOADS or name == "cold":
                answer(**series(system, name, n))
            elif name == "throughput":
                answer(**throughput(system, n))
            elif name == "memory":
                if hasattr(system, "hold"):
                    system.hold()
                answer(held=1)
            else:
                answer(error=f"{name}: unknown workload")
        except Exception as e:
            answer(error=f"{name}: {type(e).__name__}: {e}")


def main():
    system = SYSTEMS[sys.argv[1]]()
    print(f"hello pid={os.getpid()}", flush=True)
    if sys.stdin.readline() != "start\n":
        return 2
    try:
        info = system.start()
    except ImportError as e:
        print(f"missing {type(e).__name__}: {e}".replace("\n", " "), flush=True)
        return 1
    except Exception as e:
        print(f"error {type(e).__name__}: {e}".replace("\n", " "), flush=True)
        return 1
    print(f"ready {json.dumps(info)}", flush=True)
    try:
        serve(system)
    finally:
        system.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
