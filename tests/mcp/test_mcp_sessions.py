"""Stateful sessions in snapcell mcp (the config's "sessions"), through the official SDK client
over stdio and HTTP, in both eras: state kept between calls, snapshot and restore, isolation
between sessions, forged and foreign handles, the cap, idle expiry, busy sessions,
cancellation, and the state files snapcell doctor lists."""
import asyncio
import json
import os
import pathlib
import subprocess
import uuid

import anyio
import pytest
from mcp import Client, StdioServerParameters

from conftest import BIG_RUN, HttpServer, big_cells, snapcell_env, wait_for


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def texts(result):
    return [c.text for c in result.content if c.type == "text"]


def status(result):
    return result.meta["snapcell/run"]["status"]


class Server:
    """A sessions-enabled config, its runtime directory (where the state file goes) and a
    transport: stdio parameters (a server per Client) or a running HTTP server."""

    def __init__(self, tmp, kind, extra=None, **sessions):
        self.replica = "t-" + uuid.uuid4().hex[:8]
        self.runtime = tmp / ("run-" + self.replica)
        self.runtime.mkdir()
        self.config = tmp / (self.replica + ".json")
        self.config.write_text(json.dumps({"sessions": {"enabled": True, **sessions},
                                           "replica": self.replica, **(extra or {})}))
        path, env = snapcell_env()
        self.env = {**env, "XDG_RUNTIME_DIR": str(self.runtime)}
        self.http = None
        if kind == "http":
            self.http = HttpServer("--config", str(self.config), env={"XDG_RUNTIME_DIR": str(self.runtime)})
            self.transport = self.http.url
        else:
            self.transport = StdioServerParameters(command=path, args=["mcp", "--config", str(self.config)],
                                                   env=self.env)

    def states(self):
        """The state files in the runtime directory, as written."""
        out = []
        for f in (self.runtime / "snapcell" / "mcp").glob("*.json"):
            try:
                out.append(json.loads(f.read_text()))
            except (OSError, ValueError):
                pass  # replaced while read: never, the rename is atomic; gone: fine
        return [s for s in out if s["replica"] == self.replica]

    def doctor(self, *args):
        path, _ = snapcell_env()
        return subprocess.run([path, "doctor", *args], capture_output=True, text=True, env=self.env,
                              timeout=120)

    def stop(self):
        if self.http:
            self.http.stop()
            assert self.http.proc.returncode == 0


@pytest.fixture(params=["stdio", "http"])
def kind(request):
    return request.param


@pytest.fixture(params=["legacy", "auto"])
def mode(request):
    return request.param


@pytest.fixture
def server(tmp_path, kind):
    s = Server(tmp_path, kind)
    yield s
    s.stop()


async def new_session(client):
    r = await client.call_tool("session_new", {})
    assert r.is_error is False, texts(r)
    return r.meta["snapcell/session"]["session"]


async def execute(client, session, code):
    return await client.call_tool("execute_code", {"code": code, "session": session})


def test_tools_are_listed_with_schemas(server, mode):
    async def go():
        async with Client(server.transport, mode=mode) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(go())}
    assert list(tools) == ["execute_code", "session_new", "session_snapshot", "session_restore",
                           "session_close"]
    assert tools["execute_code"].input_schema["properties"]["session"]["type"] == "string"
    assert tools["session_restore"].input_schema["required"] == ["snapshot"]
    assert "600 s" in tools["session_new"].description


def test_state_kept_between_calls_and_sessions_isolated(server, mode):
    async def go():
        async with Client(server.transport, mode=mode) as client:
            a, b = await new_session(client), await new_session(client)
            assert a != b and a.startswith(server.replica + "~session-")
            assert len(a.rsplit("-", 1)[1]) == 32  # 128 random bits, hex
            assert not (await execute(client, a, "x = 'in a'\nimport json")).is_error
            assert not (await execute(client, b, "x = 'in b'")).is_error
            ra = await execute(client, a, "print(x, json.dumps([1]))")
            rb = await execute(client, b, "print(x)\nprint(json)")
            fresh = await client.call_tool("execute_code", {"code": "print(x)"})
            return ra, rb, fresh

    ra, rb, fresh = run(go())
    assert texts(ra) == ["in a [1]\n"]
    assert ra.meta["snapcell/session"]["alive"] is True
    assert texts(rb)[0] == "in b\n" and "NameError" in texts(rb)[1]  # b never imported json
    assert fresh.is_error and any("NameError" in t for t in texts(fresh))


