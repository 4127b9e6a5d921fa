"""The wire shapes built by hand in ``acp_server.acp._convert`` are exactly what the official ``acp.schema`` models
dump, both the way acp's own connection serializes params (``acp.utils.serialize_params``: by alias, no None, no
defaults, JSON mode) and the plain ``model_dump(by_alias=True, exclude_none=True, mode="json")``."""

from __future__ import annotations

from typing import Any

import pytest
from acp import schema
from acp.utils import serialize_params
from pydantic import BaseModel

from acp_server.acp import prompt_from_blocks, replay_updates, update_from_event, wire_block
from acp_server.domain import (
    ImagePart,
    PromptPart,
    ResourceLinkPart,
    ResourcePart,
    RetryNotice,
    TextChunk,
    TextPart,
    ThoughtChunk,
    TurnEvent,
    UserChunk,
)
from acp_server.errors import InvalidInputError
from acp_server.store import StoredMessage

SID = "0123456789abcdef0123456789abcdef"


def dumps(model: BaseModel) -> dict[str, Any]:
    """The model's wire form, checked to be the same under both of acp's serializations."""
    plain = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert serialize_params(model) == plain
    return plain


def official_block(part: PromptPart) -> BaseModel:
    """The official content block for a domain part, built field by field from the schema models."""
    if isinstance(part, TextPart):
        return schema.TextContentBlock(type="text", text=part.text)
    if isinstance(part, ResourceLinkPart):
        return schema.ResourceContentBlock(
            type="resource_link", uri=part.uri, name=part.name, description=part.description
        )
    if isinstance(part, ResourcePart):
        contents = schema.TextResourceContents(uri=part.uri, text=part.text or "", mime_type=part.mime_type)
        return schema.EmbeddedResourceContentBlock(type="resource", resource=contents)
    return schema.ImageContentBlock(type="image", data=part.data, mime_type=part.mime_type)


PARTS: list[PromptPart] = [
    TextPart("hello"),
    TextPart(""),
    TextPart('multi\nline "quoted" ü 😀'),
    ResourceLinkPart("file:///a/b.py", "b.py"),
    ResourceLinkPart("file:///a/b.py", "b.py", "the b module"),
    ResourcePart("file:///a/c.txt", "contents\n"),
    ResourcePart("file:///a/c.txt", "contents", "text/plain"),
    ResourcePart("file:///a/blob.bin", None, "application/octet-stream"),
    ImagePart("iVBORw0KGgo=", "image/png"),
]


@pytest.mark.parametrize("part", PARTS, ids=repr)
def test_wire_block_is_what_the_official_model_dumps(part: PromptPart) -> None:
    block = wire_block(part)
    assert block == dumps(official_block(part))
    union: Any = schema.UserMessageChunk.model_fields["content"].annotation
    from pydantic import TypeAdapter

    assert dumps(TypeAdapter(union).validate_python(block)) == block  # and it reads back to itself


@pytest.mark.parametrize("part", [p for p in PARTS if not (isinstance(p, ResourcePart) and p.text is None)], ids=repr)
def test_a_validated_prompt_block_round_trips_through_the_domain(part: PromptPart) -> None:
    request = schema.PromptRequest.model_validate({"sessionId": SID, "prompt": [wire_block(part)]})
    prompt = prompt_from_blocks(request.prompt)
    assert prompt.parts == (part,)
    assert wire_block(prompt.parts[0]) == dumps(request.prompt[0])


def test_prompt_from_blocks_refuses_audio_and_empty_prompts() -> None:
    audio = schema.PromptRequest.model_validate(
        {"sessionId": SID, "prompt": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]}
    )
    with pytest.raises(InvalidInputError, match="audio"):
        prompt_from_blocks(audio.prompt)
    with pytest.raises(InvalidInputError, match="empty"):
        prompt_from_blocks([])


