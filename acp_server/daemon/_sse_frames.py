"""The daemon's one SSE encoder, shared by the REST face's event streams and ``/acp``'s Streamable HTTP streams."""

from __future__ import annotations

import json
from collections.abc import Mapping

__all__ = ["HEARTBEAT", "encode_frame"]

HEARTBEAT = b": keep-alive\n\n"
"""A comment line: keeps an idle stream's proxies and clients from timing it out; readers ignore it."""

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ASCII_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def encode_frame(event: str, data: Mapping[str, object], event_id: int | None = None) -> bytes:
    """One SSE frame: ``id`` (when given), ``event`` and one compact JSON ``data`` line (JSON strings escape newlines).

    The one SSE encoder of the daemon (event log and ``/acp``). Text that UTF-8 cannot carry (a lone surrogate)
    is sent escaped, so a frame can always be written.
    """
    try:
        payload = _ENCODER.encode(data).encode()
    except UnicodeEncodeError:
        payload = _ASCII_ENCODER.encode(data).encode()
    head = b"" if event_id is None else b"id: %d\n" % event_id
    return head + b"event: " + event.encode() + b"\ndata: " + payload + b"\n\n"
