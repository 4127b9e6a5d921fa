"""Compaction updates (ACP 1.25 ``compaction_update``), only for a client that advertised ``session.compaction``:
``/compact <instructions>`` is one ``compactionId`` from ``in_progress`` to ``completed`` with its summary, the
instructions reach the summary request, and ``session/load`` in another process replays it ``completed`` under the
same id where the summary ends. A client that advertises nothing sees the thought notes it saw before. Every update
valid against ``@agentclientprotocol/sdk@2.4.0``'s schema. A raw NDJSON client, a real agent process, the model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_server.provider.offline import Answer, Behaviour, LoopbackModel
from tests.acp_wire_schema import updates, validate_update

from ._agent import spawn_agent

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

SUMMARY = "Goal: numbered words. State: going on."


def _words(n: int, seed: int) -> str:
    return " ".join(f"w{(seed * 7 + i) % 100:02d}" for i in range(n))


def _summaries(body: dict[str, Any]) -> Behaviour | None:
    first = body["messages"][0].get("content")
    return Answer(text=SUMMARY, reasoning="") if isinstance(first, str) and "You are compacting" in first else None


async def _session(tmp_path: Path, model: LoopbackModel, advertised: bool) -> tuple[str, list[dict[str, Any]]]:
    """A session of three turns, then ``/compact keep the numbers``: its id and what the compaction sent."""
    env = {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "home" / "state")}
    capabilities = {"session": {"compaction": {}}} if advertised else {}
    async with spawn_agent("--base-url", model.base_url, "--model", "m", env=env) as agent:
        await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        session_id = await agent.new_session(str(tmp_path))
        for i in range(3):
            params = {"sessionId": session_id, "prompt": [{"type": "text", "text": _words(300, i)}]}
            reply = await agent.request("session/prompt", params, timeout=20)
            assert reply["result"]["stopReason"] == "end_turn", reply
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": "/compact keep the numbers"}]}
        reply, seen = await agent.until_response(await agent.request_nowait("session/prompt", params), 20)
        assert reply["result"]["stopReason"] == "end_turn", reply
    return session_id, seen


async def _replayed(tmp_path: Path, model: LoopbackModel, session_id: str, advertised: bool) -> list[dict[str, Any]]:
    env = {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "home" / "state")}
    capabilities = {"session": {"compaction": {}}} if advertised else {}
    async with spawn_agent("--base-url", model.base_url, "--model", "m", env=env) as agent:
        await agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": capabilities})
        load = {"sessionId": session_id, "cwd": str(tmp_path), "mcpServers": []}
        reply, seen = await agent.until_response(await agent.request_nowait("session/load", load), 20)
        assert "result" in reply, reply
    return seen


@pytest.mark.parametrize("advertised", [True, False], ids=["compaction", "nothing"])
async def test_compact_is_one_compaction_update_live_and_replayed(tmp_path: Path, advertised: bool) -> None:
    async with LoopbackModel() as model:
        model.answer_with = _summaries
        session_id, seen = await _session(tmp_path, model, advertised)
        [asked] = [r.body for r in model.requests if "You are compacting" in str(r.body["messages"][0]["content"])]
        assert "keep the numbers" in asked["messages"][0]["content"]  # /compact's instructions
        replayed = await _replayed(tmp_path, model, session_id, advertised)
    for message in seen + replayed:
        validate_update(message["params"])
    live = updates(seen, "compaction_update")
    again = updates(replayed, "compaction_update")
    thoughts = [u["content"]["text"] for u in updates(seen, "agent_thought_chunk")]
    if not advertised:
        assert live == [] and again == []
        assert any(text.startswith("Conversation compacted") for text in thoughts)  # as before
        return
    assert not any("ompact" in text for text in thoughts)
    started, done = live
    assert set(started) == {"sessionUpdate", "compactionId", "status"} and started["status"] == "in_progress"
    assert started["compactionId"].startswith(f"{session_id}/compaction-")
    assert done["compactionId"] == started["compactionId"] and done["status"] == "completed"
    assert done["summary"] == [{"type": "text", "text": SUMMARY}]
    assert again == [done]  # the same id, completed, with its summary
    kinds = [u["sessionUpdate"] for u in updates(replayed)]
    assert kinds[kinds.index("compaction_update") - 1] == "agent_message_chunk"  # after the last turn it summarises
