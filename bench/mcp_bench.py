"""What `snapcell mcp` adds to a run over stdio and over HTTP, measured in one run.

Raw JSON-RPC clients, no SDK: one over stdio (newline-delimited JSON to `snapcell mcp`'s
stdin and stdout, after initialize) and one over Streamable HTTP (`snapcell mcp --http`, one
keep-alive connection, `Accept: application/json, text/event-stream`), each timing a
handshake-era `tools/call` of `print(1)` from send to parsed answer. The C API's fresh run of
the same code comes from the same run: with the Python package installed, its raw binding
(`snapcell._native`: the C API plus one dict, a bare config like the server's) is timed in the
same interleaved rounds as the two servers; without it, `snapcell bench --quick`'s
`fresh_p50_us` runs right after the rounds (`c_fresh_source` says which). Then 32 client
threads, each with its own keep-alive connection, call the HTTP server for a few seconds
(`--max-runs` raised to the client count so no call is refused as busy); the load generator
runs on the same cores as the server and its cells, which `mcp_http_load_shares_cores` says.
Every answer is checked (`1` printed, status ok). Prints key=value lines.
Usage: python bench/mcp_bench.py [--runs N] [--load-s S] [--clients N] [--quick]
       [--snapcell PATH] [--c-api auto|binding|cli]"""

import argparse
import http.client
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
CALL = {"jsonrpc": "2.0", "method": "tools/call",
        "params": {"name": "execute_code", "arguments": {"code": "print(1)"}}}
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "mcp_bench", "version": "0"}}}
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def p50(xs):
    return statistics.median(xs)


def p99(xs):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def call_body(n):
    return json.dumps({**CALL, "id": n}).encode()


def check(reply, n):
    """The run's status: "ok" for a call that printed 1, "busy" past the cap; else it exits."""
    result = reply.get("result") if reply.get("id") == n else None
    status = result and result.get("_meta", {}).get("snapcell/run", {}).get("status")
    if status == "ok" and result["content"] == [{"type": "text", "text": "1\n"}]:
        return status
    if status == "busy":
        return status
    sys.exit(f"mcp_bench: call {n} got {json.dumps(reply)[:500]}")


def find_snapcell(given):
    path = given or os.environ.get("SNAPCELL_BIN") or str(ROOT / "build" / "cli" / "snapcell")
    if not os.access(path, os.X_OK):
        path = shutil.which("snapcell")
    if not path:
        sys.exit("mcp_bench: no snapcell CLI (--snapcell, $SNAPCELL_BIN, build/cli/snapcell or PATH)")
    env = dict(os.environ)
    beside = pathlib.Path(path).resolve().parents[1] / "snapcell-cell"
    if "SNAPCELL_HELPER" not in env and beside.exists():
        env["SNAPCELL_HELPER"] = str(beside)  # a build tree's CLI
    return path, env


