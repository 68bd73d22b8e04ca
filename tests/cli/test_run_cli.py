"""`snapcell run` as a user drives it: files and stdin, flags, exit statuses, JSON output."""
import json


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
    assert b"wall-clock limit" in r.stderr


def test_output_limit_exits_125(snapcell):
    r = snapcell("run", "--max-stdout", "1k", "-", stdin=b"print('x' * 5000)")
    assert r.returncode == 125
    assert len(r.stdout) == 1024
    assert b"stdout limit" in r.stderr


def test_json_prints_the_whole_result(snapcell):
    r = snapcell("run", "--json", "--env", "NAME=snap", "-",
                 stdin=b"import os\nprint(os.environ['NAME'])\nraise SystemExit(2)")
    assert r.returncode == 2
    result = json.loads(r.stdout)
    assert result["status"] == "error"
    assert result["exit_code"] == 2
    assert result["stdout"] == "snap\n"
    assert result["isolation"] == "namespaces"
    for key in ("stderr", "wall_us", "cpu_us", "peak_memory_bytes", "limits_hit",
                "stdout_truncated", "stderr_truncated", "signal"):
        assert key in result


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


def test_unreachable_isolation_level_fails_clearly(snapcell):
    r = snapcell("run", "--require-isolation", "cgroups", "-", stdin=b"print(1)")
    assert r.returncode == 3
    assert b"cgroups" in r.stderr
    assert snapcell("run", "--require-isolation", "namespaces", "-",
                    stdin=b"print(1)").returncode == 0


def test_help(snapcell):
    r = snapcell("run", "--help")
    assert r.returncode == 0 and b"--timeout" in r.stdout
    assert snapcell("--help").returncode == 0
    assert snapcell().returncode == 2
