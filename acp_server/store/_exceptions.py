"""Errors of the session store, one root for the layer::

    ServerError                        (acp_server.errors)
     └── StoreError                      store_error
          ├── StoreUnavailableError        store_unavailable  the database cannot be used (reason + path); the file
          │                                                   is never deleted or overwritten because of it
          ├── StoreClosedError             store_closed       used after ``aclose()``
          ├── StoreBusyError               store_busy         locked by another process past busy_timeout (retryable)
          ├── StoreIOError                 store_io_error     a read or write failed (disk full, I/O); rolled back
          ├── SessionBusyError             session_busy       another live process runs a turn of this session,
          │                                                   or owns it (PostgreSQL; ``instance``) (retryable)
          ├── StoredSessionNotFoundError   session_not_found  a write for a session the store does not hold (-32002)
          └── InvalidCursorError           invalid_params     a ``session/list`` cursor we did not issue (-32602)

Unavailable, closed and failed are different things: *unavailable* is the state of the database (it
could not be opened, or turned out corrupt) and lasts until the server restarts; *closed* is our own doing; *busy*
and *I/O* errors are about one call, and nothing of that call was written — but for a PostgreSQL connection lost
while a write's ``COMMIT`` was under way (its error says the connection was lost): whether it was committed is then
unknown. A PostgreSQL server that cannot be reached is an *I/O* error of each call while it lasts (the store
connects again at the next call), never *unavailable*.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Literal, TypeAlias

from ..errors import ServerError

__all__ = [
    "InvalidCursorError",
    "SessionBusyError",
    "StoreBusyError",
    "StoreClosedError",
    "StoreError",
    "StoreIOError",
    "StoreUnavailableError",
    "StoredSessionNotFoundError",
    "UnavailableReason",
]

UnavailableReason: TypeAlias = Literal["corrupt", "not_ours", "schema_too_new", "read_only", "cannot_open"]

_HINT = (
    "The file was left untouched. Fix or move it, or start acp-server with --state-dir DIR "
    "(another directory) or --no-persist (sessions in memory only)."
)


class StoreError(ServerError):
    """Root of the session store's errors."""

    error_kind: ClassVar[str] = "store_error"


class StoreUnavailableError(StoreError):
    """The session database cannot be used; every method that needs it raises this until the server restarts."""

    error_kind: ClassVar[str] = "store_unavailable"

    def __init__(self, path: str, reason: UnavailableReason, detail: str, *, hint: str = _HINT) -> None:
        super().__init__(f"Session store unavailable: {path}: {detail}. {hint}")
        self.path = path
        self.reason: UnavailableReason = reason
        self.detail = detail

    def details(self) -> Mapping[str, object]:
        return {"path": self.path, "reason": self.reason}


class StoreClosedError(StoreError):
    error_kind: ClassVar[str] = "store_closed"

    def __init__(self) -> None:
        super().__init__("The session store is closed")


class StoreBusyError(StoreError):
    """Another process held the database lock longer than ``busy_timeout``; nothing was written."""

    error_kind: ClassVar[str] = "store_busy"
    retryable = True

    def __init__(self, path: str, timeout_ms: int) -> None:
        super().__init__(f"Session store {path} stayed locked by another process for more than {timeout_ms} ms")
        self.path = path
        self.timeout_ms = timeout_ms

    def details(self) -> Mapping[str, object]:
        return {"path": self.path, "timeoutMs": self.timeout_ms}


class StoreIOError(StoreError):
    """A read or write failed (disk full, I/O error, file made read-only); its transaction was rolled back."""

    error_kind: ClassVar[str] = "store_io_error"

    def __init__(self, path: str, detail: str) -> None:
        super().__init__(f"Session store {path}: {detail}")
        self.path = path

    def details(self) -> Mapping[str, object]:
        return {"path": self.path}


class SessionBusyError(StoreError):
    """A turn of this session is running in another live process (two turns of one session never interleave), or,
    with ``instance``, another live process owns the session (PostgreSQL: one owner per live session)."""

    error_kind: ClassVar[str] = "session_busy"
    retryable = True

    def __init__(self, session_id: str, pid: int | None, *, instance: str | None = None) -> None:
        if instance is not None:
            message = (
                f'Session "{session_id}" is attached to another acp-server process (instance {instance}); retry '
                "when it has let it go, or send the request to that process"
            )
        else:
            where = f"another acp-server process (pid {pid})" if pid is not None else "another acp-server process"
            message = f'Session "{session_id}" is running a prompt in {where}; retry when it has finished'
        super().__init__(message)
        self.session_id = session_id
        self.pid = pid
        self.instance = instance

    def details(self) -> Mapping[str, object]:
        details: dict[str, object] = {"sessionId": self.session_id, "pid": self.pid}
        if self.instance is not None:
            details["instance"] = self.instance
        return details


class StoredSessionNotFoundError(StoreError):
    error_kind: ClassVar[str] = "session_not_found"

    def __init__(self, session_id: str) -> None:
        super().__init__(f'Session "{session_id}" not found')
        self.session_id = session_id

    def details(self) -> Mapping[str, object]:
        return {"sessionId": self.session_id}


class InvalidCursorError(StoreError):
    error_kind: ClassVar[str] = "invalid_params"

    def __init__(self) -> None:
        super().__init__("Invalid params for session/list: cursor: not a cursor issued by this agent")

    def details(self) -> Mapping[str, object]:
        return {"errors": [{"field": "cursor", "message": "not a cursor issued by this agent"}]}
