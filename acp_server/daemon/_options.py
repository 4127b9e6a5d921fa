"""What the HTTP face needs to know besides the bridge: where to listen, who may call, how much to buffer."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from ..limits import DEFAULT_FS_REQUEST_TIMEOUT_MS
from ..modes import available_modes
from ..pipeline import DEFAULT_IDLE_TIMEOUT_MS

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "MAX_EVENT_ID", "DaemonOptions", "daemon_modes", "is_loopback_host"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4170
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024
DEFAULT_EVENT_RING_SIZE = 4096
DEFAULT_EVENT_RING_TOTAL_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_CONNECTIONS = 1024
DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 60.0
DEFAULT_QUEUE_BYTES = 1024 * 1024
"""The bytes an event stream's subscriber may have waiting unsent (its queue) before it is dropped."""
MAX_EVENT_ID = 2**53 - 1
"""The largest event id (and ``Last-Event-ID``) there is: exact as a JSON number in every client (JavaScript too)."""

_ORIGIN = re.compile(r"^https?://[^/\s?#]+$")


def is_loopback_host(host: str) -> bool:
    """True for ``localhost`` and loopback literals (127.0.0.0/8, ::1); any other name or address is public."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def daemon_modes(
    *, token: str | None, allow_bypass_permissions: bool = False, sandbox: bool = False
) -> tuple[str, ...]:
    """The modes a daemon's sessions may have — the safe default: without a token only ``read-only`` (anyone on the
    host may call a loopback daemon: it must not edit or run anything); with one ``default``, ``accept-edits`` and
    ``read-only``, and ``bypass-permissions`` only when allowed. Its bridge is built with these (``/acp`` too)."""
    return tuple(
        mode.id for mode in available_modes(allow_bypass=allow_bypass_permissions, token=bool(token), sandbox=sandbox)
    )


@dataclass(frozen=True)
class DaemonOptions:
    """Settings of one daemon. Invariants (checked here, so no face can skip them): the token is stripped and, when
    given, not blank; a non-loopback ``host`` has a token; ``allow_origins`` containing ``"*"`` has a token (else any
    web page could read every session).

    ``token`` is a secret: never logged or echoed. ``allow_origins`` empty = no CORS; ``"*"`` = any origin.

    Exhaustion limits: at most ``max_connections`` open client connections (at the cap a new connection displaces
    the oldest one still waiting for its request headers, else it is refused with 503); request headers must arrive
    within ``header_timeout_s`` of the connection (or of its first byte after a keep-alive), a body within
    ``body_timeout_s`` of its headers; an open response (an SSE stream) has no time limit. The rings of all sessions
    hold at most ``event_ring_total_bytes`` together (the least recently active sessions' oldest events go first). A
    subscriber lagging ``subscriber_queue_size`` frames or ``subscriber_queue_bytes`` bytes is dropped (and reset).
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = field(default=None, repr=False)
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    allow_origins: tuple[str, ...] = ()
    event_ring_size: int = DEFAULT_EVENT_RING_SIZE
    subscriber_queue_size: int = 1024  # frames a subscriber may lag behind before it is dropped
    subscriber_queue_bytes: int = DEFAULT_QUEUE_BYTES  # bytes it may lag (merged frames: every piece) before that
    heartbeat_s: float = 15.0  # an idle event stream gets a comment this often
    stream_idle_timeout_ms: int | None = DEFAULT_IDLE_TIMEOUT_MS  # advertised in /capabilities; None = watchdog off
    shutdown_grace_s: float = 5.0  # how long a graceful shutdown waits for turns and streams to end
    max_connections: int = DEFAULT_MAX_CONNECTIONS  # open client connections (SSE streams included)
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S  # from connect (or a keep-alive's first byte) to the headers
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S  # from the request headers to the end of its body
    event_ring_total_bytes: int = DEFAULT_EVENT_RING_TOTAL_BYTES  # all sessions' replay rings together
    fs_request_timeout_ms: int = DEFAULT_FS_REQUEST_TIMEOUT_MS  # an /acp client's fs/* answer

    def __post_init__(self) -> None:
        if self.token is not None:
            token = self.token.strip()
            if not token:
                raise ValueError("the token must not be empty or blank (--token / ACP_SERVER_TOKEN)")
            object.__setattr__(self, "token", token)
        if not self.host.strip():
            raise ValueError("host must not be empty")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be from 0 to 65535; got {self.port}")
        if not self.token and not is_loopback_host(self.host):
            raise ValueError(
                f"refusing to listen on {self.host} (not a loopback address) without a token: "
                "pass --token or set ACP_SERVER_TOKEN"
            )
        for name in (
            "max_body_bytes",
            "event_ring_size",
            "subscriber_queue_size",
            "subscriber_queue_bytes",
            "max_connections",
            "event_ring_total_bytes",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0; got {getattr(self, name)}")
        for name in ("heartbeat_s", "shutdown_grace_s", "header_timeout_s", "body_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0; got {getattr(self, name)}")
        for origin in self.allow_origins:
            if origin != "*" and not _ORIGIN.match(origin):
                raise ValueError(f"allowed origin must be '*' or scheme://host[:port]; got {origin!r}")
        if "*" in self.allow_origins and not self.token:
            raise ValueError(
                "refusing --allow-origin '*' without a token: any web page could read every session; "
                "pass --token or set ACP_SERVER_TOKEN, or list the origins"
            )

    @property
    def loopback(self) -> bool:
        return is_loopback_host(self.host)
