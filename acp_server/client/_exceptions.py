"""Errors of the daemon client SDK, one root for the layer::

    DaemonClientError                          everything the SDK raises (bad arguments aside: ValueError / TypeError)
     ├── DaemonClientClosedError               we closed it: a client or session client used after ``aclose()``
     ├── DaemonPendingPromptLimitError         local refusal (Q12): the session's local limit is reached; nothing sent
     ├── DaemonTransportError                  the network broke it: no answer, or the connection failed mid-way
     │    ├── DaemonConnectError               the daemon could not be reached
     │    └── DaemonTimeoutError               connect / read / write / pool timeout
     ├── DaemonProtocolError                   an answer that cannot be understood (bad JSON, missing field, not SSE)
     ├── DaemonEventStreamEndedError           the event stream ended (cleanly) before what we waited for
     ├── DaemonEventsLostError                 ``resync_required`` while following a prompt: its end may be lost
     ├── DaemonTurnError                       an accepted prompt failed (``turn_error``, or the ``?wait=true`` error)
     └── DaemonHTTPError                       an error response that refused the request; ``status_code``, ``code``
          ├── DaemonInvalidRequestError        400 invalid_request             ``details`` (field, message)
          ├── DaemonUnauthorizedError          401 unauthorized
          ├── DaemonForbiddenError             403 forbidden_host / forbidden_origin
          ├── DaemonNotFoundError              404 not_found (no such route)   ``path``
          │    └── DaemonFeatureUnavailableError   this daemon does not serve load / resume
          ├── DaemonSessionNotFoundError       404 session_not_found           ``session_id``
          ├── DaemonPromptNotFoundError        404 prompt_not_found            ``session_id``, ``prompt_id``
          ├── DaemonPermissionRequestNotFoundError
          │                                    404 permission_request_not_found ``session_id``, ``request_id``
          ├── DaemonMethodNotAllowedError      405 method_not_allowed          ``allowed``
          ├── DaemonPayloadTooLargeError       413 payload_too_large           ``limit``
          ├── DaemonUnsupportedMediaTypeError  415 unsupported_media_type
          ├── DaemonPromptQueueFullError       503 prompt_queue_full           ``session_id``, ``limit``,
          │                                                                    ``pending_count``, ``retry_after``
          ├── DaemonUnavailableError           503 bridge_closed (shutting down) and other 503s
          └── DaemonServerError                any other error status (500 internal, ...)

Closed, broken and ended are different things: :class:`DaemonClientClosedError` (our own ``aclose()``),
:class:`DaemonTransportError` (the peer or the network), :class:`DaemonEventStreamEndedError` (a clean end).
Every error that belongs to a request names it (``method``, ``url``) and chains the httpx2 error it wraps.
The mapping from responses and httpx2 errors to these classes lives in one place: ``_http.py``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "DaemonClientClosedError",
    "DaemonClientError",
    "DaemonConnectError",
    "DaemonEventStreamEndedError",
    "DaemonEventsLostError",
    "DaemonFeatureUnavailableError",
    "DaemonForbiddenError",
    "DaemonHTTPError",
    "DaemonInvalidRequestError",
    "DaemonMethodNotAllowedError",
    "DaemonNotFoundError",
    "DaemonPayloadTooLargeError",
    "DaemonPendingPromptLimitError",
    "DaemonPermissionRequestNotFoundError",
    "DaemonPromptNotFoundError",
    "DaemonPromptQueueFullError",
    "DaemonProtocolError",
    "DaemonServerError",
    "DaemonSessionNotFoundError",
    "DaemonTimeoutError",
    "DaemonTransportError",
    "DaemonTurnError",
    "DaemonUnauthorizedError",
    "DaemonUnavailableError",
    "DaemonUnsupportedMediaTypeError",
]


class DaemonClientError(Exception):
    """Root of the SDK's errors. ``method`` / ``url``: the request it belongs to, when there is one."""

    def __init__(self, message: str, *, method: str | None = None, url: str | None = None) -> None:
        super().__init__(message)
        self.method = method
        self.url = url


class DaemonClientClosedError(DaemonClientError):
    """The client (or session client) was closed by its owner; it cannot be used again."""


