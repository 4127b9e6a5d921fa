"""The SQLite store: file format and pragmas, forward migrations, files it must not touch, threads, locking,
two stores (as two processes would) on one file."""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from acp_server.domain import TextPart
from acp_server.store import (
    SCHEMA_VERSION,
    SessionBusyError,
    SqliteSessionStore,
    StoreBusyError,
    StoreIOError,
    StoreUnavailableError,
    _schema,
    _sqlite,
)

pytestmark = pytest.mark.anyio


def _db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "sessions.db"


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def test_a_new_database_is_ours_in_wal_mode_at_the_current_version(tmp_path: Path) -> None:
    path = _db(tmp_path)
    async with SqliteSessionStore(path, busy_timeout_ms=1234) as store:
        assert store.problem is None
        conn = store._conn
        assert conn is not None
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert conn.execute("PRAGMA foreign_keys").fetchone() == (1,)
        assert conn.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (1234,)
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA application_id").fetchone() == (_sqlite.APPLICATION_ID,)
    assert path.parent.stat().st_mode & 0o777 == 0o700


async def test_sessions_survive_a_reopen(tmp_path: Path) -> None:
    async with SqliteSessionStore(_db(tmp_path)) as store:
        await store.create_session("s1", "/w")
        ticket = await store.begin_turn("s1", known=0, content="q", parts=(TextPart("q"),), title="q")
        await store.end_turn(ticket, content="a", reasoning="", stop_reason="end_turn", outcome="complete")
    async with SqliteSessionStore(_db(tmp_path)) as store:
        snapshot = await store.read_session("s1")
        assert snapshot is not None and [m.content for m in snapshot.messages] == ["q", "a"]


async def test_an_empty_file_becomes_a_new_database(tmp_path: Path) -> None:
    path = _db(tmp_path)
    path.parent.mkdir()
    path.write_bytes(b"")
    async with SqliteSessionStore(path) as store:
        assert store.problem is None
        await store.create_session("s1", "/w")


def _garbage(path: Path) -> str:
    path.write_bytes(b"\x00\x01 definitely not sqlite " * 500)
    return "corrupt"


def _newer(path: Path) -> str:
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA application_id = {_sqlite.APPLICATION_ID}")
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        raw.execute("CREATE TABLE future (x)")
    return "schema_too_new"


def _foreign(path: Path) -> str:
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE bookmarks (url TEXT)")
        raw.execute("INSERT INTO bookmarks VALUES ('https://example.org')")
    return "not_ours"


def _foreign_versioned(path: Path) -> str:
    with sqlite3.connect(path) as raw:
        raw.execute("PRAGMA user_version = 1")
    return "not_ours"


def _tables_missing(path: Path) -> str:
    with sqlite3.connect(path) as raw:
        raw.execute(f"PRAGMA application_id = {_sqlite.APPLICATION_ID}")
        raw.execute("PRAGMA user_version = 1")
        raw.execute("CREATE TABLE sessions (id)")
    return "corrupt"


def _truncated(path: Path) -> str:
    with sqlite3.connect(path) as raw:
        raw.execute("CREATE TABLE t (x)")
        raw.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
    data = path.read_bytes()
    path.write_bytes(data[:100] + b"\xff" * (len(data) - 100))  # header kept, every page after it destroyed
    return "corrupt"


@pytest.mark.parametrize("damage", [_garbage, _newer, _foreign, _foreign_versioned, _tables_missing, _truncated])
async def test_a_file_it_cannot_use_is_reported_and_never_touched(
    tmp_path: Path, damage: object, caplog: pytest.LogCaptureFixture
) -> None:
    path = _db(tmp_path)
    path.parent.mkdir()
    reason = damage(path)  # type: ignore[operator]
    before, files = path.read_bytes(), _files(path.parent)
    store = SqliteSessionStore(path)
    with caplog.at_level(logging.ERROR, logger="acp_server.store"):
        async with store:  # opening never raises for a bad file
            problem = store.problem
            assert isinstance(problem, StoreUnavailableError)
            assert problem.reason == reason and problem.path == str(path)
            for call in (
                store.create_session("s", "/w"),
                store.get_session("s"),
                store.read_session("s"),
                store.list_sessions(),
                store.fork_session("s", "t", cwd="/w"),
                store.begin_turn("s", known=0, content="", parts=(), title=""),
            ):
                with pytest.raises(StoreUnavailableError) as raised:
                    await call
                assert raised.value is problem
    assert [r.getMessage() for r in caplog.records] == [str(problem)]
    assert path.read_bytes() == before
    assert _files(path.parent) == files


