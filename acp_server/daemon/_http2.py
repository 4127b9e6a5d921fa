"""HTTP/2 on the daemon's port: cleartext with prior knowledge, served by Hypercorn's HTTP/2 stack.

uvicorn speaks HTTP/1.1 only. A connection whose first bytes are the HTTP/2 connection preface is handed — its
transport and the bytes read so far — to Hypercorn's connection server (h2 framing, flow control, stream limits,
``:authority`` as ``Host``); every other connection stays with uvicorn and its guards. The same ASGI app serves
both, so every route, the token, Host and Origin rules and CORS hold on HTTP/2 as on HTTP/1.1.

Invariants: a handed-over connection still counts against the connection cap until its Hypercorn server ends;
while it has no open stream it may be displaced by a newcomer at the cap, like an HTTP/1.1 connection waiting for
its next request, and it is closed after ``keep_alive_s``; it has at most :data:`MAX_STREAMS` streams open at once.
The daemon's graceful shutdown refuses its new streams and closes it once its open streams end (uvicorn cancels it
when the grace runs out). It has no transport abort: a lagging SSE subscriber on HTTP/2 is ended, not reset, and
the stream's flow-control window bounds what waits for it.

Hypercorn is used below its public entry points (``hypercorn.asyncio.serve`` owns the listening socket): its
connection server ``TCPServer`` (reading, writing, the idle timer) with its ``H2Protocol`` installed directly — the
preface already says HTTP/2 — and fixed where it would end a whole connection for one stream: DATA that arrives for
a stream already answered and closed (a request refused on its headers, such as a 401 or a 413, whose client is
still sending the body) raised ``KeyError`` and killed every other stream of the connection; it is acknowledged and
dropped. The pieces used (``TCPServer``'s constructor and attributes, ``H2Protocol``'s constructor and
``_handle_events``, ``WorkerContext.event_class`` / ``terminated``, ``ASGIWrapper``) are pinned by
``tests/daemon/test_http2.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import h2.errors
import h2.events
import h2.settings
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.asyncio.task_group import TaskGroup
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.asyncio.worker_context import WorkerContext
from hypercorn.config import Config
from hypercorn.events import Event, Updated
from hypercorn.protocol.h2 import H2Protocol
from hypercorn.typing import ConnectionState
from hypercorn.utils import parse_socket_addr
from starlette.types import ASGIApp

__all__ = ["MAX_STREAMS", "PREFACE", "Http2Server"]

logger = logging.getLogger("acp_server.daemon")

MAX_STREAMS = 32
"""Streams an HTTP/2 connection may have open at once (each costs what an HTTP/1.1 connection's request does)."""

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
"""The HTTP/2 client connection preface (RFC 9113 §3.4): its first bytes tell a prior-knowledge client apart."""


class _Event:
    """Hypercorn's event interface over an ``asyncio.Event`` — settable from a plain callback (uvicorn's shutdown)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    async def clear(self) -> None:
        self._event.clear()

    async def wait(self) -> None:
        await self._event.wait()

    async def set(self) -> None:
        self._event.set()

    def set_now(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()


class _Context(WorkerContext):
    event_class = _Event


def _servable(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether Hypercorn can make a request of these headers: an ASCII ``:method`` other than ``CONNECT`` and an
    ASCII ``:path`` (it would raise on anything else, and that would end every stream of the connection)."""
    fields = dict(headers)
    method, path = fields.get(b":method"), fields.get(b":path")
    return method is not None and path is not None and method.isascii() and path.isascii() and method != b"CONNECT"


class _H2Protocol(H2Protocol):
    """Hypercorn's HTTP/2 protocol where one stream's input never ends the connection: DATA for a stream already
    closed is acknowledged and dropped, a request it cannot make is reset (see the module); and without WebSocket
    over HTTP/2 (RFC 8441): ``/acp``'s WebSocket is served, and tested, on HTTP/1.1."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.connection.local_settings = h2.settings.Settings(  # hypercorn's, without ENABLE_CONNECT_PROTOCOL
            client=False,
            initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: self.config.h2_max_concurrent_streams,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: self.config.h2_max_header_list_size,
                h2.settings.SettingCodes.ENABLE_CONNECT_PROTOCOL: 0,
            },
        )

    async def _handle_events(self, events: list[h2.events.Event]) -> None:
        # One event at a time: whether a DATA frame's stream is open depends on the HEADERS before it in the batch.
        for event in events:
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.RequestReceived) and not _servable(event.headers):
                logger.debug("HTTP/2 stream %d reset: a request that cannot be served", event.stream_id)
                self.connection.reset_stream(event.stream_id, h2.errors.ErrorCodes.PROTOCOL_ERROR)
            else:
                await super()._handle_events([event])  # which flushes
                continue
            await self._flush()


class _Connection(TCPServer):
    """Hypercorn's connection server, speaking HTTP/2 from its first byte; tells ``on_idle`` when the connection
    becomes idle (no open stream) or busy."""

    on_idle: Callable[[bool], None] = staticmethod(lambda idle: None)

    async def protocol_send(self, event: Event) -> None:
        if isinstance(event, Updated):
            self.on_idle(event.idle)
        await super().protocol_send(event)

    async def run(self) -> None:
        sock = self.writer.get_extra_info("socket")
        try:
            client = parse_socket_addr(sock.family, sock.getpeername())
            server = parse_socket_addr(sock.family, sock.getsockname())
            async with TaskGroup(self.loop) as task_group:
                self._task_group = task_group
                protocol = _H2Protocol(
                    self.app,
                    self.config,
                    self.context,
                    task_group,
                    ConnectionState(self.state),
                    False,
                    client,
                    server,
                    self.protocol_send,
                )
                self.protocol = protocol  # type: ignore[assignment]  # TCPServer needs only initiate() and handle()
                await protocol.initiate()
                await self.idle_task.restart(task_group, self._idle_timeout)
                await self._read_data()
        except OSError:
            pass
        finally:
            await self._close()


class Http2Server:
    """What the HTTP/2 connections of one daemon share: the app, Hypercorn's settings and its worker context."""

    def __init__(self, app: ASGIApp, *, keep_alive_s: float, max_body_bytes: int) -> None:
        config = Config()
        config.keep_alive_timeout = keep_alive_s
        config.include_server_header = False
        config.accesslog = None
        config.errorlog = logger
        config.websocket_max_message_size = max_body_bytes
        config.h2_max_concurrent_streams = MAX_STREAMS
        self._config = config
        self._app = ASGIWrapper(app)  # type: ignore[arg-type]  # starlette's and hypercorn's ASGI typings differ
        self._context = _Context(None)
        self._terminated: _Event = self._context.terminated  # type: ignore[assignment]

    def serve(
        self, transport: asyncio.Transport, received: bytes, on_idle: Callable[[bool], None]
    ) -> asyncio.Task[None]:
        """Serve ``transport`` (its protocol is replaced) from ``received`` on; the task ends with the connection.
        ``on_idle(idle)``: called as the connection goes idle (no open stream: at first, too) or busy."""
        loop = asyncio.get_running_loop()
        if not transport.is_reading():
            transport.resume_reading()  # uvicorn's pause, if any; from now on the stream reader's own flow control
        reader = asyncio.StreamReader(loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        reader.feed_data(received)
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        server = _Connection(self._app, loop, self._config, self._context, {}, reader, writer)
        server.on_idle = on_idle
        on_idle(True)
        # owner: the caller (a protocol callback: it cannot await), which puts it in uvicorn's task set
        return loop.create_task(server.run(), name="HTTP/2 connection")

    def terminate(self) -> None:
        """Graceful shutdown: refuse new streams, close each connection once its open streams have ended."""
        self._terminated.set_now()