class DaemonPendingPromptLimitError(DaemonClientError):
    """Refused locally: ``session_id`` already has ``pending_count`` >= ``limit`` prompts in flight from this client.

    Nothing was sent (Q12). The daemon stays the authority; this is the early-failure guard.
    """

    def __init__(self, session_id: str, limit: int, pending_count: int) -> None:
        super().__init__(
            f'Local prompt limit reached for session "{session_id}" ({pending_count}/{limit} pending); nothing was sent'
        )
        self.session_id = session_id
        self.limit = limit
        self.pending_count = pending_count


# -- the network ------------------------------------------------------------------------------------------------


class DaemonTransportError(DaemonClientError):
    """The request failed on the network (its httpx2 error is ``__cause__``)."""


class DaemonConnectError(DaemonTransportError):
    """The daemon could not be reached (refused, unknown host, ...)."""


class DaemonTimeoutError(DaemonTransportError):
    """A connect, read, write or pool timeout of this client's ``timeout``."""


class DaemonProtocolError(DaemonClientError):
    """The daemon answered something this SDK cannot understand; ``status_code`` of the answer when known."""

    def __init__(
        self, message: str, *, method: str | None = None, url: str | None = None, status_code: int | None = None
    ) -> None:
        super().__init__(message, method=method, url=url)
        self.status_code = status_code


# -- the event stream -------------------------------------------------------------------------------------------


class DaemonEventStreamEndedError(DaemonClientError):
    """The session's event stream ended (cleanly, reconnecting brought nothing) before what was awaited.

    ``last_event_id``: the id of the last event received (None before any).
    """

    def __init__(self, message: str, *, session_id: str, last_event_id: int | None, url: str | None = None) -> None:
        super().__init__(message, method="GET", url=url)
        self.session_id = session_id
        self.last_event_id = last_event_id


class DaemonEventsLostError(DaemonClientError):
    """The daemon's ring no longer held the events after ``last_event_id`` (``resync_required``): what happened to
    ``prompt_id`` meanwhile is unknown. The prompt may still be pending on the daemon."""

    def __init__(self, *, session_id: str, prompt_id: str, last_event_id: int, oldest_event_id: int) -> None:
        super().__init__(
            f'Events of session "{session_id}" after {last_event_id} were lost (the daemon keeps them from '
            f'{oldest_event_id}); the outcome of prompt "{prompt_id}" is unknown'
        )
        self.session_id = session_id
        self.prompt_id = prompt_id
        self.last_event_id = last_event_id
        self.oldest_event_id = oldest_event_id


# -- the turn ---------------------------------------------------------------------------------------------------


class DaemonTurnError(DaemonClientError):
    """An accepted prompt failed: ``code`` is the daemon's errorKind (``model_stream_timeout``,
    ``prompt_deadline_exceeded``, ``session_closed``, ``model_http_error``, ...), ``data`` its details.

    From a ``turn_error`` event (``status_code`` None) or from the error answer of a ``?wait=true`` prompt
    (``prompt_id`` None: the daemon does not send it there).
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        prompt_id: str | None,
        code: str,
        data: Mapping[str, Any],
        status_code: int | None = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message, method=method, url=url)
        self.session_id = session_id
        self.prompt_id = prompt_id
        self.code = code
        self.data = dict(data)
        self.status_code = status_code

    @property
    def retryable(self) -> bool:
        """What the daemon said (``data.retryable``); False when it did not say."""
        return self.data.get("retryable") is True


# -- error responses --------------------------------------------------------------------------------------------


class DaemonHTTPError(DaemonClientError):
    """The daemon refused the request: ``status_code``, ``code`` (its errorKind; None for a non-JSON body),
    ``body`` (the whole JSON body, {} when none)."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        code: str | None,
        body: Mapping[str, Any],
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message, method=method, url=url)
        self.status_code = status_code
        self.code = code
        self.body = dict(body)


class DaemonInvalidRequestError(DaemonHTTPError):
    """400: ``details`` lists the offending fields as ``{"field", "message"}``."""

    @property
    def details(self) -> Sequence[Mapping[str, Any]]:
        details = self.body.get("details")
        return [d for d in details if isinstance(d, Mapping)] if isinstance(details, list) else []


