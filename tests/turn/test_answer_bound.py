"""A bounded answer: with a known window each request carries an output bound — the room kept for the answer (a
tenth of the window, at most MAX_ANSWER_BOUND), or ``--max-answer-tokens`` — so a looping model ends
``max_tokens`` instead of filling the window; ``max_completion_tokens`` is sent where ``max_tokens`` is refused,
nothing where both are; 0 sends none. Against the real SDK over the loopback model."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from acp_server.domain import Prompt, TextChunk, TextPart
from acp_server.provider.offline import Answer, LoopbackModel
from acp_server.turn import ModelSettings, ModelTurn
from acp_server.turn._request_fields import MAX_ANSWER_BOUND, answer_bound
from acp_server.turn.context import Budget

from ._context_support import NO_RETRIES, words
from .test_model_turn import Events, Session

pytestmark = pytest.mark.anyio

LOOPING = " ".join(["again"] * 3000)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as running:
        yield running


async def _ask(model: LoopbackModel, text: str = "hi", **settings: object) -> tuple[str, Events]:
    turn = ModelTurn(
        ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES, **settings)  # type: ignore[arg-type]
    )
    session = Session(model)
    events = Events(session)
    try:
        stop = await turn(session, _prompt(text), events)
    finally:
        await turn.aclose()
    return stop, events


def _prompt(text: str) -> Prompt:
    return Prompt((TextPart(text),))


def test_the_rule() -> None:
    assert answer_bound(None, Budget(8000)) == 800
    assert answer_bound(None, Budget(1_000_000)) == MAX_ANSWER_BOUND
    assert answer_bound(None, Budget(None)) is None
    assert answer_bound(0, Budget(8000)) is None and answer_bound(50, Budget(None)) == 50


async def test_a_looping_model_ends_max_tokens_at_the_window_s_answer_room(model: LoopbackModel) -> None:
    model.enqueue(Answer(text=LOOPING, reasoning=""))
    stop, events = await _ask(model, context_window=8000)
    assert stop == "max_tokens"
    assert model.requests[0].body["max_tokens"] == 800
    assert len("".join(e.text for e in events.events if isinstance(e, TextChunk)).split()) == 800


async def test_no_bound_without_a_window_or_when_turned_off(model: LoopbackModel) -> None:
    model.enqueue(Answer(text=words(5), reasoning=""), Answer(text=words(5), reasoning=""))
    await _ask(model)
    await _ask(model, context_window=8000, max_answer_tokens=0)
    assert all("max_tokens" not in r.body and "max_completion_tokens" not in r.body for r in model.requests)


async def test_max_completion_tokens_where_max_tokens_is_refused_then_none_where_both_are(
    model: LoopbackModel,
) -> None:
    model.unsupported_fields = {"max_tokens"}
    model.enqueue(Answer(text=LOOPING, reasoning=""))
    turn = ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=NO_RETRIES, max_answer_tokens=40))
    session = Session(model)
    try:
        assert await turn(session, _prompt("one"), Events(session)) == "max_tokens"
        model.unsupported_fields = {"max_completion_tokens"}
        assert await turn(session, _prompt("two"), Events(session)) == "end_turn"
        assert await turn(session, _prompt("three"), Events(session)) == "end_turn"
    finally:
        await turn.aclose()
    sent = [(r.body.get("max_tokens"), r.body.get("max_completion_tokens")) for r in model.requests]
    assert sent == [(40, None), (None, 40), (None, 40), (None, None), (None, None)]
