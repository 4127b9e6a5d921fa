"""The HTTP face's state over one session bridge: a per-session event log, and a watcher per accepted prompt.

The bridge stays the only admission authority (Q3): :meth:`Daemon.submit_prompt` calls the synchronous
``send_prompt`` and lets its ``PromptQueueFullError`` propagate before anything is published or answered (Q8).

Invariants:
- every prompt accepted here gets exactly one ``prompt_accepted`` event (published before ``submit_prompt``
  returns) and exactly one terminal event (``turn_complete`` or ``turn_error``), published by its watcher;
- per session, events are in order: a prompt's ``session_update`` events come after the terminal events of
  every prompt accepted before it;
- every task (one watcher per pending prompt) belongs to the daemon's task group; lifecycle
  unopened → open → closing → closed.
"""

from __future__ import annotations

import enum
import logging
import os
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .. import __version__
from ..acp import PROTOCOL_VERSION, AgentOptions, update_from_event
from ..bridge import BridgeClosedError, PromptHandle, SessionBridge, SessionNotFoundError
from ..domain import Prompt, TurnEvent
from ._acp_http import AcpOverHttp
from ._errors import turn_error_payload
from ._events import EventLog, Subscription
from ._exceptions import InvalidRequestError, PromptNotFoundError
from ._options import DaemonOptions

__all__ = ["FEATURES", "Accepted", "Daemon"]

logger = logging.getLogger("acp_server.daemon")

FEATURES: tuple[str, ...] = (
    "acp.jsonrpc",
    "session.cancel",
    "session.prompt.cancel",
    "session.create",
    "session.delete",
    "session.events",
    "session.events.replay",
    "session.prompt",
    "session.prompt.wait",
    "session.resume",
)
"""What ``/capabilities`` advertises; ``session.load`` (history replayed on the event stream) is not served yet."""


@dataclass(eq=False)
class _Pending:
    """A prompt accepted through this daemon, until its terminal event is published."""

    handle: PromptHandle | None = None
    started: bool = False  # its first update was published
    settled: anyio.Event = field(default_factory=anyio.Event)  # its terminal event was published


class _Channel:
    """One session as the daemon sees it: its event log and its prompts awaiting a terminal event."""

    def __init__(self, session_id: str, options: DaemonOptions) -> None:
        self.session_id = session_id
        self.log = EventLog(session_id, ring_size=options.event_ring_size, queue_size=options.subscriber_queue_size)
        self.pending: dict[str, _Pending] = {}  # by prompt id, in acceptance order


@dataclass(frozen=True)
class Accepted:
    """An accepted prompt: its handle, and the id of its ``prompt_accepted`` event (every later event is about
    it or after it)."""

    handle: PromptHandle
    event_id: int

    @property
    def prompt_id(self) -> str:
        return self.handle.prompt_id


def _check_cwd(cwd: str) -> None:
    if not os.path.isabs(cwd):
        raise InvalidRequestError(
            f"cwd must be an absolute path, got {cwd!r}", [{"field": "cwd", "message": "must be an absolute path"}]
        )


