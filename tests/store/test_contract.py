"""The store contract, for every store (SQLite, memory, PostgreSQL) on both backends: sessions, turns, outcomes,
catch-up, listing with keyset cursors, fork, delete, lifecycle."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server.domain import Compaction, ImagePart, PromptPart, ResourceLinkPart, ResourcePart, TextPart
from acp_server.store import (
    InvalidCursorError,
    MemorySessionStore,
    SessionBusyError,
    SessionStore,
    SqliteSessionStore,
    StoreClosedError,
    StoredMessage,
    StoredSessionNotFoundError,
    TurnTicket,
)
from acp_server.system_prompts import ClientPrompt

from ._support import FIRST

pytestmark = pytest.mark.anyio


async def _turn(
    store: SessionStore, session_id: str, text: str, answer: str, *, known: int = 0, reasoning: str = ""
) -> TurnTicket:
    ticket = await store.begin_turn(session_id, known=known, content=text, parts=(TextPart(text),), title=text)
    await store.end_turn(ticket, content=answer, reasoning=reasoning, stop_reason="end_turn", outcome="complete")
    return ticket


def _summary(messages: tuple[StoredMessage, ...]) -> list[tuple[int, str, str, str]]:
    return [(m.seq, m.role, m.content, m.outcome) for m in messages]


async def test_a_new_session_is_stored_empty(store: SessionStore) -> None:
    record = await store.create_session("s1", "/w")
    assert (record.session_id, record.cwd, record.title) == ("s1", "/w", "")
    assert record.created_us == record.updated_us > 0
    assert await store.get_session("s1") == record
    snapshot = await store.read_session("s1")
    assert snapshot is not None and snapshot.record == record and snapshot.messages == ()
    assert await store.get_session("nope") is None
    assert await store.read_session("nope") is None


async def test_a_turn_is_the_prompt_then_a_pending_answer_then_the_answer(store: SessionStore) -> None:
    await store.create_session("s1", "/w")
    ticket = await store.begin_turn("s1", known=0, content="hello", parts=(TextPart("hello"),), title="hello")
    assert (ticket.user_seq, ticket.answer_seq, ticket.catch_up) == (1, 2, ())
    snapshot = await store.read_session("s1")
    assert snapshot is not None
    assert _summary(snapshot.messages) == [(1, "user", "hello", "complete"), (2, "assistant", "", "running")]
    assert snapshot.messages[0].parts == (TextPart("hello"),)
    assert snapshot.record.title == "hello"

    await store.end_turn(ticket, content="hi there", reasoning="easy", stop_reason="end_turn", outcome="complete")
    snapshot = await store.read_session("s1")
    assert snapshot is not None
    answer = snapshot.messages[1]
    assert (answer.content, answer.reasoning, answer.stop_reason, answer.outcome) == (
        "hi there",
        "easy",
        "end_turn",
        "complete",
    )
    assert answer.to_message().outcome == "complete"
    assert snapshot.record.updated_us > snapshot.record.created_us


async def test_the_title_comes_from_the_first_prompt_only(store: SessionStore) -> None:
    await store.create_session("s1", "/w")
    await _turn(store, "s1", "first", "a")
    await _turn(store, "s1", "second", "b", known=2)
    record = await store.get_session("s1")
    assert record is not None and record.title == "first"


@pytest.mark.parametrize(("outcome", "stop_reason"), [("failed", None), ("cancelled", "cancelled")])
async def test_a_cut_turn_keeps_what_was_streamed_marked(store: SessionStore, outcome: str, stop_reason: str) -> None:
    await store.create_session("s1", "/w")
    ticket = await store.begin_turn("s1", known=0, content="q", parts=(TextPart("q"),), title="q")
    await store.end_turn(ticket, content="half an ans", reasoning="hm", stop_reason=stop_reason, outcome=outcome)  # type: ignore[arg-type]
    snapshot = await store.read_session("s1")
    assert snapshot is not None
    answer = snapshot.messages[1]
    assert (answer.content, answer.reasoning, answer.stop_reason, answer.outcome) == (
        "half an ans",
        "hm",
        stop_reason,
        outcome,
    )


async def test_begin_turn_returns_what_the_caller_has_not_seen(store: SessionStore) -> None:
    await store.create_session("s1", "/w")
    await _turn(store, "s1", "one", "1")
    await _turn(store, "s1", "two", "2", known=2)
    ticket = await store.begin_turn("s1", known=1, content="three", parts=(TextPart("three"),), title="")
    assert [(m.seq, m.content) for m in ticket.catch_up] == [(2, "1"), (3, "two"), (4, "2")]
    assert (ticket.user_seq, ticket.answer_seq) == (5, 6)
    await store.end_turn(ticket, content="3", reasoning="", stop_reason="end_turn", outcome="complete")
    again = await store.begin_turn("s1", known=6, content="four", parts=(), title="")
    assert again.catch_up == () and again.since == 6


async def test_a_caller_that_knows_more_than_is_stored_gets_the_whole_history(store: SessionStore) -> None:
    await store.create_session("s1", "/w")
    await _turn(store, "s1", "one", "1")
    ticket = await store.begin_turn("s1", known=9, content="two", parts=(), title="")
    assert ticket.since == 0 and [m.content for m in ticket.catch_up] == ["one", "1"]


async def test_an_answer_whose_turn_is_gone_reads_interrupted_and_does_not_block(store: SessionStore) -> None:
    await store.create_session("s1", "/w")
    ticket = await store.begin_turn("s1", known=0, content="q", parts=(TextPart("q"),), title="q")
    store._live.discard(("s1", ticket.answer_seq))  # the turn died without ending (as after a crash)
    snapshot = await store.read_session("s1")
    assert snapshot is not None and snapshot.messages[1].outcome == "interrupted"
    assert snapshot.messages[1].final
    nxt = await store.begin_turn("s1", known=0, content="again", parts=(TextPart("again"),), title="")
    assert _summary(nxt.catch_up) == [(1, "user", "q", "complete"), (2, "assistant", "", "interrupted")]
    assert (nxt.user_seq, nxt.answer_seq) == (3, 4)


async def test_turns_of_unknown_sessions_are_refused(store: SessionStore) -> None:
    with pytest.raises(StoredSessionNotFoundError):
        await store.begin_turn("nope", known=0, content="q", parts=(), title="")
    with pytest.raises(StoredSessionNotFoundError):
        await store.fork_session("nope", "child", cwd="/w")


async def test_prompt_parts_round_trip(store: SessionStore) -> None:
    parts: tuple[PromptPart, ...] = (
        TextPart("look at these"),
        ResourceLinkPart("file:///a.py", "a.py", "the module"),
        ResourceLinkPart("file:///b.py", "b.py"),
        ResourcePart("file:///c.txt", "inline text", "text/plain"),
        ResourcePart("file:///d.bin", None),
        ImagePart("aGVsbG8=", "image/png"),
    )
    await store.create_session("s1", "/w")
    await store.begin_turn("s1", known=0, content="look at these", parts=parts, title="look")
    snapshot = await store.read_session("s1")
    assert snapshot is not None and snapshot.messages[0].parts == parts


async def test_list_is_newest_first_with_a_cwd_filter_and_keyset_pages(store: SessionStore) -> None:
    for i in range(7):
        await store.create_session(f"s{i}", "/a" if i % 2 == 0 else "/b")
    await _turn(store, "s2", "bump", "x")  # s2 becomes the most recently updated

    everything = await store.list_sessions()
    assert [r.session_id for r in everything.sessions] == ["s2", "s6", "s5", "s4", "s3", "s1", "s0"]
    assert everything.next_cursor is None

    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        page = await store.list_sessions(cwd="/a", cursor=cursor, limit=2)
        pages += 1
        seen += [r.session_id for r in page.sessions]
        assert all(r.cwd == "/a" for r in page.sessions)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == 2
    assert seen == ["s2", "s6", "s4", "s0"]

    exact = await store.list_sessions(cwd="/b", limit=3)
    assert len(exact.sessions) == 3 and exact.next_cursor is None  # a full last page has no cursor
    assert (await store.list_sessions(cwd="/nowhere")).sessions == ()


async def test_the_cwd_filter_compares_normalised_paths_and_keeps_them_as_given(store: SessionStore) -> None:
    await store.create_session("slash", "/work/project/")
    await store.create_session("plain", "/work/project")
    await store.create_session("other", "/work/project-2")
    for query in ("/work/project", "/work/project/", "/work//project", "/work/./project", "/work/x/../project"):
        page = await store.list_sessions(cwd=query)
        assert sorted(r.session_id for r in page.sessions) == ["plain", "slash"], query
    stored = {r.session_id: r.cwd for r in (await store.list_sessions(cwd="/work/project")).sessions}
    assert stored == {"slash": "/work/project/", "plain": "/work/project"}  # replies show the path as given


@pytest.mark.parametrize("cursor", ["", "%%%", "bm90IGpzb24", "WyJ2MiIsMSwicyJd", "WyJ2MSIsIjEiLCJzIl0", "W10"])
async def test_a_cursor_we_did_not_issue_is_invalid_params(store: SessionStore, cursor: str) -> None:
    with pytest.raises(InvalidCursorError):
        await store.list_sessions(cursor=cursor)


async def test_fork_copies_the_history_and_marks_a_pending_answer_interrupted(store: SessionStore) -> None:
    await store.create_session("src", "/w")
    await _turn(store, "src", "one", "1", reasoning="r")
    running = await store.begin_turn("src", known=2, content="two", parts=(TextPart("two"),), title="")
    child = await store.fork_session("src", "child", cwd="/elsewhere")
    assert (child.session_id, child.cwd, child.title) == ("child", "/elsewhere", "one")
    snapshot = await store.read_session("child")
    assert snapshot is not None
    assert _summary(snapshot.messages) == [
        (1, "user", "one", "complete"),
        (2, "assistant", "1", "complete"),
        (3, "user", "two", "complete"),
        (4, "assistant", "", "interrupted"),
    ]
    assert snapshot.messages[1].reasoning == "r"
    # The source's turn goes on and ends in the source only.
    await store.end_turn(running, content="2", reasoning="", stop_reason="end_turn", outcome="complete")
    source = await store.read_session("src")
    assert source is not None and source.messages[3].content == "2"
    child_again = await store.read_session("child")
    assert child_again is not None and child_again.messages[3].content == ""


async def test_additional_directories_are_stored_in_order_set_forked_and_listed(store: SessionStore) -> None:
    record = await store.create_session("s1", "/w", mode="default", additional_directories=("/lib", "/docs"))
    assert record.additional_directories == ("/lib", "/docs")
    assert await store.get_session("s1") == record
    plain = await store.create_session("s2", "/w")
    assert plain.additional_directories == ()
    await store.set_additional_directories("s1", ("/docs",))
    stored = await store.get_session("s1")
    assert stored is not None and stored.additional_directories == ("/docs",)
    await _turn(store, "s1", "one", "1")  # a turn touches the row: the directories stay
    snapshot = await store.read_session("s1")
    assert snapshot is not None and snapshot.record.additional_directories == ("/docs",)
    child = await store.fork_session("s1", "child", cwd="/w", additional_directories=("/other",))
    assert child.additional_directories == ("/other",)
    bare = await store.fork_session("s1", "bare", cwd="/w")  # a fork names its own list: none is none
    assert bare.additional_directories == ()
    listed = {r.session_id: r.additional_directories for r in (await store.list_sessions()).sessions}
    assert listed == {"s1": ("/docs",), "s2": (), "child": ("/other",), "bare": ()}
    await store.set_additional_directories("s1", ())
    cleared = await store.get_session("s1")
    assert cleared is not None and cleared.additional_directories == ()
    with pytest.raises(StoredSessionNotFoundError):
        await store.set_additional_directories("nope", ("/x",))


async def test_a_client_system_prompt_is_stored_read_listed_and_never_copied_by_the_store_fork(
    store: SessionStore,
) -> None:
    prompt = ClientPrompt("append", "Answer in French.")
    await store.create_session("s1", "/w")
    fresh = await store.get_session("s1")
    assert fresh is not None and fresh.system_prompt is None
    await store.set_system_prompt("s1", prompt)
    await _turn(store, "s1", "one", "1")  # a turn touches the row: the prompt stays
    snapshot = await store.read_session("s1")
    assert snapshot is not None and snapshot.record.system_prompt == prompt
    child = await store.fork_session("s1", "child", cwd="/w")  # the bridge writes the child's beside the fork
    assert child.system_prompt is None
    listed = {r.session_id: r.system_prompt for r in (await store.list_sessions()).sessions}
    assert listed == {"s1": prompt, "child": None}
    await store.set_system_prompt("s1", None)
    cleared = await store.get_session("s1")
    assert cleared is not None and cleared.system_prompt is None
    with pytest.raises(StoredSessionNotFoundError):
        await store.set_system_prompt("nope", prompt)


async def test_delete_removes_the_session_and_its_whole_history_and_nothing_else(store: SessionStore) -> None:
    await store.create_session("gone", "/w")
    await _turn(store, "gone", "one", "1")
    await store.record_compaction("gone", Compaction(2, "summary"))
    dead = await store.begin_turn("gone", known=2, content="two", parts=(TextPart("two"),), title="")
    await store.record_steps(dead, (FIRST,))  # a journal row of a turn that then died (as after a crash)
    store._live.discard(("gone", dead.answer_seq))
    await store.create_session("kept", "/w")
    await _turn(store, "kept", "k", "K")
    await store.fork_session("gone", "child", cwd="/w")

    await store.delete_session("gone")

    assert await store.get_session("gone") is None and await store.read_session("gone") is None
    assert sorted(r.session_id for r in (await store.list_sessions()).sessions) == ["child", "kept"]
    kept = await store.read_session("kept")
    assert kept is not None and _summary(kept.messages) == [
        (1, "user", "k", "complete"),
        (2, "assistant", "K", "complete"),
    ]
    child = await store.read_session("child")  # a fork owns its copy
    assert child is not None and len(child.messages) == 4 and child.compaction == Compaction(2, "summary")
    # Nothing of it is left behind: the same id starts empty, with no compaction and no journaled steps.
    await store.create_session("gone", "/w")
    await _turn(store, "gone", "a", "b")
    again = await store.begin_turn("gone", known=2, content="c", parts=(), title="")
    fresh = await store.read_session("gone")
    assert fresh is not None and fresh.compaction is None and again.compaction is None
    assert [(m.seq, m.content, m.steps) for m in fresh.messages] == [
        (1, "a", ()),
        (2, "b", ()),
        (3, "c", ()),
        (4, "", ()),
    ]


async def test_delete_of_an_unknown_session_is_refused(store: SessionStore) -> None:
    with pytest.raises(StoredSessionNotFoundError):
        await store.delete_session("nope")
    await store.create_session("s", "/w")
    await store.delete_session("s")
    with pytest.raises(StoredSessionNotFoundError):
        await store.delete_session("s")  # a second delete finds nothing


async def test_delete_of_a_session_whose_turn_runs_is_refused_and_removes_nothing(store: SessionStore) -> None:
    await store.create_session("s", "/w")
    await _turn(store, "s", "one", "1")
    running = await store.begin_turn("s", known=2, content="two", parts=(TextPart("two"),), title="")
    with pytest.raises(SessionBusyError):
        await store.delete_session("s")
    snapshot = await store.read_session("s")
    assert snapshot is not None and len(snapshot.messages) == 4
    await store.end_turn(running, content="2", reasoning="", stop_reason="end_turn", outcome="complete")
    await store.delete_session("s")  # the turn ended: nothing holds it
    assert await store.get_session("s") is None


async def test_lifecycle(tmp_path: Path) -> None:
    for store in (SqliteSessionStore(tmp_path / "db" / "sessions.db"), MemorySessionStore()):
        with pytest.raises(RuntimeError, match="not open"):
            await store.get_session("s")
        await store.open()
        with pytest.raises(RuntimeError, match="already open"):
            await store.open()
        await store.create_session("s", "/w")
        await store.aclose()
        await store.aclose()  # idempotent
        assert "closed" in repr(store)
        with pytest.raises(StoreClosedError):
            await store.get_session("s")
        with pytest.raises(StoreClosedError):
            await store.open()  # never reopened


@pytest.mark.parametrize(
    "text",
    [
        "it's a 'quoted' \"text\"; DROP TABLE sessions; --",
        "back\\slash \\' \\\\ E'\\n' %s %(x)s $1 ? $$ $tag$",
        "naïve — 日本語 \U0001f600 \t tab\r\nline",
    ],
)
async def test_text_is_stored_verbatim_whatever_it_holds(store: SessionStore, text: str) -> None:
    await store.create_session(text, text, mode=text)
    await store.set_model(text, text)
    ticket = await store.begin_turn(text, known=0, content=text, parts=(TextPart(text),), title=text)
    await store.end_turn(ticket, content=text, reasoning=text, stop_reason="end_turn", outcome="complete")
    snapshot = await store.read_session(text)
    assert snapshot is not None
    record = snapshot.record
    assert (record.session_id, record.cwd, record.title, record.mode, record.model) == (text, text, text, text, text)
    assert [(m.content, m.parts) for m in snapshot.messages] == [(text, (TextPart(text),)), (text, ())]
    assert snapshot.messages[1].reasoning == text
    assert [s.session_id for s in (await store.list_sessions(cwd=text)).sessions] == [text]
