"""NDJSON framing: bytes → lines (bounded), and a line → a JSON-RPC message object or the error it deserves.

Nothing here knows about ACP: it checks the JSON-RPC 2.0 envelope only.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ._errors import RpcError

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "OversizedLine",
    "check_envelope",
    "decode_line",
    "iter_lines",
    "lone_surrogate_at",
]


@dataclass(frozen=True, slots=True)
class OversizedLine:
    """A line longer than the cap; its bytes were discarded up to the next newline, but for its first and last
    :data:`EDGE_BYTES` (where a message's ``id`` is, so a response too large to read can still fail its request)."""

    size: int
    head: bytes = field(default=b"", compare=False)
    tail: bytes = field(default=b"", compare=False)


EDGE_BYTES = 256

DEFAULT_MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest line (one JSON-RPC message) read by default: 64 MiB (``--max-message-bytes``)."""


async def iter_lines(receive: Callable[[], Awaitable[bytes]], max_bytes: int) -> AsyncIterator[bytes | OversizedLine]:
    """Yield each newline-terminated line (without the newline); a final unterminated line is yielded at EOF.

    ``receive`` returns b"" at EOF. A line over ``max_bytes`` yields one :class:`OversizedLine` and the reader
    resynchronises at the next newline without ever holding more than ``max_bytes`` of it.
    """
    buffer = bytearray()
    discarding = 0  # > 0 while skipping the rest of an oversized line
    head = b""
    tail = b""
    while True:
        chunk = await receive()
        if not chunk:
            break
        start = 0
        while start < len(chunk):
            newline = chunk.find(b"\n", start)
            end = len(chunk) if newline < 0 else newline
            piece = chunk[start:end]
            if discarding:
                discarding += len(piece)
                tail = (tail + piece)[-EDGE_BYTES:]
            elif len(buffer) + len(piece) > max_bytes:
                discarding = len(buffer) + len(piece)
                whole = bytes(buffer[:EDGE_BYTES]) + piece[:EDGE_BYTES]
                head, tail = whole[:EDGE_BYTES], (bytes(buffer[-EDGE_BYTES:]) + piece)[-EDGE_BYTES:]
                buffer.clear()
            else:
                buffer += piece
            if newline < 0:
                break
            start = newline + 1
            if discarding:
                yield OversizedLine(discarding, head, tail)
                discarding = 0
                head = tail = b""
            else:
                line = bytes(buffer)
                buffer.clear()
                if line.strip():
                    yield line
    if discarding:
        yield OversizedLine(discarding, head, tail)
    elif buffer.strip():
        yield bytes(buffer)


def decode_line(line: bytes) -> Any:
    """Parse one line as JSON; raise -32700 for invalid UTF-8 or invalid JSON."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RpcError.parse_error(f"invalid UTF-8 at byte {exc.start}") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RpcError.parse_error(
            str(exc).split(":")[0] if isinstance(exc, ValueError) else "nesting too deep"
        ) from None


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or isinstance(value, str)


def check_envelope(message: Any) -> tuple[dict[str, Any] | None, RpcError | None, Any]:
    """Return ``(message, None, id)`` for a well-formed JSON-RPC 2.0 object, else ``(None, error, id_or_None)``."""
    if not isinstance(message, dict):
        return None, RpcError.invalid_request(f"expected a JSON object, got {type(message).__name__}"), None
    raw_id = message.get("id")
    reply_id = raw_id if _valid_id(raw_id) else None
    if message.get("jsonrpc") != "2.0":
        return None, RpcError.invalid_request('"jsonrpc" must be "2.0"'), reply_id
    if "id" in message and not _valid_id(raw_id):
        if raw_id is None and "method" not in message:
            pass  # an error response to a message the peer could not parse
        else:
            return None, RpcError.invalid_request('"id" must be a string or an integer'), None
    if "method" in message:
        if not isinstance(message["method"], str):
            return None, RpcError.invalid_request('"method" must be a string'), reply_id
        if "params" in message and not isinstance(message["params"], dict | list):
            return None, RpcError.invalid_request('"params" must be an object or an array'), reply_id
        if "result" in message or "error" in message:
            return None, RpcError.invalid_request("a request cannot carry result or error"), reply_id
        return message, None, reply_id
    if "id" not in message:
        return None, RpcError.invalid_request('missing "method"'), None
    if ("result" in message) == ("error" in message):
        return None, RpcError.invalid_request("a response needs exactly one of result or error"), reply_id
    if "error" in message and not (
        isinstance(message["error"], dict)
        and isinstance(message["error"].get("code"), int)
        and isinstance(message["error"].get("message"), str)
    ):
        return None, RpcError.invalid_request("malformed error object"), reply_id
    return message, None, reply_id


_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate_at(value: Any) -> str | None:
    """Where ``value`` holds a lone UTF-16 surrogate (``"prompt.0.text"``; ``"(root)"``), or None.

    JSON allows ``"\\ud800"`` but UTF-8 cannot carry it: such text is refused at the door (-32602), so it is never
    stored, sent to the model or echoed. ``json.loads`` joins escaped pairs, so every surrogate left is unpaired.
    """
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path or "(root)"
        elif isinstance(item, dict):
            for key, child in item.items():
                where = f"{path}.{key}" if path else str(key)
                if _SURROGATE.search(key):
                    return where
                stack.append((child, where))
        elif isinstance(item, list):
            stack.extend((child, f"{path}.{index}" if path else str(index)) for index, child in enumerate(item))
    return None
