"""Finds the snapcell binary under test: $SNAPCELL_BIN, or the default build directory."""
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def snapcell():
    path = os.environ.get("SNAPCELL_BIN", str(ROOT / "build" / "cli" / "snapcell"))
    if not os.access(path, os.X_OK):
        pytest.fail(f"snapcell binary not found at {path}: build first (ninja -C build)")

    def run(*args, stdin=None, timeout=60):
        return subprocess.run([path, *map(str, args)], input=stdin, capture_output=True,
                              timeout=timeout)

    return run
