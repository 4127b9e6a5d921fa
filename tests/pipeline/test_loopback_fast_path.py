"""The fast path over the real SDK client and real loopback sockets, on trio's virtual clock: the request is sent
as built (no SDK transform), the SSE body is read by the pipeline (events, comments, line ends, ``[DONE]``), tool
call fragments and usage are decoded, an error event is the provider's error, and a finished stream gives its
connection back to the pool.
"""

from __future__ import annotations

import json
from contextlib import aclosing
from typing import Any

import pytest

from acp_server.pipeline import (
    ChatRequest,
    Delta,
    Finished,
    ModelProviderError,
    ModelStreamTimeoutError,
    StreamEvent,
    StreamPolicy,
    ToolCallFragment,
    stream_chat,
)
from acp_server.pipeline._stream import request_body
from acp_server.provider.offline import Answer, RawSSE

from ._loopback import loopback, run_turn

pytestmark = [
    pytest.mark.anyio,
    # A response closed before the end of its body (a failed attempt) leaves httpcore2's byte generator to the
    # garbage collector: httpx2's transport stream iterates it without closing it. On trio its collection warns
    # (asyncio closes abandoned generators silently). A body read to its end (``[DONE]``, drained) leaves none.
    pytest.mark.filterwarnings("ignore:Async generator .* was garbage collected:ResourceWarning"),
    pytest.mark.virtual_time(autojump=0.05),
]

DEFAULTS = StreamPolicy(jitter_source=lambda: 0.5)


def data(delta: dict[str, Any] | None = None, finish: str | None = None) -> str:
    choice: dict[str, Any] = {"index": 0, "delta": delta or {}, "finish_reason": finish}
    return "data: " + json.dumps({"object": "chat.completion.chunk", "choices": [choice]}) + "\n\n"


DONE = "data: [DONE]\n\n"


async def events_of(client: Any, request: ChatRequest, policy: StreamPolicy = DEFAULTS) -> list[StreamEvent]:
    async with aclosing(stream_chat(client, request, policy)) as stream:
        return [event async for event in stream]


async def test_the_request_is_the_plain_body_posted_with_the_clients_key_and_headers() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "hé \U0001f600"}]},
    ]
    request = ChatRequest(model="m-7", messages=messages, extra={"temperature": 0.25})
    async with loopback() as (model, client):
        events = await events_of(client, request)
    assert events[-1] == Finished("stop")
    (sent,) = model.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.body == {"model": "m-7", "messages": messages, "stream": True, "temperature": 0.25}
    assert sent.headers["authorization"] == "Bearer offline"
    assert sent.headers["content-type"] == "application/json"
    assert "x-stainless-lang" in sent.headers  # the SDK's own headers are still sent


def test_a_lone_surrogate_in_a_message_is_sent_as_its_json_escape_not_an_error() -> None:
    request = ChatRequest(model="m", messages=[{"role": "user", "content": "half \ud83d"}])
    body = request_body(request)
    assert b'"half \\ud83d"' in body
    assert json.loads(body)["messages"][0]["content"] == "half \ud83d"
    plain = request_body(ChatRequest(model="m", messages=[{"role": "user", "content": "hé"}]))
    assert "hé".encode() in plain  # UTF-8 as is, not escaped


async def test_comments_multi_line_data_crlf_and_done_are_read_per_the_sse_spec() -> None:
    head, tail = '{"choices": [{"index": 0,', ' "delta": {"content": "a"}, "finish_reason": null}]}'
    parts = (
        ": keep-alive\r\n\r\n",
        f"event: message\r\nid: 1\r\ndata: {head}\r\ndata:{tail}\r\n\r\n",  # one event over two data lines
        ":\n\n",
        data({"content": "b"}).replace("\n", "\r"),
        data(finish="stop"),
        DONE,
        data({"content": "after done"}),  # never read: [DONE] ended the stream
    )
    async with loopback() as (model, client):
        model.enqueue(RawSSE(parts))
        outcome = await run_turn(client, DEFAULTS)
    assert outcome.error is None
    # the two data lines join with "\n", which JSON takes as whitespace between tokens
    assert (outcome.text, outcome.finished) == ("ab", [Finished("stop")])


async def test_comments_alone_never_reset_the_watchdog() -> None:
    parts = tuple(": keep-alive\n\n" for _ in range(50))
    async with loopback() as (model, client):
        model.enqueue(RawSSE((data({"content": "x"}), *parts), then="hold"))
        outcome = await run_turn(client, StreamPolicy(idle_timeout_ms=2_000, stream_max_retries=0))
    assert isinstance(outcome.error, ModelStreamTimeoutError)
    assert outcome.error.details()["chunksReceived"] == 1


async def test_tool_call_fragments_are_decoded_in_order() -> None:
    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": ""}}
    parts = (
        data({"role": "assistant", "tool_calls": [first]}),
        data({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": '}}]}),
        data({"tool_calls": [{"index": 0, "function": {"arguments": '"a.txt"}'}}]}),
        data(finish="tool_calls"),
        DONE,
    )
    async with loopback() as (model, client):
        model.enqueue(RawSSE(parts))
        outcome = await run_turn(client, DEFAULTS)
    assert outcome.error is None
    assert outcome.deltas == [
        Delta(tool_calls=(ToolCallFragment(0, "call_1", "read_file", ""),)),
        Delta(tool_calls=(ToolCallFragment(0, None, None, '{"path": '),)),
        Delta(tool_calls=(ToolCallFragment(0, None, None, '"a.txt"}'),)),
    ]
    assert outcome.finished == [Finished("tool_calls")]


async def test_the_usage_chunk_after_the_finish_is_kept_on_finished() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    usage_chunk = "data: " + json.dumps({"object": "chat.completion.chunk", "choices": [], "usage": usage}) + "\n\n"
    parts = (data({"content": "x"}), data(finish="stop"), usage_chunk, DONE)
    async with loopback() as (model, client):
        model.enqueue(RawSSE(parts))
        outcome = await run_turn(client, DEFAULTS)
    (finished,) = outcome.finished
    assert (finished.finish_reason, finished.usage) == ("stop", usage)


async def test_an_error_event_in_the_stream_is_the_providers_error_not_retried() -> None:
    error = {"error": {"message": "The server had an error while processing your request", "type": "server_error"}}
    async with loopback() as (model, client):
        model.enqueue(RawSSE((f"data: {json.dumps(error)}\n\n",)), Answer(text="never"))
        outcome = await run_turn(client, DEFAULTS)
    assert isinstance(outcome.error, ModelProviderError)
    assert "The server had an error while processing your request" in str(outcome.error)
    assert len(model.requests) == 1


async def test_a_stream_ended_by_done_gives_its_connection_back_for_the_next_turn() -> None:
    async with loopback() as (model, client):
        for _ in range(3):
            model.enqueue(Answer(text="one two", reasoning=""))
            outcome = await run_turn(client, DEFAULTS)
            assert (outcome.text, outcome.error) == ("one two", None)
    assert [r.connection for r in model.requests] == [0, 0, 0]
    assert model.disconnects == []
