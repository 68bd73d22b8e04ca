"""snapcell.Sandbox: a framework-neutral handle on one warm template, its runs, sessions and
snapshots. Everything that decides (limits, paths, entries, descriptions, output collection)
happens in the C library; this module turns Python values into its calls and its results into
Python objects, and runs async callers on threads so the event loop never blocks."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import functools
import json
import math
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import _interpreter, _native
from ._tools import DEFAULT_TOOL_THREADS, Tool, ToolEntry, _run_state, as_tool, in_run

# keyword -> (C limit name, multiplier from the keyword's unit to the C unit)
_LIMITS: dict[str, tuple[str, int]] = {
    "timeout": ("wall_ms", 1000),
    "cpu_time": ("cpu_ms", 1000),
    "memory_limit": ("memory_bytes", 1),
    "file_size": ("file_bytes", 1),
    "tmp_size": ("tmp_bytes", 1),
    "stdout_limit": ("stdout_bytes", 1),
    "stderr_limit": ("stderr_bytes", 1),
    "processes": ("processes", 1),
    "open_files": ("open_files", 1),
    "max_output_files": ("output_files", 1),
    "max_output_file_bytes": ("output_file_bytes", 1),
    "max_output_total_bytes": ("output_total_bytes", 1),
    "max_connections": ("net_connections", 1),
    "max_network_bytes": ("net_bytes", 1),
    "connect_timeout": ("net_connect_ms", 1000),
    "idle_timeout": ("net_idle_ms", 1000),
    "approval_timeout": ("pause_ms", 1000),
    "max_paused_runs": ("paused_runs", 1),
    "max_concurrent_tool_calls": ("tool_calls", 1),
}
_SECONDS = {"timeout", "cpu_time", "connect_timeout", "idle_timeout", "approval_timeout"}

# The helper this package ships, beside the extension.
_HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "snapcell-cell")


def _limit_value(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a positive number, not {type(value).__name__}")
    if name not in _SECONDS and not isinstance(value, int):
        raise TypeError(f"{name} must be a positive integer")
    if not value > 0 or (isinstance(value, float) and not math.isfinite(value)):
        raise ValueError(f"{name} must be positive, got {value!r}")
    return math.ceil(value * _LIMITS[name][1])


@dataclass(frozen=True)
class Artifact:
    """A file the code left under /output. ``path`` is relative to /output."""

    path: str
    media_type: str
    data: bytes

    @property
    def sandbox_path(self) -> str:
        return "/output/" + self.path


@dataclass(frozen=True)
class ToolCall:
    name: str
    args_bytes: int
    duration: float  # seconds
    ok: bool


@dataclass(frozen=True)
class NetworkEvent:
    """One network attempt as the host's egress gate saw it: ``kind`` is "resolve" (a name
    asked for), "connect" (a stream passed through) or "request" (one HTTP request through an
    entry with HTTP rules); ``rule`` is the entry that allowed it or why it was refused."""

    kind: str
    allowed: bool
    target: str | None
    address: str | None
    port: int
    method: str | None
    path: str | None
    http_status: int
    header_added: bool
    rule: str | None
    bytes_out: int
    bytes_in: int
    started: float  # seconds from the run's start; the list is in this order
    duration: float  # seconds
    upstream_tls: bool = False  # went upstream over verified TLS (a stream: began with TLS)
    count: int = 1  # attempts this event stands for (repeated refusals and lookups join)


@dataclass(frozen=True)
class PendingCall:
    """The tool call a paused run waits on: ``arguments`` as the tool would get them (checked
    against its schema)."""

    id: int
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Decision:
    """One decision on a call that needed one, in the run's audit. ``verdict`` is "approved",
    "rejected", "value", "expired" or "closed"; ``reason`` the rejection's, ``value`` the value
    the host supplied; ``decided_at`` seconds since the epoch; ``waited`` seconds from the pause;
    ``call_index`` the call's entry in ``tool_calls`` (None when it has none)."""

    id: int
    name: str
    arguments: dict[str, Any]
    verdict: str
    decided_by: str | None
    decided_at: float
    waited: float
    call_index: int | None
    reason: str | None = None
    value: Any = None


