"""Timing on trio's virtual clock: the real SDK over real sockets, exact times at no real cost."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import openai
import pytest

from acp_server.provider import make_openai_client
from acp_server.provider.offline import Answer, KeepAliveOnly, LoopbackModel, SlowDrip

pytestmark = [
    pytest.mark.anyio,
    # openai's AsyncStream breaks out of its inner SSE generators at ``[DONE]`` without closing them; on trio
    # their garbage collection warns (asyncio's loop closes abandoned generators silently).
    pytest.mark.filterwarnings("ignore:Async generator .* was garbage collected:ResourceWarning"),
    pytest.mark.virtual_time,
]

# pytest-timeout cannot interrupt a hung test on anyio's trio runner; a virtual-time deadline fails at once.
GUARD_S = 3600


async def arrival_times(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> list[tuple[float, str | None, str | None]]:
    """(seconds after the request was received, content, finish_reason) for each chunk."""
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True
    )
    got = []
    with anyio.fail_after(GUARD_S):
        async for chunk in stream:
            got.append((anyio.current_time(), chunk.choices[0].delta.content, chunk.choices[0].finish_reason))
        (request,) = await model.wait_for_requests(1)
    return [(at - request.received_at, content, finish) for at, content, finish in got]


async def test_slow_drip_sends_one_word_per_interval_then_stops(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(SlowDrip(interval_s=2.0, text="one two three"))
    assert await arrival_times(model, client) == [
        (2.0, "one", None),
        (4.0, " two", None),
        (6.0, " three", None),
        (6.0, None, "stop"),
    ]


async def test_chunk_delay_precedes_every_chunk_including_the_finish(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(Answer(text="a b", reasoning="", chunk_delay_s=0.25))
    assert await arrival_times(model, client) == [(0.25, "a", None), (0.5, " b", None), (0.75, None, "stop")]


async def test_keep_alive_comments_reach_the_sdk_as_no_chunk(
    model: LoopbackModel, client: openai.AsyncOpenAI
) -> None:
    model.enqueue(KeepAliveOnly(interval_s=1.0))
    stream = await client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "x"}], stream=True
    )
    with anyio.move_on_after(30) as waited:
        await stream.__anext__()
    assert waited.cancelled_caught
    closed_at = anyio.current_time()
    await stream.close()
    with anyio.fail_after(GUARD_S):
        (disconnect,) = await model.wait_for_disconnects(1)
    assert (disconnect.chunks_sent, disconnect.at) == (0, closed_at)
    assert closed_at - model.requests[0].received_at == 30.0


async def test_keep_alive_comments_are_sse_comments_on_the_wire(
    model: LoopbackModel, raw_request: Callable[..., Awaitable[Any]], raw_response: Any
) -> None:
    model.enqueue(KeepAliveOnly(interval_s=1.0))
    response = raw_response
    with anyio.move_on_after(3.5):
        await raw_request("POST", "/v1/chat/completions", b'{"messages": []}', into=response)
    assert response.status == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.parts == [b": keep-alive\n\n"] * 3
    with anyio.fail_after(GUARD_S):
        (disconnect,) = await model.wait_for_disconnects(1)
    assert disconnect.at - model.requests[0].received_at == 3.5


async def test_a_complete_response_then_a_close_is_no_disconnect(model: LoopbackModel) -> None:
    async with make_openai_client(base_url=model.base_url, api_key=None) as client:
        stream = await client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], stream=True
        )
        assert len([chunk async for chunk in stream]) == 6 + 3 + 1
    await anyio.sleep(60)  # virtual: every task has long been idle
    assert model.disconnects == []
