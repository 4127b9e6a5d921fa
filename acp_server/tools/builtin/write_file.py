"""``write_file``: a file created or replaced whole; its diff is shown before the user is asked, and the file must
be as it was then when the call runs."""

from __future__ import annotations

from pydantic import Field

from ...domain import DiffContent, ToolLocation
from .._files import changed_file, current_text, split_lines, write_text
from .._output import utf8_len
from .._textfile import check_written_size
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._workspace import Workspace
from ._tool import Args, BuiltinTool

__all__ = ["WriteFile", "WriteFileArgs"]


class WriteFileArgs(Args):
    path: str = Field(description="Missing directories are created.")
    content: str = Field()


def _line_count(text: str) -> int:
    return len(split_lines(text)) if text else 0


class WriteFile(BuiltinTool[WriteFileArgs]):
    """A write changes the project: the mode decides whether the user is asked."""

    name = "write_file"
    kind = "edit"
    title = "Write"
    args = WriteFileArgs
    description = "Create or overwrite a file; to change part of one, use edit_file."

    async def prepare(self, args: WriteFileArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        target, exists = workspace.writable_file(args.path)
        content = args.content
        check_written_size(target, utf8_len(content), "content")
        old = await current_text(target, client) if exists else None
        diff = (DiffContent(target.path, old, content),)

        async def run(sink: ContentSink) -> ToolResult:
            if await current_text(target, client) != old:
                raise changed_file(target)
            await write_text(target, content, client)
            verb = "Created" if old is None else "Wrote"
            lines = _line_count(content)
            output = f"{verb} {target.rel} ({lines} line{'' if lines == 1 else 's'})"
            raw = {"path": target.path, "created": old is None, "lines": lines}
            return ToolResult(output, diff, raw)

        return self.call(title=f"Write {target.rel}", locations=(ToolLocation(target.path),), preview=diff, run=run)
