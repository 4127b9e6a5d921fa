"""Compaction records and context usage, for both stores on both backends: a compaction is kept beside the history
(never changing it), the latest one is read with the session, in a turn's ticket, and copied by a fork; one that
does not fit the history is refused and changes nothing; an answer's usage is stored with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.domain import Compaction, ContextUsage, TextPart
from acp_server.store import SessionStore, SqliteSessionStore, StoredSessionNotFoundError, StoreIOError

pytestmark = pytest.mark.anyio


async def _turns(store: SessionStore, session_id: str, n: int) -> None:
    for i in range(n):
        text = f"prompt {i}"
        ticket = await store.begin_turn(session_id, known=0, content=text, parts=(TextPart(text),), title=text)
        await store.end_turn(
            ticket,
            content=f"answer {i}",
            reasoning="",
            stop_reason="end_turn",
            outcome="complete",
            usage=ContextUsage(100 + i, 90 + i),
        )


async def test_the_latest_compaction_is_read_with_the_history_which_stays_whole(store: SessionStore) -> None:
    await store.create_session("s", "/w")
    await _turns(store, "s", 3)
    before = await store.read_session("s")
    assert before is not None and before.compaction is None
    await store.record_compaction("s", Compaction(2, "first summary"))
    await store.record_compaction("s", Compaction(4, "second summary"))
    after = await store.read_session("s")
    assert after is not None and after.compaction == Compaction(4, "second summary")
    assert after.messages == before.messages  # the user's history is the user's
    assert [m.usage for m in after.messages if m.role == "assistant"] == [
        ContextUsage(100, 90),
        ContextUsage(101, 91),
        ContextUsage(102, 92),
    ]
    ticket = await store.begin_turn("s", known=6, content="next", parts=(TextPart("next"),), title="next")
    assert ticket.compaction == Compaction(4, "second summary")


@pytest.mark.parametrize("through", [0, 3, 8])
async def test_a_compaction_that_does_not_fit_the_history_is_refused(store: SessionStore, through: int) -> None:
    await store.create_session("s", "/w")
    await _turns(store, "s", 3)  # messages 1..6
    await store.record_compaction("s", Compaction(2, "kept"))
    with pytest.raises(StoreIOError):
        await store.record_compaction("s", Compaction(through, "bad"))
    with pytest.raises(StoreIOError):  # not after the latest one
        await store.record_compaction("s", Compaction(2, "again"))
    snapshot = await store.read_session("s")
    assert snapshot is not None and snapshot.compaction == Compaction(2, "kept")
    with pytest.raises(StoredSessionNotFoundError):
        await store.record_compaction("nope", Compaction(2, "x"))


async def test_a_fork_carries_the_compaction_and_the_usage(store: SessionStore) -> None:
    await store.create_session("s", "/w")
    await _turns(store, "s", 2)
    await store.record_compaction("s", Compaction(2, "summary"))
    await store.fork_session("s", "child", cwd="/w2")
    child = await store.read_session("child")
    source = await store.read_session("s")
    assert child is not None and source is not None
    assert child.compaction == Compaction(2, "summary")
    assert [m.usage for m in child.messages] == [m.usage for m in source.messages]
    await store.record_compaction("child", Compaction(4, "child only"))
    source = await store.read_session("s")
    assert source is not None and source.compaction == Compaction(2, "summary")


async def test_compactions_outlive_the_process(tmp_path: Path) -> None:
    path = tmp_path / "state" / "sessions.db"
    async with SqliteSessionStore(path) as store:
        await store.create_session("s", "/w")
        await _turns(store, "s", 1)
        await store.record_compaction("s", Compaction(2, "summary ☕"))
    async with SqliteSessionStore(path) as store:
        snapshot = await store.read_session("s")
        assert snapshot is not None and snapshot.compaction == Compaction(2, "summary ☕")
        assert snapshot.messages[1].usage == ContextUsage(100, 90)
