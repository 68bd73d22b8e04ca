"""CodeActProvider: a ContextProvider that gives each agent run the CodeAct instructions and a
run-scoped copy of its execute_code tool, leaving the agent's own tools alone."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from agent_framework import ContextProvider, FunctionTool

from ._approval import agent_tool_names, respond
from ._registry import SandboxRegistry
from ._tool import (
    _REFERENCE_BACKEND,
    _REFERENCE_MODULE,
    DEFAULT_MAX_OUTPUT_FILE_BYTES,
    DEFAULT_MAX_OUTPUT_FILES,
    DEFAULT_MAX_OUTPUT_TOTAL_BYTES,
    ApprovalKind,
    ExecuteCodeTool,
    ToolDescriptionFormat,
)
from ._types import AllowedDomain, AllowedDomainInput, FileMount, FileMountInput


class CodeActProvider(ContextProvider):
    """Adds one instructions entry and one ``execute_code`` tool to every run's context.

    Takes the keyword arguments of :class:`ExecuteCodeTool`, which they mean the same there.
    The run tool it hands out is a snapshot: changing the provider later does not change a run
    already under way. With ``approval="per_call"``, a run whose input answers approval requests
    of execute_code's paused runs also gets what resumes them (docs/approval.md)."""

    DEFAULT_SOURCE_ID = "snapcell_codeact"

    def __init__(
        self,
        source_id: str = DEFAULT_SOURCE_ID,
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
    ) -> None:
        super().__init__(source_id)
        self._execute_code_tool = ExecuteCodeTool(
            tools=tools,
            tool_description_format=tool_description_format,
            approval_mode=approval_mode,
            workspace_root=workspace_root,
            file_mounts=file_mounts,
            allowed_domains=allowed_domains,
            max_output_files=max_output_files,
            max_output_file_bytes=max_output_file_bytes,
            max_output_total_bytes=max_output_total_bytes,
            backend=backend,
            module=module,
            module_path=module_path,
            execution_timeout_seconds=execution_timeout_seconds,
            include_detailed_errors=include_detailed_errors,
            timeout=timeout,
            memory_limit=memory_limit,
            python_paths=python_paths,
            env=env,
            stateful=stateful,
            reject_links=reject_links,
            python=python,
            venv=venv,
            preload=preload,
            warmup=warmup,
            approval=approval,
            approval_timeout=approval_timeout,
            reuse=reuse,
            _registry=_registry,
        )

    def add_tools(self, tools: Any) -> None:
        self._execute_code_tool.add_tools(tools)

    def get_tools(self) -> list[FunctionTool]:
        return self._execute_code_tool.get_tools()

    def remove_tool(self, name: str) -> None:
        self._execute_code_tool.remove_tool(name)

    def clear_tools(self) -> None:
        self._execute_code_tool.clear_tools()

    def add_file_mounts(self, file_mounts: FileMountInput | Sequence[FileMountInput]) -> None:
        self._execute_code_tool.add_file_mounts(file_mounts)

    def get_file_mounts(self) -> list[FileMount]:
        return self._execute_code_tool.get_file_mounts()

    def remove_file_mount(self, mount_path: str) -> None:
        self._execute_code_tool.remove_file_mount(mount_path)

    def clear_file_mounts(self) -> None:
        self._execute_code_tool.clear_file_mounts()

    def add_allowed_domains(self, domains: AllowedDomainInput | Sequence[AllowedDomainInput]) -> None:
        self._execute_code_tool.add_allowed_domains(domains)

    def get_allowed_domains(self) -> list[AllowedDomain]:
        return self._execute_code_tool.get_allowed_domains()

    def remove_allowed_domain(self, domain: str) -> None:
        self._execute_code_tool.remove_allowed_domain(domain)

    def clear_allowed_domains(self) -> None:
        self._execute_code_tool.clear_allowed_domains()

    async def before_run(self, *, agent: Any, session: Any, context: Any, state: dict[str, Any]) -> None:
        run_tool = self._execute_code_tool.create_run_tool()
        state[self.source_id] = run_tool.build_serializable_state()
        context.extend_instructions(self.source_id, run_tool.build_instructions(tools_visible_to_model=False))
        stand_ins = []
        if run_tool._settings.approval == "per_call":
            stand_ins = await respond(
                self._execute_code_tool._approvals, context.input_messages, agent_tool_names(agent, context)
            )
        context.extend_tools(self.source_id, [run_tool, *stand_ins])

    def close(self) -> None:
        """Ends every sandbox process this provider started and removes its temporary files."""
        self._execute_code_tool.close()

    def __enter__(self) -> CodeActProvider:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> CodeActProvider:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()
