"""Fixtures for the Python package's tests: they run against the installed wheel, with real
sandboxes. Each test gets its own TMPDIR, so the sandboxes' work directories land where the
test can check that nothing is left behind."""

import os
import pathlib
import shutil
import tempfile

import pytest

from snapcell import _native, _sandbox


@pytest.fixture(autouse=True)
def work_tmp(monkeypatch):
    """Each test's own TMPDIR, where its sandboxes put their work directories. Not under
    pytest's tmp_path: when the tests run as root the sandbox runs as a uid of its own, which must
    reach its root mount point, and pytest's directories are private (0700)."""
    work = tempfile.mkdtemp(prefix="snapcell-test-")
    os.chmod(work, 0o711)
    monkeypatch.setenv("TMPDIR", work)
    yield pathlib.Path(work)
    shutil.rmtree(work, ignore_errors=True)


def native_config():
    """A bare _native.Config pointed at the package's helper, as the Python layer does."""
    cfg = _native.Config()
    cfg.set_helper(_sandbox._HELPER)
    return cfg


def descendants(pid=None):
    """Every live process below pid (default: this one), in any pid namespace."""
    pid = pid or os.getpid()
    parent = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z":
            parent[int(entry)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - found
        found |= frontier
    return found
