"""``stream_chat`` with an in-memory SDK double on virtual time: retries, backoff, content checks, final
errors.

Every wait is asserted at its exact virtual instant (``client.calls`` records when each request started).
"""

from __future__ import annotations

import errno
import logging
import socket
from contextlib import aclosing
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import anyio
import httpx2
import openai
import pytest

from acp_server.pipeline import (
    ChatRequest,
    Delta,
    Finished,
    ModelHTTPError,
    ModelProviderError,
    ModelRateLimitedError,
    ModelStreamContentError,
    ModelStreamTimeoutError,
    ModelTransportError,
    RetryEvent,
    StreamEvent,
    StreamPolicy,
    ToolCallFragment,
    stream_chat,
)

from ._mocks import (
    FakeClient,
    MockStream,
    chunk,
    connection_error,
    drip,
    role_chunk,
    status_error,
    timeout_error,
)

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

REQUEST = ChatRequest(model="m", messages=[{"role": "user", "content": "hi"}])
WHERE = {"endpoint": "http://model.test:80/v1", "model": "m"}
"""What every final error says it concerns: ``FakeClient``'s base URL and the request's model."""
NO_JITTER = StreamPolicy(idle_timeout_ms=1_000, jitter_source=lambda: 0.5)


def answer(*words: str, finish: str = "stop") -> MockStream:
    steps: list[Any] = [chunk(w) for w in words]
    steps.append(chunk(finish=finish))
    return MockStream(steps, then="end")


def hang() -> MockStream:
    return MockStream([])


async def run(client: FakeClient, policy: StreamPolicy = NO_JITTER) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    async with aclosing(stream_chat(client, REQUEST, policy)) as stream:  # type: ignore[arg-type]
        async for event in stream:
            events.append(event)
    return events


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, Delta))


def offsets(client: FakeClient, t0: float) -> list[float]:
    return [round(t - t0, 6) for t in client.calls]


# --- the happy path ---


async def test_yields_deltas_then_exactly_one_finished() -> None:
    client = FakeClient(answer("Hello ", "world"))
    events = await run(client)
    assert events == [Delta(text="Hello "), Delta(text="world"), Finished("stop")]
    assert client.kwargs == [{"model": "m", "messages": REQUEST.messages, "stream": True}]
    assert client.streams[0].closed


async def test_reasoning_is_a_delta_of_its_own_kind() -> None:
    stream = MockStream([chunk(reasoning="think"), chunk("answer"), chunk(finish="length")], then="end")
    events = await run(FakeClient(stream))
    assert events == [Delta(reasoning="think"), Delta(text="answer"), Finished("length")]


async def test_reasoning_only_chunks_keep_a_long_thinking_model_alive() -> None:
    t0 = anyio.current_time()
    steps = [*drip(50, 0.99, reasoning=True), chunk("done"), chunk(finish="stop")]
    events = await run(FakeClient(MockStream(steps, then="end")))
    assert len([e for e in events if isinstance(e, Delta) and e.reasoning]) == 50
    assert events[-1] == Finished("stop")
    assert anyio.current_time() == pytest.approx(t0 + 49.5)


async def test_end_without_finish_after_content_is_a_cut_stream_not_retried() -> None:
    client = FakeClient(MockStream([chunk("a"), chunk("b")], then="end"), answer("never"))
    events: list[StreamEvent] = []
    with pytest.raises(ModelTransportError) as caught:
        async with aclosing(stream_chat(client, REQUEST, NO_JITTER)) as stream:  # type: ignore[arg-type]
            async for event in stream:
                events.append(event)
    assert events == [Delta(text="a"), Delta(text="b")]  # kept, and no Finished
    assert caught.value.details() == {
        "transportCode": "ECONNRESET",
        "phase": "mid_stream",
        "attempts": 1,
        "chunksReceived": 2,
        "retryable": True,
        "reason": "eof_without_finish",
        **WHERE,
    }
    assert "without a finish reason" in str(caught.value)
    assert len(client.calls) == 1


