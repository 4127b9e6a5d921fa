"""The pipeline on asyncio in real time (how production runs), real SDK over loopback, small timeouts.

What trio's virtual clock cannot show: asyncio debug mode is on, and the loop's exception handler must stay
silent (no "exception was never retrieved", no "Task was destroyed but it is pending"); the real sockets are
torn down; the real stall-detection latency. Exact timings are pinned by the virtual-time twins
(``test_loopback_virtual.py``, ``test_stream.py``), not repeated here as real-time bounds.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Iterator
from contextlib import aclosing, contextmanager
from typing import Any

import anyio
import httpx2
import pytest

from acp_server.pipeline import (
    Delta,
    Finished,
    ModelStreamTimeoutError,
    StreamInactivityTimeoutError,
    StreamPolicy,
    run_chat,
    stream_chat,
)
from acp_server.provider.offline import (
    Answer,
    ChunksThenSilent,
    FinishThenHold,
    HangAfterHeaders,
    RateLimited,
    SlowDrip,
)

from ._loopback import REQUEST, loopback, run_turn
from ._mocks import FakeClient, MockStream, chunk, guard_stream

pytestmark = [pytest.mark.anyio, pytest.mark.asyncio_debug]

IDLE_MS = 200
FAST = StreamPolicy(idle_timeout_ms=IDLE_MS, stream_retry_delays_ms=(100, 200), jitter_source=lambda: 0.5)


@contextmanager
def loop_errors() -> Iterator[list[dict[str, Any]]]:
    """Collect whatever reaches the loop's exception handler while the block runs."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    try:
        yield seen
    finally:
        loop.set_exception_handler(previous)


async def test_silent_after_200_is_retried_twice_then_fails_each_request_disconnected() -> None:
    with loop_errors() as errors:
        async with loopback() as (model, client):
            model.enqueue(HangAfterHeaders(), HangAfterHeaders(), HangAfterHeaders())
            outcome = await run_turn(client, FAST)
            disconnects = await model.wait_for_disconnects(3)
            assert isinstance(outcome.error, ModelStreamTimeoutError)
            assert outcome.error.details()["attempts"] == 3
            assert len(model.requests) == 3
            assert [d.request_index for d in disconnects] == [0, 1, 2]  # each real socket torn down
    assert errors == []


async def test_silent_once_then_normal_gives_the_full_answer() -> None:
    with loop_errors() as errors:
        async with loopback() as (model, client):
            model.enqueue(HangAfterHeaders(), Answer(text="all of it", reasoning=""))
            outcome = await run_turn(client, FAST)
            assert outcome.error is None
            assert outcome.text == "all of it"
            assert outcome.finished == [Finished("stop")]
            assert len(model.requests) == 2 and len(model.disconnects) == 1
    assert errors == []


async def test_five_chunks_then_silent_yields_them_then_fails_after_one_request() -> None:
    with loop_errors() as errors:
        async with loopback() as (model, client):
            model.enqueue(ChunksThenSilent(5))
            outcome = await run_turn(client, FAST)
            assert len(outcome.deltas) == 5
            assert isinstance(outcome.error, ModelStreamTimeoutError)
            assert outcome.error.details()["phase"] == "mid_stream"
            (disconnect,) = await model.wait_for_disconnects(1)
            assert disconnect.chunks_sent == 5
            assert len(model.requests) == 1
    assert errors == []


async def test_cancel_during_a_backoff_wait_ends_at_once() -> None:
    with loop_errors() as errors:
        async with loopback() as (model, client):
            model.enqueue(RateLimited(retry_after="30"))
            async with anyio.create_task_group() as tg:
                with anyio.CancelScope() as scope:

                    async def user_cancels() -> None:
                        await model.wait_for_requests(1)
                        await anyio.sleep(0.1)
                        scope.cancel()

                    tg.start_soon(user_cancels)
                    await run_turn(client, FAST)
            assert scope.cancelled_caught
            assert len(model.requests) == 1
    assert errors == []


