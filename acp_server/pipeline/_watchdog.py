"""The stream watchdog: an idle timeout (and a lifetime cap) on the raw chunk stream of one request (one raw chunk =
one SSE ``data:`` event: comments and keep-alives are not chunks).

The transport bounds connect and headers, not the gaps between chunks (keep-alive comments even reset its read
timeout). :func:`guarded_stream` adds that bound and synthesizes the ``ETIMEDOUT`` the transport failed to
raise, so a silent stall looks exactly like a read timeout to the retry classification (W3, W8).

How one attempt runs:

- In a per-request :class:`anyio.CancelScope` opened inside the caller's scope: a child of the caller's
  cancellation (W5). The stream is opened (``open_stream()``: the SDK call up to the response headers) and
  read inside it.
- One timer task per attempt. The reader writes a timestamp ("kick") when it starts each raw read and a
  "no read pending" marker when the read returns: one clock read and two float writes per chunk, no scope and
  no task per chunk. The timer sleeps until ``kick + idle`` (or the lifetime deadline), re-arms if the reader
  moved on, else marks the watch fired and cancels the per-request scope, which aborts the pending read and
  tears the HTTP request down. When the attempt ends the reader sets the watch's ``ended`` event and the timer
  returns by itself (it is not cancelled).
- The timer cancels **only while a read is pending**, and the reader checks ``fired`` right after each read,
  before any other checkpoint: the cancellation never lands in the consumer's code between chunks.
- On every exit (end, error, timeout, consumer stopping early, caller cancelling) the stream is closed with
  ``await stream.close()`` (which releases the HTTP response; the iterator's ``aclose()`` need not), shielded
  and bounded by ``close_timeout_ms``; errors while closing are ignored (W7).
- After a fire, whatever the aborted read raised (cancellation, or a transport error from the torn-down
  socket) is dropped (W6); ``checkpoint_if_cancelled()`` runs first, so a caller that is itself cancelled gets
  its own cancellation, never ETIMEDOUT (W4); then :class:`StreamInactivityTimeoutError` or
  :class:`StreamLifetimeExceededError`.
- ``idle <= 0`` and ``lifetime <= 0``: a passthrough (the same read loop, with no timer task and no scope),
  still closing the stream on exit (W1).
- Completion: once the consumer's ``complete()`` says the answer is whole (every choice has its finish reason),
  the remaining reads (a trailing usage chunk, ``[DONE]``) share one ``finish_grace_ms`` deadline, in every mode;
  when it passes, or the stream fails or an idle / lifetime timer fires meanwhile, the stream simply ends: a
  finished answer is never waited for under the idle timer nor turned into an error (only the caller's own
  cancellation still propagates).

Invariant for consumers: iterate in one task and close the generator deterministically
(``contextlib.aclosing`` or run it to the end): the timer's task group lives across the generator's ``yield``.
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Literal, Protocol, TypeVar, cast

import anyio
from anyio.lowlevel import checkpoint_if_cancelled, current_token

from ._exceptions import StreamInactivityTimeoutError, StreamLifetimeExceededError

__all__ = ["ChunkStream", "close_stream", "guarded_stream", "loop_clock"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

logger = logging.getLogger("acp_server.pipeline")


class ChunkStream(Protocol[T_co]):
    """What the watchdog needs of a stream: its chunks and a ``close()`` that releases it; the pipeline's SSE event
    reader (``_events.Events``: one raw chunk per ``data:`` event) is the one production passes."""

    def __aiter__(self) -> AsyncIterator[T_co]: ...

    async def close(self) -> None: ...


def loop_clock() -> Callable[[], float]:
    """The running loop's clock as a cheap callable: the clock of anyio's deadlines (virtual under MockClock).

    ``anyio.current_time()`` costs ~1 µs per call (backend lookup); this is asyncio's ``loop.time`` or trio's
    ``current_clock().current_time``, found once per attempt.
    """
    native = current_token().native_token
    loop_time = getattr(native, "time", None)  # asyncio (and uvloop) event loops
    if callable(loop_time):
        method = getattr(loop_time, "__func__", None)
        if (getattr(method, "__module__", None), getattr(method, "__qualname__", None)) == (
            "asyncio.base_events",
            "BaseEventLoop.time",
        ):
            return time.monotonic  # what an unpatched BaseEventLoop.time() returns, minus a Python call
        return loop_time  # type: ignore[no-any-return]
    trio = sys.modules.get("trio")
    if trio is not None:
        return trio.lowlevel.current_clock().current_time  # type: ignore[no-any-return]
    return anyio.current_time


async def close_stream(stream: ChunkStream[object], timeout_s: float) -> None:
    """``await stream.close()``, shielded from cancellation and bounded by ``timeout_s``; errors only logged."""
    with anyio.move_on_after(timeout_s, shield=True):
        try:
            await stream.close()
        except Exception as exc:  # the abort that matters is done; a failing close must not mask the outcome
            logger.debug("ignoring an error while closing a model stream: %r", exc)


_NO_READ = math.inf
"""``_Watch.kick`` while no read is pending (the consumer holds a chunk): the timer must not cancel then."""


class _Watch:
    """State shared by the reader and the timer of one attempt (one thread, one loop: no locking).

    ``kick`` is when the pending read (or the request) started, or ``_NO_READ``: one float write per read
    start and one per read end is all the reader pays.
    """

    __slots__ = ("ended", "fired", "kick")

    def __init__(self, kick: float) -> None:
        self.kick = kick
        self.fired: Literal["idle", "lifetime"] | None = None
        self.ended = anyio.Event()  # set by the reader when the attempt is over: the timer returns


async def _sleep_until(watch: _Watch, deadline: float) -> None:
    """Sleep until ``deadline`` or the end of the attempt, whichever comes first (ended, the timer just returns: no
    cancel of its task, whose cost anyio adds to every request: it formats the cancelling task's repr)."""
    with anyio.CancelScope(deadline=deadline):
        await watch.ended.wait()


async def _timer(
    watch: _Watch,
    scope: anyio.CancelScope,
    clock: Callable[[], float],
    idle_s: float,
    lifetime_deadline: float,
) -> None:
    """Cancel ``scope`` once a pending read lasted ``idle_s``, or the lifetime deadline passed during one."""
    while not watch.ended.is_set():
        now = clock()
        kick = watch.kick
        if kick == _NO_READ:
            # The consumer holds a chunk: look again one idle period later (a read started meanwhile has a
            # later deadline). The reader checks the lifetime itself when it starts its next read.
            if now >= lifetime_deadline:
                return
            await _sleep_until(watch, min(now + idle_s, lifetime_deadline))
            continue
        idle_deadline = kick + idle_s
        if now < idle_deadline and now < lifetime_deadline:
            await _sleep_until(watch, min(idle_deadline, lifetime_deadline))
            continue
        watch.fired = "idle" if now >= idle_deadline else "lifetime"
        scope.cancel()
        return


def _never() -> bool:
    return False


class _Grace:
    """The reads after the answer was complete: they share one deadline, and any failure just ends the stream."""

    __slots__ = ("deadline", "grace_s")

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self.deadline: float | None = None  # set at the first read after completion

    def started(self, now: float) -> float:
        if self.deadline is None:
            self.deadline = now + self.grace_s
        return self.deadline


_ENDED = object()
"""What ``_grace_read`` returns when the stream is over (end of body, a failure, the grace deadline)."""


async def _grace_read(read: Callable[[], Awaitable[T]], deadline: float) -> T | object:
    if anyio.current_time() >= deadline:  # a grace of 0, or used up: not even a read that would not block
        return _ENDED
    with anyio.CancelScope(deadline=deadline):
        try:
            return await read()
        except StopAsyncIteration:
            pass
        except Exception as exc:  # the answer is complete: a reset or garbage after it changes nothing
            logger.debug("ignoring a model stream failure after the finish reason: %r", exc)
    return _ENDED


class _Watching:
    """The timer of one attempt around the read loop, and what the loop raised (kept here, out of the task group).

    Invariant: ``error`` is what the loop raised past the per-request scope (never wrapped in an ExceptionGroup);
    when neither timer is armed there is no task group, no timer task and no scope (W1: a passthrough).
    """

    __slots__ = ("clock", "error", "idle_s", "lifetime_deadline", "watch")

    def __init__(self, watch: _Watch, clock: Callable[[], float], idle_s: float, lifetime_deadline: float) -> None:
        self.watch = watch
        self.clock = clock
        self.idle_s = idle_s
        self.lifetime_deadline = lifetime_deadline
        self.error: BaseException | None = None

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[None]:
        """The read loop's block: under the timer when one is armed; whatever it raises is kept in ``error``."""
        watch = self.watch
        if self.idle_s == math.inf and self.lifetime_deadline == math.inf:  # W1: passthrough
            try:
                yield
            except BaseException as exc:
                self.error = exc
            return
        async with anyio.create_task_group() as tg:
            try:
                with anyio.CancelScope() as request_scope:  # W5: the per-request scope, child of the caller's
                    tg.start_soon(_timer, watch, request_scope, self.clock, self.idle_s, self.lifetime_deadline)
                    yield
            except BaseException as exc:  # kept out of the task group: never wrapped in an ExceptionGroup
                self.error = exc
            watch.ended.set()  # the timer returns (on its own: a cancel would cost more than the whole timer)


async def guarded_stream(
    open_stream: Callable[[], Awaitable[ChunkStream[T]]],
    *,
    idle_timeout_ms: float,
    max_lifetime_ms: float = 0,
    close_timeout_ms: float = 1_000,
    complete: Callable[[], bool] = _never,
    finish_grace_ms: float = 0,
) -> AsyncGenerator[T, None]:
    """Open a stream with ``open_stream()`` and yield its raw chunks under the watchdog (module docstring).

    The idle clock covers the wait for ``open_stream()`` (the response headers), then each raw chunk; the
    lifetime clock starts with the call. Raises :class:`StreamInactivityTimeoutError` or
    :class:`StreamLifetimeExceededError` (``code == "ETIMEDOUT"``) after closing the stream, unless the caller
    is cancelled: its cancellation then propagates. Errors of ``open_stream()`` and of the stream pass through
    unchanged. The stream returned by ``open_stream()`` is closed on every exit.

    ``complete()`` is asked before each read (the consumer has handled every chunk yielded so far): once it is
    true, reads end by ``finish_grace_ms`` after the first such read and the stream then ends normally, whatever
    happens to it (no timeout, no error).
    """
    close_timeout_s = close_timeout_ms / 1000
    idle_s = idle_timeout_ms / 1000 if idle_timeout_ms > 0 else math.inf
    lifetime_s = max_lifetime_ms / 1000 if max_lifetime_ms > 0 else math.inf
    grace = _Grace(max(finish_grace_ms, 0) / 1000)
    stream: ChunkStream[T] | None = None
    clock = loop_clock()
    started = clock()
    lifetime_deadline = started + lifetime_s
    watch = _Watch(started)
    watching = _Watching(watch, clock, idle_s, lifetime_deadline)
    chunks = 0
    finishing = False  # the answer is complete: what is left are the grace reads
    try:
        async with watching.reading():
            stream = await open_stream()
            read = aiter(stream).__anext__
            while True:  # the one read loop: with no timer armed, no deadline passes and nothing fires
                now = clock()
                finishing = finishing or complete()
                if finishing:
                    if now >= lifetime_deadline:
                        break
                    watch.kick = now
                    try:
                        got = await _grace_read(read, grace.started(now))
                    finally:
                        watch.kick = _NO_READ
                    if got is _ENDED or watch.fired is not None:
                        break
                    chunks += 1
                    yield cast("T", got)
                    continue
                if now >= lifetime_deadline:
                    watch.fired = "lifetime"
                    break
                watch.kick = now
                try:
                    chunk = await read()
                except StopAsyncIteration:
                    break
                finally:
                    watch.kick = _NO_READ
                if watch.fired is not None:  # a chunk raced the timer: the timeout wins
                    break
                chunks += 1
                yield chunk
    finally:
        if stream is not None:
            await close_stream(stream, close_timeout_s)
    if watch.fired is not None:
        # W6: whatever the aborted read raised (cancellation, a transport error) is dropped
        await checkpoint_if_cancelled()  # W4: a cancelled caller gets its cancellation, not ETIMEDOUT
        if finishing:
            return  # the timer fired during the grace reads: the answer was complete all the same
        lifetime_ms = (clock() - started) * 1000
        if watch.fired == "idle":
            raise StreamInactivityTimeoutError(idle_timeout_ms, chunks, lifetime_ms)
        raise StreamLifetimeExceededError(max_lifetime_ms, chunks, lifetime_ms)
    if watching.error is not None:
        raise watching.error
