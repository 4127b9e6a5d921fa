"""JSON-RPC dispatch on pygls: one registry of methods per connection, every reply through the one error mapper.

pygls' :class:`JsonRPCProtocol` supplies the handler registry, one task per async request, the request-id context
and cancellation bookkeeping. We keep params as plain dicts (its default converter turns them into namedtuples), write
replies ourselves (its writer is fire-and-forget and logs whole bodies) and map every exception with
:func:`to_rpc_error` (it would send tracebacks).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from typing import Any, cast

import cattrs
from lsprotocol import converters
from lsprotocol.types import ResponseError
from pygls.protocol.json_rpc import (
    JsonRPCNotification,
    JsonRPCProtocol,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    MsgId,
)
from pygls.server import JsonRPCServer

from ._errors import RpcError, to_rpc_error
from ._framing import check_envelope
from ._outbox import Outbox

__all__ = ["Dispatcher", "NotificationHandler", "RequestHandler"]

logger = logging.getLogger("acp_server.rpc")

RequestHandler = Callable[[Any], Awaitable[Any]]
NotificationHandler = Callable[[Any], None]


def _keep_params(obj: dict[str, Any], cls: type[Any]) -> Any:
    if cls is JsonRPCResponseMessage:
        return cls(id=obj["id"], jsonrpc=obj["jsonrpc"], result=obj.get("result"))
    if cls is JsonRPCRequestMessage:
        return cls(id=obj["id"], method=obj["method"], jsonrpc=obj["jsonrpc"], params=obj.get("params"))
    return cls(method=obj["method"], jsonrpc=obj["jsonrpc"], params=obj.get("params"))


def _plain_converter() -> cattrs.Converter:
    converter = converters.get_converter()
    for cls in (JsonRPCRequestMessage, JsonRPCResponseMessage, JsonRPCNotification):
        converter.register_structure_hook(cls, _keep_params)
    return converter


def _encode(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def _as_request(handler: RequestHandler) -> RequestHandler:
    """A fresh coroutine function per registration (pygls tags handlers with attributes; bound methods refuse)."""

    async def request(params: Any) -> Any:
        return await handler(params)

    return request


def _as_notification(handler: NotificationHandler) -> NotificationHandler:
    def notification(params: Any) -> None:
        handler(params)

    return notification


class _Protocol(JsonRPCProtocol):
    """pygls' protocol with replies written as plain dicts into an :class:`Outbox`."""

    outbox: Outbox

    def _send_data(self, data: Any) -> None:
        if isinstance(data, dict):
            self.outbox.put(_encode(data))
            return
        # pygls' own messages (attrs classes): unstructure with its converter.
        self.outbox.put(_encode(self._converter.unstructure(data)))

    def _send_response(self, msg_id: MsgId, result: Any | None = None, error: Any | None = None) -> None:
        if isinstance(error, ResponseError):
            error = RpcError(error.code, error.message, error.data if isinstance(error.data, dict) else None)
        if isinstance(error, RpcError):
            self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": error.to_wire()})
        else:
            self._send_data({"jsonrpc": "2.0", "id": msg_id, "result": result})

    def _send_handler_result(self, future: Future[Any], *, msg_id: MsgId) -> None:
        self._request_futures.pop(msg_id, None)
        if future.cancelled():
            self._send_response(msg_id, error=RpcError.request_cancelled())
        elif (exc := future.exception()) is not None:
            self._send_response(msg_id, error=to_rpc_error(exc))
        else:
            self._send_response(msg_id, result=future.result())

    def _check_handler_result(self, future: Future[Any]) -> None:
        if not future.cancelled() and (exc := future.exception()) is not None:
            to_rpc_error(exc)  # logs unexpected failures; a notification has no reply


class Dispatcher:
    """Routes parsed JSON-RPC messages of one connection to handlers; every outgoing message goes to ``outbox``.

    Request handlers are coroutines (one task each, owned by pygls' request table and cancelled by ``aclose``);
    notification handlers are synchronous by design (pygls keeps async notification futures forever).
    """

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        server = JsonRPCServer(protocol_cls=_Protocol, converter_factory=_plain_converter)
        self._protocol: _Protocol = server.protocol  # type: ignore[assignment]
        self._protocol.outbox = outbox

    def register(
        self, requests: Mapping[str, RequestHandler], notifications: Mapping[str, NotificationHandler]
    ) -> None:
        """Add one handler per method; a name registered twice is an error."""
        for name, handler in requests.items():
            self._protocol.fm.feature(name)(_as_request(handler))
        for name, notify in notifications.items():
            self._protocol.fm.feature(name)(_as_notification(notify))

    def feed(self, message: Any) -> None:
        """Handle one decoded JSON value: answer a malformed envelope, dispatch the rest."""
        checked, error, reply_id = check_envelope(message)
        if error is not None:
            self.send_error(reply_id, error)
            return
        assert checked is not None
        if "method" not in checked:
            if checked.get("id") is None:
                logger.warning("Peer reported an error: %s", checked.get("error"))
                return
            logger.debug("Ignoring a response to unknown request %r", checked["id"])
            return
        if checked["method"] not in self._protocol.fm.features:
            if "id" in checked:
                self.send_error(checked["id"], RpcError.method_not_found(checked["method"]))
            else:
                logger.debug("Ignoring unknown notification %r", checked["method"])
            return
        try:
            structured = self._protocol.structure_message(checked)
        except Exception:
            self.send_error(reply_id, RpcError.invalid_request("unreadable message"))
            return
        self._protocol.handle_message(structured)

    def send_error(self, msg_id: Any, error: RpcError) -> None:
        """Write an error reply; ``msg_id`` None gives ``"id": null`` (pygls' converter would drop it)."""
        self.outbox.put(_encode({"jsonrpc": "2.0", "id": msg_id, "error": error.to_wire()}))

    def notify(self, method: str, params: Mapping[str, Any]) -> None:
        self.outbox.put(_encode({"jsonrpc": "2.0", "method": method, "params": params}))

    async def wait_writable(self) -> None:
        """Backpressure for producers: wait while the outbox is above its high-water mark."""
        await self.outbox.wait_writable()

    def current_request_id(self) -> MsgId | None:
        """The id of the request whose handler is running in this context."""
        return self._protocol.msg_id

    def cancel_request(self, msg_id: MsgId) -> bool:
        """Cancel a running request handler; it answers -32800. False when no such request is in flight."""
        future = self._protocol._request_futures.get(msg_id)
        return bool(future is not None and future.cancel())

    async def aclose(self, grace_s: float = 5.0) -> None:
        """Wait up to ``grace_s`` for in-flight requests to answer, then cancel the rest and let them answer -32800."""
        # Every handler we register is a coroutine, so pygls stores asyncio tasks (typed as concurrent futures).
        pending = [cast("asyncio.Future[Any]", f) for f in self._protocol._request_futures.values()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=grace_s)
            for future in still:
                future.cancel()
            if still:
                await asyncio.wait(still, timeout=grace_s)
        await asyncio.sleep(0)  # let done-callbacks write their replies
