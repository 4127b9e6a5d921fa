"""File descriptors and the listening socket: the listen backlog, the open-file limit raised and shared between
client and model connections, and a rate-limited log of ``accept()`` running out of descriptors.

- **backlog**: the listening socket queues at most :data:`LISTEN_BACKLOG` connections the daemon has not accepted
  yet (the kernel refuses more: their handshake does not complete, they send nothing); asyncio accepts at most
  that many per wake-up, each then displacing or refused by the connection cap (``_protocol.py``) — so a flood
  never waits in a deep backlog.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
import time
from collections.abc import Callable
from typing import Any

from .._exceptions import ListenError

__all__ = [
    "EMFILE_LOG_INTERVAL_S",
    "LISTEN_BACKLOG",
    "AcceptErrorLog",
    "bind_socket",
    "fd_limited_connections",
    "raise_fd_limit",
    "url_of",
]

logger = logging.getLogger("acp_server.daemon")

EMFILE_LOG_INTERVAL_S = 10.0
"""``accept()`` resource errors are logged at most once per this interval (with the count suppressed)."""

LISTEN_BACKLOG = 128
"""Connections the kernel holds for the daemon before it accepts them (``listen()``), and the most asyncio accepts
in one wake-up. Beyond the cap and this backlog a connection is refused by the kernel (its handshake does not
complete), never left queued accepting bytes; one in the backlog is accepted within a wake-up, then handled as any
newcomer (it displaces an older waiting connection, or gets 503)."""

_FD_RESERVE = 64  # descriptors kept for the store, logs, the listener, the event loop


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0 = ephemeral); raises :class:`ListenError`.

    Created with ``IPPROTO_TCP`` explicitly: asyncio disables Nagle only on sockets whose ``proto`` says TCP, and
    accepted sockets inherit it (``socket.create_server`` leaves 0: every keep-alive response then waited ~40 ms
    for a delayed ACK).
    """
    name = host.strip("[]")
    family = socket.AF_INET6 if ":" in name else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((name, port))
        sock.listen(LISTEN_BACKLOG)
    except (OSError, OverflowError) as exc:
        sock.close()
        raise ListenError(host, port, getattr(exc, "strerror", None) or str(exc)) from exc
    return sock


def url_of(sock: socket.socket) -> str:
    """``http://host:port`` of a bound socket (IPv6 in brackets)."""
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if sock.family == socket.AF_INET6 else f"http://{host}:{port}"


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
