"""The HTTP face's state over one session bridge: a per-session event log, fed by the prompts' own streams.

The bridge stays the only admission authority: :meth:`Daemon.submit_prompt` calls the synchronous ``send_prompt``
and lets its ``PromptQueueFullError`` propagate before anything is published or answered.

Invariants:
- every prompt accepted here gets exactly one ``prompt_accepted`` event (published before ``submit_prompt``
  returns), then its ``session_update`` events, then exactly one terminal event (``turn_complete`` or
  ``turn_error``); its message and thought chunks are text pieces (one key per prompt and kind), which a lagging
  subscriber gets merged (``_event_log.py``, "Coalescing");
- per session, the events of the prompts accepted here are published in admission order: each prompt's event
  stream delivers to the log (in the task of its turn, as each event is sent: no task per session) once every
  prompt accepted before it has ended (a prompt cancelled or expired while waiting has its terminal event published
  after those of the prompts accepted before it), see ``_channel.py``;
- every task of the daemon belongs to its task group; lifecycle unopened → open → closing → closed;
- event ids never repeat within a session, across re-attaches and daemon restarts: each attachment's first id is
  the wall clock in microseconds when it is attached, raised above every id this daemon has issued (and above the
  session's own last id, remembered for the most recent ``_PREVIOUS_IDS_KEPT`` detached sessions). A restart is
  safe while the wall clock does not step back by more than the downtime (ids are far below 2**53 until ~2255);
- every detach of an attached session, whichever face closed it (REST, ``/acp``, stdio over the same bridge),
  publishes its prompts' terminal events, then ``session_closed``, then ends its streams;
- every change of a session's mode or model, whichever face made it (``POST /session/{id}/config`` or ``/mode``,
  ``/acp``, stdio over the same bridge: the bridge's settings listener), publishes one ``config_changed`` carrying
  every option's new state (after ``mode_changed`` for a mode), before the call that made it returns; setting the
  value it already has publishes nothing (titles are not part of the REST API: they publish nothing);
- a prompt's tool calls are published as ``tool_call`` events; a call that needs asking publishes one
  ``permission_request`` after them and waits for its answer (``_permissions.py``); a daemon without a token serves
  a bridge that offers only ``read-only`` (checked when it is built), so nothing asks and nothing changes.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ...acp import PROTOCOL_VERSION, config_options
from ...bridge import (
    BridgeClosedError,
    PromptHandle,
    SessionBridge,
    SessionEntry,
    SessionNotFoundError,
    SettingsChange,
)
from ...domain import (
    Prompt,
)
from ...mcp import McpServerConfig
from ...modes import Mode, available_modes, mode_named
from ...system_prompts import ClientPrompt
from ...tasks import Lifecycle, OwnedTaskGroup
from ...tools import ToolClient
from ...tools.builtin import BUILTIN
from .._exceptions import PromptNotFoundError
from .._options import MAX_EVENT_ID, DaemonOptions
from ._channel import SessionChannel
from ._event_log import EventLog, RingBudget, Subscription
from ._permissions import DaemonPermission

__all__ = ["FEATURES", "Accepted", "Daemon"]

logger = logging.getLogger("acp_server.daemon")

FEATURES: tuple[str, ...] = (
    "acp.jsonrpc",
    "session.cancel",
    "session.config",
    "session.prompt.cancel",
    "session.create",
    "session.delete",
    "session.directories",
    "session.events",
    "session.events.replay",
    "session.mode",
    "session.permission",
    "session.prompt",
    "session.prompt.wait",
    "session.remove",
    "session.resume",
    "session.systemPrompt",
)
"""What ``/capabilities`` advertises; ``session.load`` (history replayed on the event stream) is not served yet."""

_OFFERED_BY = "this daemon"
"""How a REST refusal of a known mode this daemon does not offer names it (the bridge's rule words the rest)."""

_PREVIOUS_IDS_KEPT = 65_536
"""Detached sessions whose last event id is remembered (an ``int`` each): a reader of the previous attachment that
saw its last event (``session_closed``) gets the new attachment's events without a ``resync_required``."""


def _wall_clock_us() -> int:
    return time.time_ns() // 1000


@dataclass(frozen=True)
class Accepted:
    """An accepted prompt: its handle, and the id of its ``prompt_accepted`` event (every later event is about
    it or after it)."""

    handle: PromptHandle
    event_id: int

    @property
    def prompt_id(self) -> str:
        return self.handle.prompt_id


class Daemon:
    """Sessions, prompts and events for the HTTP routes, over a bridge it does not own (nor close)."""

    def __init__(
        self,
        bridge: SessionBridge,
        options: DaemonOptions | None = None,
        *,
        wall_clock_us: Callable[[], int] = _wall_clock_us,
    ) -> None:
        """``wall_clock_us``: where event ids of a new attachment start (a test may pin it).

        Without a token, ``bridge`` must offer only ``read-only`` (``daemon_modes``), as its default too: else
        ``ValueError``.
        """
        self.bridge = bridge
        self.options = options if options is not None else DaemonOptions()
        if not self.options.token:
            tokenless = available_modes(allow_bypass=False, token=False)
            extra = [offered.id for offered in bridge.settings.offered if offered not in tokenless]
            if extra or mode_named(bridge.default_mode).changes:
                raise ValueError(
                    "a daemon without a token offers only the read-only mode, but its bridge offers "
                    f"{', '.join(extra) or 'read-only'} (default {bridge.default_mode}): build it with "
                    "modes=daemon_modes(token=None) and default_mode='read-only', or give the daemon a token"
                )
        self.modes: tuple[Mode, ...] = bridge.settings.offered
        self._channels: dict[str, SessionChannel] = {}
        self._tasks = OwnedTaskGroup()
        self._life = Lifecycle.UNOPENED
        self.ring_budget = RingBudget(self.options.event_ring_total_bytes)
        self._wall_clock_us = wall_clock_us
        self._issued_high = 0  # >= every first id given and every retired log's last id
        self._previous_ids: OrderedDict[str, int] = OrderedDict()  # detached session → its last event id
        self._finishing: dict[SessionChannel, anyio.Event] = {}  # detached, publishing their last events
        self._remove_listeners: list[Callable[[], None]] = []

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Daemon:
        if self._life is not Lifecycle.UNOPENED:
            raise RuntimeError(f"a Daemon can be opened only once (this one is {self._life.value})")
        await self._tasks.enter()
        self._remove_listeners = [
            self.bridge.add_close_listener(self._detached),
            self.bridge.add_settings_listener(self._settings_changed),
        ]
        self._life = Lifecycle.OPEN
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Shut down (bounded by ``shutdown_grace_s``), then leave the daemon's task group."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.options.shutdown_grace_s):
            await self.shutdown()
        self._tasks.group.cancel_scope.cancel()  # tasks left only if the grace ran out
        for remove in self._remove_listeners:
            remove()
        return await self._tasks.exit(exc_type, exc, tb)

    async def shutdown(self) -> None:
        """Refuse new work, cancel every prompt accepted here, publish their terminal events, end every stream.

        Idempotent; returns when the terminal events are published and the logs closed.
        """
        if self._life is not Lifecycle.OPEN:
            return
        self._life = Lifecycle.CLOSING
        channels = list(self._channels.values())
        pending = [handle for channel in channels for handle in channel.pending.values()]
        for handle in reversed(pending):  # waiting ones first, so none of them starts running
            handle.cancel()
        for channel in channels:
            await channel.drained()
            channel.log.close()
        for finished in list(self._finishing.values()):
            await finished.wait()
        self._life = Lifecycle.CLOSED

    @property
    def closing(self) -> bool:
        return self._life is not Lifecycle.OPEN

    def _check_open(self) -> TaskGroup:
        if self._life is Lifecycle.UNOPENED:
            raise RuntimeError("the Daemon is not open; use 'async with Daemon(...)'")
        if self._life is not Lifecycle.OPEN:
            raise BridgeClosedError("The daemon is shutting down")
        return self._tasks.group

    # -- capabilities -----------------------------------------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        """``GET /capabilities``: the limits come from the bridge itself (Q9: ``null`` when off)."""
        idle = self.options.stream_idle_timeout_ms
        offered = [(mode, BUILTIN.offered(mode.id)) for mode in self.modes]
        return {
            "v": 1,
            "protocolVersions": [PROTOCOL_VERSION],
            "features": list(FEATURES),
            "modes": {
                "defaultModeId": self.bridge.default_mode,
                "availableModes": [
                    {"id": mode.id, "name": mode.name, "description": mode.description, "tools": list(tools)}
                    for mode, tools in offered
                ],
            },
            "tools": [name for name in BUILTIN.names if any(name in tools for _, tools in offered)],
            "models": self._models(),
            "limits": {
                "maxPendingPromptsPerSession": self.bridge.limit,
                "promptDeadlineMs": self.bridge.prompt_deadline_ms,
                "streamIdleTimeoutMs": idle if idle is not None and idle > 0 else None,
                "eventRingSize": self.options.event_ring_size,
                "maxBodyBytes": self.options.max_body_bytes,
            },
        }

    def _models(self) -> dict[str, Any] | None:
        catalog = self.bridge.models
        if catalog is None:
            return None
        return {"defaultModelId": catalog.default, "availableModels": list(catalog.available)}

    # -- sessions --------------------------------------------------------------------------------------------

    async def create_session(
        self,
        cwd: str,
        mode_id: str | None = None,
        *,
        mcp_servers: Sequence[McpServerConfig] = (),
        additional_directories: Sequence[object] | None = None,
        system_prompt: ClientPrompt | None = None,
    ) -> str:
        """A new journaled session (like ACP ``session/new``) in ``mode_id`` (None: the daemon's default); ``cwd``
        must be absolute. The mode is stored with the session either way: it stays this mode whatever the daemon's
        default becomes. A mode this daemon does not offer is refused before anything is created."""
        self._check_open()
        mode = self.bridge.default_mode if mode_id is None else self.offered_mode(mode_id)
        entry = await self.bridge.open_session(
            cwd, mode=mode, mcp_servers=mcp_servers, additional_directories=additional_directories,
            system_prompt=system_prompt,
        )
        self._channel(entry.session_id)
        logger.info("session %s created (cwd %s, mode %s)", entry.session_id, cwd, mode)
        return entry.session_id

    async def resume_session(
        self,
        session_id: str,
        cwd: str | None = None,
        *,
        mcp_servers: Sequence[McpServerConfig] | None = None,
        additional_directories: Sequence[object] | None = None,
        system_prompt: ClientPrompt | None = None,
    ) -> str:
        """Attach a stored session without replaying its history (like ACP ``session/resume``); no-op if attached
        (but for ``mcp_servers``: a new list replaces its connections; ``additional_directories`` and the client's
        ``system_prompt``, None: kept)."""
        self._check_open()
        entry = await self.bridge.resume_session(
            session_id, cwd=cwd, mcp_servers=mcp_servers, additional_directories=additional_directories,
            system_prompt=system_prompt,
        )
        self._channel(entry.session_id)
        logger.info("session %s resumed", session_id)
        return entry.session_id

    async def close_session(self, session_id: str, *, delete: bool = False) -> None:
        """Detach the session from the bridge (its prompts end ``session_closed``; its stored history stays, it can be
        resumed), publish their terminal events and a ``session_closed`` event, then end its streams. ``delete``:
        then remove it and its stored history for good (``SessionBridge.delete_session``)."""
        self._check_open()
        channel = self._channels.get(session_id)
        detach = self.bridge.delete_session if delete else self.bridge.close_session
        await detach(session_id)  # tells _detached, which finishes the channel
        finished = self._finishing.get(channel) if channel is not None else None
        if finished is not None:
            await finished.wait()

    # -- modes ---------------------------------------------------------------------------------------------

    def offered_mode(self, mode_id: object, field: str = "modeId") -> str:
        """``mode_id`` when it is a mode sessions may have here; else ``InvalidInputError`` naming ``field``."""
        return self.bridge.settings.offered_mode(mode_id, field, offered_by=_OFFERED_BY)

    def current_mode(self, session_id: str) -> str:
        """The session's mode as offered here (a stored mode this daemon does not offer reads as the default)."""
        return self._mode_of(self.bridge.get(session_id))

    def _mode_of(self, entry: SessionEntry) -> str:
        return self.bridge.settings.mode_of(entry.mode)

    async def set_mode(self, session_id: str, mode_id: str, field: str = "modeId") -> str:
        """Switch the session's mode (stored; it applies from the next tool call, also mid-prompt); a change
        publishes ``mode_changed`` then ``config_changed`` (:meth:`_settings_changed`). Returns the mode now."""
        self._check_open()
        choice = self.bridge.settings.mode_choice(mode_id, field, offered_by=_OFFERED_BY)
        await self.bridge.change_setting(session_id, choice, origin=self, before=self._channel)
        return choice.value

    # -- config options ------------------------------------------------------------------------------------

    def mcp_status(self, session_id: str) -> list[dict[str, object]]:
        """The session's MCP servers and their state (empty: it has none)."""
        return self.bridge.get(session_id).mcp_status()

    def current_model(self, session_id: str) -> str | None:
        """The model the session's next request uses (None: the bridge offers no model choice)."""
        catalog = self.bridge.models
        return None if catalog is None else catalog.resolve(self.bridge.get(session_id).model)

    def config_options(self, session_id: str) -> list[dict[str, Any]]:
        """The session's config options, shaped like ACP's ``configOptions``: its mode, then (when the bridge
        offers a choice) its model; they agree with :meth:`current_mode` and :meth:`current_model`."""
        return self._options_of(self.bridge.get(session_id))

    def _options_of(self, entry: SessionEntry) -> list[dict[str, Any]]:
        return config_options(self.bridge.settings, entry.mode, entry.model)

    def _publish_config(self, channel: SessionChannel, entry: SessionEntry) -> None:
        payload = {"sessionId": entry.session_id, "configOptions": self._options_of(entry)}
        channel.log.publish("config_changed", payload)

    def offered_model(self, model: object, field: str = "value") -> str:
        """``model`` when sessions may pick it here; else ``InvalidInputError`` naming ``field``."""
        return self.bridge.settings.offered_model(model, field)

    async def set_config_option(self, session_id: str, config_id: str, value: object) -> None:
        """Set one config option: ``mode`` exactly as :meth:`set_mode`; ``model`` (stored, for the session's next
        requests) publishes ``config_changed`` when it changes. An unknown option or a value not offered is an
        ``InvalidInputError`` naming ``configId`` / ``value`` (the bridge's rules), and changes nothing."""
        self._check_open()
        choice = self.bridge.settings.config_choice(config_id, value, offered_by=_OFFERED_BY)
        await self.bridge.change_setting(session_id, choice, origin=self, before=self._channel)

    def _settings_changed(self, change: SettingsChange) -> None:
        """(bridge listener) A session's mode or model changed, whichever face changed it: publish what a REST
        reader sees change (a mode this daemon does not offer reads as its default; no model reads as the default
        model). Only a session with a log here has readers to tell; a title is not part of the REST API."""
        channel = self._channels.get(change.session_id)
        if channel is None or channel.log.closed or change.setting == "title":
            return
        entry, session_id = change.session, change.session_id
        if change.setting == "mode":
            before = self.bridge.settings.mode_of(change.previous)  # none stored before: the default
            mode = self._mode_of(entry)
            if mode == before:
                return
            channel.log.publish("mode_changed", {"sessionId": session_id, "modeId": mode})
            logger.info("session %s: mode %s", session_id, mode)
        else:
            catalog = self.bridge.models
            if catalog is None or catalog.resolve(change.previous) == catalog.resolve(entry.model):
                return
            logger.info("session %s: model %s", session_id, entry.model)
        self._publish_config(channel, entry)

    def _detached(self, session_id: str) -> None:
        """The bridge detached the session (any face): finish its channel in the background (bridge listener)."""
        channel = self._channels.pop(session_id, None)
        if channel is None:
            return
        if self._life not in (Lifecycle.OPEN, Lifecycle.CLOSING):  # no task group to finish it in
            self._retire(channel)
            return
        finished = self._finishing[channel] = anyio.Event()
        self._tasks.group.start_soon(self._finish, channel, finished, name=f"daemon finish {session_id}")

    async def _finish(self, channel: SessionChannel, finished: anyio.Event) -> None:
        """Publish the detached session's terminal events, then ``session_closed``; end its streams."""
        try:
            await channel.drained()
            if not channel.log.closed:
                channel.log.publish("session_closed", {"sessionId": channel.session_id})
            logger.info("session %s closed", channel.session_id)
        finally:
            self._retire(channel)
            del self._finishing[channel]
            finished.set()

    def _retire(self, channel: SessionChannel) -> None:
        """End the channel's streams and remember its last id (the next attachment starts above it)."""
        channel.log.close()
        self._issued_high = max(self._issued_high, channel.log.last_id)
        if channel.log.published:
            self._previous_ids[channel.session_id] = channel.log.last_id
            self._previous_ids.move_to_end(channel.session_id)
            while len(self._previous_ids) > _PREVIOUS_IDS_KEPT:
                self._previous_ids.popitem(last=False)

    def _channel(self, session_id: str) -> SessionChannel:
        """The session's channel; created on first use (this attachment's ids start above every earlier one).
        Unknown → 404."""
        try:
            self.bridge.get(session_id)
        except SessionNotFoundError:
            stale = self._channels.pop(session_id, None)  # detached without telling us (the bridge closed)
            if stale is not None:
                self._retire(stale)
            raise
        channel = self._channels.get(session_id)
        if channel is None:
            previous = self._previous_ids.pop(session_id, None)
            first = max(self._wall_clock_us(), self._issued_high + 1, (previous or 0) + 1)
            if first > MAX_EVENT_ID - 2**40:
                raise RuntimeError(f"event ids exhausted (first id {first}): is the wall clock right?")
            log = EventLog(
                session_id,
                ring_size=self.options.event_ring_size,
                queue_size=self.options.subscriber_queue_size,
                queue_bytes=self.options.subscriber_queue_bytes,
                first_id=first,
                previous_id=previous,
                budget=self.ring_budget,
            )
            self._issued_high = max(self._issued_high, first)
            channel = self._channels[session_id] = SessionChannel(session_id, log)
        return channel

    # -- prompts ---------------------------------------------------------------------------------------------

    def submit_prompt(self, session_id: str, prompt: Prompt, *, deadline_ms: int | None = None) -> Accepted:
        """Admit through the bridge, synchronously: a refusal raises before anything is published."""
        self._check_open()
        channel = self._channel(session_id)
        permission = DaemonPermission(channel.permissions)
        handle = self.bridge.send_prompt(session_id, prompt, deadline_ms=deadline_ms, client=ToolClient(permission))
        permission.bind(handle)  # before its turn can run: the worker starts in the task group, not here
        pending_count = self.bridge.get(session_id).pending_prompt_count
        event_id = channel.log.publish(
            "prompt_accepted", {"sessionId": session_id, "promptId": handle.prompt_id, "pendingCount": pending_count}
        )
        channel.accept(handle)
        return Accepted(handle, event_id)

    def cancel_prompt(self, session_id: str, prompt_id: str) -> None:
        """Cancel one prompt accepted here: a waiting one leaves the FIFO, a running one stops; both end "cancelled".

        Raises ``PromptNotFoundError`` when no such prompt is pending (unknown, or already ended).
        """
        self._check_open()
        handle = self._channel(session_id).pending.get(prompt_id)
        if handle is None or handle.done:
            raise PromptNotFoundError(session_id, prompt_id)
        handle.cancel()

    def cancel_session(self, session_id: str) -> bool:
        """Stop the session: its running prompt and every waiting one, whoever sent them, answer ``cancelled`` (the
        same operation as ``session/cancel``)."""
        self._check_open()
        return self.bridge.cancel_session(session_id)

    def answer_permission(self, session_id: str, request_id: str, option_id: str) -> None:
        """Answer the session's pending permission request (see :meth:`PermissionDesk.answer`)."""
        self._check_open()
        self._channel(session_id).permissions.answer(request_id, option_id)

    # -- events ----------------------------------------------------------------------------------------------

    def subscribe(self, session_id: str, last_event_id: int | None = None) -> Subscription:
        """A reader of the session's events after ``last_event_id`` (see :meth:`EventLog.subscribe`)."""
        self._check_open()
        return self._channel(session_id).log.subscribe(last_event_id)

    def event_log(self, session_id: str) -> EventLog:
        """The session's event log (for tests and diagnostics). Unknown session → ``SessionNotFoundError``."""
        return self._channel(session_id).log

    def __repr__(self) -> str:
        return f"<Daemon {self._life.value} sessions={len(self._channels)}>"
