"""Errors of the session bridge, one root for the layer::

    ServerError                        (acp_server.errors)
     └── BridgeError
          ├── BridgeClosedError            bridge_closed             used after close; prompts cut by shutdown
          ├── InvalidCwdError              invalid_params            a session's cwd is not an absolute path
          ├── SessionNotFoundError         session_not_found         no such session (never created or closed)
          ├── SubagentSessionError         invalid_params            load/resume of a subagent child's session
          ├── SessionAlreadyExistsError    session_already_exists    create_session with an id already in use
          ├── SessionClosedError           session_closed            prompt or fork cut short by close_session
          ├── PromptQueueFullError         prompt_queue_full         admission refused (retryable)
          └── PromptDeadlineExceededError  prompt_deadline_exceeded  accepted prompt ran out of time

Closed, not found and cut short are different things: ``SessionNotFoundError`` answers a
look-up, ``SessionClosedError`` is the outcome of work that was accepted and then lost its session.
A user cancel is not an error: the prompt's handle settles with the stop reason ``"cancelled"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from ..errors import InvalidInputError, ServerError

__all__ = [
    "BridgeClosedError",
    "BridgeError",
    "InvalidCwdError",
    "PromptDeadlineExceededError",
    "PromptQueueFullError",
    "SessionAlreadyExistsError",
    "SessionClosedError",
    "SessionNotFoundError",
    "SubagentSessionError",
]


class BridgeError(ServerError):
    """Root of the session bridge's errors."""

    error_kind: ClassVar[str] = "bridge_error"


class BridgeClosedError(BridgeError):
    """The bridge is closed: raised by calls after close; the outcome of prompts cut short by shutdown."""

    error_kind: ClassVar[str] = "bridge_closed"

    def __init__(self, message: str = "The session bridge is closed") -> None:
        super().__init__(message)


class InvalidCwdError(BridgeError, InvalidInputError):
    """A session's working directory must be an absolute path (every face checks it here, once)."""

    error_kind: ClassVar[str] = "invalid_params"

    def __init__(self, cwd: str, field: str = "cwd") -> None:
        problem = "must be an absolute path"
        InvalidInputError.__init__(self, f"{field} {problem}, got {cwd!r}", [{"field": field, "message": problem}])
        self.cwd = cwd


class SessionNotFoundError(BridgeError):
    error_kind: ClassVar[str] = "session_not_found"

    def __init__(self, session_id: str) -> None:
        super().__init__(f'Session "{session_id}" not found')
        self.session_id = session_id

    def details(self) -> Mapping[str, object]:
        return {"sessionId": self.session_id}


class SubagentSessionError(BridgeError, InvalidInputError):
    """A subagent child's session (a ``task`` call's) is stored to be read under its parent, never attached: no
    face loads, resumes or prompts it."""

    error_kind: ClassVar[str] = "invalid_params"

    def __init__(self, session_id: str, parent_id: str) -> None:
        InvalidInputError.__init__(
            self,
            f'Session "{session_id}" is a subagent of session "{parent_id}": it is listed under its parent and '
            "cannot be loaded, resumed or prompted",
            [{"field": "sessionId", "message": "a subagent's session"}],
        )
        self.session_id = session_id
        self.parent_id = parent_id


class SessionAlreadyExistsError(BridgeError):
    error_kind: ClassVar[str] = "session_already_exists"

    def __init__(self, session_id: str) -> None:
        super().__init__(f'Session "{session_id}" already exists')
        self.session_id = session_id

    def details(self) -> Mapping[str, object]:
        return {"sessionId": self.session_id}


class SessionClosedError(BridgeError):
    """The session was closed while this prompt (or fork) was waiting or running."""

    error_kind: ClassVar[str] = "session_closed"

    def __init__(self, session_id: str) -> None:
        super().__init__(f'Session "{session_id}" was closed')
        self.session_id = session_id

    def details(self) -> Mapping[str, object]:
        return {"sessionId": self.session_id}


class PromptQueueFullError(BridgeError):
    """Admission refused: the session already has ``limit`` pending prompts (waiting + running)."""

    error_kind: ClassVar[str] = "prompt_queue_full"
    retryable = True

    def __init__(self, session_id: str, limit: int, pending_count: int) -> None:
        super().__init__(f'Prompt queue full for session "{session_id}" ({pending_count}/{limit} pending)')
        self.session_id = session_id
        self.limit = limit
        self.pending_count = pending_count

    def details(self) -> Mapping[str, object]:
        return {"sessionId": self.session_id, "limit": self.limit, "pendingCount": self.pending_count}


class PromptDeadlineExceededError(BridgeError):
    """An accepted prompt did not settle within its deadline (counted from acceptance, waiting included)."""

    error_kind: ClassVar[str] = "prompt_deadline_exceeded"

    def __init__(self, session_id: str, deadline_ms: int) -> None:
        super().__init__(f'Prompt for session "{session_id}" exceeded its deadline of {deadline_ms}ms')
        self.session_id = session_id
        self.deadline_ms = deadline_ms

    def details(self) -> Mapping[str, object]:
        return {"sessionId": self.session_id, "deadlineMs": self.deadline_ms}
