"""What the CLI shows of the library's contract: the version, the helper it runs, and causes
reported with their context (a refused tool schema says why)."""
import json
import os
import re
import subprocess
import time


def test_version_is_the_loaded_librarys(snapcell):
    r = snapcell("version")
    assert r.returncode == 0
    assert re.fullmatch(rb"snapcell \d+\.\d+\.\d+\n", r.stdout)
    assert r.stdout == b"snapcell 0.2.0\n"


def test_a_refused_tool_schema_says_why(snapcell):
    r = snapcell("run", "--tool", "compute=cat", "--tool-schema",
                 'compute={"properties": {"a": {"if": {}}}}', "-", stdin=b"")
    assert r.returncode == 2
    assert r.stderr == (b"snapcell: --tool-schema: add_tool compute: schema: "
                        b"properties.a: unknown keyword 'if'\n")
    assert b"[A-Za-z0-9_.-]" not in r.stderr


def test_tool_schema_checks_the_arguments(snapcell):
    schema = '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'
    code = (b"print(call_tool('compute', n=2))\n"
            b"try:\n    call_tool('compute', n='x')\nexcept ToolError as e:\n    print(e)\n")
    r = snapcell("run", "--json", "--tool", "compute=cat", "--tool-schema", f"compute={schema}",
                 "-", stdin=code)
    result = json.loads(r.stdout)
    assert result["status"] == "ok", result
    lines = result["stdout"].splitlines()
    assert lines[0] == "{'n': 2}"
    assert "invalid arguments for tool 'compute'" in lines[1] and "n:" in lines[1]


def test_tool_schema_needs_its_tool_first(snapcell):
    r = snapcell("run", "--tool-schema", 'compute={}', "--tool", "compute=cat", "-", stdin=b"")
    assert r.returncode == 2
    assert b"--tool-schema compute: no --tool compute=COMMAND before it" in r.stderr


def test_bad_tool_name_message_comes_from_the_library(snapcell):
    r = snapcell("run", "--tool", "not/a/name=cat", "-", stdin=b"")
    assert r.returncode == 2
    assert r.stderr == (b"snapcell: --tool: add_tool not/a/name: the name must be 1 to 128 "
                        b"characters of [A-Za-z0-9_.-]\n")


def test_snapcell_helper_chooses_the_helper_and_a_missing_one_is_named(snapcell):
    r = snapcell("run", "-", stdin=b"print(1)", env={"SNAPCELL_HELPER": "/nonexistent/cell"})
    assert r.returncode == 3
    assert r.stderr == (b"snapcell: SNAPCELL_HELPER=/nonexistent/cell: No such file or directory\n"
                        b"snapcell: set SNAPCELL_HELPER to the snapcell-cell executable (in a "
                        b"build tree: build/snapcell-cell), or unset it to use the installed one\n")


def test_a_helper_of_another_protocol_is_a_clear_error(snapcell, snapcell_paths):
    import pathlib
    other = pathlib.Path(snapcell_paths[1]).parent / "tests" / "snapcell-cell-protocol-999"
    r = snapcell("run", "-", stdin=b"print(1)", env={"SNAPCELL_HELPER": str(other)}, timeout=20)
    assert r.returncode == 3
    assert b"speaks protocol 999, this library (0.2.0) speaks protocol 11" in r.stderr


def test_a_helper_that_cannot_start_is_reported_with_its_own_words(snapcell, snapcell_paths):
    import pathlib
    tests = pathlib.Path(snapcell_paths[1]).parent / "tests"
    loader = tests / "dying-helper-loader"  # says what ld.so says and exits 127
    r = snapcell("run", "-", stdin=b"print(1)", env={"SNAPCELL_HELPER": str(loader)}, timeout=20)
    assert r.returncode == 3
    # Then the lines naming the interpreter (frontend/interpreter.c).
    assert r.stderr.startswith((f"snapcell: helper {loader} exited with status 127 before its greeting: "
                                "snapcell-cell: error while loading shared libraries: "
                                "libpython3.11.so.1.0: cannot open shared object file: "
                                "No such file or directory\nsnapcell: python: ").encode()), r.stderr
    # Its control bytes reach the terminal escaped, its lines as lines.
    control = tests / "dying-helper-control"
    r = snapcell("run", "-", stdin=b"print(1)", env={"SNAPCELL_HELPER": str(control)}, timeout=20)
    assert r.returncode == 3
    assert (b"bad \\x1b[31mred\\x1b[0m\\x09and\\x0d\\x7f \\xff\\xfe end: "
            b"caf\xc3\xa9\nsecond line\nsnapcell: python: ") in r.stderr, r.stderr
    assert b"\x1b" not in r.stderr


def test_uid_range_is_checked_and_a_held_range_is_a_clear_error(snapcell, snapcell_paths,
                                                                 tmp_path):
    r = snapcell("run", "--uid-range", "5:x", "-", stdin=b"")
    assert r.returncode == 2
    assert r.stderr == b"snapcell: --uid-range wants FIRST:COUNT, got '5:x'\n"
    r = snapcell("run", "--uid-range", "65530:10", "-", stdin=b"")
    assert r.returncode == 2
    assert b"must leave out 0, 65535 and 4294967295" in r.stderr
    r = snapcell("run", "--uid-range", "2100000200:1", "-", stdin=b"print(1)")
    assert (r.returncode, r.stdout) == (0, b"1\n"), r.stderr
    if os.geteuid() != 0:
        return
    # A second CLI while the first holds the range's only uid: the first waits in a tool
    # that tells us it is there.
    cli, helper = snapcell_paths
    mark = tmp_path / "running"
    gate = f"gate=touch {mark}; while [ -e {mark} ]; do sleep 0.05; done; echo null"
    first = subprocess.Popen([cli, "run", "--uid-range", "2100000201:1", "--tool", gate, "-"],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             env={**os.environ, "SNAPCELL_HELPER": helper})
    try:
        first.stdin.write(b"call_tool('gate')\n")
        first.stdin.close()
        deadline = time.monotonic() + 30
        while not mark.exists() and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.02)
        assert mark.exists()
        r = snapcell("run", "--uid-range", "2100000201:1", "-", stdin=b"print(1)")
        assert r.returncode == 3
        assert b"no free outside uid: all 1 of 2100000201..2100000201" in r.stderr
    finally:
        mark.unlink(missing_ok=True)  # ends the tool's wait
        first.kill()
        first.wait()
