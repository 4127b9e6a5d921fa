"""What the user is told while the turn waits to retry a failed model request: one :class:`RetryNotice` per wait."""

from __future__ import annotations

from uuid import uuid4

from ..domain import RetryNotice
from ..pipeline import RetryEvent

__all__ = ["retry_notice"]


def retry_notice(event: RetryEvent) -> RetryNotice:
    """The notice of one retry wait: a thought line saying why and for how long (its own line: it never runs into
    the reasoning around it)."""
    reason = event.classification.reason
    text = f"\n(The model request failed: {reason}. Retrying in {event.delay_s:.1f} s, attempt {event.attempt + 1}.)\n"
    delay_ms = round(event.delay_s * 1000)
    return RetryNotice(text, event.attempt, delay_ms, reason, message_id=f"retry-{uuid4().hex}")  # a message of its own
