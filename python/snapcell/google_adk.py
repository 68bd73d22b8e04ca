"""snapcell for Google ADK: a ``BaseCodeExecutor`` that runs an agent's code blocks in a
snapcell.Sandbox, in a fresh cell per block or, when ``stateful``, in a session per ADK
execution id (ADK gives one per conversation), with the call's input files in the cell.

    from google.adk.agents import LlmAgent
    import snapcell
    from snapcell.google_adk import SnapcellCodeExecutor

    agent = LlmAgent(name="analyst", model=model,
                     code_executor=SnapcellCodeExecutor(sandbox=snapcell.Sandbox(timeout=30)))

What this is not: a place that words anything: a block's output is the run's own text
(Result.model_text); the files it left in /output become ADK's output files."""

from __future__ import annotations

import base64
import threading
from typing import Any

from google.adk.code_executors.base_code_executor import BaseCodeExecutor
from google.adk.code_executors.code_execution_utils import (CodeExecutionInput,
                                                             CodeExecutionResult, File)
from pydantic import ConfigDict, Field, PrivateAttr

from ._adapt import Runner, with_prelude
from ._native import SnapcellError
from ._sandbox import Result, Sandbox

__all__ = ["SnapcellCodeExecutor"]


def _content(file: File) -> bytes:
    """A File's bytes: ADK gives bytes, or their base64 text."""
    return file.content if isinstance(file.content, bytes) else base64.b64decode(file.content)


def _copy_code(files: list[File]) -> str:
    """Setup code that copies the run's files (Sandbox.run's files=, at /input) into the cell's
    working directory, by name."""
    return ("import shutil as _s\n"
            f"for _n in {[f.name for f in files]!r}:\n"
            "    _s.copyfile('/input/' + _n, _n)\n"
            "del _s, _n\n")


def _files_code(files: list[File]) -> str:
    """Setup code that writes the input files into the cell's working directory, by name: for a
    session's runs, which take no files of their own, and level rlimits, which has none."""
    pairs = [(f.name, base64.b64encode(_content(f)).decode()) for f in files]
    return ("import base64 as _b\n"
            f"for _n, _d in {pairs!r}:\n"
            "    with open(_n, 'wb') as _f:\n"
            "        _f.write(_b.b64decode(_d))\n"
            "del _b, _n, _d, _f\n")


class SnapcellCodeExecutor(BaseCodeExecutor):
    """Runs the agent's code in ``sandbox``. ``stateful=True`` keeps a session per execution id
    (variables, imports and /tmp persist in a conversation; a block without an id runs in a
    fresh cell); after a block a limit stopped, that id's next block starts a new session.
    Input files are written, by name, into the working directory (/tmp) before the block runs
    (a fresh cell gets them as the run's own files, also read-only at /input; a session's
    block, or one at level rlimits, within its code).
    A block that ends ok gives stdout the run's text (what it printed and the last
    expression's value); one that fails gives stderr what it printed and how it ended (ADK
    shows the model only stderr then, and counts it against ``error_retry_attempts``). Files
    left in /output become output files named by their path there. :meth:`close` ends the
    sessions; the sandbox is the caller's."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    sandbox: Sandbox = Field(exclude=True)
    _runners: dict[str, Runner] = PrivateAttr(default_factory=dict)
    _lock: Any = PrivateAttr(default_factory=threading.Lock)

    def _runner(self, execution_id: str | None) -> Runner:
        if not self.stateful or execution_id is None:
            return Runner(self.sandbox)
        with self._lock:
            runner = self._runners.get(execution_id)
            if runner is None:
                runner = self._runners[execution_id] = Runner(self.sandbox, stateful=True)
            return runner

    def execute_code(self, invocation_context: Any,
                     code_execution_input: CodeExecutionInput) -> CodeExecutionResult:
        code = code_execution_input.code
        files = code_execution_input.input_files
        runner = self._runner(code_execution_input.execution_id)
        if files and not runner.stateful:
            own = [(f.name, _content(f)) for f in files]
            try:
                return _result(runner.run(with_prelude(_copy_code(files), code), files=own))
            except SnapcellError as e:
                if e.name != "SNAPCELL_E_ISOLATION":  # the level has no run files
                    raise
        if files:
            code = with_prelude(_files_code(files), code)
        return _result(runner.run(code))

    def close(self) -> None:
        """Ends the sessions of every execution id."""
        with self._lock:
            runners, self._runners = self._runners, {}
        for runner in runners.values():
            runner.close()


def _result(result: Result) -> CodeExecutionResult:
    files = [File(name=a.path, content=a.data, mime_type=a.media_type) for a in result.artifacts]
    if result.ok:
        return CodeExecutionResult(stdout=result.model_text, stderr="", output_files=files,
                                   exit_code=result.exit_code)
    return CodeExecutionResult(stdout=result.stdout, stderr=result.model_text, output_files=files,
                               exit_code=result.exit_code)
