"""snapcell for PydanticAI: an ``execute_code`` tool over a snapcell.Sandbox, whose host tools
stay on the host. A run that fails raises ``ModelRetry`` with what it printed and how it ended,
so the model is asked to try again within the tool's retries.

    from pydantic_ai import Agent
    import snapcell
    from snapcell.pydantic_ai import execute_code_tool

    sandbox = snapcell.Sandbox(tools=[lookup], timeout=10)
    agent = Agent(model, tools=[execute_code_tool(sandbox)])

PydanticAI's own code mode (pydantic-ai-harness' CodeMode) runs only Monty and offers no seam
for another runtime, so this is a plain tool; what it does not do is in docs/python.md."""

from __future__ import annotations

from typing import Any

from pydantic_ai import ModelRetry, Tool

from ._adapt import Runner
from ._sandbox import Sandbox

__all__ = ["execute_code_tool"]

_SCHEMA = {
    "type": "object",
    "properties": {"code": {"type": "string"}},
    "required": ["code"],
    "additionalProperties": False,
}


def execute_code_tool(sandbox: Sandbox, *, stateful: bool = False, name: str = "execute_code",
                      max_retries: int | None = None) -> Tool[Any]:
    """A PydanticAI Tool that runs the model's code in ``sandbox``: in a fresh cell each call,
    or with ``stateful=True`` in one session kept for the tool's life (variables and imports
    persist; calls take turns). Its description is the sandbox's (the library's words, saying
    so when state persists). It returns the run's text (output, then the last expression's
    value); a failed run raises ModelRetry with its output and cause. ``max_retries``: the
    tool's retries (default: the agent's)."""
    runner = Runner(sandbox, stateful=stateful)

    async def execute_code(code: str) -> str:
        result = await runner.run_async(code)
        if not result.ok:
            raise ModelRetry(result.model_text)
        return result.model_text

    tool = Tool.from_schema(execute_code, name=name,
                            description=sandbox.describe(stateful=runner.stateful),
                            json_schema=_SCHEMA)
    if max_retries is not None:
        tool.max_retries = max_retries
    return tool
