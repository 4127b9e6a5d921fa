"""The one ``Retry-After`` parser (ground floor: imports nothing of the package), for the SDK and the pipeline.

Rules (RFC 9110 §10.2.3, plus OpenAI's ``retry-after-ms``); every result is seconds ``>= 0``, or None = "no
usable value" (the caller then waits by its own rule):

- **delta-seconds**: ASCII digits only (``1*DIGIT``), surrounding whitespace ignored: ``"5"`` → ``5.0``.
  Anything else that is not a date is ignored (None): a negative (``"-1"``), a fraction (``"0.5"``), an
  exponent, ``"inf"``, a number too large for a float.
- **HTTP date** (any of the three RFC 9110 formats): seconds from ``now`` until then; a date in the past → ``0.0``.
  A date without a zone (asctime, or ``-0000``) is GMT, as RFC 9110 says every HTTP date is.
- **retry-after-ms** (OpenAI; :func:`retry_after_from_headers` only): a non-negative decimal number of
  milliseconds, fractions allowed (``"250"`` → ``0.25``, ``"1.5"`` → ``0.0015``); it wins over ``Retry-After``
  when usable, and is ignored (so ``Retry-After`` is read) when negative or not a number.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime

__all__ = ["parse_retry_after", "retry_after_from_headers"]

_DELTA_SECONDS = re.compile(r"[0-9]+")
_MILLISECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?|\.[0-9]+")


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait for one ``Retry-After`` value (module rules), or None when absent or not usable.

    ``now`` is the wall-clock time (``time.time()``) a date is measured from; the current time if None.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if _DELTA_SECONDS.fullmatch(text):
        return _finite(float(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def retry_after_from_headers(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait according to a response's ``retry-after-ms`` (first) or ``Retry-After`` (module rules).

    ``headers`` should look names up case-insensitively (``httpx.Headers`` does); lower-case names are used.
    """
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None and _MILLISECONDS.fullmatch(raw_ms.strip()):
        seconds = _finite(float(raw_ms) / 1000)
        if seconds is not None:
            return seconds
    return parse_retry_after(headers.get("retry-after"), now=now)
