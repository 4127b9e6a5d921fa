"""Validation of the bridge's numeric settings, shared with the CLI so both reject the same values (Q2)."""

from __future__ import annotations

import math

__all__ = ["validate_deadline_ms", "validate_max_pending"]


def _non_negative_int_or_off(value: object, name: str, what: str) -> int | None:
    """``None``, ``0``, ``math.inf`` mean "off" (None); a non-negative integer (or integral float) stays"""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be {what}; got {value!r}")
    if isinstance(value, float):
        if value == math.inf:
            return None
        if math.isnan(value) or not value.is_integer():
            raise ValueError(f"{name} must be {what}; got {value!r}")
        value = int(value)
    if value < 0:
        raise ValueError(f"{name} must be {what}; got {value!r}")
    return value or None


def validate_max_pending(value: object, name: str = "max_pending_prompts_per_session") -> int | None:
    """The per-session pending-prompt limit: ``None`` = unlimited (from ``None``, ``0`` or ``math.inf``).

    Negative numbers, fractions, NaN, booleans and non-numbers raise ``ValueError`` naming the value.
    """
    return _non_negative_int_or_off(value, name, "a non-negative integer (0 or infinity = unlimited)")


def validate_deadline_ms(value: object, name: str = "prompt_deadline_ms") -> int | None:
    """A prompt deadline in milliseconds: ``None`` = no deadline (from ``None``, ``0`` or ``math.inf``).

    Same rules as :func:`validate_max_pending`: negative, fractional, NaN, bool and non-numbers raise
    ``ValueError``.
    """
    return _non_negative_int_or_off(value, name, "a non-negative integer of milliseconds (0 = no deadline)")
