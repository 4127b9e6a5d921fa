"""The ACP method set of one client connection. Sessions and their queues live in the shared bridge.

Handlers validate params with the official schema models, call the bridge, and shape replies. They know nothing of
the transport: the same :class:`AcpAgent` serves stdio and HTTP connections.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ..bridge import PromptHandle, SessionBridge
from ..domain import TurnEvent
from ..errors import InvalidInputError
from ..store import SessionRecord
from ._convert import prompt_from_blocks, replay_updates, update_from_event
from ._schema import validate

__all__ = ["PROTOCOL_VERSION", "AcpAgent", "AgentOptions", "Peer"]

logger = logging.getLogger("acp_server.acp")

PROTOCOL_VERSION = 1

_REPLAY_BATCH = 64  # replayed updates queued between two waits for the writer (backpressure)


class Peer(Protocol):
    """What the handlers need of the connection they serve."""

    def notify(self, method: str, params: Mapping[str, Any]) -> None: ...

    async def wait_writable(self) -> None: ...

    def current_request_id(self) -> str | int | None: ...

    def cancel_request(self, msg_id: str | int) -> bool: ...


@dataclass(frozen=True)
class AgentOptions:
    """What ``initialize`` advertises and how prompts are admitted."""

    name: str = "acp-server"
    version: str = "0"
    model: str = ""


def _check_initialize(params: Any) -> int:
    """Validate ``initialize`` params without the schema models (they cost ~0.7 s to import; this reply must not)."""
    if not isinstance(params, dict):
        raise InvalidInputError(
            "Invalid params for initialize: expected an object", [{"field": "(root)", "message": "expected object"}]
        )
    if "protocolVersion" not in params:
        raise InvalidInputError(
            "Invalid params for initialize: protocolVersion: Field required",
            [{"field": "protocolVersion", "message": "Field required"}],
        )
    version = params["protocolVersion"]
    if isinstance(version, bool) or (isinstance(version, int) and not 0 <= version <= 65535):
        raise InvalidInputError(
            "Invalid params for initialize: protocolVersion: must be an integer from 0 to 65535",
            [{"field": "protocolVersion", "message": "must be an integer from 0 to 65535"}],
        )
    for key in ("clientCapabilities", "clientInfo", "_meta"):
        if key in params and params[key] is not None and not isinstance(params[key], dict):
            raise InvalidInputError(
                f"Invalid params for initialize: {key}: must be an object",
                [{"field": key, "message": "must be an object"}],
            )
    return version if isinstance(version, int) else PROTOCOL_VERSION


def _check_cwd(cwd: str, method: str, field: str = "cwd") -> None:
    if not os.path.isabs(cwd):
        raise InvalidInputError(
            f"Invalid params for {method}: {field} must be an absolute path, got {cwd!r}",
            [{"field": field, "message": "must be an absolute path"}],
        )


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _session_info(record: SessionRecord) -> dict[str, Any]:
    """``SessionInfo`` of ``session/list``: timestamps in ISO 8601 UTC."""
    info: dict[str, Any] = {"sessionId": record.session_id, "cwd": record.cwd, "updatedAt": _iso(record.updated_at)}
    if record.title:
        info["title"] = record.title
    info["_meta"] = {"acpServer": {"createdAt": _iso(record.created_at)}}
    return info


def _deadline_from_meta(meta: Any) -> int | None:
    """``_meta.acpServer.promptDeadlineMs``: a positive integer that can only shorten the server's deadline."""
    if not isinstance(meta, dict) or not isinstance(meta.get("acpServer"), dict):
        return None
    value = meta["acpServer"].get("promptDeadlineMs")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InvalidInputError(
            "Invalid params for session/prompt: _meta.acpServer.promptDeadlineMs must be a positive integer",
            [{"field": "_meta.acpServer.promptDeadlineMs", "message": "must be a positive integer"}],
        )
    return value


