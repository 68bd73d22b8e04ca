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
import tempfile

import pytest

import snapcell
from snapcell import _interpreter

MATRIX = ("3.10", "3.11", "3.12", "3.13", "debian")

# A compiled package from PyPI that no interpreter of the matrix has, installed into the venvs
# the tests make (wheels for CPython 3.8 to 3.14).
COMPILED = "pydantic-core==2.50.5"

# A module the tests write into each venv they make: which venv the cell sees, and where.
MARKER = "snapcell_test_venv"

# What a cell reports about its interpreter, the venv's marker and the compiled package (the
# directories the cell imported them from: a venv's site-packages may appear at another path
# inside the cell than on the host).
REPORT = f"""
import json, os, sys
def where(name):
    try:
        module = __import__(name, fromlist=["_"])
    except ImportError:
        return None
    return os.path.dirname(module.__file__)
try:
    from {MARKER} import VENV
except ImportError:
    VENV = None
print(json.dumps({{"version": list(sys.version_info[:3]), "prefix": sys.prefix,
                  "base_prefix": sys.base_prefix, "path": sys.path, "venv": VENV,
                  "marker_dir": where("{MARKER}"), "compiled": where("pydantic_core._pydantic_core")}}))
"""


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


def report(sb):
    r = sb.run(REPORT)
    assert r.status == "ok", r.stderr
    return json.loads(r.stdout)


def mark(venv):
    """Writes the marker module into venv's site-packages."""
    with open(os.path.join(site_packages(venv), MARKER + ".py"), "w") as f:
        f.write(f"VENV = {venv!r}\n")


def assert_from_venv(cell, venv):
    """The cell has venv's packages, the compiled one from the venv's own site-packages."""
    assert cell["venv"] == venv, cell
    assert cell["compiled"] is not None, cell
    assert os.path.dirname(cell["compiled"]) == cell["marker_dir"], cell


def readable_dir(prefix):
    """A directory under /tmp that a root caller's sandbox uid may enter (tmp_path is 0700)."""
    d = tempfile.mkdtemp(prefix=prefix)
    os.chmod(d, 0o755)
    return d


@pytest.fixture(scope="module")
def venvs():
    """venv -> a venv of that matrix interpreter holding COMPILED, made once for the module."""
    top = readable_dir("snapcell-venvs-")
    made = {}

    def make(label):
        if label not in made:
            python = interpreter(label)
            venv = os.path.join(top, label)
            # The venv's own pip: an older pip run for a newer Python (pip --python) breaks.
            subprocess.run([python, "-m", "venv", venv], check=True)
            pip = subprocess.run(
                [os.path.join(venv, "bin", "python"), "-m", "pip", "--disable-pip-version-check",
                 "install", "-q", "--only-binary=:all:", COMPILED], capture_output=True, text=True)
            assert pip.returncode == 0, f"pip install {COMPILED} (PyPI):\n{pip.stdout}{pip.stderr}"
            mark(venv)
            made[label] = venv
        return made[label]

    yield make
    shutil.rmtree(top, ignore_errors=True)


def site_packages(venv):
    return glob.glob(os.path.join(venv, "lib", "python3.*", "site-packages"))[0]


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


def test_python_info_names_the_file_and_why(venvs):
    """What Sandbox.python_info() and the C library say, without starting a template."""
    from snapcell import _sandbox

    base = _interpreter.default_python()
    info = _sandbox.build_config()[0].python_info()
    assert (info["executable"], info["chosen_by"]) == (base, "snapcell_config_set_python")
    assert info["version"] == ".".join(map(str, sys.version_info[:3]))
    assert info["version_info"] == tuple(sys.version_info[:2]) and info["warning"] == ""
    debian = interpreter("debian")
    venv = venvs("debian")
    info = _sandbox.build_config(venv=venv)[0].python_info()
    assert (info["executable"], info["chosen_by"]) == (os.path.realpath(debian), "the venv's interpreter")
    assert info["version_info"] == tuple(version_of(debian)[:2])


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
    with pytest.raises(ValueError, match=r"sys.executable is empty.*pass python="):
        snapcell.Sandbox()


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
import snapcell
try:
    snapcell.Sandbox()
except ValueError as e:
    print(e)
""")
    assert f"this process's executable, {app}, is not a Python interpreter" in out
    assert "pass python=" in out


# ---- cells (these need the C library's interpreter choice and the abi3 guest) ----


def test_cells_run_the_callers_base_interpreter():
    with snapcell.Sandbox() as sb:
        assert sb.python_info()["executable"] == _interpreter.default_python()
        cell = report(sb)
        with sb.session() as session:
            r = session.run("import sys; print(list(sys.version_info[:3]))")
    assert cell["version"] == list(sys.version_info[:3])
    assert json.loads(r.stdout) == list(sys.version_info[:3]), r.stderr
    # Not the venv the tests run from: none of its packages is on the cell's path.
    assert cell["prefix"] == cell["base_prefix"] == sys.base_prefix
    extra = [p for p in cell["path"] if p.startswith("/.snapcell/") or
             (sys.prefix != sys.base_prefix and p.startswith(sys.prefix + os.sep))]
    assert not extra, cell


@pytest.mark.parametrize("label", MATRIX)
def test_python_runs_that_interpreter(label):
    python = interpreter(label)
    with snapcell.Sandbox(python=python) as sb:
        cell = report(sb)
    assert cell["version"] == version_of(python)
    assert cell["venv"] is None


# Tries to write into the venv's site-packages, the compiled package and the standard library.
WRITE = f"""
import os, {MARKER}, pydantic_core, json
out = []
for d in (os.path.dirname({MARKER}.__file__), os.path.dirname(pydantic_core.__file__),
          os.path.dirname(os.__file__)):
    try:
        open(os.path.join(d, "written"), "w").close()
        out.append("written")
    except OSError as e:
        out.append(type(e).__name__)
