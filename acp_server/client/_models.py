"""What the daemon sends, as typed values: capabilities, a prompt's result, and the session's events.

Parsers raise ``ValueError`` on a malformed payload; the caller turns it into a ``DaemonProtocolError`` that
names the request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx2

from ._limits import validate_limit

__all__ = [
    "Capabilities",
    "DaemonEvent",
    "PromptAcceptedEvent",
    "PromptInput",
    "PromptResult",
    "ResyncRequiredEvent",
    "SessionClosedEvent",
    "SessionUpdateEvent",
    "TurnCompleteEvent",
    "TurnErrorEvent",
    "UnknownEvent",
    "parse_capabilities",
    "parse_event",
    "prompt_blocks",
]

PromptInput = str | Sequence[Mapping[str, Any]]
"""A prompt: plain text, or ACP content blocks (``{"type": "text", "text": ...}``, ``resource_link``, ...)."""


def prompt_blocks(prompt: PromptInput) -> list[dict[str, Any]]:
    """The ``prompt`` field of a prompt request; an empty prompt is a ``ValueError`` (nothing is sent)."""
    if isinstance(prompt, str):
        if not prompt:
            raise ValueError("prompt must not be empty")
        return [{"type": "text", "text": prompt}]
    blocks = [dict(block) for block in prompt]
    if not blocks:
        raise ValueError("prompt must have at least one content block")
    for block in blocks:
        if not isinstance(block.get("type"), str):
            raise ValueError(f"every content block needs a string 'type'; got {block!r}")
    return blocks


def _str(payload: Mapping[str, Any], key: str) -> str:
    value = payload.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key!r} must be a non-empty string; got {value!r}")
    return value


def _int(payload: Mapping[str, Any], key: str) -> int:
    value = payload.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{key!r} must be an integer; got {value!r}")
    return value


def _optional_int(payload: Mapping[str, Any], key: str) -> int | None:
    return None if payload.get(key) is None else _int(payload, key)


def _object(payload: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = payload.get(key)
    if not isinstance(value, Mapping):
        raise ValueError(f"{key!r} must be an object; got {value!r}")
    return value


# -- capabilities and results ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Capabilities:
    """``GET /capabilities``. ``max_pending_prompts_per_session`` None = the daemon has no limit (Q9)."""

    version: int
    protocol_versions: tuple[int, ...]
    features: frozenset[str]
    max_pending_prompts_per_session: int | None
    prompt_deadline_ms: int | None
    stream_idle_timeout_ms: int | None
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    def supports(self, feature: str) -> bool:
        """Whether ``features`` lists ``feature`` (e.g. ``"session.load"``)."""
        return feature in self.features


def parse_capabilities(body: object) -> Capabilities:
    if not isinstance(body, Mapping):
        raise ValueError(f"capabilities must be an object; got {body!r}")
    limits = _object(body, "limits")
    versions = body.get("protocolVersions", [])
    features = body.get("features", [])
    if not isinstance(versions, list) or not all(isinstance(v, int) for v in versions):
        raise ValueError(f"'protocolVersions' must be a list of integers; got {versions!r}")
    if not isinstance(features, list) or not all(isinstance(f, str) for f in features):
        raise ValueError(f"'features' must be a list of strings; got {features!r}")
    return Capabilities(
        version=_int(body, "v"),
        protocol_versions=tuple(versions),
        features=frozenset(features),
        max_pending_prompts_per_session=validate_limit(
            limits.get("maxPendingPromptsPerSession"), "limits.maxPendingPromptsPerSession"
        ),
        prompt_deadline_ms=_optional_int(limits, "promptDeadlineMs"),
        stream_idle_timeout_ms=_optional_int(limits, "streamIdleTimeoutMs"),
        raw=body,
    )


@dataclass(frozen=True, slots=True)
class PromptResult:
    """How an accepted prompt's turn ended: ``stop_reason`` is ACP's (``end_turn``, ``cancelled``, ...)."""

    prompt_id: str
    stop_reason: str


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