def _decision_from_native(d: tuple) -> Decision:
    pid, name, args, verdict, text, by, at_ms, waited_us, index = d
    return Decision(pid, name, json.loads(args), verdict, by, at_ms / 1e3, waited_us / 1e6, index,
                    reason=text if verdict == "rejected" else None,
                    value=json.loads(text) if verdict == "value" else None)


@dataclass(frozen=True)
class Result:
    """How one run ended and what it left. ``status`` is the library's name for how it ended
    (``snapcell_status_name``); a paused run waits for a decision on ``pending`` (see
    :meth:`Sandbox.resume`). Every result of a run, paused or final, holds its whole output so
    far (``stdout``, ``stderr``, ``tool_calls`` and ``decisions`` from the start); artifacts
    come with the final one. ``peak_memory`` is the memory the host was charged for the cell
    (its memory cgroup's peak, page tables and kernel memory included) where a memory cgroup
    per cell measured it, else 0; ``peak_rss`` is the largest resident set
    of one cell process: resident peak, not the memory charged to the host. ``summary`` says
    how the run ended in the words the model is told (the library's): the status and its
    cause, e.g. the exception with the end of its traceback, or the limit that stopped it.

    ``value`` is the value of the code's last statement when that is an expression (as an
    interactive interpreter shows it, but never printed), as parsed JSON: ``1+1`` gives ``2``,
    a tuple a list. It is ``None`` when there is none, and ``value_absent`` then says why:
    ``"no_expression"`` (the last statement is not an expression), ``"none"`` (its value is
    ``None``), ``"not_json"`` (not representable as JSON: an object, NaN, a cycle, nesting past
    64 levels), ``"too_large"`` (its JSON is over 256 KiB, ``snapcell.VALUE_MAX_BYTES``) or
    ``"not_evaluated"`` (the run did not end ok, or is paused); ``value_absent`` is ``None``
    when there is a value. ``value_text`` is what the model is told of it after the run's
    other output (the library's words: ``"value: 2"``, or why a value is not shown), else
    ``None``."""

    status: str
    exit_code: int
    stdout: str
    stderr: str
    artifacts: tuple[Artifact, ...]
    tool_calls: tuple[ToolCall, ...]
    wall_time: float
    cpu_time: float
    peak_memory: int
    limits_hit: frozenset[str]
    isolation: str
    signal: int = 0  # the signal that ended the cell, or 0: the record's name for it
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    skipped_outputs: tuple[tuple[str, str], ...] = ()
    skipped_output_count: int = 0
    output_limits_hit: frozenset[str] = field(default_factory=frozenset)
    network_events: tuple[NetworkEvent, ...] = ()
    network_limits_hit: frozenset[str] = field(default_factory=frozenset)
    peak_rss: int = 0
    pending: PendingCall | None = None
    decisions: tuple[Decision, ...] = ()
    summary: str = ""
    value: Any = None
    value_absent: str | None = "not_evaluated"
    value_text: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def model_text(self) -> str:
        """The run as one text for a model, in the library's words: what it printed (stdout,
        then stderr) and ``value_text`` when it ended ok, else what it printed to stdout and
        ``summary`` (how it ended and why); a run ok with nothing to show is its ``summary``.
        What the framework adapters (snapcell.pydantic_ai, ...) return."""
        parts = [self.stdout] + ([self.stderr, self.value_text or ""] if self.ok else [self.summary])
        text = "".join(p if p.endswith("\n") else p + "\n" for p in parts if p)
        return text or self.summary

    @property
    def term_signal(self) -> int:
        """The old name of ``signal``, kept for the 0.2 releases (NEWS)."""
        return self.signal

    @classmethod
    def _from_native(cls, r: dict[str, Any], owner: Any = None) -> Result:
        p = r["pending"]
        res = cls(
            pending=PendingCall(p[0], p[1], json.loads(p[2])) if p else None,
            decisions=tuple(map(_decision_from_native, r["decisions"])),
            status=r["status"],
            exit_code=r["exit_code"],
            stdout=r["stdout"],
            stderr=r["stderr"],
            artifacts=tuple(Artifact(p, m, d) for p, m, d in r["artifacts"]),
            tool_calls=tuple(ToolCall(n, b, us / 1e6, ok) for n, b, us, ok in r["tool_calls"]),
            wall_time=r["wall_us"] / 1e6,
            cpu_time=r["cpu_us"] / 1e6,
            peak_memory=r["peak_memory_bytes"],
            peak_rss=r["peak_rss_bytes"],
            limits_hit=frozenset(r["limits_hit"]),
            isolation=r["isolation"],
            signal=r["term_signal"],
            stdout_truncated=r["stdout_truncated"],
            stderr_truncated=r["stderr_truncated"],
            skipped_outputs=tuple(map(tuple, r["skipped"])),
            skipped_output_count=r["skipped_count"],
            output_limits_hit=frozenset(r["output_limits_hit"]),
            network_events=tuple(NetworkEvent(*e[:12], e[12] / 1e6, e[13] / 1e6, *e[14:16])
                                 for e in r["network_events"]),
            network_limits_hit=frozenset(r["network_limits_hit"]),
            summary=r["summary"],
            value=None if r["value_json"] is None else json.loads(r["value_json"]),
            value_absent=None if r["value_json"] is not None else r["value_state"],
            value_text=r["value_text"],
        )
        # The Sandbox or Session whose run this is (only it resumes a paused one): an
        # attribute, not a field, so asdict, copies and comparisons never see it.
        object.__setattr__(res, "_owner", owner)
        return res


