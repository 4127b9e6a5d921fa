"""One server-side HTTP/1.1 connection: h11 parses and frames; this module only moves bytes over anyio.

Closed, broken and ended stay apart: ``abort()`` is us breaking the connection on purpose, ``peer_closed`` is
the client closing (or resetting) it, and a response ends cleanly with ``end_response()``.
"""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import anyio
import h11
from anyio.abc import SocketAttribute, SocketStream

_RECEIVE_SIZE = 65536


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """A complete request: header names lower-case (repeated headers joined with ``", "``)."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes
    body_too_large: bool


class HttpConnection:
    """Requests in, responses out, one at a time; only one task reads from the stream at any moment."""

    def __init__(self, stream: SocketStream, *, max_body_bytes: int) -> None:
        self._stream = stream
        self._h11 = h11.Connection(h11.SERVER)
        self._max_body_bytes = max_body_bytes
        self.peer_closed = False
        self.aborted = False
        self._closed = False

    @property
    def response_ended(self) -> bool:
        """True once the whole response was handed to h11 (its last bytes may still be in flight)."""
        return self._h11.our_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED)

    async def _receive_into_h11(self) -> None:
        try:
            data = await self._stream.receive(_RECEIVE_SIZE)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            data = b""
        if not data:
            self.peer_closed = not self.aborted
        self._h11.receive_data(data)

    async def receive_request(self) -> HttpRequest | None:
        """Read the next complete request; None when the peer closed the connection first.

        A body over the limit is read and dropped (``body_too_large``) so that the connection stays usable.
        Raises ``h11.RemoteProtocolError`` for a malformed request.
        """
        request: h11.Request | None = None
        body = bytearray()
        too_large = False
        while True:
            event = self._h11.next_event()
            if event is h11.NEED_DATA:
                await self._receive_into_h11()
            elif isinstance(event, h11.Request):
                request = event
                if self._h11.they_are_waiting_for_100_continue:
                    await self.send(h11.InformationalResponse(status_code=100, headers=[]))
            elif isinstance(event, h11.Data):
                too_large = too_large or len(body) + len(event.data) > self._max_body_bytes
                if not too_large:
                    body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert request is not None  # h11 emits Request before EndOfMessage
                return HttpRequest(
                    method=request.method.decode("ascii"),
                    target=request.target.decode("ascii", "replace"),
                    headers=_headers(request.headers),
                    body=bytes(body) if not too_large else b"",
                    body_too_large=too_large,
                )
            else:  # ConnectionClosed (PAUSED cannot happen at the start of a cycle)
                return None

    async def send(self, event: h11.Event) -> None:
        data = self._h11.send(event)
        if data:
            await self._stream.send(data)

    async def start_response(self, status: int, headers: Iterable[tuple[str, str]]) -> None:
        """Send the status line and headers; without a content-length h11 frames the body as chunked."""
        await self.send(h11.Response(status_code=status, headers=list(headers)))

    async def send_body_part(self, data: bytes) -> None:
        await self.send(h11.Data(data=data))

    async def end_response(self) -> None:
        await self.send(h11.EndOfMessage())

    async def send_response(self, status: int, headers: Iterable[tuple[str, str]], body: bytes) -> None:
        """A complete response with a ``content-length``."""
        await self.start_response(status, [*headers, ("content-length", str(len(body)))])
        await self.send_body_part(body)
        await self.end_response()

    def can_respond(self) -> bool:
        """True while no response has started and both ends are still open."""
        return not (self._closed or self.peer_closed) and self._h11.our_state in (h11.IDLE, h11.SEND_RESPONSE)

    async def wait_peer_closed(self) -> None:
        """Return once the peer closed or reset the connection, or we aborted it.

        Bytes that arrive meanwhile (a pipelined request) stay buffered in h11 for the next cycle.
        """
        while not (self.peer_closed or self.aborted):
            await self._receive_into_h11()

    def start_next_cycle(self) -> bool:
        """Prepare for the next request on a kept-alive connection; False when the connection must close."""
        if self._closed or self._h11.our_state is not h11.DONE or self._h11.their_state is not h11.DONE:
            return False
        self._h11.start_next_cycle()
        return True

    async def abort(self) -> None:
        """Break the connection on purpose: an RST (``SO_LINGER`` 0) where the socket allows, else a close."""
        self.aborted = True
        raw = self._stream.extra(SocketAttribute.raw_socket, None)
        if raw is not None:
            with contextlib.suppress(OSError):  # the peer closed first: a plain close is all that is left
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await self.aclose()

    async def aclose(self) -> None:
        """Close the stream (idempotent; safe under cancellation)."""
        if not self._closed:
            self._closed = True
            await anyio.aclose_forcefully(self._stream)


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in raw:  # h11 lower-cases names
        key, text = name.decode("ascii"), value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    return headers
