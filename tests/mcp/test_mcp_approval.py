"""Per-call approval through snapcell mcp (docs/approval.md, "MCP"): a config's "approve" tool
makes the run wait at each call while the MCP client is asked. The official SDK client
(mcp==2.3.0) with an elicitation callback, over stdio and HTTP: in the handshake era
(mode="legacy") the server sends elicitation/create; in the stateless era (mode="auto", which
speaks 2026-07-28 here) the call is answered with an input_required result and the SDK
retries it with the answer. A client without elicitation gets the call refused. Then the
stateless retry at the wire: tampered, foreign, replayed and mismatched requestStates."""
import asyncio
import json
import os
import pathlib
import subprocess
import sys
import time

import urllib.request

import anyio
import pytest
from mcp import Client, StdioServerParameters, types

from conftest import HttpServer, big_cells, snapcell_env, wait_for
from test_mcp_protocol import post

TOOL = """import json, os, sys
a = json.load(sys.stdin)
with open(os.environ["REFUND_LOG"], "a") as f:
    f.write(json.dumps(a) + "\\n")
print(json.dumps({"refunded": a["order"], "amount": a["amount"]}))
"""
SCHEMA = {"type": "object", "properties": {"order": {"type": "string"}, "amount": {"type": "number"}},
          "required": ["order", "amount"]}
ONE = ("print('before', flush=True)\n"
       "r = call_tool('refund', order='A-17', amount=12.5)\n"
       "print('got', r['refunded'], r['amount'])\n")
TRY = ("try:\n    print('got', call_tool('refund', order='A-17', amount=12.5))\n"
       "except Exception as e:\n    print(type(e).__name__, e)\nprint('went on')\n")
MODERN_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
               "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}


def write_config(tmp, extra=None, replica=None):
    tool = tmp / "refund.py"
    tool.write_text(TOOL)
    cfg = {"tools": [{"name": "refund", "argv": [sys.executable, str(tool)],
                      "description": "Refunds an order.", "schema": SCHEMA,
                      "inherit_env": ["REFUND_LOG"]}],
           "approve": ["refund"], **(extra or {})}
    if replica:
        cfg["replica"] = replica
    path = tmp / "snapcell-mcp.json"
    path.write_text(json.dumps(cfg))
    return path


class Setup:
    """A config, the refund log, and a way to reach the server over one transport."""

    def __init__(self, tmp, transport, extra=None):
        self.log = tmp / "refunds.log"
        self.log.write_text("")
        self.config = write_config(tmp, extra)
        path, env = snapcell_env()
        self.env = {**env, "REFUND_LOG": str(self.log)}
        self.http = None
        if transport == "stdio":
            self.target = StdioServerParameters(command=path, args=["mcp", "--config", str(self.config)],
                                                env=self.env)
        else:
            self.http = HttpServer("--config", str(self.config), env={"REFUND_LOG": str(self.log)})
            self.target = self.http.url

    def refunds(self):
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def stop(self):
        if self.http:
            self.http.stop()
            assert self.http.proc.returncode == 0  # under ASan: no leak at exit


@pytest.fixture(params=["stdio", "http"])
def setup(request, tmp_path):
    s = Setup(tmp_path, request.param)
    yield s
    s.stop()


@pytest.fixture(params=["legacy", "auto"])
def mode(request):
    return request.param


def run(coro, timeout=90):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def texts(result):
    return "".join(c.text for c in result.content if c.type == "text")


def answering(*answers):
    """An elicitation callback giving these answers in turn, and the questions it was asked."""
    asked = []

    async def callback(context, params):
        asked.append(params)
        action, content = answers[len(asked) - 1]
        return types.ElicitResult(action=action, content=content)

    return callback, asked


def call(setup, mode, code, callback=None):
    async def go():
        async with Client(setup.target, mode=mode, elicitation_callback=callback) as client:
            return client.protocol_version, await client.call_tool("execute_code", {"code": code})

    version, result = run(go())
    assert version == ("2026-07-28" if mode == "auto" else "2025-11-25")
    return result


