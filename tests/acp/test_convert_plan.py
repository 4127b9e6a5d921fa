"""Plans on the wire: a live ``PlanUpdated`` is exactly the official ``AgentPlanUpdate`` (every entry's content,
priority and status), and a replayed history carries each answer's last plan once, right after the call that set
it; the plan survives the store's step codec and a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acp import schema

from acp_server.acp import replay_updates, update_from_event
from acp_server.domain import ModelStep, PlanEntry, PlanUpdated, TextPart, ToolCallRecord
from acp_server.store import SqliteSessionStore, StoredMessage
from acp_server.store._types import steps_from_json, steps_to_json
from tests.acp_wire_schema import validate_update

from .test_convert import SID, dumps

pytestmark = pytest.mark.anyio

FIRST = (PlanEntry("Read", "in_progress", "high"), PlanEntry("Fix", "pending"))
SECOND = (PlanEntry("Read", "completed", "high"), PlanEntry("Fix", "in_progress"), PlanEntry("Test", "pending", "low"))


def plan_call(call_id: str, plan: tuple[PlanEntry, ...] | None) -> ToolCallRecord:
    entries = [{"content": e.content, "status": e.status, "priority": e.priority} for e in plan or ()]
    output = f"Plan updated: {len(entries)} entries"
    return ToolCallRecord(
        call_id, "update_plan", json.dumps({"entries": entries}), output, "completed", "Update plan", "think", plan=plan
    )


def official(plan: tuple[PlanEntry, ...]) -> dict[str, Any]:
    entries = [schema.PlanEntry(content=e.content, priority=e.priority, status=e.status) for e in plan]
    return dumps(
        schema.SessionNotification(
            session_id=SID, update=schema.AgentPlanUpdate(session_update="plan", entries=entries)
        )
    )


def test_a_live_plan_is_the_official_plan_update_with_every_entry() -> None:
    params = update_from_event(SID, PlanUpdated(SECOND))
    assert params == official(SECOND)
    assert params["update"]["entries"][2] == {"content": "Test", "priority": "low", "status": "pending"}
    assert dumps(schema.SessionNotification.model_validate(params)) == params
    assert update_from_event(SID, PlanUpdated(()))["update"] == {"sessionUpdate": "plan", "entries": []}


def _plans(updates: list[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    return [(i, u) for i, u in enumerate(updates) if u["update"]["sessionUpdate"] == "plan"]


def test_replay_sends_each_answers_last_plan_once_right_after_its_call() -> None:
    history = [
        StoredMessage(1, "user", "go"),
        StoredMessage(
            2,
            "assistant",
            "done",
            stop_reason="end_turn",
            steps=(ModelStep("", "", (plan_call("p1", FIRST),)), ModelStep("", "", (plan_call("p2", SECOND),))),
        ),
        StoredMessage(3, "user", "again"),
        StoredMessage(4, "assistant", "nothing planned", stop_reason="end_turn"),
        StoredMessage(
            6,
            "assistant",
            "",
            stop_reason="cancelled",
            outcome="cancelled",
            steps=(ModelStep("", "", (plan_call("p3", FIRST), plan_call("bad", None))),),
        ),
    ]
    updates = list(replay_updates(SID, history))
    plans = _plans(updates)
    assert [u for _, u in plans] == [official(SECOND), official(FIRST)]  # p1's plan was replaced within its turn
    for index, _ in plans:
        before = updates[index - 1]["update"]
        assert before["sessionUpdate"] == "tool_call_update" and before["status"] == "completed"
    assert updates[plans[0][0] - 1]["update"]["toolCallId"] == "p2"
    assert updates[plans[1][0] - 1]["update"]["toolCallId"] == "p3"  # a call with no plan after it sends none
    for params in updates:
        validate_update(params)  # ACP 1.25's schema: a tool call's name is newer than the Python SDK's model
        if params["update"]["sessionUpdate"] != "tool_call":
            assert dumps(schema.SessionNotification.model_validate(params)) == params


def test_the_step_codec_keeps_the_plan_and_reads_a_newer_versions_values_safely() -> None:
    steps = (ModelStep("t", "r", (plan_call("p1", SECOND), plan_call("p2", None))),)
    assert steps_from_json(steps_to_json(steps)) == steps
    stored = json.loads(steps_to_json(steps) or "")
    assert "plan" not in stored[0]["calls"][1]  # only a call that set a plan stores one
    stored[0]["calls"][0]["plan"] = [{"content": "x", "status": "blocked", "priority": "urgent"}, {"status": "x"}]
    (read,) = steps_from_json(json.dumps(stored))
    assert read.calls[0].plan == (PlanEntry("x", "pending", "medium"),)


async def test_a_stored_plan_is_read_back_from_sqlite(tmp_path: Path) -> None:
    steps = (ModelStep("", "", (plan_call("p1", SECOND),)),)
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        await store.create_session("s1", str(tmp_path))
        ticket = await store.begin_turn("s1", known=0, content="go", parts=(TextPart("go"),), title="go")
        await store.record_steps(ticket, steps[:1])
        await store.end_turn(
            ticket, content="ok", reasoning="", stop_reason="end_turn", outcome="complete", steps=steps
        )
    async with SqliteSessionStore(tmp_path / "s.db") as store:
        snapshot = await store.read_session("s1")
    assert snapshot is not None
    assert snapshot.messages[1].steps[0].calls[0].plan == SECOND
    assert [u for _, u in _plans(list(replay_updates(SID, snapshot.messages)))] == [official(SECOND)]
