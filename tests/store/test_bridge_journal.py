"""The bridge with a store and the real turn (``ModelTurn`` against the loopback model), in one process: what is
written when, memory equal to disk after every outcome, attach/detach, catch-up across two bridges on one file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acp_server.bridge import SessionBridge, SessionClosedError, SessionEntry, SessionNotFoundError
from acp_server.domain import Prompt, PromptEnded, TextChunk, TextPart
from acp_server.pipeline import StreamPolicy
from acp_server.provider.offline import Answer, ChunksThenSilent, LoopbackModel, SlowDrip
from acp_server.store import SessionStore, SqliteSessionStore, StoreIOError, StoreUnavailableError, TurnTicket
from acp_server.turn import ModelSettings, ModelTurn

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


@pytest.fixture
async def model() -> AsyncIterator[LoopbackModel]:
    async with LoopbackModel() as loopback:
        yield loopback


def _turn(model: LoopbackModel) -> ModelTurn:
    policy = StreamPolicy(idle_timeout_ms=300, stream_max_retries=0, backoff_max_retries=0, content_max_retries=0)
    return ModelTurn(ModelSettings(base_url=model.base_url, model="m", policy=policy))


def _prompt(text: str) -> Prompt:
    return Prompt((TextPart(text),))


async def _ask(bridge: SessionBridge, session: SessionEntry, text: str) -> str:
    return await bridge.send_prompt(session.session_id, _prompt(text)).result()


async def _assert_memory_equals_disk(store: SessionStore, session: SessionEntry) -> None:
    snapshot = await store.read_session(session.session_id)
    assert snapshot is not None
    on_disk = [m.to_message() for m in snapshot.messages]
    assert session.conversation.messages == on_disk
    assert session.synced == len(on_disk)


async def test_what_is_written_when(tmp_path: Path, model: LoopbackModel) -> None:
    turn = _turn(model)
    async with SqliteSessionStore(tmp_path / "sessions.db") as store, SessionBridge(turn, store=store) as bridge:
        session = await bridge.open_session("/w")
        assert session.journaled
        record = await store.get_session(session.session_id)
        assert record is not None and record.cwd == "/w" and record.title == ""  # the row exists at session/new

        model.enqueue(Answer(text="one answer", reasoning="why", chunk_delay_s=0.05))
        handle = bridge.send_prompt(session.session_id, _prompt("Question one\nmore"))
        await model.wait_for_requests(1)
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None  # the prompt is stored before the model streams; the answer is pending
        assert [(m.role, m.content, m.outcome) for m in snapshot.messages] == [
            ("user", "Question one\nmore", "complete"),
            ("assistant", "", "running"),
        ]
        assert snapshot.record.title == "Question one"
        assert await handle.result() == "end_turn"
        await _assert_memory_equals_disk(store, session)
        answer = session.conversation.messages[-1]
        assert (answer.content, answer.reasoning, answer.stop_reason, answer.outcome) == (
            "one answer",
            "why",
            "end_turn",
            "complete",
        )
    await turn.aclose()


async def test_cancelled_and_failed_turns_keep_what_was_streamed(tmp_path: Path, model: LoopbackModel) -> None:
    turn = _turn(model)
    async with SqliteSessionStore(tmp_path / "sessions.db") as store, SessionBridge(turn, store=store) as bridge:
        session = await bridge.open_session("/w")
        model.enqueue(SlowDrip(interval_s=0.01, text="drip " * 1000))
        chunks: list[str] = []
        ends: list[PromptEnded] = []
        enough = anyio.Event()
        handle = bridge.send_prompt(session.session_id, _prompt("cancel me"))

        async def collect() -> None:
            async for event in handle.events:
                if isinstance(event, PromptEnded):
                    ends.append(event)
                else:
                    chunks.append(getattr(event, "text", ""))
                    if len(chunks) == 5:
                        enough.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(collect)
            await enough.wait()
            bridge.cancel_session(session.session_id)
            assert await handle.result() == "cancelled"
        assert ends == [PromptEnded(stop_reason="cancelled")]  # the reader got to the end: everything streamed
        await _assert_memory_equals_disk(store, session)
        cancelled = session.conversation.messages[-1]
        assert (cancelled.content, cancelled.stop_reason, cancelled.outcome) == (
            "".join(chunks),
            "cancelled",
            "cancelled",
        )

        model.enqueue(ChunksThenSilent(k=3))  # then the idle watchdog fails the turn
        with pytest.raises(Exception) as failure:
            await _ask(bridge, session, "fail me")
        assert "idle" in str(failure.value).lower() or "inactiv" in str(failure.value).lower()
        await _assert_memory_equals_disk(store, session)
        failed = session.conversation.messages[-1]
        assert failed.outcome == "failed" and failed.stop_reason is None and failed.content

        model.enqueue(Answer(text="fine again", reasoning=""))
        assert await _ask(bridge, session, "next") == "end_turn"
        history = model.requests[-1].body["messages"]
        assert [m["role"] for m in history[1:]] == ["user", "assistant", "user", "assistant", "user"]
    await turn.aclose()


async def test_a_store_that_cannot_record_fails_the_prompt_and_memory_follows_disk(
    tmp_path: Path, model: LoopbackModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn = _turn(model)
    async with SqliteSessionStore(tmp_path / "sessions.db") as store, SessionBridge(turn, store=store) as bridge:
        session = await bridge.open_session("/w")
        original_end = store.end_turn

        async def broken_end(ticket: TurnTicket, **kwargs: object) -> None:
            store._live.discard((ticket.session_id, ticket.answer_seq))
            raise StoreIOError(store.location, "database or disk is full")

        monkeypatch.setattr(store, "end_turn", broken_end)
        model.enqueue(Answer(text="lost answer", reasoning=""))
        with pytest.raises(StoreIOError):
            await _ask(bridge, session, "q1")
        assert [m.content for m in session.conversation.messages] == ["q1"]  # memory holds what disk holds

        monkeypatch.setattr(store, "end_turn", original_end)
        model.enqueue(Answer(text="kept", reasoning=""))
        assert await _ask(bridge, session, "q2") == "end_turn"
        await _assert_memory_equals_disk(store, session)
        assert [(m.content, m.outcome) for m in session.conversation.messages] == [
            ("q1", "complete"),
            ("", "interrupted"),
            ("q2", "complete"),
            ("kept", "complete"),
        ]
    await turn.aclose()


async def test_an_unavailable_store_fails_every_method_that_needs_it(tmp_path: Path, model: LoopbackModel) -> None:
    (tmp_path / "sessions.db").write_bytes(b"garbage" * 100)
    async with (
        SqliteSessionStore(tmp_path / "sessions.db") as store,
        SessionBridge(_turn(model), store=store) as bridge,
    ):
        for call in (
            bridge.open_session("/w"),
            bridge.load_session("s"),
            bridge.resume_session("s"),
            bridge.list_sessions(),
            bridge.close_session("s"),
        ):
            with pytest.raises(StoreUnavailableError):
                await call
        memory_only = bridge.create_session("/w")  # the memory-only path needs no store
        assert not memory_only.journaled


async def test_load_resume_close_and_fork(tmp_path: Path, model: LoopbackModel) -> None:
    path = tmp_path / "sessions.db"
    turn = _turn(model)
    async with SqliteSessionStore(path) as store, SessionBridge(turn, store=store) as bridge:
        session = await bridge.open_session("/w")
        sid = session.session_id
        assert await _ask(bridge, session, "hello") == "end_turn"
        assert await bridge.resume_session(sid) is session  # attached: same entry
        entry, history = await bridge.load_session(sid)
        assert entry is session and [m.content for m in history] == ["hello", "You said: hello"]

        child = await bridge.fork(sid, cwd="/fork")
        assert child.journaled and child.cwd == "/fork"
        await _assert_memory_equals_disk(store, child)
        assert await _ask(bridge, child, "only in the fork") == "end_turn"
        await _assert_memory_equals_disk(store, child)

        await bridge.close_session(sid)
        with pytest.raises(SessionNotFoundError):
            bridge.get(sid)
        await bridge.close_session(sid)  # stored but detached: no-op
        with pytest.raises(SessionNotFoundError):
            await bridge.close_session("never-existed")
        with pytest.raises(SessionNotFoundError):
            await bridge.load_session("never-existed")

        again = await bridge.resume_session(sid, cwd="/moved")
        assert again is not session and again.cwd == "/moved" and again.title == "hello"
        await _assert_memory_equals_disk(store, again)
        page = await bridge.list_sessions(cwd="/w")
        assert [r.session_id for r in page.sessions] == [sid]  # the stored cwd stays
    await turn.aclose()


async def test_close_waits_for_the_cancelled_answer_to_be_recorded(tmp_path: Path, model: LoopbackModel) -> None:
    turn = _turn(model)
    async with SqliteSessionStore(tmp_path / "sessions.db") as store, SessionBridge(turn, store=store) as bridge:
        session = await bridge.open_session("/w")
        model.enqueue(SlowDrip(interval_s=0.01, text="x " * 1000))
        handle = bridge.send_prompt(session.session_id, _prompt("long"))
        first = await handle.events.receive()  # the answer is streaming
        assert isinstance(first, TextChunk) and first.text
        await bridge.close_session(session.session_id)
        with pytest.raises(SessionClosedError):
            await handle.result()
        snapshot = await store.read_session(session.session_id)
        assert snapshot is not None and snapshot.messages[-1].outcome == "cancelled"
        assert snapshot.messages[-1].content.startswith(first.text)  # what was streamed was recorded
    await turn.aclose()


async def test_each_turn_starts_from_what_other_processes_stored(tmp_path: Path, model: LoopbackModel) -> None:
    path = tmp_path / "sessions.db"
    turn = _turn(model)
    async with (
        SqliteSessionStore(path) as store_a,
        SqliteSessionStore(path) as store_b,
        SessionBridge(turn, store=store_a) as a,
        SessionBridge(turn, store=store_b) as b,
    ):
        in_a = await a.open_session("/w")
        in_b = await b.resume_session(in_a.session_id)
        assert await _ask(a, in_a, "asked in A") == "end_turn"
        assert in_b.conversation.messages == []  # B has not seen it yet…
        assert await _ask(b, in_b, "asked in B") == "end_turn"
        history = model.requests[-1].body["messages"]  # …but its model does: the turn read the store first
        assert [m["content"] for m in history[1:]] == ["asked in A", "You said: asked in A", "asked in B"]
        await _assert_memory_equals_disk(store_b, in_b)
        assert await _ask(a, in_a, "A again") == "end_turn"
        await _assert_memory_equals_disk(store_a, in_a)
        assert [m.content for m in in_a.conversation.messages][-3:] == [
            "You said: asked in B",
            "A again",
            "You said: A again",
        ]
    await turn.aclose()


async def test_memory_only_sessions_are_unchanged(model: LoopbackModel) -> None:
    turn = _turn(model)
    async with SessionBridge(turn) as bridge:  # the bridge's own in-memory store
        session = bridge.create_session("/w")
        assert await _ask(bridge, session, "hi") == "end_turn"
        assert [m.content for m in session.conversation.messages] == ["hi", "You said: hi"]
        assert (await bridge.list_sessions()).sessions == ()  # never written anywhere
        journaled = await bridge.open_session("/w")
        assert [r.session_id for r in (await bridge.list_sessions()).sessions] == [journaled.session_id]
    await turn.aclose()


async def test_a_fork_whose_caller_left_while_it_was_stored_is_not_attached(
    model: LoopbackModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    turn = _turn(model)
    async with SessionBridge(turn) as bridge:
        source = await bridge.open_session("/w")
        started, release, stored = anyio.Event(), anyio.Event(), anyio.Event()
        copies: list[str] = []
        original = bridge.store.fork_session

        async def slow_fork(source_id: str, session_id: str, **kwargs: Any) -> object:
            started.set()
            await release.wait()
            copy = await original(source_id, session_id, **kwargs)
            copies.append(session_id)
            stored.set()  # the worker decides, without a checkpoint, as soon as this returns
            return copy

        monkeypatch.setattr(bridge.store, "fork_session", slow_fork)
        with anyio.move_on_after(5) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(bridge.fork, source.session_id)
                await started.wait()
                tg.cancel_scope.cancel()  # the caller leaves mid-copy
        assert not scope.cancelled_caught
        release.set()
        await stored.wait()  # the worker has stored the copy and decided what to do with it
        await anyio.wait_all_tasks_blocked()
        (copy,) = copies
        assert await bridge.store.get_session(copy) is not None  # the copy is in the store…
        assert [s.session_id for s in bridge.sessions] == [source.session_id]  # …but not attached
    await turn.aclose()
