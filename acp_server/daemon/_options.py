"""What the HTTP face needs to know besides the bridge: where to listen, who may call, how much to buffer."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "DaemonOptions", "is_loopback_host"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4170

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


@dataclass(frozen=True)
class DaemonOptions:
    """Settings of one daemon. Invariant (checked here, so no face can skip it): a non-loopback ``host`` has a token.

    ``token`` is a secret: never logged or echoed. ``allow_origins`` empty = no CORS; ``"*"`` = any origin.
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = field(default=None, repr=False)
    max_body_bytes: int = 16 * 1024 * 1024
    allow_origins: tuple[str, ...] = ()
    event_ring_size: int = 4096
    subscriber_queue_size: int = 1024  # frames a subscriber may lag behind before it is dropped
    heartbeat_s: float = 15.0  # an idle event stream gets a comment this often
    stream_idle_timeout_ms: int | None = 120_000  # advertised in /capabilities; None = watchdog off
    shutdown_grace_s: float = 5.0  # how long a graceful shutdown waits for turns and streams to end

    def __post_init__(self) -> None:
        if not self.host.strip():
            raise ValueError("host must not be empty")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be from 0 to 65535; got {self.port}")
        if not self.token and not is_loopback_host(self.host):
            raise ValueError(
                f"refusing to listen on {self.host} (not a loopback address) without a token: "
                "pass --token or set ACP_SERVER_TOKEN"
            )
        for name in ("max_body_bytes", "event_ring_size", "subscriber_queue_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0; got {getattr(self, name)}")
        if not self.heartbeat_s > 0 or not self.shutdown_grace_s > 0:
            raise ValueError("heartbeat_s and shutdown_grace_s must be > 0")
        for origin in self.allow_origins:
            if origin != "*" and not _ORIGIN.match(origin):
                raise ValueError(f"allowed origin must be '*' or scheme://host[:port]; got {origin!r}")

    @property
    def loopback(self) -> bool:
        return is_loopback_host(self.host)
