"""One model turn: conversation + prompt → chat requests and tool calls → streamed events → stop reason; and the
catalog of models a session may pick."""

from ._exceptions import ModelNotConfiguredError, TurnError
from ._models import FAMILY_CONTEXT_WINDOWS, ModelCatalog, family_context_window
from ._turn import (
    DEFAULT_MAX_TURN_REQUESTS,
    MODEL_LIST_TIMEOUT_S,
    ModelSettings,
    ModelTurn,
    SessionLike,
    offered_tools,
    usage_of,
)
from .context import step_messages, to_chat_messages, user_content

__all__ = [
    "DEFAULT_MAX_TURN_REQUESTS",
    "FAMILY_CONTEXT_WINDOWS",
    "MODEL_LIST_TIMEOUT_S",
    "ModelCatalog",
    "ModelNotConfiguredError",
    "ModelSettings",
    "ModelTurn",
    "SessionLike",
    "TurnError",
    "family_context_window",
    "offered_tools",
    "step_messages",
    "to_chat_messages",
    "usage_of",
    "user_content",
]
