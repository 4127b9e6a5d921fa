"""A compaction on the ACP wire: its notes are ``agent_thought_chunk`` updates exactly as the official models dump
them, and a replay keeps the whole history with one thought after the last message the summary covers."""

from __future__ import annotations

from typing import Any

from acp import schema

from acp_server.acp import replay_updates, update_from_event
from acp_server.acp._convert import compaction_update
from acp_server.domain import Compacted, Compacting, Compaction, CompactionStopped, TextPart
from acp_server.store import StoredMessage
from tests.acp_wire_schema import validate_update

from .test_convert import SID, dumps, note


def _thought(text: str) -> dict[str, Any]:
    update = schema.AgentThoughtChunk(
        session_update="agent_thought_chunk", content=schema.TextContentBlock(type="text", text=text)
    )
    return dumps(schema.SessionNotification(session_id=SID, update=update))


def _live(event: Compacting | Compacted) -> dict[str, Any]:
    """A live note without its ``messageId`` (each note is a message of its own: a fresh id), which is checked."""
    params = update_from_event(SID, event)
    assert params["update"].pop("messageId").startswith(f"{SID}/compaction-")
    return params


def test_each_compaction_note_is_a_message_of_its_own() -> None:
    ids = {update_from_event(SID, Compacted(8, 900, 4000))["update"]["messageId"] for _ in range(2)}
    assert len(ids) == 2


def test_compaction_notes_are_official_thought_chunks() -> None:
    started = _live(Compacting("threshold", 3300, 4000))
    assert started == _thought(
        "The conversation is nearing the model's context window: compacting it (about 3300 tokens of a 4000-token "
        "window)…\n\n"
    )
    refused = update_from_event(SID, Compacting("refused", 5000))["update"]["content"]["text"]
    assert refused.startswith("The model refused the request as too long") and "window" not in refused.split("(")[1]
    done = _live(Compacted(8, 900, 4000))
    assert done == _thought("Conversation compacted: messages 1–8 are summarised; about 900 tokens are sent now.\n\n")
    elided = update_from_event(SID, Compacted(0, 2000))["update"]["content"]["text"]
    assert "older tool outputs are elided" in elided


def test_a_replay_is_whole_and_marks_where_the_summary_ends() -> None:
    history = [
        StoredMessage(1, "user", "one", parts=(TextPart("one"),)),
        StoredMessage(2, "assistant", "first"),
        StoredMessage(3, "user", "two", parts=(TextPart("two"),)),
        StoredMessage(4, "assistant", "second"),
    ]
    plain = list(replay_updates(SID, history))
    marked = list(replay_updates(SID, history, Compaction(2, "summary")))
    mark = note(
        "agent_thought_chunk",
        "Conversation compacted: the model is sent a summary of messages 1–2.\n\n",
        2,
        {"acpServer": {"compactedThrough": 2}},
    )
    mark["update"]["messageId"] = f"{SID}/2.compaction"  # a message of its own
    assert marked == [*plain[:2], mark, *plain[2:]]


def test_compaction_updates_are_valid_for_every_status() -> None:
    started = compaction_update(SID, Compacting("threshold", 3300, 4000, compaction_id="compaction-4"))
    done = compaction_update(SID, Compacted(4, 900, 4000, compaction_id="compaction-4", summary="the gist"))
    failed = compaction_update(SID, CompactionStopped("compaction-6", "failed", "the summary request failed"))
    cancelled = compaction_update(SID, CompactionStopped("compaction-8", "cancelled"))
    for params in (started, done, failed, cancelled):
        validate_update(params)
    assert started["update"] == {
        "sessionUpdate": "compaction_update", "compactionId": f"{SID}/compaction-4", "status": "in_progress"
    }
    assert done["update"]["summary"] == [{"type": "text", "text": "the gist"}]
    assert (failed["update"]["status"], failed["update"]["error"]) == ("failed", "the summary request failed")
    assert cancelled["update"]["status"] == "cancelled" and "error" not in cancelled["update"]
    elided = compaction_update(SID, Compacted(0, 900, compaction_id="elided-x"))
    assert elided["update"]["status"] == "completed" and "summary" not in elided["update"]  # outputs elided only


def test_a_replay_for_a_client_of_compaction_updates_has_the_completed_update_where_the_summary_ends() -> None:
    history = [
        StoredMessage(1, "user", "one", parts=(TextPart("one"),)),
        StoredMessage(2, "assistant", "first"),
        StoredMessage(3, "user", "two", parts=(TextPart("two"),)),
    ]
    plain = list(replay_updates(SID, history))
    marked = list(replay_updates(SID, history, Compaction(2, "summary"), compaction_updates=True))
    done = compaction_update(SID, Compacted(2, 0, compaction_id="compaction-2", summary="summary"))
    assert marked == [*plain[:2], done, *plain[2:]]
