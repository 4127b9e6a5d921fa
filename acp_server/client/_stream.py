"""``GET /session/{id}/events`` as an async iterator of typed events that reconnects with ``Last-Event-ID``.

The SSE parsing is httpx2's (``httpx2.EventSource``). One response is open at a time; it is closed (in a shielded,
bounded scope) whenever reading stops: a clean end, a network error, a cancellation, ``aclose()``.

Reconnecting: after the stream ends before ``session_closed``, or breaks, the stream reconnects after
``reconnect_delays[n]`` seconds for the n-th attempt in a row that brought no event; when the delays are spent it
raises the last network error, or :class:`DaemonEventStreamEndedError` after a clean end. An error answer to a
reconnect (``session_not_found``, ``unauthorized``, ...) is raised at once. ``resync_required`` is yielded like any
event (the daemon's ring no longer held what was asked; live events follow).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from types import TracebackType
from typing import Protocol

import anyio
import httpx2

from ._events import DaemonEvent, SessionClosedEvent, parse_event
from ._exceptions import (
    DaemonClientClosedError,
    DaemonClientError,
    DaemonEventStreamEndedError,
    DaemonProtocolError,
    DaemonTransportError,
)
from ._http import map_httpx_errors

__all__ = ["EventStream"]

logger = logging.getLogger("acp_server.client")

_CLOSE_TIMEOUT_S = 1.0


class _Owner(Protocol):
    """What an event stream needs from its client."""

    @property
    def closed(self) -> bool: ...

    def _events_url(self, session_id: str) -> str: ...

    async def _open_events(self, session_id: str, last_event_id: int | None) -> httpx2.Response: ...


class EventStream:
    """The events of one session after ``last_event_id`` (None: only new ones). Use ``async with`` to connect
    eagerly and to close deterministically; plain ``async for`` connects on the first event and closes at the end.

    ``last_event_id`` follows the events read, so a later ``client.events(session_id, stream.last_event_id)``
    continues where this one stopped.
    """

    def __init__(
        self, owner: _Owner, session_id: str, last_event_id: int | None, reconnect_delays: Sequence[float]
    ) -> None:
        self._owner = owner
        self.session_id = session_id
        self.url = owner._events_url(session_id)
        self._last_event_id = last_event_id
        self._delays = tuple(reconnect_delays)
        self._response: httpx2.Response | None = None
        self._source: AsyncIterator[httpx2.ServerSentEvent] | None = None
        self._started = False
        self._attempts = 0  # reconnects in a row that brought no event
        self._failure: DaemonTransportError | None = None  # why the last connection ended (None: cleanly)
        self._finished = False  # session_closed was read: the end is normal
        self._closed = False

    @property
    def last_event_id(self) -> int | None:
        """The id of the last event read (or the one it started after)."""
        return self._last_event_id

    @property
    def closed(self) -> bool:
        return self._closed

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the subscription now (the daemon subscribes before it answers), so no later event is missed."""
        self._check_usable()
        if not self._started:
            self._started = True
            await self._connect()

    async def __aenter__(self) -> EventStream:
        try:
            await self.connect()
        except BaseException:
            await self.aclose()
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the response; idempotent. Iterating afterwards ends at once."""
        if self._closed:
            return
        self._closed = True
        await self._disconnect()

    # -- iteration ---------------------------------------------------------------------------------------------

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> DaemonEvent:
        if self._closed:
            raise StopAsyncIteration
        self._check_usable()
        if not self._started:
            self._started = True
            await self._connect()
        while True:
            if self._source is None:
                await self._reconnect()
            assert self._source is not None
            try:
                with map_httpx_errors("GET", self.url, lambda: self._owner.closed):
                    sse = await self._source.__anext__()
            except StopAsyncIteration:
                await self._disconnect()
                if self._finished:
                    await self.aclose()
                    raise
                self._failure = None
                continue
            except DaemonTransportError as exc:
                await self._disconnect()
                self._failure = exc
                continue
            except BaseException:  # cancelled, closed, a protocol error: the response must not outlive us
                await self._disconnect()
                raise
            try:
                event = parse_event(sse, self.session_id)
            except ValueError as exc:
                await self.aclose()
                raise DaemonProtocolError(f"GET {self.url}: {exc}", method="GET", url=self.url) from exc
            self._attempts = 0
            self._last_event_id = event.id
            if isinstance(event, SessionClosedEvent):
                self._finished = True
            return event

    # -- connections -------------------------------------------------------------------------------------------

    def _check_usable(self) -> None:
        if self._owner.closed:
            raise DaemonClientClosedError(f"GET {self.url}: the client is closed", method="GET", url=self.url)
        if self._closed:
            raise DaemonClientClosedError(f"GET {self.url}: this event stream is closed", method="GET", url=self.url)

    async def _connect(self) -> None:
        response = await self._owner._open_events(self.session_id, self._last_event_id)
        self._response = response
        self._source = httpx2.EventSource(response).__aiter__()

    async def _reconnect(self) -> None:
        while True:
            if self._attempts >= len(self._delays):
                if self._failure is not None:
                    raise self._failure
                raise DaemonEventStreamEndedError(
                    f"GET {self.url}: the event stream ended (last event {self._last_event_id})",
                    session_id=self.session_id,
                    last_event_id=self._last_event_id,
                    url=self.url,
                )
            delay = self._delays[self._attempts]
            self._attempts += 1
            logger.debug("event stream of session %s: reconnecting in %.2fs", self.session_id, delay)
            if delay > 0:
                await anyio.sleep(delay)
            self._check_usable()
            try:
                await self._connect()
                return
            except DaemonTransportError as exc:
                self._failure = exc

    async def _disconnect(self) -> None:
        response, source = self._response, self._source
        self._response = self._source = None
        if response is None:
            return
        with anyio.move_on_after(_CLOSE_TIMEOUT_S, shield=True):
            try:
                if source is not None and hasattr(source, "aclose"):
                    await source.aclose()
                await response.aclose()
            except (httpx2.HTTPError, httpx2.StreamError, OSError, DaemonClientError) as exc:  # W7: closing errors
                logger.debug("event stream of session %s: error while closing: %r", self.session_id, exc)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open" if self._response is not None else "idle"
        return f"<EventStream {self.session_id} {state} last_event_id={self._last_event_id}>"
