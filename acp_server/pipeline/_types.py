"""What the pipeline takes (a chat request and a policy) and what it yields (deltas, then one finish)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeAlias


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One streamed chat completion, in OpenAI terms."""

    model: str
    messages: list[dict[str, Any]]
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class StreamPolicy:
    """Timeouts and retry bounds of one streamed request; values in milliseconds, ``<= 0`` disables a timer."""

    idle_timeout_ms: float = 120_000
    max_lifetime_ms: float = 900_000


@dataclass(frozen=True, slots=True)
class Delta:
    """A piece of streamed output: answer text and/or reasoning text."""

    text: str = ""
    reasoning: str = ""


@dataclass(frozen=True, slots=True)
class Finished:
    """The stream ended; ``finish_reason`` as the model reported it (None when it sent none)."""

    finish_reason: str | None


StreamEvent: TypeAlias = Delta | Finished
