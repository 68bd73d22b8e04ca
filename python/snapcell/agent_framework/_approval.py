"""Approval of each call for the Agent Framework surface (approval="per_call"): a run paused at
a call becomes Agent Framework's own function-approval request naming that tool and its
arguments, and the next agent run's answer resumes the same run. Not a policy: which calls wait,
for how long, and what resuming does are the C library's (docs/approval.md).

Agent Framework answers an approved request by invoking the tool the request names, from the
run's tool list; it never hands the answer back to the tool that raised the request. So the run
that carries the answer gets a stand-in of that name (``respond``), whose only job is to resume
the paused run: the real tool runs inside it, once, and never as an agent-level call. A rejection
is answered by Agent Framework itself (the model reads "rejected by user" as execute_code's
result); ``reject`` gives it to the paused code as ToolError."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agent_framework import Content, ContextProvider, FunctionTool, UserInputRequiredException

from .._sandbox import Result, _run_async

# Approval request ids of ours start with this, so a later run recognises the answers to them
# even when this process no longer holds the run (it restarted, or the run expired).
REQUEST_PREFIX = "snapcell-approval-"
DECIDED_BY = "Agent Framework"
REJECTED = "rejected in Agent Framework"
ANSWERED = ("Agent Framework has already answered this execute_code call (an earlier call of the "
            "program was rejected), so no one can be asked")


def gone_text(name: str) -> str:
    return (f"The paused execute_code run that waited for approval of {name} is gone: it expired "
            f"(approval_timeout), its sandbox was closed, or the process restarted. {name} was not run.")


class Hold:
    """A paused run's sandbox: resuming goes through it, and it is given back (released to the
    registry, which may then close it) once, when the run ends. ``finish`` is execute_code's
    answer for the run's next Result."""

    def __init__(self, native: Any, release: Callable[[], None],
                 finish: Callable[[Result, Hold, str | None, Any], Awaitable[list[Content]]]) -> None:
        self._native = native
        self._release = release
        self._released = False
        self.finish = finish

    async def resume(self, result: Result, verdict: str, reason: str | None) -> Result:
        try:
            nxt = await _run_async(self._native.resume, result.pending.id, verdict, reason, DECIDED_BY)
        except BaseException:  # cancelled (the cell is killed), or the sandbox was closed
            self.release()
            raise
        if nxt.status != "paused":
            self.release()
        return nxt

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._release()


@dataclass
class _Paused:
    result: Result
    hold: Hold
    call_id: str
    since: float


class Approvals:
    """The paused runs of one execute_code surface (a tool and the run tools made from it),
    by approval request id. Taking one is atomic, so one answer resumes a run at most once."""

    def __init__(self, timeout: Callable[[], float]) -> None:
        self._lock = threading.Lock()
        self._paused: dict[str, _Paused] = {}
        self._timeout = timeout  # seconds a run may wait (approval_timeout), for pruning

    def pause(self, result: Result, hold: Hold, call_id: str | None) -> UserInputRequiredException:
        """Records a paused run; returns the exception that ends the agent run with Agent
        Framework's approval request for the pending call."""
        rid = REQUEST_PREFIX + uuid.uuid4().hex
        call_id = call_id or rid  # invoked outside an agent run: no call id of the model's
        now = time.monotonic()
        with self._lock:
            stale = [k for k, p in self._paused.items() if now - p.since > 2 * self._timeout() + 60]
            dropped = [self._paused.pop(k) for k in stale]
            self._paused[rid] = _Paused(result, hold, call_id, now)
        for p in dropped:  # long expired in the library; only what they held is left
            p.hold.release()
        pending = result.pending
        call = Content.from_function_call(call_id=call_id, name=pending.name, arguments=pending.arguments, id=rid)
        request = Content.from_function_approval_request(id=rid, function_call=call)
        return UserInputRequiredException(
            contents=[request], message=f"execute_code waits for approval of a call to {pending.name}"
        )

    def take(self, rid: str) -> _Paused | None:
        with self._lock:
            return self._paused.pop(rid, None)

    def arguments(self, rid: str) -> dict[str, Any] | None:
        with self._lock:
            p = self._paused.get(rid)
        return None if p is None else p.result.pending.arguments

    async def approve(self, rid: str, name: str, arguments: Any, tools: Any) -> list[Content]:
        """The stand-in's work: resume the run with approval and go on as execute_code does
        (it may pause again, raising the next request)."""
        p = self.take(rid)
        if p is None:
            return [Content.from_text(gone_text(name))]
        same = p.result.pending.name == name and (arguments is None or dict(arguments) == p.result.pending.arguments)
        try:
            # Agent Framework binds an answer to the request it recorded, so another call is
            # not expected; never run a call other than the one asked about.
            result = await p.hold.resume(p.result, *(("approved", None) if same else
                                                    ("rejected", "the approval named another call")))
        except (ValueError, RuntimeError):
            # The sandbox was closed (the tool or provider), which ended the run.
            p.hold.release()
            return [Content.from_text(gone_text(name))]
        return await p.hold.finish(result, p.hold, p.call_id, tools)

    async def reject(self, rid: str) -> None:
        """The code gets ToolError and runs on; Agent Framework has answered execute_code's call
        itself, so every later call that needs a decision is rejected too, and the output is
        not shown to the model."""
        p = self.take(rid)
        if p is None:
            return
        try:
            result = await p.hold.resume(p.result, "rejected", REJECTED)
            while result.status == "paused":
                result = await p.hold.resume(result, "rejected", ANSWERED)
        finally:
            p.hold.release()


