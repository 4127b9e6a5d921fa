"""Transport errors mapped once, at the one boundary where the pipeline reads the network itself: the response body.

``client.post`` (the request up to the headers) raises the SDK's own exceptions; the body is read here, past the
SDK, so its transport failures are mapped to the same exceptions the SDK's stream raised for them
(``APITimeoutError`` / ``APIConnectionError``, the original kept as ``__cause__``), by one table, in one context
manager, as httpx's ``map_httpcore_exceptions`` maps httpcore's. Everything downstream (classification, the
turn's final error) sees one family of transport errors whoever read the socket.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    import httpx2

__all__ = ["TransportErrors"]

_Rule = tuple[tuple[type[BaseException], ...], Callable[..., Exception]]


@functools.cache
def _table() -> tuple[_Rule, ...]:
    """What each transport failure of a body read becomes, first match wins (a timeout is also a request error).

    Built on first use: httpx2 and the SDK are loaded by then, and importing them here would cost the startup.
    """
    import ssl

    import httpx2
    import openai

    return (
        ((httpx2.TimeoutException,), openai.APITimeoutError),
        ((httpx2.RequestError, ssl.SSLError, anyio.EndOfStream), openai.APIConnectionError),
    )


class TransportErrors:
    """``with errors: await body_read()``: a transport failure leaves as the SDK's exception for it, from the
    original; anything else (the end of the body, a cancellation, a bug) passes unchanged.

    A reusable class, not ``contextlib.contextmanager``: it wraps every read of a body, and entering it costs two
    attribute lookups, not a generator.
    """

    __slots__ = ("_response", "_table")

    def __init__(self, response: httpx2.Response) -> None:
        self._response = response
        self._table = _table()

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if exc is None:
            return
        for sources, target in self._table:
            if isinstance(exc, sources):
                raise target(request=self._response.request) from exc
