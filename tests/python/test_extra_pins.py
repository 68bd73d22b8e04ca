"""The `agent-framework` extra (pyproject.toml) allows a range the tests pass with: the version
requirements-dev.txt pins for them lies in it, and the docs name that version as the one
tested. Reading pyproject.toml needs tomllib (3.11+): the suite's other interpreters check it."""

import pathlib
import re

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib", reason="tomllib is new in Python 3.11")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pinned(name):
    text = (ROOT / "requirements-dev.txt").read_text()
    m = re.search(rf"^{re.escape(name)}==(\S+)$", text, re.M)
    assert m, f"requirements-dev.txt pins no {name}"
    return m.group(1)


def test_the_extra_allows_the_tested_version_and_the_docs_name_it():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (requirement,) = [Requirement(r) for r in extras["agent-framework"]]
    assert requirement.name == "agent-framework-core"
    tested = pinned("agent-framework-core")
    assert requirement.specifier.contains(tested), (str(requirement.specifier), tested)
    # A range no wider than the tested minor version: a newer minor is a new test run first.
    major, minor = tested.split(".")[:2]
    assert not requirement.specifier.contains(f"{major}.{int(minor) + 1}.0")
    for doc in ("docs/python.md", "docs/mcp.md"):
        assert f"tested: {tested}" in (ROOT / doc).read_text(), doc
