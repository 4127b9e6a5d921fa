"""Connection-level defences under the ASGI app: a connection cap, a header deadline, a transport abort for the app,
and a rate-limited log of ``accept()`` running out of file descriptors.

uvicorn offers ``limit_concurrency`` (a 503 once a request *arrives*, the connection kept) and ``timeout_keep_alive``
(idle time *after* a response) — neither closes a connection that never finishes its headers, which is what holds
file descriptors under a slow-headers flood. So the daemon serves with :func:`guarded_protocol`, uvicorn's h11
protocol plus:

- **cap**: at most ``max_connections`` open connections. A connection over the cap displaces the oldest
  connection that is *waiting for request headers* (never sent any, half-sent, or idle in keep-alive): those cost
  the daemon nothing to drop and are what a flood is made of. When every connection is in a request or a response
  (an SSE stream), the newcomer gets a raw ``503 too_many_connections`` and is closed.
- **header deadline**: a connection's request headers must be complete within ``header_timeout_s`` of the
  connection (or of the first byte of its next request on a keep-alive); else ``408 request_timeout`` (when part of
  a request came) and close. A response in progress (an SSE stream) is never timed out.
- **HTTP/2**: a connection that opens with the HTTP/2 preface is handed to :class:`~._http2.Http2Server` (when the
  server has one); it keeps counting against the cap until it ends, is in the waiting set while it has no open
  stream (displaced by closing it), and is shut down with the server.
- **backlog**: the listening socket queues at most :data:`LISTEN_BACKLOG` connections the daemon has not accepted
  yet (the kernel refuses more: their handshake does not complete, they send nothing); asyncio accepts at most
  that many per wake-up, each then displacing or refused as above — so a flood never waits in a deep backlog.
- **abort**: each request's scope carries ``scope["extensions"][ABORT_EXTENSION]["abort"]``, which resets the
  connection at once (an RST: ``SO_LINGER`` 0 then ``transport.abort()``; buffered bytes dropped, kernel queues
  freed) — for a subscriber dropped for lagging whose peer does not read, where ending the response politely (or a
  plain close) would keep the socket and its queues for as long as the peer does not read. Beside it,
  ``["send_buffer"](n)`` caps the kernel's send buffer of the connection (``SO_SNDBUF``; Linux books twice ``n``):
  an event stream's peer that stops reading then holds that much in the kernel, not the 4 MiB autotuning grows to.

Invariants: every HTTP/1.1 connection is in ``_Registry.waiting`` exactly while it awaits request headers (an
HTTP/2 one exactly while it has no open stream), with its timer
armed once it has been open (or has sent a byte) for less than ``header_timeout_s``; the open-connection count never
exceeds ``max_connections`` after ``connection_made`` returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import resource
import socket
import struct
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ._errors import raw_error_response
from ._exceptions import RequestTimeoutError, TooManyConnectionsError
from ._http2 import PREFACE, Http2Server

__all__ = [
    "ABORT_EXTENSION",
    "EMFILE_LOG_INTERVAL_S",
    "LISTEN_BACKLOG",
    "AcceptErrorLog",
    "fd_limited_connections",
    "guarded_protocol",
    "raise_fd_limit",
]

logger = logging.getLogger("acp_server.daemon")

ABORT_EXTENSION = "acp_server.transport"
"""The scope extension naming the connection's abort callable (``{"abort": Callable[[], None]}``)."""

EMFILE_LOG_INTERVAL_S = 10.0
"""``accept()`` resource errors are logged at most once per this interval (with the count suppressed)."""

LISTEN_BACKLOG = 128
"""Connections the kernel holds for the daemon before it accepts them (``listen()``), and the most asyncio accepts
in one wake-up. Beyond the cap and this backlog a connection is refused by the kernel (its handshake does not
complete), never left queued accepting bytes; one in the backlog is accepted within a wake-up, then handled as any
newcomer (it displaces an older waiting connection, or gets 503)."""

_FD_RESERVE = 64  # descriptors kept for the store, logs, the listener, the event loop


class _Registry:
    """What the protocols of one server share: the limits and the connections waiting for headers, oldest first."""

    def __init__(self, max_connections: int, header_timeout_s: float, http2: Http2Server | None) -> None:
        self.max_connections = max_connections
        self.header_timeout_s = header_timeout_s
        self.http2 = http2
        self.waiting: OrderedDict[_GuardedProtocol, None] = OrderedDict()