def test_approved_call_runs_the_tool_once(setup, mode):
    callback, asked = answering(("accept", {"approve": True}))
    result = call(setup, mode, ONE, callback)
    assert result.is_error is False, texts(result)
    assert texts(result) == "before\ngot A-17 12.5\n"
    assert setup.refunds() == [{"order": "A-17", "amount": 12.5}]
    (q,) = asked
    assert "refund" in q.message and '{"order":"A-17","amount":12.5}' in q.message
    assert q.requested_schema["properties"]["approve"]["type"] == "boolean"
    assert q.requested_schema["required"] == ["approve"]
    run_meta = result.meta["snapcell/run"]
    assert run_meta["status"] == "ok"
    (d,) = run_meta["decisions"]
    assert (d["name"], d["arguments"], d["verdict"], d["decided_by"]) == (
        "refund", {"order": "A-17", "amount": 12.5}, "approved", "mcp-client")
    assert run_meta["tool_calls"][d["call_index"]]["name"] == "refund"
    assert run_meta["tool_calls"][d["call_index"]]["ok"] is True


def test_declined_call_raises_tool_error_and_never_runs(setup, mode):
    callback, asked = answering(("decline", None))
    result = call(setup, mode, TRY, callback)
    assert result.is_error is False
    assert texts(result) == ("ToolError the call to tool 'refund' was rejected: the MCP client's "
                             "user declined it\nwent on\n")
    assert setup.refunds() == []
    (d,) = result.meta["snapcell/run"]["decisions"]
    assert (d["verdict"], d["decided_by"], d["reason"]) == (
        "rejected", "mcp-client", "the MCP client's user declined it")


@pytest.mark.parametrize("action, content, why", [
    ("cancel", None, "dismissed the question without approving it"),
    ("accept", {"approve": False}, "did not approve it"),
    ("accept", {}, "did not approve it"),
])
def test_anything_but_approve_true_rejects(tmp_path, mode, action, content, why):
    s = Setup(tmp_path, "stdio")
    callback, _ = answering((action, content))
    result = call(s, mode, TRY, callback)
    assert why in texts(result) and "went on" in texts(result)
    assert s.refunds() == []


def test_two_calls_are_two_questions(setup, mode):
    code = ("for order in ('A-1', 'A-2'):\n"
            "    try:\n        print(call_tool('refund', order=order, amount=1)['refunded'])\n"
            "    except Exception as e:\n        print('no', order)\n")
    callback, asked = answering(("decline", None), ("accept", {"approve": True}))
    result = call(setup, mode, code, callback)
    assert texts(result) == "no A-1\nA-2\n"
    assert [json.loads(q.message.split("arguments ", 1)[1].split(". Approve")[0])["order"]
            for q in asked] == ["A-1", "A-2"]
    assert setup.refunds() == [{"order": "A-2", "amount": 1}]
    assert [d["verdict"] for d in result.meta["snapcell/run"]["decisions"]] == ["rejected", "approved"]


def test_client_without_elicitation_is_refused(setup, mode):
    result = call(setup, mode, TRY)
    text = texts(result)
    assert "ToolError the call to tool 'refund' was rejected: approval was not possible: the MCP " \
           "client did not declare the elicitation capability" in text
    assert text.endswith("went on\n")
    assert setup.refunds() == []
    (d,) = result.meta["snapcell/run"]["decisions"]
    assert (d["verdict"], d["decided_by"]) == ("rejected", "mcp-client")


def test_tools_without_approve_never_ask(tmp_path, mode):
    s = Setup(tmp_path, "stdio", extra={"approve": []})
    callback, asked = answering()
    result = call(s, mode, ONE, callback)
    assert texts(result) == "before\ngot A-17 12.5\n" and asked == []
    assert result.meta["snapcell/run"]["decisions"] == []