def test_snapshot_and_restore_bring_back_the_old_state(server, mode):
    async def go():
        async with Client(server.transport, mode=mode) as client:
            s = await new_session(client)
            await execute(client, s, "x = 1\nitems = [1]")
            snap = await client.call_tool("session_snapshot", {"session": s})
            assert not snap.is_error, texts(snap)
            handle = snap.meta["snapcell/session"]["snapshot"]
            assert handle.startswith(server.replica + "~snapshot-")
            changed = await execute(client, s, "x = 2\nitems.append(2)\nprint(x, items)")
            restored = await client.call_tool("session_restore", {"snapshot": handle})
            after = await execute(client, s, "print(x, items)")
            # The snapshot stays usable: a second restore after another change.
            await execute(client, s, "x = 3")
            await client.call_tool("session_restore", {"snapshot": handle})
            again = await execute(client, s, "print(x)")
            return changed, restored, after, again, s

    changed, restored, after, again, s = run(go())
    assert texts(changed) == ["2 [1, 2]\n"]
    assert not restored.is_error and restored.meta["snapcell/session"]["session"] == s
    assert texts(after) == ["1 [1]\n"]
    assert texts(again) == ["1\n"]


def test_forged_foreign_and_wrong_kind_handles_are_refused(server, mode):
    async def go():
        async with Client(server.transport, mode=mode) as client:
            s = await new_session(client)
            secret = s.rsplit("-", 1)[1]
            forged = s[:-1] + ("0" if s[-1] != "0" else "1")
            out = {
                "forged": await execute(client, forged, "print(1)"),
                "garbage": await execute(client, "not a handle", "print(1)"),
                "no_replica": await execute(client, "~session-" + secret, "print(1)"),
                "foreign": await execute(client, "other-replica~session-" + secret, "print(1)"),
                "snapshot_as_session": await execute(client, f"{server.replica}~snapshot-{secret}",
                                                     "print(1)"),
                "session_as_snapshot": await client.call_tool("session_restore", {"snapshot": s}),
                "missing": await client.call_tool("session_snapshot", {}),
                "unknown_snapshot": await client.call_tool(
                    "session_restore", {"snapshot": f"{server.replica}~snapshot-{secret}"}),
                "still_works": await execute(client, s, "print('ok')"),
            }
            return out, forged

    out, forged = run(go())
    assert out["forged"].is_error and status(out["forged"]) == "unknown-handle"
    assert f"unknown session '{forged}'" in texts(out["forged"])[0]
    assert "unknown session 'not a handle'" in texts(out["garbage"])[0]
    assert texts(out["no_replica"])[0].startswith("unknown session '~session-")
    assert "belongs to replica 'other-replica'" in texts(out["foreign"])[0]
    assert server.replica in texts(out["foreign"])[0]
    assert "is a snapshot handle, not a session handle" in texts(out["snapshot_as_session"])[0]
    assert "is a session handle, not a snapshot handle" in texts(out["session_as_snapshot"])[0]
    assert out["missing"].is_error and status(out["missing"]) == "invalid-arguments"
    assert "unknown snapshot" in texts(out["unknown_snapshot"])[0]
    assert texts(out["still_works"]) == ["ok\n"]


