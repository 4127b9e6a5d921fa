"""A JSON-RPC connection whose outgoing messages are routed to long-lived :class:`Channel` s (one per stream of a
remote transport: ACP's Streamable HTTP has a connection stream and one stream per session; a WebSocket has one).

Routing rule: the transport names the channel of each request when it submits it; that request's response *and*
every notification and request its handler sends (``origin``: a prompt's updates and permission requests, a load's
replay) go to that channel, so they stay in order with each other on one stream. A message with no known request (a
reply to a malformed message, a notification sent on behalf of no request) goes to the ``fallback`` channel. The
client's responses to our requests come back on any stream (they are matched by id: :meth:`RoutedConnection.route`
lets them through). A request to the client that finds its channel closed fails at once (nothing would answer it).

Nothing is dropped for a slow reader: a channel holds ``capacity`` messages before the handler sending the next
notification waits for its reader (backpressure up to the turn). Replies never wait (they are written from
done-callbacks): they are queued even over ``capacity``, up to ``hard_limit``, past which the channel reports overflow
(its owner drops the connection: loud, never a silent loss). A closed channel discards what is sent to it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio

from ..errors import RemoteError
from ._dispatcher import Message
from ._errors import RpcError

__all__ = ["Channel", "RoutedConnection"]

logger = logging.getLogger("acp_server.rpc")

CHANNEL_CAPACITY = 256
"""Messages a channel holds before a notification's sender waits for the reader."""
CHANNEL_HARD_LIMIT = 4096
"""Messages (replies included) past which a channel overflows: its owner drops the connection."""


class _Waiters:
    """A set of one-shot events woken together (anyio events cannot be reset)."""

    def __init__(self) -> None:
        self._events: list[anyio.Event] = []

    async def wait(self) -> None:
        event = anyio.Event()
        self._events.append(event)
        await event.wait()

    def wake(self) -> None:
        events, self._events = self._events, []
        for event in events:
            event.set()


class Channel:
    """An ordered, bounded queue of outgoing messages for at most one reader at a time.

    Invariants: messages leave in the order they were queued; ``len(self) <= capacity`` after every
    :meth:`send` returns (a :meth:`put` may exceed it, up to ``hard_limit``); after :meth:`close` the reader gets
    what was queued, then the end, and new messages are discarded. ``on_queued`` runs after a message is queued
    while no reader is attached; ``on_overflow`` once, when ``hard_limit`` is crossed.
    """

    def __init__(
        self,
        name: str,
        *,
        capacity: int = CHANNEL_CAPACITY,
        hard_limit: int = CHANNEL_HARD_LIMIT,
        on_queued: Callable[[Channel], None] | None = None,
        on_overflow: Callable[[Channel], None] | None = None,
    ) -> None:
        self.name = name
        self.capacity = capacity
        self.hard_limit = hard_limit
        self.on_queued = on_queued
        self.on_overflow = on_overflow
        self.closed = False
        self.attached = False
        self._queue: deque[Message] = deque()
        self._readable = _Waiters()
        self._writable = _Waiters()

    def __len__(self) -> int:
        return len(self._queue)

    def __bool__(self) -> bool:  # a channel is a channel even when empty
        return True

    def _append(self, message: Message) -> None:
        self._queue.append(message)
        self._readable.wake()
        if len(self._queue) > self.hard_limit and self.on_overflow is not None:
            overflow, self.on_overflow = self.on_overflow, None
            overflow(self)
        if not self.attached and self.on_queued is not None:
            self.on_queued(self)

    def put(self, message: Message) -> None:
        """Queue a reply now (never waits)."""
        if self.closed:
            logger.debug("channel %s is closed: reply %r discarded", self.name, message.get("id"))
            return
        self._append(message)

    async def send(self, message: Message) -> bool:
        """Queue a notification or a request; waits while ``capacity`` messages are unread. False: the channel is
        closed and the message was discarded."""
        while not self.closed and len(self._queue) >= self.capacity:
            await self._writable.wait()
        if self.closed:
            logger.debug("channel %s is closed: %s discarded", self.name, message.get("method"))
            return False
        self._append(message)
        return True

    async def receive(self) -> Message:
        """The next message; ``anyio.EndOfStream`` once closed and drained."""
        while not self._queue:
            if self.closed:
                raise anyio.EndOfStream
            await self._readable.wait()
        message = self._queue.popleft()
        self._writable.wake()
        return message

    def close(self) -> None:
        """No more messages: the reader drains what is queued, then ends; waiting senders return."""
        self.closed = True
        self._readable.wake()
        self._writable.wake()


class RoutedConnection:
    """The router of one connection's outgoing messages to channels: its dispatcher's sink (the dispatcher and the
    agent are the :class:`~acp_server.rpc.Connection`'s).

    ``on_answer(msg_id, message)`` runs for each response before it is queued (a transport registers the session a
    ``session/new`` answer names, so the stream can be opened as soon as the client reads the answer).
    """

    def __init__(self, fallback: Channel, on_answer: Callable[[Any, Message], None] | None = None) -> None:
        self.fallback = fallback
        self.on_answer = on_answer
        self._routes: dict[str | int, Channel] = {}

    def route(self, message: Message, channel: Channel) -> bool:
        """Before one message (a response from the client included) is dispatched: a request's response, and the
        notifications and requests its handler sends, go to ``channel``. False: a request whose id is still in flight,
        refused on ``channel`` (answering it would misroute the first); it must not be dispatched.
        """
        if "method" in message and "id" in message:
            msg_id = message["id"]
            if msg_id in self._routes:
                error = RpcError.invalid_request(f"request id {msg_id!r} is already in flight")
                channel.put({"jsonrpc": "2.0", "id": msg_id, "error": error.to_wire()})
                return False
            self._routes[msg_id] = channel
        return True

    # -- the dispatcher's sink ---------------------------------------------------------------------------------

    def put(self, message: Message) -> None:
        """A response (or error) goes to the channel of its request."""
        msg_id = message.get("id")
        channel = self._routes.pop(msg_id, None) if isinstance(msg_id, (str, int)) else None
        if self.on_answer is not None:
            self.on_answer(msg_id, message)
        (self.fallback if channel is None else channel).put(message)

    async def send(self, message: Message, origin: str | int | None = None) -> None:
        """A notification or request goes to the channel of the request that sent it, waiting while that one is full;
        a request that channel can no longer take raises :class:`~acp_server.errors.RemoteError`."""
        channel = self._routes.get(origin) if origin is not None else None
        channel = self.fallback if channel is None else channel
        if not await channel.send(message) and "id" in message:
            raise RemoteError(f"connection closed: stream {channel.name} ended before {message.get('method')} was sent")
