"""Errors of the HTTP face itself, one root for the layer::

    ServerError                           (acp_server.errors)
     ├── InvalidInputError                (acp_server.errors; schema failures of a prompt body)
     └── DaemonError
          ├── InvalidRequestError         invalid_request         malformed JSON, body, query or header (also an
          │                                                       InvalidInputError: ``errors`` lists the fields)
          ├── UnsupportedMediaTypeError   unsupported_media_type  a body that is not ``application/json``
          ├── UnauthorizedError           unauthorized            missing or wrong ``Authorization: Bearer``
          ├── ForbiddenHostError          forbidden_host          tokenless loopback daemon, non-loopback ``Host``
          ├── ForbiddenOriginError        forbidden_origin        a browser ``Origin`` not in ``--allow-origin``
          ├── RouteNotFoundError          not_found               no such route
          ├── PromptNotFoundError         prompt_not_found        no such pending prompt in the session
          ├── PermissionRequestNotFoundError  permission_request_not_found: no such pending permission request
          │                                   in the session (answered, ended with its prompt, or another's)
          ├── MethodNotAllowedError       method_not_allowed      the route exists, not with this method
          ├── RequestBodyTooLargeError    payload_too_large       body over ``--max-body-bytes``
          ├── RequestTimeoutError         request_timeout         headers or body not complete in time
          ├── TooManyConnectionsError     too_many_connections    ``--max-connections`` open, none displaceable
          └── ListenError                 listen_failed           the address could not be bound (startup)

The HTTP status of every error (these and the bridge's and pipeline's) is decided in one place: ``_errors.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from ..errors import InvalidInputError, ServerError

__all__ = [
    "DaemonError",
    "ForbiddenHostError",
    "ForbiddenOriginError",
    "InvalidRequestError",
    "ListenError",
    "MethodNotAllowedError",
    "PermissionRequestNotFoundError",
    "PromptNotFoundError",
    "RequestBodyTooLargeError",
    "RequestTimeoutError",
    "RouteNotFoundError",
    "TooManyConnectionsError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
]


class DaemonError(ServerError):
    """Root of the HTTP face's own errors."""

    error_kind: ClassVar[str] = "daemon_error"


class InvalidRequestError(DaemonError, InvalidInputError):
    """The request cannot be understood; ``errors`` names the offending fields (``field``, ``message``)."""

    error_kind: ClassVar[str] = "invalid_request"

    def __init__(self, message: str, errors: list[dict[str, object]] | None = None) -> None:
        InvalidInputError.__init__(self, message, errors)


class UnsupportedMediaTypeError(DaemonError):
    error_kind: ClassVar[str] = "unsupported_media_type"

    def __init__(self, content_type: str) -> None:
        super().__init__(f"Expected Content-Type application/json, got {content_type or 'none'!r}")
        self.content_type = content_type


class UnauthorizedError(DaemonError):
    error_kind: ClassVar[str] = "unauthorized"

    def __init__(self) -> None:
        super().__init__("Missing or invalid bearer token (send 'Authorization: Bearer <token>')")


class ForbiddenHostError(DaemonError):
    """A tokenless daemon answers only requests addressed to a loopback name (defeats DNS rebinding)."""

    error_kind: ClassVar[str] = "forbidden_host"

    def __init__(self, host: str) -> None:
        super().__init__(f"Host {host!r} is not a loopback name; this daemon has no token and serves loopback only")


class ForbiddenOriginError(DaemonError):
    """A browser request from an origin not listed in ``--allow-origin`` (defeats cross-site requests)."""

    error_kind: ClassVar[str] = "forbidden_origin"

    def __init__(self, origin: str) -> None:
        super().__init__(f"Origin {origin!r} is not allowed (see --allow-origin)")
        self.origin = origin


class RouteNotFoundError(DaemonError):
    error_kind: ClassVar[str] = "not_found"

    def __init__(self, path: str) -> None:
        super().__init__(f"No route for {path}")
        self.path = path

    def details(self) -> Mapping[str, object]:
        return {"path": self.path}


class PromptNotFoundError(DaemonError):
    """No prompt with this id is pending in the session (unknown, or it has already ended)."""

    error_kind: ClassVar[str] = "prompt_not_found"

    def __init__(self, session_id: str, prompt_id: str) -> None:
        super().__init__(f'No pending prompt "{prompt_id}" in session "{session_id}"')
        self.session_id = session_id
        self.prompt_id = prompt_id

    def details(self) -> Mapping[str, object]:
        return {"sessionId": self.session_id, "promptId": self.prompt_id}


class PermissionRequestNotFoundError(DaemonError):
    """No permission request with this id is pending in the session: answered already, ended with its prompt
    (cancel, deadline, close), or another session's."""

    error_kind: ClassVar[str] = "permission_request_not_found"

    def __init__(self, session_id: str, request_id: str) -> None:
        super().__init__(f'No pending permission request "{request_id}" in session "{session_id}"')
        self.session_id = session_id
        self.request_id = request_id

    def details(self) -> Mapping[str, object]:
        return {"sessionId": self.session_id, "requestId": self.request_id}


class MethodNotAllowedError(DaemonError):
    error_kind: ClassVar[str] = "method_not_allowed"

    def __init__(self, method: str, path: str, allowed: Sequence[str]) -> None:
        super().__init__(f"{method} is not allowed on {path}")
        self.allowed = tuple(allowed)

    def details(self) -> Mapping[str, object]:
        return {"allowed": list(self.allowed)}


class RequestBodyTooLargeError(DaemonError):
    error_kind: ClassVar[str] = "payload_too_large"

    def __init__(self, limit: int) -> None:
        super().__init__(f"Request body exceeds the {limit}-byte limit")
        self.limit = limit

    def details(self) -> Mapping[str, object]:
        return {"limit": self.limit}


class RequestTimeoutError(DaemonError):
    """The request's ``part`` (``"headers"`` or ``"body"``) was not complete within its timeout; the connection is
    closed after the answer."""

    error_kind: ClassVar[str] = "request_timeout"

    def __init__(self, part: str, timeout_s: float) -> None:
        super().__init__(f"The request {part} were not complete within {timeout_s:g} s")
        self.part = part
        self.timeout_ms = round(timeout_s * 1000)

    def details(self) -> Mapping[str, object]:
        return {"part": self.part, "timeoutMs": self.timeout_ms}


class TooManyConnectionsError(DaemonError):
    """``--max-connections`` connections are open and none of them is only waiting for its headers."""

    error_kind: ClassVar[str] = "too_many_connections"
    retryable = True

    def __init__(self, limit: int) -> None:
        super().__init__(f"Too many open connections (limit {limit}); retry later")
        self.limit = limit

    def details(self) -> Mapping[str, object]:
        return {"limit": self.limit}


class ListenError(DaemonError):
    """The listening socket could not be created (address in use, not local, permission)."""

    error_kind: ClassVar[str] = "listen_failed"

    def __init__(self, host: str, port: int, reason: str) -> None:
        super().__init__(f"cannot listen on {host}:{port}: {reason}")
        self.host = host
        self.port = port
