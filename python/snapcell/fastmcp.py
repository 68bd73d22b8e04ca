"""snapcell for FastMCP's code mode: a ``SandboxProvider`` for
``fastmcp.experimental.transforms.code_mode.CodeMode`` whose runs go to one warm snapcell.Sandbox
(no template starts per call), with ``call_tool`` and any other external function kept on the
host as tools of that run.

    from fastmcp import FastMCP
    from fastmcp.experimental.transforms.code_mode import CodeMode
    import snapcell
    from snapcell.fastmcp import SnapcellSandboxProvider

    mcp = FastMCP("demo")
    mcp.add_transform(CodeMode(sandbox_provider=SnapcellSandboxProvider(snapcell.Sandbox())))

What this is not: Monty. The code is CPython's: code mode's ``await call_tool(...)`` and a
top-level ``return`` work (such code runs as the body of an async function); a failed run
raises FastMCP's ToolError with the run's own text (Result.model_text)."""

from __future__ import annotations

import ast
import json
from collections.abc import Callable
from typing import Any

from fastmcp.exceptions import ToolError

from ._adapt import Runner, shape, with_prelude
from ._sandbox import Sandbox
from ._tools import Tool

__all__ = ["SnapcellSandboxProvider"]

# Binds each external function as an async function of the code (positional arguments by the
# host function's parameter names); a call returns the tool's value whether the cell's call_tool
# returns it or an awaitable of it.
_BIND = '''
def _snapcell_bind(name, params):
    import builtins, inspect
    async def fn(*args, **kwargs):
        kwargs.update(zip(params, args))
        value = builtins.call_tool(name, **kwargs)
        return await value if inspect.isawaitable(value) else value
    fn.__name__ = fn.__qualname__ = name
    return fn
'''

_MAIN = "_snapcell_main"


def _params(func: Callable[..., Any]) -> list[str]:
    import inspect

    try:
        return [p.name for p in inspect.signature(func).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _as_function(code: str) -> str:
    """The code as the body of an async function run by asyncio.run, whose value is the run's
    last expression: the code's return value, or its last expression's."""
    body = ast.parse(code).body or [ast.Pass()]
    if isinstance(body[-1], ast.Expr):
        body[-1] = ast.Return(value=body[-1].value)
    module = ast.parse(f"async def {_MAIN}():\n    pass\n__import__('asyncio').run({_MAIN}())")
    module.body[0].body = body
    return ast.unparse(ast.fix_missing_locations(module))


class SnapcellSandboxProvider:
    """Runs code mode's ``execute`` in ``sandbox``, a fresh cell per call from its warm template.
    ``external_functions`` (code mode's ``call_tool(tool_name, params)``) are tools of that run
    only, run on the host and awaited from the code; ``inputs`` become the code's variables
    (JSON-copied). The value returned is the code's return value or its last expression's
    (Result.value, JSON); otherwise the run's text (what it printed, or why its value cannot be
    returned), or None when there is nothing. A failed run raises ToolError with what it
    printed and how it ended."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._runner = Runner(sandbox)

    @property
    def sandbox(self) -> Sandbox:
        return self._runner.sandbox

    async def run(self, code: str, *, inputs: dict[str, Any] | None = None,
                  external_functions: dict[str, Callable[..., Any]] | None = None) -> Any:
        functions = dict(external_functions or {})
        tools = [Tool(f, name=n) for n, f in functions.items()]
        prelude = [_BIND] + [f"{n} = _snapcell_bind({n!r}, {_params(f)!r})" for n, f in functions.items()]
        prelude.append("del _snapcell_bind")
        if inputs:
            prelude.append(f"globals().update(__import__('json').loads({json.dumps(inputs)!r}))")
        prelude_text = "\n".join(prelude)
        if shape(code) == "function":  # await or return at its top level
            source = prelude_text + "\n" + _as_function(code)
        else:
            source = with_prelude(prelude_text, code)
        result = await self._runner.run_async(source, tools=tools or None)
        if not result.ok:
            raise ToolError(result.model_text)
        if result.value_absent is None:
            return result.value
        if result.value_absent in ("no_expression", "none") and not (result.stdout or result.stderr):
            return None
        return result.model_text  # what it printed, or why its value cannot be returned