# The stateless retry at the wire (over stdio: one process, newline-delimited JSON-RPC).
class Wire:
    def __init__(self, tmp, extra=None, replica="r1"):
        self.log = tmp / "refunds.log"
        self.log.write_text("")
        path, env = snapcell_env()
        self.proc = subprocess.Popen([path, "mcp", "--config", str(write_config(tmp, extra, replica))],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**env, "REFUND_LOG": str(self.log)})
        self.n = 0

    def request(self, params, method="tools/call"):
        self.n += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.n, "method": method,
                                          "params": params}) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def call(self, code=ONE, meta=MODERN_META, **extra):
        return self.request({"name": "execute_code", "arguments": {"code": code}, "_meta": meta, **extra})

    def close(self):
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


@pytest.fixture
def wire(tmp_path):
    w = Wire(tmp_path)
    yield w
    w.close()


APPROVE = {"approval": {"action": "accept", "content": {"approve": True}}}


def test_input_required_result_shape(wire):
    r = wire.call()["result"]
    assert r["resultType"] == "input_required"
    assert set(r["inputRequests"]) == {"approval"}
    q = r["inputRequests"]["approval"]
    assert q["method"] == "elicitation/create"
    assert q["params"]["mode"] == "form"
    assert q["params"]["_meta"]["snapcell/approval"] == {"tool": "refund",
                                                          "arguments": {"order": "A-17", "amount": 12.5}}
    assert r["requestState"].startswith("r1~approval-") and len(r["requestState"]) == len("r1~approval-") + 32
    assert r["_meta"]["snapcell/run"]["status"] == "paused"
    assert r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "snapcell"
    assert "content" not in r
    # tools/list never answers input_required
    listed = wire.request({"_meta": MODERN_META}, method="tools/list")["result"]
    assert listed["resultType"] == "complete"


def test_retry_without_an_answer_asks_again(wire):
    first = wire.call()["result"]
    again = wire.call(requestState=first["requestState"], inputResponses={"other": {"action": "accept"}})["result"]
    assert again["resultType"] == "input_required"
    assert again["requestState"] == first["requestState"]
    assert again["inputRequests"] == first["inputRequests"]
    done = wire.call(requestState=first["requestState"], inputResponses=APPROVE)["result"]
    assert done["resultType"] == "complete" and done["isError"] is False
    assert done["content"][0]["text"] == "before\ngot A-17 12.5\n"


@pytest.mark.parametrize("tamper", [
    lambda s: s + "-TAMPERED",
    lambda s: s[:-1] + ("0" if s[-1] != "0" else "1"),
    lambda s: "r1~approval-" + "0" * 32,
    lambda s: "",
])
def test_tampered_state_is_an_error_and_runs_nothing(wire, tamper):
    state = wire.call()["result"]["requestState"]
    reply = wire.call(requestState=tamper(state), inputResponses=APPROVE)
    assert reply["error"]["code"] == -32602
    assert "requestState" in reply["error"]["message"]
    assert wire.log.read_text() == ""
    # the real one still works, once
    assert wire.call(requestState=state, inputResponses=APPROVE)["result"]["isError"] is False
    replay = wire.call(requestState=state, inputResponses=APPROVE)
    assert replay["error"]["code"] == -32602 and "answered already" in replay["error"]["message"]
    assert len(wire.log.read_text().splitlines()) == 1


def test_another_replicas_state_is_named(wire):
    state = wire.call()["result"]["requestState"]
    reply = wire.call(requestState="r2~" + state.split("~", 1)[1], inputResponses=APPROVE)
    assert reply["error"]["code"] == -32602
    assert "belongs to replica 'r2', and this is replica 'r1'" in reply["error"]["message"]


def test_retry_with_other_code_is_refused(wire):
    state = wire.call()["result"]["requestState"]
    reply = wire.call(code="print('other')", requestState=state, inputResponses=APPROVE)
    assert reply["error"]["code"] == -32602 and "not the code of the call" in reply["error"]["message"]
    assert wire.log.read_text() == ""


