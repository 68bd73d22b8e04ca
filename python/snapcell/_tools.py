"""Host tools for a sandbox: plain Python callables (sync or async) with a JSON Schema derived
from their annotations, and the trampoline the C library calls with the arguments' JSON.

What this is not: a validator. The C library checks every call against the schema before the
trampoline runs; pydantic only converts values into the annotated types when a parameter needs
more than JSON's own (a model, a datetime, ...)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import threading
import typing
from collections.abc import Callable, Mapping
from typing import Any

_JSON_SCALARS = (int, float, str, bool, type(None))

# What the code's ToolError says when a tool fails and detailed errors are off (the reference's
# wording): its exception's text may hold what the model should not see.
HOST_TOOL_FAILED = "Host tool execution failed."

# The event loop of the run_async that owns the current thread's run, if any: async tools are
# awaited there so they share the caller's loop, clients and context variables.
_run_state = threading.local()


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


def await_in_owner_loop(awaitable: Any) -> Any:
    """Waits for an async tool's result from the run's thread."""
    loop = getattr(_run_state, "loop", None)

    async def wrapper() -> Any:
        return await awaitable

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

    __slots__ = ("name", "description", "schema", "requires_approval", "func", "_model")

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
        kwargs = json.loads(args_json)
        if self._model is not None:
            model = self._model.model_validate(kwargs)
            kwargs = {field: getattr(model, field) for field in kwargs}
        if detailed:
            return self._call(kwargs)
        try:
            return self._call(kwargs)
        except ArgumentError:
            raise
        except Exception:
            raise RuntimeError(HOST_TOOL_FAILED) from None

    def _call(self, kwargs: dict[str, Any]) -> str:
        result = self.func(**kwargs)
        if inspect.isawaitable(result):
            result = await_in_owner_loop(result)
        return encode_result(result)


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
