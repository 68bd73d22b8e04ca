"""Finds the snapcell binary under test: $SNAPCELL_BIN, or the default build directory. The
binary runs the build tree's helper ($SNAPCELL_HELPER, default: beside the CLI's directory), as
`meson devenv` would set it; the installed default is for installed builds only."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def snapcell_paths():
    path = os.environ.get("SNAPCELL_BIN", str(ROOT / "build" / "cli" / "snapcell"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"snapcell binary not found at {path}: build first (ninja -C build)")
    helper = os.environ.get("SNAPCELL_HELPER",
                            str(pathlib.Path(path).resolve().parents[1] / "snapcell-cell"))
    return path, helper


@pytest.fixture(scope="session")
def snapcell(snapcell_paths):
    path, helper = snapcell_paths

    def run(*args, stdin=None, timeout=60, env=None):
        full_env = {**os.environ, "SNAPCELL_HELPER": helper, **(env or {})}
        return subprocess.run([path, *map(str, args)], input=stdin, capture_output=True,
                              timeout=timeout, env=full_env)

    return run
