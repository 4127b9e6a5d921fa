"""``ModelTurn`` and what it records when the model misbehaves: the real SDK over the loopback model, on trio's
virtual clock. A cut stream is recorded as what streamed, ``failed``; split surrogate pairs become one character;
a reader that never reads cannot keep the request open past the lifetime cap."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from acp_server.domain import Message, RetryNotice, TextChunk, TurnEvent
from acp_server.pipeline import ModelStreamTimeoutError, ModelTransportError, StreamPolicy
from acp_server.provider.offline import (
    Answer,
    EndWithoutFinish,
    ErrorStatus,
    FinishThenHold,
    LoopbackModel,
    RawSSE,
    SlowDrip,
)
from acp_server.turn import ModelSettings, ModelTurn

from .test_model_turn import Events, Session, text_prompt

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:Async generator .* was garbage collected:ResourceWarning"),
    pytest.mark.virtual_time(autojump=0.05),
]


async def _turn(model: LoopbackModel, policy: StreamPolicy, session: Session, emit: Any) -> Any:
    runner = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=policy))
    try:
        return await runner(session, text_prompt("alpha beta"), emit)
    finally:
        await runner.aclose()


async def test_a_stream_cut_without_finish_is_recorded_failed_with_what_streamed() -> None:
    async with LoopbackModel() as model:
        model.enqueue(EndWithoutFinish(2))
        session = Session(model)
        emit = Events(session)
        with pytest.raises(ModelTransportError) as caught:
            await _turn(model, StreamPolicy(), session, emit)
    assert caught.value.details()["reason"] == "eof_without_finish"
    assert emit.events == [TextChunk("You", message_id="2.0"), TextChunk(" said:", message_id="2.0")]
    assert session.calls[-1] == ("end", Message("assistant", "You said:", "", None, "failed"))


async def test_a_finish_then_a_held_connection_is_a_complete_answer() -> None:
    async with LoopbackModel() as model:
        model.enqueue(FinishThenHold("the answer", finish_reason="length"))
        session = Session(model)
        assert await _turn(model, StreamPolicy(), session, Events(session)) == "max_tokens"
    assert session.calls[-1] == ("end", Message("assistant", "the answer", "", "max_tokens", "complete"))


async def test_split_surrogate_halves_are_streamed_and_stored_as_one_character() -> None:
    parts = (
        'data: {"choices":[{"index":0,"delta":{"content":"\\ud83d"},"finish_reason":null}]}\n\n',
        'data: {"choices":[{"index":0,"delta":{"content":"\\ude00"},"finish_reason":null}]}\n\n',
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
        "data: [DONE]\n\n",
    )
    async with LoopbackModel() as model:
        model.enqueue(RawSSE(parts))
        session = Session(model)
        emit = Events(session)
        assert await _turn(model, StreamPolicy(), session, emit) == "end_turn"
    assert emit.events == [TextChunk("\U0001f600", message_id="2.0")]
    assert session.calls[-1] == ("end", Message("assistant", "\U0001f600", "", "end_turn", "complete"))


async def test_the_lifetime_cap_fails_the_turn_while_emit_is_blocked() -> None:
    blocked = anyio.Event()

    async def stuck_reader(event: TurnEvent) -> None:
        session.calls.append(("emit", event))
        blocked.set()
        await anyio.sleep_forever()  # the prompt's event stream is full and nobody reads it

    async with LoopbackModel() as model:
        model.enqueue(SlowDrip(interval_s=1.0, text=" ".join(["word"] * 100)))
        session = Session(model)
        policy = StreamPolicy(max_lifetime_ms=5_000)
        with anyio.fail_after(30), pytest.raises(ModelStreamTimeoutError) as caught:
            await _turn(model, policy, session, stuck_reader)
        ended = anyio.current_time()
        (disconnect,) = await model.wait_for_disconnects(1)
    assert blocked.is_set()
    t0 = model.requests[0].received_at
    assert ended - t0 == 5.0 and disconnect.at - t0 == 5.0  # not 100 s: the request was closed at the cap
    assert caught.value.details()["maxLifetimeMs"] == 5_000
    assert session.calls[-1] == ("end", Message("assistant", "word", "", None, "failed"))


async def test_a_retry_wait_is_told_as_a_thought_before_the_wait_and_is_neither_stored_nor_sent() -> None:
    async with LoopbackModel() as model:
        model.enqueue(ErrorStatus(503), Answer(text="fine", reasoning=""))
        session = Session(model)
        emit = Events(session)
        times: list[float] = []

        async def timed(event: TurnEvent) -> None:
            times.append(anyio.current_time())
            await emit(event)

        started = anyio.current_time()
        assert await _turn(model, StreamPolicy(jitter_source=lambda: 0.5), session, timed) == "end_turn"
        first, second = model.requests
    notice, *answer = emit.events
    assert isinstance(notice, RetryNotice)
    assert (notice.attempt, notice.delay_ms, notice.reason) == (1, 1500, "server error (HTTP 503)")
    assert "Retrying in 1.5 s" in notice.text
    assert times[0] - started < 1.5 <= second.received_at - first.received_at  # told before it waits
    assert answer[0] == TextChunk("fine", message_id="2.0")
    assert session.calls[-1] == ("end", Message("assistant", "fine", "", "end_turn", "complete"))
    assert second.messages == first.messages  # the model never hears of it
