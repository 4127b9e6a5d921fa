"""``skill``: read a skill's instructions (its ``SKILL.md``) or a file beside them, by the skill's name.

Skills live outside the project's roots (``.agents/skills/``, ``.claude/skills/``, the user's skills directory);
this tool reads them, and only them (``.._skills``), so ``read_file``'s confinement stays what it is. The skills'
names and descriptions are listed in the system prompt (the tool's :attr:`Tool.instructions`).
"""

from __future__ import annotations

import dataclasses
import threading

from pydantic import Field

from .._skills import find_skills, read_skill_file, skills_listing
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._worker import in_thread
from .._workspace import Workspace
from ..registry import Tool
from ._tool import Args, BuiltinTool

__all__ = ["SkillArgs", "SkillTool"]


class SkillArgs(Args):
    name: str = Field(min_length=1, max_length=64, description="The skill.")
    path: str | None = Field(default=None, max_length=1024, description="A file beside SKILL.md.")


class SkillTool(BuiltinTool[SkillArgs]):
    """Reading a skill changes nothing: offered in every mode, never asking — to a session that has skills only."""

    name = "skill"
    kind = "read"
    title = "Skill"
    args = SkillArgs
    description = "Read a skill listed in the system prompt, or a file beside it."

    def __init__(self, user_dir: str | None = None) -> None:
        self.user_dir = user_dir

    def listing(self, cwd: str) -> str:
        """The system prompt's list of the skills a session in ``cwd`` has ('' for none)."""
        return skills_listing(find_skills(cwd, self.user_dir))

    async def prepare(self, args: SkillArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        name, path, user_dir = args.name, args.path, self.user_dir

        def work(stop: threading.Event) -> ToolResult:
            text, where = read_skill_file(find_skills(workspace.cwd, user_dir), name, path)
            return ToolResult(text, raw_output={"path": where})

        async def run(sink: ContentSink) -> ToolResult:
            return await in_thread(work)

        title = f"Skill {name}" + (f" {path}" if path else "")
        return self.call(title=title, run=run)

    def tool(self) -> Tool:
        return dataclasses.replace(super().tool(), instructions=self.listing, needs_instructions=True)
