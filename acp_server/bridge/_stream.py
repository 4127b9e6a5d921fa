"""A prompt's event stream: what its turn sends, in order, then exactly one :class:`~acp_server.domain.PromptEnded`."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TypeAlias

import anyio

from ..domain import PromptEnded, PromptEvent, TextChunk, ThoughtChunk, TurnEvent

__all__ = ["DEFAULT_COALESCE_BYTES", "DEFAULT_STREAM_CAPACITY", "PromptStream"]

DEFAULT_STREAM_CAPACITY = 256
"""Turn events a prompt's stream buffers before its turn waits for the reader."""

DEFAULT_COALESCE_BYTES = 8192
"""How much text consecutive chunks of one kind may merge into while they wait for a slow reader."""


class _Merged:
    """Consecutive chunks of one kind and one message that waited together: their texts, joined once when the
    reader takes them."""

    __slots__ = ("kind", "message_id", "parts", "size")

    def __init__(self, first: TextChunk | ThoughtChunk, second: TextChunk | ThoughtChunk) -> None:
        self.kind = type(first)
        self.message_id = first.message_id
        self.parts = [first.text, second.text]
        self.size = len(first.text) + len(second.text)

    def take(self) -> TextChunk | ThoughtChunk:
        return self.kind("".join(self.parts), message_id=self.message_id)


_Buffered: TypeAlias = "PromptEvent | _Merged"


