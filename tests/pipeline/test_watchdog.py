"""The watchdog on virtual time (trio MockClock, autojump): W11's seven cases and the extra ones, exact
instants.

``t0`` is the virtual time when the test starts; every assertion names the instant something must happen at.
"""

from __future__ import annotations

from contextlib import aclosing
from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import pytest
import trio
import trio.testing

from acp_server.pipeline import StreamInactivityTimeoutError, StreamLifetimeExceededError
from acp_server.pipeline._watchdog import guarded_stream

from ._mocks import FakeChunk, MockStream, chunk, drip, guard_stream

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


async def consume(
    stream: MockStream, *, idle_ms: float, lifetime_ms: float = 0
) -> list[tuple[float, FakeChunk]]:
    """Read the guarded stream to its end; returns (instant, chunk) pairs. Exceptions propagate."""
    received: list[tuple[float, FakeChunk]] = []
    async with aclosing(guard_stream(stream, idle_timeout_ms=idle_ms, max_lifetime_ms=lifetime_ms)) as chunks:
        async for item in chunks:
            received.append((anyio.current_time(), item))
    return received


def task_count() -> int:
    return len(anyio.get_running_tasks())


# --- W11 ---


async def test_zero_chunk_stall_raises_etimedout_after_idle() -> None:
    t0, tasks = anyio.current_time(), task_count()
    stream = MockStream([])
    with pytest.raises(StreamInactivityTimeoutError) as caught:
        await consume(stream, idle_ms=1_000)
    err = caught.value
    assert anyio.current_time() == t0 + 1.0
    assert err.code == "ETIMEDOUT"
    assert (err.idle_ms, err.chunks_received, err.stream_lifetime_ms, err.phase) == (
        1_000,
        0,
        1_000,
        "before_first_chunk",
    )
    assert str(err) == "No stream activity for 1000ms (inactivity timeout)"
    assert stream.close_calls == [t0 + 1.0]
    assert task_count() == tasks


async def test_stall_after_chunks_passes_them_then_raises() -> None:
    t0 = anyio.current_time()
    stream = MockStream([chunk("a"), 0.25, chunk("b"), 0.5, chunk("c")])
    received: list[tuple[float, FakeChunk]] = []
    with pytest.raises(StreamInactivityTimeoutError) as caught:
        async with aclosing(guard_stream(stream, idle_timeout_ms=1_000)) as chunks:
            async for item in chunks:
                received.append((anyio.current_time(), item))
    assert [t - t0 for t, _ in received] == [0.0, 0.25, 0.75]
    assert anyio.current_time() == t0 + 1.75
    assert caught.value.chunks_received == 3
    assert caught.value.phase == "mid_stream"
    assert caught.value.stream_lifetime_ms == 1_750
    assert stream.close_calls == [t0 + 1.75]


async def test_active_stream_resets_the_timer_and_ends_normally() -> None:
    t0 = anyio.current_time()
    stream = MockStream(drip(20, 0.9), then="end")  # 18 s in all, never 1 s without a chunk
    received = await consume(stream, idle_ms=1_000)
    assert len(received) == 20
    assert anyio.current_time() == pytest.approx(t0 + 18.0)
    assert len(stream.close_calls) == 1


async def test_parent_cancelled_at_the_timeout_instant_gets_its_cancellation() -> None:
    t0 = anyio.current_time()
    stream = MockStream([])
    with anyio.CancelScope(deadline=t0 + 1.0) as parent:
        await consume(stream, idle_ms=1_000)  # would raise ETIMEDOUT at t0 + 1 as well
        pytest.fail("the caller's cancellation must propagate")
    assert parent.cancelled_caught
    assert anyio.current_time() == t0 + 1.0
    assert stream.close_calls == [t0 + 1.0]


async def test_parent_cancelled_after_the_timer_fired_wins_over_etimedout() -> None:
    # The watchdog has fired and is closing the request when the user cancels: W4 says abort, not ETIMEDOUT.
    t0 = anyio.current_time()
    with anyio.CancelScope() as parent:
        stream = MockStream([], on_close=parent.cancel)
        await consume(stream, idle_ms=1_000)
        pytest.fail("the caller's cancellation must propagate")
    assert parent.cancelled_caught
    assert stream.close_calls == [t0 + 1.0]


async def test_disabled_when_zero_or_negative_is_a_passthrough() -> None:
    for idle_ms in (0, -1):
        t0, tasks = anyio.current_time(), task_count()
        stream = MockStream([chunk("a")])
        received: list[FakeChunk] = []
        with anyio.move_on_after(3_600) as scope:
            async with aclosing(guard_stream(stream, idle_timeout_ms=idle_ms, max_lifetime_ms=0)) as chunks:
                async for item in chunks:
                    received.append(item)
                    assert task_count() == tasks  # no timer task
        assert scope.cancelled_caught  # still waiting an hour later: nothing fired
        assert len(received) == 1
        assert anyio.current_time() == t0 + 3_600
        assert stream.close_calls == [t0 + 3_600]  # closed on exit all the same (W7)


