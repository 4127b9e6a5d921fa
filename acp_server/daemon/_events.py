"""A session's event log: monotonic ids, a bounded replay ring, and bounded fan-out to SSE subscribers.

Invariants:
- ids start at 1 and increase by 1 per published event; ``publish`` never awaits and never blocks on a reader;
- memory is bounded: the ring keeps the last ``ring_size`` frames; each subscriber queues at most ``queue_size``
  frames — one more and it is *dropped* (its stream ends at once; it may reconnect with ``Last-Event-ID``);
- subscribing is atomic: the replay and the live tail meet exactly, no event lost or repeated.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping

import anyio

__all__ = ["EventLog", "Subscription", "encode_frame"]


def encode_frame(event: str, data: Mapping[str, object], event_id: int | None = None) -> bytes:
    """One SSE frame: ``id`` (when given), ``event`` and one compact JSON ``data`` line (JSON strings escape newlines).

    The one SSE encoder of the daemon (event log and ``/acp``). Text that UTF-8 cannot carry (a lone surrogate)
    is sent escaped, so a frame can always be written.
    """
    try:
        payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except UnicodeEncodeError:
        payload = json.dumps(data, separators=(",", ":"), allow_nan=False).encode()
    head = b"" if event_id is None else b"id: %d\n" % event_id
    return head + b"event: " + event.encode() + b"\ndata: " + payload + b"\n\n"


class Subscription:
    """One reader of an :class:`EventLog`: its replay, then live frames, until the log closes or it is dropped."""

    __slots__ = ("_closed", "_dropped", "_log", "_queue", "_queue_size", "_replay", "_wakeup", "dropped_event")

    def __init__(self, log: EventLog, queue_size: int, replay: list[bytes]) -> None:
        self._log: EventLog | None = log
        self._replay = replay  # already in memory (the ring's frames): not held to the cap
        self._queue: deque[bytes] = deque()
        self._queue_size = queue_size
        self._closed = False
        self._dropped = False
        self._wakeup: anyio.Event | None = None
        self.dropped_event = anyio.Event()

    @property
    def dropped(self) -> bool:
        """True once it fell ``queue_size`` frames behind; it receives nothing more."""
        return self._dropped

    async def receive(self) -> list[bytes] | None:
        """Every queued frame, in order (waits while none); ``None`` once ended (log closed and drained, or dropped)."""
        while not self._dropped and not self._replay and not self._queue:
            if self._closed:
                return None
            self._wakeup = wakeup = anyio.Event()
            await wakeup.wait()
        if self._dropped:
            return None
        frames = self._replay + list(self._queue)
        self._replay = []
        self._queue.clear()
        return frames

    def close(self) -> None:
        """Stop receiving (the reader left); idempotent."""
        self._detach()
        self._closed = True
        self._wake()

    # -- driven by the log ----------------------------------------------------------------------------------

    def _push(self, frame: bytes) -> None:
        if len(self._queue) >= self._queue_size:
            self._dropped = True
            self._replay = []
            self._queue.clear()
            self._detach()
            self.dropped_event.set()
        else:
            self._queue.append(frame)
        self._wake()

    def _end(self) -> None:
        self._log = None
        self._closed = True
        self._wake()

    def _detach(self) -> None:
        if self._log is not None:
            self._log._subscribers.discard(self)
            self._log = None

    def _wake(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()
            self._wakeup = None


class EventLog:
    """The events of one session, as ready-to-send SSE frames. Open until :meth:`close`; then readers drain and end."""

    def __init__(self, session_id: str, *, ring_size: int, queue_size: int) -> None:
        self.session_id = session_id
        self._ring: deque[tuple[int, bytes]] = deque(maxlen=ring_size)
        self._queue_size = queue_size
        self._last_id = 0
        self._subscribers: set[Subscription] = set()
        self.closed = False

    @property
    def last_id(self) -> int:
        """The id of the latest event (0 before the first)."""
        return self._last_id

    @property
    def oldest_id(self) -> int:
        """The oldest id the ring still holds (``last_id + 1`` when it holds none)."""
        return self._ring[0][0] if self._ring else self._last_id + 1

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def publish(self, event: str, data: Mapping[str, object]) -> int:
        """Append one event, push it to every subscriber (dropping the ones that are full); return its id."""
        if self.closed:
            raise RuntimeError(f"the event log of session {self.session_id} is closed")
        self._last_id += 1
        frame = encode_frame(event, data, self._last_id)
        self._ring.append((self._last_id, frame))
        for subscriber in list(self._subscribers):
            subscriber._push(frame)
        return self._last_id

    def subscribe(self, last_event_id: int | None = None) -> Subscription:
        """A reader of the events after ``last_event_id`` (None: only new ones).

        When the ring no longer holds them (or the id is unknown), the first frame is ``resync_required``
        (id = the latest event's), then live events follow.
        """
        initial: list[bytes] = []
        if last_event_id is not None and last_event_id != self._last_id:
            if last_event_id > self._last_id or last_event_id + 1 < self.oldest_id:
                data = {
                    "sessionId": self.session_id,
                    "lastEventId": last_event_id,
                    "oldestEventId": self.oldest_id,
                    "latestEventId": self._last_id,
                }
                initial.append(encode_frame("resync_required", data, self._last_id))
            else:
                initial = [frame for event_id, frame in self._ring if event_id > last_event_id]
        subscription = Subscription(self, self._queue_size, initial)
        if self.closed:
            subscription._end()
        else:
            self._subscribers.add(subscription)
        return subscription

    def close(self) -> None:
        """No more events: every subscriber ends once it has read what it was sent. Idempotent."""
        self.closed = True
        subscribers, self._subscribers = self._subscribers, set()
        for subscriber in subscribers:
            subscriber._end()
