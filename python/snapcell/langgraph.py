"""snapcell for LangGraph CodeAct (langgraph-codeact): the ``eval_fn`` that runs the model's code
in a snapcell session per conversation, with the agent's tools kept on the host.

    from langgraph_codeact import create_codeact
    import snapcell
    from snapcell.langgraph import CodeActSandbox

    runner = CodeActSandbox(snapcell.Sandbox(timeout=30))
    graph = create_codeact(model, [add, lookup], runner.eval).compile(checkpointer=saver)

What this is not: a copy of variables through the graph's state. The variables live in the
session; the state's context carries only the session's key."""

from __future__ import annotations

import inspect
import secrets
import threading
from typing import Any

from ._adapt import Runner
from ._sandbox import Result, Sandbox
from ._tools import Tool

__all__ = ["CodeActSandbox", "SESSION_KEY"]

# The context entry naming a conversation's session.
SESSION_KEY = "snapcell_session"

# Defines, in the session, a function per tool that takes positional arguments as CodeAct's
# prompt shows the tools (def name(a: int, b: int)).
_BIND = '''
def _snapcell_bind(name, params):
    def tool(*args, **kwargs):
        kwargs.update(zip(params, args))
        return call_tool(name, **kwargs)
    tool.__name__ = tool.__qualname__ = name
    return tool
'''


def _params(func: Any) -> list[str]:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return []
    return [p.name for p in sig.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


class _Conversation:
    """One conversation's session and the tools bound in it."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.bind = ""
        self.runner = Runner(sandbox, stateful=True, prelude=lambda: [self.bind] if self.bind else [])


class CodeActSandbox:
    """Runs CodeAct's code in ``sandbox``: ``eval`` (sync) or ``aeval`` (async) is the
    ``eval_fn`` of ``create_codeact``. Each conversation (a graph thread) gets its own session,
    named in its context by ``SESSION_KEY``, so its variables and imports persist between
    turns; the callables CodeAct passes in the context (its tools) run on the host, called from
    the code by name, positionally or by keyword, as CodeAct's prompt shows them. The output
    is the run's text (Result.model_text: what it printed and the last expression's value, or
    how it failed). A context whose key this object does not know (a new thread, a restarted
    process) gets a new session. :meth:`close` ends the sessions; the sandbox is the caller's."""

    def __init__(self, sandbox: Sandbox) -> None:
        if not isinstance(sandbox, Sandbox):
            raise TypeError(f"sandbox must be a snapcell.Sandbox, not {type(sandbox).__name__}")
        self.sandbox = sandbox
        self._lock = threading.Lock()
        self._conversations: dict[str, _Conversation] = {}

    def _prepare(self, context: dict[str, Any]) -> tuple[str, _Conversation, list[Tool], str]:
        """The conversation's key and record, the run's tools and the binding code for them."""
        key = context.get(SESSION_KEY)
        with self._lock:
            conv = self._conversations.get(key) if isinstance(key, str) else None
            if conv is None:
                key = secrets.token_hex(16)
                conv = self._conversations[key] = _Conversation(self.sandbox)
        funcs = {n: f for n, f in context.items() if callable(f) and not isinstance(f, type)}
        tools = [Tool(f, name=n) for n, f in funcs.items()]
        lines = [f"{n} = _snapcell_bind({n!r}, {_params(f)!r})" for n, f in funcs.items()]
        bind = _BIND + "\n".join(lines) + "\ndel _snapcell_bind\n" if lines else ""
        return key, conv, tools, bind

    @staticmethod
    def _answer(key: str, result: Result) -> tuple[str, dict[str, Any]]:
        return result.model_text, {SESSION_KEY: key}

    def eval(self, code: str, context: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        key, conv, tools, bind = self._prepare(context)
        if bind != conv.bind:
            conv.bind = bind
            conv.runner.setup(bind, tools=tools or None)
        return self._answer(key, conv.runner.run(code, tools=tools or None))

    async def aeval(self, code: str, context: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        key, conv, tools, bind = self._prepare(context)
        if bind != conv.bind:
            conv.bind = bind
            await conv.runner.setup_async(bind, tools=tools or None)
        return self._answer(key, await conv.runner.run_async(code, tools=tools or None))

    def close(self) -> None:
        """Ends every conversation's session."""
        with self._lock:
            conversations, self._conversations = self._conversations, {}
        for conv in conversations.values():
            conv.runner.close()
