"""Errors of the MCP client of its own (a tool call's failure is the tools layer's :class:`ToolCallError`)."""

from __future__ import annotations

from typing import ClassVar

from ..tools import ToolError

__all__ = ["McpPromptError"]


class McpPromptError(ToolError):
    """An MCP prompt command that cannot run (bad arguments, the server's refusal, no answer, too large); ``str(exc)``
    is the sentence the user is told (the model is not called)."""

    error_kind: ClassVar[str] = "mcp_prompt_error"
