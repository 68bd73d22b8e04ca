"""Scale-out on loopback: Debian's haproxy with deploy/haproxy/haproxy.cfg, as shipped, in
front of two `snapcell mcp --http` replicas. The official SDK client's stateless
(2026-07-28) calls spread over both replicas; a handshake-era (2025-11-25) session stays on
the replica that minted its Mcp-Session-Id for every call (without the stick table the other
replica would answer 404). Each replica's config gives its cells REPLICA=<name>, which the
code prints, so every answer says which replica ran it. A stateless call waiting for approval
is retried on the replica holding its run with docs/deploy.md's requestState rule, and
refused by name on the other without it. haproxy is started and stopped here."""
import asyncio
import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time

import sys

import pytest
from mcp import Client, types

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


def start_balanced(tmp, configs, haproxy_cfg, env=None):
    """Replicas with these configs (name: dict) behind haproxy with haproxy_cfg: yields the
    balancer's URL and the replicas."""
    replicas = {}
    try:
        for name, cfg in configs.items():
            config = pathlib.Path(tmp) / f"{name}.json"
            config.write_text(json.dumps(cfg))
            replicas[name] = HttpServer("--config", str(config), "--allow-host", "mcp.internal",
                                        env=env)
        port = free_port()
        lb_env = {**os.environ, "SNAPCELL_LB_BIND": f"127.0.0.1:{port}",
                  **{f"SNAPCELL_REPLICA_{i}": f"127.0.0.1:{replicas[n].port}"
                     for i, n in ((1, "replica1"), (2, "replica2"))}}
        log = open(pathlib.Path(tmp) / "haproxy.log", "w+")
        lb = subprocess.Popen([HAPROXY, "-db", "-f", str(haproxy_cfg)],
                              env=lb_env, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
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


@pytest.fixture(scope="module")
def balanced():
    if not os.access(HAPROXY, os.X_OK):
        pytest.fail("haproxy is not installed (scripts/install-test-deps installs it)")
    with tempfile.TemporaryDirectory(prefix="snapcell-scaleout-") as tmp:
        yield from start_balanced(tmp, {n: {"env": {"REPLICA": n}} for n in ("replica1", "replica2")},
                                  ROOT / "deploy/haproxy/haproxy.cfg")


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


# docs/deploy.md's rule: a stateless retry answering an approval question (docs/approval.md)
# goes to the replica named before '~' in its requestState.
REQUEST_STATE_RULES = """    acl on_replica1 req.body -m reg "\\"requestState\\"[[:space:]]*:[[:space:]]*\\"replica1~"
    acl on_replica2 req.body -m reg "\\"requestState\\"[[:space:]]*:[[:space:]]*\\"replica2~"
    use-server replica1 if on_replica1
    use-server replica2 if on_replica2
"""
REFUND = ("import json, os, sys\na = json.load(sys.stdin)\n"
          "print(json.dumps({'refunded': a['order'], 'by': os.environ['REPLICA']}))\n")


@pytest.fixture(scope="module", params=["with the rule", "without it"])
def balanced_approval(request):
    if not os.access(HAPROXY, os.X_OK):
        pytest.fail("haproxy is not installed (scripts/install-test-deps installs it)")
    with tempfile.TemporaryDirectory(prefix="snapcell-scaleout-") as tmp:
        tool = pathlib.Path(tmp) / "refund.py"
        tool.write_text(REFUND)
        cfg = (ROOT / "deploy/haproxy/haproxy.cfg").read_text()
        if request.param == "with the rule":
            cfg = cfg.replace("    server replica1", REQUEST_STATE_RULES + "    server replica1", 1)
        haproxy_cfg = pathlib.Path(tmp) / "haproxy.cfg"
        haproxy_cfg.write_text(cfg)
        # The tool says which replica ran it, as the code does.
        configs = {n: {"env": {"REPLICA": n}, "replica": n, "approve": ["refund"],
                       "tools": [{"name": "refund",
                                  "argv": ["env", f"REPLICA={n}", sys.executable, str(tool)]}]}
                   for n in ("replica1", "replica2")}
        for balanced in start_balanced(tmp, configs, haproxy_cfg):
            yield request.param, balanced


def test_approval_retries_reach_the_replica_holding_the_run(balanced_approval):
    rule, (url, _) = balanced_approval

    async def approve(context, params):
        return types.ElicitResult(action="accept", content={"approve": True})

    async def go():
        async with Client(url, mode="auto", elicitation_callback=approve) as client:
            out = []
            for i in range(6):
                try:
                    r = await client.call_tool("execute_code", {"code": (
                        f"r = call_tool('refund', order='A-{i}')\n"
                        "import os; print(os.environ['REPLICA'], r['by'], r['refunded'])")})
                    out.append(r.content[0].text.split() if not r.is_error else ["error"])
                except Exception as e:  # the SDK raises the -32602 of a refused retry
                    out.append(["refused", str(e)])
            return client.protocol_version, out

    version, out = run(go())
    assert version == "2026-07-28"
    if rule == "with the rule":
        # every retry reached the replica whose run waited: the tool ran there, once
        assert all(o[0] == o[1] and o[2] == f"A-{i}" for i, o in enumerate(out)), out
        assert {o[0] for o in out} == {"replica1", "replica2"}
    else:
        # round robin sends each retry to the other replica, which refuses it by name
        refused = [o for o in out if o[0] == "refused"]
        assert refused, out
        assert all("belongs to replica" in o[1] for o in refused), refused
