"""One model turn: conversation + prompt → chat requests and tool calls → streamed events → stop reason."""

from ._exceptions import ModelNotConfiguredError, TurnError
from ._messages import step_messages, to_chat_messages, user_content
from ._turn import DEFAULT_MAX_TURN_REQUESTS, ModelSettings, ModelTurn, SessionLike, offered_tools

__all__ = [
    "DEFAULT_MAX_TURN_REQUESTS",
    "ModelNotConfiguredError",
    "ModelSettings",
    "ModelTurn",
    "SessionLike",
    "TurnError",
    "offered_tools",
    "step_messages",
    "to_chat_messages",
    "user_content",
]
