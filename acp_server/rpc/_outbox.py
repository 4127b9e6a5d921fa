"""The one ordered writer queue of a connection: messages leave in the order they were queued, never interleaved."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable

import anyio

__all__ = ["Outbox"]


class Outbox:
    """A FIFO of encoded messages drained by exactly one writer task.

    ``put`` is synchronous (pygls writes from plain callbacks); producers that can wait call ``wait_writable`` to
    get backpressure once more than ``high_water`` bytes are queued.
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

    def put(self, data: bytes) -> None:
        if self._closed:
            return
        self._queue.append(data)
        self._queued_bytes += len(data)
        self._wakeup.set()
        if self._empty.is_set():
            self._empty = anyio.Event()
        if self._queued_bytes > self._high_water and self._writable.is_set():
            self._writable = anyio.Event()

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