class PromptStream:
    """One writer (the prompt's turn, through :meth:`send`; the bridge, through :meth:`end`) and one reader.

    Invariants: the reader gets every event sent, in order, then the one ``PromptEnded``, then the iteration stops;
    at most ``capacity`` turn events wait in the buffer, beyond that :meth:`send` waits for the reader (the turn runs
    at its reader's pace); :meth:`end` never waits (the outcome always fits). A reader that leaves (:meth:`close`)
    drops what is buffered, and later sends return at once.

    Coalescing (``coalesce_bytes`` > 0): a text or thought chunk sent while the previous event still waits, of the
    same kind, and the reader is busy elsewhere (not waiting for an event) joins it, up to ``coalesce_bytes`` of
    text, so a reader slower than the model gets fewer, larger updates. Nothing is dropped or reordered; a reader
    that keeps up (waiting in :meth:`receive` when the chunk comes) gets every chunk as it was sent. Memory stays
    bounded: at most ``capacity`` entries of at most ``coalesce_bytes`` each.

    The reader is either a task awaiting :meth:`receive`, or a synchronous sink (:meth:`deliver_to`) that the writer
    calls with each event as it sends it — no task, no buffer, no wait in between (a sink never blocks).
    """

    __slots__ = (
        "_buffer",
        "_capacity",
        "_closed",
        "_coalesce",
        "_delivered",
        "_ended",
        "_idle",
        "_reader",
        "_reader_woken",
        "_reading",
        "_release",
        "_sink",
        "_writer",
    )

    def __init__(self, capacity: int = DEFAULT_STREAM_CAPACITY, coalesce_bytes: int = 0) -> None:
        if capacity < 1:
            raise ValueError("a prompt stream needs a capacity of at least 1")
        self._buffer: deque[_Buffered] = deque()
        self._capacity = capacity
        self._coalesce = coalesce_bytes
        self._ended: PromptEnded | None = None
        self._delivered = False  # the reader has taken the PromptEnded
        self._reading = False  # a reader has asked for an event
        self._release: anyio.Event | None = None  # set when the reader has its outcome or left
        self._closed = False
        self._reader: anyio.Event | None = None  # set when the reader may proceed
        self._reader_woken = False  # the reader was waiting for an event and has not run since it was woken
        self._writer: anyio.Event | None = None  # set when the writer may proceed
        self._idle: anyio.Event | None = None  # set when the reader has handled everything and waits for more
        self._sink: Callable[[PromptEvent], None] | None = None  # the reader, when it is a sink (deliver_to)

    @property
    def ended(self) -> PromptEnded | None:
        """The outcome, once the bridge has settled the prompt (whether or not the reader has seen it)."""
        return self._ended

    @property
    def buffered(self) -> int:
        """Events waiting for the reader (the outcome included)."""
        return len(self._buffer)

    # -- writer side -------------------------------------------------------------------------------------------

    async def send(self, event: TurnEvent) -> None:
        """Queue one turn event; waits while ``capacity`` are unread. No-op once the stream ended or was closed."""
        while len(self._buffer) >= self._capacity and not self._closed and self._ended is None:
            self._writer = waiter = anyio.Event()
            await waiter.wait()
        if self._closed or self._ended is not None:
            return
        if self._sink is not None:
            self._sink(event)
            return
        if self._coalesce and self._buffer and not self._reader_woken and self._joined(event):
            return  # the reader is busy elsewhere (a slow client): it will get both at once
        self._buffer.append(event)
        self._wake_reader()

    def _joined(self, event: TurnEvent) -> bool:
        """Join ``event`` to the waiting last entry if both are text (or both thought) of one message and the sum
        fits."""
        if not isinstance(event, TextChunk | ThoughtChunk):
            return False
        last = self._buffer[-1]
        if isinstance(last, _Merged):
            joins = last.kind is type(event) and last.message_id == event.message_id
            if joins and last.size + len(event.text) <= self._coalesce:
                last.parts.append(event.text)
                last.size += len(event.text)
                return True
            return False
        if not isinstance(last, TextChunk | ThoughtChunk) or type(last) is not type(event):
            return False
        if last.message_id == event.message_id and len(last.text) + len(event.text) <= self._coalesce:
            self._buffer[-1] = _Merged(last, event)
            return True
        return False

    def end(self, ended: PromptEnded) -> None:
        """Queue the outcome (over the capacity if need be); only the first call counts."""
        if self._ended is not None:
            return
        self._ended = ended
        if self._sink is not None:
            self._hand(ended)
        elif not self._closed:
            self._buffer.append(ended)
        self._wake_reader()
        self._wake_writer()
        self._wake_idle()

    @property
    def released(self) -> bool:
        """Whether the stream no longer holds its session's FIFO: its reader has taken the outcome, or left, or no
        reader ever asked for an event (a caller that only awaits the result holds nothing)."""
        return not self._reading or self._delivered or self._closed

    async def wait_released(self) -> None:
        """Wait until :attr:`released`: the next prompt's events must not overtake this one's on a shared wire."""
        while not self.released:
            self._release = waiter = anyio.Event()
            await waiter.wait()

    @property
    def delivered(self) -> bool:
        """Whether the reader has handled every event sent so far: it took them all and waits for the next (or the
        stream ended or was closed)."""
        waiting = self._reader is not None or self._sink is not None
        return self._closed or self._ended is not None or (not self._buffer and waiting)

    async def wait_delivered(self) -> None:
        """Wait until :attr:`delivered`. A message that must follow the prompt's events on the wire (a request to the
        client about the tool call just announced) waits for this, so it never overtakes them. Several may wait at
        once (subagents running side by side): they share one event."""
        while not self.delivered:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    # -- reader side -------------------------------------------------------------------------------------------

    async def receive(self) -> PromptEvent:
        """The next event; ``anyio.EndOfStream`` after the outcome, ``anyio.ClosedResourceError`` once closed."""
        self._reading = True
        while not self._buffer:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._delivered:
                raise anyio.EndOfStream
            self._reader = waiter = anyio.Event()
            self._wake_idle()
            await waiter.wait()
        entry = self._buffer.popleft()
        self._reader_woken = False
        event = entry.take() if isinstance(entry, _Merged) else entry
        if isinstance(event, PromptEnded):
            self._delivered = True
            self._wake_release()
        elif len(self._buffer) < self._capacity:
            self._wake_writer()
        return event

    def deliver_to(self, sink: Callable[[PromptEvent], None]) -> None:
        """Make ``sink`` the reader (instead of :meth:`receive`): what is buffered is handed to it now, then each event
        as it is sent, in the sender's task, the outcome last. ``sink`` must not block or await (the writer never
        waits for it); it may :meth:`close` the stream."""
        self._reading = True
        self._sink = sink
        while self._buffer and self._sink is not None:
            entry = self._buffer.popleft()
            self._hand(entry.take() if isinstance(entry, _Merged) else entry)
        self._wake_writer()
        self._wake_idle()

    def _hand(self, event: PromptEvent) -> None:
        """Give ``event`` to the sink (the caller checked there is one)."""
        sink = self._sink
        assert sink is not None
        if isinstance(event, PromptEnded):
            self._delivered = True
            self._sink = None
            self._wake_release()
        sink(event)

    def close(self) -> None:
        """The reader leaves: drop what is buffered; the writer never waits again. Idempotent."""
        self._closed = True
        self._sink = None
        self._buffer.clear()
        self._wake_writer()
        self._wake_reader()
        self._wake_release()
        self._wake_idle()

    def __aiter__(self) -> PromptStream:
        return self

    async def __anext__(self) -> PromptEvent:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    # -- internals -----------------------------------------------------------------------------------------------

    def _wake_reader(self) -> None:
        if self._reader is not None:
            self._reader.set()
            self._reader = None
            self._reader_woken = True  # it keeps up: what comes before it runs is not joined

    def _wake_idle(self) -> None:
        if self._idle is not None:
            self._idle.set()
            self._idle = None

    def _wake_release(self) -> None:
        if self._release is not None:
            self._release.set()
            self._release = None

    def _wake_writer(self) -> None:
        if self._writer is not None:
            self._writer.set()
            self._writer = None

    def __repr__(self) -> str:
        state = "closed" if self._closed else "ended" if self._ended is not None else "open"
        return f"<PromptStream {state} buffered={len(self._buffer)}/{self._capacity}>"
