"""``update_plan``: the model's plan, replaced whole by each call.

It changes nothing in the project and never asks the user (ACP kind ``think``: read-only); its arguments are
validated by :class:`UpdatePlanArgs` (the one place its rules live). The model is told only how many entries it
set; the plan itself rides on the :class:`ToolResult` so that the turn reports it (a ``PlanUpdated`` event after
the call) and stores it with the call.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ...domain import PlanEntry
from .._types import ContentSink, PreparedCall, ToolClient, ToolResult
from .._workspace import Workspace
from ._tool import Args, BuiltinTool

__all__ = ["MAX_PLAN_ENTRIES", "MAX_PLAN_ENTRY_CHARS", "PlanEntryArgs", "UpdatePlan", "UpdatePlanArgs", "plan_result"]

MAX_PLAN_ENTRIES = 50
MAX_PLAN_ENTRY_CHARS = 2_000


class PlanEntryArgs(Args):
    content: str = Field(
        min_length=1,
        max_length=MAX_PLAN_ENTRY_CHARS,
        description="A short imperative sentence.",
    )
    status: Literal["pending", "in_progress", "completed"] = Field()
    priority: Literal["high", "medium", "low"] = Field(default="medium")


class UpdatePlanArgs(Args):
    """The whole plan, every time (it replaces the previous one); at most one entry is ``in_progress``."""

    entries: tuple[PlanEntryArgs, ...] = Field(
        max_length=MAX_PLAN_ENTRIES,
    )

    @field_validator("entries")
    @classmethod
    def _one_in_progress(cls, entries: tuple[PlanEntryArgs, ...]) -> tuple[PlanEntryArgs, ...]:
        working = [str(n) for n, entry in enumerate(entries) if entry.status == "in_progress"]
        if len(working) > 1:
            raise ValueError(f"at most one entry may be in_progress; entries {', '.join(working)} are")
        return entries


def plan_result(entries: tuple[PlanEntry, ...]) -> ToolResult:
    """What a call that set ``entries`` ends with: a one-line answer for the model, the plan for the turn."""
    noun = "entry" if len(entries) == 1 else "entries"
    return ToolResult(output=f"Plan updated: {len(entries)} {noun}", plan=entries)


class UpdatePlan(BuiltinTool[UpdatePlanArgs]):
    """The plan changes nothing in the project: offered in every mode, never asking."""

    name = "update_plan"
    kind = "think"
    title = "Update plan"
    args = UpdatePlanArgs
    description = "Plan of multi-step work: all steps each time, one in_progress; resend as each is completed."

    async def prepare(self, args: UpdatePlanArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
        """The call setting the plan to ``args.entries`` (validated already); the workspace and client are unused."""
        entries = tuple(PlanEntry(entry.content, entry.status, entry.priority) for entry in args.entries)

        async def run(sink: ContentSink) -> ToolResult:
            return plan_result(entries)

        return self.call(title=self.title, run=run)
