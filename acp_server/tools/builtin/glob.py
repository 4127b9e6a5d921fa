"""``glob``: the project's paths matching a glob (matched without backtracking; the walk in a worker thread)."""

from __future__ import annotations

from pydantic import Field

from .._search import clip_title, glob_plan, glob_work
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._worker import in_thread
from .._workspace import Workspace
from ._tool import Args, BuiltinTool

__all__ = ["Glob", "GlobArgs"]


class GlobArgs(Args):
    pattern: str = Field(
        min_length=1,
        description=("E.g. 'src/**/*.py'; '**/' spans directories, '{py,pyi}' alternatives."),
    )


class Glob(BuiltinTool[GlobArgs]):
    """A search changes nothing; the title shows the pattern (clipped)."""

    name = "glob"
    kind = "search"
    title = "Glob"
    args = GlobArgs
    description = "Paths matching a glob (sorted, relative to the project); skips .gitignored and .git."

    async def prepare(self, args: GlobArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        base, label, globs, depth, spelled = glob_plan(workspace, args.pattern)
        work = glob_work(workspace, args.pattern, base, label, globs, depth, spelled)

        async def run(sink: ContentSink) -> ToolResult:
            return await in_thread(work)

        return self.call(title=f"Glob {clip_title(args.pattern)}", run=run)
