"""The Starlette application: routes over a :class:`Daemon`, guards, and the one error mapper. No global state.

Routes (every one but ``/health`` needs the bearer token when one is set):

    GET    /health                     {"status": "ok", "instance"}: this process's instance id (the holder named
                                       by ``session_busy``; never a secret); 503 {"status": "unavailable",
                                       "instance", "code", "error"} while the session store cannot be used
    GET    /capabilities               {v, protocolVersions, features, modes, tools, limits}
    POST   /session                    {cwd, modeId?} → 201 {sessionId, modeId, modelId}, Location /session/{id};
                                       the mode (absent or null: the daemon's default) is stored with the session
    POST   /session/{id}/resume        {cwd?} → 200 {sessionId, modeId, modelId}: attach a stored session, no replay
    DELETE /session/{id}               204: detach (history stays stored); its streams end with ``session_closed``
    POST   /session/{id}/delete        204: as DELETE, then the session and its stored history are removed for good
                                       (ACP ``session/delete``; DELETE already means detach)
    POST   /session/{id}/mode          {modeId} → 200 {sessionId, modeId, modelId}; a change publishes
                                       ``mode_changed`` then ``config_changed``
    POST   /session/{id}/config        {configId, value} → 200 {sessionId, modeId, modelId, configOptions}: set the
                                       ``mode`` (as ``/mode``) or ``model``; a change publishes ``config_changed``
    POST   /session/{id}/permission/{requestId}
                                       {optionId} → 204: answer a pending ``permission_request``
    POST   /session/{id}/prompt        {prompt, deadlineMs?} → 202 {promptId, lastEventId};
                                       ?wait=true → 200 {promptId, stopReason}; full queue → 503 + Retry-After
    POST   /session/{id}/cancel        204 (the session: its running prompt and every waiting one)
    POST   /session/{id}/prompt/{promptId}/cancel
                                       204: that one prompt
    GET    /session/{id}/events        text/event-stream, ``Last-Event-ID`` replay
    POST   /acp, GET /acp, DELETE /acp ACP's remote transport: Streamable HTTP (+ SSE streams) and, on a GET with
                                       ``Upgrade: websocket``, WebSocket (``_acp_http.py``)

Invariant: one ``Route`` per path, listing every method it serves, so a 405's ``Allow`` header is complete. The
table (:data:`ROUTES`) is here and only here; the endpoints are module-level functions, grouped by resource
(``_routes_service``, ``_routes_sessions``, ``_routes_prompts``), each reaching its daemon through
``request.app.state.daemon``, which :func:`create_app` sets once.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from ..errors import ServerError
from . import remote, rest
from ._errors import error_response
from ._exceptions import InvalidRequestError, MethodNotAllowedError, RouteNotFoundError
from ._security import BodyLimit, RequestGuard
from .remote import CONNECTION_HEADER, SESSION_HEADER, AcpOverHttp
from .rest import Daemon

__all__ = ["ROUTES", "create_app"]

ACP_HEADERS = (CONNECTION_HEADER, SESSION_HEADER)

ROUTES: tuple[BaseRoute, ...] = (*rest.ROUTES, *remote.ROUTES)
"""Every route of the daemon, one per path (``/acp``'s WebSocket beside its HTTP route: a different scope type)."""


# -- errors ----------------------------------------------------------------------------------------------------


async def _on_error(request: Request, exc: Exception) -> Response:
    """Domain errors (bridge, pipeline, daemon): their mapped status and body."""
    return error_response(exc)


async def _on_internal(request: Request, exc: Exception) -> Response:
    """Anything else: 500 ``internal``, no traceback on the wire (Starlette re-raises it to the server's log)."""
    return error_response(exc)


async def _on_http_exception(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 / 405 (routing) become our JSON bodies."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        allowed = [m.strip() for m in (exc.headers or {}).get("Allow", "").split(",") if m.strip()]
        return error_response(MethodNotAllowedError(request.method, request.url.path, allowed))
    if exc.status_code == 404:
        return error_response(RouteNotFoundError(request.url.path))
    return error_response(InvalidRequestError(f"{exc.status_code}: {exc.detail}"))


def create_app(daemon: Daemon, acp: AcpOverHttp | None = None) -> Starlette:
    """The ASGI app of one daemon: the REST face over ``daemon``, ``/acp`` over ``acp`` (None: ``/acp`` answers 503),
    guards (CORS only with allowed origins) and error mapping."""
    options = daemon.options
    middleware: list[Middleware] = []
    if options.allow_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(options.allow_origins),
                allow_methods=["GET", "POST", "DELETE"],
                allow_headers=["Authorization", "Content-Type", "Last-Event-ID", *ACP_HEADERS],
                expose_headers=["Retry-After", *ACP_HEADERS],
            )
        )
    middleware += [
        Middleware(
            RequestGuard,
            token=options.token,
            allow_origins=options.allow_origins,
            check_host=options.loopback and not options.token,
        ),
        Middleware(BodyLimit, max_bytes=options.max_body_bytes, timeout_s=options.body_timeout_s),
    ]
    app = Starlette(
        routes=list(ROUTES),
        middleware=middleware,
        exception_handlers={HTTPException: _on_http_exception, ServerError: _on_error, Exception: _on_internal},
    )
    app.state.daemon = daemon  # the REST endpoints' one way to their state (rest/_request.daemon_of)
    app.state.acp = acp  # /acp's (remote/_routes.py)
    return app