async def test_consumer_that_stops_early_closes_the_request() -> None:
    client = FakeClient(MockStream([chunk("a"), chunk("b")]))
    async with aclosing(stream_chat(client, REQUEST, NO_JITTER)) as stream:  # type: ignore[arg-type]
        async for _ in stream:
            break
    assert client.streams[0].closed
    await anyio.sleep(60)
    assert len(client.calls) == 1


# --- W9: stream transport retry ---


async def test_silent_stream_is_retried_twice_after_1s_then_2s_then_fails_as_stream_timeout() -> None:
    t0 = anyio.current_time()
    client = FakeClient(hang(), hang(), hang())
    with pytest.raises(ModelStreamTimeoutError) as caught:
        await run(client)
    assert offsets(client, t0) == [0.0, 2.0, 5.0]  # idle 1 s + wait 1 s, idle 1 s + wait 2 s
    assert anyio.current_time() == t0 + 6.0
    assert [s.close_calls for s in client.streams] == [[t0 + 1], [t0 + 3], [t0 + 6]]
    err = caught.value
    assert err.error_kind == "model_stream_timeout"
    assert err.details() == {
        "transportCode": "ETIMEDOUT",
        "phase": "before_first_chunk",
        "attempts": 3,
        "chunksReceived": 0,
        "retryable": True,
        "idleMs": 1_000,
        **WHERE,
    }
    assert "No stream activity for 1000ms" in str(err) and "3 attempts" in str(err)


async def test_silent_once_then_normal_recovers_with_the_full_answer_and_logs_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    t0 = anyio.current_time()
    client = FakeClient(hang(), answer("full ", "answer"))
    with caplog.at_level(logging.INFO, logger="acp_server.pipeline"):
        events = await run(client)
    assert offsets(client, t0) == [0.0, 2.0]
    assert events == [Delta(text="full "), Delta(text="answer"), Finished("stop")]
    messages = [r.getMessage() for r in caplog.records if r.name == "acp_server.pipeline"]
    assert any("attempt 1 failed" in m and "stream_transport retry 1" in m for m in messages)
    assert any("recovered on attempt 2" in m for m in messages)


async def test_stall_after_yielded_chunks_surfaces_without_replay() -> None:
    t0 = anyio.current_time()
    client = FakeClient(MockStream([chunk("a"), chunk("b")]), answer("never"))
    events: list[StreamEvent] = []
    with pytest.raises(ModelStreamTimeoutError) as caught:
        async with aclosing(stream_chat(client, REQUEST, NO_JITTER)) as stream:  # type: ignore[arg-type]
            async for event in stream:
                events.append(event)
    assert events == [Delta(text="a"), Delta(text="b")]
    assert offsets(client, t0) == [0.0]
    assert caught.value.details() == {
        "transportCode": "ETIMEDOUT",
        "phase": "mid_stream",
        "attempts": 1,
        "chunksReceived": 2,
        "retryable": True,
        "idleMs": 1_000,
        **WHERE,
    }


async def test_chunks_that_yielded_nothing_do_not_prevent_the_retry() -> None:
    t0 = anyio.current_time()
    client = FakeClient(MockStream([role_chunk()]), answer("ok"))
    assert text_of(await run(client)) == "ok"
    assert offsets(client, t0) == [0.0, 2.0]


async def test_connection_reset_before_any_chunk_is_retried_after_1s() -> None:
    t0 = anyio.current_time()
    reset = connection_error(httpx2.ReadError("[Errno 104] Connection reset by peer"))
    client = FakeClient(MockStream([reset]), answer("ok"))
    assert text_of(await run(client)) == "ok"
    assert offsets(client, t0) == [0.0, 1.0]


