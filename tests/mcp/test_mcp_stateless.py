"""The stateless 2026-07-28 revision at the wire, over stdio and HTTP: server/discover, the
version and capabilities in each request's _meta, resultType and serverInfo on results,
cache hints on lists, the header checks (-32020), unsupported versions (-32022), removed
methods (404 and -32601 over HTTP), and a handshake-era client on the same server."""
import base64
import json

import pytest

from test_mcp_protocol import Stdio, post, session

V = "2026-07-28"
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"


def meta(version=V):
    return {VERSION_KEY: version, CAPS_KEY: {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}}


def request(n, method, params=None, version=V):
    return {"jsonrpc": "2.0", "id": n, "method": method,
            "params": {**(params or {}), "_meta": meta(version)}}


def headers(body, **extra):
    h = {"MCP-Protocol-Version": body["params"]["_meta"][VERSION_KEY], "Mcp-Method": body["method"]}
    if "name" in body["params"]:
        h["Mcp-Name"] = body["params"]["name"]
    return {**h, **extra}


def http(url, body, **extra):
    status, raw = post(url, body, headers(body, **extra))
    text = raw.decode()
    if text.startswith("event:"):  # an SSE answer: its last data line is the response
        text = [l[6:] for l in text.splitlines() if l.startswith("data: ")][-1]
    return status, json.loads(text)


@pytest.fixture
def stdio(snapcell_bin):
    s = Stdio(snapcell_bin)
    yield s
    assert s.close() == 0


def check_complete(result):
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "snapcell"


def check_discover(result):
    check_complete(result)
    assert result["supportedVersions"][0] == V and "2025-11-25" in result["supportedVersions"]
    assert result["capabilities"] == {"tools": {}, "resources": {}}  # no listChanged, no subscribe
    assert "execute_code" in result["instructions"]
    assert result["ttlMs"] > 0 and result["cacheScope"] == "public"


def test_stdio_discover_list_call_without_initialize(stdio):
    check_discover(stdio.ask(request(1, "server/discover"))["result"])
    listed = stdio.ask(request(2, "tools/list"))["result"]
    check_complete(listed)
    assert listed["ttlMs"] > 0 and listed["cacheScope"] == "public"
    assert [t["name"] for t in listed["tools"]] == ["execute_code"]
    called = stdio.ask(request(3, "tools/call", {"name": "execute_code",
                                                 "arguments": {"code": "print(6*7)"}}))["result"]
    check_complete(called)
    assert called["content"][0]["text"] == "42\n"
    assert called["_meta"]["snapcell/run"]["status"] == "ok"


def test_stdio_version_is_per_request(stdio):
    # A handshake-era request after a stateless one is still served by its own era's rules
    # (tools/list before initialize is refused), and the other way round.
    assert "result" in stdio.ask(request(1, "tools/list"))
    assert stdio.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})["error"]["code"] == -32600
    stdio.initialize()
    legacy = stdio.ask({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})["result"]
    assert "resultType" not in legacy and "ttlMs" not in legacy
    assert stdio.ask(request(4, "tools/list"))["result"]["resultType"] == "complete"


def test_stdio_unsupported_version_and_bad_meta(stdio):
    error = stdio.ask(request(1, "tools/list", version="1999-01-01"))["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": [V, "2025-11-25", "2025-06-18", "2025-03-26"],
                             "requested": "1999-01-01"}
    # A handshake-era version in the stateless slot is not served statelessly either.
    assert stdio.ask(request(2, "tools/list", version="2025-11-25"))["error"]["code"] == -32022
    no_caps = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {VERSION_KEY: V}}}
    assert stdio.ask(no_caps)["error"]["code"] == -32602


def test_stdio_removed_methods(stdio):
    for n, method in enumerate(("ping", "initialize", "logging/setLevel")):
        assert stdio.ask(request(n, method))["error"]["code"] == -32601, method


