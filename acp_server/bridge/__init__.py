"""The session bridge: sessions, per-session prompt FIFO, synchronous admission, slots, deadlines, fork.

It speaks domain objects and domain errors only; it knows nothing of JSON-RPC, ACP wire shapes or HTTP.
"""

from ._bridge import PromptHandle, SessionBridge, SessionEntry, TurnRunner
from ._exceptions import (
    BridgeClosedError,
    BridgeError,
    PromptCancelledError,
    PromptDeadlineExceededError,
    PromptQueueFullError,
    SessionAlreadyExistsError,
    SessionClosedError,
    SessionNotFoundError,
)
from ._limits import validate_deadline_ms, validate_max_pending
from ._signal import CancelSignal

__all__ = [
    "BridgeClosedError",
    "BridgeError",
    "CancelSignal",
    "PromptCancelledError",
    "PromptDeadlineExceededError",
    "PromptHandle",
    "PromptQueueFullError",
    "SessionAlreadyExistsError",
    "SessionBridge",
    "SessionClosedError",
    "SessionEntry",
    "SessionNotFoundError",
    "TurnRunner",
    "validate_deadline_ms",
    "validate_max_pending",
]
