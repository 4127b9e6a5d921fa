"""The ACP handlers of one client connection. Sessions and their queues live in the shared bridge.

Each handler gets its params already validated (see ``_methods.py``) and the :class:`Peer` of its request; it calls
the bridge and shapes the reply. Handlers know nothing of the transport: the same :class:`AcpAgent` serves stdio
and HTTP connections.

Settings fan-out: a change of an attached session's mode, model or title is announced to this connection exactly
once, whichever face or connection made it. The connection that made it announces it through its request's peer
(before the answer; a prompt's title with the turn's first update); every other one hears it from the bridge's
settings listener and queues it at once through the transport's :data:`Announce`. Each connection tracks what it
told each session's client (:class:`_Told`) and sends only what differs: the same value set again tells nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from ..bridge import Choice, PromptHandle, SessionBridge, SessionEntry, SettingsChange
from ..commands import Command
from ..domain import Compacted, PromptEnded, UsageReported
from ..limits import DEFAULT_FS_REQUEST_TIMEOUT_MS
from ._auth import AuthRequiredError, EndpointGate, EndpointNotUsableError, auth_methods, check_method
from ._children import with_children
from ._commands import after_queued, commands_update
from ._config import config_options
from ._convert import prompt_from_blocks, replay_updates, usage_update
from ._editor import AcpEditor, ClientCapabilities
from ._mcp import mcp_meta, mcp_servers_of
from ._params import (
    MAX_TITLE_CHARS,
    SET_TITLE_METHOD,
    Sent,
    check_initialize,
    check_set_title,
    deadline_from_meta,
    invalid_params,
)
from ._peer import Peer
from ._providers import ProviderControl
from ._relay import live_update
from ._replies import UsageTotals, capabilities, iso
from ._rewind import REWIND_METHOD, run_rewind_method
from ._session_list import list_reply
from ._session_status import check_session_title, in_memory, retitle_stored, session_status
from ._window import window_problem_update

if TYPE_CHECKING:
    from acp.schema import (
        AuthenticateRequest,
        CancelNotification,
        CancelRequestNotification,
        CloseSessionRequest,
        DeleteSessionRequest,
        ForkSessionRequest,
        ListSessionsRequest,
        LoadSessionRequest,
        NewSessionRequest,
        PromptRequest,
        ResumeSessionRequest,
        SetSessionConfigOptionSelectRequest,
        SetSessionModeRequest,
    )

__all__ = [
    "MAX_TITLE_CHARS",
    "PROTOCOL_VERSION",
    "REWIND_METHOD",
    "SET_TITLE_METHOD",
    "AcpAgent",
    "AgentOptions",
    "Announce",
    "Peer",
]

logger = logging.getLogger("acp_server.acp")

PROTOCOL_VERSION = 1

Announce = Callable[[str, str, Mapping[str, Any]], None]
"""``announce(session_id, method, params)``: queue one notification about a session for the client now, on behalf of
no request (never waits: the transport bounds what it holds, as for replies)."""


@dataclass(frozen=True)
class AgentOptions:
    """What ``initialize`` advertises, and how long a file request to the client may wait for its answer.

    ``command``: how the agent is run (for the ``setup`` auth method's ``_meta``); ``endpoint``: whether a model
    endpoint is usable, and the re-reading of the configuration (None: always usable, nothing is asked);
    ``providers``: the endpoint as an editor may set it (``providers/*``; None: those methods do not exist)."""

    name: str = "acp-server"
    version: str = "0"
    fs_request_timeout_ms: int = DEFAULT_FS_REQUEST_TIMEOUT_MS
    command: tuple[str, ...] = ("acp-server",)
    endpoint: EndpointGate | None = None
    providers: ProviderControl | None = None


class _Told:
    """What a connection's client was last told of one session: its mode (as offered), its model (resolved; None:
    no choice) and its title (None: nothing told yet, e.g. a load that has not sent it)."""

    __slots__ = ("commands", "mode", "model", "title")

    def __init__(self, mode: str, model: str | None, title: str | None) -> None:
        self.mode = mode
        self.model = model
        self.title = title
        self.commands: tuple[Command, ...] | None = None  # None: none announced on this attach yet


class AcpAgent:
    """ACP handlers for one connection: one method per ACP method, listed in ``_methods.METHODS``.

    With ``announce``, the agent hears every settings change of the bridge's sessions (until :meth:`close`) and
    announces those of its attached sessions made elsewhere; without it, only its own.
    """

    def __init__(self, bridge: SessionBridge, options: AgentOptions, announce: Announce | None = None) -> None:
        self._bridge = bridge
        self._options = options
        self._prompts: dict[str | int, PromptHandle] = {}  # by request id: the prompts this connection awaits
        self._client_caps = ClientCapabilities()  # what the client advertised in ``initialize``
        self._told: dict[str, _Told] = {}  # by attached session: what this connection's client was told
        self._announce = announce
        self._unsubscribe: list[Callable[[], None]] = []
        if announce is not None:
            self._unsubscribe = [
                bridge.add_settings_listener(self._settings_changed),
                bridge.add_close_listener(self._detached),
                bridge.add_commands_listener(lambda entry: after_queued(partial(self._tell_commands, entry))),
            ]

    def close(self) -> None:
        """The connection ended: stop hearing the bridge. Idempotent."""
        unsubscribe, self._unsubscribe = self._unsubscribe, []
        for remove in unsubscribe:
            remove()

    # -- requests -----------------------------------------------------------------------------------------------

    async def initialize(self, params: Any, peer: Peer) -> dict[str, Any]:
        check_initialize(params)
        self._client_caps = ClientCapabilities(params.get("clientCapabilities"))
        return {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": {**capabilities(self._bridge), "auth": {}, **self._providers_capability()},
            "authMethods": auth_methods(self._options.command),
            "agentInfo": {"name": self._options.name, "title": "acp-server", "version": self._options.version},
        }

    @property
    def provider_control(self) -> ProviderControl | None:
        """The endpoint as an editor may set it (``providers/*``, see ``_providers.py``); None: not served."""
        return self._options.providers

    def _providers_capability(self) -> dict[str, Any]:
        """ACP's unstable ``providers`` capability, ``{}``, where ``providers/*`` are served (``_providers.py``)."""
        return {} if self._options.providers is None else {"providers": {}}

    async def authenticate(self, request: AuthenticateRequest, peer: Peer) -> dict[str, Any]:
        """``setup``: re-read the configuration (the client ran ``acp-server setup``); {} once an endpoint is
        usable, else ``auth_required`` saying why."""
        check_method(request.method_id)
        gate = self._options.endpoint
        if gate is not None and not gate.usable():
            problem = await gate.reload()
            if problem is not None:
                raise EndpointNotUsableError(problem)
            logger.info("authenticate: the configuration names a usable model endpoint now")
        return {}

    def _require_endpoint(self) -> None:
        """A session is opened only with a usable model endpoint (else ``auth_required``, see ``_auth.py``)."""
        gate = self._options.endpoint
        if gate is not None and not gate.usable():
            raise AuthRequiredError()

    async def new_session(self, request: NewSessionRequest, peer: Peer, prompt: Sent = None) -> dict[str, Any]:
        self._require_endpoint()
        servers, roots = mcp_servers_of(request.mcp_servers), request.additional_directories or ()  # omitted: none
        entry = await self._bridge.open_session(
            request.cwd, mcp_servers=servers, additional_directories=roots, system_prompt=prompt
        )
        logger.info("session %s created (cwd %s)", entry.session_id, request.cwd)
        self._attach(entry, "")
        self._announce_commands(entry, peer)
        told = await window_problem_update(self._bridge, entry, self._client_caps.notices)
        if told is not None:  # once, following the answer: what takes the room, what would help
            peer.after_reply("session/update", told)
        return {"sessionId": entry.session_id, **self._mode_state(entry), **mcp_meta(entry)}

    async def load_session(self, request: LoadSessionRequest, peer: Peer, prompt: Sent = None) -> dict[str, Any]:
        """Attach the session, replay its whole stored history as ``session/update`` (ending with its title's
        ``session_info_update`` when it has one: a client that loads without listing still shows it), then answer."""
        self._require_endpoint()
        session_id, servers = request.session_id, mcp_servers_of(request.mcp_servers)
        roots = request.additional_directories or ()  # the complete list from now on (omitted: none)
        entry, history = await self._bridge.load_session(  # the prompt: None keeps the session's
            session_id, cwd=request.cwd, mcp_servers=servers, additional_directories=roots, system_prompt=prompt
        )
        caps, compaction = self._client_caps, entry.conversation.compaction
        told = partial(replay_updates, compaction_updates=caps.compaction, plan_ops=caps.plan)  # as advertised
        for update in told(session_id, history, compaction, entry.rewinds):
            await peer.notify("session/update", update)
        self._attach(entry, None)  # no title told on this load yet
        await self._sync_title(entry, peer)
        logger.info("session %s loaded (%d messages replayed)", session_id, len(history))
        self._announce_commands(entry, peer)
        return {**self._mode_state(entry), **mcp_meta(entry)}

    async def resume_session(self, request: ResumeSessionRequest, peer: Peer, prompt: Sent = None) -> dict[str, Any]:
        """Attach the session without replaying its history."""
        self._require_endpoint()
        servers, roots = mcp_servers_of(request.mcp_servers), request.additional_directories or ()  # the whole list
        entry = await self._bridge.resume_session(  # the prompt: None keeps the session's
            request.session_id, cwd=request.cwd, mcp_servers=servers, additional_directories=roots, system_prompt=prompt
        )
        logger.info("session %s resumed", request.session_id)
        told = self._told.get(entry.session_id)
        self._attach(entry, entry.title if told is None else told.title)
        self._announce_commands(entry, peer)
        return {**self._mode_state(entry), **mcp_meta(entry)}

    async def list_sessions(self, request: ListSessionsRequest, peer: Peer) -> dict[str, Any]:
        return await list_reply(self._bridge, request)  # a parent's children with _meta.acpServer.parentId

    async def close_session(self, request: CloseSessionRequest, peer: Peer) -> dict[str, Any]:
        """Cancel the session's work and free it here; its history stays in the store.

        Answers after this connection's prompts of the session have been answered: their answers come first.
        """
        await self._bridge.close_session(request.session_id)
        await self._answered_first(request.session_id)
        logger.info("session %s closed", request.session_id)
        return {}

    async def delete_session(self, request: DeleteSessionRequest, peer: Peer) -> dict[str, Any]:
        """``session/delete``: cancel the session's work, free it, then remove it and its stored history for good
        (unknown: ``session_not_found``). Its prompts here are answered first, as for ``session/close``."""
        await self._bridge.delete_session(request.session_id)
        await self._answered_first(request.session_id)
        logger.info("session %s deleted", request.session_id)
        return {}

    async def _answered_first(self, session_id: str) -> None:
        """The session was detached: forget it and wait until this connection's prompts of it have been answered."""
        self._told.pop(session_id, None)
        for handle in list(self._prompts.values()):
            if handle.session_id == session_id:
                await handle.events.wait_released()

    async def fork_session(self, request: ForkSessionRequest, peer: Peer, prompt: Sent = None) -> dict[str, Any]:
        self._require_endpoint()
        servers, roots = mcp_servers_of(request.mcp_servers), request.additional_directories or ()  # the fork's own
        entry = await self._bridge.fork(  # the prompt: None copies the source's
            request.session_id, cwd=request.cwd, mcp_servers=servers, additional_directories=roots, system_prompt=prompt
        )
        self._attach(entry, entry.title)  # the source's, which the client knows
        self._announce_commands(entry, peer)
        return {"sessionId": entry.session_id, **self._mode_state(entry), **mcp_meta(entry)}  # mode/model inherited

    async def set_title(self, params: Any, peer: Peer) -> dict[str, Any]:
        """:data:`SET_TITLE_METHOD`: store the session's title and announce it (``session_info_update``)."""
        session_id, title = check_set_title(params)
        entry = self._bridge.get(session_id)
        self._told_of(entry)
        await entry.set_title(title, origin=self)
        logger.info("session %s: title set", session_id)
        await self._sync_title(entry, peer)
        return {}

    async def rewind(self, params: Any, peer: Peer) -> dict[str, Any]:
        """:data:`REWIND_METHOD` (:mod:`._rewind`); files are written through the editor when it writes files."""
        session_id = params.get("sessionId") if isinstance(params, dict) else None
        editor = AcpEditor(peer, str(session_id), fs_timeout_ms=self._options.fs_request_timeout_ms)
        return await run_rewind_method(self._bridge, params, self._client_caps.tool_client(editor).writer)

    async def set_session_title(self, params: Any, peer: Peer) -> dict[str, Any]:
        """``session/set_title`` (unstable): :meth:`set_title` under ACP's name, answering the title stored; a
        stored session this process does not hold is retitled in the store."""
        session_id, title = check_session_title(params)
        if in_memory(self._bridge, session_id):
            await self.set_title(params, peer)
        else:
            await retitle_stored(self._bridge, session_id, title)
        return {"title": title}

    async def session_status(self, params: Any, peer: Peer) -> dict[str, Any]:
        """``session/status`` (unstable): ``open`` or ``saved``, without side effects."""
        return {"status": await session_status(self._bridge, params)}

    async def prompt(self, request: PromptRequest, peer: Peer) -> dict[str, Any]:
        """Admit the prompt (a refusal is this request's error), relay its events in order, answer its outcome."""
        prompt = prompt_from_blocks(request.prompt)
        deadline_ms = deadline_from_meta(request.field_meta)
        session_id = request.session_id
        editor = AcpEditor(peer, session_id, fs_timeout_ms=self._options.fs_request_timeout_ms)
        client = with_children(self._client_caps.tool_client(editor), editor, peer, self._client_caps)
        handle = self._bridge.send_prompt(session_id, prompt, deadline_ms=deadline_ms, client=client, origin=self)
        entry = self._bridge.get(session_id)  # no checkpoint since admission: it is the session admitted to
        editor.stream = handle.events
        request_id = peer.request_id
        if request_id is not None:
            self._prompts[request_id] = handle
        peer.admitted()
        totals = UsageTotals()
        try:
            async for event in handle.events:
                if isinstance(event, PromptEnded):
                    # Answer with no checkpoint after the outcome: it leaves before whatever ended the prompt.
                    reply: dict[str, Any] = {"stopReason": event.result()}
                    if totals.requests:
                        reply["_meta"] = totals.meta()
                    return reply
                # With the turn's first update (never before: an update means the turn runs), the session's title
                # when it changed (a new session's is its first prompt's).
                await self._sync_title(entry, peer)
                if isinstance(event, UsageReported):
                    totals.add(event)
                    if event.size is None:
                        continue  # ACP's usage_update requires the window: an unknown one is never invented
                    await peer.notify("session/update", {"sessionId": session_id, "update": usage_update(event)})
                    continue
                told = live_update(session_id, event, self._client_caps)  # as this client's capabilities say
                if told is not None:
                    await peer.notify("session/update", told)
                if isinstance(event, Compacted) and event.size is not None:  # what the context holds now
                    used = UsageReported(event.estimate, 0, event.size)
                    await peer.notify("session/update", {"sessionId": session_id, "update": usage_update(used)})
            return {"stopReason": await handle.result()}  # not reached: the stream ends with its outcome
        except BaseException:
            handle.cancel()  # our caller went away (connection closing): the prompt must not outlive it
            raise
        finally:
            handle.events.close()
            if request_id is not None:
                self._prompts.pop(request_id, None)

    # -- what the editor shows: mode, options, title (told once per change) --------------------------------------

    def _model_of(self, entry: SessionEntry) -> str | None:
        catalog = self._bridge.models
        return None if catalog is None else catalog.resolve(entry.model)

    def _attach(self, entry: SessionEntry, title: str | None) -> None:
        """The client was just answered the session's state (mode and options; ``title``: the title it knows)."""
        self._told[entry.session_id] = _Told(self._current_mode(entry), self._model_of(entry), title)

    def _announce_commands(self, entry: SessionEntry, peer: Peer) -> None:
        """The session's slash commands, to follow the answer that makes it known to the client (just attached)."""
        commands = self._told[entry.session_id].commands = self._bridge.commands_of(entry)
        peer.after_reply("session/update", commands_update(entry.session_id, commands))

    def _tell_commands(self, entry: SessionEntry) -> None:
        """(bridge listener, run after what was queued: the answer announcing them first) The session's commands
        changed (its MCP servers' prompts): announce them when they differ from what this connection told."""
        told = self._told.get(entry.session_id)
        commands = self._bridge.commands_of(entry)
        if told is None or told.commands is None or told.commands == commands or self._announce is None:
            return
        told.commands = commands
        self._announce(entry.session_id, "session/update", commands_update(entry.session_id, commands))

    def _told_of(self, entry: SessionEntry) -> _Told:
        """What the client knows of the session; a session it never attached here counts as known as it is now
        (it is attached from now on)."""
        told = self._told.get(entry.session_id)
        if told is None:
            told = self._told[entry.session_id] = _Told(self._current_mode(entry), self._model_of(entry), entry.title)
        return told

    def _settings_updates(self, entry: SessionEntry, told: _Told) -> list[dict[str, Any]]:
        """The ``session/update`` params that bring the client from ``told`` to the session's state now (marked
        told): ``current_mode_update`` and ``config_option_update`` for a mode, ``config_option_update`` for a
        model, ``session_info_update`` for a title; nothing when nothing it sees differs."""
        session_id = entry.session_id
        updates: list[dict[str, Any]] = []
        mode, model = self._current_mode(entry), self._model_of(entry)
        if mode != told.mode:
            updates.append({"sessionUpdate": "current_mode_update", "currentModeId": mode})
        if mode != told.mode or model != told.model:
            updates.append({"sessionUpdate": "config_option_update", "configOptions": self._config_options(entry)})
        told.mode, told.model = mode, model
        if told.title != entry.title and (told.title is not None or entry.title):
            title = {"sessionUpdate": "session_info_update", "title": entry.title or None}
            updates.append({**title, "updatedAt": iso(entry.updated_at)})
            told.title = entry.title
        return [{"sessionId": session_id, "update": update} for update in updates]

    async def _sync(self, entry: SessionEntry, peer: Peer) -> None:
        """Tell the client, through ``peer``, what it does not know yet of the session's settings."""
        for params in self._settings_updates(entry, self._told_of(entry)):
            await peer.notify("session/update", params)

    async def _sync_title(self, entry: SessionEntry, peer: Peer) -> None:
        """Send ``session_info_update`` when the session's title differs from what this connection was told."""
        told = self._told.get(entry.session_id)
        if told is None:  # prompted without attaching here: the title it has is news
            told = self._told[entry.session_id] = _Told(self._current_mode(entry), self._model_of(entry), None)
        if told.title == entry.title or (told.title is None and not entry.title):
            return
        told.title = entry.title
        update = {"sessionUpdate": "session_info_update", "title": entry.title or None}
        update["updatedAt"] = iso(entry.updated_at)
        await peer.notify("session/update", {"sessionId": entry.session_id, "update": update})

    def _settings_changed(self, change: SettingsChange) -> None:
        """(bridge listener) Another face or connection changed an attached session's settings: announce it now."""
        if change.origin is self or self._announce is None:
            return  # ours: the handler that made it tells it through its peer, in order with its answer
        told = self._told.get(change.session_id)
        if told is None:
            return  # not attached here
        for params in self._settings_updates(change.session, told):
            self._announce(change.session_id, "session/update", params)

    def _detached(self, session_id: str) -> None:
        """(bridge listener) The session was closed, whichever face closed it: it is no longer attached here."""
        self._told.pop(session_id, None)

    # -- modes ---------------------------------------------------------------------------------------------------

    def _current_mode(self, entry: SessionEntry) -> str:
        """The session's mode as offered here (the bridge's rule: :meth:`SettingsRules.mode_of`)."""
        return self._bridge.settings.mode_of(entry.mode)

    def _config_options(self, entry: SessionEntry) -> list[dict[str, Any]]:
        """The session's config options: its mode, then (when the runner offers a choice) its model, offered from
        the models known now (a list that arrives later shows in later answers and updates)."""
        return config_options(self._bridge.settings, entry.mode, entry.model)

    def _mode_state(self, entry: SessionEntry) -> dict[str, Any]:
        """``modes`` and ``configOptions`` of a session answer: two views of one mode, always in agreement."""
        modes = self._bridge.settings.offered
        available = [{"id": m.id, "name": m.name, "description": m.description} for m in modes]
        return {
            "modes": {"currentModeId": self._current_mode(entry), "availableModes": available},
            "configOptions": self._config_options(entry),
        }

    async def _change(self, entry: SessionEntry, method: str, check: Callable[[], Choice], peer: Peer) -> None:
        """Apply the choice ``check`` makes by the bridge's rules (a refusal: ``method``'s invalid params, nothing
        changed), then tell the client what changed."""
        with invalid_params(method):
            choice = check()
        await self._bridge.change_setting(entry.session_id, choice, origin=self, before=lambda _: self._told_of(entry))
        logger.info("session %s: %s %s", entry.session_id, *choice)
        await self._sync(entry, peer)

    async def set_mode(self, request: SetSessionModeRequest, peer: Peer) -> dict[str, Any]:
        """Switch the session's mode (it applies from the next tool call, also mid-prompt); -32602 for an unknown id."""
        entry = self._bridge.get(request.session_id)
        await self._change(entry, "session/set_mode", lambda: self._bridge.settings.mode_choice(request.mode_id), peer)
        return {}

    async def set_config_option(self, request: SetSessionConfigOptionSelectRequest, peer: Peer) -> dict[str, Any]:
        """Set a session config option (``mode``, or ``model`` for its next requests); answers every option's new
        state, after a ``config_option_update`` (and for the mode a ``current_mode_update``)."""
        entry = self._bridge.get(request.session_id)
        config_id, value = request.config_id, request.value
        check = partial(self._bridge.settings.config_choice, config_id, value)
        await self._change(entry, "session/set_config_option", check, peer)
        return {"configOptions": self._config_options(entry)}

    # -- notifications ------------------------------------------------------------------------------------------

    def cancel(self, request: CancelNotification, peer: Peer) -> None:
        if not self._bridge.cancel_session(request.session_id):  # the running prompt and every queued one
            logger.debug("session/cancel for %s: nothing pending", request.session_id)

    def cancel_request(self, request: CancelRequestNotification, peer: Peer) -> None:
        request_id = request.request_id
        handle = self._prompts.get(request_id) if request_id is not None else None
        if handle is not None:
            handle.cancel()  # a waiting prompt leaves the FIFO; a running one stops; both answer "cancelled"
        elif request_id is not None and not peer.cancel_request(request_id):
            logger.debug("$/cancel_request for unknown request %r", request_id)

    def cancel_prompt(self, request_id: str | int) -> bool:
        """Cancel the prompt this connection sent as ``request_id`` (the transport lost its reader); False if none."""
        handle = self._prompts.get(request_id)
        if handle is None:
            return False
        handle.cancel()
        return True

    def cancel_all(self) -> None:
        """Cancel every prompt this connection is waiting on (connection closing); each answers ``cancelled``."""
        for handle in list(self._prompts.values()):
            handle.cancel()
