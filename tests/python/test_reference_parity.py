"""Drop-in parity with the reference integration: the public signatures of
agent-framework-hyperlight, as pinned in requirements-dev.txt, against snapcell.agent_framework's,
every difference listed with its reason in docs/python.md; and the differences found closed."""

import asyncio
import importlib.metadata
import importlib.resources
import inspect
import pathlib
import re

import agent_framework_hyperlight as reference
import pytest
from agent_framework import tool

import snapcell
import snapcell.agent_framework as ours
from reference_parity import differences, listed_differences, report
from snapcell.agent_framework import AllowedDomain, CodeActProvider, ExecuteCodeTool

ROOT = pathlib.Path(__file__).resolve().parents[2]


@tool(approval_mode="never_require")
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


@tool(approval_mode="never_require")
def lookup(city: str) -> dict:
    """Looks up a city."""
    return {"city": city}


@tool(approval_mode="never_require")
def boom(x: int) -> int:
    """Fails."""
    raise RuntimeError("the secret database password is hunter2")


def invoke(t, code):
    return asyncio.run(t.invoke(arguments={"code": code}))


def test_the_installed_reference_is_the_pinned_one():
    pinned = re.search(r"^agent-framework-hyperlight==(\S+)$", (ROOT / "requirements-dev.txt").read_text(), re.M)
    assert pinned and importlib.metadata.version("agent-framework-hyperlight") == pinned.group(1)


def test_every_signature_difference_is_listed_with_its_reason():
    found = differences(reference, ours)
    listed = listed_differences()
    unlisted, gone = report(found, listed)
    assert unlisted == [], "differences docs/python.md does not list:\n" + "\n".join(unlisted)
    assert gone == [], f"listed in docs/python.md but no longer different: {gone}"
    assert all(reason.strip() for reason in listed.values())


def test_the_comparison_sees_a_difference():
    # The check itself: a renamed keyword in our signature would be found.
    class Fake:
        __all__ = ["HyperlightExecuteCodeTool"]

        class HyperlightExecuteCodeTool:
            def __init__(self, *, toolz=None):
                pass

    found = differences(Fake, ours)
    assert found["ExecuteCodeTool.__init__(toolz)"] == "only in the reference"


def test_build_instructions_takes_tools_visible_to_model():
    t = ExecuteCodeTool(tools=[add])
    assert "may also be offered to you directly" in t.build_instructions(tools_visible_to_model=True)
    assert "not offered to you separately" in t.build_instructions(tools_visible_to_model=False)
    with pytest.raises(TypeError):
        t.build_instructions()


def test_tool_description_format_per_tool():
    t = ExecuteCodeTool(tools=[add, lookup], tool_description_format={"add": "json"})
    text = t.description
    assert re.search(r"- add: Adds two integers\.\n    parameters \(JSON Schema\): ", text), text
    assert "- lookup: Looks up a city.\n    city (string, required)" in text
    assert t.build_serializable_state()["tool_description_format"] == {"add": "json"}
    assert t.create_run_tool().description == text
    with pytest.raises(ValueError):
        ExecuteCodeTool(tool_description_format={"add": "yaml"})


def test_wildcard_entries_are_accepted():
    t = ExecuteCodeTool(allowed_domains=["*.Example.org", ("https://api.example.com/v1", "get")])
    assert t.get_allowed_domains() == [
        AllowedDomain("*.example.org", None),
        AllowedDomain("api.example.com", ("GET",)),
    ]
    assert "- *.example.org: all methods" in t.description
    t.remove_allowed_domain("*.example.org")
    assert [d.target for d in t.get_allowed_domains()] == ["api.example.com"]


def test_a_file_or_a_missing_path_as_workspace_is_a_value_error(tmp_path):
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ValueError, match="workspace_root must point to an existing directory"):
        ExecuteCodeTool(workspace_root=tmp_path / "f.txt")
    with pytest.raises(ValueError, match="workspace_root must point to an existing directory"):
        CodeActProvider(workspace_root=tmp_path / "missing")


def test_serializable_state_has_the_references_keys():
    ref_state = reference.HyperlightExecuteCodeTool(tools=[add]).build_serializable_state()
    state = ExecuteCodeTool(tools=[add]).build_serializable_state()
    assert set(ref_state) <= set(state), set(ref_state) - set(state)
    assert (state["backend"], state["module"], state["module_path"]) == ("wasm", "python_guest.path", None)
    assert state["include_detailed_errors"] is False and state["execution_timeout_seconds"] is None


def test_provider_signature_is_explicit_and_matches_the_tool():
    params = inspect.signature(CodeActProvider).parameters
    assert all(p.kind is not p.VAR_KEYWORD for p in params.values())
    tool_params = inspect.signature(ExecuteCodeTool).parameters
    assert [n for n in params if n != "source_id"] == [n for n in tool_params if n != "_settings"]


def test_py_typed_and_version():
    assert importlib.resources.files("snapcell").joinpath("py.typed").is_file()
    assert ours.__version__ == snapcell.__version__ and "__version__" in ours.__all__


def test_execution_timeout_seconds_is_timeout():
    with ExecuteCodeTool(execution_timeout_seconds=1) as t:
        out = invoke(t, "while True: pass")
        state = t.build_serializable_state()
    assert out[-2].error_code == "timeout" and "wall-clock time limit" in out[-1].text
    assert state["execution_timeout_seconds"] == state["timeout"] == 1
    ExecuteCodeTool(timeout=2, execution_timeout_seconds=2)
    with pytest.raises(ValueError, match="same setting"):
        ExecuteCodeTool(timeout=2, execution_timeout_seconds=3)


TRY_BOOM = (
    "for args in ({'x': 1}, {'x': 'one'}):\n"
    "    try:\n"
    "        tools.boom(**args)\n"
    "    except ToolError as e:\n"
    "        print(e)\n"
)


def test_tool_failures_are_opaque_unless_detailed_errors():
    with ExecuteCodeTool(tools=[boom]) as t:
        quiet = invoke(t, TRY_BOOM)[0].text.splitlines()
        assert t.build_serializable_state()["include_detailed_errors"] is False
    assert quiet[0] == "Host tool execution failed."
    assert "hunter2" not in "".join(quiet)
    assert "'one'" in quiet[1] or "integer" in quiet[1]  # argument errors stay detailed
    with ExecuteCodeTool(tools=[boom], include_detailed_errors=True) as t:
        detailed = invoke(t, TRY_BOOM)[0].text.splitlines()
    assert "hunter2" in detailed[0]
    assert ExecuteCodeTool(tools=[boom])._settings.key() != ExecuteCodeTool(
        tools=[boom], include_detailed_errors=True
    )._settings.key()


def fails(x: int) -> int:
    raise RuntimeError("detail hunter2")


def test_sandbox_keeps_detailed_errors_and_takes_the_switch():
    code = "try:\n    tools.fails(x=1)\nexcept ToolError as e:\n    print(e)\n"
    with snapcell.Sandbox(tools=[fails]) as sb:
        assert "hunter2" in sb.run(code).stdout
    with snapcell.Sandbox(tools=[fails], include_detailed_errors=False) as sb:
        assert sb.run(code).stdout == "Host tool execution failed.\n"
        assert "is required" in sb.run("try:\n    tools.fails()\nexcept ToolError as e:\n    print(e)\n").stdout
