"""Choosing the interpreter from the command line: `--python` on run and doctor, the MCP
config's "python", what --help, --describe, doctor and errors say about the interpreter, and
that the existing --python-path spellings (getopt abbreviations included) keep their meaning.
Interpreters that cannot be installed here (PyPy, 3.9, free-threaded, 3.15) are simulated by
scripts printing what such an interpreter answers snapcell's query."""
import json
import os
import stat

import pytest


def fake_python(path, impl="cpython", version=(3, 12, 1), free_threaded=False,
                exe="/bin/sh"):
    answer = {"implementation": impl, "version": list(version), "executable": exe,
              "stdlib": "/usr/lib", "gil_disabled": free_threaded, "libs": []}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(answer)}\nEOF\n")
    path.chmod(0o755)
    return path


def default_python(snapcell):
    r = snapcell("doctor", "--json")
    info = json.loads(r.stdout)["python"]
    assert "executable" in info, info
    return info


@pytest.mark.parametrize("kind, words", [
    ("pypy", [b"is pypy 3.10.14, not CPython"]),
    ("old", [b"is Python 3.9.18", b"3.10 or newer"]),
    ("free-threaded", [b"free-threaded build of Python 3.13.0", b"abi3"]),
])
def test_run_refuses_an_interpreter_it_cannot_run_with_exit_2(snapcell, tmp_path, kind, words):
    path = {"pypy": lambda p: fake_python(p, impl="pypy", version=(3, 10, 14)),
            "old": lambda p: fake_python(p, version=(3, 9, 18)),
            "free-threaded": lambda p: fake_python(p, version=(3, 13, 0),
                                                   free_threaded=True)}[kind](
        tmp_path / "bin" / "python3")
    r = snapcell("run", "--python", path, "-", stdin=b"print(1)")
    assert r.returncode == 2, r.stderr
    assert b"--python: python " + bytes(path) in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_run_refuses_files_that_are_not_interpreters(snapcell, tmp_path):
    r = snapcell("run", "--python", "/bin/true", "-", stdin=b"print(1)")
    assert r.returncode == 2
    assert b"python /bin/true: not a CPython 3 interpreter" in r.stderr, r.stderr
    r = snapcell("run", "--python", tmp_path / "missing", "-", stdin=b"print(1)")
    assert r.returncode == 2
    assert b"missing: No such file or directory" in r.stderr, r.stderr
    r = snapcell("run", "--python", "no-such-python-here", "-", stdin=b"print(1)")
    assert r.returncode == 2
    assert b"python no-such-python-here: not found on PATH" in r.stderr, r.stderr
    # --python used to abbreviate --python-path: a directory gets a hint.
    r = snapcell("run", "--python", tmp_path, "-", stdin=b"print(1)")
    assert r.returncode == 2
    assert b"a directory, not an interpreter" in r.stderr, r.stderr
    assert b"--python-path DIR puts a directory on sys.path" in r.stderr, r.stderr


def test_a_refused_default_interpreter_is_exit_2_naming_why_it_was_chosen(snapcell, tmp_path):
    fake_python(tmp_path / "python3", version=(3, 9, 18))
    env = {"PATH": f"{tmp_path}:{os.environ['PATH']}"}
    r = snapcell("run", "-", stdin=b"print(1)", env=env)
    assert r.returncode == 2, r.stderr
    assert b"the interpreter (python3 on PATH): python " + bytes(tmp_path / "python3") \
        in r.stderr, r.stderr
    assert b"Python 3.9.18" in r.stderr, r.stderr


@pytest.mark.parametrize("spelling", ["--python-path", "--python-path=", "--python-pat",
                                      "--python-p", "--python-", "--pytho", "--pyth",
                                      "--pyt", "--py"])
def test_every_python_path_spelling_still_means_python_path(snapcell, tmp_path, spelling):
    d = tmp_path / "pkgs"
    d.mkdir()
    (d / "spelled.py").write_text("WHERE = 'python path'\n")
    for p in (tmp_path, d, d / "spelled.py"):
        p.chmod(0o755)
    args = [spelling + str(d)] if spelling.endswith("=") else [spelling, d]
    r = snapcell("run", *args, "-", stdin=b"import spelled; print(spelled.WHERE)")
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"python path\n"


def test_help_names_the_interpreter_that_runs_and_what_cells_see(snapcell, tmp_path):
    info = default_python(snapcell)
    r = snapcell("run", "--help")
    assert r.returncode == 0
    out = r.stdout.decode()
    assert "--python PATH" in out and "--python-path DIR" in out
    exe, version = info["executable"], info["version"]
    assert f"  python:    {exe}, CPython {version} ({info['chosen_by']})\n" in out, out
    assert f"  cells see: sys.executable {exe}, Python {version}\n" in out, out
    r = snapcell("--help")
    assert r.returncode == 0
    assert f"  python:    {exe}, CPython {version}".encode() in r.stdout, r.stdout
    # With --python given before --help, that one.
    fake = fake_python(tmp_path / "python3.12", version=(3, 12, 1))
    r = snapcell("run", "--python", fake, "--help")
    assert "/bin/sh, CPython 3.12.1 (snapcell_config_set_python)" in r.stdout.decode()


