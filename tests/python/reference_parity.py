"""Compares the public signatures of the reference integration (agent_framework_hyperlight) with
snapcell.agent_framework's, and the differences with those docs/python.md's "What differs"
lists with a reason. Used by tests/python/test_reference_parity.py (the pinned reference) and
scripts/check-reference (the newest release).

    python reference_parity.py [DOCS]   # prints the differences; exit 1 on unlisted ones

A difference is a key and what differs. Keys name our side: `ExecuteCodeTool.__init__(timeout)`
(a parameter), `ExecuteCodeTool.close` (a member), `CodeActProvider` (a class). Parameters
compare by name, kind and default; annotations are not compared (the reference writes them
as strings naming its own private types)."""

from __future__ import annotations

import inspect
import pathlib
import re
import sys
from typing import Any

# The reference's public names and ours.
RENAMED = {
    "HyperlightExecuteCodeTool": "ExecuteCodeTool",
    "HyperlightCodeActProvider": "CodeActProvider",
}
DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def _public_members(cls: type) -> dict[str, Any]:
    """Public attributes a class defines itself or inherits from classes of its own package
    (not from Agent Framework's bases, whose members both sides share), plus __init__."""
    package = cls.__module__.split(".")[0]
    members: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.split(".")[0] != package:
            continue
        for name, value in vars(klass).items():
            if name == "__init__" or not name.startswith("_"):
                members[name] = value
    return members


def _callable_of(value: Any) -> Any:
    if isinstance(value, (staticmethod, classmethod)):
        return value.__func__
    if isinstance(value, property):
        return None
    return value if callable(value) else None


def _params(func: Any) -> dict[str, inspect.Parameter] | None:
    try:
        return dict(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return None


def _compare_params(key: str, ref: Any, ours: Any, out: dict[str, str]) -> None:
    a, b = _params(ref), _params(ours)
    if a is None or b is None:
        if (a is None) != (b is None):
            out[key] = "one side has no signature"
        return
    a = {n: p for n, p in a.items() if not n.startswith("_")}  # private: not the API
    b = {n: p for n, p in b.items() if not n.startswith("_")}
    for name, p in a.items():
        q = b.get(name)
        if q is None:
            if p.kind is inspect.Parameter.VAR_KEYWORD:
                continue
            out[f"{key}({name})"] = "only in the reference"
        elif p.kind != q.kind:
            out[f"{key}({name})"] = f"kind {p.kind.name} in the reference, {q.kind.name} here"
        elif p.default != q.default:
            out[f"{key}({name})"] = f"default {p.default!r} in the reference, {q.default!r} here"
    for name, q in b.items():
        if name not in a:
            out[f"{key}({name})"] = "only in snapcell"
    if list(a) != [n for n in b if n in a]:
        out[f"{key}(order)"] = f"parameter order {list(a)} in the reference, {list(b)} here"


def differences(ref_module: Any, our_module: Any) -> dict[str, str]:
    out: dict[str, str] = {}
    ref_names = [n for n in getattr(ref_module, "__all__", []) if n != "__version__"]
    for ref_name in ref_names:
        name = RENAMED.get(ref_name, ref_name)
        ref_obj = getattr(ref_module, ref_name)
        ours = getattr(our_module, name, None)
        if ours is None:
            out[name] = "only in the reference"
            continue
        if not inspect.isclass(ref_obj):
            if callable(ref_obj):
                _compare_params(name, ref_obj, ours, out)
            continue
        _compare_params(f"{name}.__init__", ref_obj.__init__, ours.__init__, out)
        ref_members, our_members = _public_members(ref_obj), _public_members(ours)
        for member, value in ref_members.items():
            key = f"{name}.{member}"
            if member not in our_members:
                out[key] = "only in the reference"
                continue
            f, g = _callable_of(value), _callable_of(our_members[member])
            if (f is None) != (g is None):
                out[key] = "a method on one side, an attribute on the other"
            elif f is not None and member != "__init__":
                _compare_params(key, f, g, out)
        for member in our_members:
            if member not in ref_members:
                out[f"{name}.{member}"] = "only in snapcell"
    if hasattr(ref_module, "__version__") and not hasattr(our_module, "__version__"):
        out["__version__"] = "only in the reference"
    return out


def listed_differences(docs: pathlib.Path = DOCS) -> dict[str, str]:
    """The "What differs" section's signature list: lines `- `KEY`: reason`."""
    text = docs.read_text()
    section = text.split("What differs", 1)[1] if "What differs" in text else ""
    section = section.split("\n## ", 1)[0]
    listed = {}
    for m in re.finditer(r"^\s*- `([^`]+)`(?:,\s*`[^`]+`)*:\s*(\S.*)$", section, re.M):
        keys = re.findall(r"`([^`]+)`", m.group(0).split(":", 1)[0] + ":")
        for k in keys:
            listed[k] = m.group(2)
    return listed


def report(found: dict[str, str], listed: dict[str, str]) -> tuple[list[str], list[str]]:
    """(unlisted differences, listed keys no longer different)."""
    keys = [k for k in listed if k.split("(")[0].split(".")[0] in set(RENAMED.values()) | {"FileMount", "AllowedDomain", "__version__"}]
    unlisted = [f"{k}: {v}" for k, v in sorted(found.items()) if k not in listed]
    gone = [k for k in keys if k not in found]
    return unlisted, gone


def main(argv: list[str]) -> int:
    import agent_framework_hyperlight as ref

    import snapcell.agent_framework as ours

    docs = pathlib.Path(argv[1]) if len(argv) > 1 else DOCS
    found = differences(ref, ours)
    unlisted, gone = report(found, listed_differences(docs))
    print(f"reference: agent-framework-hyperlight {getattr(ref, '__version__', '?')}")
    print(f"differences: {len(found)}, listed in {docs.name}: {len(found) - len(unlisted)}")
    for line in unlisted:
        print(f"not listed: {line}")
    for key in gone:
        print(f"listed but no longer different: {key}")
    return 1 if unlisted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
