"""`snapcell run` as a user drives it: files and stdin, flags, exit statuses, JSON output."""
import json

import pytest


def test_runs_a_file_and_mirrors_output(snapcell, tmp_path):
    script = tmp_path / "job.py"
    script.write_text("import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\n")
    r = snapcell("run", script)
    assert r.returncode == 0
    assert r.stdout == b"to stdout\n"
    assert r.stderr == b"to stderr\n"


def test_reads_code_from_stdin(snapcell):
    r = snapcell("run", "-", stdin=b"print(6 * 7)\n")
    assert (r.returncode, r.stdout) == (0, b"42\n")


def test_exit_status_mirrors_the_run(snapcell):
    assert snapcell("run", "-", stdin=b"raise SystemExit(3)").returncode == 3
    r = snapcell("run", "-", stdin=b"1/0")
    assert r.returncode == 1
    assert b"ZeroDivisionError" in r.stderr


def test_timeout_exits_124_and_says_why(snapcell):
    r = snapcell("run", "--timeout", "0.5", "-", stdin=b"while True: pass")
    assert r.returncode == 124
    assert b"the wall-clock time limit" in r.stderr


def test_output_limit_exits_125(snapcell):
    r = snapcell("run", "--max-stdout", "1k", "-", stdin=b"print('x' * 5000)")
    assert r.returncode == 125
    assert len(r.stdout) == 1024
    assert b"stdout limit" in r.stderr


def test_json_prints_the_whole_result(snapcell, host_level):
    r = snapcell("run", "--json", "--env", "NAME=snap", "-",
                 stdin=b"import os\nprint(os.environ['NAME'])\nraise SystemExit(2)")
    assert r.returncode == 2
    result = json.loads(r.stdout)
    assert result["status"] == "error"
    assert result["exit_code"] == 2
    assert result["stdout"] == "snap\n"
    assert result["isolation"] == host_level
    for key in ("stderr", "wall_us", "cpu_us", "peak_memory_bytes", "peak_rss_bytes", "limits_hit",
                "stdout_truncated", "stderr_truncated", "signal"):
        assert key in result


@pytest.mark.parametrize("code, status, value, absent", [
    (b"print('hi')\n1+1", "ok", 2, None),
    (b"[1, (2, 3), {'a': None}]", "ok", [1, [2, 3], {"a": None}], None),
    (b"x = 3", "ok", None, "no_expression"),
    (b"None", "ok", None, "none"),
    (b"object()", "ok", None, "not_json"),
    (b"list(range(100000))", "ok", None, "too_large"),
    (b"print('hi')\n1/0", "error", None, "not_evaluated"),
])
def test_json_has_the_last_expression_value(snapcell, code, status, value, absent):
    r = snapcell("run", "--json", "-", stdin=code)
    result = json.loads(r.stdout)
    assert (result["status"], result["value"], result["value_absent"]) == (status, value, absent)
    # never printed: stdout is what the code printed
    assert result["stdout"] == ("hi\n" if code.startswith(b"print") else "")
    # without --json, stdout only
    plain = snapcell("run", "-", stdin=code)
    assert plain.stdout == result["stdout"].encode()


def test_json_keeps_invalid_utf8_as_replacement_characters(snapcell):
    r = snapcell("run", "--json", "-", stdin=b"import sys\nsys.stdout.buffer.write(b'a\\xffb')")
    assert json.loads(r.stdout)["stdout"] == "a\ufffdb"


def test_memory_limit_flag(snapcell):
    r = snapcell("run", "--json", "--memory", "128M", "-", stdin=b"x = bytearray(2**30)")
    result = json.loads(r.stdout)
    assert result["status"] == "memory"
    assert "memory" in result["limits_hit"]


def test_python_path_exposes_site_packages(snapcell, tmp_path):
    pkg = tmp_path / "site"
    (pkg / "mymod").mkdir(parents=True)
    (pkg / "mymod" / "__init__.py").write_text("VALUE = 'from site'\n")
    pkg.chmod(0o755)
    tmp_path.chmod(0o755)
    r = snapcell("run", "--python-path", pkg, "-", stdin=b"import mymod; print(mymod.VALUE)")
    assert (r.returncode, r.stdout) == (0, b"from site\n"), r.stderr


def test_bad_usage_is_exit_2_with_a_message(snapcell, tmp_path):
    cases = [
        (["run"], b"usage"),
        (["run", "--timeout", "abc", "-"], b"invalid value 'abc' for --timeout"),
        (["run", "--memory", "1k", "-"], b"invalid value '1k' for --memory"),
        (["run", "--env", "NOEQUALS", "-"], b"NAME=VALUE"),
        (["run", "--require-isolation", "vm", "-"], b"unknown isolation level"),
        (["run", tmp_path / "missing.py"], b"cannot open"),
        (["run", "--python-path", tmp_path / "nope", "-"], b"No such file"),
        (["frobnicate"], b"unknown command"),
    ]
    for args, message in cases:
        r = snapcell(*args, stdin=b"print(1)")
        assert r.returncode == 2, args
        assert message in r.stderr, (args, r.stderr)


def test_required_isolation_level_is_met_or_fails_clearly(snapcell, host_level):
    r = snapcell("run", "--require-isolation", "cgroups", "-", stdin=b"print(1)")
    if host_level == "cgroups":
        assert r.returncode == 0 and r.stdout == b"1\n", r.stderr
    else:
        assert r.returncode == 3
        assert b"isolation level 'cgroups' required" in r.stderr, r.stderr
    assert snapcell("run", "--require-isolation", "namespaces", "-",
                    stdin=b"print(1)").returncode == 0


SPARSE = b"""import ctypes
libc = ctypes.CDLL(None)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
n = 0
while n < 60000:
    p = libc.mmap(0x100000000000 + (n << 30), 4096, 3, 0x22 | 0x100000, -1, 0)
    if p is None or p == 2**64 - 1:
        break
    ctypes.memset(p, 1, 1)
    n += 1
print('mapped', n)
"""


def test_memory_charged_to_the_host_is_bounded_and_reported(snapcell, host_level):
    """One-page mappings 1 GiB apart: their page tables count against the cell's memory
    cgroup, so the run ends with the memory status; the JSON tells the charged peak from the
    resident one."""
    if host_level != "cgroups":
        pytest.skip("no memory cgroup here (not root): RLIMIT_AS only")
    r = snapcell("run", "--json", "--memory", "128M", "-", stdin=SPARSE)
    result = json.loads(r.stdout)
    assert result["status"] == "memory" and result["limits_hit"] == ["memory"], result
    assert r.returncode == 137 and result["signal"] == 9
    assert 64 << 20 < result["peak_memory_bytes"] <= 128 << 20
    assert 0 < result["peak_rss_bytes"] < result["peak_memory_bytes"]


def test_help(snapcell):
    r = snapcell("run", "--help")
    assert r.returncode == 0 and b"--timeout" in r.stdout
    assert snapcell("--help").returncode == 0
    assert snapcell().returncode == 2
