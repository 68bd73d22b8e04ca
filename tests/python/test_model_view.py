"""What the model sees: after a failed run the model is told the
status and its cause, through agent-framework-openai's real Chat Completions and Responses
clients talking to a local HTTP server; `tools` needs no import; every usage sentence of the
description holds in a real cell."""

import asyncio
import json
import re

import pytest
from agent_framework import Agent, tool
from agent_framework.openai import OpenAIChatClient, OpenAIChatCompletionClient

import snapcell
from openai_stub import OpenAIStub
from snapcell.agent_framework import ExecuteCodeTool


@tool(approval_mode="never_require")
def add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


def plain_add(a: int, b: int) -> int:
    """Adds two integers."""
    return a + b


CLIENTS = {
    "chat-completions": OpenAIChatCompletionClient,
    "responses": OpenAIChatClient,
}

# code, what the next request must carry, the ExecuteCodeTool keywords
FAILURES = {
    "exception": (
        "print('before')\ndef f():\n    return 1/0\nf()",
        ["ZeroDivisionError: division by zero", "return 1/0", "before"],
        {},
    ),
    "exit": ("import sys\nsys.exit(3)", ["exited with status 3"], {}),
    "timeout": ("while True:\n    pass", ["wall-clock time limit"], {"timeout": 1}),
    "memory": (
        "blocks = []\nwhile True:\n    blocks.append(bytearray(16 << 20))",
        ["memory limit"],
        {"memory_limit": 128 << 20},
    ),
}


def ask(client_cls, stub, execute_code):
    client = client_cls(model="stub", api_key="test-key", base_url=stub.base_url)
    agent = Agent(client, instructions="Use execute_code.", tools=[execute_code])
    return asyncio.run(agent.run("Run the code."))


@pytest.mark.parametrize("client", sorted(CLIENTS))
@pytest.mark.parametrize("failure", sorted(FAILURES))
def test_the_next_turn_carries_the_cause(client, failure):
    code, causes, keywords = FAILURES[failure]
    with ExecuteCodeTool(**keywords) as execute_code, OpenAIStub(code) as stub:
        response = ask(CLIENTS[client], stub, execute_code)
        assert response.text == "done"
        sent = json.dumps(stub.next_turn())
    for cause in causes:
        assert json.dumps(cause)[1:-1] in sent, (cause, sent)


def test_failed_run_keeps_todays_items_then_appends_the_summary():
    with ExecuteCodeTool() as t:
        items = asyncio.run(t.invoke(arguments={"code": "print('before'); 1/0"}))
        ok_items = asyncio.run(t.invoke(arguments={"code": "print('fine')"}))
    assert [i.type for i in items] == ["text", "error", "text"]
    assert items[0].text == "before\n" and items[1].error_code == "error"
    assert items[2].text.startswith("Execution failed with an uncaught exception: ZeroDivisionError")
    assert "Traceback" in items[2].text and "1/0" in items[2].text
    assert [(i.type, i.text) for i in ok_items] == [("text", "fine\n")]


def test_summary_is_the_librarys_wording():
    with snapcell.Sandbox() as sb:
        r = sb.run("import sys; sys.exit(3)")
    assert r.status == "error" and r.summary == "Execution failed: the code exited with status 3."


# ---- item 2: every sentence is true ----


def test_tools_needs_no_import_in_sandbox_sessions_and_execute_code():
    with snapcell.Sandbox(tools=[snapcell.Tool(plain_add, name="add")]) as sb:
        r = sb.run("print(tools.add(a=20, b=22))\nimport tools as t\nprint(t.add(a=1, b=2))")
        assert (r.status, r.stdout) == ("ok", "42\n3\n"), r
        with sb.session() as s:
            assert s.run("print(tools.add(a=20, b=22))").stdout == "42\n"
    with ExecuteCodeTool(tools=[add]) as t:
        items = asyncio.run(t.invoke(arguments={"code": "print(tools.add(a=20, b=22))"}))
    assert [i.text for i in items] == ["42\n"]


def usage_examples(description):
    """The code examples in the description's sentences: every `...` span that calls
    call_tool( or tools. with concrete arguments, in order."""
    spans = re.findall(r"`([^`]+)`", description)
    return [s for s in spans if re.match(r"(call_tool\(\"|tools\.)\w", s)]


def test_each_usage_sentence_example_runs_in_a_real_cell():
    with ExecuteCodeTool(tools=[add]) as t:
        description = t.description
        assert "`call_tool(name, **kwargs)`" in description
        assert "Prefer `execute_code`" in description and "loops" in description
        assert "post-processing" in description
        examples = usage_examples(description)
        assert examples == ['call_tool("add", a=1, b=1)', "tools.add(a=1, b=1)"], description
        for example in examples:
            items = asyncio.run(t.invoke(arguments={"code": f"print({example})"}))
            assert [i.text for i in items] == ["2\n"], (example, items)


def test_the_last_expression_sentence_is_true():
    """The description and the instructions say the value of a last line that is an
    expression comes back: a run ending with one gets it as the last item, unprinted."""
    with ExecuteCodeTool(tools=[add]) as t:
        assert "the value of its last line when that is an expression" in t.description
        instructions = t.build_instructions(tools_visible_to_model=False)
        assert "the value of its last line when that is an expression" in instructions
        items = asyncio.run(t.invoke(arguments={"code": "x = 20\ntools.add(a=x, b=22)"}))
        assert [i.text for i in items] == ["value: 42"], items


def test_stateful_tool_says_state_persists():
    with ExecuteCodeTool(stateful=True) as t:
        assert "persist" in t.description
        assert "persist" in t.parameters()["properties"]["code"]["description"]
        asyncio.run(t.invoke(arguments={"code": "x = 41"}))
        items = asyncio.run(t.invoke(arguments={"code": "print(x + 1)"}))
        assert [i.text for i in items] == ["42\n"]
    with ExecuteCodeTool() as t:
        assert "persist" not in t.description
        assert "fresh" in t.parameters()["properties"]["code"]["description"]
