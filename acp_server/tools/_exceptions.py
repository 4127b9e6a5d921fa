"""Errors of the tools layer, in one module.

    ServerError
     └── ToolError              root of this layer
          └── ToolCallError     one tool call failed; its message is what the model is told, verbatim

A :class:`ToolCallError` never ends a prompt: the call ends ``failed`` and the loop goes on. Its message says what
was wrong and what to do instead (``old_text occurs 3 times in src/app.py; give more context or set
replace_all``), in the model's terms: paths relative to the project directory, parameter names as in the schema.
"""

from __future__ import annotations

from typing import ClassVar

from ..errors import ServerError

__all__ = ["ToolCallError", "ToolError"]


class ToolError(ServerError):
    """Root of the tools layer's errors."""

    error_kind: ClassVar[str] = "tool_error"


class ToolCallError(ToolError):
    """A tool call that cannot be prepared or run; ``str(exc)`` is the message given to the model. ``what``: what
    went wrong in a few plain words for a call's title (``no such path``), and ``subject`` what it went wrong with
    (a path as given); None when the message alone says it."""

    def __init__(self, message: str, *, what: str | None = None, subject: str | None = None) -> None:
        super().__init__(message)
        self.what = what
        self.subject = subject

