"""ExecuteCodeTool: the ``execute_code`` FunctionTool of the CodeAct surface.

It keeps what the user configured (sandbox tools with their identity, workspace, mounts,
network entries, limits) and turns it into a C config: the description the model reads, the
approval mode and every normalisation come from the C library. Runs go to a cached sandbox
for the configuration; results become Content items."""

from __future__ import annotations

import asyncio
import contextvars
import copy
import inspect
import json
import os
import threading
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Union

from agent_framework import Content, ContextProvider, FunctionInvocationContext, FunctionTool, normalize_tools

from .. import _interpreter, _native
from .._sandbox import Result, Sandbox, _run_async, build_config
from .._tools import ArgumentError, Tool, run_on_thread_loop
from ._approval import Approvals, Hold, is_stand_in
from ._registry import SandboxRegistry
from ._types import (
    AllowedDomain,
    AllowedDomainInput,
    FileMount,
    FileMountInput,
    is_domain_input,
    is_mount_input,
    normalize_allowed_domain,
    normalize_domain,
    normalize_file_mount,
    normalize_mount_path,
)

DEFAULT_MAX_OUTPUT_FILES = 20
DEFAULT_MAX_OUTPUT_FILE_BYTES = 5 * 1024 * 1024
DEFAULT_MAX_OUTPUT_TOTAL_BYTES = 20 * 1024 * 1024

# The reference's defaults for its VM settings, which snapcell accepts and ignores.
_REFERENCE_BACKEND = "wasm"
_REFERENCE_MODULE = "python_guest.path"

# How a tool whose approval_mode is "always_require" is approved: the whole program before it
# runs (execute_code needs approval: the reference's behaviour), or each call when it happens.
ApprovalKind = Literal["program", "per_call"]
_APPROVALS = ("program", "per_call")

# The id of the execute_code call being invoked (Agent Framework hands it to invoke only), for
# the approval request of a call made by its code.
_CALL_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("snapcell_call_id", default=None)

DescriptionFormat = Literal["compact", "json"]
# One format for every tool, or one per tool name (others "compact"), as the reference takes.
ToolDescriptionFormat = Union[DescriptionFormat, Mapping[str, DescriptionFormat]]


def _input_schema(stateful: bool) -> dict[str, Any]:
    return json.loads(_native.execute_code_schema(stateful))


# The library's names of the output caps (Result.output_limits_hit) -> what sets each here.
_OUTPUT_CAPS = {
    "files": "max_output_files",
    "file_bytes": "max_output_file_bytes",
    "total_bytes": "max_output_total_bytes",
    "depth": "output directory depth",
    "name": "output path length",
}


def _positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a positive integer.")
    if value <= 0:
        raise ValueError(f"{name} must be a positive integer.")
    return value


def _collect_tools(*groups: Any) -> dict[str, FunctionTool]:
    """Function tools by name, later ones replacing earlier ones; others are ignored."""
    tools: dict[str, FunctionTool] = {}
    for group in groups:
        for t in normalize_tools(group):
            if isinstance(t, FunctionTool) and t.name != "execute_code":
                tools.pop(t.name, None)
                tools[t.name] = t
    return tools


