"""The daemon's ``plan`` SSE event: after the ``update_plan`` call that set it, the whole plan as ACP's ``plan``
update (documented in the OpenAPI document: the reader checks every event), in the read-only mode a tokenless
daemon offers; never a ``session_update``."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls

from ._support import running_daemon

pytestmark = pytest.mark.anyio

PLAN = {
    "entries": [
        {"content": "Read the code", "status": "completed"},
        {"content": "Fix it", "status": "in_progress", "priority": "high"},
    ]
}


async def test_a_plan_call_publishes_one_plan_event_after_the_call(tmp_path: Path) -> None:
    async with LoopbackModel() as model, running_daemon(model) as served:
        created = await served.client.post("/session", json={"cwd": str(tmp_path)})
        session_id = created.json()["sessionId"]
        model.enqueue(ToolCalls((ScriptedCall("update_plan", PLAN, id="p1"),)), Answer(text="planned"))
        async with served.events(session_id) as events:
            assert (await served.prompt(session_id, "plan it")).status_code == 202
            seen = await events.until(lambda e: e.event == "turn_complete", timeout=10)

    names = [e.event for e in seen]
    assert names.count("plan") == 1 and "permission_request" not in names
    plan = seen[names.index("plan")]
    assert plan.data["sessionId"] == session_id and plan.data["promptId"]
    assert plan.data["update"] == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "Read the code", "priority": "medium", "status": "completed"},
            {"content": "Fix it", "priority": "high", "status": "in_progress"},
        ],
    }
    before = seen[names.index("plan") - 1]
    assert before.event == "tool_call" and before.data["update"]["status"] == "completed"
    assert all(e.data["update"]["sessionUpdate"] != "plan" for e in seen if e.event == "session_update")