def test_the_cap_and_close(tmp_path, kind):
    srv = Server(tmp_path, kind, max=2, max_snapshots=1)

    async def go():
        async with Client(srv.transport) as client:
            a, b = await new_session(client), await new_session(client)
            third = await client.call_tool("session_new", {})
            snap = await client.call_tool("session_snapshot", {"session": a})
            second_snap = await client.call_tool("session_snapshot", {"session": a})
            closed = await client.call_tool("session_close", {"handle": a})
            gone = await execute(client, a, "print(1)")
            snap_gone = await client.call_tool(
                "session_restore", {"snapshot": snap.meta["snapcell/session"]["snapshot"]})
            c = await new_session(client)
            return third, snap, second_snap, closed, gone, snap_gone, c, b

    try:
        third, snap, second_snap, closed, gone, snap_gone, c, b = run(go())
    finally:
        srv.stop()
    assert third.is_error and status(third) == "session-limit"
    assert "2 sessions are open" in texts(third)[0]
    assert not snap.is_error
    assert second_snap.is_error and status(second_snap) == "session-limit"
    assert not closed.is_error
    assert gone.is_error and status(gone) == "unknown-handle"
    assert snap_gone.is_error and "ends with its session" in texts(snap_gone)[0]
    assert c not in (b,)


def test_idle_sessions_expire(tmp_path, kind):
    srv = Server(tmp_path, kind, idle_timeout_s=1)

    async def go():
        async with Client(srv.transport) as client:
            s = await new_session(client)
            await execute(client, s, "x = 1")
            assert len(srv.states()[0]["sessions"]) == 1
            # The sweeper frees it about a second after its last use: poll the state file.
            assert await anyio.to_thread.run_sync(
                lambda: wait_for(lambda: srv.states()[0]["sessions"] == [], 15))
            return await execute(client, s, "print(x)")

    try:
        late = run(go())
    finally:
        srv.stop()
    assert late.is_error and status(late) == "unknown-handle"
    assert "expired after 1 s without use" in texts(late)[0]


def session_busy(srv):
    states = srv.states()
    return bool(states) and any(s["busy"] for s in states[0]["sessions"])


def test_a_busy_session_refuses_a_second_call(server, mode):
    async def go():
        async with Client(server.transport, mode=mode) as client:
            s = await new_session(client)
            results = {}
            async with anyio.create_task_group() as tg:
                async def first():
                    results["first"] = await execute(client, s, "import time\ntime.sleep(3)\nprint('first')")

                tg.start_soon(first)
                assert await anyio.to_thread.run_sync(lambda: wait_for(lambda: session_busy(server), 20))
                results["second"] = await execute(client, s, "print('second')")
            results["after"] = await execute(client, s, "print('after')")
            return results

    r = run(go())
    assert texts(r["first"]) == ["first\n"]
    assert r["second"].is_error and status(r["second"]) == "session-busy"
    assert "is busy with another call" in texts(r["second"])[0]
    assert texts(r["after"]) == ["after\n"]


def test_close_cancels_the_run_in_progress(server):
    async def go():
        async with Client(server.transport) as client:
            s = await new_session(client)
            results = {}
            async with anyio.create_task_group() as tg:
                async def first():
                    results["first"] = await execute(client, s, BIG_RUN)

                tg.start_soon(first)
                assert await anyio.to_thread.run_sync(lambda: wait_for(big_cells, 20))
                results["close"] = await client.call_tool("session_close", {"handle": s})
            assert await anyio.to_thread.run_sync(lambda: wait_for(lambda: not big_cells(), 10))
            return results

    r = run(go())
    assert "was cancelled" in texts(r["close"])[0]
    assert r["first"].is_error and status(r["first"]) == "cancelled"


