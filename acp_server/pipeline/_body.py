"""Chat messages as request JSON: compact, UTF-8 as is; for a conversation that only grows between requests (a
turn's tool loop), each message encoded once per turn (:class:`MessageEncoder`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["MessageEncoder", "dumps_json"]


def dumps_json(value: Any) -> bytes:
    """Compact JSON, UTF-8 as is; a lone surrogate (which UTF-8 cannot carry) is sent as its JSON escape."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


class MessageEncoder:
    """The JSON array of a list of chat messages, re-encoding only the messages that are not the ones of the last
    call at the same position (compared by identity): a turn's next request encodes its new step, not its history.

    Invariant: :meth:`encode` returns the JSON of ``messages`` as the request body writes it; a message dict is never
    changed once encoded (the turn builds new ones). Holds one turn's messages: create one per turn.
    """

    __slots__ = ("_messages", "_parts")

    def __init__(self) -> None:
        self._messages: list[dict[str, Any]] = []
        self._parts: list[bytes] = []

    def encode(self, messages: Sequence[dict[str, Any]]) -> bytes:
        kept = 0
        for old, new in zip(self._messages, messages, strict=False):
            if old is not new:
                break
            kept += 1
        del self._messages[kept:], self._parts[kept:]
        for message in messages[kept:]:
            self._parts.append(dumps_json(message))
            self._messages.append(message)
        return b"[" + b",".join(self._parts) + b"]"
