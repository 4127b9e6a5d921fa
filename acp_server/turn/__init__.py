"""One model turn: conversation + prompt → chat request → streamed events → stop reason."""

from ._exceptions import ModelNotConfiguredError, TurnError
from ._turn import ModelSettings, ModelTurn, SessionLike, to_chat_messages, user_content

__all__ = [
    "ModelNotConfiguredError",
    "ModelSettings",
    "ModelTurn",
    "SessionLike",
    "TurnError",
    "to_chat_messages",
    "user_content",
]