def test_cancellation_ends_the_run_and_a_snapshot_revives_the_session(server, mode):
    async def go():
        async with Client(server.transport, mode=mode) as client:
            s = await new_session(client)
            await execute(client, s, "x = 41")
            snap = (await client.call_tool("session_snapshot", {"session": s})).meta["snapcell/session"]["snapshot"]
            with anyio.move_on_after(40) as outer:
                async with anyio.create_task_group() as tg:
                    scope = anyio.CancelScope()

                    async def call():
                        with scope:
                            await execute(client, s, BIG_RUN)

                    tg.start_soon(call)
                    assert await anyio.to_thread.run_sync(lambda: wait_for(big_cells, 20))
                    scope.cancel()
            assert not outer.cancelled_caught
            assert await anyio.to_thread.run_sync(lambda: wait_for(lambda: not big_cells(), 10))
            # As in test_mcp_sdk: let the abandoned request's answer land before going on.
            await anyio.sleep(2)  # seconds for an ASan server on a busy machine
            ended = await execute(client, s, "print(x)")
            for _ in range(50):  # the cell is gone; its call may still be finishing
                if not (ended.is_error and status(ended) == "session-busy"):
                    break
                await anyio.sleep(0.1)
                ended = await execute(client, s, "print(x)")
            restored = await client.call_tool("session_restore", {"snapshot": snap})
            after = await execute(client, s, "print(x + 1)")
            return ended, restored, after

    ended, restored, after = run(go())
    assert ended.is_error and status(ended) == "session-ended"
    assert "session_restore" in texts(ended)[0]
    assert not restored.is_error
    assert texts(after) == ["42\n"]


def test_a_timeout_ends_the_session_and_says_so(tmp_path, kind):
    srv = Server(tmp_path, kind, extra={"limits": {"wall_ms": 1000}})

    async def go():
        async with Client(srv.transport) as client:
            s = await new_session(client)
            await execute(client, s, "x = 1")
            killed = await execute(client, s, "while True: pass")
            after = await execute(client, s, "print(x)")
            other = await new_session(client)  # other sessions are untouched
            return s, killed, after, await execute(client, other, "print('fine')")

    try:
        s, killed, after, other = run(go())
    finally:
        srv.stop()
    assert status(killed) == "timeout"
    assert killed.meta["snapcell/session"] == {"session": s, "alive": False}
    assert any(f"This run ended session {s}" in t for t in texts(killed))
    assert after.is_error and status(after) == "session-ended"
    assert f"session {s} has ended" in texts(after)[0]
    assert texts(other) == ["fine\n"]


def test_doctor_lists_servers_and_session_prefixes_only(tmp_path, kind):
    srv = Server(tmp_path, kind)
    state_dir = srv.runtime / "snapcell" / "mcp"
    # A state file left by a server that was killed: doctor must drop it, not list it.
    dead = subprocess.Popen(["true"])
    dead.wait()
    state_dir.mkdir(parents=True, exist_ok=True)
    stale = state_dir / f"{dead.pid}.json"
    stale.write_text(json.dumps({"replica": srv.replica + "-dead", "pid": dead.pid, "start_ticks": 1,
                                 "sessions": []}))

    async def go():
        async with Client(srv.transport) as client:
            s = await new_session(client)
            await execute(client, s, "x = 1")
            await client.call_tool("session_snapshot", {"session": s})
            as_json = await anyio.to_thread.run_sync(lambda: srv.doctor("--json"))
            as_text = await anyio.to_thread.run_sync(srv.doctor)
            files = "".join(f.read_text() for f in state_dir.iterdir())
            return s, as_json, as_text, files

    try:
        s, as_json, as_text, files = run(go())
    finally:
        srv.stop()
    servers = [x for x in json.loads(as_json.stdout)["mcp_servers"] if x["replica"].startswith(srv.replica)]
    assert len(servers) == 1, servers
    info = servers[0]
    assert info["sessions_enabled"] is True and info["idle_timeout_s"] == 600
    assert info["transport"] == ("stdio" if kind == "stdio" else srv.http.url)
    [sess] = info["sessions"]
    prefix = sess["handle_prefix"]
    assert s.startswith(prefix) and len(prefix) <= len(srv.replica) + len("~session-") + 6
    assert sess["snapshots"] == 1 and sess["alive"] is True and sess["busy"] is False
    assert 0 <= sess["idle_s"] <= sess["age_s"] < 120
    assert s.rsplit("-", 1)[1] not in files  # the secret never reaches the file
    assert not stale.exists()
    assert f"replica {srv.replica}" in as_text.stdout and f"session {prefix}..." in as_text.stdout
    # The server removes its file when it exits.
    assert wait_for(lambda: srv.states() == [], 10)