class AcpAgent:
    """ACP handlers for one connection.

    ``on_initialized`` runs after the first ``initialize`` reply is queued; ``on_admitted(request_id)`` runs when a
    ``session/prompt`` has passed admission (transports that must choose a reply format before the answer use it).
    """

    def __init__(
        self,
        bridge: SessionBridge,
        peer: Peer,
        options: AgentOptions,
        on_initialized: Callable[[], None] | None = None,
        on_admitted: Callable[[str | int], None] | None = None,
    ) -> None:
        self._bridge = bridge
        self._peer = peer
        self._options = options
        self._on_initialized = on_initialized
        self._on_admitted = on_admitted
        self._prompts: dict[str | int, PromptHandle] = {}

    def request_handlers(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "session/new": self.new_session,
            "session/load": self.load_session,
            "session/resume": self.resume_session,
            "session/list": self.list_sessions,
            "session/close": self.close_session,
            "session/prompt": self.prompt,
            "session/fork": self.fork_session,
        }

    def notification_handlers(self) -> dict[str, Callable[[Any], None]]:
        return {"session/cancel": self.cancel, "$/cancel_request": self.cancel_request}

    # -- capabilities -------------------------------------------------------------------------------------------

    def _capabilities(self) -> dict[str, Any]:
        limit = self._bridge.limit
        store = self._bridge.store
        problem = store.problem
        return {
            "loadSession": True,
            "promptCapabilities": {"image": True, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "fork": {}},
            "_meta": {
                "acpServer": {
                    "promptQueue": {"maxPendingPromptsPerSession": limit, "cancelScope": "running_only"},
                    "sessionStore": {
                        "persistent": store.persistent,
                        "available": problem is None,
                        **({"errorKind": problem.error_kind, "message": str(problem)} if problem else {}),
                    },
                }
            },
        }

    # -- methods ------------------------------------------------------------------------------------------------

    async def initialize(self, params: Any) -> dict[str, Any]:
        _check_initialize(params)
        if self._on_initialized is not None:
            hook, self._on_initialized = self._on_initialized, None
            hook()
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": self._capabilities(),
            "authMethods": [],
            "agentInfo": {"name": self._options.name, "title": "acp-server", "version": self._options.version},
        }

    async def authenticate(self, params: Any) -> dict[str, Any]:
        request = validate("AuthenticateRequest", params, "authenticate")
        raise InvalidInputError(
            f"Invalid params for authenticate: unknown auth method {request.method_id!r} (this agent needs none)",
            [{"field": "methodId", "message": "no auth methods are advertised"}],
        )

    async def new_session(self, params: Any) -> dict[str, Any]:
        request = validate("NewSessionRequest", params, "session/new")
        _check_cwd(request.cwd, "session/new")
        entry = await self._bridge.open_session(request.cwd)
        logger.info("session %s created (cwd %s)", entry.session_id, request.cwd)
        return {"sessionId": entry.session_id}

    async def load_session(self, params: Any) -> dict[str, Any]:
        """Attach the session, replay its whole stored history as ``session/update``, then answer."""
        request = validate("LoadSessionRequest", params, "session/load")
        _check_cwd(request.cwd, "session/load")
        session_id: str = request.session_id
        _, history = await self._bridge.load_session(session_id, cwd=request.cwd)
        peer = self._peer
        for count, update in enumerate(replay_updates(session_id, history), 1):
            peer.notify("session/update", update)
            if count % _REPLAY_BATCH == 0:
                await peer.wait_writable()
        logger.info("session %s loaded (%d messages replayed)", session_id, len(history))
        return {}

    async def resume_session(self, params: Any) -> dict[str, Any]:
        """Attach the session without replaying its history."""
        request = validate("ResumeSessionRequest", params, "session/resume")
        _check_cwd(request.cwd, "session/resume")
        await self._bridge.resume_session(request.session_id, cwd=request.cwd)
        logger.info("session %s resumed", request.session_id)
        return {}

    async def list_sessions(self, params: Any) -> dict[str, Any]:
        request = validate("ListSessionsRequest", params if params is not None else {}, "session/list")
        if request.cwd is not None:
            _check_cwd(request.cwd, "session/list")
        page = await self._bridge.list_sessions(cwd=request.cwd, cursor=request.cursor)
        reply: dict[str, Any] = {"sessions": [_session_info(record) for record in page.sessions]}
        if page.next_cursor is not None:
            reply["nextCursor"] = page.next_cursor
        return reply

    async def close_session(self, params: Any) -> dict[str, Any]:
        """Cancel the session's work and free it here; its history stays in the store."""
        request = validate("CloseSessionRequest", params, "session/close")
        await self._bridge.close_session(request.session_id)
        logger.info("session %s closed", request.session_id)
        return {}

    async def fork_session(self, params: Any) -> dict[str, Any]:
        request = validate("ForkSessionRequest", params, "session/fork")
        _check_cwd(request.cwd, "session/fork")
        entry = await self._bridge.fork(request.session_id, cwd=request.cwd)
        return {"sessionId": entry.session_id}

    async def prompt(self, params: Any) -> dict[str, Any]:
        request = validate("PromptRequest", params, "session/prompt")
        prompt = prompt_from_blocks(request.prompt)
        deadline_ms = _deadline_from_meta(request.field_meta)
        session_id: str = request.session_id
        peer = self._peer

        async def emit(event: TurnEvent) -> None:
            peer.notify("session/update", update_from_event(session_id, event))
            await peer.wait_writable()

        handle = self._bridge.send_prompt(session_id, prompt, emit=emit, deadline_ms=deadline_ms)
        request_id = peer.current_request_id()
        if request_id is not None:
            self._prompts[request_id] = handle
            if self._on_admitted is not None:
                self._on_admitted(request_id)
        try:
            stop_reason = await handle.result()
        except BaseException:
            handle.cancel()  # our caller went away (connection closing): the prompt must not outlive it
            raise
        finally:
            if request_id is not None:
                self._prompts.pop(request_id, None)
        return {"stopReason": stop_reason}

    def cancel(self, params: Any) -> None:
        request = validate("CancelNotification", params, "session/cancel")
        if not self._bridge.cancel_running(request.session_id):
            logger.debug("session/cancel for %s: nothing running", request.session_id)

    def cancel_request(self, params: Any) -> None:
        request = validate("CancelRequestNotification", params, "$/cancel_request")
        handle = self._prompts.get(request.request_id)
        if handle is not None:
            handle.cancel()  # a waiting prompt leaves the FIFO; a running one stops; both answer "cancelled"
        elif request.request_id is not None and not self._peer.cancel_request(request.request_id):
            logger.debug("$/cancel_request for unknown request %r", request.request_id)

    def cancel_all(self) -> None:
        """Cancel every prompt this connection is waiting on (connection closing); each answers ``cancelled``."""
        for handle in list(self._prompts.values()):
            handle.cancel()
