"""Message ids and tool names on the wire (ACP schema 1.25): every agent message, thought and user message chunk
carries ``messageId`` — one per message, a new one after a tool call — and every ``tool_call`` the tool's name as
the model called it; ``session/load`` in another process replays the same ids and names. Every update is valid
against ``@agentclientprotocol/sdk@2.4.0``'s schema. A raw NDJSON client, a real agent process, the scriptable model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import Answer, LoopbackModel, ScriptedCall, ToolCalls
from tests.acp_wire_schema import updates, validate_update

from ._agent import AgentProcess, spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")


@asynccontextmanager
async def _agent(model: LoopbackModel, home: Path) -> AsyncIterator[AgentProcess]:
    env = {"HOME": str(home), "XDG_STATE_HOME": str(home / "state")}
    async with spawn_agent("--base-url", model.base_url, "--model", "m", env=env) as agent:
        await agent.initialize()
        yield agent


def _messages(seen: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(kind, messageId, text) per message, in the order they began: chunks of one id joined."""
    joined: dict[tuple[str, str], str] = {}
    for update in updates(seen):
        if update["sessionUpdate"] in CHUNKS:
            key = (update["sessionUpdate"], update["messageId"])
            joined[key] = joined.get(key, "") + update["content"]["text"]
    return [(kind, message_id, text) for (kind, message_id), text in joined.items()]


async def test_every_chunk_has_its_message_id_and_every_call_its_name_live_and_replayed(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    read = ScriptedCall("read_file", {"path": "a.txt"}, id="r1")
    async with LoopbackModel() as model:
        model.enqueue(
            ToolCalls((read,), text="Let me look."),
            Answer(text="It says hello.", reasoning="the file is short"),
            Answer(text="Again.", reasoning=""),
        )
        async with _agent(model, tmp_path / "home") as agent:
            session_id = await agent.new_session(str(tmp_path))
            live: list[dict[str, Any]] = []
            for text in ("read a.txt", "again"):
                prompt = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
                reply, seen = await agent.until_response(await agent.request_nowait("session/prompt", prompt), 20)
                assert reply["result"]["stopReason"] == "end_turn", reply
                live += seen
        for message in live:
            validate_update(message["params"])
        for update in updates(live):
            if update["sessionUpdate"] in CHUNKS:
                assert update["messageId"].startswith(f"{session_id}/"), update
        sent = _messages(live)
        assert [(kind, text) for kind, _, text in sent] == [
            ("agent_message_chunk", "Let me look."),
            ("agent_thought_chunk", "the file is short"),
            ("agent_message_chunk", "It says hello."),  # a new message: the tool call ended the one before
            ("agent_message_chunk", "Again."),
        ]
        assert len({message_id for _, message_id, _ in sent}) == 4
        [call] = updates(live, "tool_call")
        assert (call["toolCallId"], call["name"]) == ("r1", "read_file")

        async with _agent(model, tmp_path / "home") as agent:  # another process: what the store kept
            load = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
            reply, replayed = await agent.until_response(await agent.request_nowait("session/load", load), 20)
            assert "result" in reply, reply
        for message in replayed:
            validate_update(message["params"])
        again = _messages(replayed)
        users = [(kind, text) for kind, _, text in again if kind == "user_message_chunk"]
        assert users == [("user_message_chunk", "read a.txt"), ("user_message_chunk", "again")]
        assert [m for m in again if m[0] != "user_message_chunk"] == sent  # the same ids, the same texts
        assert len({message_id for _, message_id, _ in again}) == 6
        [replayed_call] = updates(replayed, "tool_call")
        assert (replayed_call["toolCallId"], replayed_call["name"]) == ("r1", "read_file")
