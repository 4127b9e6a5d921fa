"""A JSON-RPC connection whose outgoing messages are routed to per-request exchanges (request/response transports
such as HTTP), instead of being written to one byte stream.

Routing rule: a response goes to the exchange opened for its id; a ``session/update`` notification goes to the oldest
open streaming exchange of its ``sessionId`` (prompts of a session run one at a time, in admission order, so the
running one is always the oldest still open); anything else has no recipient and is dropped with a debug log.

Nothing is dropped for a slow reader: an exchange holds at most ``capacity`` notifications, and the handler that
sends the next one waits until the reader has taken one (backpressure up to the turn). A reader that leaves closes
its exchange; what is sent to it afterwards is discarded.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._dispatcher import Dispatcher, Message

__all__ = ["Exchange", "RoutedConnection"]

logger = logging.getLogger("acp_server.rpc")

EXCHANGE_CAPACITY = 256
"""Notifications an exchange holds before the sender waits for its reader."""


class Exchange:
    """The messages for one request: zero or more notifications, then exactly one response, then the end.

    Iterate it (one reader) to get them in that order.
    """

    def __init__(self, msg_id: str | int, session_id: str | None, capacity: int = EXCHANGE_CAPACITY) -> None:
        self.msg_id = msg_id
        self.session_id = session_id
        self.admitted = anyio.Event()
        self.response: Message | None = None
        self._send: MemoryObjectSendStream[Message]
        self._receive: MemoryObjectReceiveStream[Message]
        self._send, self._receive = anyio.create_memory_object_stream[Message](capacity)
        self._answered = False

    async def deliver(self, message: Message) -> None:
        """Queue a notification; waits while the reader is ``capacity`` behind. Discarded once closed."""
        try:
            await self._send.send(message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            logger.debug("the reader of request %r left: a notification is discarded", self.msg_id)

    def answer(self, response: Message) -> None:
        """The response: it follows every notification already queued; no more messages after it."""
        self.response = response
        self._send.close()

    async def receive(self) -> Message:
        """The next message (the response last); ``anyio.EndOfStream`` after it."""
        try:
            return await self._receive.receive()
        except anyio.EndOfStream:
            if self.response is None or self._answered:
                raise
            self._answered = True
            return self.response

    def __aiter__(self) -> Exchange:
        return self

    async def __anext__(self) -> Message:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    def close(self) -> None:
        """The HTTP side is done with this exchange (answered, or the client went away)."""
        self._send.close()
        self._receive.close()


class RoutedConnection:
    """One dispatcher plus the router of its outgoing messages (it is the dispatcher's sink)."""

    def __init__(self) -> None:
        self.dispatcher = Dispatcher(self, on_admitted=self._admitted)
        self._by_id: dict[str | int, Exchange] = {}
        self._streams: dict[str, deque[Exchange]] = {}

    def open_exchange(self, msg_id: str | int, session_id: str | None = None) -> Exchange:
        """Register a waiter for ``msg_id``; with ``session_id`` it also receives that session's updates.

        Raises ``KeyError`` when a request with this id is still open on the connection.
        """
        if msg_id in self._by_id:
            raise KeyError(msg_id)
        exchange = Exchange(msg_id, session_id)
        self._by_id[msg_id] = exchange
        if session_id is not None:
            self._streams.setdefault(session_id, deque()).append(exchange)
        return exchange

    def _admitted(self, msg_id: str | int) -> None:
        exchange = self._by_id.get(msg_id)
        if exchange is not None:
            exchange.admitted.set()

    def forget(self, exchange: Exchange) -> None:
        exchange.close()
        if self._by_id.get(exchange.msg_id) is exchange:
            del self._by_id[exchange.msg_id]
        self._unstream(exchange)

    def _unstream(self, exchange: Exchange) -> None:
        if exchange.session_id is None:
            return
        queue = self._streams.get(exchange.session_id)
        if queue is not None and exchange in queue:
            queue.remove(exchange)
            if not queue:
                del self._streams[exchange.session_id]

    # -- the dispatcher's sink ---------------------------------------------------------------------------------

    def put(self, message: Message) -> None:
        """A response (or error) goes to its exchange, which then ends."""
        if "method" in message:
            logger.debug("no immediate recipient for %s", message["method"])
            return
        exchange = self._by_id.pop(message.get("id"), None)  # type: ignore[arg-type]
        if exchange is None:
            logger.debug("no exchange waits for response %r", message.get("id"))
            return
        self._unstream(exchange)
        exchange.answer(message)

    async def send(self, message: Message) -> None:
        """A ``session/update`` goes to the oldest open stream of its session, waiting while that one is full."""
        if message.get("method") != "session/update":
            logger.debug("no recipient for %s", message.get("method"))
            return
        params: Any = message.get("params") or {}
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        queue = self._streams.get(session_id) if isinstance(session_id, str) else None
        if queue:
            await queue[0].deliver(message)