def _sandbox_tool(tool: FunctionTool, per_call: bool = False) -> Tool:
    """A snapcell Tool that invokes an Agent Framework tool with keyword arguments and takes its
    raw return value (its result parser is not applied). An async tool is awaited on the event
    loop that called invoke; a sync one runs on the run's own thread (on a loop private to that
    thread), so concurrent runs call it concurrently instead of queueing on the caller's loop.
    With per_call, its approval_mode no longer makes execute_code need approval (each call
    waits for a decision instead: _Settings.config)."""
    func = getattr(tool, "func", None)
    is_async = inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)
    )

    async def checked(coroutine: Any) -> Any:
        try:
            return await coroutine
        except TypeError as exc:
            # Agent Framework's own argument check (a TypeError subclass): keep its words
            # even when detailed errors are off, as the reference does.
            if type(exc).__name__ == "_FunctionArgumentValidationError":
                raise ArgumentError(str(exc)) from None
            raise

    def invoke(**kwargs: Any) -> Any:
        coroutine = checked(tool.invoke(arguments=kwargs, skip_parsing=True))
        return coroutine if is_async else run_on_thread_loop(coroutine)

    invoke.__snapcell_async__ = is_async  # awaited calls: tasks on the caller's loop

    return Tool(
        invoke,
        name=tool.name,
        description=tool.description or "",
        schema=tool.parameters(),
        requires_approval=tool.approval_mode == "always_require" and not per_call,
    )


class _Settings:
    """What one execute_code surface is configured with (copied into each run tool)."""

    def __init__(self) -> None:
        self.tools: dict[str, FunctionTool] = {}
        self.workspace: Path | None = None
        self.mounts: dict[str, FileMount] = {}
        self.domains: dict[str, AllowedDomain] = {}
        self.limits: dict[str, Any] = {}
        self.env: dict[str, str] = {}
        self.approval: str = "program"
        self.python_paths: tuple[str, ...] = ()
        self.reject_links = False
        self.reuse: bool | None = None  # None: the library's default
        self.python: str | None = None  # the interpreter chosen; None: the venv's own
        self.venv: str | None = None
        self.preload: tuple[str, ...] = ()
        self.warmup: str | None = None
        self.include_detailed_errors = False
        self.tool_formats: dict[str, str] = {}  # per tool name; the rest as the base format

    def copy(self) -> _Settings:
        s = copy.copy(self)
        s.tools, s.mounts, s.domains = dict(self.tools), dict(self.mounts), dict(self.domains)
        s.limits, s.env, s.tool_formats = dict(self.limits), dict(self.env), dict(self.tool_formats)
        return s

    def _keywords(self) -> dict[str, Any]:
        """The build_config keywords other than the tools: what both config() and key() use,
        so the cache key cannot miss a setting."""
        return dict(
            env=tuple(sorted(self.env.items())),
            python_paths=self.python_paths,
            workspace=self.workspace,
            mounts=tuple((str(m.host_path), m.mount_path) for m in self.mounts.values()),
            allowed_domains=tuple(sorted(self.domains.values())),
            reject_links=self.reject_links,
            reuse=self.reuse,
            python=self.python,
            venv=self.venv,
            preload=self.preload,
            warmup=self.warmup,
            include_detailed_errors=self.include_detailed_errors,
            **self.limits,
        )

    def config(self) -> Any:
        keywords = self._keywords()
        keywords["env"] = dict(keywords["env"])
        per_call = self.approval == "per_call"
        cfg, _ = build_config(tools=[_sandbox_tool(t, per_call) for t in self.tools.values()], **keywords)
        for name, t in self.tools.items():
            if per_call and t.approval_mode == "always_require":
                cfg.set_tool_decision(name, True)
        for name, fmt in self.tool_formats.items():
            if name in self.tools:
                cfg.set_tool_describe_format(name, fmt == "json")
        return cfg

    def key(self) -> tuple[Any, ...]:
        """The cache key: the tools by identity, every setting, and the signatures of the
        staged trees (a changed file gives a fresh sandbox)."""
        trees = ([str(self.workspace)] if self.workspace else []) + [str(m.host_path) for m in self.mounts.values()]
        return (
            tuple((n, id(t), t.approval_mode) for n, t in self.tools.items()),
            self.approval,
            tuple(sorted(self._keywords().items(), key=lambda kv: kv[0])),
            tuple(_native.tree_signature(t) for t in trees),
        )


