"""JSON-RPC error codes, the wire error type, and the one mapper from exceptions to wire errors.

    RpcError                 an error reply: code, message, data (always with ``data.errorKind``)

``to_rpc_error(exc)`` is the only place where an exception becomes a JSON-RPC error: domain errors
(:class:`acp_server.errors.ServerError`) keep their message and details; anything else becomes -32603
``{errorKind: "internal"}`` with no traceback and no file path (the traceback goes to the log).
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import ServerError

__all__ = [
    "AUTH_REQUIRED",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "RESOURCE_NOT_FOUND",
    "RpcError",
    "to_rpc_error",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002

_CODE_BY_KIND = {
    "invalid_params": INVALID_PARAMS,
    "session_not_found": RESOURCE_NOT_FOUND,
    "auth_required": AUTH_REQUIRED,
}

logger = logging.getLogger("acp_server.rpc")


class RpcError(Exception):
    """An error reply as it goes on the wire."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    @classmethod
    def parse_error(cls, detail: str) -> RpcError:
        return cls(PARSE_ERROR, f"Parse error: {detail}", {"errorKind": "parse_error"})

    @classmethod
    def invalid_request(cls, detail: str) -> RpcError:
        return cls(INVALID_REQUEST, f"Invalid request: {detail}", {"errorKind": "invalid_request"})

    @classmethod
    def method_not_found(cls, method: str) -> RpcError:
        return cls(METHOD_NOT_FOUND, f"Method not found: {method}", {"errorKind": "method_not_found", "method": method})

    @classmethod
    def request_cancelled(cls) -> RpcError:
        return cls(REQUEST_CANCELLED, "Request cancelled", {"errorKind": "request_cancelled"})

    def to_wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


def to_rpc_error(exc: BaseException) -> RpcError:
    """Map any exception to the error reply a client sees; unexpected ones are logged with their traceback."""
    if isinstance(exc, RpcError):
        return exc
    if isinstance(exc, ServerError):
        data: dict[str, Any] = {"errorKind": exc.error_kind, **exc.details(), "retryable": exc.retryable}
        return RpcError(_CODE_BY_KIND.get(exc.error_kind, INTERNAL_ERROR), str(exc), data)
    logger.error("Internal error while handling a request", exc_info=exc)
    return RpcError(INTERNAL_ERROR, "Internal error", {"errorKind": "internal"})
