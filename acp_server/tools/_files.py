"""The file tools: read_file, list_directory, write_file, edit_file.

Reads go through the client when it can read files (the model then sees the editor's unsaved buffer), else the
disk; a read through the client is refused as the disk one would be (the file on disk is checked first: at most
10 MiB, text) and never asks for more than :data:`MAX_CLIENT_READ_LINES` lines (more could not be shown). Writes
go through the client when it can write files, else an atomic write to disk. read_file shows lines numbered like
``cat -n``. list_directory runs in a worker thread (a huge directory does not stall the event loop). An edit's or
a write's diff is computed when it is prepared, from the current text, and refused when the file would end over
10 MiB (before the diff is built); at run time the text must still be the same (else the call fails: the user
approved another change).
"""

from __future__ import annotations

import functools
import os
import re
import threading
from itertools import islice

from ..domain import DiffContent, TextContent, ToolLocation
from ..errors import RemoteError
from ._call import prepared
from ._dirfd import open_parent
from ._exceptions import ToolCallError
from ._gitignore import Ignores
from ._output import OUTPUT_LIMIT_BYTES, join_lines, number_lines, plural, utf8_len
from ._specs import EditFileArgs, ListDirectoryArgs, ReadFileArgs, WriteFileArgs
from ._textfile import (
    MAX_TEXT_FILE_BYTES,
    check_text_head,
    check_written_size,
    read_text,
    too_large,
    write_text_atomic,
)
from ._types import ContentSink, EditorReader, PreparedCall, ToolClient, ToolResult
from ._walk import WalkStopped, sorted_entries
from ._worker import in_thread
from ._workspace import Target, Workspace

__all__ = [
    "MAX_CLIENT_READ_LINES",
    "MAX_LIST_ENTRIES",
    "prepare_edit_file",
    "prepare_list_directory",
    "prepare_read_file",
    "prepare_write_file",
]

MAX_LIST_ENTRIES = 1000
MAX_CLIENT_READ_LINES = OUTPUT_LIMIT_BYTES // 8 + 1
"""The most lines read_file asks the editor for: more could not be shown (a numbered line is at least 8 bytes)."""

_LINE_NUMBERED = re.compile(r"^ *\d+\t")


