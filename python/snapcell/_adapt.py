"""What the framework adapters (snapcell.pydantic_ai, snapcell.smolagents, ...) share: a runner
that sends a tool's runs to a fresh cell or to one session. Nothing here decides or words
anything: what the model is told is the Result's own (Result.model_text)."""

from __future__ import annotations

import ast
import asyncio
import threading
from collections.abc import Callable, Sequence
from typing import Any

from ._native import SnapcellError
from ._sandbox import Result, Sandbox, Session


class Runner:
    """Where one tool's runs go: a fresh cell each (stateless) or one session (stateful), whose
    runs take turns. ``tools`` go to that run only. A session whose process a run ended (a
    limit, a kill) refuses further runs: the next run then goes to a new session, which starts
    with ``prelude()`` (the adapter's own setup code, run in order) and without the old one's
    variables, so code that relies on them fails as it would in a fresh interpreter."""

    def __init__(self, sandbox: Sandbox, *, stateful: bool = False,
                 prelude: Callable[[], Sequence[str]] | None = None) -> None:
        if not isinstance(sandbox, Sandbox):
            raise TypeError(f"sandbox must be a snapcell.Sandbox, not {type(sandbox).__name__}")
        self.sandbox = sandbox
        self.stateful = bool(stateful)
        self._prelude = prelude or (lambda: ())
        self._session: Session | None = None
        self._used = False  # the session has had a run (so a refusal means it ended)
        self._lock = threading.Lock()  # sync runs of the session take turns
        self._alock: asyncio.Lock | None = None

    @staticmethod
    def _done(result: Result) -> Result:
        if result.status == "paused":
            raise RuntimeError(
                f"a run paused at a call of {result.pending.name!r}, which needs approval: "
                "framework adapters do not resume paused runs; give them a Sandbox without "
                "approval_required (the run waits until its approval_timeout)")
        return result

    @staticmethod
    def _check(result: Result) -> None:
        if not result.ok:
            raise RuntimeError(f"the adapter's setup of a new session failed: {result.model_text}")

    def _new(self) -> Session:
        self._used = False
        self._session = self.sandbox.session()
        return self._session

    def _drop(self) -> None:
        if self._session is not None:
            self._session.close()
        self._session = None

    def setup(self, code: str, *, tools: Any = None) -> None:
        """Runs the adapter's setup code in the current session, if it has one (a new session
        runs prelude() instead)."""
        if self._session is not None:
            self._check(self.run(code, tools=tools))

    async def setup_async(self, code: str, *, tools: Any = None) -> None:
        if self._session is not None:
            self._check(await self.run_async(code, tools=tools))

    def run(self, code: str, *, tools: Any = None, files: Any = None) -> Result:
        """``files`` as for Sandbox.run: a session refuses them (ValueError)."""
        if not self.stateful:
            return self._done(self.sandbox.run(code, tools=tools, files=files))
        with self._lock:
            for retry in (False, True):
                fresh = self._session is None
                session = self._session or self._new()
                try:
                    if fresh:
                        for setup in self._prelude():
                            self._check(session.run(setup, tools=tools))
                    result = session.run(code, tools=tools, files=files)
                except SnapcellError:
                    if retry or fresh or not self._used:
                        raise
                    self._drop()
                    continue
                self._used = True
                return self._done(result)
        raise AssertionError("unreachable")

    async def run_async(self, code: str, *, tools: Any = None) -> Result:
        if not self.stateful:
            return self._done(await self.sandbox.run_async(code, tools=tools))
        if self._alock is None:
            self._alock = asyncio.Lock()
        async with self._alock:
            for retry in (False, True):
                fresh = self._session is None
                session = self._session or self._new()
                try:
                    if fresh:
                        for setup in self._prelude():
                            self._check(await session.run_async(setup, tools=tools))
                    result = await session.run_async(code, tools=tools)
                except SnapcellError:
                    if retry or fresh or not self._used:
                        raise
                    self._drop()
                    continue
                self._used = True
                return self._done(result)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Ends the session (the sandbox is the caller's)."""
        with self._lock:
            self._drop()


def shape(code: str) -> str:
    """"plain" (valid Python as it is), "function" (await or return at its top level, valid only
    in a function) or "broken" (a syntax error the cell will report)."""
    try:
        compile(code, "<cell>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        msg = exc.msg or ""
        return "function" if "outside" in msg and "function" in msg else "broken"
    return "plain"


_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.AsyncFor,
             ast.While, ast.If, ast.With, ast.AsyncWith, ast.Try, ast.Match,
             *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


def with_prelude(prelude: str, code: str) -> str:
    """The code of one run: the adapter's setup code (the prelude), then the model's code. The
    prelude shares the code's first line when that line is a simple statement, so the model's
    line numbers stay its own (else they are one more); code that does not compile runs alone,
    failing before anything runs at its own line numbers."""
    if shape(code) != "plain":
        return code
    first = ast.parse(code).body[:1]
    setup = f"exec({prelude!r})"
    if not first:
        return setup
    return setup + ("\n" if isinstance(first[0], _COMPOUND) else "; ") + code
