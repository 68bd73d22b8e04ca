"""Scale-out on loopback: Debian's haproxy with deploy/haproxy/haproxy.cfg, as shipped, in
front of two `snapcell mcp --http` replicas. The official SDK client's stateless
(2026-07-28) calls spread over both replicas; a handshake-era (2025-11-25) session stays on
the replica that minted its Mcp-Session-Id for every call (without the stick table the other
replica would answer 404). Each replica's config gives its cells REPLICA=<name>, which the
code prints, so every answer says which replica ran it. haproxy is started and stopped here."""
import asyncio
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import pytest
from mcp import Client

from conftest import HttpServer, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
WHO = "import os; print(os.environ['REPLICA'])"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def accepting(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def balanced():
    if not os.access(HAPROXY, os.X_OK):
        pytest.fail("haproxy is not installed (scripts/install-test-deps installs it)")
    with tempfile.TemporaryDirectory(prefix="snapcell-scaleout-") as tmp:
        replicas = {}
        try:
            for name in ("replica1", "replica2"):
                config = pathlib.Path(tmp) / f"{name}.json"
                config.write_text(json.dumps({"env": {"REPLICA": name}}))
                replicas[name] = HttpServer("--config", str(config), "--allow-host", "mcp.internal")
            port = free_port()
            env = {**os.environ, "SNAPCELL_LB_BIND": f"127.0.0.1:{port}",
                   **{f"SNAPCELL_REPLICA_{i}": f"127.0.0.1:{replicas[n].port}"
                      for i, n in ((1, "replica1"), (2, "replica2"))}}
            log = open(pathlib.Path(tmp) / "haproxy.log", "w+")
            lb = subprocess.Popen([HAPROXY, "-db", "-f", str(ROOT / "deploy/haproxy/haproxy.cfg")],
                                  env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            try:
                if not wait_for(lambda: accepting(port) or lb.poll() is not None, 15) or lb.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"haproxy did not start: {log.read()}")
                yield f"http://127.0.0.1:{port}/mcp", replicas
            finally:
                lb.terminate()
                try:
                    lb.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    lb.kill()
                    lb.wait()
                log.close()
        finally:
            for server in replicas.values():
                server.stop()
    for server in replicas.values():
        assert server.proc.returncode == 0


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 120))


async def who_answers(url, mode, calls):
    async with Client(url, mode=mode) as client:
        answers = []
        for _ in range(calls):
            result = await client.call_tool("execute_code", {"code": WHO})
            assert result.is_error is False, result
            answers.append(result.content[0].text.strip())
        return client.protocol_version, answers


def test_stateless_calls_spread_over_both_replicas(balanced):
    url, _ = balanced
    version, answers = run(who_answers(url, "auto", 8))
    assert version == "2026-07-28"
    assert set(answers) == {"replica1", "replica2"}


def test_a_handshake_session_stays_on_one_replica(balanced):
    url, _ = balanced

    async def sessions():
        return await asyncio.gather(*(who_answers(url, "legacy", 6) for _ in range(4)))

    homes = set()
    for version, answers in run(sessions()):
        assert version == "2025-11-25"
        assert len(set(answers)) == 1, answers  # every call of the session on one replica
        homes |= set(answers)
    # Round robin placed the four sessions' initialize calls on both replicas.
    assert homes == {"replica1", "replica2"}


def test_the_balancers_host_name_is_accepted(balanced):
    # Clients of a balancer name it, not the replica, in Host: --allow-host vouches for it.
    import urllib.request
    url, _ = balanced
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "0"}}}
    req = urllib.request.Request(url, data=json.dumps(init).encode(), method="POST", headers={
        "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
        "Host": "mcp.internal"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200 and r.headers["Mcp-Session-Id"]
