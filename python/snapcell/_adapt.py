"""What the framework adapters (snapcell.pydantic_ai, snapcell.langgraph, ...) share: one text of
a run in the library's words, and a runner that sends a tool's runs to a fresh cell or to one
session. Nothing here decides or words anything: the texts are the Result's own."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from ._sandbox import Result, Sandbox, Session


def model_text(result: Result) -> str:
    """A run as one text for the model: what it printed (stdout, then stderr) and the value of
    its last expression when it ended ok, else what it printed and how it ended (the exception
    with the end of its traceback, the limit that stopped it); a run ok with nothing to show
    is the library's summary of it."""
    parts = [result.stdout]
    if result.ok:
        parts += [result.stderr, result.value_text or ""]
    else:
        parts.append(result.summary)
    text = "".join(p if p.endswith("\n") else p + "\n" for p in parts if p)
    return text or result.summary


class Runner:
    """Where one tool's runs go: a fresh cell each (stateless) or one session kept for the
    runner's life (stateful), whose runs take turns. ``tools`` go to that run only."""

    def __init__(self, sandbox: Sandbox, *, stateful: bool = False) -> None:
        if not isinstance(sandbox, Sandbox):
            raise TypeError(f"sandbox must be a snapcell.Sandbox, not {type(sandbox).__name__}")
        self.sandbox = sandbox
        self.stateful = bool(stateful)
        self._session: Session | None = None
        self._lock = threading.Lock()  # sync runs of the session, and making it
        self._alock: asyncio.Lock | None = None

    def session(self) -> Session:
        with self._lock:
            if self._session is None:
                self._session = self.sandbox.session()
            return self._session

    def run(self, code: str, *, tools: Any = None) -> Result:
        if not self.stateful:
            return self.sandbox.run(code, tools=tools)
        session = self.session()
        with self._lock:
            return session.run(code, tools=tools)

    async def run_async(self, code: str, *, tools: Any = None) -> Result:
        if not self.stateful:
            return await self.sandbox.run_async(code, tools=tools)
        if self._alock is None:
            self._alock = asyncio.Lock()
        session = self.session()
        async with self._alock:
            return await session.run_async(code, tools=tools)

    def close(self) -> None:
        """Ends the session (the sandbox is the caller's)."""
        with self._lock:
            if self._session is not None:
                self._session.close()
                self._session = None
