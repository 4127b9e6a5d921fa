"""ACP wire content ⇄ domain values (``acp_server.domain``): prompts in, ``session/update`` params out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from ..domain import (
    ImagePart,
    Prompt,
    PromptPart,
    ResourceLinkPart,
    ResourcePart,
    TextChunk,
    TextPart,
    ThoughtChunk,
    TurnEvent,
)
from ..errors import InvalidInputError
from ..store import StoredMessage

__all__ = ["prompt_from_blocks", "replay_updates", "update_from_event", "wire_block"]


def prompt_from_blocks(blocks: list[Any]) -> Prompt:
    """Convert validated ``acp.schema`` content blocks; audio is refused (not advertised)."""
    parts: list[PromptPart] = []
    for block in blocks:
        kind = block.type
        if kind == "text":
            parts.append(TextPart(block.text))
        elif kind == "resource_link":
            parts.append(ResourceLinkPart(block.uri, block.name, block.description))
        elif kind == "resource":
            resource = block.resource
            parts.append(ResourcePart(resource.uri, getattr(resource, "text", None), resource.mime_type))
        elif kind == "image":
            parts.append(ImagePart(block.data, block.mime_type))
        else:
            raise InvalidInputError(
                f"Invalid params for session/prompt: content type {kind!r} is not supported",
                [{"field": "prompt", "message": f"{kind} content is not supported (see promptCapabilities)"}],
            )
    if not parts:
        raise InvalidInputError(
            "Invalid params for session/prompt: prompt is empty", [{"field": "prompt", "message": "empty"}]
        )
    return Prompt(tuple(parts))


def wire_block(part: PromptPart) -> dict[str, Any]:
    """The wire form of a content block, exactly what the official ``acp.schema`` model dumps (``tests/acp`` pins
    the equality), built directly: updates are sent per streamed chunk and replayed by the thousand."""
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ResourceLinkPart):
        link: dict[str, Any] = {"type": "resource_link", "uri": part.uri, "name": part.name}
        if part.description is not None:
            link["description"] = part.description
        return link
    if isinstance(part, ResourcePart):
        contents: dict[str, Any] = {"uri": part.uri, "text": part.text or ""}
        if part.mime_type is not None:
            contents["mimeType"] = part.mime_type
        return {"type": "resource", "resource": contents}
    return {"type": "image", "data": part.data, "mimeType": part.mime_type}


def _notification(
    session_id: str,
    kind: str,
    content: dict[str, Any],
    message_id: str | None = None,
    meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``session/update`` params of one content chunk: the one place live and replayed updates are shaped."""
    update: dict[str, Any] = {"content": content}
    if message_id is not None:
        update["messageId"] = message_id
    if meta is not None:
        update["_meta"] = meta
    update["sessionUpdate"] = kind
    return {"sessionId": session_id, "update": update}


def update_from_event(session_id: str, event: TurnEvent) -> dict[str, Any]:
    """The ``session/update`` params for one live turn event."""
    if isinstance(event, TextChunk):
        return _notification(session_id, "agent_message_chunk", {"type": "text", "text": event.text})
    if isinstance(event, ThoughtChunk):
        return _notification(session_id, "agent_thought_chunk", {"type": "text", "text": event.text})
    return _notification(session_id, "user_message_chunk", wire_block(event.part))


def replay_updates(session_id: str, messages: Iterable[StoredMessage]) -> Iterator[dict[str, Any]]:
    """``session/update`` params replaying a stored history, in order: per user message one
    ``user_message_chunk`` per prompt part; per answer its ``agent_thought_chunk`` then its ``agent_message_chunk``.

    Every chunk carries ``messageId`` (``<sessionId>/<seq>``). An answer that did not complete is marked on each of
    its chunks with ``_meta.acpServer.outcome`` (``failed``, ``cancelled``, ``interrupted``, ``running``) and
    ``stopReason``; an unfinished answer with no text is still replayed, as one empty ``agent_message_chunk``, so the
    mark is never lost. Each value is exactly what the official ``SessionNotification`` model dumps.
    """
    for message in messages:
        message_id = f"{session_id}/{message.seq}"
        if message.role == "user":
            for part in message.parts or (TextPart(message.content),):
                yield _notification(session_id, "user_message_chunk", wire_block(part), message_id)
            continue
        meta: dict[str, Any] | None = None
        if message.outcome != "complete":
            mark: dict[str, Any] = {"outcome": message.outcome}
            if message.stop_reason is not None:
                mark["stopReason"] = message.stop_reason
            meta = {"acpServer": mark}
        chunks: list[tuple[str, str]] = []
        if message.reasoning:
            chunks.append(("agent_thought_chunk", message.reasoning))
        if message.content or (not chunks and meta is not None):
            chunks.append(("agent_message_chunk", message.content))
        for kind, text in chunks:
            yield _notification(session_id, kind, {"type": "text", "text": text}, message_id, meta)