def test_describe_and_instructions_tell_the_model_the_python_version(snapcell, tmp_path):
    fake = fake_python(tmp_path / "python3.13", version=(3, 13, 0))
    r = snapcell("run", "--python", fake, "--describe", "--instructions")
    assert r.returncode == 0, r.stderr
    assert b"Runs Python 3.13 code" in r.stdout
    assert b"write one Python 3.13 program" in r.stdout
    minor = default_python(snapcell)["version"].split(".")[1]
    r = snapcell("run", "--describe")
    assert f"Runs Python 3.{minor} code".encode() in r.stdout, r.stdout


def test_doctor_names_the_interpreter_and_warns_for_a_newer_one(snapcell, tmp_path):
    info = default_python(snapcell)
    assert info["chosen_by"] in ("python3 on PATH", "/usr/bin/python3")
    assert info["cells"] == {"sys_executable": info["executable"], "version": info["version"]}
    assert os.path.realpath(info["executable"]) == info["executable"]
    with open(info["executable"], "rb") as f:
        assert f.read(4) == b"\x7fELF"  # the binary, not a pyenv shim
    r = snapcell("doctor")
    out = r.stdout.decode()
    assert f"python:    {info['executable']}, CPython {info['version']}" in out, out
    assert f"cells see: sys.executable {info['executable']}" in out, out
    fake = fake_python(tmp_path / "python3.15", version=(3, 15, 0))
    r = snapcell("doctor", "--python", fake)
    assert "warning:   Python 3.15.0 is newer than 3.14" in r.stdout.decode(), r.stdout
    j = json.loads(snapcell("doctor", "--json", "--python", fake).stdout)
    assert j["python"]["version"] == "3.15.0"
    assert "newer than 3.14" in j["python"]["warning"]
    venv = tmp_path / "venv"
    (venv / "lib" / "python3.15" / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = /nowhere\nversion = 3.15.0\nexecutable = {fake}\n")
    j = json.loads(snapcell("doctor", "--json", "--venv", venv).stdout)
    assert j["python"]["chosen_by"] == "the venv's interpreter", j["python"]
    old = fake_python(tmp_path / "python3.9", version=(3, 9, 18))
    r = snapcell("doctor", "--python", old)
    assert r.returncode == 1
    assert "python:    FAILED: --python: python " + str(old) in r.stdout.decode(), r.stdout
    assert "error" in json.loads(snapcell("doctor", "--json", "--python", old).stdout)["python"]


def test_a_venv_not_made_from_the_given_python_is_refused_naming_both(snapcell, tmp_path):
    base = fake_python(tmp_path / "a" / "python3.12", exe="/bin/sh")
    other = fake_python(tmp_path / "b" / "python3.12", exe="/bin/true")
    venv = tmp_path / "venv"
    (venv / "lib" / "python3.12" / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(f"home = /nowhere\nversion = 3.12.1\nexecutable = {base}\n")
    for order in (["--python", other, "--venv", venv], ["--venv", venv, "--python", other]):
        r = snapcell("run", *order, "-", stdin=b"print(1)")
        assert r.returncode == 2, r.stderr
        assert bytes(venv) in r.stderr and bytes(other) in r.stderr, r.stderr
    r = snapcell("run", "--venv", venv, "--python", base, "--help")
    assert r.returncode == 0, r.stderr
    assert b"(snapcell_config_set_python)" in r.stdout


def test_a_failed_start_names_the_interpreter(snapcell):
    info = default_python(snapcell)
    r = snapcell("run", "-", stdin=b"print(1)", env={"SNAPCELL_HELPER": "/bin/true"})
    assert r.returncode == 3
    assert f"snapcell: python:    {info['executable']}".encode() in r.stderr, r.stderr
    r = snapcell("mcp", stdin=b"", env={"SNAPCELL_HELPER": "/bin/true"})
    assert r.returncode == 3
    assert f"snapcell mcp: python:    {info['executable']}".encode() in r.stderr, r.stderr


def test_mcp_refuses_to_start_with_a_bad_python(snapcell, tmp_path):
    old = fake_python(tmp_path / "python3.9", version=(3, 9, 18))
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"python": str(old)}))
    r = snapcell("mcp", "--config", config, stdin=b"")
    assert r.returncode == 2
    assert f"--config {config}: python: python {old} is Python 3.9.18".encode() in r.stderr, \
        r.stderr
    config.write_text(json.dumps({"python": 3}))
    r = snapcell("mcp", "--config", config, stdin=b"")
    assert r.returncode == 2
    assert b"python: must be a string" in r.stderr, r.stderr
    fake_python(tmp_path / "bin" / "python3", version=(3, 9, 18))
    config.write_text("{}")
    r = snapcell("mcp", "--config", config, stdin=b"",
                 env={"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"})
    assert r.returncode == 2
    assert b"snapcell mcp: the interpreter (python3 on PATH)" in r.stderr, r.stderr
