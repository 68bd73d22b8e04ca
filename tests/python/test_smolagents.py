"""snapcell.smolagents against the real smolagents (pinned in requirements-dev.txt): a CodeAgent
whose model is a scripted smolagents Model writes each step's code; the executor runs it in a
snapcell session with the agent's tools on the host, and the next step's messages hold what the
model was told."""

import os

import pytest

from smolagents import CodeAgent, tool
from smolagents.models import ChatMessage, MessageRole, Model

import snapcell
from snapcell.smolagents import SnapcellExecutor

HOST_PID = os.getpid()
calls = []


@tool
def price(sku: str, quantity: int = 1) -> float:
    """The price of some items.

    Args:
        sku: the item
        quantity: how many
    """
    calls.append((sku, quantity, os.getpid()))
    return {"apple": 0.5, "pear": 0.75}[sku] * quantity


class Scripted(Model):
    """Answers each step with the next code; keeps the messages of every step."""

    def __init__(self, *codes):
        super().__init__(model_id="scripted")
        self.codes, self.seen = list(codes), []

    def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kw):
        self.seen.append(messages)
        code = self.codes[len(self.seen) - 1]
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: go.\n<code>\n{code}\n</code>")


def told(model, step):
    """The text of the messages the model read first before step `step` (0-based)."""
    text = ""
    for m in model.seen[step][len(model.seen[step - 1]) + 1:]:
        content = m.content
        text += content if isinstance(content, str) else "".join(c.get("text", "") for c in content)
    return text


def agent(sb, *codes, **kw):
    model = Scripted(*codes)
    executor = SnapcellExecutor(sb)
    return CodeAgent(tools=[price], model=model, executor=executor, max_steps=len(codes), **kw), model


def test_state_persists_tools_run_on_the_host_and_final_answer_ends_the_run():
    calls.clear()
    with snapcell.Sandbox() as sb:
        a, model = agent(sb, "import os\nx = price('apple', quantity=4)\nprint(x, os.getpid() == %d)\nx * 10" % HOST_PID,
                         "final_answer(x + price(sku='pear'))\nprint('not reached')")
        assert a.run("price it") == 2.75
    assert [c[:2] for c in calls] == [("apple", 4), ("pear", 1)]
    assert all(pid == HOST_PID for *_, pid in calls)  # the tools ran in this process
    text = told(model, 1)
    assert "2.0 False" in text  # printed in the cell (another pid)
    assert "Last output from code snippet:\n20.0" in text  # the last expression's value


def test_a_failed_step_tells_the_model_its_output_and_cause():
    with snapcell.Sandbox() as sb:
        a, model = agent(sb, "print('before')\nprice('plum')", "final_answer('ok')")
        assert a.run("go") == "ok"
        text = told(model, 1)
        assert "before" in text
        summary = sb.run("raise ToolError(\"'plum'\")").summary.split("\n")[0]
        assert summary in text


def test_sent_variables_reach_the_session_and_others_are_refused():
    with snapcell.Sandbox() as sb:
        a, model = agent(sb, "final_answer(limit * 2)")
        assert a.run("go", additional_args={"limit": 21}) == 42
        executor = SnapcellExecutor(sb)
        with pytest.raises(TypeError, match="JSON-representable.*: when"):
            executor.send_variables({"when": object(), "ok": 1})
        executor.cleanup()


def test_after_a_limit_the_next_step_runs_in_a_new_session_with_the_tools():
    with snapcell.Sandbox(timeout=1) as sb:
        a, model = agent(sb, "y = 5", "while True: pass", "y", "final_answer(price('pear', limit))")
        assert a.run("go", additional_args={"limit": 3}) == 2.25  # limit: set up again
        assert sb.run("while True: pass").summary in told(model, 2)
        assert "NameError: name 'y' is not defined" in told(model, 3)


def test_a_sandbox_is_required():
    with pytest.raises(TypeError, match="snapcell.Sandbox"):
        SnapcellExecutor(None)
