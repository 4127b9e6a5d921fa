"""``update_plan`` as a tool: its call changes nothing, needs no permission, tells the model only the count and
carries the whole plan (default priority filled in) on its result; text UTF-8 cannot carry is refused also inside
the entries (it would reach the editor in the plan)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_server.domain import PlanEntry
from acp_server.tools import ToolCallError

from ._support import Sink, prepare

pytestmark = pytest.mark.anyio


async def test_a_call_carries_the_plan_and_tells_the_model_only_the_count(tmp_path: Path) -> None:
    call = await prepare(tmp_path, "update_plan", entries=[{"content": "Only step", "status": "in_progress"}])
    assert (call.kind, call.needs_permission, call.title, call.locations, call.preview) == (
        "think",
        False,
        "Update plan",
        (),
        (),
    )
    result = await call.run(Sink())
    assert (result.output, result.failed, result.content) == ("Plan updated: 1 entry", False, ())
    assert result.plan == (PlanEntry("Only step", "in_progress", "medium"),)
    assert os.listdir(tmp_path) == []  # nothing in the project changed
    cleared = await (await prepare(tmp_path, "update_plan", entries=[])).run(Sink())
    assert (cleared.output, cleared.plan) == ("Plan updated: 0 entries", ())


async def test_a_lone_surrogate_inside_an_entry_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolCallError, match=r"content contains text that is not valid Unicode \(a lone surrogate"):
        await prepare(tmp_path, "update_plan", entries=[{"content": "bad \ud800", "status": "pending"}])
