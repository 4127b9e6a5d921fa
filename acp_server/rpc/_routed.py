"""A JSON-RPC connection whose outgoing messages are routed to per-request exchanges (request/response transports
such as HTTP), instead of being written to one byte stream.

Routing rule: a response goes to the exchange opened for its id; a ``session/update`` notification goes to the oldest
open streaming exchange of its ``sessionId`` (prompts of a session run one at a time, in admission order, so the
running one is always the oldest still open); anything else has no recipient and is dropped with a debug log.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._dispatcher import Dispatcher
from ._outbox import Outbox

__all__ = ["Exchange", "RoutedConnection"]

logger = logging.getLogger("acp_server.rpc")

_EXCHANGE_BUFFER = 4096  # messages an exchange may hold before its stream reader falls too far behind


class Exchange:
    """The messages for one request: zero or more notifications, then exactly one response (then closed)."""

    def __init__(self, msg_id: str | int, session_id: str | None) -> None:
        self.msg_id = msg_id
        self.session_id = session_id
        self.admitted = anyio.Event()
        self._send: MemoryObjectSendStream[dict[str, Any]]
        self.receive: MemoryObjectReceiveStream[dict[str, Any]]
        self._send, self.receive = anyio.create_memory_object_stream[dict[str, Any]](_EXCHANGE_BUFFER)

    def _deliver(self, message: dict[str, Any]) -> bool:
        try:
            self._send.send_nowait(message)
            return True
        except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False

    def _close(self) -> None:
        self._send.close()

    def close(self) -> None:
        """The HTTP side is done with this exchange (answered, or the client went away)."""
        self._send.close()
        self.receive.close()


class RoutedConnection:
    """One dispatcher plus the router of its outgoing messages. ``pump`` must run while the connection is open."""

    def __init__(self) -> None:
        self.outbox = Outbox()
        self.dispatcher = Dispatcher(self.outbox)
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

    def admitted(self, msg_id: str | int) -> None:
        """The request ``msg_id`` was accepted and will stream (the ACP handlers call this after admission)."""
        exchange = self._by_id.get(msg_id)
        if exchange is not None:
            exchange.admitted.set()

    def forget(self, exchange: Exchange) -> None:
        exchange.close()
        if self._by_id.get(exchange.msg_id) is exchange:
            del self._by_id[exchange.msg_id]
        if exchange.session_id is not None:
            queue = self._streams.get(exchange.session_id)
            if queue is not None and exchange in queue:
                queue.remove(exchange)
                if not queue:
                    del self._streams[exchange.session_id]

    async def pump(self) -> None:
        await self.outbox.pump(self._route)

    async def _route(self, data: bytes) -> None:
        for line in data.splitlines():
            message = json.loads(line)
            if "method" not in message:
                exchange = self._by_id.get(message.get("id"))
                if exchange is not None:
                    exchange._deliver(message)
                    exchange._close()
                    self._by_id.pop(exchange.msg_id, None)
                    if exchange.session_id is not None:
                        queue = self._streams.get(exchange.session_id)
                        if queue is not None and exchange in queue:
                            queue.remove(exchange)
                else:
                    logger.debug("no exchange waits for response %r", message.get("id"))
            elif message["method"] == "session/update":
                session_id = (message.get("params") or {}).get("sessionId")
                queue = self._streams.get(session_id) if isinstance(session_id, str) else None
                if queue and not queue[0]._deliver(message):
                    logger.warning("dropping an update for a stalled stream of session %s", session_id)
            else:
                logger.debug("no recipient for %s", message["method"])
