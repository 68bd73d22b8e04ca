"""snapcell mcp --config: every key checked (unknown ones refused with their path), limits,
environment and command tools (the CLI's --tool runner) reaching the runs."""
import json
import subprocess
import sys

from test_mcp_protocol import Stdio


def write_config(tmp_path, obj):
    path = tmp_path / "snapcell.json"
    path.write_text(json.dumps(obj))
    return str(path)


def start_fails(snapcell_bin, config):
    path, env = snapcell_bin
    return subprocess.run([path, "mcp", "--config", config], capture_output=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=30)


def test_unknown_keys_are_refused_with_their_path(snapcell_bin, tmp_path):
    for obj, where in (({"limitz": {}}, "limitz: unknown key"),
                       ({"limits": {"wall_seconds": 3}}, "limits.wall_seconds: unknown key"),
                       ({"tools": [{"name": "t", "argv": ["true"], "schemaa": {}}]},
                        "tools[0].schemaa: unknown key"),
                       ({"mounts": [{"host": "/tmp", "paht": "x"}]}, "mounts[0].paht: unknown key"),
                       ({"limits": {"wall_ms": 0}}, "limits.wall_ms: must be a positive integer"),
                       ({"allow": [{"target": "x.example", "header": {}}]},
                        "allow[0].header: unknown key"),
                       ({"allow": [{"target": "x.example", "headers": ["A"]}]},
                        "allow[0]: \"headers\" must be an object"),
                       ({"allow": [{"target": "x.example", "headers": {"A": 1}}]},
                        "allow[0]: \"headers\" values must be strings"),
                       ({"allow": [{"target": "x.example", "headers": {"Host": "y"}}]},
                        "sets or refuses this header"),
                       ({"allow": [{"target": "x.example",
                                    "headers": {"A": "${env:SC_MCP_UNSET_VAR}"}}]},
                        "${env:SC_MCP_UNSET_VAR}: the variable is not set"),
                       ({"uid_range": [2000000000]}, "uid_range: must be [first, count]"),
                       ({"uid_range": [60000, 10000]}, "uid_range: set_uid_range 60000:10000"),
                       ({"max_queued_calls": -1},
                        "max_queued_calls: must be an integer from 0 to 16384"),
                       ({"allow": [{"target": "127.1"}]}, "dotted quad (127.0.0.1)"),
                       ({"warmup": 1}, "warmup: must be a string or an array of strings"),
                       ({"warmup": ["x = 1", 2]}, "warmup: must be an array of strings"),
                       ({"warmup": "#" * 65537}, "warmup: set_warmup: 65537 bytes of code")):
        r = start_fails(snapcell_bin, write_config(tmp_path, obj))
        assert r.returncode == 2, obj
        assert where in r.stderr.decode(), r.stderr
        assert r.stdout == b""


def call(s, code, n=2):
    return s.ask({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                  "params": {"name": "execute_code", "arguments": {"code": code}}})["result"]


def test_config_reaches_the_runs(snapcell_bin, tmp_path):
    (tmp_path / "data.txt").write_text("from the workspace")
    tool = ["/bin/sh", "-c", f"{sys.executable} -c 'import json,sys; a=json.load(sys.stdin); print(json.dumps(a[\"x\"] * 2))'"]
    config = write_config(tmp_path, {
        "limits": {"wall_ms": 5000},  # room for the tool's sh and Python on a busy machine
        "env": {"GREETING": "hello"},
        "workspace": str(tmp_path),
        "allow": [{"target": "https://api.example.com/v1", "methods": ["get"],
                   "headers": {"Authorization": "Bearer ${env:SC_MCP_TOKEN}"}}],
        "tools": [{"name": "double", "argv": tool, "description": "Doubles x.",
                   "schema": {"type": "object", "properties": {"x": {"type": "integer"}},
                              "required": ["x"]}}],
        "max_concurrent_runs": 3,
        "uid_range": [2000000000, 65536],
    })
    path, env = snapcell_bin
    s = Stdio((path, {**env, "SC_MCP_TOKEN": "mcp-s3cret"}), "--config", config)
    s.initialize()
    tools = s.ask({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})["result"]["tools"]
    assert "double" in tools[0]["description"] and "api.example.com" in tools[0]["description"]
    assert ("- https://api.example.com/v1: GET (the host adds the Authorization header)"
            in tools[0]["description"])
    assert "mcp-s3cret" not in json.dumps(tools)
    result = call(s, "import os\nprint(os.environ['GREETING'], call_tool('double', x=21), open('/input/data.txt').read())")
    assert result["content"][0]["text"] == "hello 42 from the workspace\n", result
    result = call(s, "import time\ntime.sleep(30)", 3)
    assert result["isError"] and result["_meta"]["snapcell/run"]["status"] == "timeout"
    assert s.close() == 0


