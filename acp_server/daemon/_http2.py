"""HTTP/2 on the daemon's port: cleartext with prior knowledge, served by Hypercorn's HTTP/2 stack.

uvicorn speaks HTTP/1.1 only. A connection whose first bytes are the HTTP/2 connection preface is handed — its
transport and the bytes read so far — to Hypercorn's connection server (h2 framing, flow control, stream limits,
``:authority`` as ``Host``); every other connection stays with uvicorn and its guards. The same ASGI app serves
both, so every route, the token, Host and Origin rules and CORS hold on HTTP/2 as on HTTP/1.1.

Invariants: a handed-over connection still counts against the connection cap until its Hypercorn server ends (it
is never displaced: it has finished its preface); it is idle-closed after ``keep_alive_s`` without a stream; the
daemon's graceful shutdown refuses its new streams and closes it once its open streams end (uvicorn cancels it when
the grace runs out). It has no transport abort: a lagging SSE subscriber on HTTP/2 is ended, not reset, and the
stream's flow-control window bounds what waits for it.

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
from typing import Any

import h2.events
import h2.settings
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.asyncio.task_group import TaskGroup
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.asyncio.worker_context import WorkerContext
from hypercorn.config import Config
from hypercorn.protocol.h2 import H2Protocol
from hypercorn.typing import ConnectionState
from hypercorn.utils import parse_socket_addr
from starlette.types import ASGIApp

__all__ = ["PREFACE", "Http2Server"]

logger = logging.getLogger("acp_server.daemon")

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


class _H2Protocol(H2Protocol):
    """Hypercorn's HTTP/2 protocol, which drops the DATA of a stream it has already closed (see the module), and
    does not offer WebSocket over HTTP/2 (RFC 8441): ``/acp``'s WebSocket is served, and tested, on HTTP/1.1."""

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
        kept: list[h2.events.Event] = []
        for event in events:
            if isinstance(event, h2.events.DataReceived) and event.stream_id not in self.streams:
                self.connection.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            else:
                kept.append(event)
        await super()._handle_events(kept)


class _Connection(TCPServer):
    """Hypercorn's connection server, speaking HTTP/2 from its first byte."""

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
        self._config = config
        self._app = ASGIWrapper(app)  # type: ignore[arg-type]  # starlette's and hypercorn's ASGI typings differ
        self._context = _Context(None)
        self._terminated: _Event = self._context.terminated  # type: ignore[assignment]

    def serve(self, transport: asyncio.Transport, received: bytes) -> asyncio.Task[None]:
        """Serve ``transport`` (its protocol is replaced) from ``received`` on; the task ends with the connection."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        reader.feed_data(received)
        if not transport.is_reading():
            transport.resume_reading()
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        server = _Connection(self._app, loop, self._config, self._context, {}, reader, writer)
        return loop.create_task(server.run(), name="HTTP/2 connection")

    def terminate(self) -> None:
        """Graceful shutdown: refuse new streams, close each connection once its open streams have ended."""
        self._terminated.set_now()
