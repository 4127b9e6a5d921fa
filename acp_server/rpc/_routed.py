"""A JSON-RPC connection whose outgoing messages are routed to per-request exchanges (request/response transports
such as HTTP), instead of being written to one byte stream.

Routing rule: a response goes to the exchange opened for its id; a notification goes to the exchange of the request
whose handler sent it (``origin``: a prompt's updates to that prompt's exchange, a load's replay to the load's),
never by session, so a prompt still being drained can't receive its successor's updates; anything else has no
recipient and is dropped with a debug log.

Nothing is dropped for a slow reader: an exchange holds at most ``capacity`` notifications, and the handler that
sends the next one waits until the reader has taken one (backpressure up to the turn). A reader that leaves closes
its exchange; what is sent to it afterwards is discarded.
"""

from __future__ import annotations

import logging

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

    def __init__(self, msg_id: str | int, capacity: int = EXCHANGE_CAPACITY) -> None:
        self.msg_id = msg_id
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

    def open_exchange(self, msg_id: str | int) -> Exchange:
        """Register a waiter for ``msg_id``: its response, and the notifications its handler sends.

        Raises ``KeyError`` when a request with this id is still open on the connection.
        """
        if msg_id in self._by_id:
            raise KeyError(msg_id)
        exchange = self._by_id[msg_id] = Exchange(msg_id)
        return exchange

    def _admitted(self, msg_id: str | int) -> None:
        exchange = self._by_id.get(msg_id)
        if exchange is not None:
            exchange.admitted.set()

    def forget(self, exchange: Exchange) -> None:
        exchange.close()
        if self._by_id.get(exchange.msg_id) is exchange:
            del self._by_id[exchange.msg_id]

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
        exchange.answer(message)

    async def send(self, message: Message, origin: str | int | None = None) -> None:
        """A notification goes to the exchange of the request that sent it, waiting while that one is full."""
        exchange = self._by_id.get(origin) if origin is not None else None
        if exchange is None:
            logger.debug("no recipient for %s (from request %r)", message.get("method"), origin)
            return
        await exchange.deliver(message)
