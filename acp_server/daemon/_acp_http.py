"""``POST /acp`` / ``DELETE /acp``: ACP JSON-RPC over HTTP, after the MCP "streamable HTTP" convention.

Each ``Acp-Connection-Id`` is one JSON-RPC connection: the *same* pygls dispatcher and ACP handlers as stdio
(:class:`~acp_server.rpc.RoutedConnection` + :class:`~acp_server.acp.AcpAgent`) over the daemon's bridge. This
module adds framing only: one message per request body; the reply is JSON, or ``text/event-stream`` for a request
that streams (each ``session/update``, then the response as the last event).

Statuses: 200 for every JSON-RPC reply (result or error; a queue-full refusal adds ``Retry-After: 5``); 202 for a
notification or a response; 400 with a JSON-RPC error body when the body is not a JSON-RPC message or the
connection header is missing or unknown.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ..acp import AcpAgent, AgentOptions, bind
from ..bridge import SessionBridge
from ..rpc import Exchange, RoutedConnection, RpcError, check_envelope, decode_line, encode_json
from ._errors import RETRY_AFTER_S
from ._events import encode_frame

__all__ = ["CONNECTION_HEADER", "AcpOverHttp"]

logger = logging.getLogger("acp_server.daemon")

CONNECTION_HEADER = "Acp-Connection-Id"
STREAMING_METHODS = frozenset({"session/prompt", "session/load"})


@dataclass
class _Connection:
    routed: RoutedConnection
    agent: AcpAgent


def _json(message: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON-RPC message as a JSON body, encoded by the rpc layer (a lone surrogate in an echoed id is escaped)."""
    return Response(encode_json(message), status_code=status, headers=headers, media_type="application/json")


def _rpc_error(msg_id: Any, error: RpcError, status: int = 400) -> Response:
    return _json({"jsonrpc": "2.0", "id": msg_id, "error": error.to_wire()}, status)


class AcpOverHttp:
    """The registry of ``/acp`` connections: each one a routed dispatcher plus its own :class:`AcpAgent`."""

    def __init__(self, bridge: SessionBridge, agent_options: AgentOptions) -> None:
        self._bridge = bridge
        self._agent_options = agent_options
        self._connections: dict[str, _Connection] = {}

    def _open(self) -> tuple[str, _Connection]:
        connection_id = uuid.uuid4().hex
        routed = RoutedConnection()
        agent = AcpAgent(self._bridge, self._agent_options)
        routed.dispatcher.register(*bind(agent))
        connection = _Connection(routed, agent)
        self._connections[connection_id] = connection
        return connection_id, connection

    async def _close(self, connection: _Connection) -> None:
        connection.agent.cancel_all()
        await connection.routed.dispatcher.aclose()

    async def aclose(self) -> None:
        """End every connection: in-flight prompts are cancelled and answered."""
        connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            await self._close(connection)

    async def delete(self, request: Request) -> Response:
        connection = self._connections.pop(request.headers.get(CONNECTION_HEADER, ""), None)
        if connection is None:
            return _rpc_error(None, RpcError.invalid_request(f"unknown or missing {CONNECTION_HEADER} header"))
        await self._close(connection)
        return Response(status_code=204)

    async def post(self, request: Request) -> Response:
        try:
            message = decode_line(await request.body())
        except RpcError as error:
            return _rpc_error(None, error)
        checked, invalid, reply_id = check_envelope(message)
        if invalid is not None:
            return _rpc_error(reply_id, invalid)
        assert checked is not None
        method = checked.get("method")
        header = request.headers.get(CONNECTION_HEADER)
        headers: dict[str, str] = {}
        if method == "initialize" and header is None:
            header, connection = self._open()
            headers[CONNECTION_HEADER] = header
        elif header is None or header not in self._connections:
            return _rpc_error(reply_id, RpcError.invalid_request(f"unknown or missing {CONNECTION_HEADER} header"))
        else:
            connection = self._connections[header]
        routed = connection.routed
        if "id" not in checked or method is None:  # a notification, or a response to one of our requests
            routed.dispatcher.feed(checked)
            return Response(status_code=202, headers=headers)

        msg_id = checked["id"]
        try:
            exchange = routed.open_exchange(msg_id)
        except KeyError:
            return _rpc_error(msg_id, RpcError.invalid_request(f"request id {msg_id!r} is already in flight"))
        routed.dispatcher.feed(checked)

        first: dict[str, Any] | None = None
        try:
            if method in STREAMING_METHODS:
                async with anyio.create_task_group() as race:

                    async def admitted() -> None:
                        await exchange.admitted.wait()
                        race.cancel_scope.cancel()

                    async def first_message() -> None:
                        nonlocal first
                        first = await exchange.receive()
                        race.cancel_scope.cancel()

                    race.start_soon(admitted)
                    race.start_soon(first_message)
            else:
                first = await exchange.receive()
        except BaseException:
            routed.forget(exchange)
            raise
        if first is not None and "method" not in first:  # answered at once: plain JSON
            routed.forget(exchange)
            data = (first.get("error") or {}).get("data") or {}
            if data.get("errorKind") == "prompt_queue_full":
                headers["Retry-After"] = str(RETRY_AFTER_S)
            return _json(first, headers=headers)
        return StreamingResponse(
            self._stream(connection, exchange, first),
            media_type="text/event-stream",
            headers={**headers, "Cache-Control": "no-store"},
        )

    async def _stream(
        self, connection: _Connection, exchange: Exchange, first: dict[str, Any] | None
    ) -> AsyncIterator[bytes]:
        """Yield the exchange's messages as SSE until its response; a client that leaves early cancels the request."""
        answered = False
        try:
            if first is not None:
                yield encode_frame("message", first)
                answered = "method" not in first
            if not answered:
                async for message in exchange:
                    yield encode_frame("message", message)
                    if "method" not in message:
                        answered = True
                        break
        finally:
            connection.routed.forget(exchange)
            if not answered:
                logger.info("/acp client left before the answer to %r: cancelling it", exchange.msg_id)
                if not connection.agent.cancel_prompt(exchange.msg_id):
                    connection.routed.dispatcher.cancel_request(exchange.msg_id)
