"""Chat requests as JSON: compact, UTF-8 as is; for a turn whose requests only grow (its tool loop), each message
and each further field encoded once per turn (:class:`RequestEncoder`)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["RequestEncoder", "dumps_json"]


def dumps_json(value: Any) -> bytes:
    """Compact JSON, UTF-8 as is; a lone surrogate (which UTF-8 cannot carry) is sent as its JSON escape."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


class RequestEncoder:
    """The JSON of a turn's requests, re-encoding only what is not the value of the last call (compared by
    identity): a message at the same position, the further fields (``tools`` ...). A tool loop's next request
    encodes its new step, not its history nor its tools again.

    Invariant: what it returns is the JSON of the values given, as the request body writes it; a value is never
    changed once encoded (the turn builds new messages; its tool lists are shared, read-only). Holds one turn's
    values: create one per turn.
    """

    __slots__ = ("_fields", "_fields_json", "_messages", "_parts")

    def __init__(self) -> None:
        self._messages: list[dict[str, Any]] = []
        self._parts: list[bytes] = []
        self._fields: list[tuple[str, Any]] = []
        self._fields_json = b""

    def messages(self, messages: Sequence[dict[str, Any]]) -> bytes:
        """The JSON array of ``messages``."""
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

    def fields(self, fields: Mapping[str, Any]) -> bytes:
        """The JSON object of ``fields``."""
        known = self._fields
        if len(known) != len(fields) or any(
            key != old_key or value is not old_value
            for (key, value), (old_key, old_value) in zip(fields.items(), known, strict=True)
        ):
            self._fields = list(fields.items())
            self._fields_json = dumps_json(dict(fields))
        return self._fields_json
