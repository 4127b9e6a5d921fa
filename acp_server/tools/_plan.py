"""The ``update_plan`` tool: the model's plan, replaced whole by each call.

It changes nothing in the project and never asks the user (read-only, ACP kind ``think``); its arguments are
validated by :class:`~acp_server.tools._specs.UpdatePlanArgs` (the one place its rules live). The model is told
only how many entries it set; the plan itself rides on the :class:`ToolResult` so that the turn reports it
(a ``PlanUpdated`` event after the call) and stores it with the call.
"""

from __future__ import annotations

from ..domain import PlanEntry
from ._call import prepared
from ._specs import UpdatePlanArgs
from ._types import ContentSink, PreparedCall, ToolClient, ToolResult
from ._workspace import Workspace

__all__ = ["plan_result", "prepare_update_plan"]


def plan_result(entries: tuple[PlanEntry, ...]) -> ToolResult:
    """What a call that set ``entries`` ends with: a one-line answer for the model, the plan for the turn."""
    noun = "entry" if len(entries) == 1 else "entries"
    return ToolResult(output=f"Plan updated: {len(entries)} {noun}", plan=entries)


async def prepare_update_plan(args: UpdatePlanArgs, workspace: Workspace, client: ToolClient | None) -> PreparedCall:
    """The call setting the plan to ``args.entries`` (validated already); the workspace and client are unused."""
    entries = tuple(PlanEntry(entry.content, entry.status, entry.priority) for entry in args.entries)

    async def run(sink: ContentSink) -> ToolResult:
        return plan_result(entries)

    return prepared("update_plan", "Update plan", (), (), run)