async def test_reset_after_a_yielded_chunk_is_a_transport_error() -> None:
    reset = connection_error(httpx2.RemoteProtocolError("peer closed connection"))
    client = FakeClient(MockStream([chunk("a"), reset]))
    with pytest.raises(ModelTransportError) as caught:
        await run(client)
    assert caught.value.details() == {
        "transportCode": "ECONNRESET",
        "phase": "mid_stream",
        "attempts": 1,
        "chunksReceived": 1,
        "retryable": True,
        **WHERE,
    }


async def test_lifetime_cap_is_a_stream_timeout_too() -> None:
    policy = StreamPolicy(idle_timeout_ms=1_000, max_lifetime_ms=2_000, stream_max_retries=0)
    client = FakeClient(MockStream(drip(100, 0.6)))  # chunks at 0.6, 1.2, 1.8, (2.4)
    with pytest.raises(ModelStreamTimeoutError) as caught:
        await run(client, policy)
    assert caught.value.details()["maxLifetimeMs"] == 2_000
    message = str(caught.value)
    assert "exceeded its maximum lifetime of 2000ms" in message and "stalled" not in message
    assert caught.value.chunks_received == 3


# --- backoff: 429 / 5xx / other transport codes ---


async def test_429_retry_after_seconds_is_honoured() -> None:
    t0 = anyio.current_time()
    client = FakeClient(status_error(429, headers={"retry-after": "1"}), answer("ok"))
    assert text_of(await run(client)) == "ok"
    assert offsets(client, t0) == [0.0, 1.0]


async def test_429_retry_after_http_date_and_ms_forms() -> None:
    t0 = anyio.current_time()
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    client = FakeClient(
        status_error(429, headers={"retry-after": when}),
        status_error(429, headers={"retry-after-ms": "250", "retry-after": "9"}),
        answer("ok"),
    )
    assert text_of(await run(client)) == "ok"
    first_wait = client.calls[1] - t0
    assert 28 <= first_wait <= 31  # an HTTP date: whole seconds, against the wall clock
    assert client.calls[2] - client.calls[1] == pytest.approx(0.25)  # retry-after-ms wins


async def test_a_retry_after_longer_than_the_cap_is_not_waited_and_reported_as_given() -> None:
    t0 = anyio.current_time()
    client = FakeClient(status_error(429, headers={"retry-after": "99999"}), answer("never"))
    with pytest.raises(ModelRateLimitedError) as caught:
        await run(client)
    assert anyio.current_time() == t0 and len(client.calls) == 1  # failed fast: no 5-minute wait
    assert caught.value.details()["retryAfterMs"] == 99_999_000  # the provider's time, not the cap
    assert "retry after 99999s, longer than this turn may still wait (at most 300s" in str(caught.value)


async def test_retry_after_waits_of_a_turn_add_up_to_the_cap_at_most() -> None:
    t0 = anyio.current_time()
    limited = [status_error(429, headers={"retry-after": "120"}) for _ in range(3)]
    client = FakeClient(*limited, answer("never"))
    with pytest.raises(ModelRateLimitedError) as caught:
        await run(client)
    assert offsets(client, t0) == [0.0, 120.0, 240.0]  # a third 120 s wait would pass 300 s in all
    assert caught.value.details()["attempts"] == 3
    assert caught.value.details()["retryAfterMs"] == 120_000


async def test_a_retry_after_ending_after_the_deadline_fails_fast_with_the_providers_time() -> None:
    t0 = anyio.current_time()
    client = FakeClient(status_error(429, headers={"retry-after": "200"}), answer("never"))
    with anyio.fail_after(60), pytest.raises(ModelRateLimitedError) as caught:
        await run(client)
    assert anyio.current_time() == t0
    assert caught.value.details()["retryAfterMs"] == 200_000
    assert "would end after the deadline" in str(caught.value)


