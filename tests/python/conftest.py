"""Fixtures for the Python package's tests: they run against the installed wheel, with real
sandboxes. Each test gets its own TMPDIR, so the sandboxes' work directories land where the
test can check that nothing is left behind."""

import os

import pytest


@pytest.fixture(autouse=True)
def work_tmp(tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("TMPDIR", str(work))
    return work


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
