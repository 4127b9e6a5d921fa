"""Request guards as plain ASGI middleware (no ``BaseHTTPMiddleware``): each answers through the one error mapper.

Order, outermost first: CORS (only with ``--allow-origin``) → :class:`RequestGuard` (Origin, Host, bearer
token; HTTP requests and WebSocket upgrades alike) → :class:`BodyLimit` (size and time of the body). ``/health``
needs no token.
"""

from __future__ import annotations

import hmac

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from ..errors import ServerError
from ._errors import error_response
from ._exceptions import (
    ForbiddenHostError,
    ForbiddenOriginError,
    RequestBodyTooLargeError,
    RequestTimeoutError,
    UnauthorizedError,
)
from ._options import DEFAULT_BODY_TIMEOUT_S, is_loopback_host

__all__ = ["PUBLIC_PATHS", "BodyLimit", "RequestGuard"]

PUBLIC_PATHS = frozenset({"/health"})
"""Paths served without a token."""


def _host_name(host_header: str) -> str:
    """The name part of a ``Host`` header: ``[::1]:4170`` → ``::1``, ``localhost:4170`` → ``localhost``."""
    if host_header.startswith("["):
        return host_header[1:].partition("]")[0]
    return host_header.rpartition(":")[0] if host_header.count(":") == 1 else host_header


class RequestGuard:
    """Refuses, before any route runs: a browser ``Origin`` that is not allowed; on a tokenless daemon, a ``Host``
    that is not a loopback name (DNS rebinding); with a token, a request without the right bearer (compared in
    constant time)."""

    def __init__(self, app: ASGIApp, *, token: str | None, allow_origins: tuple[str, ...], check_host: bool) -> None:
        self.app = app
        self._token = token.encode() if token else None
        self._allow_origins = frozenset(allow_origins)
        self._check_host = check_host

    def _refusal(self, scope: Scope) -> ServerError | None:
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is not None and "*" not in self._allow_origins and origin not in self._allow_origins:
            return ForbiddenOriginError(origin)
        if self._check_host:
            host = headers.get("host", "")
            if not is_loopback_host(_host_name(host)):
                return ForbiddenHostError(host)
        if self._token is not None and scope["path"] not in PUBLIC_PATHS and not self._authorized(headers):
            return UnauthorizedError()
        return None

    def _authorized(self, headers: Headers) -> bool:
        assert self._token is not None
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(credentials.strip().encode(), self._token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            refusal = self._refusal(scope)
            if refusal is not None:
                if scope["type"] == "http":
                    await error_response(refusal)(scope, receive, send)
                else:
                    await _deny_websocket(refusal, scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _deny_websocket(refusal: ServerError, scope: Scope, receive: Receive, send: Send) -> None:
    """Refuse a WebSocket upgrade with the same status and body as HTTP (the ASGI denial-response extension), or,
    where the server lacks it, by closing before the handshake (the server answers 403)."""
    websocket = WebSocket(scope, receive, send)
    if "websocket.http.response" in scope.get("extensions", {}):
        await websocket.send_denial_response(error_response(refusal))
    else:
        await websocket.close(1008)


class BodyLimit:
    """Request bodies over ``max_bytes`` get 413: at once when ``Content-Length`` says so, else when reading
    crosses the limit (the route's read raises :class:`RequestBodyTooLargeError`, mapped like any error).

    A body not complete ``timeout_s`` after the request reached the app gets 408 (the read raises
    :class:`RequestTimeoutError`; its response closes the connection). Once the body is complete, ``receive`` is
    the server's again: waiting for a disconnect (an SSE stream, ``?wait=true``) has no time limit.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> None:
        self.app = app
        self._max_bytes = max_bytes
        self._timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = Headers(scope=scope).get("content-length")
        if declared is not None and declared.strip().isdigit() and int(declared) > self._max_bytes:
            await error_response(RequestBodyTooLargeError(self._max_bytes))(scope, receive, send)
            return
        received = 0
        complete = False
        deadline = anyio.current_time() + self._timeout_s

        async def limited_receive() -> Message:
            nonlocal received, complete
            if complete:
                return await receive()
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())) as late:
                message = await receive()
            if late.cancelled_caught:
                raise RequestTimeoutError("body", self._timeout_s)
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self._max_bytes:
                    raise RequestBodyTooLargeError(self._max_bytes)
                complete = not message.get("more_body", False)
            else:
                complete = True  # http.disconnect: nothing more will come
            return message

        await self.app(scope, limited_receive, send)
