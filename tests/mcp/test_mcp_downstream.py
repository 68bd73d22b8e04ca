"""Code mode: snapcell mcp connects to downstream MCP servers (tests/mcp/downstream_server.py,
written with the same official SDK, mcp==2.3.0) as a client and offers their tools to the code
as call_tool("notes.add", ...) and tools.notes.add(...). The SDK client drives snapcell over
stdio and HTTP in mode="legacy" and mode="auto"; the downstream runs as snapcell's stdio child
or as a streamable HTTP server on 127.0.0.1 started by the test."""
import asyncio
import http.server
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import anyio

import pytest
from mcp import Client, StdioServerParameters

from conftest import HttpServer, snapcell_env, wait_for

HERE = pathlib.Path(__file__).resolve().parent
SERVER = str(HERE / "downstream_server.py")

# A worked code-mode example: a loop of downstream calls in one run (docs/mcp.md has it too).
LOOP = """import tools
total = 0
for i in range(10):
    total = tools.notes.add(a=total, b=i)["result"]
print("total", total)
print(call_tool("notes.shout", text="done"))
print(tools.notes.search_v2(word="milk", limit=1))
"""


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def texts(result):
    return [c.text for c in result.content if c.type == "text"]


class HttpDownstream:
    """downstream_server.py serving streamable HTTP on a free loopback port, with extra
    environment variables (env) if given."""

    def __init__(self, tmp_path, port=None, env=None):
        port_file = tmp_path / "port"
        self.proc = subprocess.Popen([sys.executable, SERVER, "--http", str(port_file),
                                      *([str(port)] if port else [])],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     env={**os.environ, **(env or {})},
                                     start_new_session=True)
        end = time.monotonic() + 60
        while not port_file.exists() and time.monotonic() < end and self.proc.poll() is None:
            time.sleep(0.05)
        if not port_file.exists():
            self.stop()
            pytest.fail("the HTTP downstream server did not start")
        self.port = int(port_file.read_text())
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def write_config(tmp_path, obj, name="snapcell.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return str(path)


def stdio_server(**extra):
    return {"command": sys.executable, "args": [SERVER], **extra}


@pytest.fixture(scope="module")
def http_downstream(tmp_path_factory):
    server = HttpDownstream(tmp_path_factory.mktemp("downstream"))
    yield server
    server.stop()


@pytest.fixture(scope="module", params=["stdio-downstream", "http-downstream"])
def config(request, tmp_path_factory):
    if request.param == "stdio-downstream":
        notes = stdio_server()
    else:
        notes = {"url": request.getfixturevalue("http_downstream").url}
    return write_config(tmp_path_factory.mktemp("config"),
                        {"mcp_servers": {"notes": notes}, "limits": {"wall_ms": 20000}})


@pytest.fixture(scope="module")
def snapcell_http(config):
    server = HttpServer("--config", config)
    yield server
    server.stop()
    assert server.proc.returncode == 0


@pytest.fixture(params=["stdio", "http"])
def transport(request, config):
    if request.param == "stdio":
        path, env = snapcell_env()
        return StdioServerParameters(command=path, args=["mcp", "--config", config], env=env)
    return request.getfixturevalue("snapcell_http").url


@pytest.fixture(params=["legacy", "auto"])
def mode(request):
    return request.param


def test_code_calls_downstream_tools_in_a_loop(transport, mode):
    async def go():
        async with Client(transport, mode=mode) as client:
            tools = (await client.list_tools()).tools
            return tools, await client.call_tool("execute_code", {"code": LOOP})

    tools, result = run(go())
    assert [t.name for t in tools] == ["execute_code"]
    description = tools[0].description
    # Each downstream tool with its description and parameters, as the code calls it.
    assert "- notes.add: Adds two integers." in description
    assert "- notes.search-v2: (tools.notes.search_v2) Finds notes that mention a word." \
        in description
    assert "    word (string, required)\n    limit (integer, optional, default 10)\n" \
        in description
    assert 'call_tool("server.tool", ...) is tools.server.tool(...)' in description
    assert result.is_error is False, texts(result)
    assert texts(result) == ["total 45\nDONE\n{'result': ['buy milk']}\n"]
    calls = result.meta["snapcell/run"]["tool_calls"]
    assert [c["name"] for c in calls] == ["notes.add"] * 10 + ["notes.shout", "notes.search-v2"]
    assert all(c["ok"] for c in calls)


def test_downstream_is_error_raises_tool_error(transport, mode):
    code = ("import tools\ntry:\n    tools.notes.fail(message='the disk is full')\n"
            "except ToolError as e:\n    print('ToolError:', e)\n"
            "try:\n    tools.notes.add(a='x', b=1)\n"
            "except ToolError as e:\n    print('refused:', 'a:' in str(e))\n")

    async def go():
        async with Client(transport, mode=mode) as client:
            return await client.call_tool("execute_code", {"code": code})

    result = run(go())
    assert not result.is_error, texts(result)
    lines = texts(result)[0].splitlines()
    assert lines[0].startswith("ToolError: notes.fail: ") and "the disk is full" in lines[0]
    # Checked against the downstream's schema on the host, before any call went out.
    assert lines[1] == "refused: True"


def test_runs_in_parallel_share_a_downstream(transport, mode):
    code = ("import tools\nprint(sum(tools.notes.add(a=i, b={n})['result'] for i in range(20)))\n")

    async def go():
        async with Client(transport, mode=mode) as client:
            return await asyncio.gather(*(client.call_tool(
                "execute_code", {"code": code.format(n=n)}) for n in range(4)))

    results = run(go())
    assert [texts(r) for r in results] == [[f"{190 + 20 * n}\n"] for n in range(4)]


def stdio_client(config):
    path, env = snapcell_env()
    return StdioServerParameters(command=path, args=["mcp", "--config", config], env=env)


def call(config, *codes):
    async def go():
        async with Client(stdio_client(config), mode="legacy") as client:
            return [await client.call_tool("execute_code", {"code": c}) for c in codes]

    return run(go())


def test_a_downstream_that_dies_is_a_tool_error_then_restarts(tmp_path):
    config = write_config(tmp_path, {"mcp_servers": {"notes": stdio_server()}})
    first, second = call(
        config,
        "import tools\nprint(tools.notes.calls()['result'], tools.notes.calls()['result'])\n"
        "try:\n    tools.notes.die()\nexcept ToolError as e:\n    print(e)\n",
        "import tools\nprint(tools.notes.calls())\n")
    lines = texts(first)[0].splitlines()
    assert lines[0] == "1 2"
    assert lines[1].startswith("notes.die: server 'notes' stopped: it closed its output"), lines
    assert "exit status 3" in lines[1]
    # The next call starts the server again: a fresh process counts from 1.
    assert texts(second) == ["{'result': 1}\n"]


def test_a_downstream_that_writes_garbage_is_closed_and_restarted(tmp_path):
    config = write_config(tmp_path, {"mcp_servers": {"notes": stdio_server()}})
    result, = call(config,
                   "import tools\ntry:\n    tools.notes.garbage()\nexcept ToolError as e:\n    print(e)\n"
                   "print(tools.notes.add(a=1, b=1))\n"
                   "try:\n    tools.notes.flood()\nexcept ToolError as e:\n    print(e)\n"
                   "print(tools.notes.add(a=2, b=2))\n")
    assert texts(result) == ["notes.garbage: server 'notes' sent a line that is not JSON-RPC "
                             "2.0\n{'result': 2}\n"
                             "notes.flood: server 'notes' sent a message longer than 16 MiB\n"
                             "{'result': 4}\n"]


def test_a_hung_downstream_call_ends_at_the_run_deadline(tmp_path):
    config = write_config(tmp_path, {"mcp_servers": {"notes": stdio_server()},
                                     "limits": {"wall_ms": 3000}})
    start = time.monotonic()
    hung, after = call(config, "import tools\ntools.notes.slow(seconds=60)\n",
                       "import tools\nprint(tools.notes.add(a=2, b=2))\n")
    assert time.monotonic() - start < 30
    assert hung.is_error and hung.meta["snapcell/run"]["status"] == "timeout"
    # The server is still there (the call was cancelled, its late answer dropped).
    assert texts(after) == ["{'result': 4}\n"]


def test_a_chattering_downstream_call_ends_at_the_run_deadline(tmp_path):
    """A server that keeps writing notifications instead of answering must not hold the
    call, and the connection, past the deadline."""
    config = write_config(tmp_path, {"mcp_servers": {"notes": stdio_server()},
                                     "limits": {"wall_ms": 3000}})
    start = time.monotonic()
    hung, after = call(config, "import tools\ntools.notes.chatter(seconds=40)\n",
                       "import tools\ntry:\n    tools.notes.add(a=2, b=2)\n"
                       "except ToolError as e:\n    pass\nprint('next run ended')\n")
    assert time.monotonic() - start < 30
    assert hung.is_error and hung.meta["snapcell/run"]["status"] == "timeout"
    # The next run gets an answer or a tool error in time, not a broken run.
    assert texts(after) == ["next run ended\n"]


def test_nested_calls_per_run_are_capped(tmp_path):
    config = write_config(tmp_path, {"mcp_servers": {"notes": stdio_server()},
                                     "downstream_calls_per_run": 3})
    code = ("import tools\nn = 0\ntry:\n    for i in range(5):\n        tools.notes.add(a=i, b=0)\n"
            "        n += 1\nexcept ToolError as e:\n    print(n, e)\n")
    first, second = call(config, code, code)
    expected = ("3 notes.add: this run already made 3 calls to downstream MCP servers, the "
                "limit (downstream_calls_per_run)\n")
    assert texts(first) == [expected]
    assert texts(second) == [expected]  # counted per run


def start_fails(config):
    path, env = snapcell_env()
    return subprocess.run([path, "mcp", "--config", config], capture_output=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=60)


@pytest.mark.parametrize("server, env, expected", [
    ({"command": "/nonexistent/server"}, {},
     "mcp_servers.notes: server 'notes': cannot start /nonexistent/server: No such file"),
    ({"command": sys.executable, "args": ["-c", "import sys; sys.exit(7)"]}, {},
     "mcp_servers.notes: server 'notes': initialize: server 'notes' stopped: it closed its "
     "output (exit status 7)"),
    ({"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"],
      "timeout_ms": 1000}, {},
     "mcp_servers.notes: server 'notes': initialize: no answer in time"),
    ({"url": "http://127.0.0.1:9/mcp", "timeout_ms": 5000}, {},
     "mcp_servers.notes: server 'notes': initialize: Couldn't connect to server"),
    (stdio_server(env={"NOTES_VARIANT": "clash"}), {},
     "server 'notes': tool 'search_v2': add_tool notes.search_v2: the code would call it as "
     "tools.notes.search_v2, which clashes with tool notes.search-v2 "
     "(tools.notes.search_v2)"),
    (stdio_server(env={"NOTES_VARIANT": "bad_schema"}), {},
     "server 'notes': tool 'iffy': add_tool notes.iffy: schema: properties.x: unknown "
     "keyword 'if'"),
    ({"command": "x", "url": "http://127.0.0.1:1/mcp"}, {},
     "mcp_servers.notes: needs either \"command\" (stdio) or \"url\" (HTTP)"),
    ({"url": "file:///etc/passwd"}, {}, "\"url\" must be an http:// or https:// URL"),
    (stdio_server(env={"A=B": "c"}), {}, "\"env\" names must be non-empty and hold no '='"),
    (stdio_server(args=[SERVER, 1]), {}, "\"args\" and \"env\" must hold strings"),
    ({"url": "http://127.0.0.1:1/mcp", "headers": {"X": "a\r\nB: c"}}, {},
     "\"headers\" must map header names to values without control characters"),
])
def test_startup_failures_name_the_server(tmp_path, server, env, expected):
    r = start_fails(write_config(tmp_path, {"mcp_servers": {"notes": server}}))
    assert r.returncode == 2, r.stderr
    assert expected in r.stderr.decode(), r.stderr


