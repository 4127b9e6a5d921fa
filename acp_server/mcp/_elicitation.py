"""An MCP server's ``elicitation/create``, answered by the editor of the session its connection belongs to.

The editor side is an :class:`Elicitor` (the ACP layer's, for a client that advertised ``elicitation``): the
connection that opens a session's MCP servers sets :data:`SESSION_ELICITOR` around the opening, and each connection
takes it when created. Only then does the MCP client advertise ``elicitation`` to the server (the SDK advertises it
when a callback is given), with the modes the editor advertised; without one, a server's request is refused as MCP
clients do without the capability. Bounded: the requested schema and the answer's content at most
:data:`MAX_ELICITATION_BYTES` of JSON each (else the server gets an MCP error saying which), one request at a time
per server (the next waits), and the elicitor's timeout: an editor that does not answer in time is a ``cancel``.
"""

from __future__ import annotations

import json
import logging
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from ..errors import RemoteError

if TYPE_CHECKING:
    from mcp import types
    from mcp.client.session import ElicitationFnT

__all__ = ["MAX_ELICITATION_BYTES", "SESSION_ELICITOR", "Elicitor", "elicitation_callback"]

logger = logging.getLogger("acp_server.mcp")

MAX_ELICITATION_BYTES = 64 * 1024
"""The most JSON a requested schema, and an answer's content, may take."""


class Elicitor(Protocol):
    """Asks the user, through the editor of one session, what an MCP server requests."""

    modes: frozenset[str]  # the modes the editor advertised: "form", "url"
    timeout_s: float  # how long the editor may take to answer; then the request is cancelled

    async def elicit(self, session_id: str, params: dict[str, Any]) -> object:
        """Send ACP ``elicitation/create`` with ``params`` (mode, message, requestedSchema or url + elicitationId)
        for ``session_id``; the editor's raw answer. Raises :class:`RemoteError` when the editor fails it."""
        ...


SESSION_ELICITOR: ContextVar[Elicitor | None] = ContextVar("acp_server_session_elicitor", default=None)
"""The elicitor of the sessions opened in this context (None: nobody can answer; servers are not offered it)."""


def _size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode())


def _error(message: str) -> types.ErrorData:
    from mcp import types

    return types.ErrorData(code=types.INVALID_REQUEST, message=message)


def _answer(raw: object, mode: str) -> types.ElicitResult | types.ErrorData:
    """The editor's answer as the server's result: accept (with content, form mode), decline or cancel."""
    from mcp import types
    from pydantic import ValidationError

    if not isinstance(raw, dict) or raw.get("action") not in ("accept", "decline", "cancel"):
        return _error("elicitation failed: the editor's answer is not accept, decline or cancel")
    action = raw["action"]
    content = raw.get("content") if action == "accept" and mode == "form" else None
    if content is not None:
        size = _size(content)
        if size > MAX_ELICITATION_BYTES:
            return _error(
                f"elicitation refused: the editor's answer is {size} bytes, over the {MAX_ELICITATION_BYTES}-byte cap"
            )
    try:
        return types.ElicitResult(action=action, content=content)
    except ValidationError:
        return _error("elicitation failed: the editor's answer content is not an object of primitive values")


def elicitation_callback(server: str, session_id: str, elicitor: Elicitor | None) -> ElicitationFnT | None:
    """The SDK's callback for ``server``'s requests in ``session_id``; None (the capability is not advertised) when
    nobody can answer."""
    if elicitor is None or not elicitor.modes:
        return None
    one_at_a_time = anyio.Lock()

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        from mcp import types

        mode = params.mode
        if mode not in elicitor.modes:
            return _error(f"elicitation refused: the editor does not support {mode} mode")
        request: dict[str, Any] = {"mode": mode, "message": params.message}
        if isinstance(params, types.ElicitRequestFormParams):
            schema = params.requestedSchema
            size = _size(schema)
            if size > MAX_ELICITATION_BYTES:
                return _error(
                    f"elicitation refused: the requested schema is {size} bytes, over the "
                    f"{MAX_ELICITATION_BYTES}-byte cap"
                )
            request["requestedSchema"] = schema
        else:
            request["url"] = params.url
            request["elicitationId"] = params.elicitationId
        async with one_at_a_time:
            with anyio.move_on_after(elicitor.timeout_s):
                try:
                    raw = await elicitor.elicit(session_id, request)
                except RemoteError as exc:
                    return _error(f"elicitation failed: {exc}")
                return _answer(raw, mode)
        logger.info("mcp %s: the editor did not answer an elicitation within %.0f s", server, elicitor.timeout_s)
        return types.ElicitResult(action="cancel")

    return callback
