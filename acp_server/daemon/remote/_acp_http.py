"""``/acp``: ACP's remote transport — Streamable HTTP (``POST`` / ``GET`` / ``DELETE``) and WebSocket, one endpoint.

Each connection is one :class:`~acp_server.rpc.Connection`, as on stdio (the same dispatcher, ACP agent and
shutdown order) over the daemon's bridge, its messages routed to channels (:class:`~acp_server.rpc.RoutedConnection`).
This module adds framing and routing only.

Streamable HTTP (ACP RFD "Streamable HTTP & WebSocket Transport"):

- ``POST`` carries one JSON-RPC message. ``initialize`` without ``Acp-Connection-Id`` opens a connection: ``200``,
  the JSON response (its result also names ``connectionId``) and the ``Acp-Connection-Id`` header. Every other
  accepted message gets ``202`` with an empty body; the response comes later, on a stream, by JSON-RPC ``id``.
- ``GET`` (``Accept: text/event-stream``) with ``Acp-Connection-Id`` opens the connection stream; with
  ``Acp-Session-Id`` too, that session's stream. One reader per stream at a time (a second one gets ``409``).
- ``DELETE`` with ``Acp-Connection-Id`` ends the connection (``202``): its prompts are cancelled, its streams end.

The agent's own requests (``session/request_permission``, ``fs/*``, ``terminal/*``) go on the stream of the request
whose handler sends them, like its notifications. The client answers each with a ``POST`` of the response, with
``Acp-Connection-Id`` (``Acp-Session-Id`` may be sent and is not checked: a response is matched by its id): ``202``,
whatever it holds — a malformed or unexpected response is logged and ignored, never answered, as on stdio.

Routing (by the request, never guessed from a message body): a request that names a session in
``params.sessionId`` (``session/prompt``, ``session/close``, ``session/cancel``…) is *session-scoped*: it must carry
``Acp-Session-Id`` equal to that id, and its response and every notification its handler sends go on the session's
stream. Everything else — ``session/new``, ``session/load`` and ``session/resume`` (a load's history replay comes
first, then its response), ``session/fork``, ``session/list`` — goes on the connection stream. A session becomes
known to the connection when ``session/new`` / ``session/fork`` answer with it, when ``session/load`` /
``session/resume`` for it is accepted (forgotten again if that fails), or when the client opens its stream and the
session exists (open in the bridge, or stored: clients open a session's stream before they load it);
``session/close`` and ``session/delete`` end its stream after their answer. A change of an attached session's mode,
model or title made elsewhere (another connection, REST, stdio) is sent, on behalf of no request, on the session's
stream while it has a reader, else on the connection stream.

Statuses: ``415`` POST not ``application/json``; ``406`` GET without ``text/event-stream`` in ``Accept``; ``501``
a batch; ``400`` not a JSON-RPC message, a missing ``Acp-Connection-Id``, a session-scoped message without (or with
a different) ``Acp-Session-Id``; ``404`` an unknown connection, or a session unknown to it. These bodies are
JSON-RPC error objects (``id`` kept when readable).

Delivery: nothing is lost silently. A stream's messages wait for its reader — a notification's sender waits while
``capacity`` are unread (backpressure up to the turn); when no reader is attached while messages wait (or the
connection stream has none), the connection is dropped after ``stream_timeout_s`` (its prompts cancelled), and a
stream past its hard limit drops it at once.

Cleanup: a client that leaves without ``DELETE`` leaves nothing behind for long. An HTTP connection lives while
its connection stream has a reader; from ``initialize``, and from each time that reader leaves, it has
``stream_timeout_s`` to get one again (an ``initialize`` never followed by a stream, streams closed without
``DELETE``: dropped then). A WebSocket lives as long as its socket, and must send ``initialize`` within
``stream_timeout_s`` (else it is closed with ``1008``). At most ``max_connections`` connections (both kinds) live at
once: past that, ``initialize`` and the upgrade get ``503`` with ``Retry-After`` and a JSON-RPC error
(``errorKind: too_many_connections``, ``limit``) — so their number, and their memory, are bounded whatever clients do.

WebSocket (``GET`` with ``Upgrade: websocket``): ``101`` with ``Acp-Connection-Id``; text frames are JSON-RPC
messages both ways (``initialize`` first; binary frames ignored); every message of the connection goes on the one
socket, with the same backpressure; a disconnect ends the connection and cancels its prompts. A response frame is
handed to the dispatcher and never answered, even when malformed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.websockets import WebSocket, WebSocketDisconnect

from ...acp import AgentOptions
from ...bridge import SessionBridge
from ...errors import ServerError
from ...rpc import Channel, RpcError, check_envelope, decode_line, encode_json, is_response
from .._sse_frames import HEARTBEAT, encode_frame
from ._acp_connection import ATTACHING_METHODS, AcpConnection

__all__ = ["CONNECTION_HEADER", "SESSION_HEADER", "AcpOverHttp"]

logger = logging.getLogger("acp_server.daemon")

CONNECTION_HEADER = "Acp-Connection-Id"
SESSION_HEADER = "Acp-Session-Id"
STREAM_TIMEOUT_S = 30.0
"""How long a stream's messages (or a connection stream) wait for a reader before the connection is dropped."""
INITIALIZE_TIMEOUT_S = 30.0
"""How long ``POST initialize`` waits for its answer."""
MAX_CONNECTIONS = 1024
"""Live ``/acp`` connections (Streamable HTTP and WebSocket together) past which new ones get ``503``."""
_POLICY_VIOLATION = 1008
"""The WebSocket close code of a socket that did not send ``initialize`` in time."""