async def test_a_state_dir_that_cannot_be_created_is_reported(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("a file where the directory should be")
    async with SqliteSessionStore(tmp_path / "blocker" / "state" / "sessions.db") as store:
        assert store.problem is not None and store.problem.reason == "cannot_open"
        assert "cannot create the directory" in str(store.problem)


async def test_a_directory_in_place_of_the_file_is_reported(tmp_path: Path) -> None:
    _db(tmp_path).mkdir(parents=True)
    async with SqliteSessionStore(_db(tmp_path)) as store:
        assert store.problem is not None and store.problem.reason == "cannot_open"


async def test_forward_migration_runs_once_in_one_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _db(tmp_path)
    async with SqliteSessionStore(path) as store:
        await store.create_session("kept", "/w")

    failing = (*_schema.MIGRATIONS, ("CREATE TABLE extra (x)", "CREATE TABLE sessions (again)"))
    monkeypatch.setattr(_schema, "MIGRATIONS", failing)
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", len(failing))
    async with SqliteSessionStore(path) as store:
        assert store.problem is not None and store.problem.reason == "cannot_open"
    with sqlite3.connect(path) as raw:  # rolled back: still the current version, no half-applied step
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("SELECT name FROM sqlite_master WHERE name = 'extra'").fetchall() == []

    current = _schema.MIGRATIONS[:SCHEMA_VERSION]
    working = (*current, ("CREATE TABLE extra (x)", "ALTER TABLE sessions ADD COLUMN pinned INTEGER"))
    monkeypatch.setattr(_schema, "MIGRATIONS", working)
    monkeypatch.setattr(_schema, "SCHEMA_VERSION", len(working))
    async with SqliteSessionStore(path) as store:
        assert store.problem is None
        assert await store.get_session("kept") is not None
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,)
        assert raw.execute("SELECT name FROM sqlite_master WHERE name = 'extra'").fetchall() == [("extra",)]


async def test_sqlite_never_runs_on_the_event_loop_thread(tmp_path: Path) -> None:
    loop_thread = threading.get_ident()
    threads: set[int] = set()
    async with SqliteSessionStore(_db(tmp_path)) as store:
        assert store._conn is not None
        store._conn.set_trace_callback(lambda _statement: threads.add(threading.get_ident()))
        await store.create_session("s1", "/w")
        ticket = await store.begin_turn("s1", known=0, content="q", parts=(), title="q")
        await store.end_turn(ticket, content="a", reasoning="", stop_reason="end_turn", outcome="complete")
        await store.read_session("s1")
        await store.list_sessions()
    assert threads and loop_thread not in threads


async def test_two_stores_on_one_file_write_concurrently_and_both_histories_are_intact(tmp_path: Path) -> None:
    turns = 40
    async with SqliteSessionStore(_db(tmp_path)) as a, SqliteSessionStore(_db(tmp_path)) as b:

        async def converse(store: SqliteSessionStore, name: str) -> None:
            await store.create_session(name, "/w")
            for i in range(turns):
                ticket = await store.begin_turn(name, known=2 * i, content=f"{name}{i}", parts=(), title=name)
                assert ticket.catch_up == ()
                await anyio.lowlevel.checkpoint()
                await store.end_turn(
                    ticket, content=f"re {name}{i}", reasoning="", stop_reason="end_turn", outcome="complete"
                )

        async with anyio.create_task_group() as tg:
            tg.start_soon(converse, a, "A")
            tg.start_soon(converse, b, "B")
        for store, name in ((b, "A"), (a, "B")):  # each reads what the other wrote
            snapshot = await store.read_session(name)
            assert snapshot is not None
            assert [m.content for m in snapshot.messages] == [
                text for i in range(turns) for text in (f"{name}{i}", f"re {name}{i}")
            ]
            assert [m.seq for m in snapshot.messages] == list(range(1, 2 * turns + 1))
    with sqlite3.connect(_db(tmp_path)) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)


