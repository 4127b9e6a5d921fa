"""The daemon as a service: ``/health``, ``/capabilities`` and ACP's remote transport on ``/acp``.

Invariant: ``/acp`` is refused (503 over HTTP, close 1013 over WebSocket) once the daemon is closing or has no ACP
endpoint; one endpoint serves every HTTP method of ``/acp`` so that a 405 lists them all.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket

from ..bridge import BridgeClosedError
from ._request import daemon_of

__all__ = ["acp", "acp_websocket", "capabilities", "health"]


async def health(request: Request) -> Response:
    """``GET /health`` → 200 ``{"status": "ok", "instance"}`` (the instance id, never a secret) while the session store
    can be used, asked now (``SessionStore.health``); 503 ``{"status": "unavailable", "instance", "code", "error"}``
    while it cannot (a load balancer's check takes the process out, and back in once the store is back)."""
    store = daemon_of(request).bridge.store
    problem = await store.health()
    if problem is None:
        return JSONResponse({"status": "ok", "instance": store.instance})
    body = {"status": "unavailable", "instance": store.instance, "code": problem.error_kind, "error": str(problem)}
    return JSONResponse(body, status_code=503)


async def capabilities(request: Request) -> Response:
    """``GET /capabilities`` → what this daemon offers."""
    return JSONResponse(daemon_of(request).capabilities())


async def acp(request: Request) -> Response:
    """``GET``/``POST``/``DELETE /acp``: Streamable HTTP, handed to the daemon's ACP endpoint."""
    daemon = daemon_of(request)
    if daemon.acp is None or daemon.closing:
        raise BridgeClosedError("The daemon is shutting down")
    if request.method == "DELETE":
        return await daemon.acp.delete(request)
    if request.method in ("GET", "HEAD"):
        return await daemon.acp.get(request)
    return await daemon.acp.post(request)


async def acp_websocket(websocket: WebSocket) -> None:
    """``GET /acp`` with ``Upgrade: websocket``: ACP over a WebSocket."""
    daemon = daemon_of(websocket)
    if daemon.acp is None or daemon.closing:
        await websocket.close(1013)  # try again later: the daemon is shutting down
        return
    await daemon.acp.websocket(websocket)
