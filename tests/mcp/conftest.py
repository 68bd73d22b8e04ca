"""Fixtures for the MCP server tests: the snapcell binary ($SNAPCELL_BIN or build/cli/snapcell)
with the build tree's helper, an HTTP server on a free loopback port, and a way to see the
cells a test left behind (processes below this one holding the memory a test run allocates)."""
import os
import pathlib
import subprocess
import tempfile
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
# What a "big" test run allocates, and the resident size that marks its cell.
BIG_RUN = "import time\nblob = b'x' * (150 << 20)\nprint('started', flush=True)\ntime.sleep(60)\n"
BIG_RSS = 100 << 20


def snapcell_env():
    path = os.environ.get("SNAPCELL_BIN", str(ROOT / "build" / "cli" / "snapcell"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"snapcell binary not found at {path}: build first (scripts/build)")
    helper = os.environ.get("SNAPCELL_HELPER",
                            str(pathlib.Path(path).resolve().parents[1] / "snapcell-cell"))
    return path, {**os.environ, "SNAPCELL_HELPER": helper}


@pytest.fixture(scope="session")
def snapcell_bin():
    return snapcell_env()


def _parent(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def big_cells():
    """Processes below this test process resident past BIG_RSS: cells of BIG_RUN."""
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid, seen = int(name), 0
        p = pid
        while p > 1 and seen < 64:
            p, seen = _parent(p), seen + 1
            if p == me:
                if _rss(pid) > BIG_RSS:
                    found.append(pid)
                break
    return found


def wait_for(predicate, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


class HttpServer:
    def __init__(self, *args, env=None):
        path, base_env = snapcell_env()
        env = {**base_env, **(env or {})}
        self.log = tempfile.NamedTemporaryFile(prefix="snapcell-mcp-", suffix=".log")
        self.proc = subprocess.Popen([path, "mcp", "--http", "127.0.0.1:0", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=self.log, env=env)
        self.port = None
        end = time.monotonic() + 30
        while self.port is None and time.monotonic() < end and self.proc.poll() is None:
            for line in pathlib.Path(self.log.name).read_text().splitlines():
                if "listening on http://" in line:
                    self.port = int(line.rsplit(":", 1)[1].split("/")[0])
            time.sleep(0.05)
        if self.port is None:
            self.stop()
            pytest.fail("snapcell mcp --http did not start: " +
                        pathlib.Path(self.log.name).read_text())
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def http_server():
    server = HttpServer()
    yield server
    server.stop()
    assert server.proc.returncode == 0
