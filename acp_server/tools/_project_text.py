"""Text a turn reads from the project by itself, not through a tool call: the project's instruction files and the
files a prompt links to.

The same rules as the tools': the path is confined to a directory after resolving every symbolic link
(:class:`~._workspace.Workspace`), the file must be a regular file of UTF-8 text, opened without following a link
swapped in after the check (:func:`~._textfile.read_text_prefix`), and at most ``limit`` bytes are read. Blocking:
callers run it in a worker thread.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._textfile import read_text_prefix
from ._workspace import Target, Workspace

__all__ = ["ProjectText", "read_project_text"]


@dataclass(frozen=True, slots=True)
class ProjectText:
    """A file's text as read: its confined path, at most ``limit`` bytes of it, and whether it holds more."""

    target: Target
    text: str
    truncated: bool


def read_project_text(directory: str, path: str, limit: int, additional: Sequence[str] = ()) -> ProjectText:
    """The text of ``path`` (relative to ``directory`` or absolute inside it or inside one of the ``additional``
    directories), at most ``limit`` bytes. Raises :class:`~._exceptions.ToolCallError`, its message fit for the
    model, when the path resolves outside them, is not a regular file, or is not text."""
    target = Workspace(directory, additional).existing_file(path)
    text, truncated = read_text_prefix(target, limit)
    return ProjectText(target, text, truncated)
