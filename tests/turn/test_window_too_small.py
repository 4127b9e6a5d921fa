"""A window that cannot work says so, once, precisely: when the instructions, the tools, a minimal prompt and the
answer's room do not fit, every prompt fails at once with ``context_window_too_small`` naming what takes the room
and what would help (nothing sent, no summary asked); a compaction that cannot help is not run; a summary not
smaller than what it replaces is thrown away; ``/compact`` with nothing to compact says so. And a 4,096 window
with the built-in tools and the server's own instructions holds a 20-turn conversation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from acp_server.domain import Compacted, Compacting, CompactionStopped, TextChunk
from acp_server.provider.offline import Answer
from acp_server.tools.builtin import BUILTIN
from acp_server.turn import ContextWindowExceededError, ContextWindowTooSmallError
from acp_server.turn._window_fit import window_problem
from acp_server.turn.context import Budget

from ._context_support import ask, is_summary_request, long_session_stack, summarising, words

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _summaries(model: object) -> list[object]:
    return [r for r in model.requests if is_summary_request(r.body)]  # type: ignore[attr-defined]


async def test_a_1024_window_in_default_mode_fails_each_prompt_at_once_precisely(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path, model_window=1024, system_prompt=None) as (model, store, bridge):
        session = await bridge.open_session(str(tmp_path))
        for text in ("hello there", "and again"):
            outcome = await ask(bridge, session.session_id, text)
            error = outcome.ended.error
            assert isinstance(error, ContextWindowTooSmallError), error
            assert error.error_kind == "context_window_too_small"
            assert "shorter prompt" not in str(error) and "(1024 tokens) is too small" in str(error)
            details = error.details()
            assert details["contextWindow"] == 1024 and details["neededTokens"] > 1024  # type: ignore[operator]
            parts = {part["what"]: part["tokens"] for part in details["parts"]}  # type: ignore[attr-defined]
            assert parts["instructions"] > 150 and parts["built-in tools"] > 1000
            assert any("read-only mode" in advice for advice in details["advice"])  # type: ignore[attr-defined]
            assert any("--ctx-size" in advice for advice in details["advice"])  # type: ignore[attr-defined]
            assert not any(isinstance(e, Compacting) for e in outcome.events)
        assert model.requests == []  # nothing sent, no summary asked
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None and snapshot.compaction is None


def test_each_mcp_server_s_share_is_named() -> None:
    tools = BUILTIN.copy()
    base = BUILTIN.get("read_file")
    assert base is not None
    tools.set_source("docs", [dataclasses.replace(base, name="mcp__docs__search", source="docs")])
    problem = window_problem("You help.", "You help.", tools, "default", Budget(1500))
    assert problem is not None
    names = [what for what, _ in problem.parts]
    assert names[:3] == ["instructions", "built-in tools", 'MCP server "docs"']
    assert any("fewer MCP servers" in advice for advice in problem.advice)
    assert window_problem("You help.", "You help.", tools, "default", Budget(None)) is None
    assert window_problem("You help.", "You help.", tools, "default", Budget(100_000)) is None


async def test_a_4096_window_with_the_built_ins_holds_a_20_turn_conversation(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path, model_window=4096, system_prompt=None) as (model, store, bridge):
        session = await bridge.open_session(str(tmp_path))
        for i in range(20):
            outcome = await ask(bridge, session.session_id, words(60, i))
            assert outcome.ended.stop_reason == "end_turn", (i, outcome.ended.error)
        assert model.refusals == []
        assert _summaries(model)  # compacted on the way
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None and len(snapshot.messages) == 40


async def test_a_compaction_that_cannot_bring_the_request_under_the_limit_is_not_run(tmp_path: Path) -> None:
    # the instructions and tools alone take more than half the window: no summary can bring a request under it
    async with long_session_stack(tmp_path, model_window=3072, system_prompt=None, threshold=50) as (
        model,
        _store,
        bridge,
    ):
        session = await bridge.open_session(str(tmp_path))
        for i in range(4):
            outcome = await ask(bridge, session.session_id, words(40, i))
            assert outcome.ended.stop_reason == "end_turn", (i, outcome.ended.error)
            assert not any(isinstance(e, Compacting | Compacted) for e in outcome.events)
        assert _summaries(model) == []


async def test_a_summary_not_smaller_than_what_it_replaces_is_thrown_away(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path) as (model, store, bridge):
        session = await bridge.open_session(str(tmp_path))
        for i in range(2):
            assert (await ask(bridge, session.session_id, words(100, i))).ended.stop_reason == "end_turn"
        model.answer_with = summarising(Answer(text=words(600, 9), reasoning=""))
        outcome = await ask(bridge, session.session_id, "/compact")
        assert outcome.ended.stop_reason == "end_turn"
        assert len(_summaries(model)) == 1
        assert not any(isinstance(e, Compacted) for e in outcome.events)  # never announced as done
        [stopped] = [e for e in outcome.events if isinstance(e, CompactionStopped)]  # its note: told as a thought
        assert stopped.status == "failed" and "not smaller" in stopped.error and "not smaller" in stopped.note
        text = "".join(e.text for e in outcome.events if isinstance(e, TextChunk))
        assert text.startswith("Nothing compacted: a summary would not be smaller")
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None and snapshot.compaction is None  # never stored


async def test_compact_with_nothing_to_compact_says_so_with_the_size(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path) as (model, _store, bridge):
        session = await bridge.open_session(str(tmp_path))
        outcome = await ask(bridge, session.session_id, "/compact")
        assert outcome.ended.stop_reason == "end_turn"
        text = "".join(e.text for e in outcome.events if isinstance(e, TextChunk))
        assert text.startswith("Nothing to compact yet: the conversation is about ") and "4000-token window" in text
        assert (await ask(bridge, session.session_id, "one short turn")).ended.stop_reason == "end_turn"
        outcome = await ask(bridge, session.session_id, "/compact")  # one short turn: a summary would not help
        text = "".join(e.text for e in outcome.events if isinstance(e, TextChunk))
        assert text.startswith("Nothing to compact yet")
        assert _summaries(model) == [] and not any(isinstance(e, Compacting) for e in outcome.events)


async def test_a_refused_request_with_nothing_to_compact_does_not_ask_for_a_shorter_prompt() -> None:
    error = ContextWindowExceededError(3000, 2048, prompt=10)
    assert "shorter prompt" not in str(error) and "nothing is left to compact" in str(error)
    assert "shorter prompt" in str(ContextWindowExceededError(3000, 2048, prompt=2900))