def test_warmup_lines_reach_every_run(snapcell_bin, tmp_path):
    config = write_config(tmp_path, {"warmup": ["import json", "json.primed = [1, 2]",
                                                "print('not in any run')"]})
    path, env = snapcell_bin
    s = Stdio((path, env), "--config", config)
    s.initialize()
    for n in (2, 3):
        result = call(s, "import json\nprint(json.primed)\njson.primed = None", n)
        assert result["content"][0]["text"] == "[1, 2]\n", result
    assert s.close() == 0


def test_a_failing_warmup_is_reported_with_its_line(snapcell_bin, tmp_path):
    config = write_config(tmp_path, {"warmup": ["x = 0", "1 / x"]})
    path, env = snapcell_bin
    r = subprocess.run([path, "mcp", "--config", config], capture_output=True, env=env,
                       input=b"", timeout=30)
    assert r.returncode != 0
    assert "warm-up: ZeroDivisionError: division by zero (at <warmup>:2 `1 / x`)" \
        in r.stderr.decode(), r.stderr


def test_a_helper_that_cannot_start_is_refused_with_its_own_words(snapcell_bin):
    import pathlib
    path, env = snapcell_bin
    helper = pathlib.Path(env["SNAPCELL_HELPER"]).parent / "tests" / "dying-helper-loader"
    for transport in ([], ["--http", "127.0.0.1:0"]):
        r = subprocess.run([path, "mcp", *transport], capture_output=True,
                           env={**env, "SNAPCELL_HELPER": str(helper)}, input=b"", timeout=30)
        assert (r.returncode, r.stdout) == (3, b""), r.stderr
        # Its words, then the interpreter the sandbox would have run (two lines).
        lines = r.stderr.decode().splitlines()
        assert lines[0] == (
            f"snapcell mcp: cannot start the sandbox: helper {helper} exited with status 127 "
            "before its greeting: snapcell-cell: error while loading shared libraries: "
            "libpython3.11.so.1.0: cannot open shared object file: No such file or directory")
        assert [line.split(":")[0] for line in lines[1:]] == ["snapcell mcp"] * 2, lines
        assert lines[1].startswith("snapcell mcp: python: "), lines


def test_network_entries_reach_the_runs_and_their_audit(snapcell_bin, tmp_path):
    import http.server
    import threading

    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"hello")

        def log_message(self, *a):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    try:
        for obj, where in (({"host_map": {"a.example": 5}}, "host_map.a.example: must be a string"),
                           ({"host_map": {"a.example": "nowhere"}}, "not an IPv4 or IPv6 address"),
                           ({"upstream_ca": "/nonexistent/ca.pem"}, "upstream_ca: set_upstream_ca")):
            r = start_fails(snapcell_bin, write_config(tmp_path, obj))
            assert r.returncode == 2 and where in r.stderr.decode(), (obj, r.stderr)
        config = write_config(tmp_path, {"allow": [{"target": f"127.0.0.1:{port}"}]})
        path, env = snapcell_bin
        s = Stdio((path, env), "--config", config)
        s.initialize()
        result = call(s, "import urllib.request\n"
                         f"print(urllib.request.urlopen('http://127.0.0.1:{port}/').read())\n"
                         "try:\n"
                         f"    urllib.request.urlopen('http://127.0.0.1:{port + 1}/')\n"
                         "except OSError as e:\n"
                         "    print(e.reason.strerror)\n")
        assert result["content"][0]["text"] == (
            f"b'hello'\n127.0.0.1:{port + 1} is not on this sandbox's allow list\n"), result
        events = result["_meta"]["snapcell/run"]["network_events"]
        assert [(e["kind"], e["allowed"], e["port"]) for e in events] == [
            ("connect", True, port), ("connect", False, port + 1)]
        assert events[0]["bytes_in"] > 5
        assert s.close() == 0
    finally:
        server.shutdown()
