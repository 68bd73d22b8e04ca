"""Results of any size up to the caps reach the official SDK client (mcp==2.3.0) over Streamable
HTTP, in mode="legacy" and mode="auto", with and without progress (issue 20, item 6). Its SSE
reader refuses an event past 1 MiB and ends the session, so: an answer without a progressToken
is one JSON body; an answer streamed with progress gives its big items as resource_link
items, capability URIs that resources/read serves (one JSON body each). The links are
private to the session that made them (handshake era), need the token, expire, and hold result
memory until they do."""
import asyncio
import base64
import hashlib
import json
import re
import time

import pytest
from mcp import Client, MCPError

from conftest import HttpServer
from test_mcp_protocol import post, session

# Default caps: 64 MiB per file, 1 MiB of stdout. The sleep makes the call a real stream
# (progress starts after a second).
FILES = ("import hashlib, os, time\n"
         "time.sleep({sleep})\n"
         "files = {{'big.bin': os.urandom(4 << 20), 'chart.png': os.urandom(3 << 20),\n"
         "         'notes/report.txt': ('line of text\\n' * 80000).encode(),\n"
         "         'small.txt': b'tiny'}}\n"
         "for name, data in files.items():\n"
         "    os.makedirs(os.path.dirname('/output/' + name), exist_ok=True)\n"
         "    open('/output/' + name, 'wb').write(data)\n"
         "print({{n: hashlib.sha256(d).hexdigest() for n, d in files.items()}})\n")


def run(coro, timeout=120):
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.fixture(scope="module")
def server():
    s = HttpServer()
    yield s
    s.stop()
    assert s.proc.returncode == 0


def item_bytes(item):
    """The bytes an embedded item carries."""
    if item.type == "image":
        return base64.b64decode(item.data)
    r = item.resource
    return r.text.encode() if getattr(r, "text", None) is not None else base64.b64decode(r.blob)


async def read_link(client, uri):
    (entry,) = (await client.read_resource(uri, cache_mode="bypass")).contents
    text = getattr(entry, "text", None)
    assert str(entry.uri) == uri
    return entry, text.encode() if text is not None else base64.b64decode(entry.blob)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("progress", [False, True], ids=["json", "progress"])
def test_results_past_an_event_reach_the_sdk_client(server, mode, progress):
    seen = []

    async def on_progress(value, total, message):
        seen.append(value)

    async def go():
        async with Client(server.url, mode=mode) as client:
            result = await client.call_tool(
                "execute_code", {"code": FILES.format(sleep=1.3 if progress else 0)},
                progress_callback=on_progress if progress else None)
            digests = eval(result.content[0].text)
            got, names, links = {}, {}, []
            for item in result.content[1:]:
                if item.type == "resource_link":
                    entry, data = await read_link(client, str(item.uri))
                    links.append(item)
                    assert entry.mime_type == item.mime_type and item.size == len(data)
                    assert (getattr(entry, "text", None) is not None) == (
                        item.mime_type.startswith("text/"))
                elif item.type in ("image", "resource"):
                    data = item_bytes(item)
                else:
                    continue
                path = item.meta["snapcell/path"]
                got[path] = hashlib.sha256(data).hexdigest()
                names[path] = item
            # A client that reads the link twice gets the same bytes.
            for item in links:
                assert hashlib.sha256((await read_link(client, str(item.uri)))[1]).hexdigest() \
                    == digests[item.name]
            return result, digests, got, names, links

    result, digests, got, names, links = run(go())
    assert result.is_error is False
    assert got == digests  # every file, embedded or read back, byte for byte
    if not progress:
        assert links == []
        return
    assert seen, "the call was not streamed"
    # Over the stream, the items past one event went as links, largest first; small ones stay.
    assert {item.name for item in links} >= {"big.bin", "chart.png"}
    assert names["small.txt"].type == "resource"
    for item in links:
        assert re.fullmatch(r"snapcell://result/[0-9a-f]{32}/output/" + re.escape(item.name),
                            str(item.uri))
        assert item.name in item.description


def raw_stream(url, headers, code, token="p"):
    """The raw SSE answer to a streamed call: (each event's field lines' bytes, the answer)."""
    body = {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
            "params": {"name": "execute_code", "arguments": {"code": code},
                       "_meta": {"progressToken": token}}}
    status, raw = post(url, body, headers)
    assert status == 200
    events = raw.decode().split("\n\n")
    sizes = [sum(len(line.encode()) for line in e.split("\n") if not line.startswith(":"))
             for e in events]
    data = [l[6:] for e in events for l in e.split("\n") if l.startswith("data: ")]
    return sizes, json.loads(data[-1])


