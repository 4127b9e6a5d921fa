"""Subagents as their own sessions, through a real agent process, for a client that advertises ACP's unstable
``subagents``: each child announced by ``subagent_update`` on the parent's session before any of its traffic, then
its updates and permission requests under its own session id (every message valid against the vendored schema);
a client without the capability sees none of that."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_wire_schema import validate, validate_update

from ._agent import spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


def _script(model: LoopbackModel) -> None:
    model.enqueue(
        ToolCalls((ScriptedCall("task", {"description": "Write notes", "prompt": "Write notes.txt", "write": True}),)),
        ToolCalls((ScriptedCall("write_file", {"path": "notes.txt", "content": "hi\n"}),)),
        Answer(text="Wrote notes.txt."),
        Answer(text="done"),
    )


async def _run(tmp_path: Path, caps: dict[str, Any]) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    async with LoopbackModel() as model:
        _script(model)
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m") as agent:
            await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "notes"}]
            msg_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": prompt})
            seen: list[dict[str, Any]] = []
            while True:
                message = await agent.receive(timeout=60)
                seen.append(message)
                if message.get("method") == "session/request_permission":
                    outcome = {"outcome": "selected", "optionId": "allow_once"}
                    await agent.send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}})
                elif message.get("id") == msg_id:
                    break
            children = [m["params"]["update"]["sessionId"] for m in seen if "subagent_update" in str(m.get("params"))]
            refused = [await agent.request("session/prompt", {"sessionId": c, "prompt": prompt}) for c in children]
    assert message["result"]["stopReason"] == "end_turn", message
    return session_id, seen, refused


async def test_a_subagents_client_sees_the_child_as_its_own_session(tmp_path: Path) -> None:
    session_id, seen, refused = await _run(tmp_path, {"subagents": {}})
    [error] = [r["error"] for r in refused]  # a child's id is no session a client may prompt
    assert error["code"] != -32603 and "not found" in error["message"], error
    notes = [m["params"] for m in seen if m.get("method") == "session/update"]
    for params in notes:
        validate_update(params, unstable=True)
    [announce] = [n for n in notes if n["update"]["sessionUpdate"] == "subagent_update"]
    assert announce["sessionId"] == session_id
    child_id = announce["update"]["sessionId"]
    assert child_id != session_id and "/" not in child_id  # an id like any session's: safe in every face's routes
    assert announce["update"]["title"] == "Write notes"
    first_child = min(i for i, m in enumerate(seen) if (m.get("params") or {}).get("sessionId") == child_id)
    assert seen.index(next(m for m in seen if m.get("params") is announce)) < first_child  # announced first
    child_updates = [n["update"] for n in notes if n["sessionId"] == child_id]
    assert [u["kind"] for u in child_updates if u["sessionUpdate"] == "tool_call"] == ["edit"]
    text = "".join(u["content"]["text"] for u in child_updates if u["sessionUpdate"] == "agent_message_chunk")
    assert text == "Wrote notes.txt."
    [asked] = [m["params"] for m in seen if m.get("method") == "session/request_permission"]
    validate("RequestPermissionRequest", asked, unstable=True)
    assert asked["sessionId"] == child_id
    parent = [n["update"] for n in notes if n["sessionId"] == session_id]
    assert [u["kind"] for u in parent if u["sessionUpdate"] == "tool_call"] == ["think"]  # the task call remains
    assert (tmp_path / "notes.txt").read_text() == "hi\n"


async def test_any_other_client_sees_one_tool_call(tmp_path: Path) -> None:
    session_id, seen, _ = await _run(tmp_path, {})
    notes = [m["params"] for m in seen if m.get("method") == "session/update"]
    assert {n["sessionId"] for n in notes} == {session_id}
    assert not [n for n in notes if n["update"]["sessionUpdate"] == "subagent_update"]
    [asked] = [m["params"] for m in seen if m.get("method") == "session/request_permission"]
    assert asked["sessionId"] == session_id and asked["toolCall"]["title"].startswith("[Write notes] Write")


async def test_two_children_at_once_are_two_sessions_and_a_cancel_stops_both(tmp_path: Path) -> None:
    import anyio

    from acp_server.provider.offline import HangAfterHeaders

    two = tuple(ScriptedCall("task", {"description": f"Look {n}", "prompt": f"Look at {n}"}) for n in (1, 2))
    async with LoopbackModel() as model:
        model.enqueue(ToolCalls(two), HangAfterHeaders(), HangAfterHeaders())
        async with spawn_agent("--no-persist", "--base-url", model.base_url, "--model", "m") as agent:
            await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {"subagents": {}}})
            session_id = await agent.new_session(str(tmp_path))
            prompt = [{"type": "text", "text": "go"}]
            msg_id = await agent.request_nowait("session/prompt", {"sessionId": session_id, "prompt": prompt})
            with anyio.fail_after(30):
                await model.wait_for_requests(3)  # both children asked at once
            await agent.notify("session/cancel", {"sessionId": session_id})
            reply, seen = await agent.until_response(msg_id, timeout=30)
            with anyio.fail_after(30):
                await model.wait_for_disconnects(2)
    assert reply["result"]["stopReason"] == "cancelled", reply
    notes = [m["params"] for m in seen if m.get("method") == "session/update"]
    announced = [n["update"] for n in notes if n["update"]["sessionUpdate"] == "subagent_update"]
    assert sorted(u["title"] for u in announced) == ["Look 1", "Look 2"]
    assert len({u["sessionId"] for u in announced}) == 2 and all(n["sessionId"] == session_id for n in notes)
    finals = [n["update"] for n in notes if n["update"].get("status") in ("completed", "failed")]
    assert [u["status"] for u in finals] == ["failed", "failed"]
