"""The one mapper from exceptions to HTTP: status, headers and JSON body; and to ``turn_error`` event payloads.

Body of every error response: ``{"code": <errorKind>, "error": <message>, ...details}``; invalid input adds
``details: [{field, message}]``. A full prompt queue is **503** with ``Retry-After: 5`` and exactly
``{code, error, sessionId, limit, pendingCount}`` (Q8); a ``session_busy`` (409) carries the same ``Retry-After``.
Anything that is not a :class:`ServerError` is a 500 ``internal`` whose traceback goes to the log, never to the
client.
"""

from __future__ import annotations

import json
import logging
from http import HTTPStatus
from typing import Any

from starlette.responses import JSONResponse

from ..bridge import PromptQueueFullError
from ..errors import InvalidInputError, ServerError
from ..pipeline import PipelineError
from ..store import SessionBusyError
from ._exceptions import MethodNotAllowedError, RequestTimeoutError, TooManyConnectionsError

__all__ = ["RETRY_AFTER_S", "error_body", "error_response", "http_status", "raw_error_response", "turn_error_payload"]

logger = logging.getLogger("acp_server.daemon")

RETRY_AFTER_S = 5
"""``Retry-After`` of a refused prompt (Q8)."""

_STATUS_BY_KIND: dict[str, int] = {
    "invalid_request": 400,
    "invalid_params": 400,
    "unauthorized": 401,
    "forbidden_host": 403,
    "forbidden_origin": 403,
    "not_found": 404,
    "session_not_found": 404,
    "prompt_not_found": 404,
    "permission_request_not_found": 404,
    "method_not_allowed": 405,
    "session_closed": 409,
    "session_busy": 409,
    "rewind_conflict": 409,
    "rewind_refused": 409,
    "request_timeout": 408,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "prompt_queue_full": 503,
    "too_many_connections": 503,
    "bridge_closed": 503,
    "model_not_configured": 503,
    "store_unavailable": 503,
    "store_busy": 503,
    "store_closed": 503,
    "prompt_deadline_exceeded": 504,
    "model_stream_timeout": 504,
}


def http_status(exc: BaseException) -> int:
    """The status of an error response: by ``error_kind``; other model failures are 502; the rest 500."""
    if isinstance(exc, ServerError):
        status = _STATUS_BY_KIND.get(exc.error_kind)
        if status is not None:
            return status
        if isinstance(exc, PipelineError):
            return 502  # the upstream model failed
    return 500


def error_body(exc: BaseException) -> dict[str, Any]:
    """The JSON body of an error response (logs the traceback of a non-domain error)."""
    if isinstance(exc, InvalidInputError):
        return {"code": "invalid_request", "error": str(exc), "details": list(exc.errors)}
    if isinstance(exc, ServerError):
        return {"code": exc.error_kind, "error": str(exc), **exc.details()}
    logger.error("internal error while handling a request", exc_info=exc)
    return {"code": "internal", "error": "Internal error"}


def _headers(exc: BaseException) -> dict[str, str]:
    headers: dict[str, str] = {}
    if isinstance(exc, PromptQueueFullError | TooManyConnectionsError | SessionBusyError):
        headers["Retry-After"] = str(RETRY_AFTER_S)
    elif isinstance(exc, RequestTimeoutError):
        headers["Connection"] = "close"  # the rest of the request may still come: the connection cannot be reused
    elif isinstance(exc, ServerError) and exc.error_kind == "unauthorized":
        headers["WWW-Authenticate"] = 'Bearer realm="acp-server"'
    elif isinstance(exc, MethodNotAllowedError):
        headers["Allow"] = ", ".join(exc.allowed)
    return headers


def error_response(exc: BaseException) -> JSONResponse:
    """The whole error response: status, body, and the headers some statuses carry."""
    return JSONResponse(error_body(exc), status_code=http_status(exc), headers=_headers(exc))


def raw_error_response(exc: BaseException) -> bytes:
    """The same response as :func:`error_response`, as HTTP/1.1 bytes with ``Connection: close``: for a connection
    that has no request cycle to answer through (refused at the cap, headers timed out)."""
    status = http_status(exc)
    body = json.dumps(error_body(exc), separators=(",", ":")).encode()
    headers = {**_headers(exc), "Content-Type": "application/json", "Content-Length": str(len(body))}
    headers["Connection"] = "close"
    head = f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + body


def turn_error_payload(exc: BaseException) -> dict[str, Any]:
    """``{code, message, data}`` of a ``turn_error`` event: the same kinds and details as the JSON-RPC face."""
    if isinstance(exc, ServerError):
        return {
            "code": exc.error_kind,
            "message": str(exc),
            "data": {**exc.details(), "retryable": exc.retryable},
        }
    logger.error("a prompt failed with an unexpected error", exc_info=exc)
    return {"code": "internal", "message": "Internal error", "data": {"retryable": False}}