async def test_a_503_retry_after_is_in_the_error_too() -> None:
    client = FakeClient(status_error(503, headers={"retry-after": "99999"}), answer("never"))
    with pytest.raises(ModelHTTPError) as caught:
        await run(client)
    assert len(client.calls) == 1
    assert (caught.value.details()["status"], caught.value.details()["retryAfterMs"]) == (503, 99_999_000)


async def test_5xx_backoff_is_exponential_from_1_5s_within_six_seconds_of_waits() -> None:
    t0 = anyio.current_time()
    client = FakeClient(status_error(500), status_error(502), status_error(503), answer("ok"))
    assert text_of(await run(client)) == "ok"
    assert offsets(client, t0) == [0.0, 1.5, 4.5, 6.0]  # the third wait (6 s) is cut to what is left of 6 s


async def test_backoff_jitter_stays_within_30_percent_and_is_injectable() -> None:
    t0 = anyio.current_time()
    low = StreamPolicy(idle_timeout_ms=1_000, jitter_source=lambda: 0.0)
    client = FakeClient(status_error(500), status_error(500), answer("ok"))
    await run(client, low)
    assert offsets(client, t0) == pytest.approx([0.0, 1.05, 1.05 + 2.1])


async def test_backoff_is_capped_at_30s_and_bounded_to_4_retries() -> None:
    t0 = anyio.current_time()
    policy = StreamPolicy(
        idle_timeout_ms=1_000, jitter_source=lambda: 0.5, backoff_initial_ms=10_000, server_error_wait_ms=300_000
    )
    client = FakeClient(*(status_error(503) for _ in range(5)))
    with pytest.raises(ModelHTTPError) as caught:
        await run(client, policy)
    assert offsets(client, t0) == [0.0, 10.0, 30.0, 60.0, 90.0]
    assert caught.value.details() == {
        "status": 503,
        "phase": "request",
        "attempts": 5,
        "chunksReceived": 0,
        "retryable": True,
        **WHERE,
    }


async def test_rate_limit_exhausted_is_model_rate_limited() -> None:
    client = FakeClient(*(status_error(429, headers={"retry-after": "2"}) for _ in range(5)))
    with pytest.raises(ModelRateLimitedError) as caught:
        await run(client)
    assert caught.value.details() == {
        "status": 429,
        "phase": "request",
        "attempts": 5,
        "chunksReceived": 0,
        "retryable": True,
        "retryAfterMs": 2_000,
        **WHERE,
    }


async def test_connection_refused_is_retried_once_quickly() -> None:
    t0 = anyio.current_time()
    refused = connection_error(httpx2.ConnectError("[Errno 111] Connection refused"))
    client = FakeClient(refused, answer("ok"))
    await run(client)
    assert offsets(client, t0) == [0.0, 0.25]


@pytest.mark.parametrize(
    ("cause", "code", "hint"),
    [
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "ECONNREFUSED", "nothing is listening"),
        (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "ENOTFOUND", "does not resolve"),
    ],
)
async def test_nothing_listening_or_no_such_host_fails_fast_naming_the_endpoint(
    cause: OSError, code: str, hint: str
) -> None:
    t0 = anyio.current_time()

    def failure() -> openai.APIConnectionError:
        try:
            raise httpx2.ConnectError(str(cause)) from cause
        except httpx2.ConnectError as exc:
            return connection_error(exc)

    client = FakeClient(failure(), failure(), answer("never"))
    with pytest.raises(ModelTransportError) as caught:
        await run(client)
    assert offsets(client, t0) == [0.0, 0.25]  # one quick retry, not the 1.5 s, 3 s, 6 s ... backoff
    assert anyio.current_time() == t0 + 0.25
    err = caught.value
    assert err.details() == {
        "transportCode": code,
        "phase": "request",
        "attempts": 2,
        "chunksReceived": 0,
        "retryable": True,
        **WHERE,
    }
    where = "http://model.test:80/v1 (model 'm')"
    assert str(err).startswith(f"The connection to the model endpoint {where} failed ({code}")
    assert hint in str(err)


