"""One owner per live session with PostgreSQL: two stores on one database (two connections, as two processes would
hold) contend for a session's advisory lock; the loser gets ``session_busy`` naming the holder's instance id; detach,
close, or the holder's connection dying lets the other take it at once. SQLite and memory keep sharing by turns."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import jsonschema
import psycopg
import pytest

from acp_server.bridge import SessionBridge
from acp_server.domain import Emit, Prompt, StopReason
from acp_server.rpc import to_rpc_error
from acp_server.store import MemorySessionStore, SessionBusyError, SessionStore, SqliteSessionStore
from acp_server.store._pg_owners import session_lock_key
from acp_server.store._postgres import MIGRATIONS, PG_SCHEMA_VERSION, PostgresSessionStore
from acp_server.system_prompts import ClientPrompt

pytestmark = pytest.mark.anyio

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "schemas" / "session_busy.json").read_text())
INSTANCE = re.compile(r"^[A-Za-z0-9.-]+-\d+-[0-9a-f]{8}$")


async def _answer(session: object, prompt: Prompt, emit: Emit, client: object, /) -> StopReason:
    return "end_turn"


@pytest.fixture
async def two(pg_dsn: str) -> AsyncIterator[tuple[PostgresSessionStore, PostgresSessionStore]]:
    async with PostgresSessionStore(pg_dsn) as first, PostgresSessionStore(pg_dsn) as second:
        yield first, second


async def test_the_second_claim_is_busy_with_the_holders_instance_until_it_releases(
    two: tuple[PostgresSessionStore, PostgresSessionStore],
) -> None:
    first, second = two
    assert INSTANCE.match(first.instance) and first.instance != second.instance
    await first.create_session("s1", "/w")
    await first.claim("s1")
    await first.claim("s1")  # idempotent
    with pytest.raises(SessionBusyError) as busy:
        await second.claim("s1")
    assert busy.value.instance == first.instance and busy.value.retryable
    assert busy.value.details() == {"sessionId": "s1", "pid": None, "instance": first.instance}
    wire = to_rpc_error(busy.value)
    assert wire.code == -32603 and wire.data == {
        "errorKind": "session_busy",
        "sessionId": "s1",
        "pid": None,
        "instance": first.instance,
        "retryable": True,
    }
    jsonschema.Draft202012Validator(SCHEMA).validate(wire.data)
    assert first.instance in str(busy.value)
    await second.claim("s2")  # another session is free
    await first.release("s1")
    await second.claim("s1")
    with pytest.raises(SessionBusyError) as busy:
        await first.claim("s1")
    assert busy.value.instance == second.instance


async def test_closing_the_holder_frees_its_sessions_at_once(pg_dsn: str) -> None:
    async with PostgresSessionStore(pg_dsn) as other:
        holder = PostgresSessionStore(pg_dsn)
        async with holder:
            await holder.claim("s1")
            with pytest.raises(SessionBusyError):
                await other.claim("s1")
        await other.claim("s1")
        with psycopg.connect(pg_dsn) as conn:  # only the live owner is named
            rows = conn.execute("SELECT session_id, instance FROM session_owners").fetchall()
        assert rows == [("s1", other.instance)]


async def test_a_dead_holders_connection_frees_its_sessions_at_once(pg_dsn: str) -> None:
    """The server ends a dead process's backend, and its locks with it: here that backend is ended from outside."""
    async with PostgresSessionStore(pg_dsn) as holder, PostgresSessionStore(pg_dsn) as other:
        await holder.claim("s1")
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            ended = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                (holder.instance,),
            ).fetchall()
            assert ended == [(True,)]
        await other.claim("s1")  # the stale row named the dead holder; the lock decides, and it is free