@pytest.mark.parametrize("answer", [12345, {"action": "maybe"}, {"action": "accept", "content": 3}])
def test_malformed_answer_is_an_error(wire, answer):
    state = wire.call()["result"]["requestState"]
    reply = wire.call(requestState=state, inputResponses={"approval": answer})
    assert reply["error"]["code"] == -32602 and "ElicitResult" in reply["error"]["message"]
    assert wire.log.read_text() == ""


def test_retry_after_the_pause_expired_ends_expired(tmp_path):
    w = Wire(tmp_path, extra={"limits": {"pause_ms": 500}})
    try:
        state = w.call()["result"]["requestState"]
        time.sleep(1.5)
        r = w.call(requestState=state, inputResponses=APPROVE)["result"]
        assert r["isError"] is True and r["_meta"]["snapcell/run"]["status"] == "expired"
        assert w.log.read_text() == ""
    finally:
        w.close()


def test_a_session_run_in_the_stateless_era_is_refused(tmp_path):
    w = Wire(tmp_path, extra={"sessions": {"enabled": True}})
    try:
        h = w.request({"name": "session_new", "arguments": {}, "_meta": MODERN_META})
        handle = h["result"]["_meta"]["snapcell/session"]["session"]
        r = w.request({"name": "execute_code", "arguments": {"code": TRY, "session": handle},
                       "_meta": MODERN_META})["result"]
        text = r["content"][0]["text"]
        assert "approval was not possible: a run in a session cannot wait" in text
        assert text.endswith("went on\n") and w.log.read_text() == ""
    finally:
        w.close()


@pytest.mark.parametrize("approve, why", [
    (["nope"], "approve[0]: no such tool"),
    ("refund", "approve: must be an array of tool names"),
    ([1], "approve[0]: must be a tool name"),
])
def test_config_approve_is_checked(tmp_path, approve, why):
    path, env = snapcell_env()
    cfg = write_config(tmp_path, extra={"approve": approve})
    p = subprocess.run([path, "mcp", "--config", str(cfg)], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 2 and why in p.stderr, p.stderr


def test_cancelled_while_asking_ends_the_run(setup):
    """Handshake era: the client cancels the call while its user is being asked; the paused
    cell is killed, the tool never runs, and the server goes on answering."""
    code = "blob = b'x' * (150 << 20)\n" + ONE
    asked = anyio.Event()

    async def callback(context, params):
        asked.set()
        await anyio.sleep(3600)

    async def go():
        async with Client(setup.target, mode="legacy", elicitation_callback=callback) as client:
            async with anyio.create_task_group() as tg:
                scope = anyio.CancelScope()

                async def call():
                    with scope:
                        await client.call_tool("execute_code", {"code": code})

                tg.start_soon(call)
                with anyio.fail_after(30):
                    await asked.wait()
                assert big_cells()
                scope.cancel()
            assert await anyio.to_thread.run_sync(lambda: wait_for(lambda: not big_cells(), 10))
            # The abandoned request's answer lands first (seconds for an ASan server
            # on a busy machine; the client has no event to wait for).
            await anyio.sleep(2)
            again = await client.call_tool("execute_code", {"code": "print('still here')"})
            assert texts(again) == "still here\n"

    run(go())
    assert setup.refunds() == []


def sse_events(response):
    data = []
    for raw in response:
        line = raw.decode().rstrip("\r\n")
        if line.startswith("data: "):
            data.append(line[6:])
        elif not line and data:
            yield json.loads("".join(data))
            data = []


def test_only_the_asking_session_can_answer(tmp_path):
    """Over HTTP the question goes out on the call's SSE stream; an answer from another
    handshake-era session (a guessed id) is ignored, the asked session's answer counts."""
    s = Setup(tmp_path, "http")

    def session():
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"}}}
        req = urllib.request.Request(s.target, data=json.dumps(init).encode(), method="POST", headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        with urllib.request.urlopen(req, timeout=30) as r:
            hdr = {"Mcp-Session-Id": r.headers["Mcp-Session-Id"]}
        assert post(s.target, {"jsonrpc": "2.0", "method": "notifications/initialized"}, hdr)[0] == 202
        return hdr

    try:
        ha, hb = session(), session()
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "execute_code", "arguments": {"code": TRY}}}
        req = urllib.request.Request(s.target, data=json.dumps(body).encode(), method="POST", headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream", **ha})
        with urllib.request.urlopen(req, timeout=60) as stream:
            assert stream.headers["Content-Type"].startswith("text/event-stream")
            events = sse_events(stream)
            question = next(events)
            assert question["method"] == "elicitation/create"
            approve = {"jsonrpc": "2.0", "id": question["id"],
                       "result": {"action": "accept", "content": {"approve": True}}}
            assert post(s.target, approve, hb)[0] == 202
            time.sleep(0.5)
            assert s.refunds() == []
            decline = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}
            assert post(s.target, decline, ha)[0] == 202
            answer = next(events)
        assert answer["id"] == 1
        assert "declined it" in answer["result"]["content"][0]["text"]
        assert s.refunds() == []
    finally:
        s.stop()


