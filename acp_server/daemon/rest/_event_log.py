"""A session's event log: monotonic ids, a bounded replay ring, and bounded fan-out to SSE subscribers.

Invariants:
- ids start at ``first_id`` and increase by 1 per published event; ``publish`` never awaits and never blocks on a
  reader. The daemon starts each attachment of a session (create, resume after a close, a daemon restart) above
  every id that session was ever given, so a ``Last-Event-ID`` names at most one event (see ``_daemon.py``);
- memory is bounded: the ring keeps the last ``ring_size`` frames, and all the rings sharing a
  :class:`RingBudget` hold at most its ``max_bytes`` together; each subscriber queues at most ``queue_size``
  entries (a frame, or merged pieces of at most ``coalesce_chars`` of text) holding at most ``queue_bytes``
  together (every piece of a merged entry counted) — one entry or one byte more and it is *dropped* (its stream
  ends at once; it may reconnect with ``Last-Event-ID``). A frame alone in the queue is never dropped for its size;
- a cursor is served exactly or not at all: replay when the ring holds every event after it, else
  ``resync_required``; subscribing is atomic: the replay and the live tail meet exactly, no event lost or repeated.

Coalescing (a subscriber slower than the model): an event published with :meth:`EventLog.publish_text` (a piece
of a longer text: a prompt's message or thought chunk) joins the previous one *waiting unsent in that subscriber's
queue* when both have the same event name and key, up to ``coalesce_chars`` of text; the one frame sent carries the
id of the last event it holds, so ``Last-Event-ID`` stays exact (a reconnect with it gets the events after the last
piece, none twice, none missing). Order never changes and nothing is dropped. A subscriber that keeps up (waiting
for a frame when the event comes, or woken and not yet run) gets one frame per event; the ring always keeps one
frame per event, so replay is exact. A merged entry counts as one against ``queue_size`` (merging makes drops
rarer), and with every piece's text against ``queue_bytes`` (merging never hides what a subscriber holds).
"""

from __future__ import annotations

import json
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Mapping
from typing import TypeAlias

import anyio

from ...domain import PlanUpdated, ToolCallStarted, ToolCallUpdated, TurnEvent
from .._options import DEFAULT_QUEUE_BYTES
from .._sse_frames import encode_frame

__all__ = [
    "DEFAULT_COALESCE_CHARS",
    "FRAME_OVERHEAD_BYTES",
    "EventLog",
    "RingBudget",
    "Subscription",
    "TextData",
    "update_event_name",
]

DEFAULT_COALESCE_CHARS = 8192
"""How much text consecutive pieces may merge into while they wait for a slow subscriber (as the stdio face)."""

_JOIN_PARTS_AT = 64
"""A merged entry joins its parts into one string when it holds this many (bounds its memory per character)."""

TextData: TypeAlias = Callable[[str], Mapping[str, object]]
"""The data of a text piece's event, carrying a given text (the piece's own, or the joined text of merged pieces)."""

FRAME_OVERHEAD_BYTES = 128
"""What a ring entry costs besides its frame's bytes: the bytes header (33), the tuple (56), the int (32), the deque
slot (measured on CPython 3.11)."""


def update_event_name(event: TurnEvent) -> str:
    """The SSE event a turn event's ``session/update`` is published as: ``tool_call`` for a call's updates,
    ``plan`` for the whole plan, ``session_update`` for the rest (the data is the same ACP update either way)."""
    if isinstance(event, ToolCallStarted | ToolCallUpdated):
        return "tool_call"
    return "plan" if isinstance(event, PlanUpdated) else "session_update"


_encode_string = json.encoder.encode_basestring  # what encode_frame writes for a str (C-accelerated)
_MARK = "\ue000acp-server text\ue001"  # a piece's text while the frame around it is encoded (see _TextFrames)


class _TextFrames:
    """The frames of one text's pieces (an event name and a :data:`TextData` of one key): everything around the text
    encoded once, so a piece costs the JSON of its text alone — the bytes :func:`encode_frame` would give."""

    __slots__ = ("after", "before")

    def __init__(self, event: str, data: TextData) -> None:
        parts = encode_frame(event, data(_MARK)).split(_encode_string(_MARK).encode())
        self.before: bytes | None = parts[0] if len(parts) == 2 else None
        self.after = parts[-1]  # before is None: the mark elsewhere too (in an id): no template

    def frame(self, text: str, event_id: int) -> bytes | None:
        """The piece's frame, or None when it needs :func:`encode_frame` (a lone surrogate, no template)."""
        if self.before is None:
            return None
        try:
            encoded = _encode_string(text).encode()
        except UnicodeEncodeError:
            return None
        return b"id: %d\n" % event_id + self.before + encoded + self.after