async def test_a_turn_running_in_another_live_store_makes_the_session_busy(tmp_path: Path) -> None:
    async with SqliteSessionStore(_db(tmp_path)) as a, SqliteSessionStore(_db(tmp_path)) as b:
        await a.create_session("s", "/w")
        ticket = await a.begin_turn("s", known=0, content="from a", parts=(), title="")
        snapshot = await b.read_session("s")
        assert snapshot is not None and [m.outcome for m in snapshot.messages] == ["complete", "running"]
        with pytest.raises(SessionBusyError) as busy:
            await b.begin_turn("s", known=0, content="from b", parts=(), title="")
        assert busy.value.retryable
        await a.end_turn(ticket, content="done", reasoning="", stop_reason="end_turn", outcome="complete")
        nxt = await b.begin_turn("s", known=0, content="from b", parts=(), title="")
        assert [m.content for m in nxt.catch_up] == ["from a", "done"]


async def test_a_dead_writer_does_not_block_and_a_late_end_is_refused(tmp_path: Path) -> None:
    async with SqliteSessionStore(_db(tmp_path)) as a, SqliteSessionStore(_db(tmp_path)) as b:
        a.owner = "some-host-that-is-not-this-one|1|1|dead"
        await a.create_session("s", "/w")
        ticket = await a.begin_turn("s", known=0, content="lost", parts=(), title="")
        snapshot = await b.read_session("s")
        assert snapshot is not None and snapshot.messages[1].outcome == "interrupted"
        await b.begin_turn("s", known=0, content="next", parts=(), title="")  # takes over: marks it interrupted
        with pytest.raises(StoreIOError, match="taken over"):
            await a.end_turn(ticket, content="too late", reasoning="", stop_reason="end_turn", outcome="complete")
        assert not a._live


async def test_a_write_lock_held_past_busy_timeout_is_store_busy(tmp_path: Path) -> None:
    async with SqliteSessionStore(_db(tmp_path), busy_timeout_ms=50) as store:
        holder = sqlite3.connect(_db(tmp_path), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(StoreBusyError) as busy:
                await store.create_session("s", "/w")
            assert busy.value.retryable
            assert await store.list_sessions() is not None  # WAL: reads go on while another process writes
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        await store.create_session("s", "/w")  # nothing was half-written
        assert await store.get_session("s") is not None


async def test_sqlite_errors_are_mapped_once(tmp_path: Path) -> None:
    async with SqliteSessionStore(_db(tmp_path)) as store:
        io = sqlite3.OperationalError("database or disk is full")
        io.sqlite_errorname = "SQLITE_FULL"  # type: ignore[attr-defined]
        assert isinstance(store._map_error(io), StoreIOError)
        assert store.problem is None
        corrupt = sqlite3.DatabaseError("database disk image is malformed")
        corrupt.sqlite_errorname = "SQLITE_CORRUPT"  # type: ignore[attr-defined]
        mapped = store._map_error(corrupt)
        assert isinstance(mapped, StoreUnavailableError) and mapped.reason == "corrupt"
        assert store.problem is mapped  # for good: every later call fails fast
        with pytest.raises(StoreUnavailableError):
            await store.list_sessions()


async def test_a_delete_that_fails_half_way_removes_nothing(tmp_path: Path) -> None:
    async with SqliteSessionStore(_db(tmp_path)) as store:
        await store.create_session("s", "/w")
        ticket = await store.begin_turn("s", known=0, content="q", parts=(TextPart("q"),), title="q")
        await store.end_turn(ticket, content="a", reasoning="", stop_reason="end_turn", outcome="complete")
        conn = store._conn
        assert conn is not None  # the messages go first, then the session row refuses: one transaction
        conn.execute("CREATE TEMP TRIGGER refuse BEFORE DELETE ON sessions BEGIN SELECT RAISE(ABORT, 'no'); END")
        with pytest.raises(StoreIOError):
            await store.delete_session("s")
        snapshot = await store.read_session("s")
        assert snapshot is not None and [m.content for m in snapshot.messages] == ["q", "a"]
