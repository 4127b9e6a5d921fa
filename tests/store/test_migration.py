"""A database made by the version 1 code (``data/v1.sqlite3``, see ``data/make_v1.py``) upgrades in place: every
message reads exactly as before (no steps, no mode), new turns with steps and modes work on it, two processes may
open it at once, and a file of a newer version than ours is still refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from acp_server.domain import ResourceLinkPart, TextPart
from acp_server.store import SCHEMA_VERSION, SqliteSessionStore, StoredMessage, _sqlite

from ._support import FIRST, SECOND, copy_of

pytestmark = pytest.mark.anyio

FIXTURE = Path(__file__).parent / "data" / "v1.sqlite3"
TITLE = "Explain café ☕"

_ALPHA = (
    StoredMessage(
        1, "user", TITLE, parts=(TextPart(TITLE), ResourceLinkPart("file:///work/project/a.py", "a.py", "the module"))
    ),
    StoredMessage(2, "assistant", "It is a drink.", "Think.", stop_reason="end_turn"),
    StoredMessage(3, "user", "more", parts=(TextPart("more"),)),
    StoredMessage(4, "assistant", "half", outcome="failed"),
    StoredMessage(5, "user", "stop", parts=(TextPart("stop"),)),
    StoredMessage(6, "assistant", "cut", "r", stop_reason="cancelled", outcome="cancelled"),
)
EXPECTED: dict[str, tuple[str, str, tuple[StoredMessage, ...]]] = {  # newest first, as listed: (cwd, title, history)
    "gamma": ("/work/fork", TITLE, _ALPHA),
    "beta": (
        "/work/other",
        "one",
        (
            StoredMessage(1, "user", "one", parts=(TextPart("one"),)),
            StoredMessage(2, "assistant", "1", stop_reason="end_turn"),
            StoredMessage(3, "user", "two", parts=(TextPart("two"),)),
            StoredMessage(4, "assistant", "", outcome="interrupted"),  # stored so by the turn that took it over
            StoredMessage(5, "user", "three", parts=(TextPart("three"),)),
            StoredMessage(6, "assistant", "3", stop_reason="max_tokens"),
        ),
    ),
    "delta": (
        "/work/other",
        "lost",
        (
            StoredMessage(1, "user", "lost", parts=(TextPart("lost"),)),
            StoredMessage(2, "assistant", "", outcome="interrupted"),  # still pending, its process killed
        ),
    ),
    "alpha": ("/work/project", TITLE, _ALPHA),
}


@pytest.fixture
def old_db(tmp_path: Path) -> Path:
    """A copy of the version 1 file."""
    return copy_of(FIXTURE, tmp_path)


def _columns(raw: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in raw.execute(f"PRAGMA table_info({table})")]


def test_the_fixture_is_a_version_1_database_of_ours(old_db: Path) -> None:
    with sqlite3.connect(old_db) as raw:  # a copy: even a read of a WAL database leaves -wal and -shm files
        assert raw.execute("PRAGMA user_version").fetchone() == (1,)
        assert raw.execute("PRAGMA application_id").fetchone() == (_sqlite.APPLICATION_ID,)
        assert "steps" not in _columns(raw, "messages") and "mode" not in _columns(raw, "sessions")
        assert raw.execute("SELECT count(*) FROM messages WHERE outcome = 'pending'").fetchone() == (1,)
    assert SCHEMA_VERSION >= 3  # the next versions have their own fixtures (data/make_v2.py, make_v3.py)


async def test_a_version_1_database_upgrades_in_place_and_reads_as_before(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        assert store.problem is None
        page = await store.list_sessions()
        assert [r.session_id for r in page.sessions] == list(EXPECTED)
        for record in page.sessions:
            cwd, title, history = EXPECTED[record.session_id]
            assert (record.cwd, record.title, record.mode, record.model) == (cwd, title, None, None)
            snapshot = await store.read_session(record.session_id)
            assert snapshot is not None and snapshot.record == record
            assert snapshot.messages == history
            assert all(m.steps == () for m in snapshot.messages)
        assert [r.session_id for r in (await store.list_sessions(cwd="/work/other")).sessions] == ["beta", "delta"]
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert _columns(raw, "messages")[-2:] == ["steps", "usage"]
        assert _columns(raw, "sessions")[-5:] == ["mode", "model", "additional_directories", "system_prompt", "task_of"]
        assert raw.execute("SELECT count(*) FROM messages WHERE steps IS NOT NULL").fetchone() == (0,)


async def test_new_turns_with_steps_and_modes_work_on_an_upgraded_database(old_db: Path) -> None:
    async with SqliteSessionStore(old_db) as store:
        ticket = await store.begin_turn("delta", known=2, content="retry", parts=(TextPart("retry"),), title="")
        assert (ticket.user_seq, ticket.answer_seq, ticket.catch_up) == (3, 4, ())
        await store.record_steps(ticket, (FIRST,))
        await store.end_turn(
            ticket, content="done", reasoning="", stop_reason="end_turn", outcome="complete", steps=(FIRST, SECOND)
        )
        await store.set_mode("alpha", "read-only")
        child = await store.fork_session("delta", "epsilon", cwd="/work/other")
        assert child.mode is None
    async with SqliteSessionStore(old_db) as store:
        for session_id in ("delta", "epsilon"):
            snapshot = await store.read_session(session_id)
            assert snapshot is not None
            assert snapshot.messages[:2] == EXPECTED["delta"][2]  # the old turn as it was (taken over: interrupted)
            assert [(m.content, m.outcome, m.steps) for m in snapshot.messages[2:]] == [
                ("retry", "complete", ()),
                ("done", "complete", (FIRST, SECOND)),
            ]
        alpha = await store.get_session("alpha")
        assert alpha is not None and alpha.mode == "read-only"


async def test_two_processes_opening_a_version_1_database_at_once_migrate_it_once(old_db: Path) -> None:
    stores = [SqliteSessionStore(old_db) for _ in range(4)]  # each opens in its own worker thread
    async with anyio.create_task_group() as tg:
        for store in stores:
            tg.start_soon(store.open)
    try:
        assert [store.problem for store in stores] == [None] * 4
        for store in stores:
            snapshot = await store.read_session("alpha")
            assert snapshot is not None and snapshot.messages == _ALPHA
    finally:
        for store in stores:
            await store.aclose()
    with sqlite3.connect(old_db) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert _columns(raw, "messages").count("steps") == 1 and _columns(raw, "sessions").count("mode") == 1


async def test_a_database_newer_than_this_code_is_refused_and_left_as_it_was(old_db: Path) -> None:
    async with SqliteSessionStore(old_db):
        pass  # upgraded to ours
    with sqlite3.connect(old_db) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        raw.execute("ALTER TABLE messages ADD COLUMN from_the_future TEXT")
    before = await anyio.Path(old_db).read_bytes()
    async with SqliteSessionStore(old_db) as store:
        assert store.problem is not None and store.problem.reason == "schema_too_new"
    assert await anyio.Path(old_db).read_bytes() == before
