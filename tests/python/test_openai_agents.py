"""docs/python.md's OpenAI Agents SDK recipe, run as written, against the real SDK
(openai-agents, pinned in requirements-dev.txt): an Agent whose model is a scripted Model
subclass calls execute_code; the next turn's input holds what the model was told."""

import json
import pathlib
import re

import pytest

import agents
from agents import Agent, Runner
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (ResponseFunctionToolCall, ResponseOutputMessage,
                                    ResponseOutputText)

ROOT = pathlib.Path(__file__).resolve().parents[2]

agents.set_tracing_disabled(True)  # no export attempts: the tests have no network


def recipe():
    """The code block under docs/python.md's "OpenAI Agents SDK" heading."""
    doc = (ROOT / "docs/python.md").read_text()
    section = doc[doc.index("### OpenAI Agents SDK"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def price(sku: str) -> float:
    """The price of an item."""
    return {"apple": 0.5, "pear": 0.75}[sku]


class Scripted(Model):
    """Calls execute_code with each code in turn, then answers "done"; keeps every input."""

    def __init__(self, *codes):
        self.codes, self.inputs, self.tools = list(codes), [], []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, **_):
        self.inputs.append(input)
        self.tools.append(tools)
        i = len(self.inputs) - 1
        if i < len(self.codes):
            call = ResponseFunctionToolCall(type="function_call", call_id=f"c{i}", name="execute_code",
                                            arguments=json.dumps({"code": self.codes[i]}))
            return ModelResponse(output=[call], usage=Usage(), response_id=None)
        text = ResponseOutputText(type="output_text", text="done", annotations=[])
        message = ResponseOutputMessage(id="m", type="message", role="assistant", status="completed",
                                        content=[text])
        return ModelResponse(output=[message], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError


def tool_output(model, turn):
    (out,) = [i for i in model.inputs[turn] if isinstance(i, dict) and i.get("type") == "function_call_output"][-1:]
    return out["output"]


@pytest.fixture
def built():
    scope = {"price": price}
    exec(recipe(), scope)
    yield scope
    scope["sandbox"].close()


def test_the_recipe_runs_code_that_calls_a_host_tool(built):
    model = Scripted("total = sum(tools.price(sku=s) for s in ['apple', 'pear'])\nprint(total)\ntotal * 2")
    agent = built["agent"].clone(model=model)
    assert Runner.run_sync(agent, "price it").final_output == "done"
    assert tool_output(model, 1) == "1.25\nvalue: 2.5\n"
    (tool,) = model.tools[0]
    assert tool.name == "execute_code"
    assert tool.description == built["sandbox"].describe()
    assert list(tool.params_json_schema["properties"]) == ["code"]


def test_a_failed_run_tells_the_model_its_cause(built):
    model = Scripted("print('before')\ntools.price(sku='plum')", "import sys; sys.exit(3)")
    Runner.run_sync(built["agent"].clone(model=model), "price it")
    told = tool_output(model, 1)
    assert told.startswith("before\n")
    assert "ToolError: 'plum'" in told  # the host tool's KeyError, as the code saw it
    assert tool_output(model, 2) == built["sandbox"].run("import sys; sys.exit(3)").model_text
    assert "exited with status 3" in tool_output(model, 2)
