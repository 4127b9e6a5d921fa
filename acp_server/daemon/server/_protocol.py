"""The daemon's one piece below uvicorn's public API: its h11 protocol with the connection defences ASGI cannot
express — a connection cap, a header deadline, a transport abort for the app.

uvicorn's settings stop at a request: ``limit_concurrency`` answers 503 once a request *arrives* (the connection kept),
``timeout_keep_alive`` bounds the idle time *after* a response and ``h11_max_incomplete_event_size`` the size (not
the time) of a request's head. None closes a connection that never finishes its headers — a slowloris flood, which
holds a file descriptor per connection — and an ASGI middleware runs only once the headers are complete, so it cannot
either. Hence :func:`guarded_protocol`, uvicorn's ``H11Protocol`` (``uvicorn.Config(http=...)`` takes a protocol
class) plus:

- **cap**: at most ``max_connections`` open connections. A connection over the cap displaces the oldest
  connection that is *waiting for request headers* (never sent any, half-sent, or idle in keep-alive): those cost
  the daemon nothing to drop and are what a flood is made of. When every connection is in a request or a response
  (an SSE stream), the newcomer gets a raw ``503 too_many_connections`` and is closed.
- **header deadline**: a connection's request headers must be complete within ``header_timeout_s`` of the
  connection (or of the first byte of its next request on a keep-alive); else ``408 request_timeout`` (when part of
  a request came) and close. A response in progress (an SSE stream) is never timed out.
- **no HTTP/2**: a connection that opens with the HTTP/2 preface (a prior-knowledge client) gets a raw ``400
  invalid_request`` saying so, and is closed (h11 would take ``PRI * HTTP/2.0`` for a request, and the rest of the
  preface for a malformed one: two answers mixed on one connection). HTTP/2 is the proxy's in front.
- **abort**: each request's scope carries ``scope["extensions"][ABORT_EXTENSION]["abort"]``, which resets the
  connection at once (an RST: ``SO_LINGER`` 0 then ``transport.abort()``; buffered bytes dropped, kernel queues
  freed) — for a subscriber dropped for lagging whose peer does not read, where ending the response politely (or a
  plain close) would keep the socket and its queues for as long as the peer does not read (ASGI has no abort).
  Beside it, ``["send_buffer"](n)`` caps the kernel's send buffer of the connection (``SO_SNDBUF``; Linux books twice
  ``n``): an event stream's peer that stops reading then holds that much in the kernel, not the 4 MiB autotuning
  grows to.

What it uses of ``H11Protocol`` (``connection_made``, ``data_received``, ``connection_lost``,
``on_response_complete``, ``handle_events``, ``_unset_keepalive_if_required``, and its ``conn``, ``cycle``, ``scope``,
``connections``, ``transport``, ``loop``) is pinned by behaviour, not by inspection: ``tests/daemon/test_exhaustion.py``
(cap, displacement, header deadline, the reset of a dropped subscriber), ``test_backlog.py`` and ``test_server.py``
(no HTTP/2) fail if a uvicorn release changes it.

Invariants: every connection is in ``_Registry.waiting`` exactly while it awaits request headers, with its timer
armed once it has been open (or has sent a byte) for less than ``header_timeout_s``; the open-connection count never
exceeds ``max_connections`` after ``connection_made`` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
from collections import OrderedDict
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from .._errors import raw_error_response
from .._exceptions import InvalidRequestError, RequestTimeoutError, TooManyConnectionsError

__all__ = ["ABORT_EXTENSION", "guarded_protocol"]

logger = logging.getLogger("acp_server.daemon")

ABORT_EXTENSION = "acp_server.transport"
"""The scope extension naming the connection's abort callable (``{"abort": Callable[[], None]}``)."""

_H2_PREFACE_LINE = b"PRI * HTTP/2.0\r\n"
"""The first line of the HTTP/2 connection preface (RFC 9113 §3.4), which only a prior-knowledge client sends."""


