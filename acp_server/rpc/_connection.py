"""One ACP connection, whatever carries it: its dispatcher, its agent bound to that dispatcher, the handler tasks (owned
through the dispatcher) and the one shutdown order. stdio (``cli``) and ``/acp`` (``daemon``) both serve through it;
each plugs in its :class:`Transport` — the outbox of a byte stream, or the channels of a routed connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..acp import AcpAgent, AgentOptions, Announce, bind
from ..bridge import SessionBridge
from ._dispatcher import Dispatcher, MessageSink

__all__ = ["SHUTDOWN_GRACE_S", "Connection", "Transport"]

SHUTDOWN_GRACE_S = 5.0
"""At shutdown, each wait for the client is bounded by this: handlers finishing, answers being flushed (stdio: lines
already read waiting for a client that does not read its answers, too)."""


class Transport(MessageSink, Protocol):
    """The face-specific part of a connection: where its outgoing messages go (a :class:`MessageSink`), and how
    their delivery ends."""

    def abandon(self) -> None:
        """Deliver nothing more (the client is gone); called before the prompts are cancelled. Idempotent."""
        ...

    async def finish(self, grace_s: float) -> None:
        """Every request is answered: deliver what is queued (waiting at most ``grace_s``), then end. Idempotent."""
        ...


class Connection:
    """An ACP agent served over one JSON-RPC connection.

    Invariants: every request fed is answered exactly once, through ``transport`` (a cancelled handler answers
    -32800), until :meth:`aclose` has returned; every handler task ends within :meth:`aclose`. The agent hears the
    bridge (``announce``: news about a session on behalf of no request; default: queued at once on the transport)
    until :meth:`aclose` starts.
    """

    def __init__(
        self, transport: Transport, bridge: SessionBridge, options: AgentOptions, announce: Announce | None = None
    ) -> None:
        self.transport = transport
        self.dispatcher = Dispatcher(transport)
        self.agent = AcpAgent(bridge, options, self._post if announce is None else announce)
        self.dispatcher.register(*bind(self.agent))
        self.closed = False

    def _post(self, session_id: str, method: str, params: Mapping[str, Any]) -> None:
        self.dispatcher.post(method, params)

    def feed(self, message: Any) -> None:
        """Handle one decoded JSON value (see :meth:`Dispatcher.feed`)."""
        self.dispatcher.feed(message)

    async def aclose(self, *, deliver: bool = True, grace_s: float = SHUTDOWN_GRACE_S) -> None:
        """End the connection, in the one order: no more news from the bridge; (``deliver`` False: the transport
        delivers nothing more); every prompt admitted so far, late ones included, cancelled; the handlers waited for
        (``grace_s``), the rest cancelled, each request answered once; then the transport flushes (``grace_s``) and
        ends. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.agent.close()
        if not deliver:
            self.transport.abandon()
        self.agent.cancel_all()
        await self.dispatcher.aclose(grace_s)
        await self.transport.finish(grace_s)
