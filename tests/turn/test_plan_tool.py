"""The ``update_plan`` tool in the turn: offered in every mode (``read-only`` too), never asks, and a call that set
the plan is followed by one ``PlanUpdated`` with the whole plan, kept in the call's record; bad entries fail the
call with a precise message and emit no plan."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from acp_server.domain import PlanEntry, PlanUpdated, ToolCallStarted, ToolCallUpdated
from acp_server.pipeline import StreamPolicy
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from acp_server.turn import ModelSettings, ModelTurn

from ._tools_support import Editor, Events, LoopSession, text_prompt, tool_messages

pytestmark = pytest.mark.anyio

NO_RETRIES = StreamPolicy(stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


async def _turn(model: LoopbackModel, session: LoopSession, editor: Editor) -> Events:
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES))
    emit = Events(session)
    try:
        with anyio.fail_after(10):
            assert await runner(session, text_prompt("go"), emit, editor.tool_client) == "end_turn"
    finally:
        await runner.aclose()
    return emit


PLAN = {
    "entries": [
        {"content": "Read the code", "status": "completed", "priority": "high"},
        {"content": "Fix the bug", "status": "in_progress"},
        {"content": "Run the tests", "status": "pending", "priority": "low"},
    ]
}
EXPECTED = (
    PlanEntry("Read the code", "completed", "high"),
    PlanEntry("Fix the bug", "in_progress", "medium"),  # the default priority
    PlanEntry("Run the tests", "pending", "low"),
)


@pytest.mark.parametrize("mode", ["read-only", "default"])
async def test_a_plan_call_is_offered_runs_unasked_and_is_followed_by_the_whole_plan(
    model: LoopbackModel, tmp_path: Path, mode: str
) -> None:
    model.enqueue(ToolCalls((ScriptedCall("update_plan", PLAN, id="p1"),)), Answer(text="on it"))
    session = LoopSession(str(tmp_path), mode=mode)
    editor = Editor()  # any permission request would fail the test
    emit = await _turn(model, session, editor)

    assert "update_plan" in model.requests[0].tool_names
    assert editor.asked == []
    started = next(e for e in emit.events if isinstance(e, ToolCallStarted))
    assert (started.kind, started.title) == ("think", "Update plan")
    final = emit.final("p1")
    assert final.status == "completed"
    plans = [e for e in emit.events if isinstance(e, PlanUpdated)]
    assert plans == [PlanUpdated(EXPECTED)]
    assert emit.events.index(plans[0]) == emit.events.index(final) + 1  # right after the call that set it
    [(_, output)] = tool_messages(model.requests[1].messages)
    assert output == "Plan updated: 3 entries"
    [step] = session.answer.steps
    assert step.calls[0].plan == EXPECTED


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        (
            [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}],
            "entries: Value error, at most one entry may be in_progress; entries 0, 1 are",
        ),
        ([{"content": "a", "status": "done"}], "entries.0.status: Input should be 'pending', 'in_progress' or"),
        ([{"content": "a", "status": "pending", "why": 1}], "unknown parameter 'entries.0.why'"),
        ([{"content": "", "status": "pending"}], "entries.0.content: String should have at least 1 character"),
        ([{"content": "x", "status": "pending"}] * 51, "entries: Tuple should have at most 50 items"),
    ],
)
async def test_bad_entries_fail_the_call_precisely_and_emit_no_plan(
    model: LoopbackModel, tmp_path: Path, entries: list[dict[str, object]], message: str
) -> None:
    model.enqueue(ToolCalls((ScriptedCall("update_plan", {"entries": entries}, id="p1"),)), Answer(text="ok"))
    session = LoopSession(str(tmp_path), mode="read-only")
    emit = await _turn(model, session, Editor())

    assert emit.final("p1").status == "failed"
    assert not [e for e in emit.events if isinstance(e, PlanUpdated)]
    [(_, output)] = tool_messages(model.requests[1].messages)
    assert output.startswith("Error: arguments do not match the schema: ") and message in output, output
    [step] = session.answer.steps
    assert step.calls[0].plan is None and step.calls[0].status == "failed"
    assert all(not isinstance(e, ToolCallUpdated) or e.status != "completed" for e in emit.of("p1"))