def test_bad_server_names_and_duplicate_tools_are_refused(tmp_path):
    r = start_fails(write_config(tmp_path, {"mcp_servers": {"no.dots": stdio_server()}}))
    assert r.returncode == 2
    assert b"mcp_servers.no.dots: a server name is 1 to 64 characters of [A-Za-z0-9_-]" \
        in r.stderr
    # A command tool of the same full name would be replaced silently: refused instead.
    r = start_fails(write_config(tmp_path, {
        "tools": [{"name": "notes.add", "argv": ["cat"]}],
        "mcp_servers": {"notes": stdio_server()}}))
    assert r.returncode == 2
    assert b"server 'notes': tool 'add': notes.add is already a tool" in r.stderr
    r = start_fails(write_config(tmp_path, {
        "mcp_servers": {"notes": stdio_server()},
        "tools": [{"name": "notes.add", "argv": ["cat"]}]}))
    assert r.returncode == 2
    assert b"tools[0]: a tool of that name is already declared" in r.stderr


def test_an_http_downstream_that_restarts_gets_a_new_session(tmp_path):
    first = HttpDownstream(tmp_path)
    config = write_config(tmp_path, {"mcp_servers": {"notes": {"url": first.url}}})
    second = None
    code = "import tools\ntry:\n    print(tools.notes.calls())\nexcept ToolError as e:\n    print(e)\n"

    async def go():
        nonlocal second
        async with Client(stdio_client(config), mode="legacy") as client:
            got = [await client.call_tool("execute_code", {"code": code})]
            await anyio.to_thread.run_sync(first.stop)
            got.append(await client.call_tool("execute_code", {"code": code}))
            (tmp_path / "port").unlink()
            second = await anyio.to_thread.run_sync(lambda: HttpDownstream(tmp_path, first.port))
            got.append(await client.call_tool("execute_code", {"code": code}))
            return got

    try:
        up, down, again = run(go())
    finally:
        first.stop()
        if second:
            second.stop()
    assert texts(up) == ["{'result': 1}\n"]
    assert texts(down)[0].startswith("notes.calls: Couldn't connect to server"), texts(down)
    # The new process does not know the old Mcp-Session-Id (404): snapcell initializes again.
    assert texts(again) == ["{'result': 1}\n"]