async def test_reset_and_5xx_keep_their_retries() -> None:
    t0 = anyio.current_time()
    reset = connection_error(httpx2.ReadError("[Errno 104] Connection reset by peer"))
    client = FakeClient(reset, reset, status_error(503), status_error(503), answer("ok"))
    assert text_of(await run(client)) == "ok"
    assert offsets(client, t0) == [0.0, 1.0, 3.0, 4.5, 7.5]  # resets: 1 s, 2 s; then 5xx backoff: 1.5 s, 3 s


async def test_sdk_timeout_before_the_stream_is_a_stream_transport_retry() -> None:
    t0 = anyio.current_time()
    client = FakeClient(timeout_error(), answer("ok"))
    await run(client)
    assert offsets(client, t0) == [0.0, 1.0]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_4xx_fails_fast(status: int) -> None:
    client = FakeClient(status_error(status), answer("never"))
    with pytest.raises(ModelHTTPError) as caught:
        await run(client)
    assert len(client.calls) == 1
    assert caught.value.status == status and caught.value.retryable is False
    assert caught.value.details()["attempts"] == 1


@pytest.mark.parametrize(
    ("base_url", "endpoint", "hint"),
    [
        ("http://localhost:11434/", "http://localhost:11434", "; the base URL's path has no /v1"),
        # the path is right: the 404 is something else (an unknown model)
        ("http://localhost:11434/v1/", "http://localhost:11434/v1", None),
    ],
)
async def test_404_says_when_the_base_url_lacks_v1(base_url: str, endpoint: str, hint: str | None) -> None:
    client = FakeClient(status_error(404, message="Not Found"))
    client.base_url = base_url
    with pytest.raises(ModelHTTPError) as caught:
        await run(client)
    message = str(caught.value)
    assert message.startswith(f"The model endpoint {endpoint} (model 'm') answered HTTP 404: ")
    if hint is None:
        assert "--base-url" not in message
    else:
        assert f"{hint}, under which OpenAI-compatible servers serve their API: try --base-url {endpoint}/v1" in message


async def test_api_key_never_appears_in_messages() -> None:
    key = "sk-secret-123456"
    client = FakeClient(status_error(401, message=f"Incorrect API key provided: {key}"), api_key=key)
    with pytest.raises(ModelHTTPError) as caught:
        await run(client)
    assert key not in str(caught.value)
    assert key not in repr(caught.value.details())
    assert "***" in str(caught.value)


# --- cancellation and deadlines ---


async def cancel_at(scope: anyio.CancelScope, when: float) -> None:
    await anyio.sleep_until(when)
    scope.cancel()


async def run_cancelled_at(client: FakeClient, when: float) -> anyio.CancelScope:
    """Run the turn under a scope the "user" cancels at ``when`` (a cancel, not a deadline)."""
    async with anyio.create_task_group() as tg:
        with anyio.CancelScope() as scope:
            tg.start_soon(cancel_at, scope, when)
            await run(client)
        tg.cancel_scope.cancel()
    return scope


async def test_cancel_during_a_backoff_wait_ends_at_once() -> None:
    t0 = anyio.current_time()
    client = FakeClient(status_error(429, headers={"retry-after": "10"}), answer("never"))
    scope = await run_cancelled_at(client, t0 + 3)
    assert scope.cancelled_caught
    assert anyio.current_time() == t0 + 3
    assert len(client.calls) == 1


async def test_cancel_during_a_stream_transport_wait_ends_at_once() -> None:
    t0 = anyio.current_time()
    client = FakeClient(hang(), answer("never"))
    scope = await run_cancelled_at(client, t0 + 1.5)
    assert scope.cancelled_caught
    assert anyio.current_time() == t0 + 1.5
    assert len(client.calls) == 1
    assert client.streams[0].close_calls == [t0 + 1.0]


