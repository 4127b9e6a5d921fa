"""Tools the model calls in the user's project: confined to the session's cwd, run locally or through the client."""

from ._types import (
    ContentSink,
    PermissionChoice,
    PreparedCall,
    TerminalExit,
    TerminalOutput,
    ToolClient,
    ToolResult,
)

__all__ = [
    "ContentSink",
    "PermissionChoice",
    "PreparedCall",
    "TerminalExit",
    "TerminalOutput",
    "ToolClient",
    "ToolResult",
]
