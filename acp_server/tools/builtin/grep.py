"""``grep``: the lines of the project's text files matching a regular expression (the ``regex`` module, with a
time budget; the walk in a worker thread)."""

from __future__ import annotations

from pydantic import Field

from ...domain import ToolLocation
from .._exceptions import ToolCallError
from .._globs import GlobSet, expand_braces
from .._search import clip_title, compile_pattern, grep_work
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._worker import in_thread
from .._workspace import Workspace
from ._tool import Args, BuiltinTool

__all__ = ["Grep", "GrepArgs"]


class GrepArgs(Args):
    pattern: str = Field(
        min_length=1,
        description="Python regex; '(?i)' ignores case.",
    )
    path: str | None = Field(default=None, description="Default: the project.")
    include: str | None = Field(
        default=None,
        description=("Glob of file names ('*.py') or, with a '/', paths ('src/**/*.py')."),
    )


class Grep(BuiltinTool[GrepArgs]):
    """A search changes nothing; the title shows the pattern, the path and the include glob (clipped)."""

    name = "grep"
    kind = "search"
    title = "Grep"
    args = GrepArgs
    description = "Search files' lines by regex; prints 'path:line:text'; skips binary, .gitignored and .git files."

    async def prepare(self, args: GrepArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        line_regex, text_regex = compile_pattern(args.pattern)
        target, is_dir = workspace.existing(args.path or ".")
        include: tuple[GlobSet, bool] | None = None
        if args.include:
            if "\0" in args.include:
                raise ToolCallError(f"include {args.include!r} contains a NUL byte")
            try:
                include = (GlobSet(expand_braces(args.include.removeprefix("./"))), "/" in args.include)
            except ValueError as exc:
                raise ToolCallError(f"include '{args.include}': {exc}") from None
        title = f"Grep '{clip_title(args.pattern)}'"
        where = f" for '{args.pattern}'"
        if args.path is not None and target.rel != ".":
            title += f" in {target.rel}"
            where += f" in {target.rel}"
        if args.include:
            title += f" ({clip_title(args.include, 40)})"
            where += f" (files matching '{args.include}')"
        work = grep_work(workspace, target, is_dir, line_regex, text_regex, include, where)

        async def run(sink: ContentSink) -> ToolResult:
            return await in_thread(work)

        locations = (ToolLocation(target.path),) if args.path is not None else ()
        return self.call(title=title, locations=locations, run=run)
