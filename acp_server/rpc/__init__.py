"""JSON-RPC 2.0 plumbing: NDJSON framing, the pygls-based dispatcher, the stdio transport, the error mapper."""

from ._dispatcher import Dispatcher, NotificationHandler, RequestHandler
from ._errors import RpcError, to_rpc_error
from ._framing import OversizedLine, check_envelope, decode_line, iter_lines
from ._outbox import Outbox
from ._routed import Exchange, RoutedConnection
from ._stdio import StdioStreams, open_stdio

__all__ = [
    "Dispatcher",
    "Exchange",
    "NotificationHandler",
    "Outbox",
    "OversizedLine",
    "RequestHandler",
    "RoutedConnection",
    "RpcError",
    "StdioStreams",
    "check_envelope",
    "decode_line",
    "iter_lines",
    "open_stdio",
    "to_rpc_error",
]
