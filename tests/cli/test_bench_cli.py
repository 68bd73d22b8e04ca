"""`snapcell bench`: a short run prints every documented key with a number (never checks what
the numbers are), including the floor measured in the same run; bad options exit 2."""
import os

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


def test_a_short_bench_prints_every_key_with_a_number(snapcell):
    r = snapcell("bench", "--quick", "--runs", "20", timeout=600)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    pairs = dict(line.split("=", 1) for line in r.stdout.decode().splitlines())
    assert pairs.pop("isolation") in ("namespaces", "cgroups", "rlimits")
    want = KEYS + (PANDAS_KEYS if os.path.exists("/usr/lib/python3/dist-packages/pandas") else [])
    assert set(want) <= set(pairs), sorted(set(want) - set(pairs))
    for key in want:
        assert float(pairs[key]) > 0, (key, pairs[key])
    assert "measuring the floor: round trips to a process" in r.stderr.decode()


def test_bad_options_exit_2_with_the_usage(snapcell):
    for args in (("--runs", "0"), ("--runs", "x"), ("--nope",), ("extra",)):
        r = snapcell("bench", *args)
        assert r.returncode == 2, args
        assert b"snapcell bench" in r.stderr or b"usage" in r.stderr, args
