"""Smoke of the MCP bench (bench/mcp_bench.py --quick): it runs and prints every key. It checks
that the bench works, never what it measured (the numbers belong to a shared, noisy machine).

The C API's fresh run comes from `snapcell bench --quick` here, and also from the raw binding
when the interpreter pytest runs on has the snapcell package (scripts/test-python's venv).
Needs the build tree's CLI ($SNAPCELL_BIN or build/cli/snapcell: scripts/build)."""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = os.environ.get("SNAPCELL_BIN", str(ROOT / "build" / "cli" / "snapcell"))
KEYS = ["isolation", "mcp_runs", "mcp_http_client", "c_fresh_source", "c_fresh_p50_us",
        "mcp_stdio_call_p50_us", "mcp_stdio_call_p99_us", "mcp_stdio_added_us",
        "mcp_stdio_ping_p50_us", "mcp_http_ping_p50_us",
        "mcp_http_call_p50_us", "mcp_http_call_p99_us", "mcp_http_added_us",
        "mcp_http_reconnects", "mcp_http_load_clients", "mcp_http_load_s",
        "mcp_http_calls_per_s", "mcp_http_load_busy", "mcp_http_load_reconnects",
        "mcp_http_load_shares_cores"]
SOURCES = {"cli": "snapcell_bench_quick", "binding": "python_raw_binding"}


@pytest.mark.parametrize("c_api", ["cli", "binding"])
def test_quick_prints_every_key(c_api):
    if not os.access(BIN, os.X_OK):
        pytest.fail(f"no snapcell CLI at {BIN}: run scripts/build first")
    if c_api == "binding" and importlib.util.find_spec("snapcell") is None:
        pytest.skip("this interpreter has no snapcell package (scripts/test-python's venv has it)")
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "mcp_bench.py"), "--quick",
                        "--snapcell", BIN, "--c-api", c_api],
                       capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    kv = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    assert [k for k in KEYS if k not in kv] == []
    assert kv["c_fresh_source"] == SOURCES[c_api]
    assert kv["mcp_http_load_clients"] == "32"


def test_baseline_adds_its_keys():
    # --baseline measures a second build in the same rounds; here the same build twice.
    if not os.access(BIN, os.X_OK):
        pytest.fail(f"no snapcell CLI at {BIN}: run scripts/build first")
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "mcp_bench.py"), "--quick",
                        "--snapcell", BIN, "--c-api", "cli", "--baseline", BIN],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    kv = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    wanted = ["baseline_mcp_stdio_call_p50_us", "baseline_mcp_http_call_p50_us",
              "baseline_mcp_http_calls_per_s", "baseline_mcp_http_load_busy"]
    assert [k for k in wanted if k not in kv] == []