def test_a_call_waiting_for_its_user_holds_no_run_slot(tmp_path):
    """With one run slot, a call that waits for its user's answer lets another call run
    meanwhile (the library bounds paused runs apart), then goes on once answered."""
    s = Setup(tmp_path, "stdio", extra={"max_concurrent_runs": 1, "max_queued_calls": 0})
    asked, other_done = anyio.Event(), anyio.Event()

    async def callback(context, params):
        asked.set()
        await other_done.wait()
        return types.ElicitResult(action="accept", content={"approve": True})

    async def go():
        async with Client(s.target, mode="legacy", elicitation_callback=callback) as client:
            results = {}

            async def first():
                results["first"] = await client.call_tool("execute_code", {"code": ONE})

            async with anyio.create_task_group() as tg:
                tg.start_soon(first)
                with anyio.fail_after(30):
                    await asked.wait()
                other = await client.call_tool("execute_code", {"code": "print('other')"})
                results["other"] = other
                other_done.set()
            return results

    results = run(go())
    assert texts(results["other"]) == "other\n"
    assert texts(results["first"]) == "before\ngot A-17 12.5\n"
    assert s.refunds() == [{"order": "A-17", "amount": 12.5}]


def test_a_json_only_http_request_is_refused_not_left_waiting(tmp_path):
    """A handshake-era session that declared elicitation but whose call does not accept an SSE
    stream has no way to receive the question: the call is refused at once, with the reason."""
    s = Setup(tmp_path, "http")
    try:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "t", "version": "1"}}}
        req = urllib.request.Request(s.target, data=json.dumps(init).encode(), method="POST", headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream"})
        with urllib.request.urlopen(req, timeout=30) as r:
            hdr = {"Mcp-Session-Id": r.headers["Mcp-Session-Id"], "Accept": "application/json"}
        start = time.monotonic()
        status, body = post(s.target, {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "execute_code", "arguments": {"code": TRY}}}, hdr)
        assert status == 200 and time.monotonic() - start < 20
        text = json.loads(body)["result"]["content"][0]["text"]
        assert "approval was not possible" in text and "text/event-stream" in text
        assert text.endswith("went on\n") and s.refunds() == []
    finally:
        s.stop()


def test_approve_may_come_before_the_tools_it_names(tmp_path):
    cfg = write_config(tmp_path)
    obj = json.loads(cfg.read_text())
    cfg.write_text(json.dumps({"approve": obj.pop("approve"), **obj}))
    assert cfg.read_text().startswith('{"approve"')
    path, env = snapcell_env()
    p = subprocess.Popen([path, "mcp", "--config", str(cfg)], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env)
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "execute_code", "arguments": {"code": ONE}, "_meta": MODERN_META}}) + "\n")
    p.stdin.flush()
    assert json.loads(p.stdout.readline())["result"]["resultType"] == "input_required"
    p.stdin.close()
    assert p.wait(timeout=30) == 0
