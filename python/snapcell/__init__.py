"""snapcell: run model-written Python in isolated cells forked from a warm template.

    import snapcell

    def compute(a: int, b: int) -> int:
        return a + b

    with snapcell.Sandbox(tools=[compute], timeout=5) as sb:
        result = sb.run('print(call_tool("compute", a=20, b=22))')
        print(result.status, result.stdout)   # ok 42

``snapcell.agent_framework`` adapts this to Microsoft Agent Framework (a drop-in for its
Hyperlight CodeAct integration); ``snapcell.pydantic_ai``, ``snapcell.langgraph``,
``snapcell.fastmcp``, ``snapcell.smolagents`` and ``snapcell.google_adk`` fill other
frameworks' code-execution seams (docs/python.md)."""

from ._native import VALUE_MAX_BYTES, SetupError, SnapcellError
from ._native import probe as _probe
from ._native import version as _version
from ._sandbox import (AllowedTarget, Artifact, Decision, NetworkEvent, PendingCall, Result,
                       Sandbox, Session, Snapshot, ToolCall)
from ._tools import Tool, ToolCancellation, tool_cancellation

__version__ = _version()

__all__ = [
    "AllowedTarget",
    "Artifact",
    "Decision",
    "NetworkEvent",
    "PendingCall",
    "Result",
    "Sandbox",
    "Session",
    "SetupError",
    "SnapcellError",
    "Snapshot",
    "Tool",
    "ToolCall",
    "ToolCancellation",
    "VALUE_MAX_BYTES",
    "probe",
    "tool_cancellation",
]


def probe() -> dict:
    """What isolation this host gives (what `snapcell doctor` prints): "level", "mechanisms",
    and "reuse", what the kernel gives reset in place (snapcell_probe_reuse)."""
    return _probe()