def _mounts(mounts: Any) -> list[tuple[str, str]]:
    """A mount is "path" (same path under /input), (host, mount) or a mapping host -> mount."""
    if mounts is None:
        return []
    if isinstance(mounts, Mapping):
        return [(str(h), str(m)) for h, m in mounts.items()]
    if isinstance(mounts, (str, os.PathLike)) or _is_pair(mounts):
        mounts = [mounts]
    out = []
    for m in mounts:
        if isinstance(m, (str, os.PathLike)):
            out.append((os.fspath(m), os.fspath(m)))
        elif _is_pair(m):
            out.append((os.fspath(m[0]), os.fspath(m[1])))
        else:
            raise TypeError(f"a mount is a path or a (host_path, mount_path) pair, not {m!r}")
    return out


def _is_pair(v: Any) -> bool:
    return (
        isinstance(v, tuple)
        and len(v) == 2
        and all(isinstance(x, (str, os.PathLike)) for x in v)
    )


@dataclass(frozen=True)
class AllowedTarget:
    """A network entry with headers: the host adds ``headers`` (name -> value) to the requests
    it lets through for ``target``. In a value, ``${env:NAME}`` (the host's environment),
    ``${file:PATH}`` (a file of at most 8 KiB, one trailing newline dropped) and ``$$`` are
    expanded by the C library when the Sandbox is built; values are never listed, described
    or shown to the code."""

    target: str
    methods: str | Sequence[str] | None = None
    headers: Mapping[str, str] | None = None


def _entries(entries: Any) -> list[tuple[str, list[str] | None, dict[str, str]]]:
    """A network entry is "target", (target, "METHOD"), (target, [methods]), an object with
    .target and .methods (snapcell.agent_framework.AllowedDomain) or an AllowedTarget (which
    also has .headers)."""
    if entries is None:
        return []
    if isinstance(entries, str) or hasattr(entries, "target") or _is_entry_pair(entries):
        entries = [entries]
    out = []
    for e in entries:
        if isinstance(e, str):
            out.append((e, None, {}))
        elif hasattr(e, "target"):
            out.append((e.target, _methods(e.methods), _headers(getattr(e, "headers", None))))
        elif _is_entry_pair(e):
            out.append((e[0], _methods(e[1]), {}))
        else:
            raise TypeError(f"a network entry is a target, a (target, methods) pair or an AllowedTarget, not {e!r}")
    return out


def _headers(h: Any) -> dict[str, str]:
    if h is None:
        return {}
    if not isinstance(h, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in h.items()):
        raise TypeError(f"headers are a mapping of str to str, not {h!r}")
    return dict(h)


