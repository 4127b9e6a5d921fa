"""What the file tools (``builtin/read_file``, ``list_directory``, ``write_file``, ``edit_file``) share: reading a
file's current text and writing it, through the client when it can, else on disk.

Reads go through the client when it can read files (the model then sees the editor's unsaved buffer), else the
disk; a read through the client is refused as the disk one would be (the file on disk is checked first: at most
10 MiB, text) and never asks for more than :data:`MAX_CLIENT_READ_LINES` lines (more could not be shown). Writes
go through the client when it can write files, else an atomic write to disk. An edit's or a write's diff is
computed when it is prepared, from the current text, and refused when the file would end over 10 MiB (before the
diff is built); at run time the text must still be the same (else the call fails: the user approved another
change).
"""

from __future__ import annotations

import os

import anyio

from ..errors import RemoteError
from ._checkpoint_hook import current_recorder
from ._dirfd import open_parent
from ._exceptions import ToolCallError
from ._output import OUTPUT_LIMIT_BYTES, utf8_len
from ._textfile import MAX_TEXT_FILE_BYTES, check_text_head, read_text, too_large, write_text_atomic
from ._types import EditorReader, ToolClient
from ._workspace import Target

__all__ = [
    "MAX_CLIENT_READ_LINES",
    "changed_file",
    "client_read",
    "current_text",
    "reads_through",
    "split_lines",
    "write_text",
]

MAX_CLIENT_READ_LINES = OUTPUT_LIMIT_BYTES // 8 + 1
"""The most lines read_file asks the editor for: more could not be shown (a numbered line is at least 8 bytes)."""


def split_lines(text: str) -> list[str]:
    """``text`` split into lines (on ``\\n`` only, like editors and ``sed``); a final newline ends the last."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def reads_through(client: ToolClient | None) -> EditorReader | None:
    return None if client is None else client.reader


async def client_read(reader: EditorReader, target: Target, line: int | None = None, limit: int | None = None) -> str:
    """The editor's text of ``target``, refused as the disk read would be (the file on disk is checked first:
    not over 10 MiB, not binary), and refused too when the editor's buffer is over 10 MiB."""
    check_text_head(target)
    try:
        text = await reader.read_text_file(target.path, line=line, limit=limit)
    except RemoteError as exc:
        raise ToolCallError(f"the editor could not read {target.rel}: {exc}") from exc
    if len(text) > MAX_TEXT_FILE_BYTES // 4 and utf8_len(text) > MAX_TEXT_FILE_BYTES:
        raise too_large(target, utf8_len(text))
    return text


def _exists(target: Target) -> bool:
    return os.path.lexists(target.real)


async def current_text(target: Target, client: ToolClient | None) -> str | None:
    """The text of ``target`` now (the editor's when it reads files), None when there is no such file."""
    if not _exists(target):
        return None
    reader = reads_through(client)
    if reader is not None:
        return await client_read(reader, target)
    return read_text(target)


async def write_text(target: Target, content: str, client: ToolClient | None) -> None:
    """Write ``content`` to ``target`` (the editor's, else atomically on disk), its prior state checkpointed first
    (:mod:`._checkpoint_hook`: what ``/rewind`` restores)."""
    recorder = current_recorder()
    if recorder is not None:
        await recorder.before_change(target)
    try:
        await _write(target, content, client)
    finally:
        if recorder is not None:
            with anyio.CancelScope(shield=True):  # a write cut by a cancel is recorded too
                await recorder.after_change(target)


async def _write(target: Target, content: str, client: ToolClient | None) -> None:
    writer = None if client is None else client.writer
    if writer is not None:
        os.close(open_parent(target, create=True, verb="write")[0])  # its directories, confined; the editor writes
        try:
            await writer.write_text_file(target.path, content)
        except RemoteError as exc:
            raise ToolCallError(f"the editor could not write {target.rel}: {exc}") from exc
    else:
        write_text_atomic(target, content)


def changed_file(target: Target) -> ToolCallError:
    return ToolCallError(
        f"{target.rel} changed after this change was proposed, so it was not applied; read the file again and "
        "redo the change"
    )
