"""One model turn: conversation + prompt → chat requests and tool calls → streamed events → stop reason; and the
catalog of models a session may pick."""

from ._compaction import COMPACT_COMMAND, is_compact_command
from ._exceptions import CompactionFailedError, ContextWindowExceededError, ModelNotConfiguredError, TurnError
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
    "COMPACT_COMMAND",
    "DEFAULT_MAX_TURN_REQUESTS",
    "FAMILY_CONTEXT_WINDOWS",
    "MODEL_LIST_TIMEOUT_S",
    "CompactionFailedError",
    "ContextWindowExceededError",
    "ModelCatalog",
    "ModelNotConfiguredError",
    "ModelSettings",
    "ModelTurn",
    "SessionLike",
    "TurnError",
    "family_context_window",
    "is_compact_command",
    "offered_tools",
    "step_messages",
    "to_chat_messages",
    "usage_of",
    "user_content",
]
