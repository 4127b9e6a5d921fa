"""A session never dies of its own history: against the offline model that refuses requests over its window (as
OpenAI does), 30 turns all end ``end_turn`` — proactively (window known: no refusal at all) or reactively (window
unknown: one refusal, learned from) — while the stored history stays whole; a turn whose tool loop outgrows the
window compacts between its requests; a prompt too large alone fails with ``context_window_exceeded`` and the
session goes on; ``/compact`` compacts on demand."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from acp_server.domain import Compacted, Compacting, Compaction, Prompt, TextPart, UsageReported
from acp_server.provider.offline import ErrorStatus, HangAfterHeaders, ScriptedCall, ToolCalls
from acp_server.turn import CompactionFailedError, ContextWindowExceededError

from ._context_support import SUMMARY, WINDOW, ask, is_summary_request, long_session_stack, summarising, words

pytestmark = pytest.mark.anyio


def _chat_requests(model: object) -> list[dict[str, object]]:
    return [r.body for r in model.requests if not is_summary_request(r.body)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("known_window", [True, False], ids=["proactive", "reactive"])
async def test_thirty_turns_against_a_small_window_all_end_end_turn(tmp_path: Path, known_window: bool) -> None:
    async with long_session_stack(tmp_path, known_window=known_window) as (model, store, bridge):
        session = await bridge.open_session(str(tmp_path))
        for i in range(30):
            outcome = await ask(bridge, session.session_id, words(100, i))
            assert outcome.ended.error is None, (i, outcome.ended.error)
            assert outcome.ended.stop_reason == "end_turn"
        # proactive: never refused; reactive: refused once, the window learned from the refusal's own words
        assert len(model.refusals) == (0 if known_window else 1)
        summaries = [r for r in model.requests if is_summary_request(r.body)]
        assert len(summaries) >= 2  # compacted more than once, each summary built on the one before
        assert SUMMARY in summaries[-1].body["messages"][1]["content"]
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None and len(snapshot.messages) == 60  # the user's history is the user's
        assert snapshot.compaction is not None and snapshot.compaction.summary == SUMMARY
        last = _chat_requests(model)[-1]["messages"]
        assert SUMMARY in last[0]["content"]  # type: ignore[index]
        assert last[-1]["content"] == words(100, 29)  # type: ignore[index]
        assert words(100, 28) in [m["content"] for m in last]  # type: ignore[index]  # the latest turns whole
        assert len(last) < 2 * 30  # type: ignore[arg-type]


async def test_the_client_is_told_of_a_compaction_and_of_the_usage_after_it(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path) as (_model, _store, bridge):
        session = await bridge.open_session(str(tmp_path))
        seen = []
        for i in range(12):
            outcome = await ask(bridge, session.session_id, words(100, i))
            seen.extend(outcome.events)
        kinds = [type(e) for e in seen if isinstance(e, Compacting | Compacted)]
        assert kinds and kinds[0] is Compacting and kinds.count(Compacting) == kinds.count(Compacted)
        done = next(e for e in seen if isinstance(e, Compacted) and e.through > 0)
        assert done.size == WINDOW and done.estimate < WINDOW * 0.8
        after = seen[seen.index(done) + 1 :]
        usage = next(e for e in after if isinstance(e, UsageReported))
        assert usage.size == WINDOW and usage.input_tokens < WINDOW * 0.8


async def test_a_tool_loop_that_outgrows_the_window_compacts_between_its_requests(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.txt").write_text("\n".join(words(12, i) for i in range(60)) + "\n")
    async with long_session_stack(tmp_path) as (model, _store, bridge):
        session = await bridge.open_session(str(tmp_path))
        model.enqueue(
            *(ToolCalls((ScriptedCall("read_file", {"path": f"{n}.txt"}, id=f"r{n}"),)) for n in ("a", "b", "c"))
        )
        outcome = await ask(bridge, session.session_id, "read the three files")
        assert outcome.ended.stop_reason == "end_turn", outcome.ended.error
        assert model.refusals == []
        compacting = [e for e in outcome.events if isinstance(e, Compacting)]
        assert compacting and compacting[0].reason == "threshold"
        last = model.requests[-1].body["messages"]
        outputs = {m["tool_call_id"]: m["content"] for m in last if m["role"] == "tool"}
        assert outputs["ra"].startswith("[output elided to save context")  # this prompt's older outputs first
        assert not outputs["rc"].startswith("[output elided")  # the latest one whole


async def test_a_prompt_too_large_alone_fails_and_the_session_goes_on(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path) as (model, store, bridge):
        session = await bridge.open_session(str(tmp_path))
        assert (await ask(bridge, session.session_id, words(50))).ended.stop_reason == "end_turn"
        asked = len(model.requests)
        huge = await ask(bridge, session.session_id, words(5000, 3))
        error = huge.ended.error
        assert isinstance(error, ContextWindowExceededError)
        assert error.error_kind == "context_window_exceeded"
        assert error.details()["contextWindow"] == WINDOW and error.details()["estimatedTokens"] > WINDOW  # type: ignore[operator]
        assert len(model.requests) == asked  # nothing was sent
        after = await ask(bridge, session.session_id, "and now a short one")
        assert after.ended.stop_reason == "end_turn"
        sent = model.requests[-1].body["messages"]
        assert all(words(5000, 3) not in str(m["content"]) for m in sent)
        assert any("too large for the model's context window" in str(m["content"]) for m in sent)
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None and snapshot.messages[2].content == words(5000, 3)  # stored as sent


async def test_a_prompt_too_large_for_an_unknown_window_fails_once_refused(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path, known_window=False) as (model, _store, bridge):
        session = await bridge.open_session(str(tmp_path))
        assert (await ask(bridge, session.session_id, words(50))).ended.stop_reason == "end_turn"
        huge = await ask(bridge, session.session_id, words(5000, 3))
        assert isinstance(huge.ended.error, ContextWindowExceededError)
        assert len(model.refusals) == 1  # refused once: the window it states shows the prompt can never fit
        assert huge.ended.error.details()["contextWindow"] == WINDOW  # learned from the refusal
        after = await ask(bridge, session.session_id, "short")
        assert after.ended.stop_reason == "end_turn" and len(model.refusals) == 1


async def _fill(bridge: object, session_id: str, turns: int) -> None:
    for i in range(turns):
        assert (await ask(bridge, session_id, words(100, i))).ended.stop_reason == "end_turn"  # type: ignore[arg-type]


async def test_cancel_during_the_summary_request_cancels_the_prompt_and_keeps_nothing(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path) as (model, store, bridge):
        session = await bridge.open_session(str(tmp_path))
        model.answer_with = summarising(HangAfterHeaders())
        await _fill(bridge, session.session_id, 6)
        before = await store.read_session(session.session_id)
        assert before is not None and before.compaction is None
        handle = None
        async with anyio.create_task_group() as tg:

            async def cancel_when_summarising() -> None:
                while not any(is_summary_request(r.body) for r in model.requests):
                    await model.wait_for_requests(len(model.requests) + 1)
                assert handle is not None
                handle.cancel()

            tg.start_soon(cancel_when_summarising)
            for i in range(6, 30):
                handle = bridge.send_prompt(session.session_id, Prompt((TextPart(words(100, i)),)))
                events = [e async for e in handle.events]
                if any(isinstance(e, Compacting) for e in events):
                    break
            tg.cancel_scope.cancel()  # no summary request came: the assertions below say so
        assert handle is not None and await handle.result() == "cancelled"
        await model.wait_for_disconnects(1)
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None and snapshot.compaction is None
        assert snapshot.messages[-1].outcome == "cancelled"
        model.answer_with = summarising()
        assert (await ask(bridge, session.session_id, "go on")).ended.stop_reason == "end_turn"


async def test_a_failed_summary_request_fails_the_prompt_clearly_and_loses_nothing(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path) as (model, store, bridge):
        session = await bridge.open_session(str(tmp_path))
        model.answer_with = summarising(ErrorStatus(500))
        failed = None
        for i in range(30):
            outcome = await ask(bridge, session.session_id, words(100, i))
            if outcome.ended.error is not None:
                failed = outcome.ended.error
                break
        assert isinstance(failed, CompactionFailedError) and failed.error_kind == "context_compaction_failed"
        assert "summary request failed" in str(failed) and "HTTP 500" in str(failed)
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None and snapshot.compaction is None
        assert len(snapshot.messages) == 2 * (i + 1) and snapshot.messages[-1].outcome == "failed"
        model.answer_with = summarising()
        assert (await ask(bridge, session.session_id, "again")).ended.stop_reason == "end_turn"
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None and snapshot.compaction is not None


async def test_compact_on_demand_summarises_every_turn_and_adds_no_message(tmp_path: Path) -> None:
    async with long_session_stack(tmp_path) as (model, store, bridge):
        session = await bridge.open_session(str(tmp_path))
        await _fill(bridge, session.session_id, 2)
        outcome = await ask(bridge, session.session_id, " /compact ")
        assert outcome.ended.stop_reason == "end_turn"
        assert [type(e) for e in outcome.events[:-1]] == [Compacting, Compacted]
        assert isinstance(outcome.events[0], Compacting) and outcome.events[0].reason == "requested"
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None and len(snapshot.messages) == 4
        assert snapshot.compaction == Compaction(4, SUMMARY)
        child = await bridge.fork(session.session_id)
        assert child.conversation.compaction == Compaction(4, SUMMARY)  # a fork carries it
        assert (await ask(bridge, child.session_id, "next")).ended.stop_reason == "end_turn"
        sent = model.requests[-1].body["messages"]
        assert SUMMARY in sent[0]["content"] and [m["role"] for m in sent] == ["system", "user"]
        # the slash command: whatever follows /compact, it compacts (here nothing is left to) and asks no answer
        chats = len(_chat_requests(model))
        assert (await ask(bridge, session.session_id, "/compact\nplease")).ended.stop_reason == "end_turn"
        assert len(_chat_requests(model)) == chats
