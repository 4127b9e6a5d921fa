"""The loopback model's HTTP and SSE framing, seen by a raw h11 client (asyncio)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from acp_server.provider.offline import Answer, LoopbackModel, NonSSE

pytestmark = pytest.mark.anyio

RawRequest = Callable[..., Awaitable[Any]]
CHAT = "/v1/chat/completions"
BODY = json.dumps(
    {"model": "wire", "messages": [{"role": "user", "content": "a b"}], "stream": True}
).encode()


async def test_a_stream_is_chunked_sse_of_valid_chunks_ending_with_done(raw_request: RawRequest) -> None:
    response = await raw_request("POST", CHAT, BODY)
    assert response.status == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in response.headers
    events = response.body.decode().split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    chunks = [json.loads(event.removeprefix("data: ")) for event in events[:-2]]
    assert len(chunks) == len(response.parts) - 1 == 6 + 4 + 1  # one HTTP chunk per SSE event
    for chunk in chunks:
        assert chunk.keys() >= {"id", "object", "created", "model", "choices"}
        assert (chunk["object"], chunk["model"], len(chunk["choices"])) == (
            "chat.completion.chunk",
            "wire",
            1,
        )
        assert chunk["choices"][0].keys() >= {"index", "delta", "finish_reason"}
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * 10 + ["stop"]


async def test_the_same_requests_give_the_same_bytes(raw_request: RawRequest) -> None:
    first = await raw_request("POST", CHAT, BODY)
    again = await raw_request("POST", CHAT, BODY)
    assert first.body.replace(b"loopback-0", b"loopback-1") == again.body


async def test_models_lists_one_model(raw_request: RawRequest) -> None:
    response = await raw_request("GET", "/v1/models")
    assert response.status == 200
    assert [m["id"] for m in json.loads(response.body)["data"]] == [LoopbackModel.model_id]


async def test_unknown_paths_are_404_json_and_wrong_methods_405(
    model: LoopbackModel, raw_request: RawRequest
) -> None:
    missing = await raw_request("GET", "/v1/embeddings?x=1")
    assert (missing.status, missing.headers["content-type"]) == (404, "application/json")
    assert json.loads(missing.body)["error"]["code"] == "not_found"
    wrong = await raw_request("GET", CHAT)
    assert (wrong.status, wrong.headers["allow"]) == (405, "POST")
    assert [(r.method, r.path, r.body) for r in model.requests] == [
        ("GET", "/v1/embeddings", None),
        ("GET", CHAT, None),
    ]


async def test_a_bad_chat_body_is_400_and_consumes_no_behaviour(
    model: LoopbackModel, raw_request: RawRequest
) -> None:
    model.enqueue(NonSSE(body="scripted"))
    for body in (b"{not json", b'{"messages": "no list"}', b"[]"):
        response = await raw_request("POST", CHAT, body)
        assert response.status == 400
        assert json.loads(response.body)["error"]["type"] == "invalid_request_error"
    assert (await raw_request("POST", CHAT, BODY)).body == b"scripted"


async def test_a_non_sse_body_is_sent_as_is(model: LoopbackModel, raw_request: RawRequest) -> None:
    model.enqueue(NonSSE(body="<p>proxy</p>", content_type="text/html; charset=utf-8"))
    response = await raw_request("POST", CHAT, BODY)
    assert (response.status, response.body) == (200, b"<p>proxy</p>")
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    assert response.headers["content-length"] == "12"


async def test_an_oversized_body_is_413_and_the_connection_survives(
    model: LoopbackModel, raw_request: RawRequest
) -> None:
    model.enqueue(Answer(text="kept"))
    response = await raw_request("POST", CHAT, b" " * (32 * 1024 * 1024 + 1))
    assert response.status == 413
    assert model.requests[0].body is None
    assert b"kept" in (await raw_request("POST", CHAT, BODY)).body


async def test_a_malformed_request_gets_400_then_a_close(raw_request: RawRequest) -> None:
    response = await raw_request("", "", raw=b"NOT HTTP AT ALL\r\n\r\n")
    assert response.status == 400
    assert response.headers["connection"] == "close"


async def test_expect_100_continue_is_honoured(model: LoopbackModel) -> None:
    port = int(model.base_url.split(":")[2].split("/")[0])
    head = f"POST {CHAT} HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: {len(BODY)}\r\n\r\n"
    async with await anyio.connect_tcp("127.0.0.1", port) as stream:
        await stream.send(head.encode())
        with anyio.fail_after(10):
            assert (await stream.receive()).startswith(b"HTTP/1.1 100 ")
        await stream.send(BODY)
        with anyio.fail_after(10):
            assert (await stream.receive()).startswith(b"HTTP/1.1 200 ")
