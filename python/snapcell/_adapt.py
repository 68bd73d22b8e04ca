"""What the framework adapters (snapcell.pydantic_ai, snapcell.langgraph, ...) share: a runner
that sends a tool's runs to a fresh cell or to one session. Nothing here decides or words
anything: what the model is told is the Result's own (Result.model_text)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from ._sandbox import Sandbox, Session


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