class _StandIn(FunctionTool):
    """Named after a tool the code called, present only in an agent run that carries approvals
    of such calls: Agent Framework invokes it for each approved one, and it resumes the paused
    run instead of running anything itself. Called any other way (by the model), it refuses."""

    def __init__(self, name: str, schema: dict[str, Any], approvals: Approvals, answers: dict[str, str]) -> None:
        super().__init__(
            name=name,
            description=f"Resumes code run by execute_code that waits for approval of {name}; "
            "never call it directly.",
            approval_mode="never_require",
            func=lambda ctx: None,
            input_model=schema,
        )
        self._approvals = approvals
        self._answers = answers  # execute_code call id -> approval request id

    async def invoke(self, *, arguments: Any = None, context: Any = None, tool_call_id: str | None = None,
                     skip_parsing: bool = False, **kwargs: Any) -> Any:
        tools = getattr(context, "tools", None)
        rid = self._answers.pop(tool_call_id, None) if tool_call_id is not None else None
        if not self._answers and tools is not None and self in tools:
            tools.remove(self)  # the model never sees it after it served
        if rid is None:
            return [Content.from_text(f"Error: {self.name} is reached only from code run by execute_code.")]
        if hasattr(arguments, "model_dump"):
            arguments = arguments.model_dump()
        return await self._approvals.approve(rid, self.name, arguments, tools)


def answers(messages: Iterable[Any]) -> tuple[dict[str, dict[str, str]], list[str]]:
    """The answers to our approval requests in an agent run's input: the approved ones by tool
    name (execute_code call id -> request id), and the rejected request ids."""
    approved: dict[str, dict[str, str]] = {}
    rejected: list[str] = []
    for message in messages:
        for c in getattr(message, "contents", ()):
            call = getattr(c, "function_call", None)
            if c.type != "function_approval_response" or call is None or not str(c.id).startswith(REQUEST_PREFIX):
                continue
            if c.approved is True:
                approved.setdefault(call.name, {})[call.call_id] = c.id
            else:
                rejected.append(c.id)
    return approved, rejected


async def respond(approvals: Approvals, messages: Iterable[Any], taken: set[str]) -> list[FunctionTool]:
    """Gives rejections to their paused runs and returns the stand-ins for the approved calls
    (none for a name in ``taken``: a tool of the agent's own would clash with it)."""
    approved, rejected = answers(messages)
    for rid in rejected:
        await approvals.reject(rid)
    tools: list[FunctionTool] = []
    for name, calls in approved.items():
        if name in taken:
            continue
        known = next((a for a in map(approvals.arguments, calls.values()) if a is not None), None)
        tools.append(_StandIn(name, _permissive(known), approvals, dict(calls)))
    return tools


def _permissive(arguments: dict[str, Any] | None) -> dict[str, Any]:
    """A schema that admits the pending call's arguments as they are (the library checked them
    already; the stand-in compares them with the pending call)."""
    props = {k: {} for k in (arguments or {})}
    return {"type": "object", "properties": props, "additionalProperties": True}


def is_stand_in(tool: Any) -> bool:
    return isinstance(tool, _StandIn)


def agent_tool_names(agent: Any, context: Any) -> set[str]:
    """Names of the tools an agent run has besides the providers' (its own and the run's)."""
    names: set[str] = set()
    for options in (getattr(agent, "default_options", None), getattr(context, "options", None)):
        tools = options.get("tools") if isinstance(options, dict) else None
        for t in tools or ():
            if getattr(t, "name", None):
                names.add(t.name)
    return names


class ApprovalProvider(ContextProvider):
    """For an agent that has an ExecuteCodeTool with approval="per_call" directly among its
    tools: hands each agent run what resumes that tool's paused runs (ExecuteCodeTool
    .approval_provider())."""

    DEFAULT_SOURCE_ID = "snapcell_approvals"

    def __init__(self, approvals: Approvals, source_id: str = DEFAULT_SOURCE_ID) -> None:
        super().__init__(source_id)
        self._approvals = approvals

    async def before_run(self, *, agent: Any, session: Any, context: Any, state: dict[str, Any]) -> None:
        tools = await respond(self._approvals, context.input_messages, agent_tool_names(agent, context))
        if tools:
            context.extend_tools(self.source_id, tools)