_CONNECTION_METHODS = frozenset(
    {"initialize", "authenticate", "session/new", "session/load", "session/resume", "session/fork", "session/list"}
)
"""Requests answered on the connection stream even when their params name a session."""


def _json(body: dict[str, Any], status: int, headers: dict[str, str] | None = None) -> Response:
    """A JSON body, encoded by the rpc layer (a lone surrogate in an echoed id is escaped)."""
    return Response(encode_json(body), status_code=status, headers=headers, media_type="application/json")


def _refusal(status: int, error: RpcError, msg_id: Any = None) -> Response:
    return _json({"jsonrpc": "2.0", "id": msg_id, "error": error.to_wire()}, status)


def _params_session(message: dict[str, Any]) -> str | None:
    params = message.get("params")
    session_id = params.get("sessionId") if isinstance(params, dict) else None
    return session_id if isinstance(session_id, str) else None


class AcpOverHttp:
    """The registry of ``/acp`` connections (Streamable HTTP and WebSocket) over one bridge."""

    def __init__(
        self,
        bridge: SessionBridge,
        agent_options: AgentOptions,
        *,
        stream_timeout_s: float = STREAM_TIMEOUT_S,
        heartbeat_s: float = 15.0,
        capacity: int = 256,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.bridge = bridge
        self.heartbeat_s = heartbeat_s
        self.closing = False
        self.agent_options = agent_options
        self.stream_timeout_s = stream_timeout_s
        self.capacity = capacity
        self.max_connections = max_connections
        self._connections: dict[str, AcpConnection] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def _open(self, *, websocket: bool) -> AcpConnection:
        connection = AcpConnection(self, uuid.uuid4().hex, websocket=websocket)
        self._connections[connection.id] = connection
        return connection

    def drop(self, connection: AcpConnection) -> None:
        """End a connection from a callback (a timer, an overflow): nothing more is delivered on it."""
        if self._connections.get(connection.id) is connection:
            del self._connections[connection.id]
        # owner: this registry (a timer's callback cannot await): kept in _closing, awaited by aclose
        task = asyncio.get_running_loop().create_task(connection.aclose(deliver=False))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """End every connection: in-flight prompts are cancelled and answered on their streams."""
        self.closing = True
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await connection.aclose(deliver=True)
        if self._closing:
            await asyncio.wait(list(self._closing))

    def connection_count(self) -> int:
        return len(self._connections)

    def _full(self, msg_id: Any = None) -> Response | None:
        """The ``503`` refusing a new connection at the cap, else None."""
        if len(self._connections) < self.max_connections:
            return None
        limit = self.max_connections
        error = RpcError(
            -32603,
            f"Too many /acp connections (limit {limit}); retry later, or end unused ones with DELETE /acp",
            {"errorKind": "too_many_connections", "limit": limit, "retryable": True},
        )
        retry_after = str(max(1, math.ceil(self.stream_timeout_s)))  # an abandoned connection is gone by then
        return _json({"jsonrpc": "2.0", "id": msg_id, "error": error.to_wire()}, 503, {"Retry-After": retry_after})

    def _http_connection(self, request: Request, msg_id: Any = None) -> AcpConnection | Response:
        header = request.headers.get(CONNECTION_HEADER)
        if header is None:
            return _refusal(400, RpcError.invalid_request(f"missing {CONNECTION_HEADER} header"), msg_id)
        connection = self._connections.get(header)
        if connection is None or connection.websocket:
            return _refusal(404, RpcError.invalid_request(f"unknown {CONNECTION_HEADER}"), msg_id)
        return connection

    # -- DELETE ----------------------------------------------------------------------------------------------

    async def delete(self, request: Request) -> Response:
        connection = self._http_connection(request)
        if isinstance(connection, Response):
            return connection
        del self._connections[connection.id]
        await connection.aclose(deliver=True)
        return Response(status_code=202)

    # -- POST ------------------------------------------------------------------------------------------------

    async def post(self, request: Request) -> Response:
        media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if media_type != "application/json":
            return _refusal(415, RpcError.invalid_request("Content-Type must be application/json"))
        try:
            message = decode_line(await request.body())
        except RpcError as error:
            return _refusal(400, error)
        if isinstance(message, list):
            return _refusal(501, RpcError.invalid_request("batch requests are not supported"))
        if is_response(message):
            return self._post_response(request, message)
        checked, invalid, reply_id = check_envelope(message)
        if invalid is not None:
            return _refusal(400, invalid, reply_id)
        assert checked is not None
        method = checked.get("method")
        if method == "initialize" and "id" in checked and CONNECTION_HEADER not in request.headers:
            return await self._initialize(checked)
        connection = self._http_connection(request, reply_id)
        if isinstance(connection, Response):
            return connection
        session_header = request.headers.get(SESSION_HEADER)
        session_id = _params_session(checked) if method is not None else None
        if method is not None and session_id is not None and method not in _CONNECTION_METHODS:
            if session_header is None:
                return _refusal(400, RpcError.invalid_request(f"{method} needs the {SESSION_HEADER} header"), reply_id)
            if session_header != session_id:
                return _refusal(
                    400, RpcError.invalid_request(f"{SESSION_HEADER} differs from params.sessionId"), reply_id
                )
            channel = connection.channels.get(session_id)
            if channel is None:
                return _refusal(404, RpcError.invalid_request(f"unknown {SESSION_HEADER} on this connection"), reply_id)
            connection.submit(checked, channel, session_id)
            return Response(status_code=202)
        if session_header is not None:
            if method in ATTACHING_METHODS:
                if session_header != session_id:
                    return _refusal(
                        400, RpcError.invalid_request(f"{SESSION_HEADER} differs from params.sessionId"), reply_id
                    )
            elif session_header not in connection.channels:
                return _refusal(404, RpcError.invalid_request(f"unknown {SESSION_HEADER} on this connection"), reply_id)
        connection.submit(checked, connection.channels[None], session_id)
        return Response(status_code=202)

    def _post_response(self, request: Request, message: dict[str, Any]) -> Response:
        """The client's answer to one of our requests: ``202``, handed to the dispatcher, which checks it (a malformed
        or unexpected one is logged and ignored, as on stdio). Refusals (no connection) carry no ``id``."""
        connection = self._http_connection(request)
        if isinstance(connection, Response):
            return connection
        connection.respond(message)
        return Response(status_code=202)

    async def _initialize(self, message: dict[str, Any]) -> Response:
        full = self._full(message.get("id"))
        if full is not None:
            return full
        connection = self._open(websocket=False)
        answer = Channel("initialize")
        connection.submit(message, answer)
        reply: dict[str, Any] | None = None
        with anyio.move_on_after(INITIALIZE_TIMEOUT_S):
            reply = await answer.receive()
        if reply is None or "result" not in reply:
            self._connections.pop(connection.id, None)
            await connection.aclose(deliver=False)
            if reply is None:
                timed_out = RpcError(-32603, "initialize timed out", {"errorKind": "timeout"})
                return _refusal(504, timed_out, message.get("id"))
            return _json(reply, 400)
        if isinstance(reply["result"], dict):
            reply = {**reply, "result": {**reply["result"], "connectionId": connection.id}}
        return _json(reply, 200, {CONNECTION_HEADER: connection.id})

    # -- GET: a stream -----------------------------------------------------------------------------------------

    async def get(self, request: Request) -> Response:
        accept = request.headers.get("accept", "")
        if "text/event-stream" not in accept.lower():
            return _refusal(406, RpcError.invalid_request("Accept must include text/event-stream"))
        connection = self._http_connection(request)
        if isinstance(connection, Response):
            return connection
        session_id = request.headers.get(SESSION_HEADER)
        channel = connection.channels.get(session_id)
        if channel is None and session_id is not None and await self._session_exists(session_id):
            connection.add_session(session_id)  # a client about to load or resume it opens its stream first
            channel = connection.channels[session_id]
        if channel is None:
            return _refusal(404, RpcError.invalid_request(f"unknown {SESSION_HEADER}"))
        if channel.attached:
            return _refusal(409, RpcError.invalid_request("this stream already has a reader"))
        connection.attach(channel)
        return StreamingResponse(
            self._stream(connection, channel, request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _session_exists(self, session_id: str) -> bool:
        """The session is open in the bridge or stored (a store that fails counts as no)."""
        try:
            self.bridge.get(session_id)
            return True
        except ServerError:
            pass
        try:
            return await self.bridge.store.read_session(session_id) is not None
        except ServerError:
            return False

    async def _stream(self, connection: AcpConnection, channel: Channel, request: Request) -> AsyncIterator[bytes]:
        """Yield the channel's messages as SSE (a comment when idle) until it ends or the reader leaves."""
        heartbeat_s = self.heartbeat_s
        try:
            while True:
                message: dict[str, Any] | None = None
                with anyio.move_on_after(heartbeat_s):
                    try:
                        message = await channel.receive()
                    except anyio.EndOfStream:
                        return
                yield HEARTBEAT if message is None else encode_frame("message", message)
        finally:
            connection.detach(channel)

    # -- WebSocket ---------------------------------------------------------------------------------------------

    async def websocket(self, websocket: WebSocket) -> None:
        full = self._full()
        if full is not None:  # refused before the 101: the same 503 as HTTP, or a "try again later" close
            if "websocket.http.response" in websocket.scope.get("extensions", {}):
                await websocket.send_denial_response(full)
            else:
                await websocket.close(1013)
            return
        connection = self._open(websocket=True)
        await websocket.accept(headers=[(CONNECTION_HEADER.lower().encode(), connection.id.encode())])
        stream = connection.channels[None]
        connection.attach(stream)
        close_code, reason = 1000, None
        try:
            async with anyio.create_task_group() as tg:

                async def write() -> None:
                    while True:
                        try:
                            message = await stream.receive()
                        except anyio.EndOfStream:
                            break
                        await websocket.send_text(encode_json(message).decode())
                    tg.cancel_scope.cancel()

                tg.start_soon(write)
                close_code, reason = await self._read_frames(connection, websocket)
                tg.cancel_scope.cancel()
        finally:
            self._connections.pop(connection.id, None)
            with anyio.CancelScope(shield=True):
                await connection.aclose(deliver=False)
                with contextlib.suppress(Exception):
                    await websocket.close(1001 if self.closing else close_code, reason)

    async def _read_frames(self, connection: AcpConnection, websocket: WebSocket) -> tuple[int, str | None]:
        """Submit each text frame until the client leaves (then the close code and reason to send): ``initialize``
        must come first, within ``stream_timeout_s``."""
        stream = connection.channels[None]
        initialized = False
        deadline = anyio.current_time() + self.stream_timeout_s  # for initialize; then none
        while True:
            with anyio.CancelScope(deadline=deadline) as waiting:
                try:
                    frame = await websocket.receive()
                except WebSocketDisconnect:
                    return 1000, None
            if waiting.cancelled_caught:
                timeout_s = self.stream_timeout_s
                logger.warning("/acp connection %s closed: no initialize within %gs", connection.id, timeout_s)
                return _POLICY_VIOLATION, f"send initialize within {timeout_s:g} s"
            if frame["type"] == "websocket.disconnect":
                return 1000, None
            text = frame.get("text")
            if text is None:
                continue  # a binary frame: ignored
            try:
                message = decode_line(text.encode("utf-8", "surrogatepass"))
            except RpcError as unreadable:
                stream.put({"jsonrpc": "2.0", "id": None, "error": unreadable.to_wire()})
                continue
            if isinstance(message, list):
                batch = RpcError.invalid_request("batch requests are not supported")
                stream.put({"jsonrpc": "2.0", "id": None, "error": batch.to_wire()})
                continue
            if is_response(message):
                connection.respond(message)  # the dispatcher checks it; never answered
                continue
            checked, invalid, reply_id = check_envelope(message)
            if invalid is not None:
                stream.put({"jsonrpc": "2.0", "id": reply_id, "error": invalid.to_wire()})
                continue
            assert checked is not None
            if not initialized:
                if checked.get("method") != "initialize" or "id" not in checked:
                    if "id" in checked and "method" in checked:
                        first = RpcError.invalid_request("send initialize first")
                        stream.put({"jsonrpc": "2.0", "id": checked["id"], "error": first.to_wire()})
                    continue
                initialized = True
                deadline = math.inf
            session_id = _params_session(checked) if "method" in checked else None
            connection.submit(checked, stream, session_id)
