"""The HTTP side of an MCP connection (Streamable HTTP, HTTP+SSE): the httpx client its transports run on, bounded.

The SDK reads a JSON answer whole and an event stream an event at a time, however large: over HTTP a message would
be bounded by nothing. :func:`bounded_http_client` gives the SDK a client whose every response body is read through
:class:`_Bounded`: a JSON body, or one event of an event stream (the bytes between two blank lines), past
:data:`~._mcp_stdio.MAX_MESSAGE_BYTES` raises :class:`MessageTooLargeError` before more is held, and tells the
connection (``on_too_large``: it ends, as a line that long ends a stdio server; the SDK itself swallows some read
errors and would wait on). Bodies are asked for and accepted unencoded only (``Accept-Encoding: identity``; a compressed
body is refused), so the bound is on what memory holds, not on what a compressor shrank.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import httpx

from ._stdio import MAX_MESSAGE_BYTES

__all__ = ["MessageTooLargeError", "bounded_http_client"]

_EVENT_END = (b"\n\n", b"\r\n\r\n", b"\r\r")
_Tell = Callable[[str], None]  # told why a body was refused


class MessageTooLargeError(httpx.ReadError):
    """An HTTP MCP server sent a message over :data:`MAX_MESSAGE_BYTES` (or a compressed one); nothing more of it
    is read."""


class _Bounded(httpx.AsyncByteStream):
    """``inner`` read through: a body (``events``: each event of an event stream) over ``limit`` bytes raises."""

    def __init__(
        self, inner: httpx.AsyncByteStream, limit: int, events: bool, request: httpx.Request, tell: _Tell
    ) -> None:
        self._inner, self._limit, self._events, self._request, self._tell = inner, limit, events, request, tell

    async def __aiter__(self) -> AsyncIterator[bytes]:
        held = b""  # the end of what came before: an event's end may straddle two chunks
        run = 0  # bytes of the current message (the body, or the event under way)
        async for chunk in self._inner:
            run += len(chunk)
            if self._events:
                seen = held + chunk
                end = max(seen.rfind(mark) + len(mark) if mark in seen else -1 for mark in _EVENT_END)
                if end >= 0:
                    run = len(seen) - end
                held = seen[-3:]
            if run > self._limit:
                reason = f"it sent a message over {self._limit} bytes"
                self._tell(reason)
                raise MessageTooLargeError(reason, request=self._request)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def _bounding(limit: int, tell: _Tell) -> Callable[[httpx.Response], Awaitable[None]]:
    """The response hook (run before a body is read) that reads every body through :class:`_Bounded` — a hook, not
    a transport of our own: httpx then keeps its own transports (the proxies the environment names)."""

    async def bound(response: httpx.Response) -> None:
        if response.headers.get("content-encoding", "identity").strip().lower() != "identity":
            await response.aclose()
            reason = "it sent a compressed body (asked for none)"
            tell(reason)
            raise MessageTooLargeError(reason, request=response.request)
        events = response.headers.get("content-type", "").lower().startswith("text/event-stream")
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Bounded(response.stream, limit, events, response.request, tell)

    return bound


def bounded_http_client(
    headers: Mapping[str, str] | None = None,
    timeout: httpx.Timeout | None = None,
    auth: Any = None,
    *,
    on_too_large: Callable[[str], None],
) -> httpx.AsyncClient:
    """An httpx client for an MCP server (the SDK's ``httpx_client_factory`` signature, ``on_too_large`` bound):
    redirects followed, its response bodies bounded (module rules); ``on_too_large(reason)`` when one is refused."""
    sent = {**(headers or {}), "Accept-Encoding": "identity"}
    hooks = {"response": [_bounding(MAX_MESSAGE_BYTES, on_too_large)]}
    return httpx.AsyncClient(headers=sent, timeout=timeout, auth=auth, follow_redirects=True, event_hooks=hooks)
