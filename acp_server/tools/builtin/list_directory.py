"""``list_directory``: one directory's entries, sorted, without what ``.gitignore`` hides (in a worker thread: a huge
directory does not stall the event loop)."""

from __future__ import annotations

import functools
import os
import threading

from pydantic import Field

from ...domain import TextContent, ToolLocation
from .._gitignore import Ignores
from .._output import join_lines
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._walk import WalkStopped, sorted_entries
from .._worker import in_thread
from .._workspace import Target, Workspace
from ._tool import Args, BuiltinTool

__all__ = ["MAX_LIST_ENTRIES", "ListDirectory", "ListDirectoryArgs"]

MAX_LIST_ENTRIES = 1000


class ListDirectoryArgs(Args):
    path: str = Field(description="'.' is the project.")


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


class ListDirectory(BuiltinTool[ListDirectoryArgs]):
    """A listing changes nothing; the title names the directory."""

    name = "list_directory"
    kind = "read"
    title = "List"
    args = ListDirectoryArgs
    description = "List a directory, sorted, directories ending in '/'; skips .gitignored and .git."

    async def prepare(self, args: ListDirectoryArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        target = workspace.existing_directory(args.path)

        async def run(sink: ContentSink) -> ToolResult:
            return await in_thread(functools.partial(_list, workspace, target))

        return self.call(title=f"List {target.rel}", locations=(ToolLocation(target.path),), run=run)
