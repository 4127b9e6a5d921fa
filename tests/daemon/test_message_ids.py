"""The daemon's events carry what ACP's stdio face sends: each text and thought ``session_update`` its message's
``messageId`` (a new one after a tool call), each ``tool_call`` the tool's ``name``; valid against
``@agentclientprotocol/sdk@2.4.0``'s schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_wire_schema import validate_update

from ._support import running_daemon

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]


async def test_events_carry_message_ids_and_tool_names(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    async with LoopbackModel() as model, running_daemon(model) as served:
        created = await served.client.post("/session", json={"cwd": str(tmp_path)})
        session_id = created.json()["sessionId"]
        call = ScriptedCall("read_file", {"path": "a.txt"}, id="r1")
        model.enqueue(ToolCalls((call,), text="Let me look."), Answer(text="It says hello.", reasoning="short"))
        async with served.events(session_id) as events:
            assert (await served.prompt(session_id, "read it")).status_code == 202
            seen = await events.until(lambda e: e.event == "turn_complete", timeout=10)

    texts: dict[tuple[str, str], str] = {}
    for event in seen:
        update = event.data.get("update", {})
        if update.get("sessionUpdate") in ("agent_message_chunk", "agent_thought_chunk", "tool_call"):
            validate_update({k: v for k, v in event.data.items() if k != "promptId"})
        if update.get("sessionUpdate") in ("agent_message_chunk", "agent_thought_chunk"):
            key = (update["sessionUpdate"], update["messageId"])
            texts[key] = texts.get(key, "") + update["content"]["text"]
    assert [(kind, text) for (kind, _), text in texts.items()] == [
        ("agent_message_chunk", "Let me look."),
        ("agent_thought_chunk", "short"),
        ("agent_message_chunk", "It says hello."),
    ]
    assert len({message_id for _, message_id in texts}) == 3
    started = next(e for e in seen if e.event == "tool_call" and e.data["update"]["sessionUpdate"] == "tool_call")
    assert started.data["update"]["name"] == "read_file"


async def test_a_notice_is_a_session_update_event(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Be brief.\n" * 4000)  # 40 KB: over the 32 KiB cap
    async with LoopbackModel() as model, running_daemon(model) as served:
        created = await served.client.post("/session", json={"cwd": str(tmp_path)})
        session_id = created.json()["sessionId"]
        model.enqueue(Answer(text="ok", reasoning=""))
        async with served.events(session_id) as events:
            assert (await served.prompt(session_id, "hi")).status_code == 202
            seen = await events.until(lambda e: e.event == "turn_complete", timeout=10)
    [notice] = [e for e in seen if e.event == "session_update" and e.data["update"]["sessionUpdate"] == "notice"]
    validate_update({k: v for k, v in notice.data.items() if k != "promptId"})
    assert notice.data["update"]["title"] == "Project instructions were cut: AGENTS.md"