async def test_custom_idle_value_is_respected() -> None:
    t0 = anyio.current_time()
    with pytest.raises(StreamInactivityTimeoutError) as caught:
        await consume(MockStream([chunk("a")]), idle_ms=250)
    assert anyio.current_time() == t0 + 0.25  # the configured 250 ms, not the 120 s default
    assert caught.value.idle_ms == 250
    assert str(caught.value) == "No stream activity for 250ms (inactivity timeout)"


async def test_orphaned_read_failure_after_the_abort_is_swallowed() -> None:
    # The torn-down request makes the pending read fail with a transport error: it must not surface (W6).
    t0 = anyio.current_time()
    stream = MockStream([chunk("a")], on_abort=httpx2.ReadError("connection aborted by the watchdog"))
    with pytest.raises(StreamInactivityTimeoutError) as caught:
        await consume(stream, idle_ms=1_000)
    assert stream.orphan_raised
    assert anyio.current_time() == t0 + 1.0
    assert caught.value.__cause__ is None
    assert not isinstance(caught.value.__context__, httpx2.ReadError)


# --- beyond W11 ---


async def test_lifetime_cap_stops_a_drip_fed_stream() -> None:
    t0 = anyio.current_time()
    stream = MockStream(drip(1_000, 0.4))  # a chunk every 0.4 s: the idle timer never fires
    with pytest.raises(StreamLifetimeExceededError) as caught:
        await consume(stream, idle_ms=1_000, lifetime_ms=3_000)
    err = caught.value
    assert anyio.current_time() == t0 + 3.0
    assert err.code == "ETIMEDOUT"
    assert (err.max_lifetime_ms, err.chunks_received, err.phase) == (3_000, 7, "mid_stream")
    assert str(err) == "Stream exceeded its maximum lifetime of 3000ms"
    assert stream.close_calls == [t0 + 3.0]


async def test_lifetime_expiring_while_the_consumer_holds_a_chunk_fires_at_the_next_read() -> None:
    t0 = anyio.current_time()
    stream = MockStream(drip(10, 0.1))
    with pytest.raises(StreamLifetimeExceededError):
        async with aclosing(guard_stream(stream, idle_timeout_ms=1_000, max_lifetime_ms=2_000)) as chunks:
            async for _ in chunks:
                await anyio.sleep(5)  # a slow consumer is not a stalled stream
    assert anyio.current_time() == t0 + 5.1
    assert stream.close_calls == [t0 + 5.1]


async def test_slow_consumer_is_not_an_idle_stream() -> None:
    stream = MockStream(drip(3, 0.1), then="end")
    count = 0
    async with aclosing(guard_stream(stream, idle_timeout_ms=1_000)) as chunks:
        async for _ in chunks:
            count += 1
            await anyio.sleep(10)  # the idle clock only runs while a read is pending
    assert count == 3


async def test_reasoning_only_chunks_keep_the_stream_alive() -> None:
    stream = MockStream(drip(30, 0.99, reasoning=True), then="end")
    received = await consume(stream, idle_ms=1_000)
    assert len(received) == 30
    assert all(c.choices[0].delta.reasoning_content and not c.choices[0].delta.content for _, c in received)


async def test_consumer_that_stops_early_closes_the_stream() -> None:
    t0, tasks = anyio.current_time(), task_count()
    stream = MockStream([chunk("a"), chunk("b"), chunk("c")])
    async with aclosing(guard_stream(stream, idle_timeout_ms=1_000)) as chunks:
        async for _ in chunks:
            break
    assert stream.close_calls == [t0]
    assert task_count() == tasks
    await anyio.sleep(10)  # nothing fires later
    assert len(stream.close_calls) == 1


async def test_stream_errors_pass_through_and_close_the_stream() -> None:
    t0 = anyio.current_time()
    stream = MockStream([chunk("a"), 0.5, httpx2.RemoteProtocolError("peer closed connection")])
    with pytest.raises(httpx2.RemoteProtocolError):
        await consume(stream, idle_ms=1_000)
    assert stream.close_calls == [t0 + 0.5]


async def test_a_close_that_fails_or_hangs_is_bounded_and_ignored() -> None:
    t0 = anyio.current_time()

    class BadClose(MockStream):
        async def close(self) -> None:
            await super().close()
            await anyio.sleep_forever()

    with pytest.raises(StreamInactivityTimeoutError):
        await consume(BadClose([]), idle_ms=1_000)
    assert anyio.current_time() == t0 + 1.0 + 1.0  # close_timeout_ms defaults to 1 s


async def test_caller_cancel_mid_stream_closes_at_once() -> None:
    t0 = anyio.current_time()
    stream = MockStream([chunk("a")])
    with anyio.move_on_after(0.3):
        await consume(stream, idle_ms=1_000)
    assert stream.close_calls == [t0 + 0.3]


