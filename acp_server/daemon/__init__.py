"""The HTTP daemon (``acp-server serve``): REST + SSE and ACP's remote transport over the same session bridge as stdio.

Three parts, one job each: ``rest/`` (the REST + SSE API, its state :class:`Daemon`), ``remote/`` (ACP over HTTP and
WebSocket on ``/acp``), ``server/`` (uvicorn on a bound socket and the connection defences below the app). rest and
remote may use server, never each other; this package's own modules put them together: ``create_app(daemon, acp)``
is the Starlette app, ``open_daemon`` serves it, ``run_daemon`` is the command's runner (signals, URL line).
Admission stays the bridge's (Q3, Q8: the queue requirements written out in ``docs/requirements.md``). The bridge's
modes are the daemon's safe default, :func:`daemon_modes` (without a token: ``read-only`` only); tool calls and
permission requests travel on the session's event stream and are answered over REST (``rest/_permissions.py``).
"""

from ..tools import PERMISSION_OPTIONS
from ._app import create_app
from ._errors import RETRY_AFTER_S, error_body, error_response, http_status, turn_error_payload
from ._exceptions import (
    DaemonError,
    ForbiddenHostError,
    ForbiddenOriginError,
    InvalidRequestError,
    ListenError,
    MethodNotAllowedError,
    PermissionRequestNotFoundError,
    PromptNotFoundError,
    RequestBodyTooLargeError,
    RequestTimeoutError,
    RouteNotFoundError,
    TooManyConnectionsError,
    UnauthorizedError,
    UnsupportedMediaTypeError,
)
from ._options import DEFAULT_HOST, DEFAULT_PORT, DaemonOptions, daemon_modes, is_loopback_host
from ._serve import ANNOUNCE_PREFIX, RunningDaemon, open_daemon, run_daemon
from .remote import AcpOverHttp
from .rest import FEATURES, Accepted, Daemon, EventLog, RingBudget, Subscription
from .server import bind_socket, url_of

__all__ = [
    "ANNOUNCE_PREFIX",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "FEATURES",
    "PERMISSION_OPTIONS",
    "RETRY_AFTER_S",
    "Accepted",
    "AcpOverHttp",
    "Daemon",
    "DaemonError",
    "DaemonOptions",
    "EventLog",
    "ForbiddenHostError",
    "ForbiddenOriginError",
    "InvalidRequestError",
    "ListenError",
    "MethodNotAllowedError",
    "PermissionRequestNotFoundError",
    "PromptNotFoundError",
    "RequestBodyTooLargeError",
    "RequestTimeoutError",
    "RingBudget",
    "RouteNotFoundError",
    "RunningDaemon",
    "Subscription",
    "TooManyConnectionsError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "bind_socket",
    "create_app",
    "daemon_modes",
    "error_body",
    "error_response",
    "http_status",
    "is_loopback_host",
    "open_daemon",
    "run_daemon",
    "turn_error_payload",
    "url_of",
]