async def test_a_wait_that_would_outlast_the_deadline_is_not_started() -> None:
    t0 = anyio.current_time()
    client = FakeClient(status_error(429, headers={"retry-after": "10"}), answer("never"))
    with anyio.fail_after(5), pytest.raises(ModelRateLimitedError):
        await run(client)
    assert anyio.current_time() == t0


async def test_cancel_while_waiting_for_headers_propagates_and_does_not_retry() -> None:
    t0 = anyio.current_time()
    client = FakeClient(30.0, answer("late"))
    with anyio.move_on_after(0.5) as scope:
        await run(client, StreamPolicy(idle_timeout_ms=120_000))
    assert scope.cancelled_caught and anyio.current_time() == t0 + 0.5
    assert len(client.calls) == 1


async def test_headers_that_never_come_time_out_like_a_silent_stream() -> None:
    t0 = anyio.current_time()
    client = FakeClient(3600.0, answer("late"), answer("ok"))
    assert text_of(await run(client)) == "ok"
    assert offsets(client, t0) == [0.0, 2.0]


# --- content retry and non-SSE bodies ---


async def test_empty_stream_is_retried_once_then_fails() -> None:
    t0 = anyio.current_time()
    client = FakeClient(MockStream([], then="end"), MockStream([], then="end"), answer("never"))
    with pytest.raises(ModelStreamContentError) as caught:
        await run(client)
    assert offsets(client, t0) == [0.0, 0.5]
    assert caught.value.details() == {
        "phase": "before_first_chunk",
        "attempts": 2,
        "chunksReceived": 0,
        "retryable": True,
        "reason": "empty_stream",
        **WHERE,
    }


async def test_a_cut_stream_that_yielded_nothing_is_retried_like_a_reset() -> None:
    t0 = anyio.current_time()
    client = FakeClient(MockStream([role_chunk()], then="end"), answer("ok"))
    assert text_of(await run(client)) == "ok"
    assert offsets(client, t0) == [0.0, 1.0]  # the stream-transport delay: a cut stream is a reset


async def test_reasoning_without_answer_or_finish_is_cut_and_not_replayed() -> None:
    client = FakeClient(MockStream([chunk(reasoning="hmm")], then="end"), answer("never"))
    with pytest.raises(ModelTransportError) as caught:
        await run(client)
    assert len(client.calls) == 1
    assert caught.value.details()["reason"] == "eof_without_finish"


async def test_non_sse_body_is_a_clear_non_retryable_error_quoting_the_first_bytes() -> None:
    page = b"<html><body><h1>502 Bad Gateway</h1></body></html>" * 20
    stream = MockStream([], content_type="text/html; charset=utf-8", body=page)
    client = FakeClient(stream, answer("never"))
    with pytest.raises(ModelStreamContentError) as caught:
        await run(client)
    err = caught.value
    assert len(client.calls) == 1 and stream.closed
    assert "<html><body><h1>502 Bad Gateway</h1>" in str(err)
    assert "text/html" in str(err)
    assert err.details() == {
        "phase": "before_first_chunk",
        "attempts": 1,
        "chunksReceived": 0,
        "retryable": False,
        "reason": "non_sse",
        "contentType": "text/html; charset=utf-8",
        **WHERE,
    }


async def test_missing_content_type_is_tolerated() -> None:
    stream = MockStream([chunk("ok"), chunk(finish="stop")], then="end", content_type=None)
    assert text_of(await run(FakeClient(stream))) == "ok"


# --- other failures ---


async def test_error_event_inside_the_stream_is_a_provider_error() -> None:
    in_stream = openai.APIError("The server had an error", httpx2.Request("POST", "http://x"), body=None)
    client = FakeClient(MockStream([in_stream]), answer("never"))
    with pytest.raises(ModelProviderError) as caught:
        await run(client)
    assert len(client.calls) == 1
    assert caught.value.error_kind == "model_provider_error"


