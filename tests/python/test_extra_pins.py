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
    m = re.search(rf"^{re.escape(name)}==([^\s;]+)(?:;.*)?$", text, re.M)
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


# Each adapter's extra: the package its module needs.
ADAPTER_EXTRAS = {
    "pydantic-ai": "pydantic-ai-slim",
    "langgraph": "langgraph-codeact",
    "fastmcp": "fastmcp",
    "smolagents": "smolagents",
    "google-adk": "google-adk",
}


@pytest.mark.parametrize("extra", sorted(ADAPTER_EXTRAS))
def test_each_adapter_extra_allows_the_tested_version_and_the_docs_name_it(extra):
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (requirement,) = [Requirement(r) for r in extras[extra]]
    assert requirement.name == ADAPTER_EXTRAS[extra]
    tested = pinned(requirement.name)
    assert requirement.specifier.contains(tested), (str(requirement.specifier), tested)
    major, minor = tested.split(".")[:2]
    assert not requirement.specifier.contains(f"{major}.{int(minor) + 1}.0")
    docs = (ROOT / "docs/python.md").read_text()
    assert re.search(rf"tested: [^)]*\b{re.escape(requirement.name)} {re.escape(tested)}\b", docs), extra
