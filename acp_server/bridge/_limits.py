"""The bridge's numeric settings: thin delegates to the one validator, :mod:`acp_server.limits` (Q2).

They stay functions of this package (``acp_server.bridge`` exports them); the rules and messages are the ground
floor's, shared with the SDK client.
"""

from __future__ import annotations

from .. import limits

__all__ = ["validate_deadline_ms", "validate_max_pending"]


def validate_max_pending(value: object, name: str = "max_pending_prompts_per_session") -> int | None:
    """The per-session pending-prompt limit: :func:`acp_server.limits.validate_max_pending`."""
    return limits.validate_max_pending(value, name)


def validate_deadline_ms(value: object, name: str = "prompt_deadline_ms") -> int | None:
    """A prompt deadline in milliseconds: :func:`acp_server.limits.validate_deadline_ms`."""
    return limits.validate_deadline_ms(value, name)
