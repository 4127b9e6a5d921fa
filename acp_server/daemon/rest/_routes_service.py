"""The daemon as a service: ``/health`` and ``/capabilities`` (``/acp`` is the remote part's: ``remote/_routes.py``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ._request import daemon_of

__all__ = ["capabilities", "health"]


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