class ExecuteCodeTool(FunctionTool):
    """Runs Python in a fresh snapcell cell; sandbox tools are reached with ``call_tool``.

    Keyword arguments as the reference integration's (``tools``, ``approval_mode``,
    ``workspace_root``, ``file_mounts``, ``allowed_domains``, ``tool_description_format`` (one
    format, or a mapping of tool name to format), ``max_output_files``,
    ``max_output_file_bytes``, ``max_output_total_bytes``, and from its newest source
    ``execution_timeout_seconds`` and ``include_detailed_errors``: when false, the default, a
    failing host tool reaches the code as ``ToolError("Host tool execution failed.")``), plus
    ``timeout`` (seconds, the same as ``execution_timeout_seconds``), ``memory_limit``
    (bytes), ``python`` (the interpreter the cells run; default: this process's base
    interpreter), ``python_paths`` or ``venv`` (a virtual environment, e.g. ``sys.prefix``,
    whose own interpreter then runs), ``preload`` (modules imported before runs), ``warmup``
    (trusted code run once after them), ``env`` and ``stateful`` (interpreter state kept
    between calls of this tool) and ``reject_links`` (a link in the workspace or a mount is a
    ValueError from invoke, as in newer reference releases, instead of being left out) and
    ``reuse`` (True, or None for the library's default, on: a fresh run's cell is reset in
    place for a later run instead of a newly forked one; False: forked; see
    ``snapcell.Sandbox``).
    ``approval`` says how a managed tool whose ``approval_mode`` is "always_require" is
    approved: "program" (the default, as the reference: execute_code itself then needs
    approval) or "per_call" (each call the code makes waits, and the agent run ends with Agent
    Framework's approval request naming that tool and its arguments; see
    :meth:`approval_provider`), for at most ``approval_timeout`` seconds (600).
    ``backend``, ``module`` and ``module_path`` are accepted for old code and ignored (a value
    other than the reference's default warns)."""

    def __init__(
        self,
        *,
        tools: Any = None,
        tool_description_format: ToolDescriptionFormat = "compact",
        approval_mode: str | None = None,
        workspace_root: str | os.PathLike[str] | None = None,
        file_mounts: FileMountInput | Sequence[FileMountInput] | None = None,
        allowed_domains: AllowedDomainInput | Sequence[AllowedDomainInput] | None = None,
        max_output_files: int = DEFAULT_MAX_OUTPUT_FILES,
        max_output_file_bytes: int = DEFAULT_MAX_OUTPUT_FILE_BYTES,
        max_output_total_bytes: int = DEFAULT_MAX_OUTPUT_TOTAL_BYTES,
        backend: str = _REFERENCE_BACKEND,
        module: str | None = _REFERENCE_MODULE,
        module_path: str | None = None,
        execution_timeout_seconds: float | None = None,
        include_detailed_errors: bool = False,
        timeout: float | None = None,
        memory_limit: int | None = None,
        python_paths: Sequence[str | os.PathLike[str]] | None = None,
        env: dict[str, str] | None = None,
        stateful: bool = False,
        reject_links: bool = False,
        python: str | os.PathLike[str] | None = None,
        venv: str | os.PathLike[str] | None = None,
        preload: Sequence[str] = (),
        warmup: str | None = None,
        approval: ApprovalKind = "program",
        approval_timeout: float | None = None,
        reuse: bool | None = None,
        _registry: SandboxRegistry | None = None,
        _settings: _Settings | None = None,
    ) -> None:
        base_format, tool_formats = _description_formats(tool_description_format)
        if approval_mode not in (None, "never_require", "always_require"):
            raise ValueError('approval_mode must be "never_require" or "always_require".')
        if approval not in _APPROVALS:
            raise ValueError(f'approval must be "program" or "per_call", not {approval!r}.')
        ignored = [
            n
            for n, v, default in (
                ("backend", backend, _REFERENCE_BACKEND),
                ("module", module, _REFERENCE_MODULE),
                ("module_path", module_path, None),
            )
            if v is not None and v != default
        ]
        if ignored:
            warnings.warn(
                f"snapcell ignores {', '.join(ignored)} (Hyperlight-only settings).", UserWarning, stacklevel=2
            )
        if timeout is not None and execution_timeout_seconds is not None and timeout != execution_timeout_seconds:
            raise ValueError(
                "timeout and execution_timeout_seconds are the same setting; give one of them (or equal values)."
            )
        if timeout is None:
            timeout = execution_timeout_seconds
        super().__init__(
            name="execute_code",
            description="",
            approval_mode="never_require",
            func=self._run_code,
            input_model=_input_schema(bool(stateful)),
        )
        self._lock = threading.RLock()
        self._format = base_format
        self._reference_settings = {"backend": backend, "module": module, "module_path": module_path}
        self._default_approval = approval_mode or "never_require"
        self._stateful = bool(stateful)
        self._registry = _registry or SandboxRegistry()
        self._session_lock = asyncio.Lock() if stateful else None
        self._approvals = Approvals(self._approval_timeout)  # a run tool shares its maker's
        if _settings is not None:
            self._settings = _settings
        else:
            s = self._settings = _Settings()
            s.limits = {
                "max_output_files": _positive_int("max_output_files", max_output_files),
                "max_output_file_bytes": _positive_int("max_output_file_bytes", max_output_file_bytes),
                "max_output_total_bytes": _positive_int("max_output_total_bytes", max_output_total_bytes),
            }
            if timeout is not None:
                s.limits["timeout"] = timeout
            if memory_limit is not None:
                s.limits["memory_limit"] = memory_limit
            if approval_timeout is not None:
                s.limits["approval_timeout"] = approval_timeout
            s.approval = approval
            s.env = dict(env or {})
            s.tool_formats = tool_formats
            s.include_detailed_errors = bool(include_detailed_errors)
            s.reject_links = bool(reject_links)
            if reuse is not None and not isinstance(reuse, bool):
                raise TypeError(f"reuse is True, False or None, not {reuse!r}")
            s.reuse = reuse
            s.venv = os.path.abspath(os.path.expanduser(os.fspath(venv))) if venv is not None else None
            # Resolved now, so the cache key and the state name the file that runs.
            s.python = _interpreter.choose(python, s.venv)
            s.preload = (preload,) if isinstance(preload, str) else tuple(preload)
            s.warmup = warmup
            s.python_paths = tuple(os.path.abspath(os.path.expanduser(os.fspath(p))) for p in python_paths or ())
            if workspace_root is not None:
                s.workspace = _workspace(workspace_root)
            if tools is not None:
                s.tools = _collect_tools(tools)
            if file_mounts is not None:
                self._add_mounts_to(s, file_mounts)
            if allowed_domains is not None:
                self._add_domains_to(s, allowed_domains)
        self._refresh()

    # ---- what the model sees ----

    @property
    def description(self) -> str:  # type: ignore[override]
        cfg = self.__dict__.get("_cfg")
        if cfg is None:  # during FunctionTool.__init__
            return self.__dict__.get("_plain_description", "")
        return cfg.describe(self._format == "json", self._stateful)

    @description.setter
    def description(self, value: str) -> None:
        self.__dict__["_plain_description"] = value

    def build_instructions(self, *, tools_visible_to_model: bool) -> str:
        """The provider instructions for this surface (from the C library); with
        tools_visible_to_model, the model also sees some of the sandbox's tools directly."""
        return self._cfg.instructions(tools_visible=bool(tools_visible_to_model))

    def _refresh(self) -> None:
        """Rebuilds the C config (checking every tool's schema) and the approval mode."""
        with self._lock:
            cfg = self._settings.config()
            self.__dict__["_cfg"] = cfg
            self.approval_mode = "always_require" if cfg.approval(self._default_approval == "always_require") else "never_require"

    # ---- tools ----

    def add_tools(self, tools: Any) -> None:
        with self._lock:
            before = self._settings.tools
            self._settings.tools = _collect_tools(list(before.values()), tools)
            try:
                self._refresh()
            except BaseException:
                self._settings.tools = before
                self._refresh()
                raise

    def get_tools(self) -> list[FunctionTool]:
        with self._lock:
            return list(self._settings.tools.values())

    def remove_tool(self, name: str) -> None:
        with self._lock:
            if name not in self._settings.tools:
                raise KeyError(f"No managed tool named {name!r} is registered.")
            del self._settings.tools[name]
            self._refresh()

    def clear_tools(self) -> None:
        with self._lock:
            self._settings.tools = {}
            self._refresh()

    # ---- files ----

    @staticmethod
    def _add_mounts_to(s: _Settings, file_mounts: Any) -> None:
        items = [file_mounts] if is_mount_input(file_mounts) else list(file_mounts)
        for m in [normalize_file_mount(i) for i in items]:
            s.mounts[m.mount_path] = m

    def add_file_mounts(self, file_mounts: FileMountInput | Sequence[FileMountInput]) -> None:
        with self._lock:
            self._add_mounts_to(self._settings, file_mounts)
            self._refresh()

    def get_file_mounts(self) -> list[FileMount]:
        with self._lock:
            return list(self._settings.mounts.values())

    def remove_file_mount(self, mount_path: str) -> None:
        with self._lock:
            path = normalize_mount_path(mount_path)
            if path not in self._settings.mounts:
                raise KeyError(f"No file mount exists for {mount_path!r}.")
            del self._settings.mounts[path]
            self._refresh()

    def clear_file_mounts(self) -> None:
        with self._lock:
            self._settings.mounts.clear()
            self._refresh()

    # ---- network ----

    @staticmethod
    def _add_domains_to(s: _Settings, domains: Any) -> None:
        items = [domains] if is_domain_input(domains) else list(domains)
        for d in [normalize_allowed_domain(i) for i in items]:
            s.domains[d.target] = d

    def add_allowed_domains(self, domains: AllowedDomainInput | Sequence[AllowedDomainInput]) -> None:
        with self._lock:
            self._add_domains_to(self._settings, domains)
            self._refresh()

    def get_allowed_domains(self) -> list[AllowedDomain]:
        with self._lock:
            return sorted(self._settings.domains.values())

    def remove_allowed_domain(self, domain: str) -> None:
        with self._lock:
            target = normalize_domain(domain)
            if target not in self._settings.domains:
                raise KeyError(f"No allowed domain exists for {domain!r}.")
            del self._settings.domains[target]
            self._refresh()

    def clear_allowed_domains(self) -> None:
        with self._lock:
            self._settings.domains.clear()
            self._refresh()

    # ---- runs ----

    def create_run_tool(self) -> ExecuteCodeTool:
        """A copy for one agent run: later changes here do not reach it; it shares the
        sandboxes (and, when stateful, the session) of this tool."""
        with self._lock:
            run_tool = ExecuteCodeTool(
                tool_description_format=self._format,
                approval_mode=self._default_approval,
                stateful=self._stateful,
                _registry=self._registry,
                _settings=self._settings.copy(),
            )
            run_tool._reference_settings = dict(self._reference_settings)
            run_tool._session_lock = self._session_lock
            run_tool._approvals = self._approvals
            return run_tool

    def build_serializable_state(self) -> dict[str, Any]:
        with self._lock:
            s = self._settings
            return {
                **self._reference_settings,
                "tool_names": list(s.tools),
                "approval_mode": self.approval_mode,
                "tool_description_format": dict(s.tool_formats) if s.tool_formats else self._format,
                "filesystem_enabled": s.workspace is not None or bool(s.mounts),
                "workspace_root": str(s.workspace) if s.workspace else None,
                "file_mounts": [{"host_path": str(m.host_path), "mount_path": m.mount_path} for m in s.mounts.values()],
                "network_enabled": bool(s.domains),
                "allowed_domains": [
                    {"target": d.target, "methods": list(d.methods) if d.methods else None}
                    for d in sorted(s.domains.values())
                ],
                "max_output_files": s.limits["max_output_files"],
                "max_output_file_bytes": s.limits["max_output_file_bytes"],
                "max_output_total_bytes": s.limits["max_output_total_bytes"],
                "timeout": s.limits.get("timeout"),
                "execution_timeout_seconds": s.limits.get("timeout"),
                "include_detailed_errors": s.include_detailed_errors,
                "memory_limit": s.limits.get("memory_limit"),
                "python": self._cfg.python_info()["executable"],
                "venv": s.venv,
                "stateful": self._stateful,
                "approval": s.approval,
                "approval_timeout": s.limits.get("approval_timeout"),
            }

    def to_dict(self, *, exclude: set[str] | None = None, exclude_none: bool = True) -> dict[str, Any]:
        self.__dict__["_plain_description"] = self.description
        return super().to_dict(exclude=exclude, exclude_none=exclude_none)

    def _approval_timeout(self) -> float:
        return self._settings.limits.get("approval_timeout") or 600.0

    def approval_provider(self) -> ContextProvider:
        """With approval="per_call", what an agent that has this tool directly (in its
        ``tools``) needs in its ``context_providers``: in each agent run it hands Agent
        Framework what resumes this tool's paused runs with the approvals the run carries
        (CodeActProvider does this itself)."""
        from ._approval import ApprovalProvider

        return ApprovalProvider(self._approvals)

    async def invoke(self, *, arguments: Any = None, context: Any = None, tool_call_id: str | None = None,
                     skip_parsing: bool = False, **kwargs: Any) -> Any:
        """Agent Framework's invoke; the call's id is kept for the approval request of a call
        its code makes (approval="per_call")."""
        token = _CALL_ID.set(tool_call_id)
        try:
            return await super().invoke(arguments=arguments, context=context, tool_call_id=tool_call_id,
                                        skip_parsing=skip_parsing, **kwargs)
        finally:
            _CALL_ID.reset(token)

    async def _run_code(self, *, code: str, ctx: FunctionInvocationContext | None = None) -> list[Content]:
        with self._lock:
            settings = self._settings.copy()
            cfg = self._cfg
        registry, stateful = self._registry, self._session_lock is not None
        paused: list[Any] = []  # the registry entry a paused run keeps until it ends

        def run(code: str, cancel: Any) -> dict:
            """On one pool thread: the cached sandbox (built on first use), then the run."""
            entry = registry.acquire(settings.key(), lambda: Sandbox._from_config(cfg))
            try:
                if not stateful:
                    r = entry.sandbox._native.run(code, cancel)
                else:
                    if entry.session is None:
                        entry.session = entry.sandbox.session()
                    r = entry.session._native.run(code, cancel)
            except BaseException:
                registry.release(entry)
                raise
            if r["status"] == "paused":
                paused.append(entry)
            else:
                registry.release(entry)
            return r

        if not stateful:
            result = await _run_async(run, code)
        else:
            async with self._session_lock:
                result = await _run_async(run, code)
        if result.status != "paused":
            return _contents(result)
        entry = paused[0]
        hold = Hold(entry.sandbox._native, lambda: registry.release(entry), self._settle)
        return await self._settle(result, hold, _CALL_ID.get(), ctx.tools if ctx is not None else None)

    async def _settle(self, result: Result, hold: Hold, call_id: str | None, tools: Any) -> list[Content]:
        """execute_code's answer for a run that may be paused: a paused run ends the agent run
        with the approval request for its pending call (UserInputRequiredException)."""
        while result.status == "paused":
            name = result.pending.name
            if any(getattr(t, "name", None) == name and not is_stand_in(t) for t in tools or ()):
                # Agent Framework would answer an approval by running the agent's own tool of
                # that name, outside the run: refuse instead of asking.
                result = await hold.resume(result, "rejected", (
                    f"approval of each call is not possible here: the agent has a tool of its own "
                    f"named {name!r}, which Agent Framework would run on approval, outside this program"))
                continue
            raise self._approvals.pause(result, hold, call_id)
        return _contents(result)

    def close(self) -> None:
        """Ends every sandbox this tool (and the run tools made from it) started."""
        self._registry.close()

    def __enter__(self) -> ExecuteCodeTool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> ExecuteCodeTool:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()