class DaemonUnauthorizedError(DaemonHTTPError):
    """401: no token, or the wrong one (see ``token`` / ``ACP_SERVER_TOKEN``)."""


class DaemonForbiddenError(DaemonHTTPError):
    """403: a refused ``Host`` or ``Origin`` (``code`` says which)."""


class DaemonNotFoundError(DaemonHTTPError):
    """404 ``not_found``: the daemon has no such route (``path``)."""

    @property
    def path(self) -> str | None:
        path = self.body.get("path")
        return path if isinstance(path, str) else None


class DaemonFeatureUnavailableError(DaemonNotFoundError):
    """This daemon does not serve ``feature`` (e.g. ``session.load``, ``session.resume``)."""

    def __init__(self, feature: str, cause: DaemonNotFoundError) -> None:
        super().__init__(
            f"This daemon does not serve {feature}",
            status_code=cause.status_code,
            code=cause.code,
            body=cause.body,
            method=cause.method,
            url=cause.url,
        )
        self.feature = feature


class DaemonSessionNotFoundError(DaemonHTTPError):
    """404 ``session_not_found``: no such session (never created, or closed)."""

    @property
    def session_id(self) -> str | None:
        session_id = self.body.get("sessionId")
        return session_id if isinstance(session_id, str) else None


class DaemonPromptNotFoundError(DaemonHTTPError):
    """404 ``prompt_not_found``: no such prompt is pending in the session (unknown, or it already ended)."""

    @property
    def session_id(self) -> str | None:
        session_id = self.body.get("sessionId")
        return session_id if isinstance(session_id, str) else None

    @property
    def prompt_id(self) -> str | None:
        prompt_id = self.body.get("promptId")
        return prompt_id if isinstance(prompt_id, str) else None


class DaemonPermissionRequestNotFoundError(DaemonHTTPError):
    """404 ``permission_request_not_found``: no such permission request is pending in the session (answered
    already, ended with its prompt, or another session's)."""

    @property
    def session_id(self) -> str | None:
        session_id = self.body.get("sessionId")
        return session_id if isinstance(session_id, str) else None

    @property
    def request_id(self) -> str | None:
        request_id = self.body.get("requestId")
        return request_id if isinstance(request_id, str) else None


class DaemonMethodNotAllowedError(DaemonHTTPError):
    """405: the route exists with other methods (``allowed``)."""

    @property
    def allowed(self) -> tuple[str, ...]:
        allowed = self.body.get("allowed")
        return tuple(a for a in allowed if isinstance(a, str)) if isinstance(allowed, list) else ()


class DaemonPayloadTooLargeError(DaemonHTTPError):
    """413: the body is over the daemon's ``--max-body-bytes`` (``limit``)."""

    @property
    def limit(self) -> int | None:
        limit = self.body.get("limit")
        return limit if isinstance(limit, int) and not isinstance(limit, bool) else None


class DaemonUnsupportedMediaTypeError(DaemonHTTPError):
    """415: the body was not sent as ``application/json``."""


class DaemonPromptQueueFullError(DaemonHTTPError):
    """503 ``prompt_queue_full`` (Q8): the daemon refused the prompt; nothing was accepted.

    ``limit`` and ``pending_count`` are the daemon's; ``retry_after`` the seconds of its ``Retry-After``
    header, read by :func:`acp_server.retry_after.parse_retry_after` (None when absent or not usable).
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        limit: int,
        pending_count: int,
        retry_after: float | None,
        status_code: int,
        body: Mapping[str, Any],
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code, code="prompt_queue_full", body=body, method=method, url=url)
        self.session_id = session_id
        self.limit = limit
        self.pending_count = pending_count
        self.retry_after = retry_after


class DaemonUnavailableError(DaemonHTTPError):
    """503 other than a full queue: ``bridge_closed`` (the daemon is shutting down), ``model_not_configured``."""


class DaemonServerError(DaemonHTTPError):
    """Any other error status: 500 ``internal``, an unexpected 4xx/5xx, or a non-JSON error page."""
