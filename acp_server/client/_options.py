"""A :class:`DaemonClient`'s settings: their defaults and validation, and the timeouts derived from them.

Invariant: every value checked here is checked before the client opens anything; a bad one is a ``ValueError``
naming it, and nothing is created.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import httpx2

__all__ = [
    "DEFAULT_RECONNECT_DELAYS",
    "DEFAULT_TIMEOUT",
    "EVENTS_READ_TIMEOUT_S",
    "TOKEN_ENV",
    "Timeouts",
    "base_url_of",
    "headers_for",
    "reconnect_delays_of",
]

TOKEN_ENV = "ACP_SERVER_TOKEN"
"""Where the bearer token comes from when ``token`` is not given."""

DEFAULT_TIMEOUT = httpx2.Timeout(30.0, connect=5.0)
"""Of every request; event streams read with at least :data:`EVENTS_READ_TIMEOUT_S`, a ``wait=True`` prompt with
no read timeout (a turn lasts as long as it lasts; the daemon's deadline bounds it)."""

EVENTS_READ_TIMEOUT_S = 60.0
"""Read timeout of an event stream: four of the daemon's 15 s heartbeats; a silent stream past it reconnects."""

DEFAULT_RECONNECT_DELAYS: tuple[float, ...] = (0.0, 0.5, 2.0)
"""Seconds before the 1st, 2nd, 3rd reconnect in a row that brings no event; then the stream gives up."""


def reconnect_delays_of(reconnect_delays: Sequence[float]) -> tuple[float, ...]:
    """The delays as a tuple; each must be a finite number of seconds >= 0 (a bool is not one)."""
    delays = tuple(reconnect_delays)
    if any(isinstance(d, bool) or not isinstance(d, int | float) or not 0 <= d < math.inf for d in delays):
        raise ValueError(f"reconnect_delays must be finite numbers of seconds >= 0; got {reconnect_delays!r}")
    return delays


def base_url_of(base_url: str) -> str:
    """The daemon's URL without a trailing slash; only ``http://`` and ``https://`` URLs with a host are accepted."""
    url = httpx2.URL(base_url)
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"base_url must be an http:// or https:// URL; got {base_url!r}")
    return str(url).rstrip("/")


def headers_for(token: str | None) -> dict[str, str]:
    """Every request's headers: JSON accepted, and the bearer token (``token``, else ``$ACP_SERVER_TOKEN``; none
    when empty)."""
    token = token if token is not None else os.environ.get(TOKEN_ENV)
    headers = {"Accept": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The three timeouts of a client, all from one setting: requests use it as given, event streams read for at
    least :data:`EVENTS_READ_TIMEOUT_S`, a blocking (``wait=True``) prompt reads without a timeout."""

    request: httpx2.Timeout
    events: httpx2.Timeout
    wait: httpx2.Timeout

    @classmethod
    def of(cls, value: float | httpx2.Timeout | None) -> Timeouts:
        """The three, derived from the client's ``timeout`` argument."""
        request = value if isinstance(value, httpx2.Timeout) else httpx2.Timeout(value)
        read = request.read
        events = httpx2.Timeout(
            connect=request.connect,
            read=None if read is None else max(read, EVENTS_READ_TIMEOUT_S),
            write=request.write,
            pool=request.pool,
        )
        wait = httpx2.Timeout(connect=request.connect, read=None, write=request.write, pool=request.pool)
        return cls(request, events, wait)