def _is_entry_pair(v: Any) -> bool:
    return isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str)


def _methods(m: Any) -> list[str] | None:
    if m is None:
        return None
    if isinstance(m, str):
        return [m]
    if not isinstance(m, Iterable) or not all(isinstance(x, str) for x in m):
        raise TypeError(f"methods are a string or a sequence of strings, not {m!r}")
    return list(m)


def build_config(
    *,
    tools: Any = None,
    env: Mapping[str, str] | None = None,
    python_paths: Sequence[str | os.PathLike[str]] | None = None,
    workspace: str | os.PathLike[str] | None = None,
    mounts: Any = None,
    allowed_domains: Any = None,
    require_isolation: str | None = None,
    reject_links: bool = False,
    reuse: bool | None = None,
    python: str | os.PathLike[str] | None = None,
    venv: str | os.PathLike[str] | None = None,
    preload: Sequence[str] | None = None,
    warmup: str | None = None,
    host_map: Mapping[str, str] | None = None,
    upstream_ca: str | os.PathLike[str] | None = None,
    uid_range: tuple[int, int] | None = None,
    include_detailed_errors: bool = True,
    tool_threads: int = DEFAULT_TOOL_THREADS,
    **limits: Any,
) -> tuple[Any, dict[str, Tool]]:
    """A C config from keywords; unknown keywords are TypeErrors, bad values raise before any
    process starts. The interpreter is python=, else venv='s own, else this process's base
    interpreter (_interpreter.choose)."""
    unknown = sorted(set(limits) - set(_LIMITS))
    if unknown:
        raise TypeError(f"unknown keyword argument(s): {', '.join(unknown)}")
    if isinstance(tool_threads, bool) or not isinstance(tool_threads, int) or tool_threads < 1:
        raise ValueError(f"tool_threads must be a positive int, not {tool_threads!r}")
    cfg = _native.Config()
    cfg.set_helper(_HELPER)
    for name, value in limits.items():
        if value is not None:
            cfg.set_limit(_LIMITS[name][0], _limit_value(name, value))
    for k, v in (env or {}).items():
        cfg.set_env(k, v)
    for p in python_paths or ():
        cfg.add_python_path(os.path.abspath(os.path.expanduser(os.fspath(p))))
    interpreter = _interpreter.choose(python, venv)
    if interpreter is not None:
        cfg.set_python(interpreter)
    if venv is not None:
        cfg.set_venv(os.path.abspath(os.path.expanduser(os.fspath(venv))))
    if isinstance(preload, str):
        preload = [preload]
    for module in preload or ():
        cfg.add_preload(module)
    if warmup is not None:
        cfg.set_warmup(warmup)
    if workspace is not None:
        cfg.set_workspace(os.path.expanduser(os.fspath(workspace)))
    cfg.set_reject_links(reject_links)
    if reuse is not None:
        if not isinstance(reuse, bool):
            raise TypeError(f"reuse is True, False or None, not {reuse!r}")
        cfg.set_reuse(reuse)
    for host, mount in _mounts(mounts):
        cfg.add_mount(os.path.expanduser(host), mount)
    for target, methods, headers in _entries(allowed_domains):
        cfg.allow(target, methods)
        for name, value in headers.items():
            cfg.allow_header(target, name, value)
    for name, address in (host_map or {}).items():
        cfg.map_host(name, address)
    if upstream_ca is not None:
        cfg.set_upstream_ca(os.path.expanduser(os.fspath(upstream_ca)))
    registered: dict[str, Tool] = {}
    if tools is not None:
        if callable(tools) or isinstance(tools, Tool):
            tools = [tools]
        for t in tools:
            t = as_tool(t)
            entry = ToolEntry(t, include_detailed_errors, tool_threads)
            cfg.add_tool(t.name, t.description, _schema_text(t), t.requires_approval, entry)
            cfg.set_tool_async(t.name)
            registered[t.name] = t
    if require_isolation is not None:
        cfg.require_isolation(require_isolation)
    if uid_range is not None:
        first, count = uid_range
        cfg.set_uid_range(first, count)
    return cfg, registered


