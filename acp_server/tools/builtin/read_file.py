"""``read_file``: a text file of the project, lines numbered like ``cat -n``, read in parts with offset and limit.

Through the editor when it reads files (its unsaved buffer), else from disk (see ``.._files``).
"""

from __future__ import annotations

from itertools import islice

from pydantic import Field

from ...domain import TextContent, ToolLocation
from .._files import MAX_CLIENT_READ_LINES, client_read, reads_through, split_lines
from .._output import number_lines
from .._textfile import read_text
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._workspace import Target, Workspace
from ._tool import Args, BuiltinTool

__all__ = ["ReadFile", "ReadFileArgs"]


class ReadFileArgs(Args):
    path: str = Field()
    offset: int | None = Field(default=None, ge=1, description="1-based first line.")
    limit: int | None = Field(default=None, ge=1, description="Most lines to read.")


def _read_title(target: Target, offset: int | None, limit: int | None) -> str:
    """``Read <path>``, with the lines asked for as the call will read them: a limit past what one call can show
    (:data:`MAX_CLIENT_READ_LINES`) reads as far as the output cap, so it is shown as no limit (never ``lines
    1–1000000000000000``)."""
    if limit is not None and limit < MAX_CLIENT_READ_LINES:
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


class ReadFile(BuiltinTool[ReadFileArgs]):
    """Reads never change anything; the title shows the lines asked for."""

    name = "read_file"
    kind = "read"
    title = "Read"
    args = ReadFileArgs
    description = (
        "Read a text file; lines are prefixed with their number and a tab. Capped at 64 KiB: read long files in parts."
    )

    async def prepare(self, args: ReadFileArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        target = workspace.existing_file(args.path)
        offset, limit = args.offset, args.limit
        reader = reads_through(client)
        start = offset or 1

        async def run(sink: ContentSink) -> ToolResult:
            if reader is not None:
                asked = min(limit or MAX_CLIENT_READ_LINES, MAX_CLIENT_READ_LINES)
                window = split_lines(await client_read(reader, target, offset, asked))
                if len(window) > asked:  # a client that ignored the limit
                    del window[asked:]
                total: int | None = None  # unknown unless the client gave every line up to the end
                if not window:
                    total = 0 if start == 1 else None
                elif len(window) < asked:
                    total = start - 1 + len(window)
                return _read_result(target, window, start, total)
            lines = split_lines(read_text(target))
            end = len(lines) if limit is None else min(len(lines), start + limit - 1)
            return _read_result(target, list(islice(lines, start - 1, end)), start, len(lines))

        title = _read_title(target, offset, limit)
        return self.call(title=title, locations=(ToolLocation(target.path, offset),), run=run)