def _description_formats(value: Any) -> tuple[str, dict[str, str]]:
    """The base format and the per-tool ones from tool_description_format."""
    if isinstance(value, str):
        if value not in ("compact", "json"):
            raise ValueError('tool_description_format must be "compact" or "json", or a mapping of tool names to them.')
        return value, {}
    if isinstance(value, Mapping):
        formats = dict(value)
        for name, fmt in formats.items():
            if not isinstance(name, str) or fmt not in ("compact", "json"):
                raise ValueError(
                    f'tool_description_format maps tool names to "compact" or "json", not {name!r}: {fmt!r}.'
                )
        return "compact", formats
    raise TypeError("tool_description_format must be a string or a mapping of tool names to formats.")


def _workspace(path: str | os.PathLike[str]) -> Path:
    """The resolved workspace root: an existing directory (anything else is a ValueError, as
    the reference raises)."""
    cfg = _native.Config()
    try:
        cfg.set_workspace(os.path.expanduser(os.fspath(path)))
    except OSError as exc:
        raise ValueError(f"workspace_root must point to an existing directory: {exc}") from None
    return Path(cfg.workspace)


def _contents(result: Result) -> list[Content]:
    """The items of _items, each with the snapcell Result as its raw_representation (in
    memory only: Agent Framework neither sends nor stores it), so a caller can read the run's
    whole record, its approval decisions included."""
    out = _items(result)
    for c in out:
        c.raw_representation = result
    return out


