"""The SDK's :class:`PlanEvent`: the daemon's ``plan`` event parsed into its entries, given to ``on_update`` like
every session update; a malformed one is refused as such."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

from acp_server.client import DaemonClient, DaemonSessionClient, PlanEntry, PlanEvent, SessionUpdateEvent
from acp_server.client._events import parse_event
from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ._support import running_daemon

pytestmark = pytest.mark.anyio


async def test_on_update_gets_the_plan_as_a_plan_event(tmp_path: Path) -> None:
    entries = [
        {"content": "Look", "status": "in_progress"},
        {"content": "Answer", "status": "pending", "priority": "low"},
    ]
    async with LoopbackModel() as model, running_daemon(model) as served, DaemonClient(served.url) as client:
        model.enqueue(ToolCalls((ScriptedCall("update_plan", {"entries": entries}, id="p1"),)), Answer(text="ok"))
        updates: list[SessionUpdateEvent] = []
        async with await DaemonSessionClient.create_or_attach(client, tmp_path) as session:
            result = await session.prompt("plan", on_update=updates.append)
    assert result.stop_reason == "end_turn"
    (plan,) = [u for u in updates if isinstance(u, PlanEvent)]
    assert (plan.event, plan.kind, plan.prompt_id) == ("plan", "plan", result.prompt_id)
    assert plan.entries == (PlanEntry("Look", "in_progress", "medium"), PlanEntry("Answer", "pending", "low"))


def _sse(data: str) -> httpx2.ServerSentEvent:
    return httpx2.ServerSentEvent(event="plan", data=data, id="7")


def test_a_plan_event_with_malformed_entries_is_refused() -> None:
    base = '{"sessionId": "s", "promptId": "p", "update": {"sessionUpdate": "plan", "entries": %s}}'
    parsed = parse_event(_sse(base % '[{"content": "a", "status": "pending", "priority": "high"}]'), "s")
    assert isinstance(parsed, PlanEvent) and parsed.id == 7 and parsed.entries == (PlanEntry("a", "pending", "high"),)
    with pytest.raises(ValueError, match=r"'update\.entries' must be a list"):
        parse_event(_sse(base % '"nope"'), "s")
    with pytest.raises(ValueError, match="a plan entry must be an object"):
        parse_event(_sse(base % "[1]"), "s")
    with pytest.raises(ValueError, match="content"):
        parse_event(_sse(base % '[{"status": "pending", "priority": "high"}]'), "s")
