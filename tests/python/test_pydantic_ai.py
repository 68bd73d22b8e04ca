"""snapcell.pydantic_ai against the real PydanticAI (pydantic-ai-slim, pinned in
requirements-dev.txt): an Agent whose model is PydanticAI's own FunctionModel, scripted turn by
turn, calls execute_code; what the next turn's request holds is what the model was told."""

import sys

import pytest

if sys.version_info < (3, 11):
    pytest.skip("pydantic-ai-slim needs Python 3.11 or newer", allow_module_level=True)

import pydantic_ai
from pydantic_ai import Agent
from pydantic_ai.messages import (ModelResponse, RetryPromptPart, TextPart,
                                  ToolCallPart, ToolReturnPart)
from pydantic_ai.models.function import FunctionModel

import snapcell
from snapcell.pydantic_ai import execute_code_tool


def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def scripted(*codes):
    """A FunctionModel that sends each code in turn to execute_code, then answers with what
    the last request held; every request's parts are kept in .seen."""
    seen = []

    def turn(messages, info):
        seen.append(messages[-1].parts)
        i = len(seen) - 1
        if i < len(codes):
            return ModelResponse(parts=[ToolCallPart("execute_code", {"code": codes[i]}, tool_call_id=f"c{i}")])
        return ModelResponse(parts=[TextPart("done")])

    model = FunctionModel(turn)
    model.seen = seen
    return model


def retried(part):
    """Whether a request part is PydanticAI's retry of a failed tool call (this version sends
    ModelRetry back as a tool return whose outcome is "retried")."""
    return isinstance(part, RetryPromptPart) or getattr(part, "outcome", None) == "retried"


def test_a_run_calls_a_host_tool_and_the_model_reads_its_output_and_value():
    with snapcell.Sandbox(tools=[add]) as sb:
        model = scripted("print(tools.add(a=20, b=22))\n6 * 7")
        agent = Agent(model, tools=[execute_code_tool(sb)])
        assert agent.run_sync("compute").output == "done"
    (ret,) = model.seen[1]
    assert isinstance(ret, ToolReturnPart)
    assert ret.content == "42\nvalue: 42\n"


def test_the_description_is_the_sandboxs_and_says_when_state_persists():
    captured = {}

    def turn(messages, info):
        captured["tools"] = {t.name: t for t in info.function_tools}
        return ModelResponse(parts=[TextPart("ok")])

    with snapcell.Sandbox(tools=[add]) as sb:
        Agent(FunctionModel(turn), tools=[execute_code_tool(sb)]).run_sync("x")
        assert captured["tools"]["execute_code"].description == sb.describe()
        assert captured["tools"]["execute_code"].parameters_json_schema["required"] == ["code"]
        Agent(FunctionModel(turn), tools=[execute_code_tool(sb, stateful=True, name="py")]).run_sync("x")
        assert captured["tools"]["py"].description == sb.describe(stateful=True)
        assert captured["tools"]["py"].description != sb.describe()


def test_a_failed_run_asks_the_model_to_retry_with_its_output_and_cause():
    with snapcell.Sandbox(timeout=1) as sb:
        model = scripted("print('before')\n1/0", "while True: pass", "print('fixed')")
        agent = Agent(model, tools=[execute_code_tool(sb, max_retries=3)])
        assert agent.run_sync("go").output == "done"
    (error,) = model.seen[1]
    assert retried(error)
    assert error.content.startswith("before\n")
    assert "ZeroDivisionError: division by zero" in error.content
    assert "1/0" in error.content  # the end of the traceback
    (timeout,) = model.seen[2]
    assert retried(timeout)
    r = sb_summary_of_timeout()
    assert r in timeout.content
    (ok,) = model.seen[3]
    assert isinstance(ok, ToolReturnPart) and not retried(ok) and ok.content == "fixed\n"


def sb_summary_of_timeout():
    """The library's words for a run stopped by its time limit."""
    with snapcell.Sandbox(timeout=1) as sb:
        r = sb.run("while True: pass")
    assert r.status == "timeout"
    return r.summary


def test_retries_run_out_as_pydantic_ai_says():
    with snapcell.Sandbox() as sb:
        model = scripted("1/0", "1/0")
        agent = Agent(model, tools=[execute_code_tool(sb, max_retries=1)])
        with pytest.raises(pydantic_ai.exceptions.UnexpectedModelBehavior, match="exceeded max retries"):
            agent.run_sync("go")


def test_stateful_keeps_variables_between_calls_and_stateless_does_not():
    with snapcell.Sandbox() as sb:
        model = scripted("import math\nx = 40", "x + 2")
        Agent(model, tools=[execute_code_tool(sb, stateful=True)]).run_sync("go")
        assert model.seen[2][0].content == "value: 42\n"
        model = scripted("x = 40", "x + 2")
        Agent(model, tools=[execute_code_tool(sb, max_retries=2)]).run_sync("go")
        assert retried(model.seen[2][0])
        assert "NameError: name 'x' is not defined" in model.seen[2][0].content


def test_a_run_with_nothing_to_show_says_it_ran():
    with snapcell.Sandbox() as sb:
        model = scripted("x = 1")
        Agent(model, tools=[execute_code_tool(sb)]).run_sync("go")
        assert model.seen[1][0].content == sb.run("x = 1").summary


def test_a_sandbox_is_required():
    with pytest.raises(TypeError, match="snapcell.Sandbox"):
        execute_code_tool(object())


def test_a_run_paused_for_approval_is_an_error_not_a_retry():
    with snapcell.Sandbox(tools=[add], approval_required={"add"}, approval_timeout=1) as sb:
        model = scripted("tools.add(a=1, b=2)")
        agent = Agent(model, tools=[execute_code_tool(sb)])
        with pytest.raises(RuntimeError, match="paused at a call of 'add'.*approval_required"):
            agent.run_sync("go")
