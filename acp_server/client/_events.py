"""A session's events as typed values, parsed from the daemon's SSE frames (``parse_event``).

A malformed frame raises ``ValueError``; the stream turns it into a ``DaemonProtocolError``. An event this SDK
does not know is an :class:`UnknownEvent` (a newer daemon), never an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx2

from ._models import ConfigOption, _config_options, _int, _object, _str

__all__ = [
    "ConfigChangedEvent",
    "DaemonEvent",
    "ModeChangedEvent",
    "PermissionOption",
    "PermissionRequestEvent",
    "PlanEntry",
    "PlanEvent",
    "PromptAcceptedEvent",
    "ResyncRequiredEvent",
    "SessionClosedEvent",
    "SessionUpdateEvent",
    "ToolCallEvent",
    "TurnCompleteEvent",
    "TurnErrorEvent",
    "UnknownEvent",
    "parse_event",
]


# -- events ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class DaemonEvent:
    """One event of a session's stream: ``id`` (monotonic per session), and the JSON ``payload`` as sent."""

    EVENT: ClassVar[str] = ""

    id: int
    session_id: str
    payload: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def event(self) -> str:
        """The SSE ``event:`` name."""
        return self.EVENT


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptAcceptedEvent(DaemonEvent):
    """A prompt was admitted; ``pending_count`` counts it, the ones waiting before it and the running one."""

    EVENT: ClassVar[str] = "prompt_accepted"

    prompt_id: str
    pending_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionUpdateEvent(DaemonEvent):
    """An ACP ``session/update`` of a running prompt (``update`` as ACP defines it)."""

    EVENT: ClassVar[str] = "session_update"

    prompt_id: str
    update: Mapping[str, Any]

    @property
    def kind(self) -> str:
        """``update.sessionUpdate``: ``agent_message_chunk``, ``agent_thought_chunk``, ``tool_call``, ..."""
        kind = self.update.get("sessionUpdate")
        return kind if isinstance(kind, str) else ""

    @property
    def text(self) -> str | None:
        """The text of a chunk update with text content, else None."""
        content = self.update.get("content")
        if isinstance(content, Mapping) and content.get("type") == "text":
            text = content.get("text")
            return text if isinstance(text, str) else None
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallEvent(SessionUpdateEvent):
    """A tool call of a running prompt: ``update`` is ACP's ``tool_call`` (announced, status ``pending``) or
    ``tool_call_update`` (``in_progress``, content, then ``completed`` / ``failed``). A :class:`SessionUpdateEvent`,
    so ``on_update`` gets these too."""

    EVENT: ClassVar[str] = "tool_call"

    @property
    def tool_call_id(self) -> str:
        value = self.update.get("toolCallId")
        return value if isinstance(value, str) else ""

    @property
    def status(self) -> str | None:
        """``pending``, ``in_progress``, ``completed``, ``failed``; None when this update does not change it."""
        value = self.update.get("status")
        return value if isinstance(value, str) else None

    @property
    def title(self) -> str | None:
        value = self.update.get("title")
        return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class PlanEntry:
    """One step of the model's plan: ``status`` is ``pending``, ``in_progress`` or ``completed``, ``priority``
    ``high``, ``medium`` or ``low`` (ACP's values, kept as sent)."""

    content: str
    status: str
    priority: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanEvent(SessionUpdateEvent):
    """The model's plan changed: ``entries`` is the whole plan, in order (replace what you show). ``update`` is
    ACP's ``plan`` session update. A :class:`SessionUpdateEvent`, so ``on_update`` gets these too."""

    EVENT: ClassVar[str] = "plan"

    entries: tuple[PlanEntry, ...]


def _plan_entries(update: Mapping[str, Any]) -> tuple[PlanEntry, ...]:
    entries = update.get("entries")
    if not isinstance(entries, list):
        raise ValueError(f"'update.entries' must be a list; got {entries!r}")
    parsed: list[PlanEntry] = []
    for entry in entries:
        if not isinstance(entry, Mapping):
            raise ValueError(f"a plan entry must be an object; got {entry!r}")
        parsed.append(PlanEntry(_str(entry, "content"), _str(entry, "status"), _str(entry, "priority")))
    return tuple(parsed)


@dataclass(frozen=True, slots=True)
class PermissionOption:
    """One answer a permission request offers: ``kind`` is ``allow_once``, ``allow_always``, ``reject_once`` or
    ``reject_always`` (an "always" answer holds for that kind of call for the rest of the session)."""

    option_id: str
    name: str
    kind: str


