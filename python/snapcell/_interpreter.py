"""Which Python interpreter a sandbox made from this package runs: the caller's own, unless
python= or venv= says otherwise. Only the choice is made here; the C library resolves and checks
the file (snapcell_config_set_python: not CPython, older than 3.10, free-threaded, a python=
that is not the venv's base) and that is where every refusal comes from, except one it cannot
see: whether this process is an interpreter at all."""

from __future__ import annotations

import os
import re
import sys

# The names CPython installs its interpreter under (python, python3, python3.12, python3.13t,
# python3.12d, python3.11-dbg), the name a venv gives it included.
_INTERPRETER_NAME = re.compile(r"python(\d+(\.\d+)?)?[a-z-]*")

_ASK_FOR_PYTHON = "pass python= (an interpreter executable) or venv= (a virtual environment)"


def python_argument(python: str | os.PathLike[str]) -> str:
    """python= as the C library takes it: a path made absolute, or a bare name it finds on
    PATH (as a shell would)."""
    if not isinstance(python, (str, os.PathLike)):
        raise TypeError(f"python must be a path, not {type(python).__name__}")
    path = os.fspath(python)
    if not isinstance(path, str):
        path = os.fsdecode(path)
    if not path:
        raise ValueError("python is empty: give an interpreter executable")
    path = os.path.expanduser(path)
    return os.path.abspath(path) if os.sep in path else path


def choose(python: str | os.PathLike[str] | None, venv: str | os.PathLike[str] | None) -> str | None:
    """The interpreter to give snapcell_config_set_python: python= when given; None when only
    venv= is (the C library then runs the venv's own interpreter); else the base interpreter of
    this process (default_python)."""
    if python is not None:
        return python_argument(python)
    if venv is not None:
        return None
    return default_python()


def default_python() -> str:
    """The real file of this process's base interpreter: the one that runs it, or, in a venv,
    the interpreter the venv was made from (never the venv's own, so the cell sees no package
    of the caller's venv unless venv= asks for it). A cell started from it has this process's
    sys.version_info. ValueError when this process is not a CPython interpreter (an application
    embedding Python, a frozen program): there is no interpreter to copy, only one to name."""
    if sys.implementation.name != "cpython" or getattr(sys, "frozen", False):
        raise ValueError(
            f"this process is not a CPython interpreter ({sys.implementation.name}"
            f"{', frozen' if getattr(sys, 'frozen', False) else ''}), so snapcell cannot run "
            f"its interpreter in the sandbox: {_ASK_FOR_PYTHON}"
        )
    executable = sys.executable
    if not executable:
        raise ValueError(
            "this process has no interpreter executable (sys.executable is empty: an "
            f"application embedding Python?), so snapcell cannot tell which Python to run: "
            f"{_ASK_FOR_PYTHON}"
        )
    base = _base_executable(executable)
    running = os.path.realpath("/proc/self/exe")
    if running not in (base, os.path.realpath(executable)):
        raise ValueError(
            f"this process runs {running}, not the interpreter sys.executable names "
            f"({executable}): an application embedding Python? {_ASK_FOR_PYTHON}"
        )
    if not _INTERPRETER_NAME.fullmatch(os.path.basename(base)):
        raise ValueError(
            f"this process's executable, {base}, is not a Python interpreter (an application "
            f"embedding Python?): {_ASK_FOR_PYTHON}"
        )
    return base


def _base_executable(executable: str) -> str:
    """The real file of the interpreter a venv was made from (of executable outside one).
    sys._base_executable says so from 3.11; 3.10 sets it to the venv's own executable, which
    is a symlink to the base (venv's default) or a copy (--copies), so the last resort is
    the base installation's bin/pythonX.Y, where CPython installs itself."""
    real = os.path.realpath(executable)
    if sys.prefix == sys.base_prefix:
        return real
    venv = os.path.realpath(sys.prefix)
    candidates = (
        getattr(sys, "_base_executable", ""),
        executable,
        os.path.join(sys.base_prefix, "bin", "python%d.%d" % sys.version_info[:2]),
    )
    for candidate in candidates:
        if not candidate:
            continue
        path = os.path.realpath(candidate)
        if _inside(path, venv) or not (os.path.isfile(path) and os.access(path, os.X_OK)):
            continue
        return path
    raise ValueError(
        f"cannot find the interpreter the venv {sys.prefix} was made from (looked for "
        f"{', '.join(c for c in candidates if c)}): {_ASK_FOR_PYTHON}"
    )


def _inside(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)
