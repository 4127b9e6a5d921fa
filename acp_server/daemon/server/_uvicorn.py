"""uvicorn inside the caller's task group: one HTTP server for HTTP/1.1 and WebSocket, on a socket already bound.

uvicorn runs without its own signal handlers (the owner decides when to stop), with the guarded protocol of
``_protocol.py`` (connection cap, header deadline, transport abort), ``--max-connections`` lowered to fit the
open-file limit, a listen backlog of ``LISTEN_BACKLOG``, and an event-loop exception handler that logs ``accept()``
running out of descriptors once per interval (restored on exit). HTTP/2 is not served here: a proxy in front
terminates it (``deploy/haproxy.cfg``: TLS with ``alpn h2,http/1.1``) and speaks HTTP/1.1 to the daemon.

Invariant: on leaving :func:`serve_app`, accepting stops first, then ``drain`` runs (the app ends its streams),
then uvicorn's open responses are awaited — all within ``shutdown_grace_s``; past it, uvicorn is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager

import anyio
import uvicorn
from starlette.types import ASGIApp

from .._options import DaemonOptions
from ._listener import LISTEN_BACKLOG, AcceptErrorLog, fd_limited_connections, url_of
from ._protocol import guarded_protocol

__all__ = ["serve_app"]


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


def _config(app: ASGIApp, options: DaemonOptions) -> uvicorn.Config:
    protocol = guarded_protocol(
        max_connections=fd_limited_connections(options.max_connections), header_timeout_s=options.header_timeout_s
    )
    return uvicorn.Config(
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


@asynccontextmanager
async def serve_app(
    app: ASGIApp, sock: socket.socket, options: DaemonOptions, *, drain: Callable[[], Awaitable[None]]
) -> AsyncIterator[str]:
    """Serve ``app`` on the listening ``sock`` (closed on exit) until the block exits; yields the base URL.

    On exit (see the module's invariant) ``drain`` is awaited shielded, between stopping to accept and waiting for
    the open responses. An exception of the block is re-raised as is, not wrapped in an exception group.
    """
    url = url_of(sock)
    server = _Uvicorn(_config(app, options))
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
                yield url
            except Exception as exc:  # re-raised as is below, not wrapped in an exception group
                error = exc
            finally:
                server.stop()
                with anyio.CancelScope(shield=True), anyio.move_on_after(options.shutdown_grace_s):
                    await drain()
                    await served.wait()
                tg.cancel_scope.cancel()  # only if the grace ran out
    finally:
        loop.set_exception_handler(previous_handler)
    if error is not None:
        raise error
