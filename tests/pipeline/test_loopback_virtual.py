"""The pipeline with the real openai SDK over real loopback sockets, on trio's virtual clock.

Default policy values (120 s idle, 1 s / 2 s transport retries) run instantly and are asserted exactly; the
loopback model records when each request arrived and when each client disconnected.
"""

from __future__ import annotations

import anyio
import pytest

from acp_server.pipeline import (
    Delta,
    Finished,
    ModelHTTPError,
    ModelStreamContentError,
    ModelStreamTimeoutError,
    ModelTransportError,
    StreamPolicy,
)
from acp_server.provider.offline import (
    Answer,
    ChunksThenSilent,
    ConnectionReset,
    EmptyStream,
    EndWithoutFinish,
    ErrorStatus,
    HangAfterHeaders,
    KeepAliveOnly,
    NonSSE,
    RateLimited,
)

from ._loopback import loopback, run_turn

pytestmark = [
    pytest.mark.anyio,
    # A response closed before the end of its body leaves httpcore2's byte generator to the garbage collector
    # (httpx2's transport stream does not close it); on trio its collection warns (asyncio closes abandoned
    # generators silently). Not the pipeline's generators.
    pytest.mark.filterwarnings("ignore:Async generator .* was garbage collected:ResourceWarning"),
    # Not 0: with real sockets the clock must not jump while loopback I/O is still in the kernel. With 0 it
    # jumped 120 s while a request was in flight (on a loaded 2-CPU machine): epoll(0) saw nothing yet.
    pytest.mark.virtual_time(autojump=0.05),
]

DEFAULTS = StreamPolicy(jitter_source=lambda: 0.5)


async def test_silent_after_200_three_times_fails_as_stream_timeout_with_default_values() -> None:
    async with loopback() as (model, client):
        model.enqueue(HangAfterHeaders(), HangAfterHeaders(), HangAfterHeaders())
        outcome = await run_turn(client, DEFAULTS)
        disconnects = await model.wait_for_disconnects(3)
        t0 = model.requests[0].received_at
        assert [r.received_at - t0 for r in model.requests] == [0.0, 121.0, 243.0]
        assert [(d.request_index, d.at - t0, d.chunks_sent) for d in disconnects] == [
            (0, 120.0, 0),
            (1, 241.0, 0),
            (2, 363.0, 0),
        ]
        assert isinstance(outcome.error, ModelStreamTimeoutError)
        assert outcome.error.details() == {
            "transportCode": "ETIMEDOUT",
            "phase": "before_first_chunk",
            "attempts": 3,
            "chunksReceived": 0,
            "retryable": True,
            "idleMs": 120_000,
            "endpoint": model.base_url,
            "model": "m",
        }
        assert outcome.events == []


async def test_silent_once_then_normal_gives_the_full_answer() -> None:
    async with loopback() as (model, client):
        model.enqueue(HangAfterHeaders(), Answer(text="the full answer", reasoning="thinking first"))
        outcome = await run_turn(client, DEFAULTS)
        assert outcome.error is None
        assert outcome.text == "the full answer"
        assert "".join(d.reasoning for d in outcome.deltas) == "thinking first"
        assert outcome.finished == [Finished("stop")]
        assert [r.received_at - model.requests[0].received_at for r in model.requests] == [0.0, 121.0]
        assert len(model.disconnects) == 1


async def test_five_chunks_then_silent_yields_them_then_fails_after_one_request() -> None:
    async with loopback() as (model, client):
        model.enqueue(ChunksThenSilent(5))
        outcome = await run_turn(client, StreamPolicy(idle_timeout_ms=10_000))
        assert len(outcome.deltas) == 5
        assert isinstance(outcome.error, ModelStreamTimeoutError)
        assert outcome.error.details()["chunksReceived"] == 5
        assert outcome.error.details()["phase"] == "mid_stream"
        assert len(model.requests) == 1
        (disconnect,) = await model.wait_for_disconnects(1)
        assert disconnect.chunks_sent == 5
        assert disconnect.at - model.requests[0].received_at == 10.0


async def test_rate_limited_with_retry_after_1_waits_exactly_one_second() -> None:
    async with loopback() as (model, client):
        model.enqueue(RateLimited(retry_after="1"), Answer(text="ok", reasoning=""))
        outcome = await run_turn(client, DEFAULTS)
        assert outcome.text == "ok"
        assert model.requests[1].received_at - model.requests[0].received_at == 1.0


async def test_keep_alive_comments_only_time_out() -> None:
    async with loopback() as (model, client):
        model.enqueue(KeepAliveOnly(interval_s=1.0))
        outcome = await run_turn(client, StreamPolicy(idle_timeout_ms=5_000, stream_max_retries=0))
        assert isinstance(outcome.error, ModelStreamTimeoutError)
        (disconnect,) = await model.wait_for_disconnects(1)
        assert disconnect.at - model.requests[0].received_at == 5.0


