"""JSON-RPC 2.0 plumbing: one ACP connection whatever its transport (dispatcher, agent, shutdown order), NDJSON
framing, the dispatcher (messages out, not bytes; requests to the client awaited until their responses; pygls
confined to running its handler tasks), the stdio transport and its ordered outbox, the routed connection of remote
transports (messages to per-stream channels), the error mapper."""

from ._connection import SHUTDOWN_GRACE_S, Connection, Transport
from ._dispatcher import Dispatcher, MessageSink, NotificationHandler, RequestHandler, RequestPeer, is_response
from ._errors import RpcError, to_rpc_error
from ._framing import DEFAULT_MAX_LINE_BYTES, OversizedLine, check_envelope, decode_line, iter_lines, lone_surrogate_at
from ._outbox import Outbox, encode_json, encode_line
from ._routed import Channel, RoutedConnection
from ._stdio import StdioStreams, open_stdio

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
