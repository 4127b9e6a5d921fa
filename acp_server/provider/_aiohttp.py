"""The SDK's aiohttp HTTP client for the model, with its transport errors named for what happened.

The SDK's aiohttp transport (``openai.DefaultAioHttpClient``) reads a streamed body for about half the CPU per
chunk of httpx2's own transport: aiohttp parses HTTP in C, where httpx2 runs h11 plus a cancel scope and two
exception-mapping blocks for every read. But it maps *every* aiohttp connection error (refused, reset, the server
closing mid-body) to httpx2's ``ConnectTimeout``, which the SDK then reports as "Request timed out." Here each of
those becomes what httpx2 itself would raise: ``ConnectError`` when the connection could not be made,
``ReadError`` when an open one failed; true timeouts stay timeouts. The aiohttp error stays the ``__cause__`` (its
errno included), so the pipeline's classification sees the same chain over either transport.

Asyncio only: aiohttp runs on no other event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import httpx2
import openai

__all__ = ["AioHttpModelClient"]


def _renamed(exc: httpx2.ConnectTimeout) -> httpx2.TransportError:
    """The httpx2 error ``exc`` (the SDK transport's name for any aiohttp connection error) should have been."""
    cause = exc.__cause__
    if cause is None or isinstance(cause, TimeoutError):  # aiohttp's timeouts are TimeoutErrors: keep the name
        return exc
    if isinstance(cause, aiohttp.ClientConnectorError):  # refused, unresolvable, TLS handshake, proxy connect
        return httpx2.ConnectError(str(cause))
    return httpx2.ReadError(str(cause))  # reset, or closed by the server, once connected


class _NamedStream(httpx2.AsyncByteStream):
    """A response body whose errors are renamed like the request's."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self._inner:
                yield piece
        except httpx2.ConnectTimeout as exc:
            renamed = _renamed(exc)
            if renamed is exc:
                raise
            raise renamed from exc.__cause__

    async def aclose(self) -> None:
        await self._inner.aclose()


class _NamedErrors(httpx2.AsyncBaseTransport):
    """Another transport whose ``ConnectTimeout`` for a connection error is renamed (see the module docstring)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.ConnectTimeout as exc:
            renamed = _renamed(exc)
            if renamed is exc:
                raise
            raise renamed from exc.__cause__
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _NamedStream(response.stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class AioHttpModelClient(openai.DefaultAioHttpClient):
    """``openai.DefaultAioHttpClient`` whose transports (direct, and through a proxy from the environment) name
    their errors right. The two hooks are httpx2's, the ones the SDK's aiohttp client itself overrides."""

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return _NamedErrors(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return _NamedErrors(super()._init_proxy_transport(*args, **kwargs))
