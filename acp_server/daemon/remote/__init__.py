"""ACP's remote transport on ``/acp``: Streamable HTTP and WebSocket, each connection one
:class:`~acp_server.rpc.Connection` over the session bridge (the same dispatcher and ACP agent as stdio).

:class:`AcpOverHttp` holds the connections; :data:`ROUTES` are its endpoints, which find it on ``app.state.acp``. It
knows nothing of the REST face: the two meet only in the bridge.
"""

from ._acp_http import CONNECTION_HEADER, SESSION_HEADER, AcpOverHttp
from ._routes import ROUTES, acp, acp_websocket

__all__ = ["CONNECTION_HEADER", "ROUTES", "SESSION_HEADER", "AcpOverHttp", "acp", "acp_websocket"]
