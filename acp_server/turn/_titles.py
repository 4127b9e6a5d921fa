"""A tool call's title before its arguments are read, and when it fails before it runs (the tool's verb, then what
went wrong in plain words: ``List src/x — no such path``)."""

from __future__ import annotations

from ..errors import ServerError
from ..tools import ToolCallError
from ..tools.registry import ToolSet

__all__ = ["failed_title", "tool_title"]

_MAX_SUBJECT = 60
_MAX_WHAT = 60


def tool_title(name: str, tools: ToolSet) -> str:
    """A call's title before its arguments are known: its tool's (a built-in's verb, ``Read``, ``Write``, ``Run``
    ...; an MCP tool's ``<server>: <tool>``)."""
    tool = tools.get(name)
    if tool is not None:
        return tool.title or tool.name
    return f"Unknown tool {name[:60]}" if name else "Unknown tool"


def _clip(text: str, size: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 1] + "…"


def failed_title(name: str, tools: ToolSet, error: BaseException) -> str:
    """The title of a call that failed before it ran: its verb, what it was about (a path) and what went wrong
    (``Read src/x — no such path``, ``Run — not offered in this mode``); an error that names no ``what`` is told
    by its message's first clause, a bug as ``internal error``."""
    if tools.get(name) is None:
        return tool_title(name, tools)
    verb = tool_title(name, tools)
    if isinstance(error, ToolCallError) and error.what:
        subject = f" {_clip(error.subject, _MAX_SUBJECT)}" if error.subject else ""
        return f"{verb}{subject} — {_clip(error.what, _MAX_WHAT)}"
    if isinstance(error, ServerError):
        return f"{verb} — {_clip(str(error).split(';', 1)[0], _MAX_WHAT)}"
    return f"{verb} — internal error"