EVENTS: list[tuple[TurnEvent, BaseModel]] = [
    (
        TextChunk("answer"),
        schema.AgentMessageChunk(
            session_update="agent_message_chunk", content=schema.TextContentBlock(type="text", text="answer")
        ),
    ),
    (
        TextChunk(""),
        schema.AgentMessageChunk(
            session_update="agent_message_chunk", content=schema.TextContentBlock(type="text", text="")
        ),
    ),
    (
        ThoughtChunk("hmm"),
        schema.AgentThoughtChunk(
            session_update="agent_thought_chunk", content=schema.TextContentBlock(type="text", text="hmm")
        ),
    ),
    (
        RetryNotice("\n(retrying in 1.5 s)\n", 1, 1500, "server error (HTTP 503)"),
        schema.AgentThoughtChunk(
            session_update="agent_thought_chunk",
            content=schema.TextContentBlock(type="text", text="\n(retrying in 1.5 s)\n"),
            field_meta={"acpServer": {"retry": {"attempt": 1, "delayMs": 1500, "reason": "server error (HTTP 503)"}}},
        ),
    ),
    *[
        (UserChunk(part), schema.UserMessageChunk(session_update="user_message_chunk", content=official_block(part)))  # type: ignore[arg-type]
        for part in PARTS
    ],
]


@pytest.mark.parametrize(("event", "update"), EVENTS, ids=lambda v: type(v).__name__)
def test_update_from_event_is_what_the_official_session_notification_dumps(event: TurnEvent, update: Any) -> None:
    params = update_from_event(SID, event)
    assert params == dumps(schema.SessionNotification(session_id=SID, update=update))
    assert dumps(schema.SessionNotification.model_validate(params)) == params


def note(kind: str, text: str, seq: int, meta: dict[str, Any] | None = None, step: int = 0) -> dict[str, Any]:
    """A replayed chunk of the answer stored as ``seq``: its message id is its request's (``step``), per kind."""
    cls: Any = {
        "agent_message_chunk": schema.AgentMessageChunk,
        "agent_thought_chunk": schema.AgentThoughtChunk,
    }[kind]
    update = cls(
        session_update=kind,
        content=schema.TextContentBlock(type="text", text=text),
        message_id=f"{SID}/{seq}.{step}" + (".thought" if kind == "agent_thought_chunk" else ""),
        field_meta=meta,
    )
    return dumps(schema.SessionNotification(session_id=SID, update=update))


def user_note(part: PromptPart, seq: int) -> dict[str, Any]:
    update = schema.UserMessageChunk(
        session_update="user_message_chunk",
        content=official_block(part),  # type: ignore[arg-type]
        message_id=f"{SID}/{seq}",
    )
    return dumps(schema.SessionNotification(session_id=SID, update=update))


def test_replay_updates_are_what_the_official_models_dump_for_every_kind_of_message() -> None:
    history = [
        StoredMessage(1, "user", "all parts", parts=tuple(PARTS)),
        StoredMessage(2, "assistant", "the answer", reasoning="the thought", stop_reason="end_turn"),
        StoredMessage(3, "user", "text only, stored without parts"),
        StoredMessage(4, "assistant", "", reasoning="only thought", stop_reason="end_turn"),
        StoredMessage(5, "user", "next"),
        StoredMessage(6, "assistant", "half an ans", stop_reason="cancelled", outcome="cancelled"),
        StoredMessage(7, "user", "next"),
        StoredMessage(8, "assistant", "", outcome="failed"),
        StoredMessage(9, "user", "next"),
        StoredMessage(10, "assistant", "", reasoning="thinking", outcome="interrupted"),
        StoredMessage(11, "user", "next"),
        StoredMessage(12, "assistant", "so far", outcome="running"),
    ]
    expected = [
        *[user_note(part, 1) for part in PARTS],
        note("agent_thought_chunk", "the thought", 2),
        note("agent_message_chunk", "the answer", 2),
        user_note(TextPart("text only, stored without parts"), 3),
        note("agent_thought_chunk", "only thought", 4),
        user_note(TextPart("next"), 5),
        note(
            "agent_message_chunk", "half an ans", 6, {"acpServer": {"outcome": "cancelled", "stopReason": "cancelled"}}
        ),
        user_note(TextPart("next"), 7),
        note("agent_message_chunk", "", 8, {"acpServer": {"outcome": "failed"}}),  # the mark is never lost
        user_note(TextPart("next"), 9),
        note("agent_thought_chunk", "thinking", 10, {"acpServer": {"outcome": "interrupted"}}),
        user_note(TextPart("next"), 11),
        note("agent_message_chunk", "so far", 12, {"acpServer": {"outcome": "running"}}),
    ]
    assert list(replay_updates(SID, history)) == expected


def test_a_complete_answer_with_no_text_replays_nothing() -> None:
    assert list(replay_updates(SID, [StoredMessage(2, "assistant", "", stop_reason="end_turn")])) == []