class _Registry:
    """What the protocols of one server share: the limits and the connections waiting for headers, oldest first."""

    def __init__(self, max_connections: int, header_timeout_s: float) -> None:
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.waiting: OrderedDict[_GuardedProtocol, None] = OrderedDict()


class _GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol with the cap, the header deadline and the abort extension (see the module)."""

    registry: _Registry  # set on the per-server subclass made by guarded_protocol()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None

    # -- asyncio.Protocol ------------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        registry = self.registry
        if len(self.connections) > registry.max_connections:
            victim = next(iter(registry.waiting), None)
            if victim is None:
                logger.warning(
                    "refused a connection: %d open, none waiting for headers (--max-connections %d)",
                    len(self.connections) - 1,
                    registry.max_connections,
                )
                self._close_with(TooManyConnectionsError(registry.max_connections))
                return
            victim._displace()
        self._await_headers(arm=True)

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._http2_preface(data):
            refusal = "HTTP/2 is not served here: speak HTTP/1.1, or HTTP/2 to the proxy in front"
            self._close_with(InvalidRequestError(refusal))
            return
        super().data_received(data)
        self._after_events()

    def _http2_preface(self, data: bytes) -> bool:
        """Whether the bytes awaiting a request head, with ``data``, begin the HTTP/2 preface's first line."""
        head = bytes(self.conn.trailing_data[0][: len(_H2_PREFACE_LINE)]) + data[: len(_H2_PREFACE_LINE)]
        return len(head) >= len(_H2_PREFACE_LINE) and head.startswith(_H2_PREFACE_LINE)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_waiting()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may start the next (pipelined) request
        if not self.transport.is_closing():
            self._after_events(arm=False)  # idle keep-alive: uvicorn's keep-alive timer, ours from the next byte

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle and self.cycle is not None:  # a request started: its task has not run yet
            extensions = self.scope.setdefault("extensions", {})
            extensions[ABORT_EXTENSION] = {"abort": self._reset, "send_buffer": self._cap_send_buffer}

    def _cap_send_buffer(self, size: int) -> None:
        """Cap the kernel's send buffer of this connection (no autotuning beyond it)."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None and not self.transport.is_closing():
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)

    def _reset(self) -> None:
        """Reset the connection now: ``SO_LINGER`` 0 makes the close an RST that discards what the kernel still
        holds for the peer (a plain close, even ``transport.abort()``, would keep sending it as long as it reads)."""
        if self.transport.is_closing():
            return
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.transport.abort()

    # -- the header deadline and the waiting set ------------------------------------------------------------

    def _after_events(self, *, arm: bool = True) -> None:
        if self.transport.is_closing():
            self._stop_waiting()
        elif self.conn.their_state is h11.IDLE:
            self._await_headers(arm=arm)
        else:
            self._stop_waiting()

    def _await_headers(self, *, arm: bool) -> None:
        registry = self.registry
        registry.waiting[self] = None
        if arm and self._header_timer is None:
            self._header_timer = self.loop.call_later(registry.header_timeout_s, self._headers_timed_out)

    def _stop_waiting(self) -> None:
        self.registry.waiting.pop(self, None)
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _partial_request(self) -> bool:
        return bool(self.conn.trailing_data[0])

    def _headers_timed_out(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self._partial_request():
            self._close_with(RequestTimeoutError("headers", self.registry.header_timeout_s))
        else:
            self._close_with(None)

    def _displace(self) -> None:
        """Make room for a newer connection (this one waits for headers)."""
        self._close_with(TooManyConnectionsError(self.registry.max_connections) if self._partial_request() else None)

    def _close_with(self, error: Exception | None) -> None:
        """Close now, after a raw error response when given (no request cycle runs on this connection)."""
        self._stop_waiting()
        self._unset_keepalive_if_required()
        if error is not None:
            self.transport.write(raw_error_response(error))
        self.transport.close()


def guarded_protocol(*, max_connections: int, header_timeout_s: float) -> type[H11Protocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` with its own registry (one per server)."""
    registry = _Registry(max_connections, header_timeout_s)
    return type("GuardedH11Protocol", (_GuardedProtocol,), {"registry": registry})