def _lines(text: str) -> list[str]:
    """``text`` split into lines (on ``\\n`` only, like editors and ``sed``); a final newline ends the last."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _reads_through(client: ToolClient | None) -> EditorReader | None:
    return None if client is None else client.reader


async def _client_read(reader: EditorReader, target: Target, line: int | None = None, limit: int | None = None) -> str:
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


async def _current_text(target: Target, client: ToolClient | None) -> str | None:
    """The text of ``target`` now (the editor's when it reads files), None when there is no such file."""
    if not _exists(target):
        return None
    reader = _reads_through(client)
    if reader is not None:
        return await _client_read(reader, target)
    return read_text(target)


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


def _changed(target: Target) -> ToolCallError:
    return ToolCallError(
        f"{target.rel} changed after this change was proposed, so it was not applied; read the file again and "
        "redo the change"
    )


# --- read_file ----------------------------------------------------------------------------------------------


def _read_title(target: Target, offset: int | None, limit: int | None) -> str:
    if limit is not None:
        first = offset or 1
        return f"Read {target.rel} (lines {first}–{first + limit - 1})"
    if offset is not None:
        return f"Read {target.rel} (from line {offset})"
    return f"Read {target.rel}"


def _read_result(target: Target, window: list[str], start: int, total: int | None) -> ToolResult:
    """The lines ``window`` (line ``start`` first) of a file of ``total`` lines (None: unknown, it may go on)."""
    if not window:
        if start == 1 and total in (0, None):
            message = "(the file is empty)"
        else:
            has = "" if total is None else f", which has {total} lines"
            message = f"(offset {start} is past the end of {target.rel}{has})"
        return ToolResult(message, (TextContent(message),), {"startLine": start, "lines": 0, "totalLines": total})
    body, shown, cut = number_lines(window, start)
    last = start + shown - 1
    of_total = "" if total is None else f" of {total}"
    if cut:
        note = f"[line {last} is longer than the 64 KiB output cap and was cut"
        note += f"; continue with offset={last + 1}]" if total is None or last < total else "]"
    elif shown < len(window):
        note = f"[output capped at 64 KiB: lines {start}–{last}{of_total} shown; continue with offset={last + 1}]"
    elif total is None:
        note = f"[lines {start}–{last}; the file may go on: continue with offset={last + 1}]"
    elif start > 1 or last < total:
        more = f"; continue with offset={last + 1}" if last < total else ""
        note = f"[lines {start}–{last} of {total}{more}]"
    else:
        note = ""
    summary = f"Lines {start}–{last}{of_total}" if note else f"{shown} lines"
    raw = {"startLine": start, "lines": shown, "totalLines": total, "truncated": cut or shown < len(window)}
    return ToolResult(body + note, (TextContent(summary),), raw)


async def prepare_read_file(args: ReadFileArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
    target = workspace.existing_file(args.path)
    offset, limit = args.offset, args.limit
    reader = _reads_through(client)
    start = offset or 1

    async def run(sink: ContentSink) -> ToolResult:
        if reader is not None:
            asked = min(limit or MAX_CLIENT_READ_LINES, MAX_CLIENT_READ_LINES)
            window = _lines(await _client_read(reader, target, offset, asked))
            if len(window) > asked:  # a client that ignored the limit
                del window[asked:]
            total: int | None = None  # unknown unless the client gave every line up to the end
            if not window:
                total = 0 if start == 1 else None
            elif len(window) < asked:
                total = start - 1 + len(window)
            return _read_result(target, window, start, total)
        lines = _lines(read_text(target))
        end = len(lines) if limit is None else min(len(lines), start + limit - 1)
        return _read_result(target, list(islice(lines, start - 1, end)), start, len(lines))

    title = _read_title(target, offset, limit)
    return prepared("read_file", title, (ToolLocation(target.path, offset),), (), run)


# --- list_directory -----------------------------------------------------------------------------------------


def _list(workspace: Workspace, target: Target, stop: threading.Event) -> ToolResult:
    """The listing of ``target`` (run in a worker thread: it ends early, with no result, once ``stop`` is set)."""
    chain = Ignores(target.root).chain_for(target.real)
    names: list[str] = []
    hidden = 0
    for entry in sorted_entries(target.real):
        if stop.is_set():
            raise WalkStopped
        if entry.name == ".git":
            continue
        try:
            is_link = entry.is_symlink()
            is_dir = not is_link and entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if Ignores.ignored(chain, entry.path, is_dir):
            hidden += 1
            continue
        if is_link:
            try:
                names.append(f"{entry.name} -> {os.readlink(entry.path)}")
            except OSError:
                names.append(f"{entry.name} -> ?")
        else:
            names.append(entry.name + "/" if is_dir else entry.name)
    text, shown = join_lines(names[:MAX_LIST_ENTRIES])
    notes: list[str] = []
    if shown < len(names):
        notes.append(f"[{shown} of {len(names)} entries shown; use glob to find specific ones]")
    if hidden:
        notes.append(f"[{hidden} entr{'y' if hidden == 1 else 'ies'} hidden by .gitignore]")
    if not names:
        text = f"({target.rel} is empty)\n" if not hidden else ""
    output = text + "\n".join(notes)
    summary = f"{len(names)} entr{'y' if len(names) == 1 else 'ies'}"
    return ToolResult(output.rstrip("\n"), (TextContent(summary),), {"entries": len(names), "hidden": hidden})


async def prepare_list_directory(
    args: ListDirectoryArgs, workspace: Workspace, client: ToolClient | None
) -> PreparedCall:
    target = workspace.existing_directory(args.path)

    async def run(sink: ContentSink) -> ToolResult:
        return await in_thread(functools.partial(_list, workspace, target))

    return prepared("list_directory", f"List {target.rel}", (ToolLocation(target.path),), (), run)


# --- write_file ---------------------------------------------------------------------------------------------


def _line_count(text: str) -> int:
    return len(_lines(text)) if text else 0


async def prepare_write_file(args: WriteFileArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
    target, exists = workspace.writable_file(args.path)
    content = args.content
    check_written_size(target, utf8_len(content), "content")
    old = await _current_text(target, client) if exists else None
    diff = (DiffContent(target.path, old, content),)

    async def run(sink: ContentSink) -> ToolResult:
        if await _current_text(target, client) != old:
            raise _changed(target)
        await _write(target, content, client)
        verb = "Created" if old is None else "Wrote"
        lines = _line_count(content)
        output = f"{verb} {target.rel} ({lines} line{'' if lines == 1 else 's'})"
        raw = {"path": target.path, "created": old is None, "lines": lines}
        return ToolResult(output, diff, raw)

    return prepared("write_file", f"Write {target.rel}", (ToolLocation(target.path),), diff, run)


# --- edit_file ----------------------------------------------------------------------------------------------


def _not_found(target: Target, old_text: str) -> ToolCallError:
    lines = [line for line in old_text.split("\n") if line.strip()]
    if lines and all(_LINE_NUMBERED.match(line) for line in lines):
        hint = "old_text seems to include the line numbers read_file shows: leave them (and the tab) out"
    else:
        hint = "read the file again and copy the text exactly, whitespace and indentation included"
    return ToolCallError(f"old_text was not found in {target.rel}; {hint}")


async def prepare_edit_file(args: EditFileArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
    target = workspace.existing_file(args.path)
    old_text, new_text = args.old_text, args.new_text
    if not old_text:
        raise ToolCallError("old_text is empty; give the exact text to replace (write_file creates or rewrites a file)")
    if old_text == new_text:
        raise ToolCallError("old_text and new_text are the same: the edit would change nothing")
    text = await _current_text(target, client)
    assert text is not None  # existing_file checked it exists
    count = text.count(old_text)
    if not count and "\r\n" in text and "\r" not in old_text:  # the model dropped the file's CRLF line ends
        crlf = old_text.replace("\n", "\r\n")
        count = text.count(crlf)
        if count:
            old_text, new_text = crlf, new_text.replace("\r\n", "\n").replace("\n", "\r\n")
    if not count:
        raise _not_found(target, old_text)
    if count > 1 and not args.replace_all:
        raise ToolCallError(
            f"old_text occurs {count} times in {target.rel}; give more context to make it unique, or set replace_all"
        )
    replaced = count if args.replace_all else 1
    size = utf8_len(text) + replaced * (utf8_len(new_text) - utf8_len(old_text))
    check_written_size(target, size, f"replacing {plural(replaced, 'occurrence')} of old_text by new_text")
    updated = text.replace(old_text, new_text) if args.replace_all else text.replace(old_text, new_text, 1)
    line = text.count("\n", 0, text.index(old_text)) + 1
    diff = (DiffContent(target.path, text, updated),)

    async def run(sink: ContentSink) -> ToolResult:
        if await _current_text(target, client) != text:
            raise _changed(target)
        await _write(target, updated, client)
        output = f"Edited {target.rel}: replaced {count} occurrence{'' if count == 1 else 's'} (from line {line})"
        return ToolResult(output, diff, {"path": target.path, "replacements": count, "line": line})

    return prepared("edit_file", f"Edit {target.rel}", (ToolLocation(target.path, line),), diff, run)