class _Life(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class Daemon:
    """Sessions, prompts and events for the HTTP routes, over a bridge it does not own (nor close)."""

    def __init__(self, bridge: SessionBridge, options: DaemonOptions | None = None) -> None:
        self.bridge = bridge
        self.options = options if options is not None else DaemonOptions()
        self._channels: dict[str, _Channel] = {}
        self._tg: TaskGroup | None = None
        self.acp: AcpOverHttp | None = None  # ACP JSON-RPC over HTTP, once open
        self._life = _Life.UNOPENED

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Daemon:
        if self._life is not _Life.UNOPENED:
            raise RuntimeError(f"a Daemon can be opened only once (this one is {self._life.value})")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self.acp = AcpOverHttp(self.bridge, AgentOptions(version=__version__), tg)
        self._life = _Life.OPEN
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """Shut down (bounded by ``shutdown_grace_s``), then leave the task group of the watchers."""
        assert self._tg is not None
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.options.shutdown_grace_s):
            await self.shutdown()
        self._tg.cancel_scope.cancel()  # watchers left only if the grace ran out
        if exc is not None and not isinstance(exc, anyio.get_cancelled_exc_class()):
            await self._tg.__aexit__(None, None, None)  # the body's error propagates unwrapped
            return None
        return await self._tg.__aexit__(exc_type, exc, tb)

    async def shutdown(self) -> None:
        """Refuse new work, cancel every prompt accepted here, publish their terminal events, end every stream.

        Idempotent; returns when the terminal events are published and the logs closed.
        """
        if self._life is not _Life.OPEN:
            return
        self._life = _Life.CLOSING
        if self.acp is not None:
            await self.acp.aclose()  # /acp prompts answer "cancelled" and free their slots
        pending = [entry for channel in self._channels.values() for entry in channel.pending.values()]
        for entry in reversed(pending):  # waiting ones first, so none of them starts running
            if entry.handle is not None:
                entry.handle.cancel()
        for entry in pending:
            await entry.settled.wait()
        for channel in self._channels.values():
            channel.log.close()
        self._life = _Life.CLOSED

    @property
    def closing(self) -> bool:
        return self._life is not _Life.OPEN

    def _check_open(self) -> TaskGroup:
        if self._life is _Life.UNOPENED or self._tg is None:
            raise RuntimeError("the Daemon is not open; use 'async with Daemon(...)'")
        if self._life is not _Life.OPEN:
            raise BridgeClosedError("The daemon is shutting down")
        return self._tg

    # -- capabilities -----------------------------------------------------------------------------------------

    def capabilities(self) -> dict[str, Any]:
        """``GET /capabilities``: the limits come from the bridge itself (Q9: ``null`` when off)."""
        idle = self.options.stream_idle_timeout_ms
        return {
            "v": 1,
            "protocolVersions": [PROTOCOL_VERSION],
            "features": list(FEATURES),
            "limits": {
                "maxPendingPromptsPerSession": self.bridge.limit,
                "promptDeadlineMs": self.bridge.prompt_deadline_ms,
                "streamIdleTimeoutMs": idle if idle is not None and idle > 0 else None,
                "eventRingSize": self.options.event_ring_size,
                "maxBodyBytes": self.options.max_body_bytes,
            },
        }

    # -- sessions --------------------------------------------------------------------------------------------

    async def create_session(self, cwd: str) -> str:
        """A new journaled session (like ACP ``session/new``); ``cwd`` must be absolute."""
        self._check_open()
        _check_cwd(cwd)
        entry = await self.bridge.open_session(cwd)
        self._channels[entry.session_id] = _Channel(entry.session_id, self.options)
        logger.info("session %s created (cwd %s)", entry.session_id, cwd)
        return entry.session_id

    async def resume_session(self, session_id: str, cwd: str | None = None) -> str:
        """Attach a stored session without replaying its history (like ACP ``session/resume``); no-op if attached."""
        self._check_open()
        if cwd is not None:
            _check_cwd(cwd)
        entry = await self.bridge.resume_session(session_id, cwd=cwd)
        self._channel(entry.session_id)
        logger.info("session %s resumed", session_id)
        return entry.session_id

    async def close_session(self, session_id: str) -> None:
        """Detach the session from the bridge (its prompts end ``session_closed``; its stored history stays, it can be
        resumed), publish their terminal events and a ``session_closed`` event, then end its streams."""
        self._check_open()
        await self.bridge.close_session(session_id)
        channel = self._channels.pop(session_id, None)
        if channel is None:
            return
        for entry in list(channel.pending.values()):
            await entry.settled.wait()
        channel.log.publish("session_closed", {"sessionId": session_id})
        channel.log.close()
        logger.info("session %s closed", session_id)

    def _channel(self, session_id: str) -> _Channel:
        """The session's channel; created on first use for sessions another face made. Unknown → 404."""
        try:
            self.bridge.get(session_id)
        except SessionNotFoundError:
            stale = self._channels.pop(session_id, None)  # closed by another face
            if stale is not None:
                stale.log.close()
            raise
        channel = self._channels.get(session_id)
        if channel is None:
            channel = self._channels[session_id] = _Channel(session_id, self.options)
        return channel

    # -- prompts ---------------------------------------------------------------------------------------------

    def submit_prompt(self, session_id: str, prompt: Prompt, *, deadline_ms: int | None = None) -> Accepted:
        """Admit through the bridge, synchronously: a refusal raises before anything is published."""
        tg = self._check_open()
        channel = self._channel(session_id)
        entry = _Pending()

        async def emit(event: TurnEvent) -> None:
            await self._publish_update(channel, entry, event)

        handle = self.bridge.send_prompt(session_id, prompt, emit=emit, deadline_ms=deadline_ms)
        entry.handle = handle
        channel.pending[handle.prompt_id] = entry
        pending_count = self.bridge.get(session_id).pending_prompt_count
        event_id = channel.log.publish(
            "prompt_accepted", {"sessionId": session_id, "promptId": handle.prompt_id, "pendingCount": pending_count}
        )
        tg.start_soon(self._watch, channel, entry, name=f"daemon watcher {handle.prompt_id}")
        return Accepted(handle, event_id)

    def cancel_prompt(self, session_id: str, prompt_id: str) -> None:
        """Cancel one prompt accepted here: a waiting one leaves the FIFO, a running one stops; both end "cancelled".

        Raises ``PromptNotFoundError`` when no such prompt is pending (unknown, or already ended).
        """
        self._check_open()
        entry = self._channel(session_id).pending.get(prompt_id)
        if entry is None or entry.handle is None:
            raise PromptNotFoundError(session_id, prompt_id)
        entry.handle.cancel()

    def cancel_running(self, session_id: str) -> bool:
        """Cancel the session's running prompt, whoever sent it (same semantics as ``session/cancel``)."""
        self._check_open()
        return self.bridge.cancel_running(session_id)

    async def _publish_update(self, channel: _Channel, entry: _Pending, event: TurnEvent) -> None:
        assert entry.handle is not None
        if not entry.started:
            entry.started = True
            for earlier in list(channel.pending.values()):  # all settled: the FIFO let this one run
                if earlier is entry:
                    break
                await earlier.settled.wait()
        update = update_from_event(channel.session_id, event)
        if not channel.log.closed:
            channel.log.publish("session_update", {"promptId": entry.handle.prompt_id, **update})

    async def _watch(self, channel: _Channel, entry: _Pending) -> None:
        """Publish the prompt's terminal event once it settles; mark it published whatever happens."""
        handle = entry.handle
        assert handle is not None
        try:
            base = {"sessionId": channel.session_id, "promptId": handle.prompt_id}
            try:
                stop_reason = await handle.result()
            except Exception as exc:
                if not channel.log.closed:
                    channel.log.publish("turn_error", {**base, **turn_error_payload(exc)})
            else:
                if not channel.log.closed:
                    channel.log.publish("turn_complete", {**base, "stopReason": stop_reason})
        finally:
            channel.pending.pop(handle.prompt_id, None)
            entry.settled.set()

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