async def test_connection_reset_before_any_chunk_is_retried_after_one_second() -> None:
    async with loopback() as (model, client):
        model.enqueue(ConnectionReset(), Answer(text="ok", reasoning=""))
        outcome = await run_turn(client, DEFAULTS)
        assert outcome.text == "ok"
        assert model.requests[1].received_at - model.requests[0].received_at == 1.0


async def test_server_error_backs_off_then_recovers() -> None:
    async with loopback() as (model, client):
        model.enqueue(ErrorStatus(500), ErrorStatus(503), Answer(text="ok", reasoning=""))
        outcome = await run_turn(client, DEFAULTS)
        assert outcome.text == "ok"
        t0 = model.requests[0].received_at
        assert [r.received_at - t0 for r in model.requests] == [0.0, 1.5, 4.5]


async def test_a_server_that_keeps_failing_is_reported_within_its_six_seconds_of_waits() -> None:
    async with loopback() as (model, client):
        model.enqueue(*[ErrorStatus(500)] * 5)
        started = anyio.current_time()
        outcome = await run_turn(client, DEFAULTS)
        assert isinstance(outcome.error, ModelHTTPError) and outcome.error.retryable
        t0 = model.requests[0].received_at
        assert [r.received_at - t0 for r in model.requests] == [0.0, 1.5, 4.5, 6.0]  # not 24 s of backoff
        assert anyio.current_time() - started < 7


async def test_a_500_that_says_the_request_is_invalid_is_not_retried() -> None:
    async with loopback() as (model, client):
        # what llama-cpp-python's server answers to a null content (the loopback model refuses it the same way)
        messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": []}]
        outcome = await run_turn(client, DEFAULTS, messages=messages)
        assert isinstance(outcome.error, ModelHTTPError)
        assert (outcome.error.status, outcome.error.retryable, len(model.requests)) == (500, False, 1)
        assert "Input should be a valid string" in str(outcome.error)
        assert "the server says the request is invalid: not retried" in str(outcome.error)


async def test_unauthorised_fails_fast() -> None:
    async with loopback() as (model, client):
        model.enqueue(ErrorStatus(401))
        outcome = await run_turn(client, DEFAULTS)
        assert isinstance(outcome.error, ModelHTTPError)
        assert (outcome.error.status, outcome.error.retryable, len(model.requests)) == (401, False, 1)


async def test_non_sse_body_is_quoted_and_not_retried() -> None:
    async with loopback() as (model, client):
        model.enqueue(NonSSE())
        outcome = await run_turn(client, DEFAULTS)
        assert isinstance(outcome.error, ModelStreamContentError)
        assert "<h1>502 Bad Gateway</h1>" in str(outcome.error)
        assert outcome.error.details()["contentType"] == "text/html"
        assert len(model.requests) == 1


async def test_empty_stream_is_retried_once() -> None:
    async with loopback() as (model, client):
        model.enqueue(EmptyStream(), Answer(text="ok", reasoning=""))
        outcome = await run_turn(client, DEFAULTS)
        assert outcome.text == "ok"
        assert model.requests[1].received_at - model.requests[0].received_at == 0.5


async def test_end_without_finish_keeps_the_content_and_fails_as_a_cut_stream() -> None:
    async with loopback() as (model, client):
        model.enqueue(EndWithoutFinish(3), Answer(text="never replayed"))
        outcome = await run_turn(client, DEFAULTS)
        assert len(outcome.deltas) == 3
        assert outcome.finished == []
        assert isinstance(outcome.error, ModelTransportError)
        assert outcome.error.details() == {
            "transportCode": "ECONNRESET",
            "phase": "mid_stream",
            "attempts": 1,
            "chunksReceived": 3,
            "retryable": True,
            "reason": "eof_without_finish",
            "endpoint": model.base_url,
            "model": "m",
        }
        assert len(model.requests) == 1  # what reached the caller is not replayed


async def test_user_cancel_mid_stream_disconnects_at_once() -> None:
    async with loopback() as (model, client):
        model.enqueue(ChunksThenSilent(2))
        with anyio.move_on_after(7):
            await run_turn(client, DEFAULTS)
        (disconnect,) = await model.wait_for_disconnects(1)
        assert disconnect.at - model.requests[0].received_at == 7.0
        assert len(model.requests) == 1


async def test_consumer_stopping_early_disconnects() -> None:
    from contextlib import aclosing

    from acp_server.pipeline import stream_chat

    from ._loopback import REQUEST

    async with loopback() as (model, client):
        model.enqueue(ChunksThenSilent(3))
        async with aclosing(stream_chat(client, REQUEST, DEFAULTS)) as events:
            async for event in events:
                assert isinstance(event, Delta)
                break
        (disconnect,) = await model.wait_for_disconnects(1)
        assert disconnect.at == model.requests[0].received_at
