"""A build from source on a machine without the build dependencies: the in-tree backend
(python/backend/snapcell_backend.py) names everything missing, with the Debian package for
each, before meson can stop at its first "Unknown compiler(s)" or missing library."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BACKEND = ROOT / "python" / "backend"
sys.path.insert(0, str(BACKEND))
import snapcell_backend  # noqa: E402

NEEDS_PKG_CONFIG = pytest.mark.skipif(not shutil.which("pkg-config"),
                                      reason="no pkg-config on this machine")


def pc_dir_without(tmp_path, *left_out):
    """A pkg-config search directory holding every .pc file of the system's search path (so a
    library's own requirements resolve) but left_out's."""
    pc = tmp_path / "pc"
    pc.mkdir()
    search = subprocess.run(["pkg-config", "--variable", "pc_path", "pkg-config"],
                            capture_output=True, text=True, check=True).stdout.strip()
    for directory in filter(os.path.isdir, search.split(":")):
        for source in pathlib.Path(directory).glob("*.pc"):
            if source.stem not in left_out and not (pc / source.name).exists():
                (pc / source.name).symlink_to(source)
    for name, _ in snapcell_backend.LIBRARIES:
        assert name in left_out or (pc / f"{name}.pc").exists(), \
            f"this machine lacks {name}.pc (scripts/install-deps)"
    return pc


def path_with(tmp_path, *programs):
    """A PATH directory holding only the named programs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in programs:
        (bin_dir / program).symlink_to(shutil.which(program))
    return str(bin_dir)


def run_check(env, hook=True):
    """The backend's build_wheel hook (or its command-line check) in a process of its own."""
    code = ("import snapcell_backend; snapcell_backend.build_wheel('/nonexistent')" if hook
            else "import runpy; runpy.run_path('snapcell_backend.py', run_name='__main__')")
    return subprocess.run([sys.executable, "-c", code], cwd=BACKEND, env=env,
                          capture_output=True, text=True, timeout=60)


@NEEDS_PKG_CONFIG
def test_no_compiler_and_a_missing_library_are_named_together(tmp_path):
    env = {**os.environ, "PATH": path_with(tmp_path, "pkg-config"),
           "PKG_CONFIG_LIBDIR": str(pc_dir_without(tmp_path, "jansson")),
           "PKG_CONFIG_PATH": ""}
    env.pop("CC", None)
    run = run_check(env, hook=False)
    assert run.returncode == 1
    assert run.stdout == ""
    lines = run.stderr.splitlines()
    assert lines[0] == "snapcell: cannot build from source; missing:"
    assert "  a C compiler (cc, gcc or clang; or $CC): Debian: build-essential" in lines
    assert "  jansson (pkg-config module): Debian: libjansson-dev" in lines
    assert not any("libseccomp" in line for line in lines)  # present, so not named
    assert "On Debian or Ubuntu: apt-get install build-essential libjansson-dev" in lines


def test_without_pkg_config_every_library_is_named(tmp_path):
    env = {**os.environ, "PATH": path_with(tmp_path), "CC": shutil.which("cc") or "cc"}
    run = run_check(env, hook=False)
    assert run.returncode == 1
    assert "  pkg-config (so the libraries below could not be checked): Debian: pkg-config" in \
        run.stderr.splitlines()
    for name, package in snapcell_backend.LIBRARIES:
        assert f"  {name} (pkg-config module): Debian: {package}" in run.stderr.splitlines()


@NEEDS_PKG_CONFIG
def test_the_build_hook_checks_before_meson(tmp_path):
    """The hook pip calls stops with the message, meson-python never starting (it would stop at
    "Unknown compiler(s)"); here meson-python is not even installed, and is named too."""
    env = {**os.environ, "PATH": path_with(tmp_path, "pkg-config"),
           "PKG_CONFIG_LIBDIR": str(pc_dir_without(tmp_path, "libmicrohttpd"))}
    env.pop("CC", None)
    run = run_check(env)
    assert run.returncode == 1
    lines = run.stderr.splitlines()
    assert lines[0] == "snapcell: cannot build from source; missing:"
    assert "  a C compiler (cc, gcc or clang; or $CC): Debian: build-essential" in lines
    assert "  libmicrohttpd (pkg-config module): Debian: libmicrohttpd-dev" in lines
    if not snapcell_backend.importlib.util.find_spec("mesonpy"):
        assert "  meson-python: PyPI: meson-python" in lines
    assert "Unknown compiler" not in run.stderr and "Traceback" not in run.stderr


@NEEDS_PKG_CONFIG
def test_pip_wheel_from_source_stops_with_the_list(tmp_path):
    """What a user sees: `pip wheel .` (isolated build: meson-python from PyPI) on a machine
    without a C compiler."""
    env = {**os.environ, "PATH": path_with(tmp_path, "pkg-config"),
           "PKG_CONFIG_LIBDIR": str(pc_dir_without(tmp_path, "libcap"))}
    env.pop("CC", None)
    run = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w",
                          str(tmp_path / "out"), str(ROOT)], env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode != 0
    out = run.stdout + run.stderr
    assert "snapcell: cannot build from source; missing:" in out
    assert "a C compiler (cc, gcc or clang; or $CC): Debian: build-essential" in out
    assert "libcap (pkg-config module): Debian: libcap-dev" in out
    assert "Unknown compiler" not in out


def test_everything_present_passes():
    if snapcell_backend.missing_build_dependencies(python_tools=False):
        pytest.skip("this machine lacks build dependencies (scripts/install-deps)")
    run = run_check(dict(os.environ), hook=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "snapcell: every build dependency outside PyPI was found\n"


def test_every_library_meson_asks_for_is_checked():
    """The backend's table and meson.build's dependency() calls on a library by name stay in
    step (the C test suite's Criterion, built only outside python mode, and the threads and dl
    pseudo-dependencies are not libraries a wheel build looks for; python3, the headers the
    guest module builds against outside python mode, is checked as Python.h on its own)."""
    asked = set()
    for meson_build in ROOT.rglob("meson.build"):
        if any(part.startswith("build") for part in meson_build.relative_to(ROOT).parts):
            continue
        asked |= set(re.findall(r"dependency\('([^']+)'\s*[,)]", meson_build.read_text()))
    asked -= {"threads", "dl", "criterion", "python3"}
    assert asked == {name for name, _ in snapcell_backend.LIBRARIES}
