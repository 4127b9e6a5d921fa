"""The session resource: ``/session`` and ``/session/{id}`` with its settings (resume, detach, delete, mode, config).

Invariant: every endpoint answers from the daemon's state after the change (``session_answer``), and validation is the
daemon's (``offered_mode``, ``set_config_option``) or :mod:`._request`'s, never repeated here.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...acp import run_rewind_method
from ...bridge import check_system_prompt
from ...mcp import parse_mcp_servers
from .._exceptions import InvalidRequestError
from ._daemon import Daemon
from ._request import daemon_of, json_object, required_str

__all__ = [
    "create_session",
    "delete_session",
    "remove_session",
    "resume_session",
    "rewind",
    "set_config",
    "set_mode",
]

_SESSION_FIELDS = frozenset({"cwd", "modeId", "mcpServers", "additionalDirectories", "systemPrompt"})
_RESUME_FIELDS = frozenset({"cwd", "mcpServers", "additionalDirectories", "systemPrompt"})
_MODE_FIELDS = frozenset({"modeId"})
_CONFIG_FIELDS = frozenset({"configId", "value"})
_REWIND_FIELDS = frozenset({"prompt", "preview", "filesOnly", "conversationOnly", "force"})


def session_answer(daemon: Daemon, session_id: str) -> dict[str, Any]:
    """``{sessionId, modeId, modelId, mcpServers?, additionalDirectories?}``: the session as it stands (each list
    only if it has some)."""
    answer: dict[str, Any] = {
        "sessionId": session_id,
        "modeId": daemon.current_mode(session_id),
        "modelId": daemon.current_model(session_id),
    }
    servers = daemon.mcp_status(session_id)
    if servers:
        answer["mcpServers"] = servers
    directories = daemon.bridge.get(session_id).additional_directories
    if directories:
        answer["additionalDirectories"] = list(directories)
    return answer


async def create_session(request: Request) -> Response:
    """``POST /session`` → 201 and ``Location: /session/{id}``."""
    daemon = daemon_of(request)
    body = await json_object(request, _SESSION_FIELDS)
    cwd = required_str(body, "cwd")
    mode_id = daemon.offered_mode(body["modeId"]) if body.get("modeId") is not None else None
    servers = parse_mcp_servers(body.get("mcpServers"))
    directories = body.get("additionalDirectories")  # checked by the bridge's rule, like cwd
    prompt = check_system_prompt(body.get("systemPrompt"))  # ACP's systemPrompt, the same rule
    session_id = await daemon.create_session(
        cwd, mode_id, mcp_servers=servers, additional_directories=directories, system_prompt=prompt
    )
    # Location names the new session: a balancer in front learns from it where the session lives.
    return JSONResponse(
        session_answer(daemon, session_id), status_code=201, headers={"Location": f"/session/{session_id}"}
    )


async def resume_session(request: Request) -> Response:
    """``POST /session/{id}/resume`` → 200: attach a stored session (no replay)."""
    daemon = daemon_of(request)
    body = await json_object(request, _RESUME_FIELDS)
    cwd = body.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise InvalidRequestError.for_field("cwd", "must be a string", "cwd must be a string")
    servers = parse_mcp_servers(body["mcpServers"]) if "mcpServers" in body else None
    directories = body.get("additionalDirectories")  # absent or null: keep the session's
    prompt = check_system_prompt(body.get("systemPrompt"))  # absent or null: keep the session's
    session_id = await daemon.resume_session(
        request.path_params["session_id"], cwd, mcp_servers=servers, additional_directories=directories,
        system_prompt=prompt,
    )
    return JSONResponse(session_answer(daemon, session_id))


async def delete_session(request: Request) -> Response:
    """``DELETE /session/{id}`` → 204: detach; the history stays stored."""
    await daemon_of(request).close_session(request.path_params["session_id"])
    return Response(status_code=204)


async def remove_session(request: Request) -> Response:
    """``POST /session/{id}/delete`` → 204: detach, then remove the session and its history for good."""
    await daemon_of(request).close_session(request.path_params["session_id"], delete=True)
    return Response(status_code=204)


async def set_mode(request: Request) -> Response:
    """``POST /session/{id}/mode`` → 200 with the session as it now stands."""
    daemon = daemon_of(request)
    session_id: str = request.path_params["session_id"]
    mode_id = daemon.offered_mode(required_str(await json_object(request, _MODE_FIELDS), "modeId"))
    await daemon.set_mode(session_id, mode_id)
    return JSONResponse(session_answer(daemon, session_id))


async def set_config(request: Request) -> Response:
    """``POST /session/{id}/config`` → 200 with the session and its ``configOptions``."""
    daemon = daemon_of(request)
    session_id: str = request.path_params["session_id"]
    body = await json_object(request, _CONFIG_FIELDS)
    config_id = required_str(body, "configId")
    value = required_str(body, "value")
    await daemon.set_config_option(session_id, config_id, value)
    return JSONResponse({**session_answer(daemon, session_id), "configOptions": daemon.config_options(session_id)})


async def rewind(request: Request) -> Response:
    """``POST /session/{id}/rewind`` → 200: the session's prompts (no ``prompt``), a preview (``preview``), or the
    rewind (see ``_acp-server/rewind``: the same request and answers); files are written locally."""
    body = await json_object(request, _REWIND_FIELDS)
    params = {**body, "sessionId": request.path_params["session_id"]}
    return JSONResponse(await run_rewind_method(daemon_of(request).bridge, params, None))