class _GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol with the cap, the header deadline and the abort extension (see the module)."""

    registry: _Registry  # set on the per-server subclass made by guarded_protocol()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._opening: bytes | None = b"" if self.registry.http2 is not None else None  # until HTTP/2 is ruled out
        self._http2: asyncio.Task[None] | None = None

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
        if self._opening is not None:  # the first bytes: the HTTP/2 preface, or HTTP/1.1
            data, self._opening = self._opening + data, None
            if len(data) < len(PREFACE) and PREFACE.startswith(data):
                self._opening = data  # a prefix of the preface so far: wait for more (the header deadline holds)
                return
            if data.startswith(PREFACE):
                self._hand_over(data)
                return
        super().data_received(data)
        self._after_events()

    def shutdown(self) -> None:
        if self._http2 is None:
            super().shutdown()
        elif self.registry.http2 is not None:
            self.registry.http2.terminate()

    def _hand_over(self, received: bytes) -> None:
        """Serve this connection with HTTP/2 from now on; it stays counted (and shut down) as uvicorn's, and
        displaceable while it has no open stream."""
        assert self.registry.http2 is not None
        self._stop_waiting()
        task = self._http2 = self.registry.http2.serve(self.transport, received, self._http2_idle)
        self.tasks.add(task)  # uvicorn cancels it when the graceful shutdown runs out of time
        task.add_done_callback(self._http2_ended)

    def _http2_idle(self, idle: bool) -> None:
        if idle and not self.transport.is_closing():
            self.registry.waiting[self] = None
        else:
            self.registry.waiting.pop(self, None)

    def _http2_ended(self, task: asyncio.Task[None]) -> None:
        self.registry.waiting.pop(self, None)
        self.tasks.discard(task)
        self.connections.discard(self)
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.warning("an HTTP/2 connection ended on an error: %r", exc)
            logger.debug("the HTTP/2 connection's error", exc_info=exc)

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
        """Make room for a newer connection (this one waits for headers, or is HTTP/2 with no open stream)."""
        if self._http2 is not None:
            self.registry.waiting.pop(self, None)
            self.transport.close()  # its server sees the end and finishes; the count drops then
            return
        self._close_with(TooManyConnectionsError(self.registry.max_connections) if self._partial_request() else None)

    def _close_with(self, error: Exception | None) -> None:
        """Close now, after a raw error response when given (no request cycle runs on this connection)."""
        self._stop_waiting()
        self._unset_keepalive_if_required()
        if error is not None:
            self.transport.write(raw_error_response(error))
        self.transport.close()


def guarded_protocol(
    *, max_connections: int, header_timeout_s: float, http2: Http2Server | None = None
) -> type[H11Protocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` with its own registry (one per server); ``http2``: who
    serves the connections that open with the HTTP/2 preface (none: they get HTTP/1.1's 400)."""
    registry = _Registry(max_connections, header_timeout_s, http2)
    return type("GuardedH11Protocol", (_GuardedProtocol,), {"registry": registry})


# -- file descriptors -----------------------------------------------------------------------------------------


def raise_fd_limit() -> int:
    """Raise the soft open-file limit to the hard one (what ``serve`` does at start); return the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = max(soft, 1 << 20) if soft != resource.RLIM_INFINITY else soft
    if soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError) as exc:
            logger.debug("could not raise the open-file limit from %d to %d: %s", soft, hard, exc)
    return soft


def fd_limited_connections(wanted: int) -> int:
    """``wanted``, lowered so client connections take at most half the descriptors left after a reserve and one
    accept burst (:data:`LISTEN_BACKLOG`: accepted before any is displaced); the other half is for model
    connections, one per running turn — so ``accept()`` does not run out first."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    budget = max(8, (soft - _FD_RESERVE - LISTEN_BACKLOG) // 2)
    if wanted > budget:
        logger.warning(
            "--max-connections %d lowered to %d: the open-file limit is %d (raise it with ulimit -n)",
            wanted,
            budget,
            soft,
        )
    return min(wanted, budget)


class AcceptErrorLog:
    """An event-loop exception handler that logs ``accept()`` running out of resources (EMFILE, ENFILE, ENOBUFS,
    ENOMEM) at most once per ``interval_s``, without a traceback, with how many were suppressed; every other
    context goes to the previous handler (or the loop's default).

    asyncio calls the handler once per failed ``accept()`` — up to the listen backlog per wake-up — so a descriptor
    shortage otherwise writes a traceback per connection attempt.
    """

    _ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

    def __init__(
        self,
        previous: Callable[[asyncio.AbstractEventLoop, dict[str, Any]], object] | None,
        *,
        interval_s: float = EMFILE_LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._previous = previous
        self._interval_s = interval_s
        self._clock = clock
        self._last: float | None = None
        self.suppressed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in self._ERRNOS and "accept" in str(context.get("message", "")):
            now = self._clock()
            if self._last is not None and now - self._last < self._interval_s:
                self.suppressed += 1
                return
            self._last = now
            logger.error(
                "cannot accept connections: %s (%d more in the last %.0fs); new connections wait in the backlog — "
                "raise the open-file limit (ulimit -n) or lower --max-connections",
                exc.strerror or exc,
                self.suppressed,
                self._interval_s,
            )
            self.suppressed = 0
            return
        if isinstance(exc, ValueError) and "_start_serving" in str(context.get("message", "")):
            # After a descriptor shortage asyncio resumes accepting from a timer; when the server closed meanwhile
            # (shutdown), that timer finds its socket gone (fd -1). Nothing is wrong: the server is closed.
            logger.debug("accepting stopped: the server closed while accept() was paused")
            return
        if self._previous is not None:
            self._previous(loop, context)
        else:
            loop.default_exception_handler(context)
