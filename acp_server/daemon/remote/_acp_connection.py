"""One ``/acp`` connection: the transport of an :class:`~acp_server.rpc.Connection` (the same dispatcher, ACP agent
and shutdown order as stdio) — its channels (the connection stream and one per session it knows), and, over HTTP,
the timers that drop it when a stream goes unread. The endpoint that frames and routes its messages is
``_acp_http.py``; the registry that owns every connection is its ``AcpOverHttp``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from ...acp import AgentOptions
from ...bridge import SessionBridge
from ...rpc import Channel, Connection, RoutedConnection

__all__ = ["ATTACHING_METHODS", "AcpConnection", "ConnectionOwner"]

logger = logging.getLogger("acp_server.daemon")

ATTACHING_METHODS = frozenset({"session/load", "session/resume"})
"""Requests that make their ``params.sessionId`` known to the connection."""
_OPENING_METHODS = frozenset({"session/new", "session/fork"})
"""Requests whose answer (``result.sessionId``) makes a session known to the connection."""


class ConnectionOwner(Protocol):
    """What a connection needs of the registry that owns it."""

    bridge: SessionBridge
    agent_options: AgentOptions
    capacity: int
    stream_timeout_s: float

    def drop(self, connection: AcpConnection) -> None:
        """End ``connection`` from a callback: nothing more is delivered on it."""
        ...


def _result_session(message: dict[str, Any]) -> str | None:
    result = message.get("result")
    session_id = result.get("sessionId") if isinstance(result, dict) else None
    return session_id if isinstance(session_id, str) else None


class AcpConnection:
    """One ``/acp`` connection: its :class:`~acp_server.rpc.Connection` (``rpc``: dispatcher, agent, shutdown order),
    the transport it plugs in — its channels, routed — and (HTTP) the timers of unread channels.

    Invariants: ``channels[None]`` is the connection stream; ``channels[sid]`` exists exactly while ``sid`` is
    known to the connection; a timer runs for a channel exactly while it has no reader and (it holds messages, or it
    is the connection stream of an HTTP connection).
    """

    def __init__(self, owner: ConnectionOwner, connection_id: str, *, websocket: bool) -> None:
        self.owner = owner
        self.id = connection_id
        self.websocket = websocket
        self.closed = False
        self._timers: dict[Channel, asyncio.TimerHandle] = {}
        stream = self._channel("connection")
        self.channels: dict[str | None, Channel] = {None: stream}
        self._pending: dict[Any, tuple[str, str | None, bool]] = {}  # id → (method, session, created by it)
        self._ending: list[Channel] = []  # at close: the channels to end
        self.routed = RoutedConnection(stream, on_answer=self._answered)
        self.rpc = Connection(self, owner.bridge, owner.agent_options, self._announce)
        if not websocket:
            self._arm(stream)

    # -- channels and their timers --------------------------------------------------------------------------

    def _channel(self, name: str) -> Channel:
        return Channel(
            f"{self.id[:8]}/{name}",
            capacity=self.owner.capacity,
            on_queued=None if self.websocket else self._arm,
            on_overflow=self._overflowed,
        )

    def _arm(self, channel: Channel) -> None:
        if channel in self._timers or channel.attached or self.closed:
            return
        loop = asyncio.get_running_loop()
        self._timers[channel] = loop.call_later(self.owner.stream_timeout_s, self._expired, channel)

    def attach(self, channel: Channel) -> None:
        channel.attached = True
        timer = self._timers.pop(channel, None)
        if timer is not None:
            timer.cancel()

    def detach(self, channel: Channel) -> None:
        channel.attached = False
        if not channel.closed and (len(channel) or channel is self.channels[None]):
            self._arm(channel)

    def _expired(self, channel: Channel) -> None:
        self._timers.pop(channel, None)
        if channel.attached or self.closed:
            return
        logger.warning(
            "/acp connection %s dropped: stream %s had no reader for %.0fs",
            self.id,
            channel.name,
            self.owner.stream_timeout_s,
        )
        self.owner.drop(self)

    def _overflowed(self, channel: Channel) -> None:
        logger.warning(
            "/acp connection %s dropped: stream %s fell %d messages behind", self.id, channel.name, channel.hard_limit
        )
        self.owner.drop(self)

    def _announce(self, session_id: str, method: str, params: Mapping[str, Any]) -> None:
        """A notification about a session on behalf of no request (another face changed its settings), queued at
        once: on the session's stream while it has a reader, else on the connection stream (which an HTTP
        connection keeps read; a WebSocket's one stream): news nobody asked for never waits on a stream the client
        may never open (a client that resumed a session has no reason to)."""
        channel = self.channels.get(session_id)
        if self.websocket or channel is None or not channel.attached:
            channel = self.channels[None]
        channel.put({"jsonrpc": "2.0", "method": method, "params": params})

    def add_session(self, session_id: str) -> bool:
        """Make ``session_id`` known (its stream exists); False when it already was."""
        if session_id in self.channels:
            return False
        self.channels[session_id] = self._channel(session_id)
        return True

    def _forget_session(self, session_id: str) -> None:
        channel = self.channels.pop(session_id, None)
        if channel is not None:
            channel.close()
            timer = self._timers.pop(channel, None)
            if timer is not None:
                timer.cancel()

    # -- messages in and out --------------------------------------------------------------------------------

    def submit(self, message: dict[str, Any], channel: Channel, session_id: str | None = None) -> None:
        """Dispatch a checked message; a request's answer and notifications go to ``channel``."""
        method = message.get("method")
        if method is not None and "id" in message:
            created = False
            if method in ATTACHING_METHODS and session_id is not None:
                created = self.add_session(session_id)
            self._pending[message["id"]] = (method, session_id, created)
        if self.routed.route(message, channel):
            self.rpc.feed(message)

    def respond(self, message: dict[str, Any]) -> None:
        """Dispatch the client's response to one of our requests (matched by its id, whatever stream it came on)."""
        self.rpc.feed(message)

    def _answered(self, msg_id: Any, message: dict[str, Any]) -> None:
        """Keep the known sessions in step with the answers (runs before the answer is queued)."""
        pending = self._pending.pop(msg_id, None) if isinstance(msg_id, (str, int)) else None
        if pending is None:
            return
        method, session_id, created = pending
        ok = "result" in message
        if method in _OPENING_METHODS and ok:
            opened = _result_session(message)
            if opened is not None:
                self.add_session(opened)
        elif method in ATTACHING_METHODS and not ok and created and session_id is not None:
            self._forget_session(session_id)
        elif method in ("session/close", "session/delete") and ok and session_id is not None:
            channel = self.channels.pop(session_id, None)
            if channel is not None:  # the answer still goes out on it, then the stream ends
                asyncio.get_running_loop().call_soon(channel.close)

    # -- the connection's transport ---------------------------------------------------------------------------

    def put(self, message: dict[str, Any]) -> None:
        self.routed.put(message)

    async def send(self, message: dict[str, Any], origin: str | int | None = None) -> None:
        await self.routed.send(message, origin)

    def abandon(self) -> None:
        """End every stream at once: what comes after is discarded (a reader still gets what was queued)."""
        for channel in self._ending:
            channel.close()

    async def finish(self, grace_s: float) -> None:
        """End every stream known when the close began; a reader still drains what is queued, at its own pace (no
        wait here)."""
        for channel in self._ending:
            channel.close()

    async def aclose(self, *, deliver: bool) -> None:
        """End the connection: cancel its prompts, let handlers answer (``deliver``: on the streams, else nowhere),
        then end every stream known when the close began."""
        if self.closed:
            return
        self.closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._ending = list(self.channels.values())
        await self.rpc.aclose(deliver=deliver)
