"""The session bridge: sessions, per-session prompt FIFO, synchronous admission, slots, deadlines, fork, slash
commands, and an ordered event stream per admitted prompt.

It speaks domain objects and domain errors only; it knows nothing of JSON-RPC, ACP wire shapes or HTTP.
The ids Q1–Q14 cited in its comments are the queue requirements written out in ``docs/requirements.md``.
"""

from ._bridge import SessionBridge, TurnRunner
from ._client_prompt import check_system_prompt
from ._exceptions import (
    BridgeClosedError,
    BridgeError,
    InvalidCwdError,
    PromptDeadlineExceededError,
    PromptQueueFullError,
    SessionAlreadyExistsError,
    SessionClosedError,
    SessionNotFoundError,
)
from ._limits import validate_deadline_ms, validate_max_pending
from ._prompt import PromptHandle
from ._roots import MAX_ADDITIONAL_DIRECTORIES, check_additional_directories
from ._session import SessionEntry, SettingsChange
from ._settings import Choice, SettingsRules
from ._stream import DEFAULT_COALESCE_BYTES, DEFAULT_STREAM_CAPACITY, PromptStream

__all__ = [
    "DEFAULT_COALESCE_BYTES",
    "DEFAULT_STREAM_CAPACITY",
    "MAX_ADDITIONAL_DIRECTORIES",
    "BridgeClosedError",
    "BridgeError",
    "Choice",
    "InvalidCwdError",
    "PromptDeadlineExceededError",
    "PromptHandle",
    "PromptQueueFullError",
    "PromptStream",
    "SessionAlreadyExistsError",
    "SessionBridge",
    "SessionClosedError",
    "SessionEntry",
    "SessionNotFoundError",
    "SettingsChange",
    "SettingsRules",
    "TurnRunner",
    "check_additional_directories",
    "check_system_prompt",
    "validate_deadline_ms",
    "validate_max_pending",
]