async def test_an_error_event_is_the_providers_message_and_nothing_else_is_read() -> None:
    event = {"error": {"message": "overloaded, try later", "type": "server_error"}}
    stream = MockStream([event, chunk("never seen"), chunk(finish="stop")], then="end")
    client = FakeClient(stream, answer("never"))
    with pytest.raises(ModelProviderError) as caught:
        await run(client)
    assert "overloaded, try later" in str(caught.value)
    assert len(client.calls) == 1 and stream.closed


@pytest.mark.parametrize(
    ("event", "what"),
    [
        ({"choices": [{"delta": "text"}]}, "'delta' is not an object"),
        ({"choices": [{"delta": {"tool_calls": {"index": 0}}}]}, "'tool_calls' is not a list"),
        ({"choices": [{"delta": {"tool_calls": [{"function": {"arguments": 1}}]}}]}, "is not a string"),
        ({"choices": [{"delta": {"tool_calls": [{"function": []}]}}]}, "'function' is not an object"),
    ],
)
async def test_a_malformed_delta_is_an_invalid_chunk(event: dict[str, Any], what: str) -> None:
    client = FakeClient(MockStream([event], then="end"), MockStream([event], then="end"))
    with pytest.raises(ModelStreamContentError) as caught:
        await run(client)
    assert caught.value.details()["reason"] == "invalid_chunk" and what in str(caught.value)


async def test_a_finish_without_a_delta_and_a_tool_call_without_its_index_are_accepted() -> None:
    call = {"id": "c", "function": {"name": "f", "arguments": "{}"}}
    events = [{"choices": [{"delta": {"tool_calls": [call]}}]}, {"choices": [{"finish_reason": "tool_calls"}]}]
    got = await run(FakeClient(MockStream(events, then="end")))
    assert got == [Delta(tool_calls=(ToolCallFragment(0, "c", "f", "{}"),)), Finished("tool_calls")]


async def test_bugs_propagate_unchanged() -> None:
    client = FakeClient(MockStream([ZeroDivisionError("bug")]))
    with pytest.raises(ZeroDivisionError):
        await run(client)


async def test_on_retry_hook_sees_every_retry_and_its_failures_are_ignored() -> None:
    seen: list[RetryEvent] = []

    def hook(event: RetryEvent) -> None:
        seen.append(event)
        raise RuntimeError("a broken hook must not break the turn")

    policy = StreamPolicy(idle_timeout_ms=1_000, jitter_source=lambda: 0.5, on_retry=hook)
    client = FakeClient(hang(), status_error(500), MockStream([], then="end"), answer("ok"))
    assert text_of(await run(client, policy)) == "ok"
    assert [(e.attempt, e.policy, e.retry, e.delay_s) for e in seen] == [
        (1, "stream_transport", 1, 1.0),
        (2, "backoff", 1, 1.5),
        (3, "content", 1, 0.5),
    ]


async def test_sdk_retries_are_switched_off() -> None:
    real = openai.AsyncOpenAI(api_key="sk-x", base_url="http://127.0.0.1:9/v1", max_retries=5)
    from acp_server.pipeline._stream import _without_sdk_retries

    assert _without_sdk_retries(real).max_retries == 0
    await real.close()


async def test_caller_cancelled_while_holding_a_chunk_closes_the_request_at_once() -> None:
    t0 = anyio.current_time()
    client = FakeClient(MockStream([chunk("a"), chunk("b")]))
    with anyio.move_on_after(2) as scope:
        async with aclosing(stream_chat(client, REQUEST, NO_JITTER)) as stream:  # type: ignore[arg-type]
            async for _ in stream:
                await anyio.sleep(10)  # a slow consumer: not idle time, and cancellable as usual
    assert scope.cancelled_caught
    assert client.streams[0].close_calls == [t0 + 2]
    assert len(client.calls) == 1
