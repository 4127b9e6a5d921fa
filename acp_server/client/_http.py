"""The one place where httpx2 errors and the daemon's error responses become SDK exceptions.

Most specific first; every mapped error names its request (``method``, ``url``) and chains the original.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx2

from ..retry_after import parse_retry_after
from ._exceptions import (
    DaemonClientClosedError,
    DaemonClientError,
    DaemonConnectError,
    DaemonForbiddenError,
    DaemonHTTPError,
    DaemonInvalidRequestError,
    DaemonMethodNotAllowedError,
    DaemonNotFoundError,
    DaemonPayloadTooLargeError,
    DaemonPermissionRequestNotFoundError,
    DaemonPromptNotFoundError,
    DaemonPromptQueueFullError,
    DaemonProtocolError,
    DaemonServerError,
    DaemonSessionNotFoundError,
    DaemonTimeoutError,
    DaemonTransportError,
    DaemonTurnError,
    DaemonUnauthorizedError,
    DaemonUnavailableError,
    DaemonUnsupportedMediaTypeError,
)

__all__ = ["ADMISSION_CODES", "error_from_response", "json_object", "map_httpx_errors"]

_BY_CODE: dict[str, type[DaemonHTTPError]] = {
    "invalid_request": DaemonInvalidRequestError,
    "unauthorized": DaemonUnauthorizedError,
    "forbidden_host": DaemonForbiddenError,
    "forbidden_origin": DaemonForbiddenError,
    "not_found": DaemonNotFoundError,
    "session_not_found": DaemonSessionNotFoundError,
    "prompt_not_found": DaemonPromptNotFoundError,
    "permission_request_not_found": DaemonPermissionRequestNotFoundError,
    "method_not_allowed": DaemonMethodNotAllowedError,
    "payload_too_large": DaemonPayloadTooLargeError,
    "unsupported_media_type": DaemonUnsupportedMediaTypeError,
    "bridge_closed": DaemonUnavailableError,
}

_BY_STATUS: dict[int, type[DaemonHTTPError]] = {
    400: DaemonInvalidRequestError,
    401: DaemonUnauthorizedError,
    403: DaemonForbiddenError,
    404: DaemonNotFoundError,
    405: DaemonMethodNotAllowedError,
    413: DaemonPayloadTooLargeError,
    415: DaemonUnsupportedMediaTypeError,
    503: DaemonUnavailableError,
}

ADMISSION_CODES = frozenset({*_BY_CODE, "prompt_queue_full"})
"""Error codes a prompt request can get *before* the daemon accepted it; any other error answer of a
``?wait=true`` prompt is the failure of the accepted turn (:class:`DaemonTurnError`)."""


@contextmanager
def map_httpx_errors(method: str, url: str, closed: Callable[[], bool]) -> Iterator[None]:
    """httpx2 errors raised inside become SDK errors; once ``closed()``, any is :class:`DaemonClientClosedError`."""
    try:
        yield
    except (httpx2.HTTPError, httpx2.StreamError) as exc:
        if closed():
            raise DaemonClientClosedError(f"{method} {url}: the client was closed", method=method, url=url) from exc
        error: DaemonClientError
        detail = str(exc) or type(exc).__name__
        if isinstance(exc, httpx2.SSEError):
            error = DaemonProtocolError(f"{method} {url}: bad event stream: {detail}", method=method, url=url)
        elif isinstance(exc, httpx2.TimeoutException):
            error = DaemonTimeoutError(f"{method} {url} timed out: {detail}", method=method, url=url)
        elif isinstance(exc, httpx2.ConnectError):
            error = DaemonConnectError(f"{method} {url}: cannot connect: {detail}", method=method, url=url)
        elif isinstance(exc, httpx2.TransportError):
            error = DaemonTransportError(f"{method} {url} failed: {detail}", method=method, url=url)
        elif isinstance(exc, httpx2.StreamError):
            error = DaemonTransportError(f"{method} {url}: response stream unusable: {detail}", method=method, url=url)
        else:  # DecodingError, TooManyRedirects, HTTPStatusError: the answer is not what the daemon sends
            error = DaemonProtocolError(f"{method} {url}: {detail}", method=method, url=url)
        raise error from exc


def json_object(response: httpx2.Response, method: str, url: str) -> Mapping[str, Any]:
    """The response's JSON object body, or :class:`DaemonProtocolError`."""
    try:
        body = json.loads(response.content)
    except ValueError as exc:
        raise DaemonProtocolError(
            f"{method} {url}: {response.status_code} answer is not JSON: {exc}",
            method=method,
            url=url,
            status_code=response.status_code,
        ) from exc
    if not isinstance(body, dict):
        raise DaemonProtocolError(
            f"{method} {url}: {response.status_code} answer is not a JSON object",
            method=method,
            url=url,
            status_code=response.status_code,
        )
    return body


def _int_field(body: Mapping[str, Any], key: str) -> int | None:
    value = body.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def error_from_response(
    response: httpx2.Response, method: str, url: str, *, session_id: str | None = None
) -> DaemonClientError:
    """The SDK error for an error answer (its body read). For a prompt (``session_id`` given) an error code outside
    :data:`ADMISSION_CODES` is the accepted turn's failure (:class:`DaemonTurnError`)."""
    status = response.status_code
    try:
        parsed = json.loads(response.content) if response.content else {}
    except ValueError:
        parsed = None
    body: Mapping[str, Any] = parsed if isinstance(parsed, dict) else {}
    code = body.get("code") if isinstance(body.get("code"), str) else None
    text = body.get("error")
    message = text if isinstance(text, str) and text else f"{status} {response.reason_phrase}".strip()

    if code == "prompt_queue_full":
        limit, pending = _int_field(body, "limit"), _int_field(body, "pendingCount")
        refused = body.get("sessionId")
        if limit is None or pending is None or not isinstance(refused, str):
            return DaemonProtocolError(
                f"{method} {url}: prompt_queue_full answer without sessionId, limit and pendingCount: {body!r}",
                method=method,
                url=url,
                status_code=status,
            )
        return DaemonPromptQueueFullError(
            message,
            session_id=refused,
            limit=limit,
            pending_count=pending,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
            status_code=status,
            body=body,
            method=method,
            url=url,
        )
    if session_id is not None and code is not None and code not in ADMISSION_CODES:
        data = {k: v for k, v in body.items() if k not in ("code", "error")}
        return DaemonTurnError(
            message,
            session_id=session_id,
            prompt_id=None,
            code=code,
            data=data,
            status_code=status,
            method=method,
            url=url,
        )
    cls = (_BY_CODE.get(code) if code is not None else None) or _BY_STATUS.get(status, DaemonServerError)
    return cls(message, status_code=status, code=code, body=body, method=method, url=url)
