"""The loopback model against the real openai SDK over real loopback sockets (asyncio, real time)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx2
import openai
import pytest
from openai.types.chat import ChatCompletionChunk

from acp_server.provider import make_openai_client
from acp_server.provider.offline import (
    Answer,
    ChunksThenSilent,
    ConnectionReset,
    EmptyStream,
    EndWithoutFinish,
    ErrorStatus,
    FinishThenHold,
    HangAfterHeaders,
    LoopbackModel,
    NonSSE,
    RateLimited,
    RawSSE,
)

pytestmark = pytest.mark.anyio

REASONING = "Reading the prompt, then answering it."


def user(text: str) -> list[Any]:
    return [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]


async def collect(client: openai.AsyncOpenAI, prompt: str = "hi", **extra: Any) -> list[ChatCompletionChunk]:
    stream = await client.chat.completions.create(model="m-1", messages=user(prompt), stream=True, **extra)
    try:
        return [chunk async for chunk in stream]
    finally:
        await stream.close()


def texts(chunks: list[ChatCompletionChunk], field: str) -> list[str]:
    return [
        getattr(c.choices[0].delta, field)
        for c in chunks
        if c.choices and getattr(c.choices[0].delta, field, None)
    ]


async def test_default_answer_is_reasoning_then_the_prompt_word_by_word_then_stop(
    client: openai.AsyncOpenAI,
) -> None:
    chunks = await collect(client, "  hello\nwide   world ")
    assert texts(chunks, "reasoning_content") == [
        "Reading",
        " the",
        " prompt,",
        " then",
        " answering",
        " it.",
    ]
    assert texts(chunks, "content") == ["You", " said:", " hello", "\nwide", "   world"]
    reasoning_then_content = [
        bool(getattr(c.choices[0].delta, "reasoning_content", None)) for c in chunks[:-1]
    ]
    assert reasoning_then_content == [True] * 6 + [False] * 5
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks] == [None] * 11 + ["stop"]
    assert chunks[-1].choices[0].delta.content is None
    assert {(c.id, c.object, c.model) for c in chunks} == {
        ("chatcmpl-loopback-0", "chat.completion.chunk", "m-1")
    }


async def test_answer_text_reasoning_and_finish_reason_are_scriptable(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(Answer(text="short one", reasoning="", finish_reason="length"), Answer(finish_reason=None))
    first = await collect(client)
    assert texts(first, "reasoning_content") == []
    assert texts(first, "content") == ["short", " one"]
    assert first[-1].choices[0].finish_reason == "length"
    second = await collect(client)
    assert "".join(texts(second, "content")) == "You said: hi"
    assert all(c.choices[0].finish_reason is None for c in second)


async def test_script_is_consumed_in_order_then_the_default_answers(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(ErrorStatus(503), Answer(text="scripted"))
    with pytest.raises(openai.InternalServerError) as raised:
        await collect(client)
    assert raised.value.status_code == 503
    assert "".join(texts(await collect(client), "content")) == "scripted"
    assert "".join(texts(await collect(client, "third"), "content")) == "You said: third"


async def test_rate_limited_is_a_429_with_retry_after_and_no_sdk_retry(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(RateLimited("7"), RateLimited(None))
    with pytest.raises(openai.RateLimitError) as raised:
        await collect(client)
    assert raised.value.response.headers["retry-after"] == "7"
    assert isinstance(raised.value.body, dict) and raised.value.body["code"] == "rate_limit_exceeded"
    with pytest.raises(openai.RateLimitError) as raised:
        await collect(client)
    assert "retry-after" not in raised.value.response.headers
    assert len(model.requests) == 2  # max_retries=0: the pipeline owns retries


@pytest.mark.parametrize("status", [500, 502])
async def test_server_error_is_an_internal_server_error(
    model: LoopbackModel, client: openai.AsyncOpenAI, status: int
) -> None:
    model.enqueue(ErrorStatus(status))
    with pytest.raises(openai.InternalServerError) as raised:
        await collect(client)
    assert raised.value.status_code == status
    assert isinstance(raised.value.body, dict) and raised.value.body["type"] == "server_error"


async def test_reset_before_headers_is_a_connection_error_not_a_timeout(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(ConnectionReset())
    with pytest.raises(openai.APIConnectionError) as raised:
        await collect(client)
    assert not isinstance(raised.value, openai.APITimeoutError)
    assert isinstance(raised.value.__cause__, httpx2.ReadError)
    assert model.disconnects == []  # we broke it; the client did not leave
    assert "".join(texts(await collect(client), "content")) == "You said: hi"  # the next request reconnects


async def test_reset_after_chunks_delivers_them_then_fails(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(ConnectionReset(after_chunks=2))
    stream = await client.chat.completions.create(model="m", messages=user("one two three"), stream=True)
    got: list[str | None] = []
    with pytest.raises(openai.APIConnectionError):
        async for chunk in stream:
            got.append(chunk.choices[0].delta.content)
    await stream.close()
    assert got == ["You", " said:"]


async def test_closing_a_hanging_stream_is_recorded_as_a_disconnect_at_once(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(HangAfterHeaders())
    stream = await client.chat.completions.create(model="m", messages=user("x"), stream=True)
    await model.wait_for_requests(1)
    await stream.close()
    with anyio.fail_after(10):  # a hang guard: test_loopback_virtual_time pins "at once" exactly
        (disconnect,) = await model.wait_for_disconnects(1)
    assert (disconnect.request_index, disconnect.chunks_sent) == (0, 0)


async def test_a_disconnect_counts_the_chunks_already_sent(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(ChunksThenSilent(3))
    stream = await client.chat.completions.create(model="m", messages=user("a"), stream=True)
    got = [(await stream.__anext__()).choices[0].delta.content for _ in range(3)]
    with anyio.move_on_after(0.05) as idle:
        await stream.__anext__()
    assert idle.cancelled_caught  # silent after the third chunk
    await stream.close()
    (disconnect,) = await model.wait_for_disconnects(1)
    assert got == ["You", " said:", " a"]
    assert disconnect.chunks_sent == 3


async def test_non_sse_body_ends_the_sdk_stream_silently(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(NonSSE())
    chunks = await collect(client)
    assert chunks == []  # no chunk and no error: only a watchdog can notice


async def test_end_without_finish_ends_the_sdk_stream_without_error(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(EndWithoutFinish(2))
    chunks = await collect(client)
    assert texts(chunks, "content") == ["You", " said:"]
    assert all(c.choices[0].finish_reason is None for c in chunks)


async def test_finish_then_hold_sends_the_finish_and_usage_then_holds_the_connection(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(FinishThenHold("all done"))
    stream = await client.chat.completions.create(
        model="m", messages=user("x"), stream=True, stream_options={"include_usage": True}
    )
    seen: list[ChatCompletionChunk] = []
    try:
        with anyio.fail_after(5):
            async for chunk in stream:
                seen.append(chunk)
                if chunk.usage is not None:
                    break
        with anyio.move_on_after(0.2) as held:
            await stream.__anext__()  # nothing more comes: no [DONE], no end of body
        assert held.cancelled_caught
    finally:
        await stream.close()
    assert texts(seen, "content") == ["all", " done"]
    assert [c.choices[0].finish_reason for c in seen if c.choices][-1] == "stop"
    with anyio.fail_after(5):
        (disconnect,) = await model.wait_for_disconnects(1)
    assert disconnect.chunks_sent == 4  # two words, the finish, the usage


async def test_raw_sse_parts_are_sent_as_is_and_data_lines_count_as_chunks(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    parts = (
        'data: {"choices":[{"index":0,"delta":{"content":"\\ud83d"}}]}\n\n',
        ": a comment\n\n",
        b'data: {"choices":[{"index":0,"delta":{"content":"\\ude00"},"finish_reason":"stop"}]}\n\n',
        "data: [DONE]\n\n",
    )
    model.enqueue(RawSSE(parts), RawSSE(("data: {not json\n\n",), then="reset"))
    chunks = await collect(client)
    assert texts(chunks, "content") == ["\ud83d", "\ude00"]  # the SDK passes lone surrogate halves on
    with pytest.raises(ValueError):  # json.JSONDecodeError, straight out of the SDK
        await collect(client)


async def test_empty_stream_has_no_chunk(model: LoopbackModel, client: openai.AsyncOpenAI) -> None:
    model.enqueue(EmptyStream())
    assert await collect(client, stream_options={"include_usage": True}) == []


async def test_requests_are_recorded_with_json_bodies_and_headers(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    await collect(client, "first", temperature=0.5)
    (request,) = await model.wait_for_requests(1)
    assert (request.method, request.path, request.connection) == ("POST", "/v1/chat/completions", 0)
    assert request.body == {"model": "m-1", "messages": user("first"), "stream": True, "temperature": 0.5}
    assert request.headers["authorization"] == "Bearer offline"
    assert request.headers["content-type"] == "application/json"
    assert request.received_at <= anyio.current_time()


async def test_sequential_requests_share_one_kept_alive_connection(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(RateLimited(), ErrorStatus())
    for _ in range(2):
        with pytest.raises(openai.APIStatusError):
            await collect(client)
    answers = ["".join(texts(await collect(client, f"n{i}"), "content")) for i in range(3)]
    assert answers == ["You said: n0", "You said: n1", "You said: n2"]
    assert [r.connection for r in model.requests] == [0] * 5


async def test_usage_chunk_when_asked_for(client: openai.AsyncOpenAI) -> None:
    chunks = await collect(client, "count these words", stream_options={"include_usage": True})
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (5, 6 + 5)


async def test_a_non_streaming_request_gets_one_completion(client: openai.AsyncOpenAI) -> None:
    completion = await client.chat.completions.create(model="m", messages=user("plain"))
    assert completion.choices[0].message.content == "You said: plain"
    assert getattr(completion.choices[0].message, "reasoning_content", None) == REASONING
    assert completion.choices[0].finish_reason == "stop"


async def test_models_lists_the_loopback_model(client: openai.AsyncOpenAI) -> None:
    assert [m.id async for m in client.models.list()] == [LoopbackModel.model_id]


async def test_closing_the_model_ends_open_connections_cleanly() -> None:
    model = LoopbackModel()
    with anyio.fail_after(10):
        async with model:
            client = make_openai_client(base_url=model.base_url, api_key=None)
            model.enqueue(HangAfterHeaders())
            stream = await client.chat.completions.create(model="m", messages=user("x"), stream=True)
            await model.wait_for_requests(1)
    try:
        with pytest.raises(openai.APIConnectionError):  # the model went away mid-stream
            await stream.__anext__()
    finally:
        await stream.close()
        await client.close()
    assert model.disconnects == []