def test_sessions_are_off_by_default(snapcell_bin, kind, http_server):
    path, env = snapcell_bin
    transport = (StdioServerParameters(command=path, args=["mcp"], env=env) if kind == "stdio"
                 else http_server.url)

    async def go():
        async with Client(transport) as client:
            tools = (await client.list_tools()).tools
            r = await client.call_tool("execute_code", {"code": "print(1)", "session": "x~session-0"})
            return tools, r

    tools, r = run(go())
    assert [t.name for t in tools] == ["execute_code"]
    assert r.is_error and status(r) == "sessions-disabled"


@pytest.mark.parametrize("obj, message", [
    ({"sessions": {"enabled": "yes"}}, "sessions.enabled: must be true or false"),
    ({"sessions": {"max": 0}}, "sessions.max: must be an integer from 1 to 4096"),
    ({"sessions": {"idle_timeout_s": -5}}, "sessions.idle_timeout_s: must be an integer"),
    ({"sessions": {"idle": 5}}, "sessions.idle: unknown key"),
    ({"sessions": []}, "sessions: must be an object"),
    ({"replica": "a~b"}, "replica: must be 1 to 63 of the characters"),
    ({"replica": "x" * 64}, "replica: must be 1 to 63"),
])
def test_bad_session_config_is_refused(snapcell_bin, tmp_path, obj, message):
    path, env = snapcell_bin
    config = tmp_path / "c.json"
    config.write_text(json.dumps(obj))
    r = subprocess.run([path, "mcp", "--config", str(config)], capture_output=True, text=True, env=env,
                       stdin=subprocess.DEVNULL, timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_replica_flag_names_the_handles(snapcell_bin, tmp_path):
    path, env = snapcell_bin
    bad = subprocess.run([path, "mcp", "--replica", "no/slash"], capture_output=True, text=True, env=env,
                         stdin=subprocess.DEVNULL, timeout=60)
    assert bad.returncode == 2 and "--replica" in bad.stderr
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"sessions": {"enabled": True}, "replica": "from-config"}))
    runtime = tmp_path / "run"
    runtime.mkdir()
    params = StdioServerParameters(command=path, args=["mcp", "--config", str(config), "--replica", "pod-7"],
                                   env={**env, "XDG_RUNTIME_DIR": str(runtime)})

    async def go():
        async with Client(params) as client:
            return await new_session(client)

    assert run(go()).startswith("pod-7~session-")


@pytest.mark.parametrize("plant", ["symlink", "group-writable"])
def test_a_planted_state_directory_is_not_used(snapcell_bin, tmp_path, plant):
    """Someone who made the state directory first (a link to elsewhere, or one others may
    write) must not get the server's state file or have doctor list files from it, nor make
    doctor remove files (named like a dead server's) from the directory a link leads to."""
    path, env = snapcell_bin
    runtime, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    runtime.mkdir()
    elsewhere.mkdir()
    (runtime / "snapcell").mkdir(mode=0o700)
    planted = runtime / "snapcell" / "mcp"
    if plant == "symlink":
        planted.symlink_to(elsewhere)
    else:
        planted.mkdir()
        planted.chmod(0o777)
    # A file that would pass as a live server's (this process's pid and start time), and one
    # named like a dead server's (no pid is that large), which doctor would remove.
    target = elsewhere if plant == "symlink" else planted
    ticks = int(pathlib.Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    planted_files = sorted([f"{os.getpid()}.json", "999999999.json"])
    for name in planted_files:
        (target / name).write_text(json.dumps({
            "replica": "planted", "pid": os.getpid(), "start_ticks": ticks, "started_unix": 0,
            "sessions": []}))
    env = {**env, "XDG_RUNTIME_DIR": str(runtime)}
    proc = subprocess.Popen([path, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, text=True)
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}) + "\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline())["result"] == {}  # it serves without a file
    doctor = subprocess.run([path, "doctor", "--json"], capture_output=True, text=True, env=env,
                            timeout=120)
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0
    assert "no state file for snapcell doctor" in proc.stderr.read()
    assert sorted(p.name for p in target.iterdir()) == planted_files
    assert json.loads(doctor.stdout)["mcp_servers"] == []
