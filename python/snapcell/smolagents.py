"""snapcell for smolagents: a ``PythonExecutor`` whose code runs in one snapcell session (the
agent's variables and imports persist between steps), with the agent's tools kept on the host.

    from smolagents import CodeAgent
    import snapcell
    from snapcell.smolagents import SnapcellExecutor

    sandbox = snapcell.Sandbox(timeout=30)
    agent = CodeAgent(tools=[...], model=model, executor=SnapcellExecutor(sandbox))

What this is not: a place that words anything. A failed step raises with the run's own text
(Result.model_text); the agent's prompt is smolagents' own."""

from __future__ import annotations

import json
from typing import Any

from smolagents.local_python_executor import CodeOutput, InterpreterError, PythonExecutor

from ._adapt import Runner
from ._sandbox import Sandbox
from ._tools import Tool

__all__ = ["SnapcellExecutor"]

# smolagents' input types as JSON Schema ("any", "image", "audio": any value JSON can carry).
_TYPES = {"string": "string", "boolean": "boolean", "integer": "integer", "number": "number",
          "array": "array", "object": "object", "null": "null"}

# Defines, in the session, a function per tool that takes positional arguments as smolagents'
# prompt shows them, and final_answer, which ends the step once the host has its answer.
_BIND = '''
def _snapcell_bind(name, params, final=False):
    class FinalAnswerException(BaseException):
        pass
    def tool(*args, **kwargs):
        kwargs.update(zip(params, args))
        value = call_tool(name, **kwargs)
        if final:
            raise FinalAnswerException()
        return value
    tool.__name__ = tool.__qualname__ = name
    return tool
'''


def _schema(inputs: dict[str, Any]) -> dict[str, Any]:
    props, required = {}, []
    for name, spec in inputs.items():
        kind = _TYPES.get(spec.get("type"))
        prop: dict[str, Any] = {"type": [kind, "null"] if spec.get("nullable") else kind} if kind else {}
        if spec.get("description"):
            prop["description"] = spec["description"]
        props[name] = prop
        if not spec.get("nullable"):
            required.append(name)
    return {"type": "object", "properties": props, "required": required}


class SnapcellExecutor(PythonExecutor):
    """Runs a smolagents agent's code in one session of ``sandbox`` (made on first use, ended
    by :meth:`cleanup`). The agent's tools run on the host, called from the code as smolagents'
    prompt shows them (positional or keyword arguments); ``final_answer(x)`` ends the step with
    x as the answer. A step's output is the value of its last expression (Result.value, so
    JSON-representable); its logs are what it printed. A failed step raises InterpreterError
    with how it ended (Result.summary); what it printed is in ``state["_print_outputs"]``, where
    the agent looks for a failed step's logs. After a step a limit stopped, the next step runs
    in a new session (the tools and the last variables sent are set up again; the step's own
    variables are gone, and code using them meets a NameError). Variables the agent sends must be
    JSON-representable (TypeError otherwise)."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.state: dict[str, Any] = {}
        self._tools: list[Tool] = []
        self._answers: list[Any] = []
        self._setups = {"tools": "", "variables": ""}
        self._runner = Runner(sandbox, stateful=True,
                              prelude=lambda: [c for c in self._setups.values() if c])

    @property
    def sandbox(self) -> Sandbox:
        return self._runner.sandbox

    def _setup(self, kind: str, code: str) -> None:
        self._setups[kind] = code
        try:
            self._runner.setup(code, tools=self._tools or None)
        except RuntimeError as exc:
            raise InterpreterError(str(exc)) from None

    def send_tools(self, tools: dict[str, Any]) -> None:
        """Makes the agent's tools callable from the code (they run on the host)."""
        made, lines = [], [_BIND]
        for name, tool in tools.items():
            params = list(getattr(tool, "inputs", {}) or {})
            final = name == "final_answer"
            func = self._answer(tool) if final else self._caller(tool)
            made.append(Tool(func, name=name, description=getattr(tool, "description", "") or "",
                             schema=_schema(getattr(tool, "inputs", {}) or {})))
            lines.append(f"{name} = _snapcell_bind({name!r}, {params!r}, {final!r})")
        self._tools = made
        self._setup("tools", "\n".join(lines) + "\ndel _snapcell_bind\n")

    @staticmethod
    def _caller(tool: Any):
        def call(**kwargs: Any) -> Any:
            return tool(**kwargs)
        return call

    def _answer(self, tool: Any):
        def call(**kwargs: Any) -> Any:
            self._answers.append(tool(**kwargs))
            return None
        return call

    def send_variables(self, variables: dict[str, Any]) -> None:
        """Sets the variables in the session, copied as JSON."""
        if not variables:
            return
        bad = []
        for name, value in variables.items():
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                bad.append(name)
        if bad:
            raise TypeError(f"variables must be JSON-representable to reach the sandbox: {', '.join(bad)}")
        text = json.dumps(variables)
        self._setup("variables", f"import json as _j\nglobals().update(_j.loads({text!r}))\ndel _j\n")

    def __call__(self, code_action: str) -> CodeOutput:
        self._answers.clear()
        result = self._runner.run(code_action, tools=self._tools or None)
        self.state["_print_outputs"] = result.stdout
        if self._answers:
            return CodeOutput(output=self._answers[-1], logs=result.stdout, is_final_answer=True)
        if not result.ok:  # what it printed is in the logs the agent shows beside this
            raise InterpreterError(result.summary)
        return CodeOutput(output=result.value, logs=result.stdout, is_final_answer=False)

    def cleanup(self) -> None:
        """Ends the session (the sandbox is the caller's)."""
        self._runner.close()