print(json.dumps(out))
"""


@pytest.mark.parametrize("label", MATRIX)
def test_venv_runs_its_own_interpreter_with_its_packages(label, venvs):
    venv = venvs(label)
    with snapcell.Sandbox(venv=venv) as sb:
        cell = report(sb)
        written = sb.run(WRITE)
    assert cell["version"] == version_of(interpreter(label))
    assert_from_venv(cell, venv)
    # Read-only, though the host user (the tests' own) owns the venv.
    assert written.status == "ok", written.stderr
    assert "written" not in json.loads(written.stdout), written.stdout
    assert not glob.glob(os.path.join(venv, "**", "written"), recursive=True)


@pytest.mark.parametrize("label", MATRIX)
def test_python_and_venv_of_the_same_base(label, venvs):
    venv = venvs(label)
    python = interpreter(label)
    with snapcell.Sandbox(python=python, venv=venv) as sb:
        cell = report(sb)
    assert cell["version"] == version_of(python)
    assert_from_venv(cell, venv)


@pytest.mark.parametrize("venv_label, python_label", [("3.12", "3.13"), ("debian", "3.11")])
def test_python_that_is_not_the_venvs_base_is_refused(venv_label, python_label, venvs):
    """Refused naming both, even where both are the same X.Y (Debian's 3.11 and pyenv's)."""
    venv, python = venvs(venv_label), interpreter(python_label)
    with pytest.raises(ValueError) as refused:
        snapcell.Sandbox(python=python, venv=venv)
    message = str(refused.value)
    assert venv in message and (python in message or os.path.realpath(python) in message), message


def test_venv_sys_prefix_the_common_case():
    """From a venv, venv=sys.prefix gives cells the caller's version and its packages (the
    compiled pydantic-core snapcell itself depends on, from PyPI, is only in the venv)."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("the tests do not run from a venv (scripts/test-python runs them from one)")
    mark(sys.prefix)
    try:
        with snapcell.Sandbox(venv=sys.prefix) as sb:
            cell = report(sb)
    finally:
        os.unlink(os.path.join(site_packages(sys.prefix), MARKER + ".py"))
    assert cell["version"] == list(sys.version_info[:3])
    assert_from_venv(cell, sys.prefix)


@pytest.mark.parametrize("kind", ["symlinks", "copies"])
def test_from_a_venv_whose_python_is_a_link_or_a_copy(kind):
    """A caller in a fresh venv (no packages of its own; this package through PYTHONPATH):
    Sandbox() runs its base interpreter, Sandbox(venv=sys.prefix) the venv's."""
    top = readable_dir("snapcell-venv-")
    try:
        venv = os.path.join(top, "venv")
        subprocess.run([_interpreter.default_python(), "-m", "venv", "--without-pip", f"--{kind}",
                        venv], check=True)
        mark(venv)
        out = python_in_process(os.path.join(venv, "bin", "python"), f"""
import json, sys, snapcell
cells = []
for keywords in ({{}}, {{"venv": sys.prefix}}):
    with snapcell.Sandbox(**keywords) as sb:
        r = sb.run({REPORT!r})
        assert r.status == "ok", r.stderr
        cells.append(json.loads(r.stdout))
print(json.dumps([list(sys.version_info[:3]), sys.base_prefix, cells]))
""")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    version, base_prefix, (default, in_venv) = json.loads(out)
    assert default["version"] == in_venv["version"] == version == list(sys.version_info[:3])
    assert (default["prefix"], default["venv"]) == (base_prefix, None)
    assert in_venv["venv"] == venv


def test_an_embedding_application_runs_the_interpreter_it_names(monkeypatch):
    monkeypatch.setattr(sys, "executable", "")
    python = INTERPRETERS.get("3.12") or os.path.realpath("/proc/self/exe")
    with snapcell.Sandbox(python=python) as sb:
        assert report(sb)["version"] == version_of(python)
    if sys.prefix != sys.base_prefix:
        with snapcell.Sandbox(venv=sys.prefix) as sb:
            assert report(sb)["version"] == list(sys.version_info[:3])


def test_not_a_cpython_is_refused(tmp_path):
    with pytest.raises(ValueError, match="/bin/true"):
        snapcell.Sandbox(python="/bin/true")
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\necho 'Python 3.12.0'\n")
    fake.chmod(0o755)
    with pytest.raises(ValueError, match=str(fake)):
        snapcell.Sandbox(python=fake)