class _Piece:
    """A queued frame that is a piece of a longer text: what a later piece of the same key may merge into."""

    __slots__ = ("data", "event", "key", "size", "text")

    def __init__(self, event: str, key: Hashable, text: str, data: TextData) -> None:
        self.event = event
        self.key = key
        self.text = text
        self.data = data
        self.size = len(text.encode(errors="surrogatepass"))  # what it adds to a merged frame (its UTF-8 bytes)


class _Merged:
    """Consecutive pieces that waited together in one queue: their texts, encoded once as one frame with the id of
    the last. Memory: at most ``coalesce_chars`` of text in at most ``_JOIN_PARTS_AT`` strings."""

    __slots__ = ("last_id", "parts", "piece", "size")

    def __init__(self, piece: _Piece, text: str, event_id: int) -> None:
        self.piece = piece
        self.parts = [piece.text, text]
        self.size = len(piece.text) + len(text)
        self.last_id = event_id

    def add(self, text: str, event_id: int) -> None:
        if len(self.parts) >= _JOIN_PARTS_AT:
            self.parts = ["".join(self.parts)]
        self.parts.append(text)
        self.size += len(text)
        self.last_id = event_id

    def frame(self) -> bytes:
        piece = self.piece
        return encode_frame(piece.event, piece.data("".join(self.parts)), self.last_id)


_Queued: TypeAlias = "bytes | _Merged"


class Subscription:
    """One reader of an :class:`EventLog`: its replay, then live frames, until the log closes or it is dropped.

    Its queue holds at most ``queue_size`` entries: frames as published, or text pieces merged while they waited
    (see the module's "Coalescing"), of at most ``queue_bytes`` together (``queued_bytes``: a frame's length, a
    merged piece's text).
    """

    __slots__ = (
        "_bytes",
        "_closed",
        "_coalesce",
        "_dropped",
        "_log",
        "_nudged",
        "_queue",
        "_queue_bytes",
        "_queue_size",
        "_replay",
        "_tail",
        "_wakeup",
        "_woken",
        "dropped_event",
        "on_drop",
    )

    def __init__(
        self,
        log: EventLog,
        queue_size: int,
        replay: list[bytes],
        coalesce_chars: int = DEFAULT_COALESCE_CHARS,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
    ) -> None:
        self._log: EventLog | None = log
        self._replay = replay  # already in memory (the ring's frames): not held to the cap
        self._queue: deque[_Queued] = deque()
        self._queue_size = queue_size
        self._queue_bytes = queue_bytes
        self._bytes = 0  # what the queue's entries hold (see queued_bytes)
        self._coalesce = coalesce_chars
        self._tail: _Piece | _Merged | None = None  # the queue's last entry, when a piece may merge into it
        self._closed = False
        self._dropped = False
        self._nudged = False
        self._wakeup: anyio.Event | None = None
        self._woken = False  # the reader was waiting, was woken, and has not taken its frames yet
        self.dropped_event = anyio.Event()
        self.on_drop: Callable[[], None] | None = None  # called once, as it is dropped (its stream ends at once)

    @property
    def dropped(self) -> bool:
        """True once it fell ``queue_size`` entries or ``queue_bytes`` behind; it receives nothing more."""
        return self._dropped

    @property
    def queued(self) -> int:
        """Entries waiting in the queue (the replay not included)."""
        return len(self._queue)

    @property
    def queued_bytes(self) -> int:
        """Bytes waiting in the queue: each frame's length, each merged piece's text (UTF-8)."""
        return self._bytes

    def ready(self) -> bool:
        """Whether :meth:`receive` would return at once (frames waiting, or the end)."""
        return self._dropped or self._closed or bool(self._replay) or bool(self._queue)

    async def receive(self) -> list[bytes] | None:
        """Every queued frame, in order (waits while none); ``None`` once ended (log closed and drained, or dropped);
        ``[]`` when :meth:`nudge` ended the wait first."""
        while not self._dropped and not self._replay and not self._queue:
            if self._closed:
                return None
            if self._nudged:
                self._nudged = self._woken = False
                return []
            self._wakeup = wakeup = anyio.Event()
            await wakeup.wait()
        if self._dropped:
            return None
        self._nudged = False
        frames = self._replay
        self._replay = []
        frames.extend(entry.frame() if isinstance(entry, _Merged) else entry for entry in self._queue)
        self._queue.clear()
        self._bytes = 0
        self._tail = None
        self._woken = False
        return frames

    def nudge(self) -> None:
        """End a :meth:`receive` that waits for a frame, with ``[]`` (the writer's cue for a heartbeat); no-op when
        none waits."""
        if self._wakeup is not None:
            self._nudged = True
            self._wake()

    def close(self) -> None:
        """Stop receiving (the reader left); idempotent."""
        self._detach()
        self._closed = True
        self._wake()

    # -- driven by the log ----------------------------------------------------------------------------------

    def _push(self, frame: bytes, event_id: int, piece: _Piece | None) -> None:
        queue = self._queue
        if piece is not None and self._tail is not None and not self._woken and self._merge(piece, event_id):
            # the reader is busy sending: it gets this piece with the ones before it, in one frame
            self._bytes += piece.size
            if self._bytes > self._queue_bytes:
                self._drop()
            return
        if len(queue) >= self._queue_size or (queue and self._bytes + len(frame) > self._queue_bytes):
            self._drop()
        else:
            queue.append(frame)
            self._bytes += len(frame)
            self._tail = piece
        self._wake()

    def _drop(self) -> None:
        """It lags too far: it holds nothing more and receives nothing more; its stream ends (and is reset)."""
        self._dropped = True
        self._replay = []
        self._queue.clear()
        self._bytes = 0
        self._tail = None
        self._detach()
        self.dropped_event.set()
        self._wake()
        if self.on_drop is not None:
            self.on_drop()

    def _merge(self, piece: _Piece, event_id: int) -> bool:
        """Join ``piece`` to the queue's last entry when it is a piece of the same text and the sum fits."""
        tail = self._tail
        if type(tail) is _Merged:
            first = tail.piece
            if first.key == piece.key and first.event == piece.event and tail.size + len(piece.text) <= self._coalesce:
                tail.add(piece.text, event_id)
                return True
            return False
        assert type(tail) is _Piece
        if tail.key == piece.key and tail.event == piece.event and len(tail.text) + len(piece.text) <= self._coalesce:
            self._queue[-1] = self._tail = _Merged(tail, piece.text, event_id)
            return True
        return False

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
            self._woken = True  # it keeps up: what comes before it runs is not merged


