"""The Starlette application: routes over a :class:`Daemon`, guards, and the one error mapper. No global state.

Routes (every one but ``/health`` needs the bearer token when one is set):

    GET    /health                     {"status": "ok", "instance"}: this process's instance id (the holder named
                                       by ``session_busy``; never a secret)
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
    GET    /session/{id}/events        text/event-stream, ``Last-Event-ID`` replay
    POST   /acp, GET /acp, DELETE /acp ACP's remote transport: Streamable HTTP (+ SSE streams) and, on a GET with
                                       ``Upgrade: websocket``, WebSocket (``_acp_http.py``)

Invariant: one ``Route`` per path, listing every method it serves, so a 405's ``Allow`` header is complete.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from ..acp import load_schema, model, prompt_from_blocks, validate
from ..bridge import BridgeClosedError
from ..domain import Prompt, StopReason
from ..errors import ServerError
from ..rpc import lone_surrogate_at
from ..tools.mcp_servers import parse_mcp_servers
from ._acp_http import CONNECTION_HEADER, SESSION_HEADER
from ._daemon import Daemon
from ._disconnect import wait_disconnected
from ._errors import error_response
from ._exceptions import (
    InvalidRequestError,
    MethodNotAllowedError,
    RouteNotFoundError,
    UnsupportedMediaTypeError,
)
from ._options import MAX_EVENT_ID
from ._security import BodyLimit, RequestGuard
from ._sse import EventStreamResponse

__all__ = ["create_app"]

ACP_HEADERS = (CONNECTION_HEADER, SESSION_HEADER)

_PROMPT_FIELDS = frozenset({"prompt", "deadlineMs"})
_SESSION_FIELDS = frozenset({"cwd", "modeId", "mcpServers"})
_RESUME_FIELDS = frozenset({"cwd", "mcpServers"})
_MODE_FIELDS = frozenset({"modeId"})
_CONFIG_FIELDS = frozenset({"configId", "value"})
_ANSWER_FIELDS = frozenset({"optionId"})
MAX_DEADLINE_MS = 2**31 - 1
"""The longest per-prompt ``deadlineMs`` (~24.8 days, JavaScript's longest timer): longer is a 400, not an overflow."""
_EVENT_ID = re.compile(r"[0-9]{1,16}")  # ASCII digits only: str.isdigit() also takes "²", which int() refuses


# -- request parsing ---------------------------------------------------------------------------------------------


async def _json_object(request: Request, allowed: frozenset[str]) -> dict[str, Any]:
    """The body as a JSON object with only ``allowed`` keys (else 400 / 415; over the cap 413 from the read)."""
    content_type = request.headers.get("content-type", "")
    media = content_type.partition(";")[0].strip().lower()
    if media != "application/json" and not media.endswith("+json"):
        raise UnsupportedMediaTypeError(content_type)
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidRequestError(
            f"Body is not valid JSON: {exc}", [{"field": "(body)", "message": "not valid JSON"}]
        ) from None
    if not isinstance(body, dict):
        raise InvalidRequestError("Body must be a JSON object", [{"field": "(body)", "message": "expected an object"}])
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidRequestError(
            f"Unknown field {unknown[0]!r} (allowed: {', '.join(sorted(allowed))})",
            [{"field": name, "message": "unknown field"} for name in unknown],
        )
    where = lone_surrogate_at(body)
    if where is not None:  # refused at the door, like ACP: never stored, never sent to the model
        problem = "contains a lone UTF-16 surrogate (UTF-8 cannot carry it)"
        raise InvalidRequestError(f"{where}: {problem}", [{"field": where, "message": problem}])
    return body


def _parse_prompt(body: dict[str, Any]) -> tuple[Prompt, int | None]:
    """``{prompt: ContentBlock[], deadlineMs?}`` → domain prompt + per-prompt deadline (ACP schema validation)."""
    if "prompt" not in body:
        raise InvalidRequestError("prompt: Field required", [{"field": "prompt", "message": "Field required"}])
    request: Any = validate(model("PromptRequest"), {"sessionId": "-", "prompt": body["prompt"]}, "prompt")
    prompt = prompt_from_blocks(request.prompt)  # empty → 400
    deadline = body.get("deadlineMs")
    if deadline is not None and (isinstance(deadline, bool) or not isinstance(deadline, int) or deadline <= 0):
        raise InvalidRequestError(
            "deadlineMs must be a positive integer", [{"field": "deadlineMs", "message": "must be a positive integer"}]
        )
    if deadline is not None and deadline > MAX_DEADLINE_MS:
        raise InvalidRequestError(
            f"deadlineMs must be at most {MAX_DEADLINE_MS}",
            [{"field": "deadlineMs", "message": f"must be at most {MAX_DEADLINE_MS}"}],
        )
    return prompt, deadline


def _required_str(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str):
        problem = "Field required" if name not in body else "must be a string"
        raise InvalidRequestError(f"{name}: a string is required", [{"field": name, "message": problem}])
    return value


def _flag(request: Request, name: str) -> bool:
    value = request.query_params.get(name)
    if value is None or value.lower() in ("false", "0", ""):
        return False
    if value.lower() in ("true", "1"):
        return True
    raise InvalidRequestError(f"{name} must be true or false", [{"field": name, "message": "must be true or false"}])


def _last_event_id(request: Request) -> int | None:
    """``Last-Event-ID`` (what an EventSource resends), else the ``lastEventId`` query parameter: ASCII digits, at
    most :data:`MAX_EVENT_ID`; anything else is a 400 naming the field (never an ``int()`` failure)."""
    value = request.headers.get("last-event-id")
    field = "Last-Event-ID"
    if value is None:
        value, field = request.query_params.get("lastEventId"), "lastEventId"
    if value is None or value.strip() == "":
        return None
    text = value.strip()
    if not _EVENT_ID.fullmatch(text.lstrip("0") or "0"):
        if text.isascii() and text.isdigit():
            raise InvalidRequestError(
                f"{field} must be at most {MAX_EVENT_ID}", [{"field": field, "message": "event id out of range"}]
            )
        raise InvalidRequestError(
            f"{field} must be a non-negative integer event id", [{"field": field, "message": "not an event id"}]
        )
    event_id = int(text)
    if event_id > MAX_EVENT_ID:
        raise InvalidRequestError(
            f"{field} must be at most {MAX_EVENT_ID}", [{"field": field, "message": "event id out of range"}]
        )
    return event_id


# -- routes ----------------------------------------------------------------------------------------------------


def _routes(daemon: Daemon) -> list[BaseRoute]:
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "instance": daemon.bridge.store.instance})

    async def capabilities(request: Request) -> Response:
        return JSONResponse(daemon.capabilities())

    def session_answer(session_id: str) -> dict[str, Any]:
        answer = {
            "sessionId": session_id,
            "modeId": daemon.current_mode(session_id),
            "modelId": daemon.current_model(session_id),
        }
        servers = daemon.mcp_status(session_id)
        return {**answer, "mcpServers": servers} if servers else answer

    async def create_session(request: Request) -> Response:
        body = await _json_object(request, _SESSION_FIELDS)
        cwd = _required_str(body, "cwd")
        mode_id = daemon.offered_mode(body["modeId"]) if body.get("modeId") is not None else None
        servers = parse_mcp_servers(body.get("mcpServers"))
        session_id = await daemon.create_session(cwd, mode_id, mcp_servers=servers)
        # Location names the new session: a balancer in front learns from it where the session lives.
        return JSONResponse(session_answer(session_id), status_code=201, headers={"Location": f"/session/{session_id}"})

    async def resume_session(request: Request) -> Response:
        body = await _json_object(request, _RESUME_FIELDS)
        cwd = body.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise InvalidRequestError("cwd must be a string", [{"field": "cwd", "message": "must be a string"}])
        servers = parse_mcp_servers(body["mcpServers"]) if "mcpServers" in body else None
        session_id = await daemon.resume_session(request.path_params["session_id"], cwd, mcp_servers=servers)
        return JSONResponse(session_answer(session_id))

    async def set_mode(request: Request) -> Response:
        session_id: str = request.path_params["session_id"]
        mode_id = daemon.offered_mode(_required_str(await _json_object(request, _MODE_FIELDS), "modeId"))
        await daemon.set_mode(session_id, mode_id)
        return JSONResponse(session_answer(session_id))

    async def set_config(request: Request) -> Response:
        session_id: str = request.path_params["session_id"]
        body = await _json_object(request, _CONFIG_FIELDS)
        config_id = _required_str(body, "configId")
        value = _required_str(body, "value")
        await daemon.set_config_option(session_id, config_id, value)
        return JSONResponse({**session_answer(session_id), "configOptions": daemon.config_options(session_id)})

    async def answer_permission(request: Request) -> Response:
        option_id = _required_str(await _json_object(request, _ANSWER_FIELDS), "optionId")
        daemon.answer_permission(request.path_params["session_id"], request.path_params["requestId"], option_id)
        return Response(status_code=204)

    async def delete_session(request: Request) -> Response:
        await daemon.close_session(request.path_params["session_id"])
        return Response(status_code=204)

    async def remove_session(request: Request) -> Response:
        await daemon.close_session(request.path_params["session_id"], delete=True)
        return Response(status_code=204)

    async def prompt(request: Request) -> Response:
        session_id: str = request.path_params["session_id"]
        wait = _flag(request, "wait")
        body = await _json_object(request, _PROMPT_FIELDS)
        await load_schema()  # not on the loop: a prompt right after start never waits there for the warm-up's import
        prompt, deadline_ms = _parse_prompt(body)
        # Synchronous admission (Q4/Q8): a refusal raises here, before any byte of an acceptance is sent.
        accepted = daemon.submit_prompt(session_id, prompt, deadline_ms=deadline_ms)
        if not wait:
            return JSONResponse({"promptId": accepted.prompt_id, "lastEventId": accepted.event_id}, status_code=202)
        handle = accepted.handle

        async def cancel_on_disconnect() -> None:
            await wait_disconnected(request.receive)
            handle.cancel()  # the caller left: the prompt must not outlive its only waiter

        outcome: StopReason | Exception
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_on_disconnect)
            try:
                outcome = await handle.result()
            except Exception as exc:  # mapped below, outside the task group (no exception group)
                outcome = exc
            tg.cancel_scope.cancel()
        if isinstance(outcome, Exception):
            raise outcome
        return JSONResponse({"promptId": accepted.prompt_id, "stopReason": outcome})

    async def cancel(request: Request) -> Response:
        daemon.cancel_session(request.path_params["session_id"])
        return Response(status_code=204)

    async def cancel_prompt(request: Request) -> Response:
        daemon.cancel_prompt(request.path_params["session_id"], request.path_params["promptId"])
        return Response(status_code=204)

    async def acp(request: Request) -> Response:
        # One route for both methods, so that a 405 on /acp lists both in its Allow header.
        if daemon.acp is None or daemon.closing:
            raise BridgeClosedError("The daemon is shutting down")
        if request.method == "DELETE":
            return await daemon.acp.delete(request)
        if request.method in ("GET", "HEAD"):
            return await daemon.acp.get(request)
        return await daemon.acp.post(request)

    async def acp_websocket(websocket: WebSocket) -> None:
        if daemon.acp is None or daemon.closing:
            await websocket.close(1013)  # try again later: the daemon is shutting down
            return
        await daemon.acp.websocket(websocket)

    async def events(request: Request) -> Response:
        session_id: str = request.path_params["session_id"]
        subscription = daemon.subscribe(session_id, _last_event_id(request))
        return EventStreamResponse(subscription, session_id=session_id, heartbeat_s=daemon.options.heartbeat_s)

    return [
        Route("/health", health, methods=["GET"]),
        Route("/capabilities", capabilities, methods=["GET"]),
        Route("/session", create_session, methods=["POST"]),
        Route("/session/{session_id}", delete_session, methods=["DELETE"]),
        Route("/session/{session_id}/resume", resume_session, methods=["POST"]),
        Route("/session/{session_id}/delete", remove_session, methods=["POST"]),
        Route("/session/{session_id}/mode", set_mode, methods=["POST"]),
        Route("/session/{session_id}/config", set_config, methods=["POST"]),
        Route("/session/{session_id}/permission/{requestId}", answer_permission, methods=["POST"]),
        Route("/session/{session_id}/prompt", prompt, methods=["POST"]),
        Route("/session/{session_id}/cancel", cancel, methods=["POST"]),
        Route("/session/{session_id}/prompt/{promptId}/cancel", cancel_prompt, methods=["POST"]),
        Route("/session/{session_id}/events", events, methods=["GET"]),
        Route("/acp", acp, methods=["GET", "POST", "DELETE"]),
        WebSocketRoute("/acp", acp_websocket),
    ]


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


def create_app(daemon: Daemon) -> Starlette:
    """The ASGI app of one daemon: its routes, guards (CORS only with allowed origins) and error mapping."""
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
    return Starlette(
        routes=_routes(daemon),
        middleware=middleware,
        exception_handlers={HTTPException: _on_http_exception, ServerError: _on_error, Exception: _on_internal},
    )