def test_no_event_is_past_one_mib(server):
    # 1 MiB of stdout (the default cap) and four files of 700 KiB: each fits alone, not together.
    code = ("import os, time\ntime.sleep(1.2)\nprint('x' * ((1 << 20) - 1))\n"
            "for i in range(4):\n    open(f'/output/f{i}.bin', 'wb').write(os.urandom(700 << 10))\n")
    sizes, answer = raw_stream(server.url, session(server.url), code)
    assert max(sizes) <= 1 << 20, sizes
    kinds = [c["type"] for c in answer["result"]["content"]]
    assert "resource_link" in kinds and len(sizes) >= 2, kinds


def test_a_big_stdout_goes_as_a_link_when_its_cap_is_raised(tmp_path):
    config = tmp_path / "snapcell.json"
    config.write_text(json.dumps({"limits": {"stdout_bytes": 6 << 20}}))
    s = HttpServer("--config", str(config))
    code = "import time\ntime.sleep(1.2)\nprint(''.join(chr(97 + i % 26) for i in range(5 << 20)))\n"
    want = "".join(chr(97 + i % 26) for i in range(5 << 20)) + "\n"

    async def go(mode, progress):
        async def on_progress(*args):
            pass
        async with Client(s.url, mode=mode) as client:
            result = await client.call_tool("execute_code", {"code": code},
                                            progress_callback=on_progress if progress else None)
            (item,) = result.content
            if item.type == "text":
                return item.text
            assert item.type == "resource_link" and item.name == "stdout"
            assert item.mime_type == "text/plain" and item.size == len(want)
            entry, data = await read_link(client, str(item.uri))
            return data.decode()

    try:
        for mode in ("legacy", "auto"):
            for progress in (False, True):
                assert run(go(mode, progress)) == want, (mode, progress)
    finally:
        s.stop()


def big_link(url, headers):
    """A streamed call's link to its 2 MiB file: (uri, the file's digest)."""
    code = ("import hashlib, os, time\ntime.sleep(1.2)\nd = os.urandom(2 << 20)\n"
            "open('/output/d.bin', 'wb').write(d)\nprint(hashlib.sha256(d).hexdigest())\n")
    _, answer = raw_stream(url, headers, code)
    content = answer["result"]["content"]
    (link,) = [c for c in content if c["type"] == "resource_link"]
    return link["uri"], content[0]["text"].strip()


def read(url, headers, uri, n=20):
    status, raw = post(url, {"jsonrpc": "2.0", "id": n, "method": "resources/read",
                             "params": {"uri": uri}}, headers)
    return status, json.loads(raw)


def test_another_session_cannot_read_a_link(server):
    mine, other = session(server.url), session(server.url)
    uri, digest = big_link(server.url, mine)
    status, answer = read(server.url, other, uri)
    assert answer["error"]["code"] == -32602 and answer["error"]["data"] == {"uri": uri}
    assert "Resource not found" in answer["error"]["message"]
    status, answer = read(server.url, mine, uri)
    (entry,) = answer["result"]["contents"]
    assert hashlib.sha256(base64.b64decode(entry["blob"])).hexdigest() == digest


def test_a_guessed_uri_fails(server):
    mine = session(server.url)
    uri, _ = big_link(server.url, mine)
    secret = uri.split("/")[3]
    flipped = secret[:-1] + ("0" if secret[-1] != "0" else "1")
    for guess in (uri.replace(secret, flipped), uri.replace(secret, "0" * 32),
                  uri.replace(secret, secret[:16]), uri + "x", uri.rsplit("/", 1)[0] + "/stderr",
                  "snapcell://result/", "file:///output/d.bin", "snapcell://result/../" + secret):
        status, answer = read(server.url, mine, guess)
        assert status == 200 and answer["error"]["code"] == -32602, (guess, answer)
        assert answer["error"]["data"] == {"uri": guess}


def test_links_need_the_token():
    s = HttpServer("--token", "s3cret")
    auth = {"Authorization": "Bearer s3cret"}
    try:
        mine = session(s.url, auth)
        uri, digest = big_link(s.url, mine)
        no_token = {k: v for k, v in mine.items() if k != "Authorization"}
        status, answer = read(s.url, no_token, uri)
        assert status == 401 and "result" not in answer
        status, answer = read(s.url, mine, uri)
        assert hashlib.sha256(base64.b64decode(answer["result"]["contents"][0]["blob"])) \
            .hexdigest() == digest
    finally:
        s.stop()