def _schema_text(t: Tool) -> str:
    import json

    return json.dumps(t.schema)


# Runs for run_async: one thread per concurrent run (a cell blocks its thread), so the pool is
# large; threads are made on demand and reused.
_executor_lock = threading.Lock()
_executor: concurrent.futures.ThreadPoolExecutor | None = None


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=256, thread_name_prefix="snapcell-run"
            )
        return _executor


def _in_thread(run: Callable[..., dict], loop: asyncio.AbstractEventLoop, args: tuple, cancel: Any):
    _run_state.loop = loop
    try:
        return in_run(run, *args, cancel, loop=loop)
    finally:
        _run_state.loop = None


async def _run_async(run: Callable[..., dict], *args: Any, owner: Any = None) -> Result:
    """Runs a native run (or resume) on a pool thread; cancelling the awaiting task kills the
    cell."""
    loop = asyncio.get_running_loop()
    cancel = _native.Cancel()
    ctx = contextvars.copy_context()
    inner = loop.run_in_executor(_pool(), ctx.run, _in_thread, run, loop, args, cancel)
    try:
        return Result._from_native(await asyncio.shield(inner), owner)
    except asyncio.CancelledError:
        cancel.fire()
        try:
            await inner
        except BaseException:  # noqa: BLE001 - the run is being abandoned either way
            pass
        raise


_UNSET: Any = object()


def _verdict(approve: Any, reason: Any, value: Any) -> tuple[str, str | None]:
    """The C verdict and its text from resume's keywords; ValueError or TypeError before
    anything changes."""
    if (approve is not None) + (value is not _UNSET) != 1:
        raise ValueError("resume takes exactly one of approve=True, approve=False or value=...")
    if approve is not None and not isinstance(approve, bool):
        raise TypeError(f"approve must be True or False, not {approve!r}")
    if reason is not None and approve is not False:
        raise ValueError("reason= goes with approve=False")
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"reason must be a str, not {type(reason).__name__}")
    if value is not _UNSET:
        try:
            return "value", json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise TypeError(f"value must be JSON-representable: {e}") from None
    return ("approved", None) if approve else ("rejected", reason)


def _resume_args(owner: Any, result: Any, approve: Any, reason: Any, value: Any,
                 decided_by: Any) -> tuple:
    """The native resume's arguments, once result, keywords and owner are checked."""
    if not isinstance(result, Result):
        raise TypeError(f"resume takes a Result, not {type(result).__name__}")
    verdict, text = _verdict(approve, reason, value)
    if decided_by is not None and not isinstance(decided_by, str):
        raise TypeError(f"decided_by must be a str, not {type(decided_by).__name__}")
    if result.status != "paused" or result.pending is None:
        raise ValueError(f"the result is not paused (its status is {result.status!r})")
    origin = getattr(result, "_owner", None)
    if origin is not owner and not (
        isinstance(owner, Sandbox) and isinstance(origin, Session) and origin._sandbox is owner
    ):
        raise ValueError("the result is from another sandbox or session")
    return result.pending.id, verdict, text, decided_by


def _run_tools(tools: Any, detailed: bool, threads: int = DEFAULT_TOOL_THREADS) -> Any:
    """A native Config holding a run's own tools, or None: the C library adds them to the
    sandbox's for that run (and refuses a clash)."""
    if tools is None:
        return None
    if callable(tools) or isinstance(tools, Tool):
        tools = [tools]
    cfg = _native.Config()
    for t in tools:
        t = as_tool(t)
        cfg.add_tool(t.name, t.description, _schema_text(t), t.requires_approval,
                     ToolEntry(t, detailed, threads))
        cfg.set_tool_async(t.name)
    return cfg


