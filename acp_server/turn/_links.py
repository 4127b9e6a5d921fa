"""Linked files: a prompt's ``file://`` resource links, read for the model.

A link whose file is inside the session's cwd or one of its additional directories (after resolving symbolic links:
the tools' one confinement rule) is read as ``read_file`` reads from
disk (a regular UTF-8 text file, confined; :func:`~acp_server.tools.read_project_text`), at most
:data:`MAX_LINKED_FILE_BYTES` of it, and the model gets the link followed by the file's text and its path. A link
outside the cwd, to a directory, to a binary file or to nothing gets the link and a note saying why it was not read.
Links that are not ``file://`` are passed on as they came. The prompt as the user sent it (what history replays)
is not changed: only what the model is given.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from urllib.parse import unquote, urlsplit

import anyio.to_thread

from ..domain import Prompt, PromptPart, ResourceLinkPart, TextPart
from ..tools import OUTPUT_LIMIT_BYTES, ToolError, read_project_text

__all__ = ["MAX_LINKED_BYTES", "MAX_LINKED_FILE_BYTES", "file_path", "with_linked_files"]

logger = logging.getLogger("acp_server.turn")

MAX_LINKED_FILE_BYTES = OUTPUT_LIMIT_BYTES
"""The most of one linked file the model is given (what one read_file call gives at most)."""

MAX_LINKED_BYTES = 4 * OUTPUT_LIMIT_BYTES
"""The most of all the linked files of one prompt together; links past it are given as links, with a note."""


def file_path(uri: str) -> str | None:
    """The local absolute path a ``file://`` URI names (percent-decoded, its query and fragment dropped); None for
    any other URI, or a file URI naming another host."""
    if uri[:5].lower() != "file:":
        return None
    try:
        parts = urlsplit(uri)
        path = unquote(parts.path, errors="strict")
    except (ValueError, UnicodeDecodeError):
        return None
    if parts.netloc not in ("", "localhost"):
        return None
    return path if path.startswith("/") else None


def _link_text(part: ResourceLinkPart) -> str:
    return f"[{part.name}]({part.uri})" + (f" — {part.description}" if part.description else "")


def _read(cwd: str, path: str, room: int, additional: Sequence[str]) -> tuple[str, int]:
    """The model's text for the linked file ``path``, and the bytes of the file it holds. Blocking."""
    try:
        read = read_project_text(cwd, path, min(room, MAX_LINKED_FILE_BYTES), additional)
    except ToolError as exc:
        return f"(not read: {exc})", 0
    body = read.text.rstrip("\n")
    if read.truncated:
        shown = read.text.count("\n") + 1
        body += (
            f"\n[{read.target.rel} cut here: a linked file is given up to {MAX_LINKED_FILE_BYTES // 1024} KiB; "
            f"read_file with offset {shown} shows the rest]"
        )
    used = len(read.text.encode("utf-8", "surrogatepass"))
    return f'<file path="{read.target.rel}">\n{body}\n</file>', used


def _has_file_link(prompt: Prompt) -> bool:
    return any(isinstance(part, ResourceLinkPart) and file_path(part.uri) for part in prompt.parts)


def _linked_parts(parts: tuple[PromptPart, ...], cwd: str, additional: Sequence[str]) -> tuple[PromptPart, ...]:
    """``parts`` with each ``file://`` link followed by its file (or a note). Blocking."""
    room = MAX_LINKED_BYTES
    result: list[PromptPart] = []
    for part in parts:
        path = file_path(part.uri) if isinstance(part, ResourceLinkPart) else None
        if not isinstance(part, ResourceLinkPart) or path is None:
            result.append(part)
            continue
        if room <= 0:
            note = f"(not read: the linked files of a prompt are given up to {MAX_LINKED_BYTES // 1024} KiB in all)"
        elif not os.path.isabs(cwd):
            note = "(not read: the session has no working directory)"
        else:
            note, used = _read(cwd, path, room, additional)
            room -= used
        result.append(TextPart(f"{_link_text(part)}\n{note}"))
    return tuple(result)


async def with_linked_files(prompt: Prompt, cwd: str, additional: Sequence[str] = ()) -> Prompt:
    """What the model is given of ``prompt``: the same prompt, each ``file://`` link followed by its file's text or
    a note (the files are read in a worker thread). The prompt itself when it has no such link. A link is read when
    its file lies in ``cwd`` or in one of the session's ``additional`` directories (the tools' confinement)."""
    if not _has_file_link(prompt):
        return prompt
    parts = await anyio.to_thread.run_sync(_linked_parts, prompt.parts, cwd, tuple(additional), abandon_on_cancel=True)
    return Prompt(parts)
