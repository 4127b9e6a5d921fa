"""A summary is bounded, and the previous summary never makes compaction impossible: a runaway model's 14k-token
summary is cut to the window's share before it is stored, a summary stored larger (before summaries were bounded)
is sent cut, and every later prompt answers — also after a restart and ``session/load``."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.domain import Compaction
from acp_server.provider.offline import Answer
from acp_server.turn.context import SUMMARY_SHARE, Budget, cut_summary

from ._context_support import SUMMARY, WINDOW, ask, is_summary_request, long_session_stack, summarising, words

pytestmark = pytest.mark.anyio

RUNAWAY = words(14_000, 5)  # 14,000 tokens by the estimate and by the model's count alike


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_summary_is_cut_to_its_bound_and_says_so() -> None:
    assert Budget(4000).summary_tokens == int(4000 * SUMMARY_SHARE)
    cut = cut_summary("x" * 10_000, 1_000)
    assert len(cut) <= 1_000 and cut.endswith("more characters left out …]")
    assert cut_summary("short", 1_000) == "short"


async def test_a_runaway_summary_then_short_ones_every_prompt_answers_also_after_a_restart(tmp_path: Path) -> None:
    bound_chars = int(WINDOW * SUMMARY_SHARE) * 4
    async with long_session_stack(tmp_path) as (model, store, bridge):
        session = await bridge.open_session(str(tmp_path))
        sid = session.session_id
        model.answer_with = summarising(Answer(text=RUNAWAY, reasoning=""))
        i = 0
        while not any(is_summary_request(r.body) for r in model.requests):
            outcome = await ask(bridge, sid, words(100, i))
            assert outcome.ended.stop_reason == "end_turn", (i, outcome.ended.error)
            i += 1
        stored = await store.read_session(sid)
        assert stored is not None and stored.compaction is not None
        assert len(stored.compaction.summary) <= bound_chars  # cut before it was stored
        model.answer_with = summarising()
        for j in range(i, i + 10):
            outcome = await ask(bridge, sid, words(100, j))
            assert outcome.ended.stop_reason == "end_turn", (j, outcome.ended.error)
        stored = await store.read_session(sid)
        assert stored is not None
        # a summary stored whole by the code before this bound: the next prompts recover from it
        await store.record_compaction(sid, Compaction(len(stored.messages), RUNAWAY))
    async with long_session_stack(tmp_path) as (model, store, bridge):
        entry, _history = await bridge.load_session(sid)
        for j in range(40):  # until the next compaction, and two prompts after it
            outcome = await ask(bridge, entry.session_id, words(100, 50 + j))
            assert outcome.ended.stop_reason == "end_turn", (j, outcome.ended.error)
            asked = [k for k, r in enumerate(model.requests) if is_summary_request(r.body)]
            if asked and len(model.requests) - asked[-1] > 2:
                break
        assert model.refusals == []
        summaries = [r for r in model.requests if is_summary_request(r.body)]
        assert summaries and all(len(r.body["messages"][1]["content"]) < WINDOW * 4 for r in summaries)
        stored = await store.read_session(sid)
        assert stored is not None and stored.compaction is not None and stored.compaction.summary == SUMMARY