class Broken(http.server.BaseHTTPRequestHandler):
    """A failure-injection double of an HTTP MCP server: a correct handshake and tools/list,
    then tools/call answers that are broken in one way each (named by the tool). The server
    keeps each tools/call's id by tool name (calls) and every notifications/cancelled's
    params (cancelled)."""
    protocol_version = "HTTP/1.1"
    TOOLS = ["not_json", "huge", "hang", "status_500", "wrong_id", "sse_split"]

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", ctype="application/json", headers=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for h in headers:
            self.send_header(*h)
        self.end_headers()
        self.wfile.write(body)

    def do_DELETE(self):
        self.server.deleted.append(self.headers.get("Mcp-Session-Id"))
        self.reply(200)

    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        method, rid = msg.get("method"), msg.get("id")
        ok = lambda result: json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()
        if method == "initialize":
            return self.reply(200, ok({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                       "serverInfo": {"name": "broken", "version": "0"}}),
                              headers=[("Mcp-Session-Id", "s-1")])
        if self.headers.get("Mcp-Session-Id") != "s-1" or \
                self.headers.get("MCP-Protocol-Version") != "2025-06-18":
            return self.reply(400, b'{"error": "no session"}')
        if method == "notifications/initialized":
            return self.reply(202)
        if method == "notifications/cancelled":
            self.server.cancelled.append(msg.get("params"))
            return self.reply(202)
        if method == "tools/list":
            return self.reply(200, ok({"tools": [{"name": n, "inputSchema": {"type": "object"}}
                                                 for n in self.TOOLS]}))
        name = msg["params"]["name"]
        self.server.calls[name] = rid
        if name == "not_json":
            self.reply(200, b"<html>oops</html>")
        elif name == "huge":
            self.reply(200, b" " * (17 << 20))
        elif name == "status_500":
            self.reply(500, b"{}")
        elif name == "wrong_id":
            self.reply(200, json.dumps({"jsonrpc": "2.0", "id": 999999, "result": {}}).encode())
        elif name == "sse_split":
            note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                               "params": {"level": "info", "data": "x"}})
            answer = json.dumps({"jsonrpc": "2.0", "id": rid,
                                 "result": {"content": [], "structuredContent": {"ok": True}}},
                                indent=1)
            data = "".join(f"data: {line}\r\n" for line in answer.splitlines())
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            # A notification, then the answer split over data lines; the stream stays open.
            self.wfile.write(f"event: message\r\ndata: {note}\r\n\r\n{data}\r\n".encode())
            self.wfile.flush()
            time.sleep(30)
        elif name == "hang":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b": waiting\n\n")
            self.wfile.flush()
            time.sleep(60)