def test_stdio_bad_arguments_are_tool_errors(stdio):
    result = stdio.ask(request(1, "tools/call", {"name": "execute_code", "arguments": {}}))["result"]
    check_complete(result)
    assert result["isError"] is True


def test_http_discover_and_results(http_server):
    url = http_server.url
    status, body = http(url, request(1, "server/discover"))
    assert status == 200
    check_discover(body["result"])
    status, body = http(url, request(2, "tools/list"))
    assert status == 200 and body["result"]["cacheScope"] == "public"
    call = request(3, "tools/call", {"name": "execute_code", "arguments": {"code": "print(6*7)"}})
    status, body = http(url, call)
    assert status == 200 and body["result"]["content"][0]["text"] == "42\n"
    check_complete(body["result"])


def test_http_header_mismatch(http_server):
    url = http_server.url
    body = request(1, "tools/list")
    for extra in ({"Mcp-Method": "prompts/list"}, {"MCP-Protocol-Version": "2025-11-25"}):
        status, reply = http(url, body, **extra)
        assert status == 400 and reply["error"]["code"] == -32020, extra
    status, reply = post(url, body, {"MCP-Protocol-Version": V})  # no Mcp-Method
    assert status == 400 and json.loads(reply)["error"]["code"] == -32020
    call = request(2, "tools/call", {"name": "execute_code", "arguments": {"code": "print(1)"}})
    status, reply = http(url, call, **{"Mcp-Name": "other"})
    assert status == 400 and reply["error"]["code"] == -32020
    status, reply = post(url, call, {"MCP-Protocol-Version": V, "Mcp-Method": "tools/call"})
    assert status == 400 and json.loads(reply)["error"]["code"] == -32020  # no Mcp-Name
    encoded = "=?base64?" + base64.b64encode(b"execute_code").decode() + "?="
    status, reply = http(url, call, **{"Mcp-Name": encoded})
    assert status == 200 and reply["result"]["content"][0]["text"] == "1\n"
    status, reply = http(url, call, **{"Mcp-Name": "=?base64?ZXhlY3V0ZV9jb2Rl=?="})  # not canonical
    assert status == 400 and reply["error"]["code"] == -32020


def test_http_unsupported_version(http_server):
    status, reply = http(http_server.url, request(1, "tools/list", version="1999-01-01"))
    assert status == 400 and reply["error"]["code"] == -32022
    assert reply["error"]["data"]["requested"] == "1999-01-01"
    # Only the header names it (a request without _meta): the same answer.
    status, raw = post(http_server.url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                       {"MCP-Protocol-Version": "2099-01-01", "Mcp-Method": "tools/list"})
    assert status == 400 and json.loads(raw)["error"]["code"] == -32022


def test_http_removed_and_unknown_methods_are_404(http_server):
    for n, method in enumerate(("ping", "initialize", "logging/setLevel", "no/such")):
        status, reply = http(http_server.url, request(n, method))
        assert status == 404 and reply["error"]["code"] == -32601, method


def test_http_missing_meta_is_400(http_server):
    # The header says 2026-07-28, the body carries no _meta: a malformed stateless request.
    status, raw = post(http_server.url, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                       {"MCP-Protocol-Version": V, "Mcp-Method": "tools/list"})
    assert status == 400 and json.loads(raw)["error"]["code"] == -32602


def test_http_handshake_client_still_works(http_server):
    url = http_server.url
    hdr = session(url, {"MCP-Protocol-Version": "2025-11-25"})
    assert post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, hdr) == (202, b"")
    status, raw = post(url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, hdr)
    result = json.loads(raw)["result"]
    assert status == 200 and "resultType" not in result
    status, raw = post(url, {"jsonrpc": "2.0", "id": 3, "method": "ping"}, hdr)
    assert status == 200 and json.loads(raw)["result"] == {}
    status, raw = post(url, {"jsonrpc": "2.0", "id": 4, "method": "no/such"}, hdr)
    assert status == 200 and json.loads(raw)["error"]["code"] == -32601
