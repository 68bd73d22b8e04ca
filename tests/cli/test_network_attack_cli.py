"""The egress gate against hostile cells, end to end through the CLI: what a cell's code
could do to the host (CPU, memory) or past the allow-list with bytes the gate reads. Test
hosts as in test_network_cli.py (tests/net/testnet.py, names mapped, never DNS). Needs root."""
import json
import os
import pathlib
import resource
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "net"))
import testnet  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="test hosts need root")


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    t = testnet.TestNet(tmp_path_factory.mktemp("net"))
    yield t
    t.close()


def children_cpu_s():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


@pytest.fixture
def run(snapcell, net, tmp_path):
    """Runs code with the given CLI options and the test CA trusted; the result, with the CPU
    seconds the run's processes (the CLI, the gate in it, the cells) used as "cpu_s"."""
    def go(code, *options):
        (tmp_path / "ca.pem").write_bytes(net.ca.read_bytes())
        script = tmp_path / "code.py"
        script.write_text(code)
        extra = ["--input", f"{tmp_path / 'ca.pem'}:ca.pem", "--env", "SSL_CERT_FILE=/input/ca.pem"]
        before = children_cpu_s()
        r = snapcell("run", "--json", *extra, *net.map_args(), *options, script)
        assert r.stdout, r.stderr.decode()
        result = json.loads(r.stdout)
        result["cpu_s"] = children_cpu_s() - before
        return result
    return go


def lines(result):
    assert result["status"] == "ok", result["stderr"]
    return result["stdout"].splitlines()


HALF_HELLOS = """
import socket, time
held = []
for i in range(4):
    s = socket.create_connection(("api.example.test", 443))
    s.sendall(bytes.fromhex("16030102000100") + b"\\x01\\xfc\\x03\\x03")
    held.append(s)
time.sleep(4)
print("held", len(held))
"""


def test_half_a_client_hello_does_not_spin_the_gate(run):
    # A hello cut short leaves the gate waiting for the rest; waiting must not mean polling a
    # socket that stays readable with bytes it already peeked (4 threads at 100% CPU).
    r = run(HALF_HELLOS, "--allow", "api.example.test")
    assert lines(r) == ["held 4"]
    assert r["cpu_s"] < 1.5, r["cpu_s"]
    connects = [e for e in r["network_events"] if e["kind"] == "connect"]
    assert len(connects) == 4 and not any(e["allowed"] for e in connects)
