"""The names the package shares with the library: the signal that ended a cell under the
record's name (term_signal kept as its alias), limit names from the library, and the
execute_code schema the library gives."""
import json
import signal

import snapcell
from snapcell import _native, _sandbox


def test_a_killed_run_names_its_signal_as_the_record_does():
    with snapcell.Sandbox() as sb:
        # bpf(2) is a seccomp tripwire: the kernel kills the cell with SIGSYS.
        r = sb.run("import ctypes; ctypes.CDLL(None).syscall(321, 0, 0, 0)")
    assert r.status == "killed"
    assert r.signal == signal.SIGSYS
    assert r.term_signal == r.signal
    assert "signal" in __import__("dataclasses").asdict(r)


def test_keywords_map_onto_the_library_limit_names():
    names = _native.limit_names()
    assert names[0] == "wall_ms" and len(set(names)) == len(names)
    assert {c_name for c_name, _ in _sandbox._LIMITS.values()} <= set(names)


def test_execute_code_schema_comes_from_the_library():
    for stateful in (False, True):
        schema = json.loads(_native.execute_code_schema(stateful))
        assert schema["required"] == ["code"] and schema["additionalProperties"] is False
        assert ("persist" if stateful else "fresh") in schema["properties"]["code"]["description"]


def test_an_unknown_level_is_refused_with_the_library_names():
    cfg = _native.Config()
    try:
        cfg.require_isolation("namespace")
    except ValueError as e:
        assert "'namespace'" in str(e) and "none, rlimits, namespaces, cgroups" in str(e)
    else:
        raise AssertionError("an unknown level was accepted")