def _items(result: Result) -> list[Content]:
    """stdout, one data item per artifact, then stderr, the value of the last expression (when
    there is one to tell) / a no-output note on success, or an
    error item naming the status (and, separately, any output cap that was hit) followed by a
    text item with the status and its cause (Result.summary)."""
    out: list[Content] = []
    if result.stdout:
        out.append(Content.from_text(result.stdout))
    for a in result.artifacts:
        out.append(
            Content.from_data(data=a.data, media_type=a.media_type, additional_properties={"path": a.sandbox_path})
        )
    if result.output_limits_hit:
        caps = ", ".join(_OUTPUT_CAPS.get(c, c) for c in sorted(result.output_limits_hit))
        left = "; ".join(f"/output/{p}: {why}" for p, why in result.skipped_outputs)
        more = result.skipped_output_count - len(result.skipped_outputs)
        out.append(
            Content.from_error(
                message=f"Output limit reached ({caps})",
                error_code="output-limit",
                error_details=f"Not returned: {left}" + (f" and {more} more" if more > 0 else ""),
            )
        )
    if result.ok:
        if result.stderr:
            out.append(Content.from_text(result.stderr))
        # The last expression's value (or why it is not shown) goes last, in the library's
        # words; with it, there is output to show.
        if result.value_text:
            out.append(Content.from_text(result.value_text))
        if not out:
            out.append(Content.from_text("Code executed without output."))
        return out
    message = _native.status_headline(result.status) or f"Execution ended: {result.status}"
    if result.limits_hit:
        message += f" ({', '.join(sorted(result.limits_hit))})"
    out.append(
        Content.from_error(message=message, error_code=result.status, error_details=result.stderr or message)
    )
    # Chat clients send the model text items only (an error item is dropped), so the cause
    # goes last as text too, in the library's words.
    out.append(Content.from_text(result.summary))
    return out

