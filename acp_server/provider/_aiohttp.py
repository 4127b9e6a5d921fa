"""The SDK's aiohttp HTTP client for the model, with its transport errors named for what happened.

The SDK's aiohttp transport (``openai.DefaultAioHttpClient``) reads a streamed body for about half the CPU per
chunk of httpx2's own transport: aiohttp parses HTTP in C, where httpx2 runs h11 plus a cancel scope and two
exception-mapping blocks for every read. But it maps *every* aiohttp connection error (refused, reset, the server
closing mid-body) to httpx2's ``ConnectTimeout``, which the SDK then reports as "Request timed out", and lets a
response it cannot parse escape as its own ``ClientResponseError`` with status 400 (which would read as the model
refusing the request). Here each becomes what httpx2 itself would raise: ``ConnectError`` when the connection could
not be made, ``ReadError`` when an open one failed, ``RemoteProtocolError`` for a response that is not HTTP; true
timeouts stay timeouts. The aiohttp error stays the ``__cause__`` (its errno included), so the pipeline's
classification sees the same chain over either transport. The session accepts response heads as large as httpx2
does (aiohttp's default refuses a header line over 8 KiB) and has no connection limit.

Asyncio only: aiohttp runs on no other event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any

import aiohttp
import httpx2
import openai

__all__ = ["AioHttpModelClient"]

MAX_HEAD_LINE_BYTES = 100 * 1024
"""The longest status or header line accepted: what httpx2's HTTP/1.1 stack accepts for a whole response head."""


def _session(transport: Any, keepalive_s: float) -> aiohttp.ClientSession:
    """The aiohttp session of one transport: its TLS context (httpx2's: ``SSL_CERT_FILE`` and the like honoured),
    no connection limit (admission is the gate, see ``MODEL_POOL_MAX_CONNECTIONS``), large heads accepted."""
    connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=keepalive_s, ssl=transport.ssl_context)
    return aiohttp.ClientSession(
        connector=connector, max_line_size=MAX_HEAD_LINE_BYTES, max_field_size=MAX_HEAD_LINE_BYTES
    )


@contextmanager
def _named_errors() -> Iterator[None]:
    """Rename what the SDK's transport raises for a failure into what httpx2 raises for it (module docstring)."""
    try:
        yield
    except httpx2.ConnectTimeout as exc:  # the SDK transport's name for any aiohttp connection error
        cause = exc.__cause__
        if cause is None or isinstance(cause, TimeoutError):  # aiohttp's timeouts are TimeoutErrors: keep the name
            raise
        if isinstance(cause, aiohttp.ClientConnectorError):  # refused, unresolvable, TLS handshake, proxy connect
            raise httpx2.ConnectError(str(cause)) from cause
        raise httpx2.ReadError(str(cause)) from cause  # reset, or closed by the server, once connected
    except aiohttp.ClientError as exc:  # one the SDK's transport leaves as it is: a response aiohttp cannot parse
        message = exc.message if isinstance(exc, aiohttp.ClientResponseError) else str(exc)
        raise httpx2.RemoteProtocolError(f"the model's response is not valid HTTP: {message}") from exc


class _NamedStream(httpx2.AsyncByteStream):
    """A response body whose errors are named like the request's."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _named_errors():
            async for piece in self._inner:
                yield piece

    async def aclose(self) -> None:
        await self._inner.aclose()


class _NamedErrors(httpx2.AsyncBaseTransport):
    """The SDK's aiohttp transport, its request's and its body's errors named as httpx2 names them."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        with _named_errors():
            response = await self._inner.handle_async_request(request)
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _NamedStream(response.stream)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class AioHttpModelClient(openai.DefaultAioHttpClient):
    """``openai.DefaultAioHttpClient`` whose transports (direct, and through a proxy from the environment) name
    their errors right. The two hooks are httpx2's, the ones the SDK's aiohttp client itself overrides."""

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return self._named(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return self._named(super()._init_proxy_transport(*args, **kwargs))

    @staticmethod
    def _named(transport: Any) -> _NamedErrors:
        # the SDK's transport takes a session factory as ``client`` (made on its first request, in the loop)
        transport.client = partial(_session, transport, transport.limits.keepalive_expiry)
        return _NamedErrors(transport)
