"""snapcell for Microsoft Agent Framework: a drop-in for the Hyperlight CodeAct integration.

    from snapcell.agent_framework import CodeActProvider

    agent = Agent(client, instructions="...", context_providers=[CodeActProvider(tools=[compute])])

Moving from ``agent_framework_hyperlight``: change the import and the two class names
(``HyperlightCodeActProvider`` -> ``CodeActProvider``, ``HyperlightExecuteCodeTool`` ->
``ExecuteCodeTool``). See docs/python.md."""

from .. import __version__
from ._provider import CodeActProvider
from ._tool import (
    DEFAULT_MAX_OUTPUT_FILE_BYTES,
    DEFAULT_MAX_OUTPUT_FILES,
    DEFAULT_MAX_OUTPUT_TOTAL_BYTES,
    ExecuteCodeTool,
)
from ._types import AllowedDomain, AllowedDomainInput, FileMount, FileMountInput

__all__ = [
    "DEFAULT_MAX_OUTPUT_FILES",
    "DEFAULT_MAX_OUTPUT_FILE_BYTES",
    "DEFAULT_MAX_OUTPUT_TOTAL_BYTES",
    "AllowedDomain",
    "AllowedDomainInput",
    "CodeActProvider",
    "ExecuteCodeTool",
    "FileMount",
    "FileMountInput",
    "__version__",
]
