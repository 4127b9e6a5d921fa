"""ACP wire content ⇄ domain values of a turn (``acp_server.turn``)."""

from __future__ import annotations

from typing import Any

from ..errors import InvalidInputError
from ..turn import (
    ImagePart,
    Prompt,
    PromptPart,
    ResourceLinkPart,
    ResourcePart,
    TextChunk,
    TextPart,
    ThoughtChunk,
    TurnEvent,
    UserChunk,
)
from ._schema import dump, schema

__all__ = ["prompt_from_blocks", "update_from_event"]


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


def _block(part: PromptPart) -> Any:
    s = schema()
    if isinstance(part, TextPart):
        return s.TextContentBlock(type="text", text=part.text)
    if isinstance(part, ResourceLinkPart):
        return s.ResourceContentBlock(type="resource_link", uri=part.uri, name=part.name, description=part.description)
    if isinstance(part, ResourcePart):
        contents = s.TextResourceContents(uri=part.uri, text=part.text or "", mime_type=part.mime_type)
        return s.EmbeddedResourceContentBlock(type="resource", resource=contents)
    return s.ImageContentBlock(type="image", data=part.data, mime_type=part.mime_type)


def update_from_event(session_id: str, event: TurnEvent) -> dict[str, Any]:
    """The ``session/update`` params for one turn event, built from the official models."""
    s = schema()
    update: Any
    if isinstance(event, TextChunk):
        update = s.AgentMessageChunk(session_update="agent_message_chunk", content=_block(TextPart(event.text)))
    elif isinstance(event, ThoughtChunk):
        update = s.AgentThoughtChunk(session_update="agent_thought_chunk", content=_block(TextPart(event.text)))
    else:
        assert isinstance(event, UserChunk)
        update = s.UserMessageChunk(session_update="user_message_chunk", content=_block(event.part))
    return dump(s.SessionNotification(session_id=session_id, update=update))
