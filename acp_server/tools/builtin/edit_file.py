"""``edit_file``: text replaced in an existing file (once, or everywhere with replace_all); its diff is shown before
the user is asked, and the file must be as it was then when the call runs."""

from __future__ import annotations

import re

from pydantic import Field

from ...domain import DiffContent, ToolLocation
from .._exceptions import ToolCallError
from .._files import changed_file, current_text, write_text
from .._output import plural, utf8_len
from .._textfile import check_written_size
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._workspace import Target, Workspace
from ._tool import Args, BuiltinTool

__all__ = ["EditFile", "EditFileArgs"]

_LINE_NUMBERED = re.compile(r"^ *\d+\t")


class EditFileArgs(Args):
    path: str = Field()
    old_text: str = Field(
        description=("Exact text, whitespace included, without read_file's line numbers; enough lines to be unique.")
    )
    new_text: str = Field()
    replace_all: bool | None = Field(default=False)


def _not_found(target: Target, old_text: str) -> ToolCallError:
    lines = [line for line in old_text.split("\n") if line.strip()]
    if lines and all(_LINE_NUMBERED.match(line) for line in lines):
        hint = "old_text seems to include the line numbers read_file shows: leave them (and the tab) out"
    else:
        hint = "read the file again and copy the text exactly, whitespace and indentation included"
    return ToolCallError(
        f"old_text was not found in {target.rel}; {hint}", what="old_text not found", subject=target.rel
    )


class EditFile(BuiltinTool[EditFileArgs]):
    """An edit changes the project: the mode decides whether the user is asked."""

    name = "edit_file"
    kind = "edit"
    title = "Edit"
    args = EditFileArgs
    description = "Replace text in a file: old_text must occur exactly once (or set replace_all). Read the file first."

    async def prepare(self, args: EditFileArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        target = workspace.existing_file(args.path)
        old_text, new_text = args.old_text, args.new_text
        if not old_text:
            raise ToolCallError(
                "old_text is empty; give the exact text to replace (write_file creates or rewrites a file)"
            )
        if old_text == new_text:
            raise ToolCallError("old_text and new_text are the same: the edit would change nothing")
        text = await current_text(target, client)
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
                f"old_text occurs {count} times in {target.rel}; give more context to make it unique, or set "
                "replace_all",
                what=f"old_text occurs {count} times",
                subject=target.rel,
            )
        replaced = count if args.replace_all else 1
        size = utf8_len(text) + replaced * (utf8_len(new_text) - utf8_len(old_text))
        check_written_size(target, size, f"replacing {plural(replaced, 'occurrence')} of old_text by new_text")
        updated = text.replace(old_text, new_text) if args.replace_all else text.replace(old_text, new_text, 1)
        line = text.count("\n", 0, text.index(old_text)) + 1
        diff = (DiffContent(target.path, text, updated),)

        async def run(sink: ContentSink) -> ToolResult:
            if await current_text(target, client) != text:
                raise changed_file(target)
            await write_text(target, updated, client)
            output = f"Edited {target.rel}: replaced {count} occurrence{'' if count == 1 else 's'} (from line {line})"
            return ToolResult(output, diff, {"path": target.path, "replacements": count, "line": line})

        return self.call(
            title=f"Edit {target.rel}", locations=(ToolLocation(target.path, line),), preview=diff, run=run
        )
