"""A tool call's title before its arguments are read, and when it fails before it runs (the tool's own words)."""

from __future__ import annotations

from collections.abc import Iterable

from ..tools.registry import ToolSet

__all__ = ["failed_title", "tool_title"]


def tool_title(name: str, tools: ToolSet) -> str:
    """A call's title before its arguments are known: its tool's (a built-in's verb, ``Read``, ``Write``, ``Run``
    ...; an MCP tool's ``<server>: <tool>``)."""
    tool = tools.get(name)
    if tool is not None:
        return tool.title or tool.name
    return f"Unknown tool {name[:60]}" if name else "Unknown tool"


def failed_title(name: str, offered: Iterable[str], tools: ToolSet) -> str:
    """The title of a call that failed before it ran: ``Read (invalid arguments)``, ``Run (not available)``."""
    if tools.get(name) is None:
        return tool_title(name, tools)
    return f"{tool_title(name, tools)} ({'invalid arguments' if name in offered else 'not available'})"
