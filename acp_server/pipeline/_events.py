"""The SSE reader: the ``data:`` events of one chat completion response body, each decoded with one ``json.loads``.

Invariants: one value per ``data:`` event (comments, keep-alives and empty lines never reach the watchdog, so they
never reset its timer); ``[DONE]`` ends the stream; a payload that is not JSON or not UTF-8 is ``invalid_json``;
an ``{"error": ...}`` event is the SDK's ``APIError``; the body's transport failures are mapped once
(``_transport.py``). ``close()`` releases the response.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

import anyio
from anyio.lowlevel import checkpoint

from ._exceptions import StreamContentError, redact
from ._sse import split_events
from ._transport import TransportErrors

if TYPE_CHECKING:
    import httpx2
    import openai

__all__ = ["Events"]

logger = logging.getLogger("acp_server.pipeline")

_DRAIN_S = 0.1
"""After ``[DONE]`` the rest of an HTTP/1.1 body is read for at most this long (as the SDK's own stream does), so
that the connection goes back to the pool instead of being closed."""


class Events:
    """The decoded ``data:`` events of one SSE response body: what the watchdog reads (module docstring)."""

    __slots__ = ("_body", "_ended", "_pending", "_ready", "_response", "_secrets", "_transport", "chunks")

    def __init__(self, response: httpx2.Response, secrets: tuple[str | None, ...]) -> None:
        self._response = response
        self._body: AsyncGenerator[bytes, None] = response.aiter_bytes()
        self._transport = TransportErrors(response)
        self._secrets = secrets
        self._pending = b""
        self._ready: deque[bytes] = deque()
        self._ended = False
        self.chunks = 0  # events decoded

    def __aiter__(self) -> Events:
        return self

    async def __anext__(self) -> Any:
        ready = self._ready
        while not ready:
            if self._ended:
                raise StopAsyncIteration
            await self._receive()
        data = ready.popleft()
        if data.startswith(b"[DONE]"):
            await self._finish()
            raise StopAsyncIteration
        try:
            value = json.loads(data)
        except json.JSONDecodeError as exc:
            quoted = redact(exc.doc[:80], self._secrets)
            raise StreamContentError(
                f"The model stream sent a data line that is not JSON ({exc.msg}): {quoted!r}",
                reason="invalid_json",
                chunks_received=self.chunks,
            ) from exc
        except UnicodeDecodeError as exc:
            byte = exc.object[exc.start : exc.start + 1]
            raise StreamContentError(
                f"The model stream sent a line that is not UTF-8 ({exc.reason}, byte {byte!r})",
                reason="invalid_json",
                chunks_received=self.chunks,
            ) from exc
        if isinstance(value, dict) and value.get("error"):
            raise self._error_event(value["error"])
        self.chunks += 1
        return value

    async def _receive(self) -> None:
        """Read the next piece of the body and queue the events it completes."""
        try:
            with self._transport:
                piece = await self._body.__anext__()
        except StopAsyncIteration:
            self._ended = True
            events, self._pending = split_events(self._pending, b"", final=True)
        else:
            events, self._pending = split_events(self._pending, piece)
        self._ready.extend(events)

    def _error_event(self, error: Any) -> openai.APIError:
        import openai  # only reached on a failure; the SDK is already loaded by then

        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        return openai.APIError(message, self._response.request, body=error)

    async def _finish(self) -> None:
        """After ``[DONE]``: nothing more is an event; the rest of an HTTP/1.1 body is drained, briefly."""
        self._ended = True
        self._ready.clear()
        if self._response.http_version != "HTTP/1.1":
            return
        with anyio.move_on_after(_DRAIN_S):
            try:
                async for _ in self._body:
                    await checkpoint()  # the deadline holds even over data that is already buffered
            except Exception as exc:  # the answer is over: a failing drain only costs the connection
                logger.debug("ignoring an error while draining a model stream after [DONE]: %r", exc)

    async def close(self) -> None:
        try:
            await self._response.aclose()
        finally:
            await self._body.aclose()