async def test_two_bridges_one_owner_per_session(two: tuple[PostgresSessionStore, PostgresSessionStore]) -> None:
    first, second = two
    async with SessionBridge(_answer, store=first) as a, SessionBridge(_answer, store=second) as b:
        entry = await a.open_session("/w")
        with pytest.raises(SessionBusyError) as busy:
            await b.load_session(entry.session_id)
        assert busy.value.instance == first.instance
        with pytest.raises(SessionBusyError):
            await b.resume_session(entry.session_id)
        assert b.sessions == ()
        child = await a.fork(entry.session_id)
        with pytest.raises(SessionBusyError):
            await b.resume_session(child.session_id)
        await a.close_session(entry.session_id)
        loaded, _ = await b.load_session(entry.session_id)
        with pytest.raises(SessionBusyError) as busy:
            await a.resume_session(entry.session_id)
        assert busy.value.instance == second.instance
        assert loaded.session_id == entry.session_id
    async with PostgresSessionStore(first._dsn) as third, SessionBridge(_answer, store=third) as c:
        await c.resume_session(child.session_id)  # the closed bridges released everything they held
        await c.resume_session(entry.session_id)


async def test_a_session_another_process_holds_is_not_deleted_under_it(
    two: tuple[PostgresSessionStore, PostgresSessionStore],
) -> None:
    first, second = two
    async with SessionBridge(_answer, store=first) as a, SessionBridge(_answer, store=second) as b:
        entry = await a.open_session("/w")
        with pytest.raises(SessionBusyError) as busy:
            await b.delete_session(entry.session_id)
        assert busy.value.instance == first.instance
        assert await second.get_session(entry.session_id) is not None  # nothing deleted
        await a.close_session(entry.session_id)
        await b.delete_session(entry.session_id)
        assert await second.get_session(entry.session_id) is None
        await first.claim(entry.session_id)  # the delete left nothing claimed


async def test_an_unknown_session_is_not_left_claimed(
    two: tuple[PostgresSessionStore, PostgresSessionStore],
) -> None:
    first, second = two
    async with SessionBridge(_answer, store=first) as a:
        with pytest.raises(Exception, match="not found"):
            await a.load_session("nope")
    await second.claim("nope")


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_sqlite_and_memory_claim_nothing(kind: str, tmp_path: Path) -> None:
    def make() -> SessionStore:
        return SqliteSessionStore(tmp_path / "sessions.db") if kind == "sqlite" else MemorySessionStore()

    async with make() as first, make() as second:
        await first.claim("s1")
        await second.claim("s1")
        await first.release("s1")
        await second.release("never-claimed")


async def test_a_version_1_database_is_upgraded_and_keeps_its_sessions(pg_dsn: str) -> None:
    assert PG_SCHEMA_VERSION == 6
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # a database made by the previous release
        conn.execute("CREATE TABLE acp_schema (version INTEGER NOT NULL)")
        for statement in MIGRATIONS[0]:
            conn.execute(statement)
        conn.execute("INSERT INTO acp_schema (version) VALUES (1)")
        conn.execute("INSERT INTO sessions (id, cwd, created_us, updated_us) VALUES ('old', '/w', 1, 1)")
    async with PostgresSessionStore(pg_dsn) as store:
        assert store.problem is None
        assert (await store.get_session("old")) is not None
        await store.claim("old")
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT version FROM acp_schema").fetchall() == [(PG_SCHEMA_VERSION,)]