class RingBudget:
    """The bytes the replay rings of one daemon hold together, at most ``max_bytes``.

    Invariant: ``used`` is the sum of every member ring's frames (+ :data:`FRAME_OVERHEAD_BYTES` each) and, after
    each :meth:`EventLog.publish`, at most ``max_bytes`` — unless the newest frame alone is larger (it is kept, so
    a live reconnect never misses the latest event). Eviction takes the oldest frame of the least recently
    published-to ring first: idle sessions give their history back before active ones lose any.
    """

    def __init__(self, max_bytes: int) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0; got {max_bytes}")
        self.max_bytes = max_bytes
        self.used = 0
        self._recent: OrderedDict[EventLog, None] = OrderedDict()  # least recently published-to first

    @property
    def ring_count(self) -> int:
        """Rings holding at least one frame."""
        return len(self._recent)

    def _charged(self, log: EventLog, size: int) -> None:
        self.used += size
        self._recent[log] = None
        self._recent.move_to_end(log)
        while self.used > self.max_bytes:
            victim = next(iter(self._recent))
            if victim is log and len(log._ring) <= 1:
                return  # only the newest frame is left: keep it
            victim._evict_oldest()

    def _released(self, log: EventLog, size: int) -> None:
        self.used -= size
        if not log._ring:
            self._recent.pop(log, None)