async def test_headers_wait_is_covered_by_the_idle_timeout() -> None:
    t0 = anyio.current_time()
    opened = False

    async def never_answers() -> MockStream:
        nonlocal opened
        await anyio.sleep_forever()
        opened = True
        raise AssertionError("unreachable")

    with pytest.raises(StreamInactivityTimeoutError) as caught:
        async with aclosing(guarded_stream(never_answers, idle_timeout_ms=2_000)) as chunks:
            async for _ in chunks:
                pass
    assert anyio.current_time() == t0 + 2.0
    assert caught.value.phase == "before_first_chunk"
    assert not opened


async def test_chunk_arriving_exactly_at_the_deadline_loses_to_the_timer_without_leaking() -> None:
    # Ties are resolved one way or the other, but the consumer never runs inside a cancelled scope.
    stream = MockStream([1.0, chunk("late")])
    outcome: list[str] = []
    try:
        async with aclosing(guard_stream(stream, idle_timeout_ms=1_000)) as chunks:
            async for _ in chunks:
                await anyio.lowlevel.checkpoint()  # the watchdog must never cancel in here
                outcome.append("chunk")
                break
    except StreamInactivityTimeoutError:
        outcome.append("timeout")
    assert outcome in (["chunk"], ["timeout"])


async def test_runs_unchanged_with_trio_native_cancellation() -> None:
    # The per-request scope is a child of whatever scope the caller uses, anyio's or trio's own.
    t0 = anyio.current_time()
    with trio.move_on_after(0.5) as scope:
        await consume(MockStream([]), idle_ms=1_000)
    assert scope.cancelled_caught
    assert anyio.current_time() == t0 + 0.5


# --- completion: the reads after the finish ---


async def _after_finish(
    stream: MockStream, *, idle_ms: float, lifetime_ms: float = 0, grace_ms: float = 1_000
) -> list[float]:
    """Read with ``complete()`` true once a chunk with a finish reason was seen; the instants of the chunks."""
    finished = False
    instants: list[float] = []
    guarded = guarded_stream(
        _ready(stream),
        idle_timeout_ms=idle_ms,
        max_lifetime_ms=lifetime_ms,
        complete=lambda: finished,
        finish_grace_ms=grace_ms,
    )
    async with aclosing(guarded) as chunks:
        async for item in chunks:
            instants.append(anyio.current_time())
            finished = finished or any(c.finish_reason for c in item.choices)
    return instants


def _ready(stream: MockStream) -> Any:
    async def ready() -> MockStream:
        return stream

    return ready


@pytest.mark.parametrize(
    ("idle_ms", "lifetime_ms", "chunks_at", "ended_at"),
    [
        (120_000, 0, [0.2, 0.6], 1.2),  # idle only: the grace (1 s from the first read after the finish) ends it
        (0, 0, [0.2, 0.6], 1.2),  # passthrough: the grace holds there too
        (300, 0, [0.2], 0.5),  # the idle timer fires inside the grace: an end, not a timeout
        (0, 1_000, [0.2, 0.6], 1.0),  # the lifetime passes inside the grace: an end, not a timeout
    ],
)
async def test_a_held_stream_after_the_finish_ends_normally_by_the_grace(
    idle_ms: float, lifetime_ms: float, chunks_at: list[float], ended_at: float
) -> None:
    t0 = anyio.current_time()
    stream = MockStream([0.2, chunk("a", finish="stop"), 0.4, chunk()])  # then a held connection
    instants = await _after_finish(stream, idle_ms=idle_ms, lifetime_ms=lifetime_ms)
    assert [round(t - t0, 6) for t in instants] == chunks_at  # the second: a trailing (usage) chunk
    assert round(anyio.current_time() - t0, 6) == ended_at
    assert stream.close_calls == [anyio.current_time()]


async def test_a_failure_after_the_finish_ends_the_stream_quietly() -> None:
    stream = MockStream([chunk("a", finish="stop"), httpx2.ReadError("reset after the finish")])
    assert len(await _after_finish(stream, idle_ms=1_000)) == 1
    assert stream.closed


async def test_zero_grace_closes_right_after_the_finish() -> None:
    t0 = anyio.current_time()
    stream = MockStream([chunk("a", finish="stop"), chunk("never read")])
    assert len(await _after_finish(stream, idle_ms=1_000, grace_ms=0)) == 1
    assert stream.close_calls == [t0] and stream.reads == 1


async def test_the_callers_cancel_during_the_grace_still_propagates() -> None:
    t0 = anyio.current_time()
    stream = MockStream([chunk("a", finish="stop")])
    with anyio.move_on_after(0.5) as scope:
        await _after_finish(stream, idle_ms=1_000)
    assert scope.cancelled_caught and stream.close_calls == [t0 + 0.5]
