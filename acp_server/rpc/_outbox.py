"""The one ordered writer queue of a byte-stream connection: messages are encoded once, as NDJSON lines, and leave
in the order they were queued, never interleaved."""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

__all__ = ["Outbox", "encode_json", "encode_line"]

logger = logging.getLogger("acp_server.rpc")


def encode_json(message: Mapping[str, Any]) -> bytes:
    """One JSON-RPC message as compact UTF-8 JSON; always succeeds for a message we built.

    Text UTF-8 cannot carry (a lone surrogate echoed in an id or a method name) is written as a JSON escape; a
    reply whose result cannot be encoded at all (a bug) becomes -32603 for its id, so the request is still answered;
    any other message that cannot be encoded is logged and gives ``b""``.
    """
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message, separators=(",", ":")).encode("ascii")
    except (TypeError, ValueError, RecursionError):
        logger.exception("could not encode an outgoing message")
        if "id" not in message or "method" in message:
            return b""
        error = {"code": -32603, "message": "Internal error", "data": {"errorKind": "internal"}}
        return encode_json({"jsonrpc": "2.0", "id": message["id"], "error": error})


def encode_line(message: Mapping[str, Any]) -> bytes:
    """One NDJSON line (see :func:`encode_json`), newline-terminated; ``b""`` when nothing can be sent."""
    data = encode_json(message)
    return data + b"\n" if data else b""


class Outbox:
    """A FIFO of encoded messages drained by exactly one writer task; the transport of a connection on a byte stream.

    ``put`` is synchronous (replies are written from done-callbacks); ``send`` queues and then waits while more than
    ``high_water`` bytes are queued (backpressure for producers that can wait).
    """

    def __init__(self, high_water: int = 1 << 20) -> None:
        self._queue: deque[bytes] = deque()
        self._queued_bytes = 0
        self._high_water = high_water
        self._wakeup = anyio.Event()
        self._writable = anyio.Event()
        self._writable.set()
        self._empty = anyio.Event()
        self._empty.set()
        self._closed = False

    def put(self, message: Mapping[str, Any]) -> None:
        """Encode and queue a message; never waits."""
        self.put_bytes(encode_line(message))

    async def send(self, message: Mapping[str, Any], origin: str | int | None = None) -> None:
        """Encode and queue a message, then wait while the queue is above its high-water mark."""
        self.put_bytes(encode_line(message))
        await self.wait_writable()

    def put_bytes(self, data: bytes) -> None:
        """Queue already-encoded bytes (one or more whole lines); dropped once closed."""
        if self._closed or not data:
            return
        self._queue.append(data)
        self._queued_bytes += len(data)
        self._wakeup.set()
        if self._empty.is_set():
            self._empty = anyio.Event()
        if self._queued_bytes > self._high_water and self._writable.is_set():
            self._writable = anyio.Event()

    @property
    def writable(self) -> bool:
        """At or below the high-water mark (or closed): producers may go on."""
        return self._writable.is_set()

    async def wait_writable(self) -> None:
        """Return at once below the high-water mark (no checkpoint per message), else wait for the writer."""
        if not self._writable.is_set():
            await self._writable.wait()

    async def wait_empty(self) -> None:
        """Wait until every queued message has been handed to the sink."""
        await self._empty.wait()

    def close(self) -> None:
        """Refuse further messages (the peer is gone); waiters are released."""
        self._closed = True
        self._queue.clear()
        self._queued_bytes = 0
        self._writable.set()
        self._empty.set()
        self._wakeup.set()

    def abandon(self) -> None:
        """As a connection's transport: deliver nothing more (see :meth:`close`)."""
        self.close()

    async def finish(self, grace_s: float) -> None:
        """As a connection's transport: wait up to ``grace_s`` for the writer to hand over what is queued, then
        close."""
        with anyio.move_on_after(grace_s):
            await self.wait_empty()
        self.close()

    async def pump(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        """Hand queued messages to ``send`` in order, batching what is ready; returns after ``close``."""
        while not self._closed:
            if not self._queue:
                self._wakeup = anyio.Event()
                if not self._queue and not self._closed:
                    await self._wakeup.wait()
                continue
            batch = b"".join(self._queue)
            self._queue.clear()
            await send(batch)
            self._queued_bytes = max(0, self._queued_bytes - len(batch))
            if self._queued_bytes <= self._high_water:
                self._writable.set()
            if not self._queue:
                self._empty.set()