class EventLog:
    """The events of one session, as ready-to-send SSE frames. Open until :meth:`close`; then readers drain and end.

    ``coalesce_chars``: the most text one merged entry of a subscriber holds; ``queue_size`` and ``queue_bytes``:
    how far (entries, bytes) a subscriber may lag before it is dropped. ``first_id``: the id of its first
    event. ``previous_id``: the last id the same session had in its previous attachment, when known: a reader that
    saw it has missed nothing while this ring still holds its first event.
    """

    def __init__(
        self,
        session_id: str,
        *,
        ring_size: int,
        queue_size: int,
        queue_bytes: int = DEFAULT_QUEUE_BYTES,
        coalesce_chars: int = DEFAULT_COALESCE_CHARS,
        first_id: int = 1,
        previous_id: int | None = None,
        budget: RingBudget | None = None,
    ) -> None:
        if first_id < 1 or (previous_id is not None and previous_id >= first_id):
            raise ValueError(f"first_id must be >= 1 and > previous_id; got {first_id}, {previous_id}")
        self.session_id = session_id
        self.first_id = first_id
        self._ring: deque[tuple[int, bytes]] = deque()
        self._ring_size = ring_size
        self._budget = budget if budget is not None else RingBudget(2**62)
        self._queue_size = queue_size
        self._queue_bytes = queue_bytes
        self._coalesce = coalesce_chars
        self._last_id = first_id - 1
        # The greatest id after which the ring can replay everything (besides the ids it holds): the previous
        # attachment's last id (or the one before first_id), then each evicted id.
        self._horizon = previous_id if previous_id is not None else first_id - 1
        self._subscribers: set[Subscription] = set()
        self._texts: dict[tuple[str, Hashable], _TextFrames] = {}  # the frames of the latest texts' pieces
        self.closed = False

    @property
    def last_id(self) -> int:
        """The id of the latest event (``first_id - 1`` before the first)."""
        return self._last_id

    @property
    def published(self) -> int:
        """How many events were published (in this attachment)."""
        return self._last_id - self.first_id + 1

    @property
    def oldest_id(self) -> int:
        """The oldest id the ring still holds (``last_id + 1`` when it holds none)."""
        return self._ring[0][0] if self._ring else self._last_id + 1

    @property
    def ring_bytes(self) -> int:
        """What this ring costs against its budget."""
        return sum(len(frame) + FRAME_OVERHEAD_BYTES for _, frame in self._ring)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def publish(self, event: str, data: Mapping[str, object]) -> int:
        """Append one event, push it to every subscriber (dropping the ones that are full); return its id."""
        event_id = self._next_id()
        return self._append(event_id, encode_frame(event, data, event_id), None)

    def publish_text(self, event: str, key: Hashable, text: str, data: TextData) -> int:
        """:meth:`publish` ``data(text)``, an event that is a piece of a longer text named ``key`` (``data`` the same
        for every piece of it): for a subscriber that lags, it merges with the pieces of the same event and key
        waiting before it (see "Coalescing")."""
        if (frames := self._texts.get((event, key))) is None:
            if len(self._texts) >= 4:  # the texts of the running prompt (its message, its thought) stay
                self._texts.clear()
            frames = self._texts[(event, key)] = _TextFrames(event, data)
        event_id = self._next_id()
        frame = frames.frame(text, event_id) or encode_frame(event, data(text), event_id)
        return self._append(event_id, frame, _Piece(event, key, text, data))

    def _next_id(self) -> int:
        if self.closed:
            raise RuntimeError(f"the event log of session {self.session_id} is closed")
        self._last_id += 1
        return self._last_id

    def _append(self, event_id: int, frame: bytes, piece: _Piece | None) -> int:
        self._ring.append((event_id, frame))
        if len(self._ring) > self._ring_size:
            self._evict_oldest()
        self._budget._charged(self, len(frame) + FRAME_OVERHEAD_BYTES)
        for subscriber in list(self._subscribers):
            subscriber._push(frame, event_id, piece)
        return event_id

    def _evict_oldest(self) -> None:
        event_id, frame = self._ring.popleft()
        self._horizon = event_id
        self._budget._released(self, len(frame) + FRAME_OVERHEAD_BYTES)

    def _replayable(self, last_event_id: int) -> bool:
        """True when the ring holds every event after ``last_event_id`` (0: "from the start of this attachment")."""
        if last_event_id == 0 and self._horizon < self.first_id:
            return True  # nothing of this attachment evicted yet
        return last_event_id == self._horizon or self.oldest_id <= last_event_id <= self._last_id

    def subscribe(self, last_event_id: int | None = None) -> Subscription:
        """A reader of the events after ``last_event_id`` (None: only new ones; 0: all this attachment's).

        When the ring no longer holds them all, or the id is not one this attachment can place (issued before it,
        never issued), the first frame is ``resync_required`` (id = the latest event's), then live events follow.
        """
        initial: list[bytes] = []
        if last_event_id is not None and last_event_id != self._last_id:
            if not self._replayable(last_event_id):
                data = {
                    "sessionId": self.session_id,
                    "lastEventId": last_event_id,
                    "oldestEventId": self.oldest_id,
                    "latestEventId": self._last_id,
                }
                initial.append(encode_frame("resync_required", data, self._last_id))
            else:
                initial = [frame for event_id, frame in self._ring if event_id > last_event_id]
        subscription = Subscription(self, self._queue_size, initial, self._coalesce, self._queue_bytes)
        if self.closed:
            subscription._end()
        else:
            self._subscribers.add(subscription)
        return subscription

    def close(self) -> None:
        """No more events: every subscriber ends once it has read what it was sent; the ring is given back to the
        budget (no one can subscribe to a closed log's session any more). Idempotent."""
        self.closed = True
        subscribers, self._subscribers = self._subscribers, set()
        for subscriber in subscribers:
            subscriber._end()
        while self._ring:
            self._evict_oldest()
