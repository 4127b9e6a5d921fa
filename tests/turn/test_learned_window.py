"""A window an endpoint states in a refusal is believed only where it is plausible, per model, and only until a
request above it is accepted: one lying refusal (a gateway's "maximum context length is 10 tokens") costs at most
the prompt it answered — against the real SDK over the loopback model."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.domain import Notice
from acp_server.provider.offline import ErrorStatus
from acp_server.turn import MIN_LEARNED_WINDOW, ContextWindowExceededError, ModelCatalog

from ._context_support import ask, long_session_stack, words

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _lie(window: int) -> ErrorStatus:
    return ErrorStatus(400, f"This model's maximum context length is {window} tokens. Please reduce the length.")


def test_a_window_below_the_floor_or_below_an_accepted_request_is_not_believed() -> None:
    catalog = ModelCatalog("m")
    assert not catalog.learn_window("m", 10)
    assert catalog.budget_window("m") is None
    catalog.note_accepted("m", 3000)
    assert not catalog.learn_window("m", 2000)  # it accepted 3,000 tokens already
    assert catalog.learn_window("m", 4000) and catalog.budget_window("m") == 4000
    assert catalog.budget_window("other") is None  # per model
    assert MIN_LEARNED_WINDOW == 1024 and catalog.learn_window("other", 1024)


def test_a_success_above_a_learned_window_forgets_it() -> None:
    catalog = ModelCatalog("m", context_window=100_000)
    assert catalog.learn_window("m", 2000) and catalog.budget_window("m") == 2000
    catalog.note_accepted("m", 1500)
    assert catalog.budget_window("m") == 2000
    catalog.note_accepted("m", 2500)
    assert catalog.budget_window("m") == 100_000


async def test_one_lying_refusal_costs_at_most_the_prompt_it_answered(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path, known_window=False) as (model, _store, bridge):
        session = await bridge.open_session(str(tmp_path))
        assert (await ask(bridge, session.session_id, words(20))).ended.stop_reason == "end_turn"
        model.enqueue(_lie(10))
        lied_to = await ask(bridge, session.session_id, words(20, 1))
        error = lied_to.ended.error  # refused, nothing worth compacting: that prompt fails, not as "too large"
        assert isinstance(error, ContextWindowExceededError) and "shorter prompt" not in str(error)
        for i in range(2, 5):  # and only that one: nothing was learned
            outcome = await ask(bridge, session.session_id, words(20, i))
            assert outcome.ended.stop_reason == "end_turn", outcome.ended.error
        other = await bridge.open_session(str(tmp_path))
        assert (await ask(bridge, other.session_id, "hello there")).ended.stop_reason == "end_turn"


async def test_a_learned_window_is_told_as_an_info_notice_once(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path, known_window=False) as (model, _store, bridge):
        session = await bridge.open_session(str(tmp_path))
        assert (await ask(bridge, session.session_id, words(20))).ended.stop_reason == "end_turn"
        model.enqueue(_lie(3000))  # plausible: above the floor and every request it accepted
        told = await ask(bridge, session.session_id, words(20, 1))  # fails: nothing to compact (see above)
        notices = [event for event in told.events if isinstance(event, Notice)]
        assert [(n.severity, n.title) for n in notices] == [
            ("info", "Learned the context window of test-model: 3,000 tokens")
        ]
        again = await ask(bridge, session.session_id, words(20, 2))
        assert not [event for event in again.events if isinstance(event, Notice)]
