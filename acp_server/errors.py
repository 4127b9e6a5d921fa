"""The root of every domain error, shared by all layers.

Each layer keeps its own exceptions in one module (``bridge/_exceptions.py``, ``pipeline/_exceptions.py``, ...);
all of them derive from :class:`ServerError`, so each face (JSON-RPC, HTTP) maps them once, by ``error_kind``::

    ServerError
     ├── bridge:   SessionNotFoundError, PromptQueueFullError, PromptDeadlineExceededError, ...
     ├── turn:     ModelNotConfiguredError
     ├── pipeline: PipelineError (StreamInactivityTimeoutError, ModelTransportError, ...)
     └── RemoteError: a request this server sent to its client failed
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

__all__ = ["InvalidInputError", "RemoteError", "ServerError"]


class ServerError(Exception):
    """A failure a client can act on: a stable ``error_kind`` plus wire-ready ``details()``.

    ``details()`` returns camelCase keys, JSON values only; the faces add ``errorKind`` (and ``retryable``) themselves.
    """

    error_kind: ClassVar[str] = "internal"
    retryable: bool = False

    def details(self) -> Mapping[str, object]:
        return {}


class InvalidInputError(ServerError):
    """The caller's input is malformed; ``errors`` lists the offending fields."""

    error_kind: ClassVar[str] = "invalid_params"

    def __init__(self, message: str, errors: list[dict[str, object]] | None = None) -> None:
        super().__init__(message)
        self.errors = errors or []

    @classmethod
    def for_field(cls, field: str, problem: str, message: str | None = None) -> Self:
        """The one way a single field's refusal is built: ``errors`` is ``[{"field": field, "message": problem}]``,
        the message ``message`` (None: ``"<field>: <problem>"``)."""
        return cls(f"{field}: {problem}" if message is None else message, [{"field": field, "message": problem}])

    def details(self) -> Mapping[str, object]:
        return {"errors": self.errors} if self.errors else {}


class RemoteError(ServerError):
    """A request this server sent to its client failed: the client answered a JSON-RPC error (``code``, its
    ``message``), or the connection closed before an answer (``code`` None)."""

    error_kind: ClassVar[str] = "client_error"

    def __init__(self, message: str, code: int | None = None, data: object = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data

    def details(self) -> Mapping[str, object]:
        return {} if self.code is None else {"clientCode": self.code}