def _run_files(files: Any) -> list[tuple[str, bytes | None, bytes | None]] | None:
    """A run's files as the native run takes them: a mapping of name -> content, or an
    iterable of (name, content) pairs; content is bytes (or any buffer), str (its UTF-8
    text) or an os.PathLike naming a host file (read by the C library, which refuses a link
    or anything but a regular file). The names' rule and the caps are the C library's."""
    if files is None:
        return None
    if isinstance(files, (str, bytes)):
        raise TypeError("files is a mapping of name -> content, or (name, content) pairs")
    pairs = files.items() if isinstance(files, Mapping) else files
    out = []
    for pair in pairs:
        try:
            name, content = pair
        except (TypeError, ValueError):
            raise TypeError(f"files: a (name, content) pair, not {pair!r}") from None
        if not isinstance(name, str):
            raise TypeError(f"files: a name is a str, not {name!r}")
        if isinstance(content, os.PathLike):
            out.append((name, None, os.fsencode(os.fspath(content))))
        elif isinstance(content, str):
            out.append((name, content.encode(), None))
        else:
            try:
                out.append((name, bytes(memoryview(content)), None))
            except TypeError:
                raise TypeError(f"files[{name!r}]: bytes, str or a path (os.PathLike), "
                                f"not {type(content).__name__}") from None
    return out


def _keep(result: Result, run_tools: Any) -> None:
    """A paused run calls its own tools at the resume: its result keeps them alive."""
    if run_tools is not None and result.pending is not None:
        object.__setattr__(result, "_run_tools", run_tools)


_live: weakref.WeakSet[Sandbox] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for sb in list(_live):
        sb.close()


