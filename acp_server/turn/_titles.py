"""A tool call's title before its arguments are read, and when it fails before it runs (the tool's own words)."""

from __future__ import annotations

from collections.abc import Iterable

from ..tools import TOOL_NAMES

__all__ = ["failed_title", "tool_title"]


def tool_title(name: str) -> str:
    """A call's title before its arguments are known: the tool's verb (``Read``, ``Write``, ``Run`` ...)."""
    if name in TOOL_NAMES:
        return name.split("_", 1)[0].capitalize()
    return f"Unknown tool {name[:60]}" if name else "Unknown tool"


def failed_title(name: str, offered: Iterable[str]) -> str:
    """The title of a call that failed before it ran: ``Read (invalid arguments)``, ``Run (not available)``."""
    if name not in TOOL_NAMES:
        return tool_title(name)
    return f"{tool_title(name)} ({'invalid arguments' if name in offered else 'not available'})"
