"""What the egress gate adds to a connection, measured in one run against a direct baseline.

A loopback server (a separate /usr/bin/python3 process) answers each connection with a short
HTTP response, or streams a large body. The same measuring code runs twice: in a cell of a
sandbox that allows the server's address (every connection passes the host's gate), and in a
plain `/usr/bin/python3 -I` process on the host (no gate). Prints key=value lines:
net_connect_p50_us (connect and first byte), net_http_get_p50_us (a whole urllib GET),
net_stream_mb_s (a 256 MiB body), each beside its net_direct_* twin and the ratio or added
time. Usage: python bench/net_bench.py [--runs N] [--quick]"""

import argparse
import json
import socket
import subprocess
import sys

import snapcell

SERVER = r"""
import socket, sys, threading
body = b"x" * (256 << 20)
head = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"
def serve(c):
    try:
        req = c.recv(4096)
        if req.startswith(b"GET /stream"):
            c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body))
            c.sendall(body)
        else:
            c.sendall(head)
    finally:
        c.close()
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(128)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

MEASURE = r"""
import json, socket, statistics, time, urllib.request
port, runs = {port}, {runs}
def p50(xs):
    return statistics.median(xs) / 1000
connect = []
for _ in range(runs):
    t = time.perf_counter_ns()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    s.recv(1)
    connect.append(time.perf_counter_ns() - t)
    s.close()
get = []
for _ in range(runs):
    t = time.perf_counter_ns()
    urllib.request.urlopen(f"http://127.0.0.1:{{port}}/").read()
    get.append(time.perf_counter_ns() - t)
s = socket.create_connection(("127.0.0.1", port))
s.sendall(b"GET /stream HTTP/1.0\r\n\r\n")
buf, got, t = bytearray(1 << 20), 0, time.perf_counter_ns()
while n := s.recv_into(buf):
    got += n
elapsed = (time.perf_counter_ns() - t) / 1e9
print(json.dumps({{"connect": p50(connect), "get": p50(get), "mb_s": got / elapsed / 1e6,
                  "bytes": got}}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="20 connections of each kind")
    args = ap.parse_args()
    runs = 20 if args.quick else args.runs
    server = subprocess.Popen(["/usr/bin/python3", "-I", "-c", SERVER], stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())
        code = MEASURE.format(port=port, runs=runs)
        direct = subprocess.run(["/usr/bin/python3", "-I", "-c", code], capture_output=True,
                                text=True, check=True)
        with snapcell.Sandbox(allowed_domains=[f"127.0.0.1:{port}"], timeout=300) as sb:
            r = sb.run(code)
        if not r.ok:
            sys.exit(f"net_bench: the run failed: {r.stderr}")
        gate, base = json.loads(r.stdout), json.loads(direct.stdout)
        if gate["bytes"] != base["bytes"]:
            sys.exit(f"net_bench: streamed {gate['bytes']} bytes through the gate, "
                     f"{base['bytes']} directly")
        print(f"net_runs={runs}")
        print(f"net_connect_p50_us={gate['connect']:.1f}")
        print(f"net_direct_connect_p50_us={base['connect']:.1f}")
        print(f"net_connect_added_us={gate['connect'] - base['connect']:.1f}")
        print(f"net_http_get_p50_us={gate['get']:.1f}")
        print(f"net_direct_get_p50_us={base['get']:.1f}")
        print(f"net_http_get_added_us={gate['get'] - base['get']:.1f}")
        print(f"net_stream_mb_s={gate['mb_s']:.0f}")
        print(f"net_direct_stream_mb_s={base['mb_s']:.0f}")
        print(f"net_stream_ratio={gate['mb_s'] / base['mb_s']:.2f}")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    main()