async def test_cancel_mid_stream_is_seen_by_the_endpoint_at_once() -> None:
    with loop_errors() as errors:
        async with loopback() as (model, client):
            model.enqueue(ChunksThenSilent(2))
            with anyio.move_on_after(0.1):
                await run_turn(client, StreamPolicy(idle_timeout_ms=5_000))
            with anyio.fail_after(10):  # a hang guard: the virtual-time twin pins "at once" exactly
                (disconnect,) = await model.wait_for_disconnects(1)
            assert disconnect.chunks_sent == 2
    assert errors == []


async def test_stall_detection_latency_is_idle_plus_a_few_ms() -> None:
    latencies = []
    async with loopback() as (model, client):
        policy = StreamPolicy(idle_timeout_ms=IDLE_MS, stream_max_retries=0)
        for i in range(5):
            model.enqueue(HangAfterHeaders())
            await run_turn(client, policy)
            (disconnect,) = (await model.wait_for_disconnects(i + 1))[i:]
            latencies.append(disconnect.at - model.requests[i].received_at - IDLE_MS / 1000)
    # never early; how late (≤ 10 ms when idle) is the benchmark's figure, the virtual twins pin the exact time
    assert min(latencies) >= 0, latencies


# --- in-memory doubles on asyncio: the W4 / W6 / W7 edges where asyncio differs from trio ---


async def test_orphaned_read_failure_after_the_abort_is_swallowed_on_asyncio() -> None:
    with loop_errors() as errors:
        stream = MockStream([chunk("a")], on_abort=httpx2.ReadError("torn down"))
        with pytest.raises(StreamInactivityTimeoutError):
            async with aclosing(guard_stream(stream, idle_timeout_ms=50)) as chunks:
                async for _ in chunks:
                    pass
        assert stream.orphan_raised and stream.closed
        gc.collect()
        await anyio.sleep(0.01)
    assert errors == []


async def test_caller_cancelled_after_the_fire_gets_its_cancellation_on_asyncio() -> None:
    with anyio.CancelScope() as parent:
        stream = MockStream([], on_close=parent.cancel)
        async with aclosing(guard_stream(stream, idle_timeout_ms=50)) as chunks:
            async for _ in chunks:
                pass
        pytest.fail("the caller's cancellation must propagate")
    assert parent.cancelled_caught


async def test_caller_cancelled_while_holding_a_chunk_closes_the_request() -> None:
    # Requires closing the generator deterministically (aclosing): its task group spans its yields.
    with loop_errors() as errors:
        client = FakeClient(MockStream([chunk("a"), chunk("b")]))
        with anyio.move_on_after(0.05) as scope:
            async with aclosing(stream_chat(client, REQUEST, FAST)) as events:  # type: ignore[arg-type]
                async for _ in events:
                    await anyio.sleep(10)  # e.g. a slow client write
        assert scope.cancelled_caught
        assert client.streams[0].closed
    assert errors == []


async def test_the_lifetime_cap_closes_the_request_while_the_consumer_is_blocked_on_asyncio() -> None:
    policy = StreamPolicy(max_lifetime_ms=300, stream_max_retries=0)
    blocked = anyio.Event()

    async def never_returns(delta: Delta) -> None:
        blocked.set()
        await anyio.sleep_forever()

    with loop_errors() as seen:
        async with loopback() as (model, client):
            model.enqueue(SlowDrip(interval_s=0.05, text=" ".join(["w"] * 1000)))
            with anyio.fail_after(10), pytest.raises(ModelStreamTimeoutError) as caught:
                await run_chat(client, REQUEST, policy, never_returns)
            with anyio.fail_after(10):
                await model.wait_for_disconnects(1)
        gc.collect()
    assert blocked.is_set()
    assert caught.value.details()["maxLifetimeMs"] == 300
    assert seen == []


async def test_finish_then_a_held_connection_completes_on_asyncio() -> None:
    with loop_errors() as seen:
        async with loopback() as (model, client):
            model.enqueue(FinishThenHold("done"))
            with anyio.fail_after(10):
                outcome = await run_turn(client, StreamPolicy(finish_grace_ms=100))
            with anyio.fail_after(10):
                await model.wait_for_disconnects(1)
        gc.collect()
    assert outcome.error is None and outcome.finished == [Finished("stop")]
    assert seen == []