async def test_a_version_2_database_is_upgraded_and_its_sessions_have_no_additional_directories(
    pg_dsn: str,
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # a database made by the release before this one
        conn.execute("CREATE TABLE acp_schema (version INTEGER NOT NULL)")
        for step in MIGRATIONS[:2]:
            for statement in step:
                conn.execute(statement)
        conn.execute("INSERT INTO acp_schema (version) VALUES (2)")
        conn.execute("INSERT INTO sessions (id, cwd, created_us, updated_us) VALUES ('old', '/w', 1, 1)")
    async with PostgresSessionStore(pg_dsn) as store:
        assert store.problem is None
        old = await store.get_session("old")
        assert old is not None and old.additional_directories == ()
        await store.set_additional_directories("old", ("/x",))
        old = await store.get_session("old")
        assert old is not None and old.additional_directories == ("/x",)
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT version FROM acp_schema").fetchall() == [(PG_SCHEMA_VERSION,)]


async def test_a_version_4_database_is_upgraded_and_its_sessions_store_a_client_system_prompt(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # a database made by the release before this one
        conn.execute("CREATE TABLE acp_schema (version INTEGER NOT NULL)")
        for step in MIGRATIONS[:4]:
            for statement in step:
                conn.execute(statement)
        conn.execute("INSERT INTO acp_schema (version) VALUES (4)")
        conn.execute("INSERT INTO sessions (id, cwd, created_us, updated_us) VALUES ('old', '/w', 1, 1)")
    async with PostgresSessionStore(pg_dsn) as store:
        assert store.problem is None
        old = await store.get_session("old")
        assert old is not None and old.system_prompt is None
        await store.set_system_prompt("old", ClientPrompt("override", "Review only."))
    async with PostgresSessionStore(pg_dsn) as store:
        old = await store.get_session("old")
        assert old is not None and old.system_prompt == ClientPrompt("override", "Review only.")
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT version FROM acp_schema").fetchall() == [(PG_SCHEMA_VERSION,)]


async def test_a_version_5_database_is_upgraded_and_stores_subagent_children(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # a database made by the release before this one
        conn.execute("CREATE TABLE acp_schema (version INTEGER NOT NULL)")
        for step in MIGRATIONS[:5]:
            for statement in step:
                conn.execute(statement)
        conn.execute("INSERT INTO acp_schema (version) VALUES (5)")
        conn.execute("INSERT INTO sessions (id, cwd, created_us, updated_us) VALUES ('old', '/w', 1, 1)")
    async with PostgresSessionStore(pg_dsn) as store:
        assert store.problem is None
        old = await store.get_session("old")
        assert old is not None and old.task_of is None
        await store.create_session("kid", "/w", task_of="old")
    async with PostgresSessionStore(pg_dsn) as store:
        assert [r.session_id for r in await store.list_children("old")] == ["kid"]
        assert [r.session_id for r in (await store.list_sessions()).sessions] == ["old"]
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT version FROM acp_schema").fetchall() == [(PG_SCHEMA_VERSION,)]


def test_lock_keys_are_stable_signed_64_bit() -> None:
    key = session_lock_key("0123456789abcdef")
    assert key == session_lock_key("0123456789abcdef") and -(2**63) <= key < 2**63
    assert key != session_lock_key("0123456789abcdeg")


class _SlowFork(PostgresSessionStore):
    """A real store whose ``fork_session`` waits for the test (to close the source while a fork is being stored)."""

    def __init__(self, dsn: str) -> None:
        super().__init__(dsn)
        import anyio

        self.forking, self.go_on = anyio.Event(), anyio.Event()

    async def fork_session(self, source_id: str, session_id: str, **kwargs: Any) -> Any:
        record = await super().fork_session(source_id, session_id, **kwargs)
        self.forking.set()
        await self.go_on.wait()
        return record


async def test_a_fork_whose_source_closes_meanwhile_leaves_nothing_claimed(pg_dsn: str) -> None:
    import anyio

    from acp_server.bridge import SessionClosedError

    async with _SlowFork(pg_dsn) as store, SessionBridge(_answer, store=store) as bridge:
        entry = await bridge.open_session("/w")
        failed: list[BaseException] = []

        async def fork() -> None:
            try:
                await bridge.fork(entry.session_id)
            except SessionClosedError as exc:
                failed.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(fork)
            await store.forking.wait()
            await bridge.close_session(entry.session_id)
            store.go_on.set()
        assert len(failed) == 1
        assert store._owners.held == frozenset()  # the child was stored and claimed, then let go: never attached
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM session_owners").fetchone() == (0,)
