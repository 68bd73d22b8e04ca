"""The build backend: meson-python, except that it first checks what a build from source needs
and that the wheel is tagged for the oldest CPython the extension serves (cp310-abi3).

The check: meson stops before meson.build runs when it finds no C compiler ("Unknown
compiler(s)"), and a missing library stops it one at a time, so a build from source looks,
before meson starts, for everything below and names all that is missing at once, with the
Debian package that provides it. `python3 python/backend/snapcell_backend.py` runs only the
check.

The tag: meson-python tags a limited-API wheel cpXY-abi3 with XY the building interpreter, so a
wheel built by 3.11 would refuse to install on 3.10 although its extension only uses the 3.10
stable ABI (python/meson.build: limited_api '3.10'). Only the interpreter part of the tag
changes, and the result is checked, so a meson-python that builds differently fails loudly
instead of producing a mislabelled wheel. Not for anything else: every other hook is
meson-python's."""

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig

LIMITED_API_TAG = "cp310"  # python/meson.build: limited_api : '3.10'

# Every library meson.build asks pkg-config for (a test keeps this in step with the
# dependency() calls), with the Debian package that has its .pc file (and, for the helper's
# libraries, the static archive python mode links).
LIBRARIES = (
    ("jansson", "libjansson-dev"),
    ("libseccomp", "libseccomp-dev"),
    ("libcap", "libcap-dev"),
    ("libpcre2-8", "libpcre2-dev"),
    ("libidn2", "libidn2-dev"),
    ("gnutls", "libgnutls28-dev"),
    ("libcurl", "libcurl4-gnutls-dev"),
    ("libmicrohttpd", "libmicrohttpd-dev"),
)
C_COMPILERS = ("cc", "gcc", "clang")  # meson's own search order, less the exotic ones
# What pip's isolated build installs from PyPI (pyproject.toml's requires, and ninja when
# meson-python finds none): (what, module, program, variable naming the program, where from).
PYTHON_TOOLS = (
    ("meson-python", "mesonpy", None, None, "PyPI: meson-python"),
    ("meson", "mesonbuild", "meson", "MESON", "PyPI: meson"),
    ("ninja", "ninja", "ninja", "NINJA", "PyPI: ninja"),
)


def _command(env_var, names):
    """The program meson would run: $env_var's first word, else the first of names on PATH."""
    given = shlex.split(os.environ.get(env_var, ""))
    if given:
        return shutil.which(given[0])
    return next(filter(None, map(shutil.which, names)), None)


def missing_build_dependencies(python_tools=True):
    """What a build from source needs and this machine lacks, as (what, where from) pairs
    (where from: a Debian package, or "PyPI: name"); empty when everything was found.
    python_tools: also meson-python, meson and ninja, which pip's isolated build brings."""
    missing = []
    if not _command("CC", C_COMPILERS):
        missing.append(("a C compiler (cc, gcc or clang; or $CC)", "build-essential"))
    include = sysconfig.get_paths().get("include") or ""
    if not os.path.isfile(os.path.join(include, "Python.h")):
        missing.append((f"Python.h for {sys.executable} (in {include})", "python3-dev"))
    for what, module, program, env_var, source in PYTHON_TOOLS if python_tools else ():
        found = importlib.util.find_spec(module) is not None
        if program and not found:
            found = _command(env_var, (program,)) is not None
        if not found:
            missing.append((what, source))
    pkg_config = _command("PKG_CONFIG", ("pkg-config", "pkgconf"))
    if not pkg_config:
        missing.append(("pkg-config (so the libraries below could not be checked)",
                        "pkg-config"))
        missing.extend((f"{name} (pkg-config module)", package) for name, package in LIBRARIES)
        return missing
    for name, package in LIBRARIES:
        found = subprocess.run([pkg_config, "--exists", name], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL).returncode == 0
        if not found:
            missing.append((f"{name} (pkg-config module)", package))
    return missing


def missing_message(missing):
    debian = sorted({source for _, source in missing if not source.startswith("PyPI:")})
    lines = ["snapcell: cannot build from source; missing:"]
    lines += [f"  {what}: {source if source.startswith('PyPI:') else 'Debian: ' + source}"
              for what, source in missing]
    if debian:
        lines.append("On Debian or Ubuntu: apt-get install " + " ".join(debian))
    lines.append("(scripts/install-deps installs them all; or install a wheel built by "
                 "scripts/build-wheel, which needs none of them)")
    return "\n".join(lines)


def _check():
    missing = missing_build_dependencies()
    if missing:
        raise SystemExit(missing_message(missing))


def _mesonpy():
    import mesonpy  # the check above names it when it is missing
    return mesonpy


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _check()
    mesonpy = _mesonpy()
    if sys.implementation.name != "cpython":
        return mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)
    import mesonpy._tags
    original = mesonpy._tags.get_interpreter_tag
    mesonpy._tags.get_interpreter_tag = lambda: LIMITED_API_TAG
    try:
        name = mesonpy.build_wheel(wheel_directory, config_settings, metadata_directory)
    finally:
        mesonpy._tags.get_interpreter_tag = original
    if f"-{LIMITED_API_TAG}-abi3-" not in name:
        raise RuntimeError(f"snapcell_backend: expected a {LIMITED_API_TAG}-abi3 wheel, got {name}")
    return name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _check()
    return _mesonpy().build_editable(wheel_directory, config_settings, metadata_directory)


# meson-python's own hooks, imported when called: the check must be able to run (and name
# meson-python) where meson-python is not installed.
def build_sdist(sdist_directory, config_settings=None):
    return _mesonpy().build_sdist(sdist_directory, config_settings)


def get_requires_for_build_wheel(config_settings=None):
    return _mesonpy().get_requires_for_build_wheel(config_settings)


def get_requires_for_build_editable(config_settings=None):
    return _mesonpy().get_requires_for_build_editable(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    return _mesonpy().get_requires_for_build_sdist(config_settings)


if __name__ == "__main__":
    # The system's part only: pip's isolated build brings the Python tools.
    missing = missing_build_dependencies(python_tools=False)
    if missing:
        raise SystemExit(missing_message(missing))
    print("snapcell: every build dependency outside PyPI was found")
