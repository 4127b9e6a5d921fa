"""Serving: a listening socket, uvicorn inside the caller's task group, graceful shutdown, the CLI runner.

``open_daemon`` binds first (so the printed URL accepts connections at once), runs uvicorn without its own
signal handlers (the owner decides when to stop), and on exit: stops accepting, cancels every turn it accepted,
publishes their terminal events, ends every event stream, then waits for uvicorn — all bounded by
``shutdown_grace_s``. uvicorn serves with the guarded protocol of ``_connections.py`` (connection cap, header
deadline, transport abort, a listen backlog of ``LISTEN_BACKLOG``), ``--max-connections`` lowered to fit the
open-file limit, and an event-loop exception handler that logs ``accept()`` running out of descriptors once per
interval (restored on exit). A connection that opens with the HTTP/2 preface is served by Hypercorn's HTTP/2 stack
on the same port (``_http2.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

import anyio
import uvicorn

from ..acp import preload
from ..bridge import SessionBridge
from ._app import create_app
from ._connections import (
    LISTEN_BACKLOG,
    AcceptErrorLog,
    fd_limited_connections,
    guarded_protocol,
    raise_fd_limit,
)
from ._daemon import Daemon
from ._exceptions import ListenError
from ._http2 import Http2Server
from ._options import DaemonOptions

__all__ = ["ANNOUNCE_PREFIX", "RunningDaemon", "bind_socket", "open_daemon", "run_daemon", "url_of"]

logger = logging.getLogger("acp_server.daemon")

ANNOUNCE_PREFIX = "acp-server serve: listening on "

_KEEP_ALIVE_S = 5.0  # an HTTP/2 connection without a stream is closed after this long (uvicorn's HTTP/1.1 default)


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


class _Uvicorn(uvicorn.Server):
    """uvicorn without its signal handlers (whoever opened the daemon decides when it stops, by :meth:`stop`) and
    without its 10 Hz polling loop: it ticks once a second (the ``Date`` header) and stops at once when told.

    The polling loop also kept anyio's ``wait_all_tasks_blocked`` from ever returning: its 0.1 s sleep could fall
    in phase with the poll of that helper, so the server task looked runnable at every look.
    """

    _TICK_S = 1.0

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        """Stop accepting; uvicorn then waits (bounded by its graceful timeout) for the open responses."""
        self.should_exit = True
        self._stopping.set()

    async def main_loop(self) -> None:
        while not await self.on_tick(0):  # counter 0: refresh the Date header on every tick
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._TICK_S)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass(frozen=True)
class RunningDaemon:
    """A daemon being served: its base URL and its state."""

    url: str
    daemon: Daemon


@asynccontextmanager
async def open_daemon(
    bridge: SessionBridge, options: DaemonOptions, *, sock: socket.socket | None = None
) -> AsyncIterator[RunningDaemon]:
    """Serve ``bridge`` over HTTP until the block exits, then shut down gracefully (see the module docstring).

    ``sock``: an already listening socket (it is closed on exit); default: bind ``options.host:options.port``.
    """
    sock = sock if sock is not None else bind_socket(options.host, options.port)
    url = url_of(sock)
    async with Daemon(bridge, options) as daemon:
        app = create_app(daemon)
        protocol = guarded_protocol(
            max_connections=fd_limited_connections(options.max_connections),
            header_timeout_s=options.header_timeout_s,
            http2=Http2Server(app, keep_alive_s=_KEEP_ALIVE_S, max_body_bytes=options.max_body_bytes),
        )
        config = uvicorn.Config(
            app,
            http=protocol,
            backlog=LISTEN_BACKLOG,  # asyncio listens again with it, and accepts at most that many per wake-up
            ws="websockets-sansio",  # /acp over WebSocket; the sans-I/O one waits for the socket (backpressure)
            ws_max_size=options.max_body_bytes,
            lifespan="off",
            log_config=None,
            access_log=False,
            proxy_headers=False,
            server_header=False,
            timeout_graceful_shutdown=max(1, round(options.shutdown_grace_s)),
        )
        server = _Uvicorn(config)
        served = anyio.Event()

        async def serve() -> None:
            try:
                await server.serve(sockets=[sock])
            finally:
                sock.close()
                served.set()

        error: Exception | None = None
        loop = asyncio.get_running_loop()  # uvicorn serves on asyncio
        previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(AcceptErrorLog(previous_handler))
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(serve, name=f"uvicorn {url}")
                try:
                    yield RunningDaemon(url, daemon)
                except Exception as exc:  # re-raised as is below, not wrapped in an exception group
                    error = exc
                finally:
                    server.stop()
                    with anyio.CancelScope(shield=True), anyio.move_on_after(options.shutdown_grace_s):
                        await daemon.shutdown()  # cancel turns, publish their ends, end the streams
                        await served.wait()
                    tg.cancel_scope.cancel()  # only if the grace ran out
        finally:
            loop.set_exception_handler(previous_handler)
        if error is not None:
            raise error


def _announce(url: str) -> None:
    sys.stderr.write(f"{ANNOUNCE_PREFIX}{url}\n")
    sys.stderr.flush()


async def run_daemon(
    bridge: SessionBridge,
    options: DaemonOptions,
    *,
    sock: socket.socket | None = None,
    announce: Callable[[str], None] = _announce,
) -> int:
    """``acp-server serve``: serve until SIGINT or SIGTERM, then shut down gracefully; returns the exit code 0.

    The bound URL is announced once, on stderr, as ``acp-server serve: listening on http://HOST:PORT``. The soft
    open-file limit is raised to the hard one first (connections and model requests each hold a descriptor).
    """
    raise_fd_limit()
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_daemon(bridge, options, sock=sock) as running, anyio.create_task_group() as tg:
            tg.start_soon(partial(anyio.to_thread.run_sync, preload, abandon_on_cancel=True))
            announce(running.url)
            async for signum in signals:
                logger.info("received %s: shutting down", signal.Signals(signum).name)
                break
            tg.cancel_scope.cancel()
    return 0