@dataclass(frozen=True, slots=True, kw_only=True)
class PermissionRequestEvent(DaemonEvent):
    """A tool call of the prompt waits for permission (answer with :meth:`DaemonClient.answer_permission`);
    ``tool_call`` holds ACP's ``ToolCall`` fields (``title``, ``kind``, ``rawInput``, ``content``: an edit's diff)."""

    EVENT: ClassVar[str] = "permission_request"

    prompt_id: str
    request_id: str
    tool_call: Mapping[str, Any]
    options: tuple[PermissionOption, ...]

    @property
    def title(self) -> str:
        value = self.tool_call.get("title")
        return value if isinstance(value, str) else ""

    def option_id(self, kind: str) -> str | None:
        """The id of the first option of ``kind`` (``allow_once``, ``reject_once``, ...), None if none is."""
        return next((option.option_id for option in self.options if option.kind == kind), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModeChangedEvent(DaemonEvent):
    """The session's mode changed (``POST /session/{id}/mode``)."""

    EVENT: ClassVar[str] = "mode_changed"

    mode_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigChangedEvent(DaemonEvent):
    """A config option of the session changed (``POST /session/{id}/config`` or ``/mode``; a mode change comes
    after its :class:`ModeChangedEvent`): ``options`` is every option's state now."""

    EVENT: ClassVar[str] = "config_changed"

    options: tuple[ConfigOption, ...]

    def current(self, config_id: str) -> str | None:
        """The current value of option ``config_id``, None when it is not offered."""
        return next((option.current_value for option in self.options if option.id == config_id), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCompleteEvent(DaemonEvent):
    EVENT: ClassVar[str] = "turn_complete"

    prompt_id: str
    stop_reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnErrorEvent(DaemonEvent):
    """The terminal event of a failed prompt: ``code`` is the errorKind, ``data`` its details and ``retryable``."""

    EVENT: ClassVar[str] = "turn_error"

    prompt_id: str
    code: str
    message: str
    data: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ResyncRequiredEvent(DaemonEvent):
    """The daemon no longer holds the events after ``last_event_id``: refetch state; live events follow."""

    EVENT: ClassVar[str] = "resync_required"

    last_event_id: int
    oldest_event_id: int
    latest_event_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionClosedEvent(DaemonEvent):
    """The session was deleted: the last event of its stream."""

    EVENT: ClassVar[str] = "session_closed"


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownEvent(DaemonEvent):
    """An event type this SDK does not know (a newer daemon); ``name`` is its SSE ``event:``."""

    name: str

    @property
    def event(self) -> str:
        return self.name


def _options(payload: Mapping[str, Any]) -> tuple[PermissionOption, ...]:
    options = payload.get("options")
    if not isinstance(options, list) or not options:
        raise ValueError(f"'options' must be a non-empty list; got {options!r}")
    parsed: list[PermissionOption] = []
    for option in options:
        if not isinstance(option, Mapping):
            raise ValueError(f"a permission option must be an object; got {option!r}")
        name = option.get("name")
        parsed.append(
            PermissionOption(_str(option, "optionId"), name if isinstance(name, str) else "", _str(option, "kind"))
        )
    return tuple(parsed)


def parse_event(sse: httpx2.ServerSentEvent, session_id: str) -> DaemonEvent:
    """A typed event from one SSE frame; ``ValueError`` when its id or JSON payload is malformed."""
    if not sse.id.isdigit():
        raise ValueError(f"event {sse.event!r} has no numeric id (id: {sse.id!r})")
    try:
        payload = sse.json()
    except ValueError as exc:
        raise ValueError(f"event {sse.event!r} {sse.id} has invalid JSON data: {exc}") from None
    if not isinstance(payload, Mapping):
        raise ValueError(f"event {sse.event!r} {sse.id} data must be an object")
    sid = payload.get("sessionId")
    base: dict[str, Any] = {
        "id": int(sse.id),
        "session_id": sid if isinstance(sid, str) and sid else session_id,
        "payload": payload,
    }
    match sse.event:
        case "prompt_accepted":
            return PromptAcceptedEvent(
                **base, prompt_id=_str(payload, "promptId"), pending_count=_int(payload, "pendingCount")
            )
        case "session_update":
            return SessionUpdateEvent(**base, prompt_id=_str(payload, "promptId"), update=_object(payload, "update"))
        case "tool_call":
            return ToolCallEvent(**base, prompt_id=_str(payload, "promptId"), update=_object(payload, "update"))
        case "plan":
            update = _object(payload, "update")
            return PlanEvent(**base, prompt_id=_str(payload, "promptId"), update=update, entries=_plan_entries(update))
        case "permission_request":
            return PermissionRequestEvent(
                **base,
                prompt_id=_str(payload, "promptId"),
                request_id=_str(payload, "requestId"),
                tool_call=_object(payload, "toolCall"),
                options=_options(payload),
            )
        case "mode_changed":
            return ModeChangedEvent(**base, mode_id=_str(payload, "modeId"))
        case "config_changed":
            return ConfigChangedEvent(**base, options=_config_options(payload))
        case "turn_complete":
            return TurnCompleteEvent(
                **base, prompt_id=_str(payload, "promptId"), stop_reason=_str(payload, "stopReason")
            )
        case "turn_error":
            message = payload.get("message")
            return TurnErrorEvent(
                **base,
                prompt_id=_str(payload, "promptId"),
                code=_str(payload, "code"),
                message=message if isinstance(message, str) else "",
                data=_object(payload, "data") if payload.get("data") is not None else {},
            )
        case "resync_required":
            return ResyncRequiredEvent(
                **base,
                last_event_id=_int(payload, "lastEventId"),
                oldest_event_id=_int(payload, "oldestEventId"),
                latest_event_id=_int(payload, "latestEventId"),
            )
        case "session_closed":
            return SessionClosedEvent(**base)
        case _:
            return UnknownEvent(**base, name=sse.event)
