"""What `snapcell mcp` adds to a run over stdio and over HTTP, measured in one run.

Raw JSON-RPC clients, no SDK: one over stdio (newline-delimited JSON to `snapcell mcp`'s
stdin and stdout, after initialize) and one over Streamable HTTP (`snapcell mcp --http`, one
keep-alive connection, `Accept: application/json, text/event-stream`, the `Mcp-Session-Id`
initialize gave), each timing a handshake-era `tools/call` of `print(1)` from send to parsed
answer, and a `ping` (the transport alone). The HTTP client writes HTTP/1.1 on a plain
socket: http.client's header parsing costs a few hundred microseconds a request on a loaded
machine, more than the server's whole transport (`mcp_http_client` says which). The C API's fresh run of
the same code comes from the same run: with the Python package installed, its raw binding
(`snapcell._native`: the C API plus one dict, a bare config like the server's) is timed in the
same interleaved rounds as the two servers; without it, `snapcell bench --quick`'s
`fresh_p50_us` runs right after the rounds (`c_fresh_source` says which). Then 32 client
threads, each with its own keep-alive connection, call the HTTP server for a few seconds
(`--max-runs` raised to the client count so no call is refused as busy); the load generator
runs on the same cores as the server and its cells, which `mcp_http_load_shares_cores` says.
Every answer is checked (`1` printed, status ok). Prints key=value lines.

`--baseline PATH` compares two builds in one run: another snapcell CLI (say, the previous
commit's) gets the same stdio and HTTP calls in the same interleaved rounds, and the load
alternates between the two servers in windows; its keys carry a `baseline_` prefix.
Usage: python bench/mcp_bench.py [--runs N] [--load-s S] [--clients N] [--quick]
       [--snapcell PATH] [--c-api auto|binding|cli] [--baseline PATH]"""

import argparse
import http.client
import json
import os
import pathlib
import random
import shutil
import socket
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
HEADERS = (b"Content-Type: application/json\r\n"
           b"Accept: application/json, text/event-stream\r\n")


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


def ping_body(n):
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "ping"}).encode()


def check_ping(reply, n):
    if reply.get("id") != n or reply.get("result") != {}:
        sys.exit(f"mcp_bench: ping {n} got {json.dumps(reply)[:500]}")


