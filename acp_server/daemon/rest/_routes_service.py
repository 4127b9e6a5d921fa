"""The daemon as a service: ``/health`` and ``/capabilities`` (``/acp`` is the remote part's: ``remote/_routes.py``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ._request import daemon_of

__all__ = ["capabilities", "health"]


async def health(request: Request) -> Response:
    """``GET /health`` → ``{"status": "ok", "instance"}`` (the instance id, never a secret)."""
    return JSONResponse({"status": "ok", "instance": daemon_of(request).bridge.store.instance})


async def capabilities(request: Request) -> Response:
    """``GET /capabilities`` → what this daemon offers."""
    return JSONResponse(daemon_of(request).capabilities())