@pytest.fixture
def broken_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    server.daemon_threads = True
    server.deleted, server.calls, server.cancelled = [], {}, []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def test_a_broken_http_downstream_gives_clear_tool_errors(tmp_path, broken_server):
    url = f"http://127.0.0.1:{broken_server.server_address[1]}/mcp"
    config = write_config(tmp_path, {"mcp_servers": {"b": {"url": url}},
                                     "limits": {"wall_ms": 15000}})
    code = ("import tools\nfor name in ['not_json', 'huge', 'status_500', 'wrong_id', 'sse_split']:\n"
            "    try:\n        print(name, call_tool('b.' + name))\n"
            "    except ToolError as e:\n        print(name, e)\n")
    start = time.monotonic()
    errors, hung, after = call(config, code, "call_tool('b.hang')\n", code)
    assert time.monotonic() - start < 80
    assert texts(errors) == texts(after) == [
        "not_json b.not_json: the answer (application/json) is not the JSON-RPC response\n"
        "huge b.huge: the answer is longer than 16 MiB\n"
        "status_500 b.status_500: HTTP status 500\n"
        "wrong_id b.wrong_id: the answer (application/json) is not the JSON-RPC response\n"
        "sse_split {'ok': True}\n"]
    assert hung.meta["snapcell/run"]["status"] == "timeout"
    # The server was told that nobody waits for the hung call any more.
    assert {"requestId": broken_server.calls["hang"],
            "reason": "the calling run's deadline passed"} in broken_server.cancelled
    # snapcell mcp ended: it said goodbye to its session.
    assert wait_for(lambda: broken_server.deleted == ["s-1"], 5)


def test_the_example_config_runs_the_documented_loop():
    """examples/mcp/code-mode.json (relative paths: run from the repository root) with the
    worked example of docs/mcp.md."""
    root = HERE.parents[1]
    doc = (root / "docs" / "mcp.md").read_text()
    example = doc.split("```python\n# code mode\n", 1)[1].split("```", 1)[0]
    path, env = snapcell_env()
    params = StdioServerParameters(command=path,
                                   args=["mcp", "--config", "examples/mcp/code-mode.json"],
                                   env=env, cwd=str(root))

    async def go():
        async with Client(params, mode="auto") as client:
            return await client.call_tool("execute_code", {"code": example})

    result = run(go())
    assert not result.is_error, texts(result)
    assert texts(result) == ["milk notes: ['buy milk', 'milk the cow']\n"
                             "sum of squares: 285\n"
                             "BUY MILK\n"]
