"""The one validator of "a count, or off" settings (ground floor: imports nothing of the package).

The daemon's bridge, its CLI and the SDK client take the same values (Q2): ``None``, ``0`` and ``math.inf`` mean
"off" (→ None); a non-negative integer, or an integral float, is the value (→ int). Anything else — a negative
number, a fraction, NaN, ``-inf``, a bool, a non-number — raises ``ValueError`` naming the setting and the value.
"""

from __future__ import annotations

import math

__all__ = [
    "DEFAULT_FS_REQUEST_TIMEOUT_MS",
    "DEFAULT_MAX_PENDING_PROMPTS_PER_SESSION",
    "MAX_DEADLINE_MS",
    "validate_count_or_off",
    "validate_deadline_ms",
    "validate_max_pending",
]

DEFAULT_FS_REQUEST_TIMEOUT_MS = 30_000
"""How long a file request to the editor (``fs/read_text_file``, ``fs/write_text_file``) waits for its answer by
default; then the call fails (``--fs-request-timeout-ms``)."""


def validate_count_or_off(value: object, name: str, *, off: str) -> int | None:
    """``value`` as a count, or None for off (module rules); ``off`` says in the error what turns it off."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be None or a non-negative integer ({off}); got {value!r}")
    if isinstance(value, float):
        if value == math.inf:
            return None
        if math.isnan(value) or not value.is_integer():
            raise ValueError(f"{name} must be a whole number ({off}); got {value!r}")
        value = int(value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0 ({off}); got {value!r}")
    return value or None


DEFAULT_MAX_PENDING_PROMPTS_PER_SESSION = 5
"""Prompts waiting + running per session before new ones are refused, by default (the bridge's admission limit,
``--max-pending-prompts-per-session``)."""


def validate_max_pending(value: object, name: str = "max_pending_prompts_per_session") -> int | None:
    """The per-session pending-prompt limit: None = unlimited (from ``None``, ``0`` or ``math.inf``)."""
    return validate_count_or_off(value, name, off="0 or infinity = unlimited")


MAX_DEADLINE_MS = 2**53 - 1
"""The longest deadline accepted (JSON's largest safe integer, ~285,000 years): beyond it a clock overflows."""


def validate_deadline_ms(value: object, name: str = "prompt_deadline_ms") -> int | None:
    """A prompt deadline in milliseconds: None = no deadline (from ``None``, ``0`` or ``math.inf``); at most
    :data:`MAX_DEADLINE_MS`."""
    deadline = validate_count_or_off(value, name, off="milliseconds; 0 or infinity = no deadline")
    if deadline is not None and deadline > MAX_DEADLINE_MS:
        raise ValueError(f"{name} must be at most {MAX_DEADLINE_MS} milliseconds; got {deadline}")
    return deadline
