"""One model turn: conversation + prompt → chat request → streamed events → stop reason."""

from ._exceptions import ModelNotConfiguredError, TurnError
from ._turn import ModelSettings, ModelTurn, SessionLike, to_chat_messages
from ._types import (
    Conversation,
    Emit,
    ImagePart,
    Message,
    Outcome,
    Prompt,
    PromptPart,
    ResourceLinkPart,
    ResourcePart,
    StopReason,
    TextChunk,
    TextPart,
    ThoughtChunk,
    TurnEvent,
    UserChunk,
)

__all__ = [
    "Conversation",
    "Emit",
    "ImagePart",
    "Message",
    "ModelNotConfiguredError",
    "ModelSettings",
    "ModelTurn",
    "Outcome",
    "Prompt",
    "PromptPart",
    "ResourceLinkPart",
    "ResourcePart",
    "SessionLike",
    "StopReason",
    "TextChunk",
    "TextPart",
    "ThoughtChunk",
    "TurnError",
    "TurnEvent",
    "UserChunk",
    "to_chat_messages",
]
