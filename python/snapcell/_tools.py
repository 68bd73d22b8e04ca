"""Host tools for a sandbox: plain Python callables (sync or async) with a JSON Schema derived
from their annotations, and the trampoline the C library calls with the arguments' JSON.

What this is not: a validator. The C library checks every call against the schema before the
trampoline runs; pydantic only converts values into the annotated types when a parameter needs
more than JSON's own (a model, a datetime, ...)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import functools
import inspect
import json
import math
import select
import threading
import time
import typing
from collections.abc import Callable, Mapping
from typing import Any

from . import _native

_JSON_SCALARS = (int, float, str, bool, type(None))

# What the code's ToolError says when a tool fails and detailed errors are off (the reference's
# wording): its exception's text may hold what the model should not see.
HOST_TOOL_FAILED = "Host tool execution failed."

# The event loop of the run_async that owns the current thread's run, if any: async tools are
# awaited there so they share the caller's loop, clients and context variables. `calls` is the
# run's RunCalls while a run (or resume) is in progress on this thread.
_run_state = threading.local()

# Threads per run for synchronous tools that the code awaits (Sandbox(tool_threads=...)).
DEFAULT_TOOL_THREADS = 4


def _is_json_native(annotation: Any) -> bool:
    """Whether a JSON value already is the annotated type (no conversion needed)."""
    if annotation is Any or annotation is inspect.Parameter.empty or annotation in _JSON_SCALARS:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _is_json_native(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return all(isinstance(a, _JSON_SCALARS) for a in typing.get_args(annotation))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return all(_is_json_native(a) for a in typing.get_args(annotation))
    if origin in (list, dict) or annotation in (list, dict):
        args = typing.get_args(annotation)
        if origin is dict and args and args[0] is not str:
            return False
        return all(_is_json_native(a) for a in args[-1:])
    return False


def _encode_default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"a {type(value).__name__} is not JSON-serialisable")


def encode_result(value: Any) -> str:
    """The JSON text the cell receives for a tool's return value."""
    try:
        return json.dumps(value, default=_encode_default, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the tool returned a value the sandbox cannot receive: {exc}") from None


class ToolCancellation:
    """Whether the run that made the current tool call was cancelled, so the call's answer is
    no longer wanted: ``snapcell.tool_cancellation()`` gives it to a tool while it runs.

    ``is_set()`` polls it, ``wait(timeout=None)`` blocks until it is set (True) or the timeout
    passed (False), like ``threading.Event``; ``fileno()`` is a descriptor that becomes
    readable when it is set, for ``select``/``selectors``/``loop.add_reader`` beside the
    tool's own (poll it only: never read or close it), or -1 when there is none. Once the
    tool returned it keeps the state it had then. A plain call (from synchronous code) is
    backed by the C library's ``snapcell_tool_cancel_fd()``: set when the run's token fires
    (``run_async``'s task was cancelled). An awaited call is set when its run ends with the
    call in flight (cancelled, timed out, killed, or done without awaiting it)."""

    __slots__ = ("_fd", "_event", "_final")

    def __init__(self, fd: int = -1, event: threading.Event | None = None) -> None:
        self._fd, self._event, self._final = fd, event, None

    def is_set(self) -> bool:
        if self._final is not None:
            return self._final
        if self._event is not None:
            return self._event.is_set()
        return self._fd >= 0 and _readable(self._fd, 0)

    def wait(self, timeout: float | None = None) -> bool:
        if self._final is None and self._event is not None:
            return self._event.wait(timeout)
        if self._final is None and self._fd >= 0:
            ms = None if timeout is None else max(0, math.ceil(timeout * 1000))
            return _readable(self._fd, ms)
        # Nothing can set it any more: the call returned, or its run has no token.
        if self.is_set():
            return True
        if timeout is None:
            raise RuntimeError(
                "nothing can cancel this tool call (no call in progress, or its run has no "
                "cancellation token): wait() without a timeout would never return"
            )
        time.sleep(max(0.0, timeout))
        return False

    def fileno(self) -> int:
        return -1 if self._final is not None else self._fd

    def __bool__(self) -> bool:
        return self.is_set()

    def __repr__(self) -> str:
        return f"<ToolCancellation {'set' if self.is_set() else 'not set'}>"

    def _close(self) -> None:
        """The call returned: the descriptor may close, so the state is kept instead."""
        self._final = self.is_set()


def _readable(fd: int, timeout_ms: int | None) -> bool:
    """poll(2), not select: the descriptor may be past FD_SETSIZE in a busy process."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout_ms))


_NOT_IN_A_CALL = ToolCancellation()
_NOT_IN_A_CALL._final = False
_cancellation: contextvars.ContextVar[ToolCancellation] = contextvars.ContextVar(
    "snapcell_tool_cancellation", default=_NOT_IN_A_CALL
)


def tool_cancellation() -> ToolCancellation:
    """Inside a tool call: whether the run that made it was cancelled (ToolCancellation).
    Outside one (a tool called directly, say in a unit test): one that is never set."""
    return _cancellation.get()


def await_in_owner_loop(awaitable: Any) -> Any:
    """Waits for an async tool's result from the run's thread. When the run is cancelled
    meanwhile (the C library's cancel descriptor for this call), the tool's task is cancelled
    there and then; the call returns once the task has ended."""
    loop = getattr(_run_state, "loop", None)
    cancellation = _cancellation.get()
    fd = cancellation.fileno()

    async def wrapper() -> Any:
        _cancellation.set(cancellation)
        if fd < 0:
            return await awaitable
        here, task = asyncio.get_running_loop(), asyncio.current_task()

        def fired() -> None:
            here.remove_reader(fd)  # the descriptor stays readable: cancel once
            task.cancel()

        here.add_reader(fd, fired)
        try:
            return await awaitable
        finally:
            here.remove_reader(fd)

    if loop is not None:
        future = asyncio.run_coroutine_threadsafe(wrapper(), loop)
        _run_state.pending = future
        try:
            return future.result()
        finally:
            _run_state.pending = None
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wrapper())
    # A synchronous run() called from inside a running loop blocks that loop: await the tool
    # on a loop of its own in another thread instead of deadlocking.
    box: list[Any] = []

    def in_thread() -> None:
        try:
            box.append((True, asyncio.run(wrapper())))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box.append((False, exc))

    t = threading.Thread(target=in_thread, name="snapcell-async-tool")
    t.start()
    t.join()
    ok, value = box[0]
    if not ok:
        raise value
    return value


def run_on_thread_loop(coroutine: Any) -> Any:
    """Runs a coroutine to its end on an event loop private to the calling thread (made once
    per thread and kept, so a tool call does not pay for a new loop)."""
    loop = getattr(_run_state, "private_loop", None)
    if loop is None or loop.is_closed():
        loop = _run_state.private_loop = asyncio.new_event_loop()
    return loop.run_until_complete(coroutine)


class ArgumentError(Exception):
    """The tool's arguments did not validate (raised by a wrapper that checks them itself, as
    the Agent Framework adapter's does): its message reaches the code even when detailed
    errors are off."""


class Tool:
    """A host function that sandboxed code calls as ``call_tool(name, **kwargs)``.

    ``schema`` is the JSON Schema of the keyword arguments; when omitted it is derived from the
    function's annotations (pydantic), so ``Optional``, ``Literal``, ``list[...]`` and pydantic
    models work. A function whose parameters cannot be described is a TypeError here, before
    anything runs."""

    __slots__ = ("name", "description", "schema", "requires_approval", "func", "is_async", "_model")

    def __init__(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        schema: Mapping[str, Any] | None = None,
        requires_approval: bool = False,
    ) -> None:
        if not callable(func):
            raise TypeError(f"a tool must be callable, not {type(func).__name__}")
        self.func = func
        self.name = name or getattr(func, "__name__", None)
        if not isinstance(self.name, str) or not self.name:
            raise TypeError("the tool has no name: pass name=...")
        self.description = description if description is not None else inspect.getdoc(func) or ""
        self.requires_approval = bool(requires_approval)
        # Awaited calls of an async tool run on the caller's event loop; of others, on the
        # run's pool of threads. A callable that returns awaitables without being a coroutine
        # function says so with a true __snapcell_async__.
        self.is_async = bool(
            inspect.iscoroutinefunction(func)
            or inspect.iscoroutinefunction(getattr(func, "__call__", None))
            or getattr(func, "__snapcell_async__", False)
        )
        self._model = None
        if schema is not None:
            self.schema = dict(schema)
        else:
            self.schema, self._model = _derive(func, self.name)

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    def call_json(self, args_json: str, detailed: bool = True) -> str:
        """Runs the tool on already-validated JSON arguments; returns the result's JSON. An
        exception the tool raises becomes, unless detailed, one that says only
        HOST_TOOL_FAILED; a conversion of the arguments that fails keeps its message."""
        kwargs = self._kwargs(args_json)
        if detailed:
            return self._call(kwargs)
        try:
            return self._call(kwargs)
        except ArgumentError:
            raise
        except Exception:
            raise RuntimeError(HOST_TOOL_FAILED) from None

    async def acall_json(self, args_json: str, detailed: bool = True) -> str:
        """call_json for an awaited call of an async tool, on the caller's event loop."""
        kwargs = self._kwargs(args_json)
        try:
            result = self.func(**kwargs)
            if inspect.isawaitable(result):
                result = await result
        except ArgumentError:
            raise
        except Exception:
            if detailed:
                raise
            raise RuntimeError(HOST_TOOL_FAILED) from None
        return encode_result(result)

    def _kwargs(self, args_json: str) -> dict[str, Any]:
        kwargs = json.loads(args_json)
        if self._model is not None:
            model = self._model.model_validate(kwargs)
            kwargs = {field: getattr(model, field) for field in kwargs}
        return kwargs

    def _call(self, kwargs: dict[str, Any]) -> str:
        result = self.func(**kwargs)
        if inspect.isawaitable(result):
            result = await_in_owner_loop(result)
        return encode_result(result)


class RunCalls:
    """Where one run's awaited calls run: async tools on the caller's event loop (run_async;
    None for a blocking run, whose async tools then answer on the run's thread), synchronous
    ones on a pool of threads made at the run's first such call and shut down, its threads
    joined, when the run returns (the C library has every call answered by then)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.loop = loop
        self._pools: dict[int, concurrent.futures.ThreadPoolExecutor] = {}
        self._lock = threading.Lock()

    def pool(self, threads: int) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            pool = self._pools.get(threads)
            if pool is None:
                pool = self._pools[threads] = concurrent.futures.ThreadPoolExecutor(
                    max_workers=threads, thread_name_prefix="snapcell-tool"
                )
            return pool

    def on_pool_thread(
        self, entry: ToolEntry, args_json: str, cancellation: ToolCancellation
    ) -> str:
        _run_state.loop = self.loop  # a tool that returns an awaitable awaits it there
        try:
            return entry.call(args_json, cancellation)
        finally:
            _run_state.loop = None

    def close(self) -> None:
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.shutdown(wait=True)


def in_run(run: Callable[..., Any], *args: Any, loop: asyncio.AbstractEventLoop | None = None) -> Any:
    """Calls a native run (or resume) with this thread's RunCalls in place, then closes it."""
    calls = _run_state.calls = RunCalls(loop)
    try:
        return run(*args)
    finally:
        _run_state.calls = None
        calls.close()


CANCELLED = "the tool call was cancelled: the run ended while it was in flight"


def _answer(call: Any, future: Any) -> None:
    if future.cancelled():
        call.answer(False, CANCELLED)
    elif future.exception() is not None:
        call.fail(future.exception())
    else:
        call.answer(True, future.result())


class _LoopCall:
    """An awaited call of an async tool, as a task on the caller's loop. The task is made and
    cancelled there, in that order (both come through call_soon_threadsafe from the run's
    thread), and the call is answered when the task is done, so a run returns only once its
    tasks have finished."""

    def __init__(self, loop: asyncio.AbstractEventLoop, coroutine: Any, call: Any) -> None:
        self.loop, self.coroutine, self.call = loop, coroutine, call
        self.task: asyncio.Task | None = None
        self.cancellation = ToolCancellation(event=threading.Event())

    def schedule(self) -> None:
        self.task = self.loop.create_task(self._run())
        self.task.add_done_callback(functools.partial(_answer, self.call))

    async def _run(self) -> Any:
        _cancellation.set(self.cancellation)  # the task's own copy of the context
        try:
            return await self.coroutine
        finally:
            self.cancellation._close()

    def cancel(self) -> None:
        self.cancellation._event.set()
        try:
            self.loop.call_soon_threadsafe(self._cancel)
        except RuntimeError:  # the loop is closed: nothing runs the task any more
            self.coroutine.close()
            self.call.answer(False, CANCELLED)

    def _cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()


class ToolEntry:
    """What the C library calls for one tool of a config: the entry itself for a call made from
    synchronous code (on the run's thread, as always), start() for one the code awaits."""

    __slots__ = ("tool", "detailed", "threads")

    def __init__(self, tool: Tool, detailed: bool, threads: int) -> None:
        self.tool, self.detailed, self.threads = tool, detailed, threads

    def __call__(self, args_json: str) -> str:
        """A plain call, on the run's thread inside the C library's callback."""
        return self.call(args_json, ToolCancellation(_native.tool_cancel_fd()))

    def call(self, args_json: str, cancellation: ToolCancellation) -> str:
        token = _cancellation.set(cancellation)
        try:
            return self.tool.call_json(args_json, self.detailed)
        finally:
            cancellation._close()
            _cancellation.reset(token)

    def start(self, args_json: str, call: Any) -> None:
        calls = getattr(_run_state, "calls", None)
        if calls is None or (self.tool.is_async and calls.loop is None):
            # Nowhere to run it beside the run: answered here, as a plain call is.
            try:
                call.answer(True, self(args_json))
            except Exception as exc:  # noqa: BLE001 - the code gets it as ToolError
                call.fail(exc)
            return
        context = contextvars.copy_context()
        if self.tool.is_async:
            job = _LoopCall(calls.loop, self.tool.acall_json(args_json, self.detailed), call)
            call.set_cancel(job.cancel)
            calls.loop.call_soon_threadsafe(job.schedule, context=context)
            return
        cancellation = ToolCancellation(event=threading.Event())
        future = calls.pool(self.threads).submit(
            context.run, calls.on_pool_thread, self, args_json, cancellation
        )

        def cancel() -> None:
            cancellation._event.set()  # a call already running learns it here
            future.cancel()  # one not started never starts

        call.set_cancel(cancel)
        future.add_done_callback(functools.partial(_answer, call))


def _derive(func: Callable[..., Any], name: str) -> tuple[dict[str, Any], Any]:
    """The JSON Schema of func's keyword arguments, and a pydantic model when values need
    converting into the annotated types (None when JSON values already are them)."""
    import pydantic

    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"tool {name}: cannot read its signature: {exc}") from None
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:  # noqa: BLE001 - any failure to resolve annotations
        raise TypeError(f"tool {name}: cannot resolve its annotations: {exc}") from None
    fields: dict[str, Any] = {}
    extra = "forbid"
    native = True
    for param in signature.parameters.values():
        if param.kind is param.VAR_KEYWORD:
            extra = "allow"
            continue
        if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            raise TypeError(
                f"tool {name}: parameter {param.name!r} is positional-only; sandboxed code "
                "calls tools with keyword arguments only"
            )
        annotation = hints.get(param.name, Any)
        native = native and _is_json_native(annotation)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, default)
    try:
        model = pydantic.create_model(
            f"{name}_arguments", __config__=pydantic.ConfigDict(extra=extra), **fields
        )
        schema = model.model_json_schema()
    except Exception as exc:  # noqa: BLE001 - pydantic's schema errors vary by type
        raise TypeError(f"tool {name}: cannot derive a JSON Schema from its annotations: {exc}") from None
    return schema, None if native else model


def as_tool(obj: Any) -> Tool:
    return obj if isinstance(obj, Tool) else Tool(obj)
