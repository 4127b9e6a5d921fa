"""Following one accepted prompt through its session's events, from its ``prompt_accepted`` on."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ._events import (
    DaemonEvent,
    PermissionRequestEvent,
    ResyncRequiredEvent,
    SessionClosedEvent,
    SessionUpdateEvent,
    TurnCompleteEvent,
    TurnErrorEvent,
)
from ._exceptions import DaemonClientError, DaemonEventsLostError, DaemonEventStreamEndedError, DaemonTurnError
from ._models import PromptResult

__all__ = ["OnPermission", "OnUpdate", "TurnItem", "TurnTracker", "result_of"]

OnUpdate = Callable[[SessionUpdateEvent], Awaitable[None] | None]
"""Called with each ``session_update`` and ``tool_call`` (a :class:`ToolCallEvent`) of the prompt, in order (a
coroutine function is awaited)."""

OnPermission = Callable[[PermissionRequestEvent], Awaitable[str] | str]
"""Called with each permission request of the prompt; returns the ``option_id`` to answer (a coroutine function is
awaited). The prompt waits meanwhile."""

TurnItem = SessionUpdateEvent | PermissionRequestEvent | TurnCompleteEvent | TurnErrorEvent | DaemonClientError
"""What a followed prompt yields: its updates and permission requests, then its terminal event or the failure that
ended the following."""


class TurnTracker:
    """Feeds on a session's events (``id >= accepted_event_id``) and picks out one prompt's."""

    def __init__(self, session_id: str, prompt_id: str, accepted_event_id: int) -> None:
        self.session_id = session_id
        self.prompt_id = prompt_id
        self.accepted_event_id = accepted_event_id
        self.done = False
        self.abandoned = False  # its caller gave up and a cancel was sent

    def feed(self, event: DaemonEvent) -> TurnItem | None:
        """The item ``event`` means for this prompt, if any. After a terminal item it yields nothing more."""
        if self.done or event.id < self.accepted_event_id:
            return None
        if isinstance(event, ResyncRequiredEvent):
            self.done = True
            return DaemonEventsLostError(
                session_id=self.session_id,
                prompt_id=self.prompt_id,
                last_event_id=event.last_event_id,
                oldest_event_id=event.oldest_event_id,
            )
        if isinstance(event, SessionClosedEvent):
            self.done = True
            return DaemonEventStreamEndedError(
                f'Session "{self.session_id}" was closed before prompt "{self.prompt_id}" ended',
                session_id=self.session_id,
                last_event_id=event.id,
            )
        prompt_id = getattr(event, "prompt_id", None)
        if prompt_id != self.prompt_id:
            return None
        if isinstance(event, SessionUpdateEvent | PermissionRequestEvent):
            return event
        if isinstance(event, TurnCompleteEvent | TurnErrorEvent):
            self.done = True
            return event
        return None


def result_of(event: TurnCompleteEvent | TurnErrorEvent) -> PromptResult:
    """The prompt's result for ``turn_complete``; raises its :class:`DaemonTurnError` for ``turn_error``."""
    if isinstance(event, TurnCompleteEvent):
        return PromptResult(event.prompt_id, event.stop_reason)
    raise DaemonTurnError(
        event.message or f"Prompt {event.prompt_id} failed ({event.code})",
        session_id=event.session_id,
        prompt_id=event.prompt_id,
        code=event.code,
        data=event.data,
    )
