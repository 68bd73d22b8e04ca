"""`snapcell bench`: a short run prints every documented key with a number (never checks what
the numbers are), including the floor measured in the same run, with the default interpreter
and with another one of the matrix (whose missing pandas skips the pandas series); bad options
exit 2."""
import glob
import os
import pathlib
import subprocess

import pytest

KEYS = """runs cold_start_ms fresh_p50_us fresh_p99_us fresh_paced_p50_us fresh_paced_p99_us
compute_fresh_p50_us compute_fresh_p99_us ready_private_kib
parallel_threads runs_per_s template_private_kib parked_cells cell_private_kib tool_calls
tool_call_p50_us tool_call_p99_us tool_call_host_p50_us tool_call_first_us session_runs
session_run_p50_us session_run_p99_us snapshot_us restore_us snapshot_tmp16m_us
restore_tmp16m_us python_spawn_p50_us spawn_over_fresh_p50 spawn_over_paced_p50
spawn_over_cold_start floor_fork_mib floor_fork_exit_p50_us floor_fork_exit_p99_us
floor_fork_exit_cpu_us floor_python_fork_p50_us floor_python_fork_p99_us
floor_python_fork_cpu_us floor_roundtrip_p50_us floor_roundtrip_spin_p50_us
fresh_over_floor_python_fork_p50 paced_over_floor_python_fork_p50
tool_call_over_floor_roundtrip_p50""".split()

PANDAS_KEYS = """pandas_fresh_p50_us pandas_preloaded_fresh_p50_us pandas_preloaded_over_fresh_p50
pandas_preloaded_paced_p50_us pandas_preloaded_paced_over_paced_p50 pandas_primed_fresh_p50_us
pandas_primed_over_fresh_p50 pandas_primed_paced_p50_us
pandas_primed_paced_over_paced_p50""".split()


PYENV_312 = "/root/.pyenv/versions/3.12.1/bin/python3.12"


def debian_pandas_for(version):
    """Whether Debian's pandas is built for this X.Y (what bench's pandas series need)."""
    major, minor = version.split(".")[:2]
    return bool(glob.glob(f"/usr/lib/python3/dist-packages/pandas/_libs/lib.cpython-{major}{minor}-*.so"))


def short_bench(snapcell, *args, run=None, levels=("namespaces", "cgroups", "rlimits")):
    r = (run or snapcell)("bench", "--quick", "--runs", "20", *args, timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    pairs = dict(line.split("=", 1) for line in r.stdout.decode().splitlines())
    assert pairs.pop("isolation") in levels
    measured = debian_pandas_for(pairs["python_version"])
    assert pairs.pop("pandas") == ("measured" if measured else "skipped")
    want = KEYS + (PANDAS_KEYS if measured else [])
    assert set(want) <= set(pairs), sorted(set(want) - set(pairs))
    for key in want:
        assert float(pairs[key]) > 0, (key, pairs[key])
    if not measured:
        assert not set(PANDAS_KEYS) & set(pairs), pairs
    assert "measuring the floor: round trips to a process" in r.stderr.decode()
    return pairs, r.stderr.decode()


def test_a_short_bench_prints_every_key_with_a_number(snapcell):
    short_bench(snapcell)


def test_bench_runs_the_interpreter_given_and_skips_pandas_it_cannot_import(snapcell):
    if not os.access(PYENV_312, os.X_OK):
        pytest.skip(f"needs pyenv's CPython 3.12 at {PYENV_312}")
    assert not debian_pandas_for("3.12")
    pairs, err = short_bench(snapcell, "--python", PYENV_312)
    assert pairs["python"] == os.path.realpath(PYENV_312), pairs["python"]
    assert pairs["python_version"].startswith("3.12."), pairs["python_version"]
    assert "no pandas for CPython 3.12 in /usr/lib/python3/dist-packages" in err, err
    assert f"measuring {os.path.realpath(PYENV_312)} forking itself" in err, err


def test_a_short_bench_completes_at_level_rlimits(snapcell_paths):
    """At level rlimits (simulated: a Docker-like seccomp filter) the cell's /tmp is the
    directory SNAPCELL_TMP names, not the host's /tmp: the session series writes its 16 MiB
    there after the restores (it wrote /tmp/f0 and failed with EACCES)."""
    path, helper = snapcell_paths
    simhost = pathlib.Path(path).resolve().parents[1] / "tests" / "simhost"
    if not os.access(simhost, os.X_OK):
        pytest.skip(f"needs {simhost} (a build with -Dtests=enabled)")
    if not os.access("/usr/bin/python3", os.X_OK):
        pytest.skip("needs /usr/bin/python3 (a root caller's rlimits sandbox cannot reach "
                    "a pyenv build under /root)")

    def run(*args, timeout):
        env = {**os.environ, "SNAPCELL_HELPER": helper}
        return subprocess.run([str(simhost), "--docker-seccomp", "--", path, *args],
                              capture_output=True, timeout=timeout, env=env)

    short_bench(None, "--python", "/usr/bin/python3", run=run, levels=("rlimits",))


def test_bad_options_exit_2_with_the_usage(snapcell):
    for args in (("--runs", "0"), ("--runs", "x"), ("--nope",), ("extra",), ("--python",)):
        r = snapcell("bench", *args)
        assert r.returncode == 2, args
        assert b"snapcell bench" in r.stderr or b"usage" in r.stderr, args


def test_an_interpreter_snapcell_refuses_exits_2_naming_it(snapcell, tmp_path):
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\necho not a python\n")
    fake.chmod(0o755)
    for path in (str(fake), "/nonexistent/python3"):
        r = snapcell("bench", "--quick", "--python", path)
        assert r.returncode == 2, (path, r.returncode, r.stderr)
        assert f"snapcell bench: --python {path}: ".encode() in r.stderr, r.stderr
        assert not r.stdout, r.stdout
