"""snapcell.langgraph against the real LangGraph CodeAct (langgraph-codeact with langgraph,
pinned in requirements-dev.txt): create_codeact's graph, with langchain's own FakeListChatModel
answering each turn with code, runs that code through CodeActSandbox; the messages the graph
adds after each run are what the model was told."""

import asyncio
import os

import pytest

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langgraph.checkpoint.memory import MemorySaver
from langgraph_codeact import create_codeact

import snapcell
from snapcell.langgraph import SESSION_KEY, CodeActSandbox

HOST_PID = os.getpid()
calls = []


def add(a: int, b: int) -> int:
    """Adds two integers."""
    calls.append(os.getpid())
    return a + b


def fenced(code):
    return f"Let me run this.\n```python\n{code}\n```"


def graph(runner, *replies, use_async=False):
    """The graph; the model answers with each reply's code in turn ("done", no code, ends an
    invocation), and "done" at the end."""
    model = FakeListChatModel(responses=[*(r if r == "done" else fenced(r) for r in replies), "done"])
    eval_fn = runner.aeval if use_async else runner.eval
    return create_codeact(model, [add], eval_fn).compile(checkpointer=MemorySaver())


def outputs(state):
    """The run outputs CodeAct added to the conversation, in order."""
    return [m.content for m in state["messages"] if m.type == "human"][1:]


def test_variables_persist_in_the_session_and_tools_run_on_the_host():
    calls.clear()
    with snapcell.Sandbox() as sb:
        runner = CodeActSandbox(sb)
        g = graph(runner, "import os\nx = add(20, 2)\nclass Box: pass\nbox = Box()\nprint(x, os.getpid() == %d)" % HOST_PID,
                  "box.n = add(a=x, b=20)\nbox.n")
        state = g.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "t1"}})
        assert outputs(state) == ["22 False\n", "value: 42\n"]
        assert calls == [HOST_PID, HOST_PID]
        # The context holds the session's key, not copies of the variables.
        assert set(state["context"]) == {SESSION_KEY}
        runner.close()


def test_each_thread_has_its_own_session_and_a_thread_goes_on_where_it_was():
    with snapcell.Sandbox() as sb:
        runner = CodeActSandbox(sb)
        g = graph(runner, "secret = 7", "done", "secret * 6", "done", "secret")
        one = {"configurable": {"thread_id": "one"}}
        s1 = g.invoke({"messages": [("user", "set")]}, one)
        assert outputs(s1) == [sb.run("secret = 7").model_text]
        s2 = g.invoke({"messages": [("user", "use")]}, one)
        assert outputs(s2)[-1] == "value: 42\n"
        s3 = g.invoke({"messages": [("user", "other")]}, {"configurable": {"thread_id": "two"}})
        assert "NameError: name 'secret' is not defined" in outputs(s3)[-1]
        assert s3["context"][SESSION_KEY] != s1["context"][SESSION_KEY]
        runner.close()


def test_a_failure_tells_the_model_its_output_and_cause():
    with snapcell.Sandbox(timeout=1) as sb:
        runner = CodeActSandbox(sb)
        g = graph(runner, "print('before')\nadd('x', 1)", "while True: pass", "add(1, 1)")
        state = g.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "t"}})
        failed, stopped, after = outputs(state)
        assert failed.startswith("before\n") and "ToolError" in failed
        assert stopped == sb.run("while True: pass").model_text
        assert after == "value: 2\n"  # a new session, with the tools bound again
        runner.close()


def test_the_async_eval_fn_keeps_state_too():
    with snapcell.Sandbox() as sb:
        runner = CodeActSandbox(sb)
        g = graph(runner, "x = add(1, 2)", "x * 14", use_async=True)
        state = asyncio.run(g.ainvoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "a"}}))
        assert outputs(state)[-1] == "value: 42\n"
        runner.close()


def test_a_sandbox_is_required():
    with pytest.raises(TypeError, match="snapcell.Sandbox"):
        CodeActSandbox("sandbox")