def find_snapcell(given, env_helper=True):
    path = given or os.environ.get("SNAPCELL_BIN") or str(ROOT / "build" / "cli" / "snapcell")
    if not os.access(path, os.X_OK):
        path = shutil.which("snapcell")
    if not path:
        sys.exit("mcp_bench: no snapcell CLI (--snapcell, $SNAPCELL_BIN, build/cli/snapcell or PATH)")
    env = dict(os.environ)
    beside = pathlib.Path(path).resolve().parents[1] / "snapcell-cell"
    if beside.exists() and ("SNAPCELL_HELPER" not in env or not env_helper):
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

    def ping(self):
        self.n += 1
        check_ping(self.ask({"jsonrpc": "2.0", "id": self.n, "method": "ping"}), self.n)

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
    """One keep-alive connection, HTTP/1.1 written and read on a plain socket (answers with a
    Content-Length, as the server's JSON answers have); `reconnects` counts the times it had
    to open another. Sends the session id initialize gave, as the handshake era asks."""

    def __init__(self, port):
        self.port = port
        self.n = 0
        self.sock = None
        self.session = b""
        self.reconnects = -1  # the first connection is not a reconnect
        reply, headers = self.exchange(json.dumps(INIT).encode())
        if "result" not in reply:
            sys.exit(f"mcp_bench: HTTP initialize failed: {reply}")
        if "mcp-session-id" in headers:
            self.session = b"Mcp-Session-Id: " + headers["mcp-session-id"] + b"\r\n"

    def connect(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.file = self.sock.makefile("rb")
        self.reconnects += 1

    def close(self):
        if self.sock:
            self.file.close()
            self.sock.close()
            self.sock = None

    def exchange(self, body):
        """The parsed answer and its headers (lower-case names, bytes values)."""
        request = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + HEADERS + self.session +
                   b"Content-Length: %d\r\n\r\n" % len(body) + body)
        for attempt in (0, 1):
            if self.sock is None:
                self.connect()
            self.sock.sendall(request)
            status = self.file.readline()
            if status or attempt:
                break
            self.close()  # the server closed the idle connection: once more on a new one
        parts = status.split(None, 2)
        headers = {}
        while (line := self.file.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            headers[name.strip().lower().decode()] = value.strip()
        data = self.file.read(int(headers.get("content-length", b"0")))
        if headers.get("connection", b"").lower() == b"close":
            self.close()
        if len(parts) < 2 or parts[1] != b"200" or \
                not headers.get("content-type", b"").startswith(b"application/json"):
            sys.exit(f"mcp_bench: HTTP {status!r} {headers.get('content-type')}: {data[:500]!r}")
        return json.loads(data), headers

    def ask(self, body):
        return self.exchange(body)[0]

    def call(self):
        self.n += 1
        return check(self.ask(call_body(self.n)), self.n)

    def ping(self):
        self.n += 1
        check_ping(self.ask(ping_body(self.n)), self.n)


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


def load_windows(ports, clients, seconds):
    """load() on each server in turn, `seconds` split into windows that alternate between
    them (the machine's other load then falls on both alike): per server, calls/s, busy
    answers and reconnects."""
    windows = 2 if len(ports) > 1 else 1
    totals = {name: [0.0, 0, 0] for name in ports}
    for _ in range(windows):
        for name, port in ports.items():
            per_s, busy, reconnects = load(port, clients, seconds / windows)
            totals[name][0] += per_s / windows
            totals[name][1] += busy
            totals[name][2] += reconnects
    return totals


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=500, help="rounds of one call of each kind")
    ap.add_argument("--load-s", type=float, default=10.0, help="seconds of the concurrent load")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--quick", action="store_true", help="smoke: 20 rounds, 1 s of load")
    ap.add_argument("--snapcell", help="the CLI (default $SNAPCELL_BIN, build/cli/snapcell, PATH)")
    ap.add_argument("--c-api", choices=("auto", "binding", "cli"), default="auto",
                    help="where the C API's fresh run comes from (auto: the binding if installed)")
    ap.add_argument("--baseline", help="another snapcell CLI measured in the same rounds")
    args = ap.parse_args()
    runs, load_s = (20, 1.0) if args.quick else (args.runs, args.load_s)
    snapcell, env = find_snapcell(args.snapcell)
    builds = {"": (snapcell, env)}
    if args.baseline:
        builds["baseline_"] = find_snapcell(args.baseline, env_helper=False)

    native = binding() if args.c_api != "cli" else None
    if args.c_api == "binding" and native is None:
        sys.exit("mcp_bench: --c-api binding, but the snapcell package is not importable")
    stdios, servers, clients = {}, {}, {}
    try:
        for prefix, (path, build_env) in builds.items():
            stdios[prefix] = Stdio(path, build_env)
            servers[prefix] = HttpServer(path, build_env)
            clients[prefix] = HttpClient(servers[prefix].port)
        paths = {"c_fresh": native[0]} if native else {}
        for prefix in builds:
            paths.update({prefix + "stdio": stdios[prefix].call,
                          prefix + "http": clients[prefix].call,
                          prefix + "stdio_ping": stdios[prefix].ping,
                          prefix + "http_ping": clients[prefix].ping})
        isolation = stdios[""].isolation()
        series = {name: [] for name in paths}
        for fn in paths.values():  # warm each path: the first runs build the parked cells
            for _ in range(5):
                fn()
        print(f"measuring {runs} interleaved rounds...", file=sys.stderr)
        # Each round in its own shuffled order (seeded: the same sequence every run): a call
        # right after another server's run shares the cores with that sandbox refilling its
        # parked cells, so a fixed order would favour whichever path follows a quiet one.
        rng = random.Random(1)
        order = list(paths)
        for _ in range(runs):
            rng.shuffle(order)
            for name in order:
                series[name].append(timed(paths[name]))
        for prefix in builds:
            stdios.pop(prefix).close()
            clients[prefix].close()
        if native:
            c_source, c_p50 = "python_raw_binding", p50(series["c_fresh"])
            native[1].close()
        else:
            print("running snapcell bench --quick...", file=sys.stderr)
            c_source, c_p50 = "snapcell_bench_quick", cli_fresh_p50(snapcell, env)
    finally:
        for server in servers.values():
            server.stop()
        for stdio in stdios.values():
            stdio.proc.kill()

    print(f"measuring {load_s:g} s of {args.clients} concurrent HTTP clients"
          f"{' per build' if args.baseline else ''}...", file=sys.stderr)
    loaded = {}
    try:
        for prefix, (path, build_env) in builds.items():
            loaded[prefix] = HttpServer(path, build_env, "--max-runs", str(max(args.clients, 1)))
            for _ in range(5):
                HttpClient(loaded[prefix].port).call()
        totals = load_windows({p: s.port for p, s in loaded.items()}, args.clients, load_s)
    finally:
        for server in loaded.values():
            server.stop()

    print(f"isolation={isolation}")
    print(f"mcp_runs={runs}")
    print("mcp_http_client=raw_socket")
    print(f"c_fresh_source={c_source}")
    print(f"c_fresh_p50_us={c_p50:.1f}")
    for prefix in builds:
        for name in ("stdio", "http"):
            calls, pings = series[prefix + name], series[prefix + name + "_ping"]
            print(f"{prefix}mcp_{name}_call_p50_us={p50(calls):.1f}")
            print(f"{prefix}mcp_{name}_call_p99_us={p99(calls):.1f}")
            print(f"{prefix}mcp_{name}_added_us={p50(calls) - c_p50:.1f}")
            print(f"{prefix}mcp_{name}_ping_p50_us={p50(pings):.1f}")
        print(f"{prefix}mcp_http_reconnects={clients[prefix].reconnects}")
    print(f"mcp_http_load_clients={args.clients}")
    print(f"mcp_http_load_s={load_s:g}")
    for prefix in builds:
        per_s, busy, reconnects = totals[prefix]
        print(f"{prefix}mcp_http_calls_per_s={per_s:.0f}")
        print(f"{prefix}mcp_http_load_busy={busy}")
        print(f"{prefix}mcp_http_load_reconnects={reconnects}")
    print(f"mcp_http_load_shares_cores={os.cpu_count()}")


if __name__ == "__main__":
    main()
