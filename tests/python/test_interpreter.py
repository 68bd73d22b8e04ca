"""Which interpreter a sandbox runs: by default the caller's base interpreter (never its venv's),
python= another, venv= a virtual environment's own with its packages; and the ValueErrors for a
caller that is not an interpreter and for a python= that is not the venv's. The matrix is every
CPython 3.10-3.13 pyenv has here plus Debian's /usr/bin/python3; a missing one is skipped, or a
failure with SNAPCELL_REQUIRE_ALL=1."""

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest

from snapcell import _interpreter

MATRIX = ("3.10", "3.11", "3.12", "3.13", "debian")

def _interpreters():
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found = {}
    for minor in MATRIX[:-1]:
        paths = glob.glob(f"{root}/versions/{minor}.*/bin/python{minor}")
        if paths:
            found[minor] = max(paths, key=lambda p: [int(x) for x in p.split("/")[-3].split(".")])
    if os.access("/usr/bin/python3", os.X_OK):
        found["debian"] = "/usr/bin/python3"
    return found


INTERPRETERS = _interpreters()


def interpreter(label):
    """The executable of one interpreter of the matrix, or a skip (a failure when
    SNAPCELL_REQUIRE_ALL=1) when this machine lacks it."""
    if label not in INTERPRETERS:
        why = f"no CPython {label} on this machine"
        if os.environ.get("SNAPCELL_REQUIRE_ALL") == "1":
            pytest.fail(why + " (SNAPCELL_REQUIRE_ALL=1)")
        pytest.skip(why)
    return INTERPRETERS[label]


def version_of(python):
    out = subprocess.run([python, "-I", "-c", "import sys; print(list(sys.version_info[:3]))"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def python_in_process(python, code, **env):
    """Runs code under python with this package importable (this process's sys.path), returns
    its stdout; an exception there fails the test with its stderr."""
    environ = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), **env)
    r = subprocess.run([python, "-c", code], capture_output=True, text=True, env=environ)
    assert r.returncode == 0, r.stderr
    return r.stdout


# ---- the choice, without a sandbox ----


def test_default_is_the_base_interpreter_that_runs_this_process():
    base = _interpreter.default_python()
    assert base == os.path.realpath(base) and os.access(base, os.X_OK)
    assert version_of(base) == list(sys.version_info[:3])
    if sys.prefix != sys.base_prefix:  # the tests run from a venv: its interpreter is not it
        assert not base.startswith(os.path.realpath(sys.prefix) + os.sep)
    assert _interpreter.choose(None, None) == base


@pytest.mark.parametrize("kind", ["symlinks", "copies"])
def test_default_from_a_venv_is_its_base(kind, tmp_path):
    """A venv's python is a symlink to its base (venv's default) or a copy (--copies; on 3.10
    sys._base_executable names the copy): either way the base interpreter is chosen."""
    base = _interpreter.default_python()
    venv = tmp_path / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", f"--{kind}", str(venv)], check=True)
    assert (venv / "bin" / "python").is_symlink() == (kind == "symlinks")
    out = python_in_process(str(venv / "bin" / "python"),
                            "from snapcell import _interpreter; print(_interpreter.default_python())")
    assert out.strip() == base


def test_keywords_choose():
    base = _interpreter.default_python()
    assert _interpreter.choose("/opt/py/bin/python3", None) == "/opt/py/bin/python3"
    assert _interpreter.choose("/opt/py/bin/python3", "/v") == "/opt/py/bin/python3"
    assert _interpreter.choose(None, "/v") is None  # the venv's own interpreter
    assert _interpreter.choose("python3.12", None) == "python3.12"  # found on PATH by C
    assert _interpreter.choose("bin/python3", None) == os.path.abspath("bin/python3")
    assert _interpreter.choose("~/py/python3", None) == os.path.expanduser("~/py/python3")
    assert _interpreter.choose(None, None) == base
    with pytest.raises(ValueError, match="python is empty"):
        _interpreter.choose("", None)
    with pytest.raises(TypeError, match="python must be a path, not int"):
        _interpreter.choose(3, None)


def test_an_embedding_application_must_name_the_interpreter(monkeypatch):
    """An application embedding CPython may leave sys.executable empty: there is no interpreter
    of this process to run, and guessing one could give cells another version."""
    monkeypatch.setattr(sys, "executable", "")
    with pytest.raises(ValueError, match=r"sys.executable is empty.*pass python="):
        _interpreter.default_python()


def test_a_process_not_running_sys_executable_must_name_the_interpreter(monkeypatch):
    monkeypatch.setattr(sys, "executable", "/bin/sh")
    monkeypatch.setattr(sys, "_base_executable", "/bin/sh", raising=False)
    monkeypatch.setattr(sys, "prefix", sys.base_prefix)
    running = os.path.realpath("/proc/self/exe")
    with pytest.raises(ValueError, match=f"this process runs {running}, not the interpreter "
                                         r"sys.executable names \(/bin/sh\).*pass python="):
        _interpreter.default_python()


def test_an_application_binary_is_not_an_interpreter(tmp_path):
    """A program that links CPython and names itself in sys.executable (here: this interpreter's
    binary copied under another name, as an embedding application looks)."""
    app = tmp_path / "embedder"
    shutil.copy2(os.path.realpath("/proc/self/exe"), app)
    out = python_in_process(str(app), """
from snapcell import _interpreter
try:
    _interpreter.default_python()
except ValueError as e:
    print(e)
""")
    assert f"this process's executable, {app}, is not a Python interpreter" in out
    assert "pass python=" in out