class Stdio:
    def __init__(self, snapcell, env):
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([snapcell, "mcp"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, env=env)
        self.n = 0
        if "result" not in self.ask(INIT):
            sys.exit("mcp_bench: stdio initialize failed")
        self.proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        self.proc.stdin.flush()

    def ask(self, obj):
        self.proc.stdin.write(json.dumps(obj).encode() + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            sys.exit(f"mcp_bench: snapcell mcp closed stdout: {self.log.read().decode()[-2000:]}")
        return json.loads(line)

    def call(self):
        self.n += 1
        return check(self.ask({**CALL, "id": self.n}), self.n)

    def isolation(self):
        self.n += 1
        return self.ask({**CALL, "id": self.n})["result"]["_meta"]["snapcell/run"]["isolation"]

    def close(self):
        self.proc.stdin.close()
        rc = self.proc.wait(timeout=30)
        self.proc.stdout.close()
        self.log.close()
        if rc != 0:
            sys.exit(f"mcp_bench: snapcell mcp (stdio) exited {rc}")


class HttpServer:
    def __init__(self, snapcell, env, *args):
        self.log = tempfile.NamedTemporaryFile(prefix="mcp-bench-", suffix=".log")
        self.proc = subprocess.Popen([snapcell, "mcp", "--http", "127.0.0.1:0", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.log, env=env)
        self.port, end = None, time.monotonic() + 30
        while self.port is None and time.monotonic() < end and self.proc.poll() is None:
            for line in pathlib.Path(self.log.name).read_text().splitlines():
                if "listening on http://" in line:
                    self.port = int(line.rsplit(":", 1)[1].split("/")[0])
            time.sleep(0.02)
        if self.port is None:
            self.stop()
            sys.exit("mcp_bench: snapcell mcp --http did not start: " +
                     pathlib.Path(self.log.name).read_text())

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


class HttpClient:
    """One keep-alive connection; `reconnects` counts the times it had to open another."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.n = 0
        self.sock = None
        self.reconnects = -1  # the first connection is not a reconnect
        if "result" not in self.ask(json.dumps(INIT).encode()):
            sys.exit("mcp_bench: HTTP initialize failed")

    def ask(self, body):
        if self.conn.sock is None or self.conn.sock is not self.sock:
            self.reconnects += 1
        self.conn.request("POST", "/mcp", body, HEADERS)
        self.sock = self.conn.sock
        resp = self.conn.getresponse()
        data = resp.read()
        if resp.status != 200 or not resp.headers.get("Content-Type", "").startswith("application/json"):
            sys.exit(f"mcp_bench: HTTP {resp.status} {resp.headers.get('Content-Type')}: {data[:500]!r}")
        return json.loads(data)

    def call(self):
        self.n += 1
        return check(self.ask(call_body(self.n)), self.n)

    def close(self):
        self.conn.close()


def binding():
    """A run of the raw binding on a bare config, or None when the package is not installed."""
    try:
        from snapcell import _native, _sandbox
    except ImportError:
        return None
    cfg = _native.Config()
    cfg.set_helper(_sandbox._HELPER)
    sb = _native.Sandbox(cfg)

    def run():
        r = sb.run("print(1)", None)
        if r["status"] != "ok" or r["stdout"] != "1\n":
            sys.exit(f"mcp_bench: the binding's run gave {r['status']}: {r['stderr'][-500:]}")

    return run, sb


def cli_fresh_p50(snapcell, env):
    out = subprocess.run([snapcell, "bench", "--quick"], capture_output=True, text=True,
                         check=True, env=env).stdout
    kv = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return float(kv["fresh_p50_us"])


def load(port, clients, seconds):
    """Calls per second (ok answers) from `clients` threads, and the busy answers."""
    conns = [HttpClient(port) for _ in range(clients)]
    start, stop = threading.Barrier(clients + 1), threading.Event()
    counts = [[0, 0] for _ in range(clients)]

    def work(i):
        start.wait()
        while not stop.is_set():
            counts[i][conns[i].call() != "ok"] += 1

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    reconnects = sum(c.reconnects for c in conns)
    for c in conns:
        c.close()
    return sum(c[0] for c in counts) / elapsed, sum(c[1] for c in counts), reconnects


def timed(fn):
    t = time.perf_counter_ns()
    fn()
    return (time.perf_counter_ns() - t) / 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500, help="rounds of one call of each kind")
    ap.add_argument("--load-s", type=float, default=10.0, help="seconds of the concurrent load")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--quick", action="store_true", help="smoke: 20 rounds, 1 s of load")
    ap.add_argument("--snapcell", help="the CLI (default $SNAPCELL_BIN, build/cli/snapcell, PATH)")
    ap.add_argument("--c-api", choices=("auto", "binding", "cli"), default="auto",
                    help="where the C API's fresh run comes from (auto: the binding if installed)")
    args = ap.parse_args()
    runs, load_s = (20, 1.0) if args.quick else (args.runs, args.load_s)
    snapcell, env = find_snapcell(args.snapcell)

    native = binding() if args.c_api != "cli" else None
    if args.c_api == "binding" and native is None:
        sys.exit("mcp_bench: --c-api binding, but the snapcell package is not importable")
    stdio = Stdio(snapcell, env)
    server = HttpServer(snapcell, env)
    client = HttpClient(server.port)
    try:
        paths = {"stdio": stdio.call, "http": client.call}
        if native:
            paths = {"c_fresh": native[0], **paths}
        isolation = stdio.isolation()
        series = {name: [] for name in paths}
        for fn in paths.values():  # warm each path: the first runs build the parked cells
            for _ in range(5):
                fn()
        print(f"measuring {runs} interleaved rounds...", file=sys.stderr)
        order = list(paths)
        for i in range(runs):
            for name in order if i % 2 == 0 else reversed(order):
                series[name].append(timed(paths[name]))
        stdio.close()
        client.close()
        if native:
            c_source, c_p50 = "python_raw_binding", p50(series["c_fresh"])
            native[1].close()
        else:
            print("running snapcell bench --quick...", file=sys.stderr)
            c_source, c_p50 = "snapcell_bench_quick", cli_fresh_p50(snapcell, env)
    finally:
        server.stop()

    print(f"measuring {load_s:g} s of {args.clients} concurrent HTTP clients...", file=sys.stderr)
    loaded = HttpServer(snapcell, env, "--max-runs", str(max(args.clients, 1)))
    try:
        for _ in range(5):
            HttpClient(loaded.port).call()
        per_s, busy, reconnects = load(loaded.port, args.clients, load_s)
    finally:
        loaded.stop()

    print(f"isolation={isolation}")
    print(f"mcp_runs={runs}")
    print(f"c_fresh_source={c_source}")
    print(f"c_fresh_p50_us={c_p50:.1f}")
    for name in ("stdio", "http"):
        print(f"mcp_{name}_call_p50_us={p50(series[name]):.1f}")
        print(f"mcp_{name}_call_p99_us={p99(series[name]):.1f}")
        print(f"mcp_{name}_added_us={p50(series[name]) - c_p50:.1f}")
    print(f"mcp_http_reconnects={client.reconnects}")
    print(f"mcp_http_load_clients={args.clients}")
    print(f"mcp_http_load_s={load_s:g}")
    print(f"mcp_http_calls_per_s={per_s:.0f}")
    print(f"mcp_http_load_busy={busy}")
    print(f"mcp_http_load_reconnects={reconnects}")
    print(f"mcp_http_load_shares_cores={os.cpu_count()}")


if __name__ == "__main__":
    main()
