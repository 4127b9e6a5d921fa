"""The endpoints of ``/acp``: Streamable HTTP (``GET``/``POST``/``DELETE``) and WebSocket, handed to the app's
:class:`~._acp_http.AcpOverHttp` (``app.state.acp``, stored once by ``create_app``; never a global).

Invariant: ``/acp`` is refused (503 over HTTP, close 1013 over WebSocket) once its connections are closing or the
app has none; one endpoint serves every HTTP method of ``/acp`` so that a 405 lists them all.
"""

from __future__ import annotations

from starlette.requests import HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from ...bridge import BridgeClosedError
from ._acp_http import AcpOverHttp

__all__ = ["ROUTES", "acp", "acp_websocket"]


def _open_acp(connection: HTTPConnection) -> AcpOverHttp | None:
    """The app's ``/acp`` connections while they take new messages, else None."""
    acp = getattr(connection.app.state, "acp", None)
    return acp if isinstance(acp, AcpOverHttp) and not acp.closing else None


async def acp(request: Request) -> Response:
    """``GET``/``POST``/``DELETE /acp``: Streamable HTTP."""
    served = _open_acp(request)
    if served is None:
        raise BridgeClosedError("The daemon is shutting down")
    if request.method == "DELETE":
        return await served.delete(request)
    if request.method in ("GET", "HEAD"):
        return await served.get(request)
    return await served.post(request)


async def acp_websocket(websocket: WebSocket) -> None:
    """``GET /acp`` with ``Upgrade: websocket``: ACP over a WebSocket."""
    served = _open_acp(websocket)
    if served is None:
        await websocket.close(1013)  # try again later: the daemon is shutting down
        return
    await served.websocket(websocket)


ROUTES: tuple[BaseRoute, ...] = (
    Route("/acp", acp, methods=["GET", "POST", "DELETE"]),
    WebSocketRoute("/acp", acp_websocket),
)
"""``/acp``'s routes: its WebSocket beside its HTTP route (a different scope type)."""
