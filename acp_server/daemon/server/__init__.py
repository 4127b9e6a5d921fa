"""The daemon's HTTP server runtime: uvicorn (HTTP/1.1 and WebSocket) on a bound socket, with the connection
defences below the app (``_protocol.py``), the listening socket and the file-descriptor budget (``_listener.py``).

It knows nothing of the routes: :func:`serve_app` serves any ASGI app. Each request's scope carries
:data:`ABORT_EXTENSION` (reset the connection, cap its send buffer) for a response that must end at once.
"""

from ._listener import (
    EMFILE_LOG_INTERVAL_S,
    LISTEN_BACKLOG,
    AcceptErrorLog,
    bind_socket,
    fd_limited_connections,
    raise_fd_limit,
    url_of,
)
from ._protocol import ABORT_EXTENSION, guarded_protocol
from ._uvicorn import serve_app

__all__ = [
    "ABORT_EXTENSION",
    "EMFILE_LOG_INTERVAL_S",
    "LISTEN_BACKLOG",
    "AcceptErrorLog",
    "bind_socket",
    "fd_limited_connections",
    "guarded_protocol",
    "raise_fd_limit",
    "serve_app",
    "url_of",
]
