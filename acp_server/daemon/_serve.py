"""Serving a daemon: the REST face's state, ``/acp``'s connections and the HTTP server, put together; the CLI runner.

``open_daemon`` binds first (so the printed URL accepts connections at once), serves the app with
:func:`~.server.serve_app`, and on exit: stops accepting, ends every ``/acp`` connection (its prompts answer
"cancelled"), cancels every turn the REST face accepted, publishes their terminal events, ends every event stream,
then waits for the server's open responses — all bounded by ``shutdown_grace_s``.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial

import anyio

from .. import __version__
from ..acp import AgentOptions, preload
from ..bridge import SessionBridge
from ._app import create_app
from ._options import DaemonOptions
from .remote import AcpOverHttp
from .rest import Daemon
from .server import bind_socket, raise_fd_limit, serve_app

__all__ = ["ANNOUNCE_PREFIX", "RunningDaemon", "open_daemon", "run_daemon"]

logger = logging.getLogger("acp_server.daemon")

ANNOUNCE_PREFIX = "acp-server serve: listening on "


@dataclass(frozen=True)
class RunningDaemon:
    """A daemon being served: its base URL, the REST face's state and ``/acp``'s connections."""

    url: str
    daemon: Daemon
    acp: AcpOverHttp


@asynccontextmanager
async def open_daemon(
    bridge: SessionBridge, options: DaemonOptions, *, sock: socket.socket | None = None
) -> AsyncIterator[RunningDaemon]:
    """Serve ``bridge`` over HTTP until the block exits, then shut down gracefully (see the module docstring).

    ``sock``: an already listening socket (it is closed on exit); default: bind ``options.host:options.port``.
    """
    sock = sock if sock is not None else bind_socket(options.host, options.port)
    async with Daemon(bridge, options) as daemon:
        agent_options = AgentOptions(version=__version__, fs_request_timeout_ms=options.fs_request_timeout_ms)
        acp = AcpOverHttp(bridge, agent_options, heartbeat_s=options.heartbeat_s)

        async def drain() -> None:
            await acp.aclose()  # /acp prompts answer "cancelled" and free their slots
            await daemon.shutdown()  # cancel turns, publish their ends, end the streams

        async with serve_app(create_app(daemon, acp), sock, options, drain=drain) as url:
            yield RunningDaemon(url, daemon, acp)


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
