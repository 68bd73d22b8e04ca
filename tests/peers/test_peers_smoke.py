"""Smoke of the peer comparison (bench/peers/run.py --quick): it runs, every system gets a row,
snapcell's rows have numbers, and an installed peer is measured. It checks that the runner
works, never what it measured.

Runs with the interpreter pytest runs on: snapcell-py is measured when that interpreter has
the snapcell package (scripts/test-python's venv), monty when it has pydantic-monty. Needs the
build tree (scripts/build) for snapcell's C worker; SNAPCELL_BUILD names another one."""

import importlib.util
import os
import shutil
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("SNAPCELL_BUILD", os.path.join(ROOT, "build"))
SYSTEMS = ["snapcell-c", "snapcell-py", "monty", "bwrap", "spawn", "fork", "hyperlight", "pyodide"]
WORKLOADS = ["fresh", "paced", "compute", "tools10", "tools1000", "cold"]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    if not os.access(os.path.join(BUILD, "bench", "peers", "snapcell-peer-worker"), os.X_OK):
        pytest.fail(f"no snapcell-peer-worker in {BUILD}: run scripts/build first")
    out = tmp_path_factory.mktemp("peers") / "results.md"
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "peers", "run.py"), "--quick",
         "--out", str(out), "--build", BUILD],
        capture_output=True, text=True, timeout=180)
    seconds = time.monotonic() - t0
    assert p.returncode == 0, p.stderr[-2000:]
    kv = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    return kv, out.read_text(), seconds


def installed(system):
    module = {"snapcell-py": "snapcell", "monty": "pydantic_monty",
              "hyperlight": "hyperlight_sandbox"}.get(system)
    if module:
        return importlib.util.find_spec(module) is not None
    return system != "bwrap" or shutil.which("bwrap") is not None


def measured(kv, system):
    missing = [w for w in WORKLOADS if f"{system}.{w}.p50_us" not in kv]
    missing += [k for k in ("throughput.runs_per_s", "memory.pss_kib", "per_call.us")
                if f"{system}.{k}" not in kv]
    errors = {k: v for k, v in kv.items() if k.startswith(system + ".") and k.endswith(".error")}
    return missing, errors


def test_quick_is_quick(quick):
    # A smoke, not the full run's minutes: under 60 s on a quiet machine (docs/benchmarks.md);
    # a fresh, busy 2-core one takes longer, so the bound is generous.
    assert quick[2] < 150, f"--quick took {quick[2]:.0f} s"


def test_machine_is_named(quick):
    kv, table, _ = quick
    for key in ("cpu", "kernel", "python_workers", "usr_bin_python3"):
        assert kv.get(f"machine.{key}"), key
    assert table.startswith("# snapcell and its peers\n")
    assert f"- CPU: {kv['machine.cpu']}" in table


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_system_has_a_row(quick, system):
    kv, table, _ = quick
    rows = [line for line in table.splitlines() if f"(`{system}`)" in line]
    assert len(rows) == 1, table
    status = kv[f"{system}.status"]
    reasons = ("not installed: ", "does not start: ", "skipped: ")
    assert status == "ok" or status.startswith(reasons), status
    if status != "ok":
        assert status in rows[0]  # the reason, never a made-up number
    # The level a worker reports is said once, however many rounds reported it.
    assert rows[0].count("this host gave") <= 1, rows[0]


@pytest.mark.parametrize("system", SYSTEMS)
def test_installed_systems_have_numbers(quick, system):
    kv = quick[0]
    if system == "pyodide":  # not in --quick: loading it takes seconds
        assert kv["pyodide.status"].startswith("skipped: ")
        return
    if system == "hyperlight":  # may not start on this kernel's KVM: then the row says why
        if not kv["hyperlight.status"].startswith(("not installed", "does not start")):
            assert measured(kv, system) == ([], {})
        return
    if not installed(system):
        assert kv[f"{system}.status"].startswith("not installed: ")
        return
    assert kv[f"{system}.status"] == "ok"
    assert measured(kv, system) == ([], {})
    assert float(kv[f"{system}.fresh.p50_us"]) > 0
    if system != "snapcell-c":
        assert f"{system}.fresh.p50_us.over_snapcell_c" in kv


def test_reuse_reaches_the_c_worker(tmp_path):
    # run.py --reuse on: snapcell-c's sandbox resets its cells where the kernel allows it,
    # as `snapcell doctor --reuse` says for this host.
    env = dict(os.environ)
    env.setdefault("SNAPCELL_HELPER", os.path.join(BUILD, "snapcell-cell"))  # as run.py's
    doctor = subprocess.run([os.path.join(BUILD, "cli", "snapcell"), "doctor", "--reuse"],
                            capture_output=True, text=True, timeout=120, env=env)
    line = next((x for x in doctor.stdout.splitlines() if x.startswith("reuse:")), "")
    p = subprocess.run(
        [sys.executable, os.path.join(ROOT, "bench", "peers", "run.py"), "--quick",
         "--systems", "snapcell-c", "--reuse", "on", "--out", str(tmp_path / "r.md"),
         "--build", BUILD],
        capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    kv = dict(x.split("=", 1) for x in p.stdout.splitlines() if "=" in x)
    assert kv.get("machine.reuse") == "on"
    assert kv.get("snapcell-c.reuse") == ("true" if line.split()[1:2] == ["on:"] else "false"), (
        line, kv.get("snapcell-c.reuse"))