class Sandbox:
    """A sandbox: a warm template whose every run is a fresh, isolated copy.

    Limits (keywords named after the C limits): ``timeout`` and ``cpu_time`` in seconds;
    ``memory_limit``, ``file_size``, ``tmp_size``, ``stdout_limit``, ``stderr_limit``,
    ``max_output_file_bytes``, ``max_output_total_bytes`` in bytes; ``processes``,
    ``open_files``, ``max_output_files`` as counts. ``tools`` are callables or
    :class:`snapcell.Tool`; ``workspace`` and ``mounts`` fill ``/input``;
    ``allowed_domains`` are network entries, enforced by the host's egress gate (``host_map``
    answers names without DNS, for tests and private names; ``upstream_ca`` is the CA bundle
    the host verifies servers with when it makes requests itself).

    The cells run this process's base interpreter (never its venv's), so they have its
    ``sys.version_info``; ``python`` (an interpreter executable) picks another, ``venv`` (a
    virtual environment of CPython 3.10 or newer, e.g. ``sys.prefix``) runs that venv's own
    interpreter with its site-packages read-only; given both, ``python`` must be the venv's
    base interpreter. A process that is not a CPython interpreter (an application embedding
    Python) must give one of them (``ValueError`` otherwise). ``env``, ``python_paths``,
    ``preload`` (modules imported before runs) and ``warmup`` (trusted code the template runs
    once after them, so their first-time work is shared by every run) shape the interpreter;
    ``reject_links=True`` makes a link in the inputs an error instead of being left out;
    ``reuse=True`` resets a fresh run's cell in place for a later run instead of forking a new
    one (``None``, the library's default, is on; ``False`` forks a new cell for each run; where
    the kernel lacks what it needs, runs fork: :attr:`reuse` and ``snapcell.probe()["reuse"]``
    say so);
    ``uid_range=(first, count)`` is where a root process's sandboxes take their own outside
    uids; ``include_detailed_errors=False`` gives the code only "Host tool execution failed."
    when a tool raises (default True: the exception's message; arguments that do not validate
    are explained either way). Calls the code awaits (``await tools.x(...)``,
    ``asyncio.gather``) run at once: async tools as tasks on the caller's loop
    (:meth:`run_async`), others on a pool of ``tool_threads`` (4) threads per run, so such tools
    must be thread-safe; ``max_concurrent_tool_calls`` (16) bounds a run's calls in flight.
    ``approval_required`` is a set of tool names whose every call
    waits for a decision (:meth:`resume`), for at most ``approval_timeout`` seconds (600), with
    at most ``max_paused_runs`` (16) runs waiting at once. Creating one starts its template
    (tens of milliseconds)."""

    def __init__(self, *, approval_required: Iterable[str] | None = None, **kwargs: Any) -> None:
        cfg, tools = build_config(**kwargs)
        if isinstance(approval_required, str) or (
            approval_required is not None and not isinstance(approval_required, Iterable)
        ):
            raise TypeError("approval_required is a set of tool names, "
                            f"not {type(approval_required).__name__}")
        for name in approval_required or ():
            if not isinstance(name, str):
                raise TypeError(f"approval_required holds tool names, not {name!r}")
            cfg.set_tool_decision(name, True)
        self._start(cfg, tools, kwargs.get("include_detailed_errors", True),
                    kwargs.get("tool_threads", DEFAULT_TOOL_THREADS))

    @classmethod
    def _from_config(cls, cfg: Any) -> Sandbox:
        """A sandbox from an already built native config (the Agent Framework adapter's)."""
        sb = cls.__new__(cls)
        sb._start(cfg, {})
        return sb

    def _start(self, cfg: Any, tools: dict[str, Tool], detailed: bool = True,
               tool_threads: int = DEFAULT_TOOL_THREADS) -> None:
        self._cfg, self._tools, self._detailed = cfg, tools, detailed
        self._tool_threads = tool_threads
        self._native = _native.Sandbox(cfg)
        _live.add(self)

    @property
    def tools(self) -> dict[str, Tool]:
        return dict(self._tools)

    @property
    def isolation(self) -> str:
        return self._native.isolation

    @property
    def reuse(self) -> bool:
        """Whether a fresh run's cell is reset in place for a later run: asked for
        (``reuse=True`` or ``None``, the default), at level namespaces or cgroups, without network entries, and on a
        kernel that gives what it needs; else every run forks a new cell."""
        return self._native.reuse

    def python_info(self) -> dict[str, Any]:
        """The interpreter the cells run: ``executable`` (its real file, the cells'
        ``sys.executable``), ``chosen_by`` (why that one), ``version`` ("3.12.1"),
        ``version_info`` ((3, 12)) and ``warning`` ("" or why it may not work)."""
        return self._cfg.python_info()

    def describe(self, format: str = "compact", *, stateful: bool = False) -> str:
        """The execute_code description a model is given for this sandbox ("compact" or "json");
        ``stateful=True``: the one for a tool whose runs share a session (it says state persists)."""
        if format not in ("compact", "json"):
            raise ValueError(f'format must be "compact" or "json", not {format!r}')
        return self._cfg.describe(format == "json", bool(stateful))

    def instructions(self) -> str:
        return self._cfg.instructions()

    def run(self, code: str, *, tools: Any = None, files: Any = None) -> Result:
        """Runs code in a fresh cell; blocks this thread (not the GIL) until it ends, or
        until it pauses at a call that needs a decision (status "paused"). ``tools`` (a
        callable, a :class:`snapcell.Tool` or a sequence of them) are added to the sandbox's
        for this run only: the code calls them as it calls the sandbox's; a name the sandbox
        has already is a ValueError. ``files`` (a mapping of name -> bytes, str or a host
        path as os.PathLike, or (name, content) pairs) are read-only at /input/<name> for
        this run only, beside the workspace's; a name the workspace has, or a bad name, is a
        ValueError. No new template starts."""
        run_tools = _run_tools(tools, self._detailed, self._tool_threads)
        run_files = _run_files(files)
        result = Result._from_native(in_run(self._native.run, code, None, run_tools, run_files),
                                     self)
        _keep(result, run_tools)
        return result

    async def run_async(self, code: str, *, tools: Any = None, files: Any = None) -> Result:
        """Runs code in a fresh cell without blocking the event loop; async tools are awaited
        on this loop. Cancelling the task kills the cell. ``tools`` and ``files`` as for
        :meth:`run`."""
        run_tools = _run_tools(tools, self._detailed, self._tool_threads)
        run_files = _run_files(files)
        result = await _run_async(functools.partial(self._native.run, tools=run_tools,
                                                    files=run_files), code, owner=self)
        _keep(result, run_tools)
        return result

    def resume(self, result: Result, *, approve: bool | None = None, reason: str | None = None,
               value: Any = _UNSET, decided_by: str | None = None) -> Result:
        """Decides the call a paused run waits on and goes on with the run, returning its next
        Result (which may pause again): ``approve=True`` runs the tool (once, on this thread),
        ``approve=False`` (with an optional ``reason``) makes the call raise ToolError in the
        code, ``value=`` gives the code that value (JSON-representable) and never runs the tool.
        ``decided_by`` is recorded in the audit. ValueError for a result that is not paused,
        already resumed (one of racing resumes wins), or another sandbox's; a run that waited
        past its expiry returns its final Result with status "expired"."""
        args = _resume_args(self, result, approve, reason, value, decided_by)
        return Result._from_native(in_run(self._native.resume, *args, None), result._owner)

    async def resume_async(self, result: Result, *, approve: bool | None = None,
                           reason: str | None = None, value: Any = _UNSET,
                           decided_by: str | None = None) -> Result:
        """resume() without blocking the event loop; cancelling the task kills the cell."""
        args = _resume_args(self, result, approve, reason, value, decided_by)
        return await _run_async(self._native.resume, *args, owner=result._owner)

    def session(self) -> Session:
        """A session: interpreter state (variables, imports) survives between its runs."""
        return Session(self._native.session(), self)

    def stats(self) -> dict[str, Any]:
        return self._native.stats()

    def close(self) -> None:
        """Ends the template, every cell, session and snapshot; removes temporary files."""
        self._native.close()
        _live.discard(self)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Session:
    def __init__(self, native: Any, owner: Any) -> None:
        self._native = native
        self._owner = owner
        while not isinstance(owner, Sandbox):  # a snapshot's session: up to its sandbox
            owner = owner._owner
        self._sandbox = owner

    def run(self, code: str, *, tools: Any = None, files: Any = None) -> Result:
        """Runs code in the session; while a run of the session (or of its family: sessions
        of its snapshots) waits for a decision, another is refused with RuntimeError.
        ``tools`` as for :meth:`Sandbox.run`: in `tools` for this run only. ``files`` are
        refused (ValueError): a session's /input is set when it starts."""
        run_tools = _run_tools(tools, self._sandbox._detailed, self._sandbox._tool_threads)
        result = Result._from_native(
            in_run(self._native.run, code, None, run_tools, _run_files(files)), self)
        _keep(result, run_tools)
        return result

    async def run_async(self, code: str, *, tools: Any = None, files: Any = None) -> Result:
        run_tools = _run_tools(tools, self._sandbox._detailed, self._sandbox._tool_threads)
        result = await _run_async(functools.partial(self._native.run, tools=run_tools,
                                                    files=_run_files(files)), code, owner=self)
        _keep(result, run_tools)
        return result

    def resume(self, result: Result, *, approve: bool | None = None, reason: str | None = None,
               value: Any = _UNSET, decided_by: str | None = None) -> Result:
        """As :meth:`Sandbox.resume`, for this session's paused run."""
        args = _resume_args(self, result, approve, reason, value, decided_by)
        return Result._from_native(in_run(self._sandbox._native.resume, *args, None), self)

    async def resume_async(self, result: Result, *, approve: bool | None = None,
                           reason: str | None = None, value: Any = _UNSET,
                           decided_by: str | None = None) -> Result:
        args = _resume_args(self, result, approve, reason, value, decided_by)
        return await _run_async(self._sandbox._native.resume, *args, owner=self)

    def snapshot(self) -> Snapshot:
        """Freezes the session's current state; restore it or branch new sessions from it."""
        return Snapshot(self._native.snapshot(), self)

    def restore(self, snapshot: Snapshot) -> None:
        self._native.restore(snapshot._native)

    def close(self) -> None:
        self._native.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Snapshot:
    def __init__(self, native: Any, owner: Any) -> None:
        self._native = native
        self._owner = owner

    def session(self) -> Session:
        """A new session starting from a copy of this state (a branch)."""
        return Session(self._native.session(), self)

    def close(self) -> None:
        self._native.close()

    def __enter__(self) -> Snapshot:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
