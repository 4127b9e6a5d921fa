"""The REST face compacts like ``/acp``: its event stream tells subscribers a compaction happened
(``context_compacted``, after the thought notes that announce it, each event valid against the OpenAPI document),
and ``/compact`` sent as a prompt compacts on demand."""

from __future__ import annotations

from typing import Any

import pytest

from acp_server.config import Settings
from acp_server.provider.offline import Answer, Behaviour, LoopbackModel

from ._support import running_daemon

pytestmark = pytest.mark.anyio


def _summaries(body: dict[str, Any]) -> Behaviour | None:
    first = body["messages"][0].get("content")
    summarising = isinstance(first, str) and "You are compacting" in first
    return Answer(text="the summary", reasoning="") if summarising else None


async def test_the_event_stream_tells_of_a_compaction() -> None:
    async with LoopbackModel() as model:
        model.answer_with = _summaries
        async with running_daemon(model, settings=Settings(context_window=100_000)) as served:
            session_id = await served.new_session()
            async with served.events(session_id) as events:
                for text in ("one", "two"):  # turns large enough that a summary is worth asking for
                    text = f"{text} " + " ".join(["word"] * 150)
                    assert (await served.prompt(session_id, text, wait="true")).status_code == 200
                assert (await served.prompt(session_id, "/compact")).status_code == 202
                ended: list[str] = []

                def third_end(event: Any) -> bool:
                    if event.event in ("turn_complete", "turn_error"):
                        ended.append(event.event)
                    return len(ended) == 3

                seen = await events.until(third_end)
    assert seen[-1].event == "turn_complete" and seen[-1].data["stopReason"] == "end_turn"
    names = [e.event for e in seen]
    assert "context_compacted" in names
    compacted = next(e for e in seen if e.event == "context_compacted")
    assert compacted.data["through"] == 4 and compacted.data["contextWindow"] == 100_000
    before = seen[: names.index("context_compacted")]
    thoughts = [e.data["update"] for e in before if e.event == "session_update"]
    notes = [u["content"]["text"] for u in thoughts if u["sessionUpdate"] == "agent_thought_chunk"]
    assert any(n.startswith("Compacting the conversation") for n in notes)
    assert any(n.startswith("Conversation compacted: messages 1–4") for n in notes)
    assert not any(r.body["messages"][-1].get("content") == "/compact" for r in model.requests)  # never sent

