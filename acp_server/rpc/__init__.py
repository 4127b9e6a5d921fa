"""JSON-RPC 2.0 plumbing: one ACP connection whatever its transport (dispatcher, agent, shutdown order), NDJSON
framing, the dispatcher (messages out, not bytes; requests to the client awaited until their responses; pygls
confined to running its handler tasks), the stdio transport and its ordered outbox, the routed connection of remote
transports (messages to per-stream channels), the error mapper.

Importing the package costs nothing until a name is used (PEP 562): the shell client (``ask``) needs only the
framing, not the agent stack that :class:`Connection` binds (~0.6 s of imports per process)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._connection import SHUTDOWN_GRACE_S, Connection, Transport
    from ._dispatcher import Dispatcher, MessageSink, NotificationHandler, RequestHandler, RequestPeer, is_response
    from ._errors import RpcError, to_rpc_error
    from ._framing import (
        DEFAULT_MAX_LINE_BYTES,
        OversizedLine,
        check_envelope,
        decode_line,
        iter_lines,
        lone_surrogate_at,
    )
    from ._outbox import Outbox, encode_json, encode_line
    from ._routed import Channel, RoutedConnection
    from ._stdio import StdioStreams, open_stdio

_WHERE = {
    "Channel": "_routed",
    "Connection": "_connection",
    "DEFAULT_MAX_LINE_BYTES": "_framing",
    "Dispatcher": "_dispatcher",
    "MessageSink": "_dispatcher",
    "NotificationHandler": "_dispatcher",
    "Outbox": "_outbox",
    "OversizedLine": "_framing",
    "RequestHandler": "_dispatcher",
    "RequestPeer": "_dispatcher",
    "RoutedConnection": "_routed",
    "RpcError": "_errors",
    "SHUTDOWN_GRACE_S": "_connection",
    "StdioStreams": "_stdio",
    "Transport": "_connection",
    "check_envelope": "_framing",
    "decode_line": "_framing",
    "encode_json": "_outbox",
    "encode_line": "_outbox",
    "is_response": "_dispatcher",
    "iter_lines": "_framing",
    "lone_surrogate_at": "_framing",
    "open_stdio": "_stdio",
    "to_rpc_error": "_errors",
}


def __getattr__(name: str) -> Any:
    """``name`` from the submodule that defines it, imported on first use (then cached as a module attribute)."""
    try:
        module = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "SHUTDOWN_GRACE_S",
    "Channel",
    "Connection",
    "Dispatcher",
    "MessageSink",
    "NotificationHandler",
    "Outbox",
    "OversizedLine",
    "RequestHandler",
    "RequestPeer",
    "RoutedConnection",
    "RpcError",
    "StdioStreams",
    "Transport",
    "check_envelope",
    "decode_line",
    "encode_json",
    "encode_line",
    "is_response",
    "iter_lines",
    "lone_surrogate_at",
    "open_stdio",
    "to_rpc_error",
]