def test_links_expire_and_hold_result_memory_until_then():
    # 16 MiB of result memory: a result of 6 MiB costs 14 MiB until sent (its base64), its link
    # then holds 6 MiB, so a second such result is busy until the link expires (--link-ttl 5).
    s = HttpServer("--link-ttl", "5", "--result-memory", "16M")
    code = ("import os, time\ntime.sleep(1.2)\n"
            "open('/output/big.bin', 'wb').write(os.urandom(6 << 20))\nprint('done')\n")
    try:
        mine = session(s.url)
        _, answer = raw_stream(s.url, mine, code)
        (link,) = [c for c in answer["result"]["content"] if c["type"] == "resource_link"]
        made = time.monotonic()
        _, again = raw_stream(s.url, mine, code, token="q")
        if time.monotonic() - made < 5:
            assert again["result"]["_meta"]["snapcell/run"]["status"] == "busy", again
        time.sleep(max(0.0, made + 5.5 - time.monotonic()))
        status, gone = read(s.url, mine, link["uri"])
        assert gone["error"]["code"] == -32602
        assert "readable for 5 s" in gone["error"]["message"]
        # The expired link gave its memory back: the same result fits again.
        _, third = raw_stream(s.url, mine, code, token="r")
        assert third["result"]["isError"] is False, third
    finally:
        s.stop()


def test_resources_list_names_no_links(server):
    async def go():
        async with Client(server.url, mode="legacy") as client:
            return ((await client.list_resources()).resources,
                    (await client.list_resource_templates()).resource_templates)

    assert run(go()) == ([], [])


def test_agent_framework_gets_a_big_result_with_its_file_names(server):
    # Agent Framework's MCPStreamableHTTPTool (agent-framework-core, requirements-dev.txt) with
    # the scripted chat client of tests/python: a result past 1 MiB (a 2 MiB file) reaches the
    # agent (as an SSE event it ended the SDK's session). It shows a text file as its bare
    # text, without the URI: the "files in /output" text tells the model which file is which.
    import sys
    from conftest import ROOT
    sys.path.insert(0, str(ROOT / "tests" / "python"))
    from agent_framework import Agent, MCPStreamableHTTPTool
    from scripted_chat import ScriptedChatClient
    client = ScriptedChatClient("import os\nopen('/output/report.txt', 'w').write('all good')\n"
                                "open('/output/big.bin', 'wb').write(os.urandom(2 << 20))\n"
                                "print('done')")

    async def go():
        async with MCPStreamableHTTPTool(name="snapcell", url=server.url) as snapcell:
            agent = Agent(client, instructions="Use execute_code.", tools=snapcell)
            return await agent.run("Write a report.")

    text = run(go()).text
    assert "done" in text and "all good" in text
    assert "report.txt (8 bytes, text/plain)" in text and "big.bin (2097152 bytes" in text


def test_a_session_runs_big_files_go_as_links(tmp_path):
    # A session's run is answered like a fresh one's: streamed with progress, its big file is
    # a link the same session reads back.
    config = tmp_path / "snapcell.json"
    config.write_text(json.dumps({"sessions": {"enabled": True}}))
    s = HttpServer("--config", str(config), env={"XDG_RUNTIME_DIR": str(tmp_path)})
    code = ("import hashlib, os, time\ntime.sleep(1.2)\nd = os.urandom(3 << 20)\n"
            "open('/output/d.bin', 'wb').write(d)\nprint(hashlib.sha256(d).hexdigest())\n")

    async def go():
        async def on_progress(*args):
            pass
        async with Client(s.url, mode="legacy") as client:
            handle = (await client.call_tool("session_new", {})).meta["snapcell/session"]["session"]
            result = await client.call_tool("execute_code", {"code": code, "session": handle},
                                            progress_callback=on_progress)
            (link,) = [c for c in result.content if c.type == "resource_link"]
            _, data = await read_link(client, str(link.uri))
            return result.content[0].text.strip(), hashlib.sha256(data).hexdigest()

    try:
        want, got = run(go())
        assert got == want
    finally:
        s.stop()


def test_ending_a_session_ends_its_links():
    # DELETE of a session frees what its links held at once, not when they expire.
    import urllib.request
    s = HttpServer("--result-memory", "16M")
    code = ("import os, time\ntime.sleep(1.2)\n"
            "open('/output/big.bin', 'wb').write(os.urandom(6 << 20))\nprint('done')\n")
    try:
        mine, other = session(s.url), session(s.url)
        _, answer = raw_stream(s.url, mine, code)
        assert any(c["type"] == "resource_link" for c in answer["result"]["content"])
        _, busy = raw_stream(s.url, other, code, token="q")
        assert busy["result"]["_meta"]["snapcell/run"]["status"] == "busy", busy
        req = urllib.request.Request(s.url, method="DELETE", headers=mine)
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 204
        _, fits = raw_stream(s.url, other, code, token="r")
        assert fits["result"]["isError"] is False, fits
    finally:
        s.stop()
